"""Advantages: group baselines (GRPO, Dr. GRPO, RLOO), PPO's GAE, zero-variance groups, bias.

Lecture §3 (REINFORCE with a baseline), §9 (RLOO and GRPO), §12 (Dr. GRPO and the exact
bias example); ``gae`` and ``whiten`` are PPO's per-token advantages from a critic's values;
``rft_weights`` is rejection sampling's indicator, an advantage without a baseline.
Rewards are laid out with the group on the **last axis**: shape ``(G,)``
for one prompt or ``(n_groups, G)`` for a batch.

Simplifications, said out loud:
- A zero-variance group (all rewards equal) carries no relative signal. GRPO must be told
  what that means (``on_degenerate``): ``"raise"`` or ``"zeros"``. Whether a group is
  degenerate is decided in one place, ``zero_variance_groups``, on the rewards themselves
  (their range, with a tolerance a few float epsilons wide), never on a computed std: the std
  of ``[0.1, 0.1, 0.1]`` is ~1e-17 in floating point, not 0, and dividing by it turns rounding
  noise into confident ±1 advantages. By default no epsilon is added to the denominator;
  ``epsilon=1e-4`` with ``ddof=1`` reproduces TRL's ``scale_rewards="group"`` exactly.
- ``baseline_gradient`` and ``conditional_advantage`` study the one-parameter Bernoulli policy of
  §12 (p = σ(θ), reward = the action), where everything can be enumerated exactly.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from course_lib._validate import choice, finite_tensor, integer, output, positive_scalar

ON_DEGENERATE = ("raise", "zeros")
BASELINES = ("none", "group_mean", "leave_one_out", "group_mean_std")
DEGENERATE_EPS_FACTOR = 8  # zero_variance_groups: a spread within 8 rounding steps is "equal"
MAX_EXACT_GROUP = 20  # 2^20 ≈ 1e6 groups: the limit for exact enumeration


def _rewards(rewards, validate: bool = True) -> tuple[torch.Tensor, bool]:
    if not validate:  # the trainer's hot path: its inputs were checked once, no host syncs
        return rewards, True
    r, as_tensor = finite_tensor(rewards, "rewards")
    if r.ndim not in (1, 2):
        raise ValueError(f"rewards must have shape (G,) or (n_groups, G); got {tuple(r.shape)}")
    if r.shape[-1] < 2:
        raise ValueError(f"rewards needs a group size G >= 2 on its last axis; got G={r.shape[-1]}")
    return r, as_tensor


def _degenerate(r: torch.Tensor, atol) -> torch.Tensor:
    spread = r.amax(dim=-1) - r.amin(dim=-1)
    if atol is None:
        scale = r.abs().amax(dim=-1).clamp(min=1.0)
        return spread <= DEGENERATE_EPS_FACTOR * torch.finfo(r.dtype).eps * scale
    return spread <= atol


def zero_variance_groups(rewards, *, atol: float | None = None):
    """Which groups carry no relative signal: True where all rewards of a group are equal.

    Rewards have the group on the last axis: ``(G,)`` gives one bool, ``(n_groups, G)`` one
    per group. Decided on the values, not on a computed std (the std of ``[0.1]*3`` is
    ~1e-17 in float64, not 0): a group is degenerate when max − min <= tol, where
    tol = ``atol`` if given, else 8 · eps(dtype) · max(1, max |r|) — a few rounding steps
    of the rewards' own dtype, so it works alike in float32 and float64. The one place
    degeneracy is decided: the three advantage functions and the trainer all use it.
    Tensor in → bool tensor; otherwise a NumPy bool (array).
    """
    r, as_tensor = _rewards(rewards)
    if atol is not None:
        atol = positive_scalar(atol, "atol", allow_zero=True)
    mask = _degenerate(r, atol)
    if as_tensor:
        return mask
    out = mask.cpu().numpy()
    return out[()] if out.ndim == 0 else out


def grpo_advantages(
    rewards,
    *,
    ddof: int = 0,
    epsilon: float = 0.0,
    on_degenerate: str = "raise",
    validate: bool = True,
):
    """GRPO advantages (r_i − mean) / (std + ε) over each group (the last axis), §9.

    ``ddof=0`` is the population std the lecture uses; ``ddof=1`` divides by a larger std and
    so multiplies every advantage by √((G−1)/G) (√(7/8) for G=8). Under SGD that constant
    is a smaller step; under Adam(W), which divides each update by its own running scale, a
    constant factor on every advantage cancels (notebook 04_group_baselines shows both).
    ``epsilon`` is added to the std; ``ddof=1, epsilon=1e-4`` is TRL's
    ``scale_rewards="group"`` exactly. ``on_degenerate`` (decided by ``zero_variance_groups``):
    ``"raise"`` (default) raises ValueError on a zero-variance group; ``"zeros"`` gives that
    group zero advantages. ``validate=False`` (tensor input only) skips the input checks for
    a caller that has already checked its inputs, so no host synchronisation happens.
    Example: [1,0,0,1,0,0,1,0] → successes +1.291, failures −0.775.
    """
    choice(on_degenerate, "on_degenerate", ON_DEGENERATE)
    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 (population std) or 1 (sample std); got {ddof!r}")
    epsilon = positive_scalar(epsilon, "epsilon", allow_zero=True)
    r, as_tensor = _rewards(rewards, validate)
    centred = r - r.mean(dim=-1, keepdim=True)
    std = r.std(dim=-1, correction=ddof, keepdim=True) + epsilon
    degenerate = _degenerate(r, None).unsqueeze(-1)
    if on_degenerate == "raise" and bool(degenerate.any()):
        raise ValueError(
            "a group has zero reward variance (all rewards equal): it carries no relative "
            "signal. Pass on_degenerate='zeros' to give it zero advantages, or drop/resample it."
        )
    adv = torch.where(degenerate, torch.zeros_like(centred), centred / torch.where(degenerate, 1.0, std))
    return output(adv, as_tensor)


def _zero_where_degenerate(r: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
    """Exact zeros for the groups ``zero_variance_groups`` calls degenerate (the one rule).

    Without it equal non-binary rewards leave rounding noise (r − mean of [0.1]·8 is ±6e-8 in
    float32), which AdamW, dividing by its own running scale, can turn into a real step.
    """
    return torch.where(_degenerate(r, None).unsqueeze(-1), torch.zeros_like(adv), adv)


def dr_grpo_advantages(rewards, *, validate: bool = True):
    """Dr. GRPO advantages: r_i − mean(r), no std scaling (§12). TRL: ``scale_rewards="none"``.

    A zero-variance group (``zero_variance_groups``) gets exactly zero advantages.
    """
    r, as_tensor = _rewards(rewards, validate)
    return output(_zero_where_degenerate(r, r - r.mean(dim=-1, keepdim=True)), as_tensor)


def rloo_advantages(rewards, *, validate: bool = True):
    """RLOO advantages r_i − mean of the other G−1 rewards (§9).

    Equals G/(G−1) · (r_i − mean(r)): the leave-one-out baseline does not depend on
    sample i, so the REINFORCE gradient stays unbiased. A zero-variance group
    (``zero_variance_groups``) gets exactly zero advantages.
    """
    r, as_tensor = _rewards(rewards, validate)
    g = r.shape[-1]
    others = (r.sum(dim=-1, keepdim=True) - r) / (g - 1)
    return output(_zero_where_degenerate(r, r - others), as_tensor)


def zero_variance_probability(p, group_size: int):
    """P(all G Bernoulli(p) rewards are equal) = p^G + (1 − p)^G (§9).

    ``p`` in [0, 1] (scalar or array), ``group_size`` an integer >= 2.
    p=0.3, G=8 → 0.0577.
    """
    g = integer(group_size, "group_size", minimum=2)
    pt, as_tensor = finite_tensor(p, "p")
    if not bool(((pt >= 0) & (pt <= 1)).all()):
        raise ValueError("p must lie in [0, 1]")
    return output(pt**g + (1 - pt) ** g, as_tensor)


class GradientEstimate(NamedTuple):
    """A Monte-Carlo estimate of an expected gradient."""

    mean: float
    stderr: float


def _per_group_advantage(actions: np.ndarray, baseline: str) -> np.ndarray:
    """Each answer's advantage under ``baseline``, groups on rows: the library's own estimators."""
    if baseline == "none":
        return actions
    if baseline == "group_mean":
        return dr_grpo_advantages(actions)
    if baseline == "leave_one_out":
        return rloo_advantages(actions)
    return grpo_advantages(actions, on_degenerate="zeros")  # group_mean_std: zero-variance groups → 0


def _per_group_gradient(actions: np.ndarray, p: float, baseline: str) -> np.ndarray:
    """Average over the group of A_i·∂log π(a_i)/∂θ, one value per group (row).

    Reward r = a and ∂log π(a)/∂θ = a − p for a Bernoulli policy with logit θ.
    """
    return (_per_group_advantage(actions, baseline) * (actions - p)).mean(axis=-1)


def baseline_gradient(
    p: float,
    group_size: int,
    baseline: str = "group_mean",
    method: str = "exact",
    *,
    n_groups: int = 100_000,
    seed: int = 0,
):
    """Expected per-sample REINFORCE gradient dJ/dθ for Bernoulli(p = σ(θ)) rewards (§12).

    Each of G samples is a ∈ {0, 1} with reward a; sample i's gradient is
    (r_i − b_i)(a_i − p) and we average over the group. The true gradient of J = p is
    p(1 − p). ``baseline``:

    - ``"none"``            b = 0                          → p(1 − p)
    - ``"group_mean"``      b = mean of all G (includes i) → (G − 1)p(1 − p)/G, biased
    - ``"leave_one_out"``   b = mean of the other G − 1    → p(1 − p), unbiased (RLOO)
    - ``"group_mean_std"``  GRPO's (r − mean)/std, zero-variance groups → 0

    ``method="exact"`` enumerates all 2^G groups (G <= 20) weighted by their probability
    and returns a float; ``method="simulate"`` draws ``n_groups`` groups with ``seed`` and
    returns ``GradientEstimate(mean, stderr)``.
    """
    g = integer(group_size, "group_size", minimum=2)
    choice(baseline, "baseline", BASELINES)
    choice(method, "method", ("exact", "simulate"))
    p = float(positive_scalar(p, "p", allow_zero=True))
    if p > 1:
        raise ValueError(f"p must lie in [0, 1]; got {p!r}")
    if method == "exact":
        if g > MAX_EXACT_GROUP:
            raise ValueError(f"group_size must be <= {MAX_EXACT_GROUP} for method='exact'; got {g}")
        codes = np.arange(2**g)[:, None]
        actions = ((codes >> np.arange(g)) & 1).astype(np.float64)  # every group, one per row
        k = actions.sum(axis=1)
        prob = p**k * (1 - p) ** (g - k)
        return float((prob * _per_group_gradient(actions, p, baseline)).sum())
    n = integer(n_groups, "n_groups", minimum=2)
    rng = np.random.default_rng(seed)
    actions = (rng.random((n, g)) < p).astype(np.float64)
    per_group = _per_group_gradient(actions, p, baseline)
    return GradientEstimate(float(per_group.mean()), float(per_group.std(ddof=1) / math.sqrt(n)))


class AdvantageBias(NamedTuple):
    """The advantage a group-relative estimator gives, against the one it stands in for."""

    estimate: float
    true: float


def conditional_advantage(p: float, group_size: int, baseline: str = "group_mean", outcome: int = 1) -> AdvantageBias:
    """Exact E[Â_i | r_i = outcome, the group is not zero-variance] for Bernoulli(p) rewards.

    Yang et al. 2026 ("Your Group-Relative Advantage Is Biased"): only groups with both outcomes
    produce a gradient, and conditioning on that moves the expected baseline. A correct answer
    to a hard prompt (p small) sits in a group whose other answers are mostly wrong but not all
    right, so its advantage is *under*-estimated; on an easy prompt (p near 1) at least one other
    answer had to fail, so a correct answer's advantage is *over*-estimated. ``true`` is the
    advantage the estimator stands in for: r − p (``group_mean``, ``leave_one_out``), r
    (``none``) or the standardised (r − p)/√(p(1 − p)) (``group_mean_std``).

    Enumerates the other G − 1 rewards exactly (the count of successes is Binomial(G − 1, p));
    each group's advantage comes from the library's own baseline (``_per_group_advantage``).
    ``p`` must lie strictly inside (0, 1), where both outcomes are possible.
    """
    g = integer(group_size, "group_size", minimum=2)
    choice(baseline, "baseline", BASELINES)
    p = float(positive_scalar(p, "p", allow_zero=True))
    if not 0 < p < 1:
        raise ValueError(f"p must lie strictly between 0 and 1 (both outcomes possible); got {p!r}")
    if outcome not in (0, 1):
        raise ValueError(f"outcome must be 0 or 1 (the reward of the answer we follow); got {outcome!r}")
    ks = range(g)  # successes among the other G − 1 answers: 0 … G − 1
    weight = np.array([math.comb(g - 1, k) * p**k * (1 - p) ** (g - 1 - k) for k in ks])
    groups = np.array([[outcome] + [1] * k + [0] * (g - 1 - k) for k in ks], dtype=np.float64)
    mixed = groups.min(axis=1) != groups.max(axis=1)
    adv = _per_group_advantage(groups[mixed], baseline)[:, 0]
    estimate = float((weight[mixed] * adv).sum() / weight[mixed].sum())
    true = {"none": float(outcome), "group_mean": outcome - p, "leave_one_out": outcome - p,
            "group_mean_std": (outcome - p) / math.sqrt(p * (1 - p))}[baseline]
    return AdvantageBias(estimate, true)


ADVANTAGE_FUNCTIONS = {"grpo": grpo_advantages, "rloo": rloo_advantages, "dr_grpo": dr_grpo_advantages}


def compute_advantages(rewards: torch.Tensor, kind: str, *, validate: bool = True) -> torch.Tensor:
    """(n_groups, G) rewards → advantages; zero-variance groups (``zero_variance_groups``) give zeros."""
    if kind == "grpo":
        return grpo_advantages(rewards, on_degenerate="zeros", validate=validate)
    return ADVANTAGE_FUNCTIONS[kind](rewards, validate=validate)


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, *, gamma: float, lam: float):
    """Generalised advantage estimation (Schulman et al. 2016) on ``(N, T)`` per-token tensors.

    δ_t = r_t + γ·V_{t+1} − V_t  (V after the last real token is 0: the episode ends there),
    Â_t = Σ_l (γλ)^l δ_{t+l} = δ_t + γλ·Â_{t+1}.  Returns ``(advantages, returns)`` with
    returns R_t = Â_t + V_t (the critic's regression target); both are 0 where ``mask`` is 0.
    λ = 1 gives the Monte-Carlo return minus V_t; λ = 0 the one-step TD error.
    """
    if not (rewards.shape == values.shape == mask.shape) or rewards.ndim != 2:
        raise ValueError(f"rewards, values and mask must share one (N, T) shape; got "
                         f"{tuple(rewards.shape)}, {tuple(values.shape)}, {tuple(mask.shape)}")
    if not (0 <= gamma <= 1 and 0 <= lam <= 1):
        raise ValueError(f"gamma and lam must lie in [0, 1]; got gamma={gamma}, lam={lam}")
    m = mask.to(values.dtype)
    v = values * m
    r = rewards * m
    advantages = torch.zeros_like(v)
    running = torch.zeros_like(v[:, 0])
    for t in range(v.shape[1] - 1, -1, -1):
        next_v = v[:, t + 1] if t + 1 < v.shape[1] else torch.zeros_like(running)
        delta = r[:, t] + gamma * next_v - v[:, t]
        running = (delta + gamma * lam * running) * m[:, t]
        advantages[:, t] = running
    return advantages, (advantages + v) * m


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x − mean)/std over the real tokens of the batch (TRL's ``masked_whiten``); 0 on padding."""
    m = mask.to(x.dtype)
    n = m.sum()
    mean = (x * m).sum() / n
    var = (((x - mean) * m) ** 2).sum() / n
    return (x - mean) * torch.rsqrt(var + eps) * m


WEIGHTINGS = ("filter", "reward")


def rft_weights(rewards: torch.Tensor, *, weighting: str = "filter", threshold: float = 1.0) -> torch.Tensor:
    """RFT's per-completion weights of the supervised step: ``1[r ≥ threshold]`` (``"filter"``) or ``r`` itself
    (``"reward"``, reward-weighted SFT) — the policy gradient's advantage with no baseline and no negatives."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}; got {weighting!r}")
    if weighting == "filter":
        return (rewards >= threshold).to(torch.float32)
    if bool((rewards < 0).any()):
        raise ValueError("weighting='reward' needs rewards >= 0 (they are used as sample weights)")
    return rewards.to(torch.float32)
