"""Turning advantages into an update: the clipped surrogate, the averaging unit, KL estimators.

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
unit ``constant``     ``loss_type="dr_grpo"``     Σ tokens / (G · L_max)
``beta`` (trainer)    ``beta``                    KL coefficient
====================  ==========================  ======================================

Simplification: TRL's ``dapo`` normalises by tokens across processes; with one process that
is ``token_mean``.
"""

from __future__ import annotations

import numpy as np
import torch

from course_lib._validate import choice, integer, output, positive_scalar, tensors

UNITS = ("sequence_mean", "token_mean", "constant")
KL_ESTIMATORS = ("k1", "k2", "k3")


def clipped_surrogate(ratio, advantages, eps_low: float = 0.2, eps_high: float = 0.2):
    """Per-token PPO/GRPO objective to **maximise**: min(ρA, clip(ρ, 1−ε_low, 1+ε_high)·A).

    ``ratio`` is π_θ/π_old per token; ``advantages`` broadcast against it (a per-completion
    advantage of shape ``(N,)`` is applied to every token of a ``(N, T)`` ratio). Old
    probabilities and advantages are constants. For A > 0 the objective stops growing once
    ρ > 1 + ε_high; for A < 0 once ρ < 1 − ε_low. Clipping shapes the objective; it does not
    guarantee the ratio stays inside the interval after a step.
    """
    lo = positive_scalar(eps_low, "eps_low", allow_zero=True)
    hi = positive_scalar(eps_high, "eps_high", allow_zero=True)
    if lo >= 1:
        raise ValueError(f"eps_low must be in [0, 1) so that 1 - eps_low > 0; got {eps_low!r}")
    if np.ndim(advantages) == np.ndim(ratio) - 1:  # one advantage per completion
        advantages = (
            advantages.unsqueeze(-1)
            if isinstance(advantages, torch.Tensor)
            else np.asarray(advantages, dtype=np.float64)[..., None]
        )
    (rho, adv), as_tensor = tensors(ratio=ratio, advantages=advantages)
    if not bool((rho >= 0).all()):
        raise ValueError("ratio must be >= 0 (it is a ratio of probabilities)")
    return output(torch.minimum(rho * adv, rho.clamp(1 - lo, 1 + hi) * adv), as_tensor)


def aggregate(per_token, mask, unit: str = "token_mean", max_length: int | None = None):
    """Average per-token values of shape ``(G, T)`` into one scalar; padding never counts.

    ``unit``:

    - ``"sequence_mean"`` (original GRPO): G⁻¹ Σ_i |y_i|⁻¹ Σ_t q_it
    - ``"token_mean"`` (DAPO): Σ_it q_it / Σ_i |y_i|
    - ``"constant"`` (Dr. GRPO): Σ_it q_it / (G · L_max), ``max_length`` = L_max
      (defaults to T, the padded width)

    Lengths 1 and 3 with per-token values 2 and 0 give 1 (sequence_mean) and 0.5 (token_mean).
    """
    choice(unit, "unit", UNITS)
    (q, m), as_tensor = tensors(per_token=per_token, mask=mask)
    if q.ndim != 2:
        raise ValueError(f"per_token must have shape (G, T); got {tuple(q.shape)}")
    if not bool(((m == 0) | (m == 1)).all()):
        raise ValueError("mask must contain only 0/1 (or booleans)")
    lengths = m.sum(dim=-1)
    if bool((lengths == 0).any()):
        raise ValueError("mask has a completion with no tokens; every row needs at least one")
    total = (q * m).sum(dim=-1)
    if unit == "sequence_mean":
        result = (total / lengths).mean()
    elif unit == "token_mean":
        result = total.sum() / lengths.sum()
    else:
        l_max = q.shape[-1] if max_length is None else integer(max_length, "max_length", minimum=1)
        if l_max < int(lengths.max()):
            raise ValueError(f"max_length ({l_max}) is shorter than the longest completion")
        result = total.sum() / (q.shape[0] * l_max)
    return output(result, as_tensor)


def kl_estimate(logps, ref_logps, estimator: str = "k3"):
    """Per-token estimate of KL(π_θ ‖ π_ref) from tokens sampled by π_θ (Schulman's k1/k2/k3).

    With log r = log π_ref − log π_θ:  k1 = −log r (unbiased, can be negative),
    k2 = (log r)²/2 (biased, low variance), k3 = (r − 1) − log r (unbiased, always >= 0;
    what GRPO and TRL use). Where the KL enters (reward or loss) and its coefficient β
    are separate choices the trainer names explicitly.
    """
    choice(estimator, "estimator", KL_ESTIMATORS)
    (lp, ref), as_tensor = tensors(logps=logps, ref_logps=ref_logps)
    log_r = ref - lp
    if estimator == "k1":
        kl = -log_r
    elif estimator == "k2":
        kl = 0.5 * log_r**2
    else:
        kl = torch.expm1(log_r) - log_r
    return output(kl, as_tensor)
