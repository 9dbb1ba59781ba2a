"""Rollouts: sample G completions per prompt, score them, mask them, and their log-probs.

Lecture §9 (groups of G completions per prompt), §11 (generation with a KV cache), §12
(zero-variance groups and DAPO's dynamic sampling), §15 (the checker is the reward). Every
on-policy trainer needs the same four things, so they live here and GRPO (``course_lib.trainers.grpo``)
and a PPO trainer reuse them:

1. ``generate`` / ``sample_groups``: completions with masks and truncation flags (a KV-cached
   sampling loop: each prompt's forward is shared by its G completions);
2. a reward callable from ``course_lib.tinygpt.rewards.resolve_reward`` scores them (batched);
3. ``collect_rollouts``: one batch of B groups under a zero-variance policy (keep, drop,
   resample) with the statistics a dashboard shows;
4. ``sequence_logprobs``: per-token log-probs of the sampled completions under a policy
   (the frozen "old" policy or the reference), without a graph.

Simplifications, said out loud:
- Prompts all have the same length (see ``course_lib.tinygpt.task``), so no left padding is needed.
- Sampling is plain temperature sampling (no top-k/top-p), so the sampling distribution is
  exactly the policy whose log-probs the losses use. ``<pad>`` and ``<bos>`` are suppressed.
- A completion with no ``<eos>`` within ``max_completion_length`` tokens is *truncated*: it
  keeps its tokens and gets what the reward says (the strict checker: 0).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from course_lib._validate import number
from course_lib.formulas.advantages import zero_variance_groups
from course_lib.tinygpt.model import completion_logprobs, kv_cache, suppressed_index, with_kv_cache
from course_lib.tinygpt.rewards import Scored, score
from course_lib.tinygpt.runtime import autocast, to_device
from course_lib.tinygpt.task import AdditionTask, CharTokenizer


@dataclass
class Rollout:
    """Prompts and their sampled completions, as the trainers consume them."""

    input_ids: torch.Tensor  # (N, prompt_length + L) prompt then completion
    attention_mask: torch.Tensor  # 1 on prompt and completion tokens up to and including <eos>
    completion_mask: torch.Tensor  # 1 on completion tokens up to and including <eos>
    completions: torch.Tensor  # (N, L) generated ids (pad after <eos>)
    truncated: torch.Tensor  # (N,) bool: no <eos> within max_completion_length
    seconds: float
    entropy: torch.Tensor | None = None  # (N, L) entropy of each sampling distribution (0 after <eos>); None if greedy
    logps: torch.Tensor | None = None  # (N, L) log-prob of each sampled token under the sampler (0 after <eos>)
    episodes: list[dict] | None = None  # with an environment: each row's episode (reward, tool calls, …)


def completion_masks(completions: torch.Tensor, eos_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask up to and including the first <eos>; rows with no <eos> are truncated (all kept)."""
    is_eos = completions == eos_token_id
    seen_before = (is_eos.long().cumsum(-1) - is_eos.long()) > 0  # an <eos> strictly earlier
    mask = (~seen_before).long()
    truncated = ~is_eos.any(-1)
    return mask, truncated


STOP_CHECK_EVERY = 8  # tokens between "has every row finished?" host reads on an accelerator


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
    min_completion_length: int = 0,
    stop_check_every: int | None = None,
    episodes=None,
) -> Rollout:
    """Sample completions token by token, with a KV cache by default (§11).

    Each prompt row is repeated ``num_generations`` times (consecutive rows form a group). With
    the cache, each prompt is run through the model once and its keys/values are shared by
    the G completions of its group; every later step feeds one token per row. Without it,
    every step re-runs the whole sequence (for comparison: the same samples, more work).
    ``<pad>`` and ``<bos>`` are never sampled; ``<eos>`` not before ``min_completion_length``
    tokens (for timing at a fixed length). Rows that finished are padded with ``<pad>``; a
    completion with no ``<eos>`` within ``max_completion_length`` tokens is *truncated* and
    flagged. Stops early once every row has finished: whether they have is a host read, done
    every ``stop_check_every`` tokens (default: every token on the CPU, where it costs nothing,
    every ``STOP_CHECK_EVERY`` on an accelerator, where each read waits for the device). Steps
    after the last row finished only add ``<pad>``, so the completions, masks, entropies and
    log-probs are the same for every choice; only the RNG state afterwards differs. When sampling, the entropy of each
    sampling distribution and the log-prob of each sampled token are kept (the softmax is
    computed anyway): the policy entropy a dashboard shows, and π_old's log-probs for a logged
    KL, at no extra forward.

    ``episodes`` (``course_lib.tinygpt.environments.EpisodeDriver``) makes every row an episode with an
    environment: after each sampled token the driver may replace it with an environment token
    (forced, not sampled) or end the row. Environment tokens then get 0 in ``completion_mask``,
    ``entropy`` and ``logps`` (they are context, not actions) and 1 in ``attention_mask``; a row
    is truncated when it reaches the length without ending; ``Rollout.episodes`` holds each
    row's episode. Without a call, this is exactly the sampling above (the same random draws).
    """
    was_training = model.training
    model.eval()
    start = time.perf_counter()
    device = prompt_ids.device
    n = prompt_ids.shape[0] * num_generations
    plen = prompt_ids.shape[1]
    never = suppressed_index(tokenizer.pad_token_id, tokenizer.bos_token_id, device)
    eos = tokenizer.eos_token_id
    if stop_check_every is None:
        stop_check_every = 1 if device.type == "cpu" else STOP_CHECK_EVERY
    number(stop_check_every, "stop_check_every", integer=True, low=1, why=" (or None for the device default)")
    prompts = prompt_ids.repeat_interleave(num_generations, dim=0)
    if use_cache:
        out = model(input_ids=prompt_ids, use_cache=True)  # one prompt forward per group
        cache = kv_cache(out)
        cache.batch_repeat_interleave(num_generations)
        logits = out.logits[:, -1].repeat_interleave(num_generations, dim=0)
    else:
        logits = model(input_ids=prompts, use_cache=False).logits[:, -1]
    tokens = torch.full((n, max_completion_length), tokenizer.pad_token_id, dtype=torch.long, device=device)
    finished = torch.zeros(n, dtype=torch.bool, device=device)
    entropy = None if greedy else torch.zeros(n, max_completion_length, device=device)
    logps = None if greedy else torch.zeros(n, max_completion_length, device=device)
    if episodes is not None:
        forced = torch.zeros(n, max_completion_length, dtype=torch.bool, device=device)
        live = torch.zeros(n, max_completion_length, dtype=torch.bool, device=device)
    for t in range(max_completion_length):
        logits = logits.float().index_fill(-1, never, -math.inf)
        if t < min_completion_length:
            logits[:, eos] = -math.inf
        if greedy:
            nxt = logits.argmax(-1)
        else:
            probs = torch.softmax(logits / temperature, dim=-1)
            entropy[:, t] = torch.special.entr(probs).sum(-1)  # −Σ p log p, with 0 · log 0 = 0
            nxt = torch.multinomial(probs, 1).squeeze(-1)
            logps[:, t] = torch.log(probs.gather(-1, nxt[:, None]).squeeze(-1))
        if episodes is not None:  # the environment's turn: forced tokens, and episodes it ends
            live[:, t] = ~finished
            nxt, forced[:, t], ended = episodes.step(nxt, finished)
        tokens[:, t] = nxt.masked_fill(finished, tokenizer.pad_token_id)
        finished |= nxt == eos
        if episodes is not None:
            finished |= ended
        if t + 1 == max_completion_length or ((t + 1) % stop_check_every == 0 and bool(finished.all())):
            break
        step_ids = nxt.masked_fill(finished, eos)[:, None]  # finished rows keep feeding a harmless token
        if use_cache:
            out = model(input_ids=step_ids, use_cache=True, **with_kv_cache(cache),
                        position_ids=torch.full((n, 1), plen + t, dtype=torch.long, device=device))
            cache = kv_cache(out)
            logits = out.logits[:, -1]
        else:
            logits = model(input_ids=torch.cat([prompts, tokens[:, : t + 1]], dim=1), use_cache=False).logits[:, -1]
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    if was_training:
        model.train()
    cmask, truncated = completion_masks(tokens, eos)
    if episodes is not None:
        cmask, truncated = (live & ~forced).long(), ~finished
    input_ids = torch.cat([prompts, tokens], dim=1)
    completion_mask = torch.cat([torch.zeros_like(prompts), cmask], dim=1)
    attention_mask = torch.cat([torch.ones_like(prompts), cmask if episodes is None else live.long()], dim=1)
    if entropy is not None:
        entropy, logps = entropy * cmask, logps * cmask
    return Rollout(input_ids, attention_mask, completion_mask, tokens, truncated, seconds, entropy, logps,
                   episodes.finish(truncated) if episodes is not None else None)


def sample_groups(model, task: AdditionTask, pairs, *, num_generations: int, max_completion_length: int,
                  temperature: float = 1.0) -> Rollout:
    """G sampled completions for each prompt ``(a, b)`` in ``pairs``; rows ``g*G … g*G+G−1`` are group g.

    On a task with an environment (``course_lib.tinygpt.environments.EnvTask``) each row is an episode.
    """
    device = next(model.parameters()).device
    episodes = task.episodes(pairs, num_generations) if hasattr(task, "episodes") else None
    with autocast(device):
        return generate(
            model, task.encode_prompts(pairs, device), task.tokenizer, max_completion_length=max_completion_length,
            num_generations=num_generations, temperature=temperature, episodes=episodes,
        )


def score_groups(reward_fn, pairs, roll: Rollout, num_generations: int, *, scored: bool = False):
    """Rewards of shape ``(len(pairs), G)`` from a batched reward callable (one call per batch).

    ``scored=True`` returns ``rewards.Scored`` instead: the rewards so shaped, and the per-row
    verifier failures and overlong penalties when the reward reports them (``rewards.score``).
    Episodes (``roll.episodes``) are scored by their environment's verifier instead.
    """
    if roll.episodes is not None:
        rewards = torch.tensor([e["reward"] for e in roll.episodes]).view(len(pairs), num_generations)
        failed = torch.tensor([e["verifier_failed"] for e in roll.episodes])
        return Scored(rewards, failed) if scored else rewards
    per_row = [p for p in pairs for _ in range(num_generations)]
    out = score(reward_fn, per_row, roll.completions)
    rewards = out.rewards.float().cpu().view(len(pairs), num_generations)
    return out._replace(rewards=rewards) if scored else rewards


def next_length_cap(lengths, *, quantile: float, margin: int, floor: int, ceiling: int) -> int:
    """The adaptive completion length: the next step's generation cap from this step's completion lengths.

    ``ceil(q-quantile of lengths) + margin``, never below ``floor`` (the longest right answer plus
    ``<eos>``: no right answer is ever cut) and never above ``ceiling`` (``max_completion_length``).
    Lengths count completion tokens up to and including ``<eos>``; a truncated completion counts
    the cap it hit, so with ``margin >= 1`` a cap that cut answers grows back by ``margin`` per step.
    """
    if floor > ceiling:
        raise ValueError(f"floor ({floor}) must be <= ceiling ({ceiling}): max_completion_length cannot hold the "
                         "longest right answer")
    values = torch.as_tensor(lengths, dtype=torch.float64).flatten()
    if values.numel() == 0:
        return ceiling
    q = math.ceil(float(torch.quantile(values, quantile)) - 1e-9)
    return int(min(ceiling, max(floor, q + margin)))


def _pad_to(roll: Rollout, length: int, pad_token_id: int) -> Rollout:
    """``roll`` with its completions right-padded to ``length`` tokens (pad, zero masks): batches keep one width."""
    extra = length - roll.completions.shape[1]
    if extra <= 0:
        return roll

    def pad(t, value):
        return None if t is None else torch.nn.functional.pad(t, (0, extra), value=value)

    return Rollout(pad(roll.input_ids, pad_token_id), pad(roll.attention_mask, 0), pad(roll.completion_mask, 0),
                   pad(roll.completions, pad_token_id), roll.truncated, roll.seconds, pad(roll.entropy, 0.0),
                   pad(roll.logps, 0.0), roll.episodes)


def collect_rollouts(model, task: AdditionTask, cfg, generator: torch.Generator, reward_fn, *,
                     max_length: int | None = None) -> dict:
    """Sample, score and filter one batch of B groups according to ``cfg.zero_variance``.

    ``cfg`` needs ``batch_prompts``, ``num_generations``, ``max_completion_length``,
    ``temperature``, ``zero_variance`` and ``max_resample_rounds`` (``GRPOConfig`` has them).
    Zero-variance groups are decided by ``advantages.zero_variance_groups``. ``keep`` keeps
    them (zero advantage: their rows stay in every averaging denominator); ``drop`` removes
    them from the batch, so their rows leave the denominators too (lecture §9: "dropping a
    group also changes the averaging denominator"); ``resample`` replaces them with
    informative groups from up to ``max_resample_rounds`` fresh draws, and drops what it could
    not replace. Returns ``{"stats": …}`` plus, when at least one group is left, ``"batch"``
    (``input_ids``, ``attention_mask``, ``completion_mask`` and ``truncated`` per row,
    ``rewards`` of shape (groups left, G), ``sampler_logps`` (N, L): the sampled tokens' log-probs
    under the sampling policy, and ``informative``: per group, a Python bool, False for a
    zero-variance group, whose advantages are zero) and ``"pairs"``. ``stats["entropy"]`` is
    the sampling distributions' entropy per completion token, over every sampled row; when the
    reward reports them (a checker: ``rewards.CheckerReward``), ``verifier_failures`` (count)
    and ``verifier_failure_rate`` over every sampled row, and ``overlong_penalty`` (mean) when
    it is shaped (``rewards.OverlongShaped``).

    ``max_length`` (the adaptive completion length, ``next_length_cap``) caps this batch's generation
    below ``cfg.max_completion_length``; completions are padded back to ``cfg.max_completion_length``
    so every batch has one width (a constant unit still divides by L_max). ``stats["length_cap"]`` is
    the cap used and the result's ``"lengths"`` every sampled completion's length. A config's
    ``sampler_temperature`` (GRPO's deliberately mismatched sampler) replaces ``cfg.temperature`` for
    sampling only: ``sampler_logps`` are then the log-probs at the sampler's temperature.
    """
    G, B = cfg.num_generations, cfg.batch_prompts
    cap = cfg.max_completion_length if max_length is None else max_length
    temperature = getattr(cfg, "sampler_temperature", None) or cfg.temperature
    gen_seconds, groups_sampled, rounds = 0.0, 0, 0
    used, spare = [], []  # (roll, group index, rewards, pair): groups in the batch; degenerate ones dropped
    all_rewards, all_truncated, all_lengths, all_entropy, zero_var, episodes = [], [], [], [], [], []
    failures, penalties = [], []  # per sampled row, when the reward reports them
    while True:
        pairs = task.sample_pairs(B, generator)
        roll = sample_groups(model, task, pairs, num_generations=G, max_completion_length=cap, temperature=temperature)
        roll = _pad_to(roll, cfg.max_completion_length, task.tokenizer.pad_token_id)
        gen_seconds += roll.seconds
        scored = score_groups(reward_fn, pairs, roll, G, scored=True)
        rewards = scored.rewards
        if scored.verifier_failed is not None:
            failures.append(scored.verifier_failed.cpu())
        if scored.overlong_penalty is not None:
            penalties.append(scored.overlong_penalty.cpu())
        degenerate = zero_variance_groups(rewards).tolist()
        groups_sampled += len(pairs)
        all_rewards.append(rewards)
        all_truncated.append(roll.truncated.view(len(pairs), G).cpu())
        all_lengths.append(roll.completion_mask.sum(-1).view(len(pairs), G).cpu().float())
        all_entropy.append(roll.entropy.sum().cpu())
        zero_var += degenerate
        episodes += roll.episodes or []
        for gi, flat in enumerate(degenerate):
            group = (roll, gi, rewards[gi], pairs[gi], not flat)
            (spare if flat and cfg.zero_variance != "keep" else used).append(group)
        rounds += 1
        if cfg.zero_variance != "resample" or len(used) >= B or rounds > cfg.max_resample_rounds:
            break
    used = used[:B]
    lengths = torch.cat(all_lengths)
    stats = {
        "reward_mean": float(torch.cat(all_rewards).mean()),
        "zero_variance_rate": sum(zero_var) / len(zero_var),
        "completion_length": float(lengths.mean()),
        "truncated_rate": float(torch.cat(all_truncated).float().mean()),
        "groups_sampled": groups_sampled,
        "groups_used": len(used),
        "gen_seconds": gen_seconds,
        "generated_tokens": int(lengths.sum()),
        "entropy": float(torch.stack(all_entropy).sum() / lengths.sum()),
    }
    if max_length is not None:  # the adaptive completion length: the cap this batch was sampled with
        stats["length_cap"] = cap
    if episodes:  # with an environment: what the dashboard shows about tool use (§16)
        from course_lib.tinygpt.environments import episode_stats

        stats.update(episode_stats(episodes))
    if failures:  # the verifier raised or could not parse (rewards.CheckerReward), over every sampled row
        failed = torch.cat(failures)
        stats["verifier_failures"] = int(failed.sum())
        stats["verifier_failure_rate"] = float(failed.float().mean())
    if penalties:  # DAPO's overlong shaping (rewards.OverlongShaped), mean over every sampled row
        stats["overlong_penalty"] = float(torch.cat(penalties).mean())
    if not used:
        return {"stats": stats, "lengths": lengths}
    groups = used  # dropped groups leave the batch (and every denominator)

    def gather(field):
        return torch.cat([getattr(roll, field)[gi * G : (gi + 1) * G] for roll, gi, *_ in groups])

    device = groups[0][0].input_ids.device
    batch = {
        "input_ids": gather("input_ids"),
        "attention_mask": gather("attention_mask"),
        "completion_mask": gather("completion_mask"),
        "truncated": gather("truncated"),
        "sampler_logps": gather("logps"),
        "rewards": to_device(torch.stack([r for _, _, r, _, _ in groups]), device),  # pinned, non-blocking
        "informative": [informative for *_, informative in groups],
    }
    return {"stats": stats, "batch": batch, "pairs": [p for _, _, _, p, _ in groups], "lengths": lengths}


@torch.no_grad()
def sequence_logprobs(model, batch: dict, *, prompt_length: int, temperature: float = 1.0,
                      group_size: int = 1) -> torch.Tensor:
    """Per-token log-probs of the batch's completion tokens under ``model``, shape (N, L), no graph.

    The reference's log-probs (for a KL), or a frozen policy's. ``group_size=G`` shares each
    group's prompt forward (``completion_logprobs``).
    """
    device = next(model.parameters()).device
    with autocast(device):
        logps, _ = completion_logprobs(
            model, batch["input_ids"], batch["attention_mask"], batch["completion_mask"],
            temperature=temperature, start=prompt_length, validate=False, group_size=group_size,
        )
    return logps.float()
