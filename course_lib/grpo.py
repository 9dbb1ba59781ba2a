"""Online GRPO / RLOO / Dr. GRPO / DAPO options for the tiny GPT (§9, §11, §12).

One step:

1. draw B fresh prompts, sample G completions each, score them with the reward
   (``course_lib.rollout.collect_rollouts``, ``course_lib.rewards``);
2. zero-variance groups: ``keep`` (zero advantage), ``drop``, or ``resample`` — draw more
   prompts until B informative groups are found (DAPO's dynamic sampling), at most
   ``max_resample_rounds`` extra rounds;
3. advantages from ``course_lib.advantages`` (``grpo`` with population std, ``rloo``,
   ``dr_grpo``), one per completion, applied to each of its tokens;
4. μ = ``num_iterations`` inner epochs: ratio ρ = π_θ/π_old against log-probs frozen right
   after sampling, ``clipped_surrogate`` with ε_low/ε_high, minus β·KL to a frozen reference
   (``kl_estimate``, in the loss, per token) when β > 0, averaged with ``aggregate`` over the
   chosen unit; loss = −objective.

Simplifications, said out loud (nanochat-style):
- Synchronous and colocated: the same model generates, then trains; rollouts are never stale
  by more than the μ inner epochs on one batch. No value network.
- With μ = 1 the old log-probs *are* the current ones (detached), as in TRL: ρ = 1 and the
  clip is inactive on the first and only pass. For μ > 1 the first epoch's own log-probs,
  detached, are the old ones (the weights have not moved yet), so no extra forward is spent.
- No overlong reward shaping: a completion without ``<eos>`` is truncated and gets what the
  reward says (the strict checker: 0); ``mask_truncated`` drops such completions from the
  loss instead (TRL's ``mask_truncated_completions``).
- β = 0 builds no reference model at all, so the logged ``kl`` is ``None`` then.
"""

from __future__ import annotations

import copy
import time

import torch

from course_lib.advantages import dr_grpo_advantages, grpo_advantages, rloo_advantages
from course_lib.configs import GRPOConfig
from course_lib.evaluation import evaluate
from course_lib.model import completion_logprobs
from course_lib.policy_loss import aggregate, clipped_surrogate, kl_estimate
from course_lib.rewards import resolve_reward
from course_lib.rollout import collect_rollouts, sequence_logprobs
from course_lib.runtime import (
    DEFAULT_THREADS,
    Interrupted,
    MetricsLog,
    autocast,
    clip_gradients,
    make_optimizer,
    progress,
    set_threads,
    stop_requested,
)
from course_lib.task import AdditionTask

ADVANTAGE_FUNCTIONS = {"grpo": grpo_advantages, "rloo": rloo_advantages, "dr_grpo": dr_grpo_advantages}


def compute_advantages(rewards: torch.Tensor, kind: str) -> torch.Tensor:
    """(n_groups, G) rewards → advantages, zero-variance groups giving zeros for ``grpo``."""
    if kind == "grpo":
        return grpo_advantages(rewards, on_degenerate="zeros")
    return ADVANTAGE_FUNCTIONS[kind](rewards)


def policy_step(model, ref_model, opt, batch: dict, cfg: GRPOConfig, *, prompt_length: int, max_grad_norm: float) -> dict:
    """μ inner epochs of the clipped, optionally KL-regularised surrogate on one batch of groups.

    Returns the logged quantities as 0-d tensors (``loss`` averaged over the inner epochs;
    ``clip_fraction``, ``entropy``, ``kl`` of the last one; ``kl`` is None without a reference):
    reading them is the caller's host synchronisation, once per step.
    """
    device = next(model.parameters()).device
    adv = compute_advantages(batch["rewards"], cfg.advantage).flatten().to(device)
    ids, attn, cmask = batch["input_ids"], batch["attention_mask"], batch["completion_mask"]
    if cfg.mask_truncated:  # advantages were computed on whole groups; now drop truncated rows
        keep = ~batch["truncated"].to(device)
        if not bool(keep.any()):
            return {"loss": torch.zeros(()), "clip_fraction": torch.zeros(()), "entropy": None, "kl": None, "skipped": 1}
        ids, attn, cmask, adv = ids[keep], attn[keep], cmask[keep], adv[keep]
    temperature = cfg.temperature  # log-probs of the distribution the sampler actually used
    ref_logps = None
    if ref_model is not None:
        ref_logps = sequence_logprobs(ref_model, {"input_ids": ids, "attention_mask": attn, "completion_mask": cmask},
                                      prompt_length=prompt_length, temperature=temperature)
    old_logps, kl_value, losses = None, None, []
    for _ in range(cfg.num_iterations):
        with autocast(device):
            logps, mask, ent = completion_logprobs(model, ids, attn, cmask, with_entropy=True, temperature=temperature,
                                                   start=prompt_length, validate=False)
        if old_logps is None:  # epoch 1: the weights have not moved, so these are π_old
            old_logps = logps.detach()
        ratio = torch.exp(logps - old_logps)
        objective = clipped_surrogate(ratio, adv, eps_low=cfg.epsilon, eps_high=cfg.epsilon_high)
        if ref_logps is not None:
            kl_tok = kl_estimate(logps, ref_logps, estimator=cfg.kl_estimator)
            objective = objective - cfg.beta * kl_tok
            kl_value = aggregate(kl_tok.detach(), mask, unit="token_mean")
        loss = -aggregate(objective, mask, unit=cfg.unit, max_length=cfg.max_completion_length)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        clip_gradients(model, max_grad_norm)
        opt.step()
        losses.append(loss.detach())
    with torch.no_grad():  # diagnostics of the last inner epoch
        a, r = adv[:, None], ratio.detach()
        is_clipped = ((r > 1 + cfg.epsilon_high) & (a > 0)) | ((r < 1 - cfg.epsilon) & (a < 0))
        clip_fraction = (is_clipped.float() * mask).sum() / mask.sum()
        entropy = (ent * mask).sum() / mask.sum()
    return {"loss": torch.stack(losses).mean(), "clip_fraction": clip_fraction, "entropy": entropy, "kl": kl_value,
            "skipped": 0}


def _as_floats(upd: dict) -> dict:
    """One host read for all the step's logged tensors."""
    names = [k for k, v in upd.items() if isinstance(v, torch.Tensor)]
    values = torch.stack([upd[k].float().cpu() for k in names]).tolist() if names else []
    return {**upd, **dict(zip(names, values))}


def train_grpo(
    model,
    task: AdditionTask,
    cfg: GRPOConfig,
    *,
    generator: torch.Generator,
    log: MetricsLog | None = None,
    state: dict | None = None,
    reference_state: dict | None = None,
    max_grad_norm: float = 1.0,
    steps: int | None = None,
    checkpoint=None,
    checkpoint_every: int = 10,
    show_progress: bool = True,
    eval_fn=None,
    threads: int | None = DEFAULT_THREADS,
) -> dict:
    """Run GRPO-family RL from the current weights of ``model`` (normally the SFT policy).

    ``reference_state`` is the frozen reference's state dict (defaults to the starting
    weights; unused when ``cfg.beta == 0``). ``state`` resumes optimizer, step and seconds
    (the caller restores RNG before calling). ``eval_fn(model) -> dict`` defaults to
    ``evaluate`` (held-out strict and loose accuracy). Runs until ``steps`` in total.
    ``checkpoint(step, optimizer, seconds)`` is called every ``checkpoint_every`` steps, at
    the end, and before stopping on a requested stop (Ctrl-C).
    """
    set_threads(threads)
    reward_fn = resolve_reward(cfg.reward, task)
    ref_model = None
    if cfg.beta > 0:
        ref_model = copy.deepcopy(model)
        if reference_state is not None:
            ref_model.load_state_dict(reference_state)
        ref_model.eval().requires_grad_(False)
    opt = make_optimizer(model, cfg.learning_rate)
    log = log if log is not None else MetricsLog()
    eval_fn = eval_fn or (lambda m: evaluate(m, task, max_completion_length=cfg.max_completion_length))
    step, seconds = 0, 0.0
    if state is not None:
        opt.load_state_dict(state["optimizer"])
        step, seconds = state["step"], state["seconds"]
    total = cfg.steps if steps is None else steps
    bar = progress(total, f"grpo[{cfg.advantage}]", show_progress, initial=step)
    while step < total:
        t0 = time.perf_counter()
        rollout = collect_rollouts(model, task, cfg, generator, reward_fn)
        stats = rollout["stats"]
        t1 = time.perf_counter()
        if "batch" in rollout:
            model.train()
            upd = policy_step(model, ref_model, opt, rollout["batch"], cfg, prompt_length=task.prompt_length,
                              max_grad_norm=max_grad_norm)
            model.eval()
        else:
            upd = {"loss": 0.0, "clip_fraction": 0.0, "entropy": None, "kl": None, "skipped": 1}
        upd = _as_floats(upd)
        t2 = time.perf_counter()
        step += 1
        seconds += t2 - t0
        row = {
            "step": step,
            **stats,
            **upd,
            "update_seconds": t2 - t1,
            "other_seconds": (t1 - t0) - stats["gen_seconds"],
            "tokens_per_second": stats["generated_tokens"] / max(stats["gen_seconds"], 1e-9),
            "rl_seconds": seconds,
        }
        if step % cfg.eval_every == 0 or step == total:
            row.update(eval_fn(model))
            bar.set_postfix(acc=f"{row['accuracy']:.2f}", reward=f"{stats['reward_mean']:.2f}")
        log.append(row)
        bar.update(1)
        if checkpoint is not None and (step % checkpoint_every == 0 or step == total or stop_requested()):
            checkpoint(step, opt, seconds)
        if stop_requested():
            bar.close()
            raise Interrupted("grpo", step)
    bar.close()
    model.eval()
    return {"steps": step, "rl_seconds": seconds}
