"""Back-of-envelope budgets: persistent model-state memory (§10) and rollout vs update time (§11).

Deliberately simplified, as the lecture's worked examples are: memory counts persistent model
states only (no activations, KV cache, buffers, sharding, PEFT); time counts generated tokens
at an assumed per-device decode rate and one training pass at 6·N·D FLOPs (no prefill,
reward or reference scoring, extra epochs or communication).
"""

from __future__ import annotations

from collections.abc import Sequence

from course_lib._validate import choice, positive_scalar

GIB = 2**30
# Teaching Adam stack (§10): bf16 weights 2 + bf16 grads 2 + fp32 master 4 + Adam m, v 4 + 4.
BYTES_PER_PARAM = {"train": 16, "frozen_bf16": 2}
STACKS = {
    "ppo": ("train", "train", "frozen_bf16", "frozen_bf16"),  # policy, critic, reference, reward
    "dpo": ("train", "frozen_bf16"),  # policy + resident reference
    "dpo_cached_ref": ("train",),  # reference log-probs precomputed: approaches SFT
    "sft": ("train",),
}


def stage_memory_gib(n_params: float, stack: Sequence[str] | str) -> float:
    """GiB of persistent model states for the roles in ``stack``.

    ``stack`` is a list of ``"train"`` (16 B/param) and ``"frozen_bf16"`` (2 B/param)
    entries, or a name from ``STACKS`` (``"ppo"``, ``"dpo"``, ``"dpo_cached_ref"``, ``"sft"``).
    8.03e9 params: PPO 269.2 GiB, DPO 134.6 GiB. Activations and rollout state excluded.
    """
    n = positive_scalar(n_params, "n_params")
    if isinstance(stack, str):
        stack = STACKS[choice(stack, "stack", STACKS)]
    if len(stack) == 0:
        raise ValueError("stack must list at least one role ('train' or 'frozen_bf16')")
    for role in stack:
        choice(role, "stack entry", BYTES_PER_PARAM)
    return sum(BYTES_PER_PARAM[role] for role in stack) * n / GIB


def rollout_tokens(prompts: int, completions_per_prompt: int, tokens_per_completion: float) -> float:
    """Generated tokens in one rollout batch: prompts × completions × tokens (§11)."""
    return (
        positive_scalar(prompts, "prompts")
        * positive_scalar(completions_per_prompt, "completions_per_prompt")
        * positive_scalar(tokens_per_completion, "tokens_per_completion")
    )


def rollout_generation_seconds(
    prompts: int,
    completions_per_prompt: int,
    tokens_per_completion: float,
    tokens_per_second_per_device: float,
    devices: int,
) -> float:
    """Decode time for one rollout batch at an assumed aggregate per-device rate (§11).

    256 × 8 × 4000 tokens at 209.4 tok/s on 8 devices → 4890.2 s = 81.5 min.
    """
    tokens = rollout_tokens(prompts, completions_per_prompt, tokens_per_completion)
    rate = positive_scalar(tokens_per_second_per_device, "tokens_per_second_per_device")
    return tokens / (rate * positive_scalar(devices, "devices"))


def update_seconds(
    n_params: float, tokens: float, flops_per_device: float, mfu: float, devices: int
) -> float:
    """One training pass over ``tokens`` at 6·N·D FLOPs (§11).

    ``mfu`` (model FLOPs utilisation) must lie in (0, 1]. 8.03e9 params, 8,192,000 tokens,
    990e12 FLOP/s, MFU 0.4, 8 devices → 124.6 s = 2.076444 min.
    """
    n = positive_scalar(n_params, "n_params")
    d = positive_scalar(tokens, "tokens")
    f = positive_scalar(flops_per_device, "flops_per_device")
    u = positive_scalar(mfu, "mfu")
    if u > 1:
        raise ValueError(f"mfu must lie in (0, 1]; got {mfu!r}")
    return 6 * n * d / (f * u * positive_scalar(devices, "devices"))
