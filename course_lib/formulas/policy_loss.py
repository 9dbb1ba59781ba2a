"""Turning advantages into an update: the clipped surrogate, the averaging unit, KL estimators.

``surrogate`` picks GRPO's per-token objective (clipped, GSPO's sequence ratio or CISPO);
``clipped_value_loss`` is PPO's critic loss.

Lecture §9 ("Turning an advantage into an update") and §12 (DAPO's clip-higher and token-level
loss, Dr. GRPO's constant denominator). Per-token tensors have shape ``(n_completions, T)``
with a 0/1 ``mask`` marking real completion tokens (prompt and padding are 0).

Mapping to TRL's ``GRPOConfig`` names:

====================  ==========================  ======================================
here                  TRL                         meaning
====================  ==========================  ======================================
``eps_low``           ``epsilon``                 lower clip 1 − ε_low
``eps_high``          ``epsilon_high``            upper clip 1 + ε_high (DAPO clip-higher)
unit ``sequence_mean`` ``loss_type="grpo"``       mean over tokens, then over responses
unit ``token_mean``   ``loss_type="bnpo"/"dapo"`` Σ tokens / number of real tokens
unit ``constant``     ``loss_type="dr_grpo"``     Σ tokens / (rows · L_max)
``beta`` (trainer)    ``beta``                    KL coefficient
``kl_estimate`` k3    (fixed, in the loss)        per-token KL term
``sequence_ratio``    ``importance_sampling_level  GSPO: one length-normalised ratio per
                      ="sequence"``               completion, clipped as a whole
``cispo_objective``   ``loss_type="cispo"``       CISPO: the importance weight capped at
                      (``epsilon_high`` = ε_max)   ε_max, every token keeps its gradient
====================  ==========================  ======================================

Conventions shared with TRL: ``eps_low >= 1`` means no lower clip; a completion whose mask is
all zero (masked because truncated, say) contributes nothing but is still counted in the
``sequence_mean`` and ``constant`` denominators — rows are never removed, so Dr. GRPO's
denominator stays the published constant.

Simplification: TRL's ``dapo`` normalises by tokens across processes; with one process that
is ``token_mean``.

Every function takes ``validate=True``; the trainer checks its inputs once and passes
``validate=False`` in its hot loop, where each check would be a device→host synchronisation.
"""

from __future__ import annotations

import numpy as np
import torch

from course_lib._validate import choice, output, positive_scalar, tensors

UNITS = ("sequence_mean", "token_mean", "constant")
KL_ESTIMATORS = ("k1", "k2", "k3")
GRPO_LOSS_TYPES = ("clipped", "cispo")  # the per-token objective; the averaging unit is ``unit``
IMPORTANCE_SAMPLING_LEVELS = ("token", "sequence")  # one ratio per token (GRPO) | per completion (GSPO)


def clipped_surrogate(
    ratio,
    advantages,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    *,
    return_clipped: bool = False,
    validate: bool = True,
):
    """Per-token PPO/GRPO objective to **maximise**: min(ρA, clip(ρ, 1−ε_low, 1+ε_high)·A).

    ``ratio`` is π_θ/π_old per token; ``advantages`` broadcast against it (a per-completion
    advantage of shape ``(N,)`` is applied to every token of a ``(N, T)`` ratio). Old
    probabilities and advantages are constants. For A > 0 the objective stops growing once
    ρ > 1 + ε_high; for A < 0 once ρ < 1 − ε_low. Clipping removes the incentive to move
    further; it never adds a penalty, and it does not guarantee the ratio stays inside the
    interval after a step. ``eps_low >= 1`` means no lower clip (TRL's convention).

    ``return_clipped=True`` also returns a bool tensor, True where the clipped branch is the
    minimum and differs from the unclipped one — the tokens whose gradient the clip removes.
    """
    lo = positive_scalar(eps_low, "eps_low", allow_zero=True)
    hi = positive_scalar(eps_high, "eps_high", allow_zero=True)
    if np.ndim(advantages) == np.ndim(ratio) - 1:  # one advantage per completion
        advantages = (
            advantages.unsqueeze(-1)
            if isinstance(advantages, torch.Tensor)
            else np.asarray(advantages, dtype=np.float64)[..., None]
        )
    if validate:
        (rho, adv), as_tensor = tensors(ratio=ratio, advantages=advantages)
        if not bool((rho >= 0).all()):
            raise ValueError("ratio must be >= 0 (it is a ratio of probabilities)")
    else:
        rho, adv, as_tensor = ratio, advantages, True
    lower = None if lo >= 1 else 1 - lo  # eps_low >= 1: no lower clip
    unclipped = rho * adv
    clipped_branch = rho.clamp(lower, 1 + hi) * adv
    objective = torch.minimum(unclipped, clipped_branch)
    if not return_clipped:
        return output(objective, as_tensor)
    clipped = clipped_branch < unclipped
    return output(objective, as_tensor), (clipped if as_tensor else clipped.cpu().numpy())


def aggregate(
    per_token,
    mask,
    unit: str = "token_mean",
    max_length: float | None = None,
    *,
    validate: bool = True,
):
    """Average per-token values of shape ``(N, T)`` into one scalar; padding never counts.

    ``unit``:

    - ``"sequence_mean"`` (original GRPO): N⁻¹ Σ_i |y_i|⁻¹ Σ_t q_it
    - ``"token_mean"`` (DAPO): Σ_it q_it / Σ_i |y_i|
    - ``"constant"`` (Dr. GRPO): Σ_it q_it / (N · L_max), ``max_length`` = L_max, any
      positive number (defaults to T, the padded width)

    A row whose mask is all zero (a completion masked out, e.g. because it was truncated)
    contributes nothing, and still counts among the N rows of ``sequence_mean`` and
    ``constant``: rows are never removed from a denominator (TRL does the same). A batch with
    no token at all gives 0.
    Lengths 1 and 3 with per-token values 2 and 0 give 1 (sequence_mean) and 0.5 (token_mean).
    """
    choice(unit, "unit", UNITS)
    if validate:
        (q, m), as_tensor = tensors(per_token=per_token, mask=mask)
        if q.ndim != 2:
            raise ValueError(f"per_token must have shape (N, T); got {tuple(q.shape)}")
        if not bool(((m == 0) | (m == 1)).all()):
            raise ValueError("mask must contain only 0/1 (or booleans)")
    else:
        q, m, as_tensor = per_token, mask.to(per_token.dtype), True
    lengths = m.sum(dim=-1)
    total = (q * m).sum(dim=-1)
    if unit == "sequence_mean":
        result = (total / lengths.clamp(min=1)).mean()
    elif unit == "token_mean":
        result = total.sum() / lengths.sum().clamp(min=1)
    else:
        l_max = q.shape[-1] if max_length is None else positive_scalar(max_length, "max_length")
        result = total.sum() / (q.shape[0] * l_max)
    return output(result, as_tensor)


def sequence_ratio(logps, old_logps, mask, *, validate: bool = True):
    """GSPO's importance ratio, one per completion: s_i = exp(mean over its real tokens of log π_θ/π_old).

    Zheng et al. 2025 (Group Sequence Policy Optimization): the reward is given to a whole
    completion, so the off-policy correction should be too. GRPO's per-token ratios each carry
    their own noise and are clipped one by one; GSPO takes their geometric mean (the length
    normalisation keeps s_i on the same scale for short and long answers) and clips the
    completion as a whole: ``clipped_surrogate(sequence_ratio(...), advantages)`` gives one
    objective per completion, averaged over completions (the ``sequence_mean`` unit: a token
    unit would weight each completion by its length, which the method does not mean). Shapes:
    ``(N, T)`` in, ``(N,)`` out; a row with no real token gets s = 1 (TRL does the same).
    The gradient flows through every token of the completion, each weighted by s_i·A_i/|y_i|.
    """
    if validate:
        (lp, old, m), as_tensor = tensors(logps=logps, old_logps=old_logps, mask=mask)
        if lp.ndim != 2 or lp.shape != old.shape or lp.shape != m.shape:
            raise ValueError(f"logps, old_logps and mask must share one (N, T) shape; got "
                             f"{tuple(lp.shape)}, {tuple(old.shape)}, {tuple(m.shape)}")
        m = m.to(lp.dtype)
    else:
        lp, old, m, as_tensor = logps, old_logps, mask.to(logps.dtype), True
    mean_log_ratio = ((lp - old) * m).sum(dim=-1) / m.sum(dim=-1).clamp(min=1)
    return output(torch.exp(mean_log_ratio), as_tensor)


def cispo_objective(ratio, advantages, logps, eps_max: float = 5.0, *, return_clipped: bool = False,
                    validate: bool = True):
    """CISPO's per-token objective to **maximise**: sg(min(ρ, ε_max)) · A · log π_θ.

    MiniMax-M1 (2025), "clipped IS-weight policy optimisation". PPO's clip removes the gradient
    of every token whose ratio left the band — in long reasoning answers these are often the
    rare, decisive tokens. CISPO clips the importance *weight* instead, as a constant (stop-
    gradient), so every token keeps a gradient min(ρ, ε_max)·A·∇log π_θ. ``ratio`` is π_θ/π_old
    per token, ``logps`` the differentiable log π_θ of the same tokens (N, T); ``advantages``
    per completion (N,) or per token. ε_max is TRL's ``epsilon_high`` under ``loss_type="cispo"``
    (TRL recommends 5.0); the paper also allows a lower bound, which TRL leaves out, as we do.
    Aggregate with the token unit (TRL normalises CISPO by the batch's tokens).
    ``return_clipped=True`` also returns where the weight was capped and the advantage is not 0
    (where the cap changes the gradient; TRL's logged ``cispo`` clip ratio counts A > 0 only).
    """
    cap = positive_scalar(eps_max, "eps_max")
    if np.ndim(advantages) == np.ndim(ratio) - 1:  # one advantage per completion
        advantages = (advantages.unsqueeze(-1) if isinstance(advantages, torch.Tensor)
                      else np.asarray(advantages, dtype=np.float64)[..., None])
    if validate:
        (rho, adv, lp), as_tensor = tensors(ratio=ratio, advantages=advantages, logps=logps)
        if not bool((rho >= 0).all()):
            raise ValueError("ratio must be >= 0 (it is a ratio of probabilities)")
    else:
        rho, adv, lp, as_tensor = ratio, advantages, logps, True
    weight = rho.clamp(max=cap).detach()
    objective = weight * adv * lp
    if not return_clipped:
        return output(objective, as_tensor)
    clipped = (rho > cap) & (adv != 0)  # capped where it changes the gradient (a zero advantage has none)
    return output(objective, as_tensor), (clipped if as_tensor else clipped.cpu().numpy())


def surrogate(logps, old_logps, adv, mask, *, eps_low: float, eps_high: float, level: str = "token",
              loss_type: str = "clipped", validate: bool = True):
    """Per-token objective to maximise and where it was clipped, both (N, T), for GRPO's objectives.

    - ``level="token"``, ``loss_type="clipped"`` (GRPO/DAPO): ``clipped_surrogate``
      on the per-token ratio ρ_t = π_θ/π_old;
    - ``level="sequence"`` (GSPO): ``clipped_surrogate`` on one ratio per
      completion, ``sequence_ratio`` (the geometric mean of its tokens' ratios), applied to each
      of its tokens (TRL broadcasts the same (N, 1) objective; ``unit="sequence_mean"`` then
      averages one objective per completion);
    - ``loss_type="cispo"``: ``cispo_objective`` with ε_max = ``eps_high``.

    ``level`` and ``loss_type`` are ``GRPOConfig.importance_sampling_level`` and ``.loss_type``.
    """
    choice(level, "level", IMPORTANCE_SAMPLING_LEVELS)
    choice(loss_type, "loss_type", GRPO_LOSS_TYPES)
    if level == "sequence":
        ratio = sequence_ratio(logps, old_logps, mask, validate=validate)
        objective, clipped = clipped_surrogate(ratio, adv, eps_low=eps_low, eps_high=eps_high,
                                               return_clipped=True, validate=validate)
        return objective[:, None].expand_as(logps), clipped[:, None].expand_as(logps)
    ratio = torch.exp(logps - old_logps)
    if loss_type == "cispo":
        return cispo_objective(ratio, adv, logps, eps_max=eps_high, return_clipped=True, validate=validate)
    return clipped_surrogate(ratio, adv, eps_low=eps_low, eps_high=eps_high, return_clipped=True,
                             validate=validate)


def kl_estimate(logps, ref_logps, estimator: str = "k3", *, validate: bool = True):
    """Per-token estimate of KL(π_θ ‖ π_ref) from tokens sampled by π_θ (Schulman's k1/k2/k3).

    With log r = log π_ref − log π_θ:  k1 = −log r, k2 = (log r)²/2, k3 = (r − 1) − log r.

    As **values** (a number to log or to fold into a reward), on tokens sampled from π_θ:
    k1 and k3 are unbiased for KL(π_θ ‖ π_ref); k1 can be negative and has high variance;
    k3 is always >= 0 with low variance; k2 is biased (exact to second order) and >= 0.

    As **loss terms** (differentiated with respect to θ while the samples are held fixed, as a
    trainer does), the expected gradients on on-policy samples are different objects:
    E[∇k1] = 0 — no KL pressure at all —, E[∇k2] = ∇KL(π_θ ‖ π_ref) (the reverse KL the
    objective names), and E[∇k3] = ∇KL(π_ref ‖ π_θ) — the *forward* KL. TRL puts k3 in the
    loss, so it pulls along the gradient of KL(π_ref ‖ π_θ). A test pins all three on an exact
    categorical example. Where the KL enters (reward: ``kl_shaped_rewards``; or loss) and its
    coefficient β are separate choices the trainer names explicitly.
    """
    choice(estimator, "estimator", KL_ESTIMATORS)
    if validate:
        (lp, ref), as_tensor = tensors(logps=logps, ref_logps=ref_logps)
    else:
        lp, ref, as_tensor = logps, ref_logps, True
    log_r = ref - lp
    if estimator == "k1":
        kl = -log_r
    elif estimator == "k2":
        kl = 0.5 * log_r**2
    else:
        kl = torch.expm1(log_r) - log_r
    return output(kl, as_tensor)


def kl_shaped_rewards(
    rewards,
    logps,
    ref_logps,
    mask,
    *,
    beta: float,
    estimator: str = "k1",
    validate: bool = True,
):
    """KL **in the reward**: r_i − β · Σ_t k(t) over the real tokens of completion i.

    InstructGPT-style PPO and RLOO fold a per-sequence KL penalty into the reward *before*
    the baseline, so the penalty is treated like any other reward: it is centred by the
    group baseline and scaled with the advantages. ``rewards`` has shape ``(N,)``,
    ``logps``/``ref_logps``/``mask`` ``(N, T)``. The estimate is computed on detached
    log-probs: a reward is a constant for the policy gradient (the score function carries
    the KL's gradient; E[Σ_t k1] is the sequence-level KL(π_θ ‖ π_ref), hence the k1
    default, as in TRL's RLOO and PPO). Contrast with KL **in the loss** (GRPO): a per-token
    term ``kl_estimate`` added to the objective and differentiated directly.
    """
    beta = positive_scalar(beta, "beta", allow_zero=True)
    if validate:
        (r,), as_tensor = tensors(rewards=rewards)
        (lp, ref, m), _ = tensors(logps=logps, ref_logps=ref_logps, mask=mask)
        if lp.ndim != 2 or r.shape != lp.shape[:1]:
            raise ValueError(
                f"rewards must have shape (N,) and logps (N, T); got {tuple(r.shape)} and {tuple(lp.shape)}"
            )
        lp, ref, m = lp.to(r), ref.to(r), m.to(r)
    else:
        r, lp, ref, m, as_tensor = rewards, logps, ref_logps, mask.to(logps.dtype), True
    per_token = kl_estimate(lp.detach(), ref.detach(), estimator, validate=False)
    return output(r - beta * (per_token * m).sum(dim=-1), as_tensor)


def clipped_value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, cliprange_value: float):
    """Per-token ½·max((V − R)², (V_old + clip(V − V_old, −ε_v, ε_v) − R)²), PPO's clipped value loss.

    The clip removes the gradient, it does not bound the move: where V has moved more than ε_v
    from the value the rollout was scored with and the clipped term is the larger, the loss has no
    gradient in V, but one step can still carry V past ε_v (as PPO's ratio clip, notebook
    05_from_advantages_to_an_update).
    Taking the max makes it pessimistic (as TRL and OpenAI's PPO do).
    Returns ``(per_token_loss, clipped)`` where ``clipped`` marks tokens whose clipped term is larger.
    """
    if cliprange_value <= 0:
        raise ValueError(f"cliprange_value must be > 0; got {cliprange_value}")
    v_clipped = old_values + (values - old_values).clamp(-cliprange_value, cliprange_value)
    unclipped_sq = (values - returns) ** 2
    clipped_sq = (v_clipped - returns) ** 2
    return 0.5 * torch.maximum(unclipped_sq, clipped_sq), clipped_sq > unclipped_sq


def logged_kl(logps: torch.Tensor, ref_logps: torch.Tensor, mask: torch.Tensor, *,
              validate: bool = True) -> torch.Tensor:
    """The KL a GRPO step logs (``kl``): token-mean k3 of π_old's log-probs against the reference's, over ``mask``.

    Always π_old's, on every row of the batch (the first inner epoch's log-probs, with the
    left-out zero-variance rows' from a forward without gradient), never the sampler's, whatever
    estimator and placement the objective uses: one quantity under one name, whatever the share
    of zero-variance groups, the staleness or the sampler's temperature.
    """
    return aggregate(kl_estimate(logps, ref_logps, "k3", validate=validate), mask, unit="token_mean",
                     validate=validate)
