"""Pairwise preferences: Bradley–Terry, the reward-model loss, DPO and its direct variants.

Lecture §3 (Bradley–Terry), §5 (inverting it), §6–§7 (DPO and its margin), §8 (IPO, KTO,
SimPO, ORPO). Every loss works on *sequence-level* log-probabilities: the sum of a
completion's token log-probs (see ``course_lib.tinygpt.model.completion_logprobs`` for how the
trainer computes them), plus token counts where a method length-normalises.

Simplifications, said out loud:
- Losses are returned per example (no reduction) except ``reward_model_loss``, whose
  default is the batch mean the lecture's L_RM averages; reduce the others yourself.
- KTO's reference point z0 is an argument of ``kto_loss``, so the formula stays visible;
  ``kto_reference_point`` computes it as the paper and TRL do (a detached, clamped batch estimate
  of KL(π_θ‖π_ref) on mismatched prompt–completion pairs, ``mismatched_order``), and
  ``course_lib.trainers.kto`` trains with it. ``course_lib.trainers.orpo`` trains ORPO with ``odds_ratio_penalty``.
- Parameter names follow TRL where TRL has one (``beta``, ``gamma`` = SimPO's target margin,
  ``desirable_weight``/``undesirable_weight`` for KTO, ORPO's λ is TRL's ``beta``).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from course_lib._validate import check_finite, number, output, positive_scalar, tensors, to_tensor


def bt_probability(score_gap):
    """P(i beats j) = σ(s_i − s_j) under Bradley–Terry (§3).

    ``score_gap`` is s_i − s_j (any real; stable for |gap| up to 1e4 and beyond).
    Returns the probability, same shape as the input.
    """
    (gap,), as_tensor = tensors(score_gap=score_gap)
    return output(torch.sigmoid(gap), as_tensor)


def win_rate_to_gap(win_rate):
    """Invert Bradley–Terry (§5): the score gap log(p / (1 − p)) behind a win rate p.

    ``win_rate`` must lie strictly inside (0, 1): 0 and 1 map to an infinite gap.
    A 75% win rate gives log 3 ≈ 1.099 — a coordinate in the logistic model, not a utility.
    """
    (p,), as_tensor = tensors(win_rate=win_rate)
    if not bool(((p > 0) & (p < 1)).all()):
        raise ValueError("win_rate must lie strictly between 0 and 1 (exclusive)")
    return output(torch.log(p) - torch.log1p(-p), as_tensor)


def reward_model_loss(reward_chosen, reward_rejected, *, reduction: str = "mean"):
    """Bradley–Terry reward-model loss −log σ(r_w − r_l) (§3–§4).

    Data contract: pairs (chosen, rejected) scored by the reward model being trained.
    ``reduction``: ``"mean"`` (default, the batch loss) or ``"none"`` (one loss per pair).
    """
    if reduction not in ("mean", "none"):
        raise ValueError(f"reduction must be 'mean' or 'none'; got {reduction!r}")
    (rw, rl), as_tensor = tensors(reward_chosen=reward_chosen, reward_rejected=reward_rejected)
    loss = -F.logsigmoid(rw - rl)  # stable for large gaps, exact gradient
    if reduction == "mean":
        loss = loss.mean()
    return output(loss, as_tensor)


class DPOTerms(NamedTuple):
    """Element-wise DPO quantities for a batch of pairs."""

    margin: object  # z = β[(log π_w − log π_ref,w) − (log π_l − log π_ref,l)]
    loss: object  # −log σ(z)
    slope: object  # |∂loss/∂z| = σ(−z)


def dpo_terms(
    policy_chosen_logps,
    policy_rejected_logps,
    ref_chosen_logps,
    ref_rejected_logps,
    beta: float = 0.1,
) -> DPOTerms:
    """DPO margin, loss and local slope from four sequence log-prob sums (§6–§7).

    Data contract: preference pairs; a reference policy (its log-probs can be cached once
    for a fixed dataset). Inputs broadcast together; ``beta`` must be finite and > 0.
    The slope is the derivative with respect to the scalar margin z, not a parameter
    gradient (that one carries another factor β). Pair I of §7 gives z=0.170,
    loss 0.6118, slope 0.4576.
    """
    beta = positive_scalar(beta, "beta")
    (pw, pl, rw, rl), as_tensor = tensors(
        policy_chosen_logps=policy_chosen_logps,
        policy_rejected_logps=policy_rejected_logps,
        ref_chosen_logps=ref_chosen_logps,
        ref_rejected_logps=ref_rejected_logps,
    )
    z = beta * ((pw - rw) - (pl - rl))
    return DPOTerms(
        margin=output(z, as_tensor),
        loss=output(-F.logsigmoid(z), as_tensor),
        slope=output(torch.sigmoid(-z), as_tensor),
    )


def implicit_reward(policy_logps, ref_logps, beta: float):
    """DPO's implicit reward β·log(π_θ(y|x) / π_ref(y|x)) (§6).

    Needs both policies: it orders answers relative to the reference, it is not a judge.
    """
    beta = positive_scalar(beta, "beta")
    (p, r), as_tensor = tensors(policy_logps=policy_logps, ref_logps=ref_logps)
    return output(beta * (p - r), as_tensor)


def ipo_loss(
    policy_chosen_logps,
    policy_rejected_logps,
    ref_chosen_logps,
    ref_rejected_logps,
    beta: float = 0.1,
    *,
    chosen_lengths=None,
    rejected_lengths=None,
):
    """IPO (Azar et al. 2023): squared distance of the log-ratio gap h from 1/(2β).

    Data contract: preference pairs and a reference policy. Unlike DPO's logistic loss, which
    keeps pushing any margin up, IPO targets the finite gap h* = 1/(2β) (§8).
    Two forms: with sums of token log-probs (the default, the paper's form), or, when
    ``chosen_lengths`` and ``rejected_lengths`` (token counts) are given, with each
    completion's log-probs averaged over its tokens — TRL's ``loss_type="ipo"``, which
    length-normalises policy and reference log-probs alike.
    """
    beta = positive_scalar(beta, "beta")
    if (chosen_lengths is None) != (rejected_lengths is None):
        raise ValueError("chosen_lengths and rejected_lengths must be given together (or neither)")
    named = dict(
        policy_chosen_logps=policy_chosen_logps,
        policy_rejected_logps=policy_rejected_logps,
        ref_chosen_logps=ref_chosen_logps,
        ref_rejected_logps=ref_rejected_logps,
    )
    if chosen_lengths is not None:
        _lengths(chosen_lengths, rejected_lengths)
        named.update(chosen_lengths=chosen_lengths, rejected_lengths=rejected_lengths)
    tensors_out, as_tensor = tensors(**named)
    pw, pl, rw, rl = tensors_out[:4]
    nw, nl = tensors_out[4:] if chosen_lengths is not None else (1.0, 1.0)
    h = (pw - rw) / nw - (pl - rl) / nl
    return output((h - 1.0 / (2.0 * beta)) ** 2, as_tensor)


def _lengths(chosen_lengths, rejected_lengths):
    for name, value in (("chosen_lengths", chosen_lengths), ("rejected_lengths", rejected_lengths)):
        t, _ = to_tensor(value, name)
        check_finite(t, name)
        if not bool((t > 0).all()):
            raise ValueError(f"{name} must be positive token counts")


def simpo_loss(
    policy_chosen_logps,
    policy_rejected_logps,
    chosen_lengths,
    rejected_lengths,
    beta: float = 2.0,
    gamma: float = 0.5,
):
    """SimPO (Meng et al. 2024): −log σ(β[ℓ̄_w − ℓ̄_l] − γ), ℓ̄ = log π(y|x) / |y| (§8).

    Data contract: preference pairs, **no reference policy**, length-normalised
    (mean token log-prob). ``gamma`` is the target margin (TRL's ``simpo_gamma``).
    """
    beta = positive_scalar(beta, "beta")
    gamma = positive_scalar(gamma, "gamma", allow_zero=True)
    _lengths(chosen_lengths, rejected_lengths)
    (pw, pl, nw, nl), as_tensor = tensors(
        policy_chosen_logps=policy_chosen_logps,
        policy_rejected_logps=policy_rejected_logps,
        chosen_lengths=chosen_lengths,
        rejected_lengths=rejected_lengths,
    )
    margin = beta * (pw / nw - pl / nl) - gamma
    return output(-F.logsigmoid(margin), as_tensor)


def odds_ratio_penalty(policy_chosen_logps, policy_rejected_logps, chosen_lengths, rejected_lengths):
    """ORPO's preference term −log σ(log odds(y_w) − log odds(y_l)) per pair (Hong et al. 2024, §8).

    odds(y) = P/(1−P) with P = exp(ℓ̄), ℓ̄ = the mean token log-prob (sum / token count), as in
    the paper's Eq. (4) and TRL's ``ORPOTrainer.odds_ratio_loss`` (which returns log σ(·), the
    negative of this). Each mean must be < 0: a probability of 1 has infinite odds.
    """
    _lengths(chosen_lengths, rejected_lengths)
    (pw, pl, nw, nl), as_tensor = tensors(
        policy_chosen_logps=policy_chosen_logps,
        policy_rejected_logps=policy_rejected_logps,
        chosen_lengths=chosen_lengths,
        rejected_lengths=rejected_lengths,
    )
    mw, ml = pw / nw, pl / nl
    if not bool(((mw < 0) & (ml < 0)).all()):
        raise ValueError("log-probabilities must be < 0 for ORPO's odds (a probability of 1 has infinite odds)")

    def log_odds(m):
        return m - torch.log(-torch.expm1(m))  # log P − log(1 − P), stable

    return output(-F.logsigmoid(log_odds(mw) - log_odds(ml)), as_tensor)


def orpo_loss(
    policy_chosen_logps,
    policy_rejected_logps,
    chosen_lengths,
    rejected_lengths,
    beta: float = 0.1,
):
    """ORPO (Hong et al. 2024): NLL of the chosen answer + β · odds-ratio penalty (§8).

    Data contract: preference pairs, **no reference policy**, length-normalised: with
    ℓ̄ = mean token log-prob and odds(y) = P/(1−P), P = exp(ℓ̄), the loss is
    −ℓ̄_w − β·log σ(log odds(y_w) − log odds(y_l)) (``odds_ratio_penalty``). One joint objective
    replaces SFT + a separate alignment stage. ``beta`` is TRL's name for the paper's λ.
    """
    beta = positive_scalar(beta, "beta")
    penalty = odds_ratio_penalty(policy_chosen_logps, policy_rejected_logps, chosen_lengths, rejected_lengths)
    (pw, nw, pen), as_tensor = tensors(policy_chosen_logps=policy_chosen_logps, chosen_lengths=chosen_lengths,
                                       penalty=penalty)
    return output(-pw / nw + beta * pen, as_tensor)


def kto_loss(
    policy_logps,
    ref_logps,
    desirable,
    kl_reference=0.0,
    beta: float = 0.1,
    desirable_weight: float = 1.0,
    undesirable_weight: float = 1.0,
):
    """KTO (Ethayarajh et al. 2024): pointwise desirable / undesirable labels (§3, §8).

    Data contract: single answers with a binary label (no pairs), a reference policy.
    With log-ratio r = log π_θ − log π_ref and reference point z0 = ``kl_reference``:
    desirable answers cost w_d·(1 − σ(β(r − z0))), undesirable ones w_u·(1 − σ(β(z0 − r))).
    ``desirable`` is a boolean (or 0/1) array broadcasting with the log-probs. The method
    defines z0 as a batch KL estimate (``kto_reference_point``); here it is detached whatever the
    caller passes, so no gradient flows through it (the paper's and TRL's rule). The batch loss is
    the mean of these per-answer losses (TRL's ``losses.nanmean()``).
    """
    beta = positive_scalar(beta, "beta")
    wd = positive_scalar(desirable_weight, "desirable_weight")
    wu = positive_scalar(undesirable_weight, "undesirable_weight")
    label, _ = to_tensor(desirable, "desirable")
    if not bool(((label == 0) | (label == 1)).all()):
        raise ValueError("desirable must be booleans or 0/1 labels")
    (p, r, z0, lab), as_tensor = tensors(
        policy_logps=policy_logps, ref_logps=ref_logps, kl_reference=kl_reference, desirable=desirable
    )
    ratio, z0 = p - r, z0.detach()
    good = wd * (1 - torch.sigmoid(beta * (ratio - z0)))
    bad = wu * (1 - torch.sigmoid(beta * (z0 - ratio)))
    return output(torch.where(lab > 0.5, good, bad), as_tensor)


def mismatched_order(n: int) -> list[int]:
    """Which completion each row of a KTO batch is paired with to estimate z0: row j takes row j−1's.

    TRL's ``KTOTrainer`` rotates the completions of each batch by one, (x_1, y_n), (x_2, y_1), …,
    (x_n, y_{n−1}), so the mismatched outputs are the batch's own outputs paired with other
    prompts. Needs ``n >= 2`` (with one row the "mismatched" pair is the example itself, and z0
    would equal its own log-ratio, as TRL warns).
    """
    number(n, "n (the batch size)", integer=True, low=2, why=" to mismatch prompts and completions")
    return [(j - 1) % n for j in range(n)]


def kto_reference_point(policy_kl_logps, ref_kl_logps):
    """KTO's reference point z0 = max(0, mean(log π_θ(y′|x) − log π_ref(y′|x))), detached (§8).

    Ethayarajh et al. (2024) estimate z0 = KL(π_θ‖π_ref) on the batch itself: each prompt x is
    matched with an unrelated completion y′ of the batch (``mismatched_order``), the policy and
    reference log-probs of those pairs are averaged, clamped at 0 (a KL is never negative), and no
    gradient flows through z0 — it is a baseline the loss compares each answer's log-ratio to, not
    a quantity to optimise. TRL: ``kl = (KL_logps - ref_KL_logps).mean().detach().clamp(min=0)``.
    Returns a 0-d tensor (a float for non-tensor inputs).
    """
    (p, r), as_tensor = tensors(policy_kl_logps=policy_kl_logps, ref_kl_logps=ref_kl_logps)
    return output((p - r).mean().detach().clamp(min=0), as_tensor)


def label_balance(n_desirable: int, n_undesirable: int, *, desirable_weight: float = 1.0,
                  undesirable_weight: float = 1.0) -> float:
    """KTO's label balance λ_D·n_D / (λ_U·n_U): the paper advises [1, 4/3]; ``inf`` with no undesirable answer."""
    den = undesirable_weight * n_undesirable
    return desirable_weight * n_desirable / den if den > 0 else float("inf")
