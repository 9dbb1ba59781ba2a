"""Held-out evaluation of the tiny GPT: greedy exact match, the loose checker, the carry split.

Lecture §15 (a held-out test with the strict checker is the honest measurement). Every
trainer and notebook reads accuracy from here.

Simplifications, said out loud: greedy decoding only (no sampling at evaluation), on the
task's fixed held-out prompts, which are never used as demonstrations or training prompts.

``reference_kl`` is the KL measurement on the tiny GPT: the sequence-level KL(π_θ ‖ π_ref) on the
held-out prompts, the x-axis of the accuracy–KL frontier (notebook "The KL term", the benchmark
``benchmarks/tinygpt_kl_frontier.py``); its exact categorical counterpart is ``course_lib.formulas.kl``.
"""

from __future__ import annotations

import torch

from course_lib._validate import choice, number
from course_lib.formulas.policy_loss import kl_estimate
from course_lib.tinygpt.model import completion_logprobs
from course_lib.tinygpt.rollout import generate
from course_lib.tinygpt.runtime import autocast
from course_lib.tinygpt.task import AdditionTask


@torch.no_grad()
def evaluate(model, task: AdditionTask, *, batch_size: int = 512, max_completion_length: int | None = None) -> dict:
    """Greedy decoding on the held-out prompts.

    Returns strict exact match (``accuracy``), the loose checker's score (``loose_accuracy``)
    and strict accuracy split by whether the ones column carries (``accuracy_carry`` /
    ``accuracy_no_carry``; ``None`` when the held-out set has no such prompt) — the split that
    shows the flawed teacher's mark. On a task with an environment (``environments.EnvTask``)
    each prompt is a greedy episode up to the task's ``episode_length`` (``max_completion_length``
    is then not used), scored by the environment, and ``tool_use_carry`` / ``tool_use_no_carry``
    give the share of episodes that call the tool.
    """
    device = next(model.parameters()).device
    length = max_completion_length or task.answer_length
    env = hasattr(task, "episodes")  # a task with an environment: every prompt is an episode
    if env:
        length = task.episode_length
    pairs = task.heldout_pairs
    if not pairs:
        raise ValueError("the task has no held-out prompts (task.n_heldout must be >= 1)")
    strict, loose, calls = [], [], []
    for i in range(0, len(pairs), batch_size):
        chunk = pairs[i : i + batch_size]
        with autocast(device):
            roll = generate(model, task.encode_prompts(chunk, device), task.tokenizer, max_completion_length=length,
                            greedy=True, episodes=task.episodes(chunk) if env else None)
        comps = roll.completions.tolist()
        if env:  # the environment's verifier scores; the loose checker reads the policy's tokens only
            mask = roll.completion_mask[:, task.prompt_length:].tolist()
            comps = [[t for t, m in zip(c, ms) if m] for c, ms in zip(comps, mask)]
            strict += [e["reward"] for e in roll.episodes]
            calls += [float(e["tool_calls"] > 0) for e in roll.episodes]
        else:
            strict += [task.strict_reward(p, c) for p, c in zip(chunk, comps)]
        loose += [task.loose_reward(p, c) for p, c in zip(chunk, comps)]
    carry = [task.ones_carry(a, b) for a, b in pairs]

    def mean(xs):
        return sum(xs) / len(xs) if xs else None

    out = {
        "accuracy": mean(strict),
        "loose_accuracy": mean(loose),
        "accuracy_carry": mean([s for s, c in zip(strict, carry) if c]),
        "accuracy_no_carry": mean([s for s, c in zip(strict, carry) if not c]),
    }
    if env:  # how often the greedy policy calls the tool, where the ones column carries and where not
        out["tool_use_carry"] = mean([k for k, c in zip(calls, carry) if c])
        out["tool_use_no_carry"] = mean([k for k, c in zip(calls, carry) if not c])
    return out


def sample_completions(model, task: AdditionTask, pairs, *, n: int = 1, max_completion_length: int = 6) -> list[str]:
    """Readable samples ``'123+045=168'`` (``…`` marks a truncated completion)."""
    device = next(model.parameters()).device
    with autocast(device):
        roll = generate(model, task.encode_prompts(pairs, device), task.tokenizer,
                        max_completion_length=max_completion_length, num_generations=n)
    out = []
    for i, comp in enumerate(roll.completions.tolist()):
        a, b = pairs[i // n]
        text, ended = task.completion_text(comp)
        out.append(f"{task.prompt_text(a, b)}{text}{'' if ended else '…'}")
    return out


@torch.no_grad()
def sampled_eval(model, task: AdditionTask, *, k: int = 8, max_completion_length: int | None = None,
                 temperature: float = 1.0, seed: int = 0, batch_size: int = 512) -> dict:
    """``k`` sampled completions per held-out prompt: pass@1, pass@k, completion length, entropy.

    ``pass@1`` is the share of samples the strict checker accepts (the acceptance rate a rejection
    sampler would see at this temperature); ``pass@k`` the share of prompts with at least one
    accepted sample among their ``k`` (the plain estimator with n = k). ``completion_length`` is
    the mean number of completion tokens (``<eos>`` included) and ``entropy`` the sampling
    distributions' mean entropy per completion token (nats). The torch RNG is forked and seeded
    with ``seed``: a training run's random stream is left untouched.
    """
    number(k, "k", integer=True, low=1)
    device = next(model.parameters()).device
    length = max_completion_length or task.answer_length
    pairs = task.heldout_pairs
    accepted, any_ok, tokens, entropy = 0, 0, 0.0, 0.0
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        for i in range(0, len(pairs), batch_size):
            chunk = pairs[i : i + batch_size]
            with autocast(device):
                roll = generate(model, task.encode_prompts(chunk, device), task.tokenizer,
                                max_completion_length=length,
                                num_generations=k, temperature=temperature)
            comps = roll.completions.tolist()
            ok = [task.strict_reward(chunk[j // k], c) for j, c in enumerate(comps)]
            accepted += sum(ok)
            any_ok += sum(any(ok[g * k : (g + 1) * k]) for g in range(len(chunk)))
            tokens += float(roll.completion_mask.sum())
            entropy += float(roll.entropy.sum())
    return {"pass@1": accepted / (len(pairs) * k), "pass@k": any_ok / len(pairs), "k": k,
            "completion_length": tokens / (len(pairs) * k), "entropy": entropy / tokens}


def reference_kl(model, ref_model, task, *, samples_per_prompt: int = 4, max_completion_length: int | None = None,
                 estimator: str = "k1", seed: int = 0, batch_size: int = 512) -> dict:
    """Sequence-level KL(π_θ ‖ π_ref) of a tiny GPT on the task's held-out prompts.

    Samples ``samples_per_prompt`` completions per held-out prompt from ``model`` (temperature 1,
    the policy itself), sums the per-token estimate (``kl_estimate``) over each completion's real
    tokens and averages. Unbiased for the sequence KL with ``k1`` (the default) or ``k3``: given
    the prefix, either estimate's expectation is that position's KL, and the sequence KL is the
    sum of the positions' KLs along the policy's own samples. k1 is the default because a trained
    policy is far from its reference, where k3's spread explodes (e^ℓ is unbounded; see the
    notebook's section on estimators as values). The same measurement for every run, whatever β,
    estimator or placement trained it. Returns ``{"kl", "kl_se", "n"}`` (mean, its standard error,
    number of completions). The torch RNG is forked and seeded with ``seed``: training's random
    stream is left untouched.
    """
    choice(estimator, "estimator", ("k1", "k3"))  # k2 is biased as a value
    number(samples_per_prompt, "samples_per_prompt", integer=True, low=1)
    device = next(model.parameters()).device
    length = max_completion_length or task.answer_length
    pairs = task.heldout_pairs
    totals = []
    was_training = model.training
    model.eval()
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
        torch.manual_seed(seed)
        for i in range(0, len(pairs), batch_size):
            chunk = pairs[i : i + batch_size]
            with autocast(device):
                roll = generate(model, task.encode_prompts(chunk, device), task.tokenizer,
                                max_completion_length=length, num_generations=samples_per_prompt)
                args = (roll.input_ids, roll.attention_mask, roll.completion_mask)
                logps, mask = completion_logprobs(model, *args)
                ref_logps, _ = completion_logprobs(ref_model, *args)
            per_token = kl_estimate(logps.float(), ref_logps.float(), estimator, validate=False)
            totals.append((per_token * mask).sum(-1).double().cpu())
    model.train(was_training)
    kl = torch.cat(totals)
    return {"kl": float(kl.mean()), "kl_se": float(kl.std() / len(kl) ** 0.5) if len(kl) > 1 else 0.0, "n": len(kl)}
