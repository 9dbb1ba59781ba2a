"""The KL term, exactly, on a categorical policy: regularised optima, each estimator's gradient.

The regularised optimum in both KL directions, and what each KL estimator contributes to the
gradient in expectation.

Lecture §4 (the objective E[r] − β·KL(π‖π_ref)), §6 (DPO's π* ∝ π_ref·exp(r/β)), §9 and §12
(KL estimators and where the penalty is placed). The per-sample estimators k1/k2/k3 have one
home, ``course_lib.formulas.policy_loss.kl_estimate``; this module only takes their exact expectations.

The same KL measured on the tiny GPT's samples is ``evaluation.reference_kl``.

Simplifications, said out loud: one prompt and K complete answers, so that a whole sequence is a
single categorical draw and every expectation is a finite sum (no sampling); the policy is a
softmax with one logit per answer (the "tabular" policy, which can represent any distribution
with full support). Real policies share parameters across prompts and answers, and the trainer
only ever sees sampled answers — the expectations computed here are what those samples average to.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from course_lib._validate import choice, finite_tensor, output, positive_scalar, tensors
from course_lib.formulas.policy_loss import KL_ESTIMATORS, kl_estimate

PLACEMENTS = ("loss", "reward")
DIRECTIONS = ("reverse", "forward")


def _probs(x, name: str) -> tuple[torch.Tensor, bool]:
    p, as_tensor = finite_tensor(x, name)
    if p.ndim == 0 or p.shape[-1] < 2:
        raise ValueError(f"{name} must be a probability vector over at least 2 answers (last axis); got shape "
                         f"{tuple(p.shape)}")
    if not bool((p.detach() >= 0).all()):
        raise ValueError(f"{name} must be non-negative (a probability vector)")
    sums = p.detach().double().sum(-1)
    if not bool(((sums - 1).abs() <= 1e-6).all()):
        raise ValueError(f"{name} must sum to 1 over its last axis; got sums {sums.flatten()[:4].tolist()}")
    return p, as_tensor


def categorical_kl(p, q):
    """KL(p ‖ q) = Σ_y p(y)·log(p(y)/q(y)) over the last axis (0·log 0 = 0; +inf where q = 0 < p).

    Not symmetric: ``categorical_kl(pi, ref)`` is the reverse KL the RLHF objective penalises,
    ``categorical_kl(ref, pi)`` the forward KL. Tensor in → tensor out with autograd, so its
    gradient with respect to a policy's logits is the exact gradient of the true KL.
    """
    p_t, p_tensor = _probs(p, "p")
    q_t, q_tensor = _probs(q, "q")
    (p_t, q_t), _ = tensors(p=p_t, q=q_t)
    kl = (torch.xlogy(p_t, p_t) - torch.xlogy(p_t, q_t)).sum(-1)
    return output(kl, p_tensor or q_tensor)


class RegularisedOptimum(NamedTuple):
    probs: object  # π*, same kind as the input (array or tensor)
    log_partition: object  # log Z = log Σ_y π_ref(y)·exp(r(y)/β)


def kl_regularised_optimum(ref_probs, rewards, beta: float) -> RegularisedOptimum:
    """The maximiser of E_π[r] − β·KL(π ‖ π_ref) over all distributions: π* = π_ref·exp(r/β)/Z.

    Assumes Z is finite (it is, for finitely many answers) and π_ref > 0 where π* should put
    mass: an answer with π_ref = 0 keeps π* = 0 whatever its reward. At the optimum the
    objective equals β·log Z, and r = β·log(π*/π_ref) + β·log Z — DPO's starting point (§6).
    """
    beta = positive_scalar(beta, "beta")
    ref, as_tensor = _probs(ref_probs, "ref_probs")
    as_tensor = as_tensor or isinstance(rewards, torch.Tensor)
    (ref, r), _ = tensors(ref_probs=ref, rewards=rewards)
    logits = torch.log(ref) + r / beta  # log 0 = −inf: such answers get π* = 0
    log_z = torch.logsumexp(logits, dim=-1)
    probs = torch.exp(logits - log_z.unsqueeze(-1))
    return RegularisedOptimum(output(probs, as_tensor), output(log_z, as_tensor))


def forward_kl_regularised_optimum(ref_probs, rewards, beta: float, *, tol: float = 1e-13):
    """The maximiser of E_π[r] − β·KL(π_ref ‖ π) (the *forward* KL) over all distributions.

    Stationarity r(y) + β·π_ref(y)/π(y) = λ gives π(y) = β·π_ref(y)/(λ − r(y)), with λ fixed by
    Σ π = 1 (found by bisection in [max r, max r + β] over the answers with π_ref > 0). Unlike
    π*, this optimum never lets an answer of the reference fall to zero probability: π(y) ≥
    β·π_ref(y)/(λ − min r). One prompt (a 1-D ``ref_probs``).
    """
    beta = positive_scalar(beta, "beta")
    ref, as_tensor = _probs(ref_probs, "ref_probs")
    as_tensor = as_tensor or isinstance(rewards, torch.Tensor)
    (ref, r), _ = tensors(ref_probs=ref, rewards=rewards)
    if ref.ndim != 1:
        raise ValueError(f"ref_probs must be one probability vector (shape (K,)); got {tuple(ref.shape)}")
    ref, r = ref.detach().double(), r.detach().double()
    support = ref > 0
    lo = float(r[support].max())
    hi = lo + beta

    def total(lam: float) -> float:
        return float((beta * ref[support] / (lam - r[support])).sum())

    while hi - lo > tol * max(1.0, abs(hi)):
        mid = 0.5 * (lo + hi)
        if total(mid) > 1:
            lo = mid
        else:
            hi = mid
    lam = 0.5 * (lo + hi)
    probs = torch.zeros_like(ref)
    probs[support] = beta * ref[support] / (lam - r[support])
    return output(probs / probs.sum(), as_tensor)


def regularised_objective(probs, ref_probs, rewards, beta: float, *, direction: str = "reverse"):
    """E_π[r] − β·KL, with the reverse KL(π ‖ π_ref) (the RLHF objective, §4) or the forward
    KL(π_ref ‖ π) (what an on-policy k3 penalty in the loss pushes against)."""
    beta = positive_scalar(beta, "beta", allow_zero=True)
    choice(direction, "direction", DIRECTIONS)
    p, as_tensor = _probs(probs, "probs")
    ref, ref_tensor = _probs(ref_probs, "ref_probs")
    as_tensor = as_tensor or ref_tensor or isinstance(rewards, torch.Tensor)
    (p, ref, r), _ = tensors(probs=p, ref_probs=ref, rewards=rewards)
    kl = categorical_kl(p, ref) if direction == "reverse" else categorical_kl(ref, p)
    return output((p * r).sum(-1) - beta * kl, as_tensor)


def expected_kl_gradient(logits, ref_logps, estimator: str, placement: str = "loss"):
    """Exact expected gradient, with respect to the softmax policy's ``logits``, of a KL penalty
    built from the estimator ``k`` on answers sampled from the current policy π = softmax(logits).

    - ``placement="loss"`` (GRPO, TRL): the penalty β·k(y) is differentiated through log π_θ(y)
      of the sampled y:  E_y~π[∇k(y)].  k1 → 0;  k2 → ∇KL(π‖π_ref);  k3 → ∇KL(π_ref‖π).
    - ``placement="reward"`` (InstructGPT-style PPO, RLOO): k(y) is a detached number subtracted
      from the reward, so it reaches the parameters only through the policy gradient's score
      function: E_y~π[k(y)·∇log π(y)] (a constant baseline changes nothing in expectation).
      k1 → ∇KL(π‖π_ref).

    Returned per unit β, as the gradient of a penalty to *descend*. Tensor in → a detached
    tensor out; otherwise a NumPy array. ``ref_logps`` are the reference's log-probabilities
    of the same K answers.
    """
    choice(estimator, "estimator", KL_ESTIMATORS)
    choice(placement, "placement", PLACEMENTS)
    (theta, ref), as_tensor = tensors(logits=logits, ref_logps=ref_logps)
    dtype = theta.dtype
    if theta.ndim != 1 or theta.shape[0] < 2:
        raise ValueError(f"logits must be a vector of K >= 2 answer logits; got shape {tuple(theta.shape)}")
    theta = theta.detach().double().clone().requires_grad_(True)
    ref = ref.detach().double()
    logp = torch.log_softmax(theta, dim=-1)
    weight = logp.exp().detach()  # the sampling distribution: not differentiated (samples are given)
    k = kl_estimate(logp, ref, estimator)
    penalty = (weight * k).sum() if placement == "loss" else (weight * k.detach() * logp).sum()
    (grad,) = torch.autograd.grad(penalty, theta)
    return output(grad.to(dtype), as_tensor)
