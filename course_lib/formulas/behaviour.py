"""The behaviour correction: π_old / π_behaviour, kept apart from PPO's π_θ / π_old (§11).

Two ratios, two questions:

- ρ = π_θ / π_old (``policy_loss.clipped_surrogate``): how far the update has moved the policy
  from the trainer's own old policy on this batch. PPO's clip bounds its incentive.
- w = π_old / π_behaviour (here): the batch was sampled by another policy than the trainer's old
  one — weights K optimiser steps stale (an asynchronous rollout worker), or a sampler with
  another precision or temperature. Without w the update estimates the gradient at the wrong
  policy; with w it is reweighted to π_old's own distribution. Importance weights have heavy
  tails, so they are bounded: *truncated* (capped into [C_min, C_max]: biased, low variance) or
  *masked* (a token or a whole completion outside the band gets weight 0: it leaves the update).

The per-token objective becomes w · min(ρA, clip(ρ)A), exactly as TRL multiplies its per-token
loss by ``importance_sampling_ratio``; masked tokens keep their place in the averaging
denominator (TRL does the same). Names are TRL 1.16's ``GRPOConfig`` ones:

==========================================  ===================================================
``vllm_importance_sampling_correction``     False: no behaviour correction (w = 1)
``vllm_importance_sampling_mode``           ``token_truncate`` | ``token_mask`` |
                                            ``sequence_truncate`` | ``sequence_mask``
``vllm_importance_sampling_clip_min``       C_min (None: no lower bound)
``vllm_importance_sampling_clip_max``       C_max (None: no upper bound; TRL's default 3.0)
==========================================  ===================================================

A sequence mode uses one ratio per completion, exp(Σ_t log π_old − log π_behaviour) (a product,
not GSPO's length-normalised mean), applied to every token of it. ``mismatch`` gives the
diagnostics a dashboard shows: the KL between behaviour and old policy (k3 on the sampled
tokens, which the behaviour policy drew), the effective sample size of the weights, and the
share of tokens capped or masked.

``mismatched_sampler`` and ``sampler_entry`` describe a *deliberately* mismatched sampler
(``GRPOConfig.sampler_temperature``: no TRL name, since TRL never mismatches on purpose): it samples
at another temperature than the trainer's log-probs assume, so π_behaviour ≠ π_old with the same
weights, at K = 0 — the precision and kernel gaps of a vLLM sampler, made large enough to see.

Simplification: TRL's ``use_bias_correction_kl`` (the KL term reweighted by ρ) is not
implemented; the KL term to the reference is not multiplied by w (TRL does not either).
"""

from __future__ import annotations

import math

import torch

from course_lib._validate import choice, number, tensors, to_tensor
from course_lib.formulas.policy_loss import kl_estimate

IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def check_bounds(mode: str, clip_min: float | None, clip_max: float | None, *, prefix: str = "") -> None:
    """Raise ValueError naming the first bad bound (TRL's checks, plus: bounds are positive)."""
    choice(mode, prefix + "vllm_importance_sampling_mode", IS_MODES)
    for name, value in (("clip_min", clip_min), ("clip_max", clip_max)):
        number(value, f"{prefix}vllm_importance_sampling_{name}", low=0, none="no bound")
    if clip_min is not None and clip_max is not None and clip_min >= clip_max:
        raise ValueError(f"{prefix}vllm_importance_sampling_clip_min ({clip_min}) must be less than "
                         f"{prefix}vllm_importance_sampling_clip_max ({clip_max})")
    if mode.endswith("_truncate") and clip_min is None and clip_max is None:
        raise ValueError(f"{prefix}vllm_importance_sampling_mode={mode!r} truncates: set at least one of "
                         f"{prefix}vllm_importance_sampling_clip_min or {prefix}vllm_importance_sampling_clip_max")


def behaviour_weights(old_logps, sampler_logps, mask, mode: str = "sequence_mask", clip_min: float | None = None,
                      clip_max: float | None = 3.0, *, validate: bool = True):
    """``(weights, outside)``: the bounded ratio π_old/π_behaviour and where the bound acted.

    ``old_logps``, ``sampler_logps``: per-token log-probs (N, T) of the sampled tokens under the
    trainer's old policy and under the sampler; ``mask`` (N, T) marks real tokens. Token modes give
    ``weights`` of shape (N, T) (1 on padding), sequence modes (N, 1); ``outside`` (same shape,
    bool) is True where the ratio left [C_min, C_max] (capped by ``*_truncate``, zeroed by
    ``*_mask``). When sampler and old policy agree, every weight is exactly 1. A NaN sampler
    log-prob (a sampler's fault, not the trainer's) makes that token's log-ratio 0, no correction,
    as TRL's ``nan_to_num`` does, whether or not the inputs are validated (``validate`` checks the
    bounds, the shapes and that ``old_logps`` and ``mask`` are finite).
    """
    if validate:
        check_bounds(mode, clip_min, clip_max)
        (old, m), _ = tensors(old_logps=old_logps, mask=mask)
        behaviour = to_tensor(sampler_logps, "sampler_logps")[0].to(dtype=old.dtype, device=old.device)
        if old.ndim != 2 or old.shape != behaviour.shape or old.shape != m.shape:
            raise ValueError(f"old_logps, sampler_logps and mask must share one (N, T) shape; got "
                             f"{tuple(old.shape)}, {tuple(behaviour.shape)}, {tuple(m.shape)}")
    else:
        old, behaviour, m = old_logps, sampler_logps, mask
    log_w = torch.nan_to_num((old - behaviour) * m.to(old.dtype), nan=0.0)  # a NaN sampler log-prob: no correction
    if mode.startswith("sequence"):
        log_w = log_w.sum(dim=-1, keepdim=True)
    ratio = torch.exp(log_w)
    lo = -math.inf if clip_min is None else clip_min
    hi = math.inf if clip_max is None else clip_max
    outside = (ratio < lo) | (ratio > hi)
    if mode.endswith("_truncate"):
        weights = torch.clamp(ratio, min=clip_min, max=clip_max)
    else:
        weights = ratio.masked_fill(outside, 0.0)
    return weights, outside


def mismatch(old_logps, sampler_logps, mask, weights, outside) -> dict:
    """Diagnostics of the sampler/trainer mismatch on one batch, as 0-d tensors (no host read).

    - ``mismatch_kl``: KL(π_behaviour ‖ π_old), k3 per sampled token, mean over real tokens;
    - ``is_ess``: effective sample size of the weights as a share, (Σw)² / (n Σw²) over the real
      tokens (token modes) or the completions with a real token (sequence modes); 1 when every
      weight is equal, → 1/n when one dominates, 0 when all are masked;
    - ``is_clipped_fraction``: share of real tokens whose weight was capped or masked.
    """
    m = mask.to(old_logps.dtype)
    tokens = m.sum().clamp(min=1)
    kl = (kl_estimate(sampler_logps, old_logps, "k3", validate=False) * m).sum() / tokens
    if weights.shape[-1] == 1 and m.shape[-1] != 1:  # a sequence mode: one weight per completion
        unit_mask = (m.sum(-1, keepdim=True) > 0).to(m.dtype)
    else:
        unit_mask = m
    w = weights * unit_mask
    ess = w.sum() ** 2 / ((w**2).sum() * unit_mask.sum()).clamp(min=1e-30)
    clipped = (outside.to(m.dtype) * m).sum() / tokens
    return {"mismatch_kl": kl, "is_ess": ess, "is_clipped_fraction": clipped}


def mismatched_sampler(cfg) -> bool:
    """Does the sampler sample at another temperature than the trainer's log-probs assume (``sampler_temperature``)?

    A deliberate fault with no TRL name: in production the sampler (vLLM, bf16 kernels, another
    batch order) and the trainer disagree a little even with the same weights; here the gap is made
    on purpose and large enough to see, with the same weights, at K = 0.
    """
    return cfg.sampler_temperature is not None and float(cfg.sampler_temperature) != float(cfg.temperature)


def sampler_entry(cfg) -> str:
    """The passport's ``systems.sampler``: does the sampler draw from the distribution the trainer's log-probs
    assume?"""
    if mismatched_sampler(cfg):
        fix = (f"corrected by pi_old/pi_behaviour ({cfg.vllm_importance_sampling_mode})"
               if cfg.vllm_importance_sampling_correction else "not corrected")
        return (f"deliberately mismatched: samples at temperature {cfg.sampler_temperature}, the trainer's log-probs "
                f"at temperature {cfg.temperature}; {fix}")
    return f"matched: samples at the trainer's temperature {cfg.temperature}"
