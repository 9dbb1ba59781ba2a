"""Rollouts: sample G completions per prompt, score them, mask them, and their log-probs.

Lecture §9 (groups of G completions per prompt), §11 (generation with a KV cache), §12
(zero-variance groups and DAPO's dynamic sampling), §15 (the checker is the reward). Every
on-policy trainer needs the same four things, so they live here and GRPO (``course_lib.grpo``)
and a PPO trainer reuse them:

1. ``generate`` / ``sample_groups``: completions with masks and truncation flags;
2. a reward callable from ``course_lib.rewards.resolve_reward`` scores them (batched);
3. ``collect_rollouts``: one batch of B groups under a zero-variance policy (keep, drop,
   resample) with the statistics a dashboard shows;
4. ``sequence_logprobs``: per-token log-probs of the sampled completions under a policy
   (the frozen "old" policy or the reference), without a graph.

Simplifications, said out loud:
- Prompts all have the same length (see ``course_lib.task``), so no left padding is needed.
- Sampling is plain temperature sampling (no top-k/top-p), so the sampling distribution is
  exactly the policy whose log-probs the losses use. ``<pad>`` and ``<bos>`` are suppressed.
- A completion with no ``<eos>`` within ``max_completion_length`` tokens is *truncated*: it
  keeps its tokens and gets what the reward says (the strict checker: 0).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from course_lib.advantages import zero_variance_groups
from course_lib.model import completion_logprobs
from course_lib.runtime import autocast
from course_lib.task import AdditionTask, CharTokenizer


@dataclass
class Rollout:
    """Prompts and their sampled completions, as the trainers consume them."""

    input_ids: torch.Tensor  # (N, prompt_length + L) prompt then completion
    attention_mask: torch.Tensor  # 1 on prompt and completion tokens up to and including <eos>
    completion_mask: torch.Tensor  # 1 on completion tokens up to and including <eos>
    completions: torch.Tensor  # (N, L) generated ids (pad after <eos>)
    truncated: torch.Tensor  # (N,) bool: no <eos> within max_completion_length
    seconds: float


def completion_masks(completions: torch.Tensor, eos_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask up to and including the first <eos>; rows with no <eos> are truncated (all kept)."""
    is_eos = completions == eos_token_id
    seen_before = (is_eos.long().cumsum(-1) - is_eos.long()) > 0  # an <eos> strictly earlier
    mask = (~seen_before).long()
    truncated = ~is_eos.any(-1)
    return mask, truncated


@torch.no_grad()
def generate(
    model,
    prompt_ids: torch.Tensor,
    tokenizer: CharTokenizer,
    *,
    max_completion_length: int,
    num_generations: int = 1,
    temperature: float = 1.0,
    greedy: bool = False,
    use_cache: bool = True,
) -> Rollout:
    """Sample completions with transformers' ``generate`` (KV cache on by default, §11).

    Each prompt row is repeated ``num_generations`` times (consecutive rows form a group).
    Sequences that finish early are padded with ``<pad>``; a completion with no ``<eos>``
    within ``max_completion_length`` tokens is *truncated* and flagged.
    """
    was_training = model.training
    model.eval()
    start = time.perf_counter()
    attention = torch.ones_like(prompt_ids)
    kwargs = dict(do_sample=False) if greedy else dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
    out = model.generate(
        input_ids=prompt_ids,
        attention_mask=attention,
        max_new_tokens=max_completion_length,
        num_return_sequences=num_generations,
        pad_token_id=tokenizer.eos_token_id,  # finished rows are filled with <eos>, see below
        eos_token_id=tokenizer.eos_token_id,
        use_cache=use_cache,
        suppress_tokens=[tokenizer.pad_token_id, tokenizer.bos_token_id],
        **kwargs,
    )
    if prompt_ids.device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    if was_training:
        model.train()
    plen = prompt_ids.shape[1]
    completions = out[:, plen:]
    if completions.shape[1] < max_completion_length:  # every row stopped early
        pad = torch.full(
            (completions.shape[0], max_completion_length - completions.shape[1]),
            tokenizer.pad_token_id,
            dtype=completions.dtype,
            device=completions.device,
        )
        completions = torch.cat([completions, pad], dim=1)
    cmask, truncated = completion_masks(completions, tokenizer.eos_token_id)
    # transformers drops an all-ones attention mask inside generate; feeding <pad> back for
    # finished rows would then trigger its "padding without attention mask" warning. So
    # finished rows are filled with <eos> while generating and turned into <pad> here.
    completions = completions.masked_fill(cmask == 0, tokenizer.pad_token_id)
    prompts = prompt_ids.repeat_interleave(num_generations, dim=0)
    input_ids = torch.cat([prompts, completions], dim=1)
    completion_mask = torch.cat([torch.zeros_like(prompts), cmask], dim=1)
    attention_mask = torch.cat([torch.ones_like(prompts), cmask], dim=1)
    return Rollout(input_ids, attention_mask, completion_mask, completions, truncated, seconds)


def sample_groups(model, task: AdditionTask, pairs, *, num_generations: int, max_completion_length: int,
                  temperature: float = 1.0) -> Rollout:
    """G sampled completions for each prompt ``(a, b)`` in ``pairs``; rows ``g*G … g*G+G−1`` are group g."""
    device = next(model.parameters()).device
    with autocast(device):
        return generate(
            model, task.encode_prompts(pairs, device), task.tokenizer, max_completion_length=max_completion_length,
            num_generations=num_generations, temperature=temperature,
        )


def score_groups(reward_fn, pairs, roll: Rollout, num_generations: int) -> torch.Tensor:
    """Rewards of shape ``(len(pairs), G)`` from a batched reward callable (one call per batch)."""
    per_row = [p for p in pairs for _ in range(num_generations)]
    rewards = reward_fn(per_row, roll.completions)
    return rewards.float().cpu().view(len(pairs), num_generations)


def collect_rollouts(model, task: AdditionTask, cfg, generator: torch.Generator, reward_fn) -> dict:
    """Sample, score and filter one batch of B groups according to ``cfg.zero_variance``.

    ``cfg`` needs ``batch_prompts``, ``num_generations``, ``max_completion_length``,
    ``temperature``, ``zero_variance`` and ``max_resample_rounds`` (``GRPOConfig`` has them).
    Returns ``{"stats": …}`` plus, when any group is kept, ``"batch"`` (``input_ids``,
    ``attention_mask``, ``completion_mask``, ``truncated``, ``rewards`` of shape (B', G)) and
    ``"pairs"``. Zero-variance groups are decided by ``advantages.zero_variance_groups``.
    """
    G = cfg.num_generations
    gen_seconds, groups_sampled, rounds = 0.0, 0, 0
    kept_rows, kept_rewards, kept_pairs = [], [], []
    all_rewards, all_truncated, all_lengths, zero_var = [], [], [], []
    while True:
        pairs = task.sample_pairs(cfg.batch_prompts, generator)
        roll = sample_groups(model, task, pairs, num_generations=G, max_completion_length=cfg.max_completion_length,
                             temperature=cfg.temperature)
        gen_seconds += roll.seconds
        rewards = score_groups(reward_fn, pairs, roll, G)
        degenerate = zero_variance_groups(rewards)
        groups_sampled += len(pairs)
        all_rewards.append(rewards)
        all_truncated.append(roll.truncated.view(len(pairs), G).cpu())
        all_lengths.append(roll.completion_mask.sum(-1).view(len(pairs), G).cpu().float())
        zero_var.append(degenerate)
        keep = torch.ones_like(degenerate) if cfg.zero_variance == "keep" else ~degenerate
        for gi in torch.nonzero(keep).flatten().tolist():
            if len(kept_pairs) < cfg.batch_prompts:
                kept_pairs.append(pairs[gi])
                kept_rows.append((roll, gi))
                kept_rewards.append(rewards[gi])
        rounds += 1
        if cfg.zero_variance != "resample" or len(kept_pairs) >= cfg.batch_prompts or rounds > cfg.max_resample_rounds:
            break
    lengths = torch.cat(all_lengths)
    stats = {
        "reward_mean": float(torch.cat(all_rewards).mean()),
        "zero_variance_rate": float(torch.cat(zero_var).float().mean()),
        "completion_length": float(lengths.mean()),
        "truncated_rate": float(torch.cat(all_truncated).float().mean()),
        "groups_sampled": groups_sampled,
        "groups_used": len(kept_pairs),
        "gen_seconds": gen_seconds,
        "generated_tokens": int(lengths.sum()),
    }
    if not kept_pairs:
        return {"stats": stats}

    def gather(field):
        return torch.cat([getattr(roll, field)[gi * G : (gi + 1) * G] for roll, gi in kept_rows])

    batch = {
        "input_ids": gather("input_ids"),
        "attention_mask": gather("attention_mask"),
        "completion_mask": gather("completion_mask"),
        "truncated": gather("truncated"),
        "rewards": torch.stack(kept_rewards),
    }
    return {"stats": stats, "batch": batch, "pairs": kept_pairs}


@torch.no_grad()
def sequence_logprobs(model, batch: dict, *, prompt_length: int, temperature: float = 1.0) -> torch.Tensor:
    """Per-token log-probs of the batch's completion tokens under ``model``, shape (N, L), no graph.

    The frozen "old" policy's log-probs (for μ > 1 inner epochs) and the reference's (for a KL).
    """
    device = next(model.parameters()).device
    with autocast(device):
        logps, _ = completion_logprobs(
            model, batch["input_ids"], batch["attention_mask"], batch["completion_mask"],
            temperature=temperature, start=prompt_length, validate=False,
        )
    return logps.float()
