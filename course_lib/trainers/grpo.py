"""Online GRPO / RLOO / Dr. GRPO / DAPO options for the tiny GPT (§9, §11, §12).

One step:

1. draw B fresh prompts, sample G completions each, score them with the reward
   (``course_lib.tinygpt.rollout.collect_rollouts``, ``course_lib.tinygpt.rewards``);
2. zero-variance groups: ``keep`` (zero advantage, their rows in every averaging denominator),
   ``drop`` (out of the batch: their rows leave the denominators, so the constant unit divides
   by the rows left times L_max), or ``resample`` — draw more prompts until B informative
   groups are found (DAPO's dynamic sampling), at most ``max_resample_rounds`` extra rounds,
   then drop what is still missing;
3. advantages from ``course_lib.formulas.advantages`` (``grpo`` with population std, ``rloo``,
   ``dr_grpo``), one per completion, applied to each of its tokens;
4. μ = ``num_iterations`` inner epochs: ratio ρ = π_θ/π_old against log-probs frozen right
   after sampling, ``clipped_surrogate`` with ε_low/ε_high — per token, or per completion
   (``importance_sampling_level="sequence"``: GSPO's ``sequence_ratio``) — or CISPO's capped
   weight (``loss_type="cispo"``: ``cispo_objective``, ε_max = ``epsilon_high``), minus β·KL to
   a frozen reference (``kl_estimate``, in the loss, per token) when β > 0, averaged with
   ``aggregate`` over the chosen unit; loss = −objective.

DAPO's four mechanisms are options: clip-higher (``epsilon_high`` > ``epsilon``), dynamic
sampling (``zero_variance="resample"``), the token-level loss (``unit="token_mean"``) and
overlong reward shaping (``soft_punish_cache`` > 0: ``rewards.OverlongShaped`` adds the soft
penalty near ``max_completion_length`` to the checker's reward, as TRL's
``get_soft_overlong_punishment`` reward function does).

Simplifications, said out loud (nanochat-style):
- Synchronous and colocated by default: the same model generates, then trains; rollouts are
  never stale by more than the μ inner epochs on one batch. No value network.
  ``max_staleness`` = K >= 1 moves sampling into a rollout worker process
  (``course_lib.trainers.rollout_worker``) that samples batch s with the weights of step s − K while the
  trainer updates; the behaviour correction π_old/π_behaviour (``course_lib.formulas.behaviour``, TRL's
  ``vllm_importance_sampling_*``) is kept apart from PPO's π_θ/π_old.
- ``sampler_temperature`` (no TRL name) is a deliberately mismatched sampler: it samples at
  another temperature than the trainer's log-probs assume, so the behaviour correction has work
  to do at K = 0 (``behaviour.mismatched_sampler``).
- ``adaptive_length_quantile`` (no TRL name) is the smallest honest adaptive completion length:
  the synchronous loop caps the next step's generation at a quantile of this step's completion
  lengths plus ``adaptive_length_margin``, never below the longest right answer plus ``<eos>``
  (``task.answer_length``) and never above ``max_completion_length``
  (``rollout.next_length_cap``); batches are padded back to L_max, so the loss is unchanged.
  Off (None), every step generates up to L_max exactly as before. On this task generation
  already stops when every row has ended, so the cap saves only the steps where a row rambles.
- With μ = 1 the old log-probs *are* the current ones (detached), as in TRL: ρ = 1 and the
  clip is inactive on the first and only pass. For μ > 1 the first epoch's own log-probs,
  detached, are the old ones (the weights have not moved yet), so no extra forward is spent.
- Overlong shaping is off by default: a completion without ``<eos>`` is truncated and gets what
  the reward says (the strict checker: 0); ``soft_punish_cache`` adds DAPO's penalty, and
  ``mask_truncated`` drops such completions from the loss instead (TRL's
  ``mask_truncated_completions``, DAPO's overlong filtering).
- β = 0 keeps a reference only when one is given (the pipeline gives the SFT weights, to log
  the KL); without one the logged ``kl`` is ``None``.
- Each group's G completions share one prompt, so the update runs the prompt through the
  model once per group and shares its keys/values (``share_prompt``; same numbers, less work).
- With an environment (``task.env``, CLI ``--env calculator``; ``course_lib.tinygpt.environments``) a
  rollout is an episode: the sampler lets the environment write its tokens between the policy's
  turns, the environment's verifier gives the reward (one per episode, so one advantage per
  episode), and the completion mask is the policy mask: environment tokens get no log-prob term,
  no loss and no KL (``mask_env_tokens=False`` is the ablation that keeps them). The episode's
  token limit (``EpisodeLimits.max_tokens``, policy and environment tokens) replaces
  ``max_completion_length``, as TRL counts tool results in the completion.
"""

from __future__ import annotations

import copy
import dataclasses
import time

import torch

from course_lib.formulas.advantages import compute_advantages
from course_lib.formulas.behaviour import behaviour_weights, mismatch, mismatched_sampler, sampler_entry
from course_lib.formulas.policy_loss import aggregate, kl_estimate, kl_shaped_rewards, logged_kl, surrogate
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.model import completion_logprobs
from course_lib.tinygpt.rewards import grpo_reward, reward_granularity, reward_source
from course_lib.tinygpt.rollout import collect_rollouts, next_length_cap, sequence_logprobs
from course_lib.tinygpt.runtime import autocast, make_optimizer, optimizer_step, set_threads, to_device
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers import reward_model  # noqa: F401 - registers the rm:DIR reward source
from course_lib.trainers.configs import GSPO_PAPER_EPSILONS, GRPOConfig
from course_lib.trainers.rollout_worker import RolloutWorker
from course_lib.trainers.trainer import (
    ONLINE_STALENESS,
    SYNCHRONOUS,
    StageContext,
    StageResult,
    TrainContext,
    TRLRecipe,
    TRLRow,
    Unmatched,
    register,
    row_mean,
    train_loop,
    trl_per_device,
)
from course_lib.trainers.utilisation import grpo_run_flops


def kl_logged_only(ref_model, cfg: GRPOConfig) -> bool:
    """Is the reference kept only to *log* the KL (β = 0)?"""
    return ref_model is not None and cfg.beta == 0


def group_rows(batch: dict, cfg: GRPOConfig, device, *, informative: bool) -> torch.Tensor:
    """The row indices of the informative groups (or, ``informative=False``, of the zero-variance ones),
    pinned and non-blocking: no host synchronisation."""
    G = cfg.num_generations
    return to_device([g * G + i for g, keep in enumerate(batch["informative"]) if keep == informative
                      for i in range(G)], device, torch.long)


def sparse_rows(batch: dict, cfg: GRPOConfig, ref_model, device) -> torch.Tensor | None:
    """The rows the update runs through the model: those of informative groups, or ``None`` for every row.

    A zero-variance group (``batch["informative"]`` False) has zero advantages, so without a KL
    term in the objective its rows' gradient is exactly zero: they are left out of the backward
    pass, and their zero objective keeps its place in every denominator (``restore_rows``).
    That holds without a reference, or with one kept only to log the KL (``kl_logged_only``: the
    left-out rows then get a forward pass without gradient, for π_old's KL). With β > 0 the KL
    term reaches every row, so every row is computed (``None``); likewise when every group is
    informative.
    """
    if ref_model is not None and not kl_logged_only(ref_model, cfg):
        return None
    if "informative" not in batch or all(batch["informative"]):
        return None
    return group_rows(batch, cfg, device, informative=True)


def restore_rows(values: torch.Tensor, rows: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``values`` of the ``sparse_rows`` put back in their places in a tensor shaped ``like``, zeros elsewhere."""
    return torch.zeros_like(like, dtype=values.dtype).index_copy(0, rows, values)


def policy_step(model, ref_model, opt, batch: dict, cfg: GRPOConfig, *, prompt_length: int, max_grad_norm: float,
                validate: bool = True) -> dict:
    """μ inner epochs of the clipped, optionally KL-regularised surrogate on one batch of groups.

    ``batch`` is ``collect_rollouts``'s: ``input_ids``, ``attention_mask``, ``completion_mask``,
    ``truncated`` (N,), ``rewards`` (n_groups, G) (dropped groups are not in it). With ``ref_model`` the KL to
    the reference is measured every step (k3 on the sampled tokens, per token) and, when ``cfg.beta > 0``,
    enters either the loss (``kl_placement="loss"``: −β·k per token, differentiated) or the
    reward (``"reward"``: ``kl_shaped_rewards`` before the baseline). With ``mask_truncated``
    truncated completions keep their row and get a zero mask, so ``sequence_mean`` and
    ``constant`` still divide by all rows (as Dr. GRPO publishes and TRL does).

    Zero-variance groups (``batch["informative"]`` False, as ``collect_rollouts`` marks them)
    have zero advantages: when that makes their gradient exactly zero, only the ``sparse_rows``
    go through the backward pass and ``restore_rows`` puts their objective back in place — the same
    loss and gradient, less work. The logged ``kl`` is ``logged_kl``: π_old's, on every row.

    A batch from the asynchronous rollout worker carries ``sampler_version`` and ``staleness`` (the
    optimiser steps between the sampler's weights and π_old). Its ``sampler_logps`` are then the
    behaviour policy's: the first epoch measures the mismatch (``behaviour.mismatch``: KL,
    effective sample size, share capped or masked) on the rows it computes, and when
    ``staleness > 0`` and ``vllm_importance_sampling_correction`` each token's objective is
    multiplied by the bounded π_old/π_behaviour (``behaviour.behaviour_weights``), every epoch.
    At staleness 0 the sampler ran π_old's own weights: the weight is 1 and is not applied. A
    deliberately mismatched sampler (``cfg.sampler_temperature`` ≠ ``cfg.temperature``,
    ``mismatched_sampler``) samples from another distribution than the one whose log-probs the
    trainer computes: the mismatch is measured, and corrected, at every staleness, K = 0 included.

    Returns the logged quantities as 0-d tensors (``loss`` averaged over the inner epochs;
    ``clip_fraction`` of the last one): reading them is the caller's host synchronisation,
    once per step. ``validate=False`` (the hot loop, after one validated step) skips every
    input check, so the step never reads a tensor value on the host.
    """
    device = next(model.parameters()).device
    ids, attn, cmask = (batch[k].to(device) for k in ("input_ids", "attention_mask", "completion_mask"))
    rewards = batch["rewards"].to(device)
    temperature = cfg.temperature  # log-probs of the distribution the sampler actually used
    group = cfg.num_generations if cfg.share_prompt else 1  # rows g·G … g·G+G−1 share one prompt
    ref_logps = None
    if ref_model is not None:
        ref_logps = sequence_logprobs(ref_model, {"input_ids": ids, "attention_mask": attn, "completion_mask": cmask},
                                      prompt_length=prompt_length, temperature=temperature, group_size=group)
    loss_mask = cmask[:, prompt_length:].float()
    if cfg.mask_truncated:  # truncated rows keep their place in the denominators (as Dr. GRPO and TRL)
        loss_mask = loss_mask * ~batch["truncated"].to(device)[:, None]
    rows = sparse_rows(batch, cfg, ref_model, device)  # None: every row goes through the model
    old_logps = adv = weights = None
    asynchronous = "sampler_version" in batch
    mismatched = mismatched_sampler(cfg)  # a deliberately mismatched sampler: π_behaviour ≠ π_old at any staleness
    behaviour = asynchronous or mismatched  # the sampler's log-probs are another policy's: measure the mismatch
    correct = cfg.vllm_importance_sampling_correction and (mismatched or (asynchronous and batch["staleness"] > 0))
    diagnostics = dict.fromkeys(("mismatch_kl", "is_ess", "is_clipped_fraction")) if behaviour else {}
    kl_value, losses = None, []
    if rows is not None and ref_logps is not None:  # KL logged only: π_old on the left-out rows, no gradient
        rest = group_rows(batch, cfg, device, informative=False)
        with torch.no_grad(), autocast(device):
            rest_logps, _ = completion_logprobs(model, ids[rest], attn[rest], cmask[rest], temperature=temperature,
                                                start=prompt_length, validate=validate, group_size=group)

    def every_row(logps):  # π_old's log-probs of the computed rows, with the left-out rows' put back
        full = restore_rows(logps, rows, loss_mask)
        return full.index_copy(0, rest, rest_logps.to(full.dtype))

    for _ in range(cfg.num_iterations):
        nothing = rows is not None and len(rows) == 0  # nothing informative: a zero gradient, still an optimiser step
        if nothing:
            objective = torch.zeros_like(loss_mask)
            clipped = torch.zeros_like(loss_mask, dtype=torch.bool)
            if ref_logps is not None and kl_value is None:
                kl_value = logged_kl(every_row(loss_mask[:0]), ref_logps, cmask[:, prompt_length:].float(),
                                     validate=validate)
        else:
            sel = (lambda t: t) if rows is None else (lambda t: t.index_select(0, rows))
            with autocast(device):
                logps, mask = completion_logprobs(model, sel(ids), sel(attn), sel(cmask), temperature=temperature,
                                                  start=prompt_length, validate=validate, group_size=group)
            if old_logps is None:  # epoch 1: the weights have not moved, so these are π_old (no extra forward)
                old_logps = logps.detach()
                if ref_logps is not None and rows is not None:
                    kl_value = logged_kl(every_row(old_logps), ref_logps, cmask[:, prompt_length:].float(),
                                         validate=validate)
                elif ref_logps is not None:
                    kl_value = logged_kl(old_logps, ref_logps, mask, validate=validate)
                    if cfg.beta > 0 and cfg.kl_placement == "reward":
                        rewards = kl_shaped_rewards(rewards.flatten(), old_logps, ref_logps, mask, beta=cfg.beta,
                                                    estimator=cfg.kl_estimator, validate=validate).view_as(rewards)
                adv = sel(compute_advantages(rewards, cfg.advantage, validate=validate).flatten())
                if behaviour:  # π_old / π_behaviour: measured always, applied when the sampler was stale or mismatched
                    sampler_logps = sel(batch["sampler_logps"].to(device))
                    weights, outside = behaviour_weights(
                        old_logps, sampler_logps, mask, cfg.vllm_importance_sampling_mode,
                        cfg.vllm_importance_sampling_clip_min, cfg.vllm_importance_sampling_clip_max,
                        validate=validate)
                    diagnostics = mismatch(old_logps, sampler_logps, mask, weights, outside)
                    weights = weights if correct else None
            objective, clipped = surrogate(logps, old_logps, adv, mask, eps_low=cfg.epsilon, eps_high=cfg.epsilon_high,
                                           level=cfg.importance_sampling_level, loss_type=cfg.loss_type,
                                           validate=validate)
            if weights is not None:  # the behaviour correction, apart from PPO's ratio (as TRL applies it)
                objective = objective * weights
            if ref_logps is not None and cfg.beta > 0 and cfg.kl_placement == "loss":
                objective = objective - cfg.beta * kl_estimate(logps, ref_logps, cfg.kl_estimator, validate=validate)
            if rows is not None:  # the left-out rows' objective is exactly 0: put the rest back in its place
                objective, clipped = restore_rows(objective, rows, loss_mask), restore_rows(clipped, rows, loss_mask)
        loss = -aggregate(objective, loss_mask, unit=cfg.unit, max_length=cfg.max_completion_length, validate=validate)
        optimizer_step(loss, max_grad_norm, (model, opt), zero_gradient=nothing)
        losses.append(loss.detach())
    with torch.no_grad():  # diagnostic of the last inner epoch, over the tokens in the loss
        clip_fraction = aggregate(clipped.to(loss_mask.dtype), loss_mask, unit="token_mean", validate=validate)
    return {"loss": torch.stack(losses).mean(), "clip_fraction": clip_fraction, "kl": kl_value, **diagnostics}


def episode_tokens(batch: dict, prompt_length: int) -> torch.Tensor:
    """Every token of each episode after the prompt, the policy's and the environment's (the
    masking ablation's completion mask: the environment's tokens then get log-probs, loss and KL)."""
    mask = batch["attention_mask"].clone()
    mask[:, :prompt_length] = 0
    return mask


def _as_floats(upd: dict) -> dict:
    """One host read for all the step's logged tensors."""
    names = [k for k, v in upd.items() if isinstance(v, torch.Tensor)]
    values = torch.stack([upd[k].float() for k in names]).tolist() if names else []
    return {**upd, **dict(zip(names, values))}


def train_grpo(
    model,
    task: AdditionTask,
    cfg: GRPOConfig,
    ctx: TrainContext | None = None,
    *,
    generator: torch.Generator,
    reference_state: dict | None = None,
    eval_fn=None,
    worker: bool | None = None,
    start_method: str | None = None,
    name: str | None = None,
) -> dict:
    """Run GRPO-family RL from the current weights of ``model`` (normally the SFT policy).

    ``name`` labels the run's progress bar (default ``grpo[<advantage>]``, e.g. ``name="DAPO"``).

    ``reference_state`` is the frozen reference's state dict: when given, or when
    ``cfg.beta > 0`` (the starting weights are then the reference), a frozen copy is kept and
    the KL to it is logged every step (``kl``); with β = 0 and no ``reference_state`` no
    reference is kept and ``kl`` is None. ``ctx.state`` resumes optimizer, step and seconds
    (the caller restores RNG before calling). ``eval_fn(model) -> dict`` defaults to
    ``evaluate`` (held-out strict and loose accuracy). Runs until ``ctx.steps`` in total.
    ``ctx.checkpoint(step, {"optimizer": …}, seconds)`` is called every ``ctx.checkpoint_every`` steps, at
    the end, and before stopping on a requested stop (Ctrl-C) or a failed rollout worker.

    ``cfg.max_staleness`` = K >= 1 samples in a rollout worker process
    (``course_lib.trainers.rollout_worker``): batch s with the weights of step s − K, overlapped with the
    updates; the worker draws from the random streams this process would have sampled with, so
    ``worker=True`` at K = 0 reproduces the synchronous trainer exactly (``worker`` defaults to
    K >= 1). Its rows add ``sampler_version``, ``staleness``, ``wait_seconds`` (the trainer
    waiting for a batch) and the mismatch diagnostics; the result's ``loop`` says what ran. Every row
    has ``gen_cpu_seconds`` (CPU seconds of sampling and scoring: this process's, or the worker's for
    this batch) and ``update_cpu_seconds``: the work done, whatever the machine's load.
    """
    ctx = ctx if ctx is not None else TrainContext()
    state = ctx.state
    set_threads(ctx.threads)
    if hasattr(task, "episodes"):  # an environment (environments.EnvTask): its token limit bounds a rollout
        cfg = dataclasses.replace(cfg, max_completion_length=task.episode_length)
    reward_fn = grpo_reward(cfg, task)  # a bad reward fails here, before any worker starts
    ref_model = None
    if cfg.beta > 0 or reference_state is not None:
        ref_model = copy.deepcopy(model)
        if reference_state is not None:
            ref_model.load_state_dict(reference_state)
        ref_model.eval().requires_grad_(False)
    opt = make_optimizer(model, cfg.learning_rate)
    eval_fn = eval_fn or (lambda m: evaluate(m, task, max_completion_length=cfg.max_completion_length))
    if state is not None:
        opt.load_state_dict(state["optimizer"])
    first = state["step"] if state is not None else 0  # the first policy step checks its inputs; then no checks
    asynchronous = cfg.max_staleness > 0 if worker is None else bool(worker)
    sampler = None
    cpu0 = time.process_time()

    def update(batch: dict, step: int) -> dict:
        if hasattr(task, "episodes") and not cfg.mask_env_tokens:  # the ablation: environment tokens in the loss
            batch["completion_mask"] = episode_tokens(batch, task.prompt_length)
        model.train()
        upd = policy_step(model, ref_model, opt, batch, cfg, prompt_length=task.prompt_length,
                          max_grad_norm=ctx.max_grad_norm, validate=step == first)
        model.eval()
        return {**_as_floats(upd), "skipped": 0}

    def skipped() -> dict:  # every group was dropped: nothing to learn from this step
        return {"loss": 0.0, "clip_fraction": 0.0, "kl": None, "skipped": 1}

    adaptive = cfg.adaptive_length_quantile is not None
    if adaptive and hasattr(task, "episodes"):
        raise ValueError("grpo.adaptive_length_quantile is for plain completions; with an environment the episode's "
                         "token limit bounds a rollout (set adaptive_length_quantile=None)")
    cap = {"next": (state or {}).get("length_cap", cfg.max_completion_length)}  # the next step's generation cap

    def one_step(step: int) -> dict:
        t0, c0 = time.perf_counter(), time.process_time()
        rollout = collect_rollouts(model, task, cfg, generator, reward_fn,
                                   max_length=cap["next"] if adaptive else None)
        stats = rollout["stats"]
        if adaptive:  # the cap of the next step, from this step's lengths (never below the longest right answer)
            cap["next"] = next_length_cap(rollout["lengths"], quantile=cfg.adaptive_length_quantile,
                                          margin=cfg.adaptive_length_margin, floor=task.answer_length,
                                          ceiling=cfg.max_completion_length)
        t1, c1 = time.perf_counter(), time.process_time()
        upd = update(rollout["batch"], step) if "batch" in rollout else skipped()
        t2, c2 = time.perf_counter(), time.process_time()
        return {**stats, **upd, "update_seconds": t2 - t1, "other_seconds": (t1 - t0) - stats["gen_seconds"],
                "gen_cpu_seconds": c1 - c0, "update_cpu_seconds": c2 - c1,
                "tokens_per_second": stats["generated_tokens"] / max(stats["gen_seconds"], 1e-9)}

    worker_cpu = {"last": 0.0}  # the worker's CPU seconds when it sent the previous batch (a forked child starts at 0)

    def one_async_step(step: int) -> dict:
        t0 = time.perf_counter()
        msg = sampler.next_batch(step)  # RolloutWorkerError (a StepFailed) if the worker failed
        rollout, version = msg["rollout"], msg["version"]
        stats = rollout["stats"]
        gen_cpu, worker_cpu["last"] = msg["cpu_seconds"] - worker_cpu["last"], msg["cpu_seconds"]
        t1, c1 = time.perf_counter(), time.process_time()
        if "batch" in rollout:
            upd = update({**rollout["batch"], "sampler_version": version, "staleness": step - version}, step)
        else:
            upd = skipped()
        sampler.publish(model, step + 1)  # version step + 1, for the batch that needs it
        t2, c2 = time.perf_counter(), time.process_time()
        return {**stats, **upd, "sampler_version": version, "staleness": step - version,
                "wait_seconds": t1 - t0, "update_seconds": t2 - t1,
                "gen_cpu_seconds": gen_cpu, "update_cpu_seconds": c2 - c1,
                "tokens_per_second": stats["generated_tokens"] / max(stats["gen_seconds"], 1e-9)}

    def state_dict() -> dict:
        out = {"optimizer": opt.state_dict()}
        if adaptive:
            out["length_cap"] = cap["next"]
        if sampler is not None:
            out["sampler"] = sampler.state()
        return out

    total = cfg.steps if ctx.steps is None else ctx.steps
    if asynchronous and first < total:
        if state is not None and "sampler" not in state:
            raise ValueError("this checkpoint was written by the synchronous loop; resume it with max_staleness=0")
        sampler = RolloutWorker(model, task, cfg, torch_rng=torch.get_rng_state(), data_rng=generator.get_state(),
                                first=first, sampler=state.get("sampler") if state else None,
                                start_method=start_method)
    try:
        done = train_loop("grpo", one_async_step if sampler is not None else one_step, ctx, total=total,
                          state_dict=state_dict, eval_fn=lambda: eval_fn(model), eval_every=cfg.eval_every,
                          desc=(name or f"grpo[{cfg.advantage}]")
                          + (f" K={cfg.max_staleness}" if asynchronous else ""),
                          seconds_key="rl_seconds",
                          postfix=lambda row: {"acc": f"{row['accuracy']:.2f}", "reward": f"{row['reward_mean']:.2f}"})
    finally:
        if sampler is not None:
            sampler.close()
    model.eval()
    rows = ctx.log.rows[-(done["steps"] - first):] if ctx.log is not None and done["steps"] > first else []
    loop = loop_entry(cfg, asynchronous, rows, trainer_cpu_seconds=time.process_time() - cpu0,
                      worker_cpu_seconds=sampler.worker_cpu_seconds if sampler is not None else None)
    return {"steps": done["steps"], "rl_seconds": done["seconds"], "loop": loop}


def loop_entry(cfg: GRPOConfig, asynchronous: bool, rows: list[dict], *, trainer_cpu_seconds: float,
               worker_cpu_seconds: float | None) -> dict:
    """The passport's and summary's account of the loop that ran (placement, loop, staleness, CPU seconds)."""
    K = cfg.max_staleness
    caps = [r["length_cap"] for r in rows if "length_cap" in r]
    extra = {"sampler": sampler_entry(cfg)}
    if caps:
        extra["length_caps"] = {"min": min(caps), "max": max(caps), "mean": sum(caps) / len(caps)}
    if not asynchronous:
        return {**SYNCHRONOUS, "staleness": ONLINE_STALENESS,
                "max_staleness": 0, "trainer_cpu_seconds": trainer_cpu_seconds, **extra}
    seen = [r["staleness"] for r in rows if r.get("staleness") is not None]
    if cfg.vllm_importance_sampling_correction:
        correction = (f"behaviour correction pi_old/pi_behaviour: {cfg.vllm_importance_sampling_mode}, "
                      f"clip_min={cfg.vllm_importance_sampling_clip_min}, "
                      f"clip_max={cfg.vllm_importance_sampling_clip_max}")
    else:
        correction = "no behaviour correction (vllm_importance_sampling_correction=False)"
    return {"placement": "two processes: a rollout worker (1 CPU thread) samples, the trainer updates; "
                         "weights through shared memory after every step",
            "loop": f"asynchronous: batch s sampled with the weights of step max(0, s-{K}) (max_staleness={K}), "
                    f"through a queue of at most {max(K, 1)} batch(es)",
            "staleness": (f"rollouts {min(seen) if seen else 0}-{max(seen) if seen else 0} steps old "
                          f"(mean {sum(seen) / max(len(seen), 1):.2f} over this run's {len(seen)} steps); "
                          f"{correction}"),
            "max_staleness": K, "staleness_per_step": seen,
            "trainer_cpu_seconds": trainer_cpu_seconds, "worker_cpu_seconds": worker_cpu_seconds, **extra}


def grpo_passport(cfg, info: dict) -> dict:
    """GRPO's passport sections (``course_lib.run.passport``) and §12's six choices.

    ``info["reference"]``: whether the run kept a frozen reference (default: when β > 0; the
    pipeline always keeps one to log the KL). Without ``info["loop"]`` (what ran) the systems
    fields say what the config would run: a rollout worker with ``max_staleness`` > 0.
    """
    g, systems = cfg.grpo, info["systems"]
    zv = {"keep": "kept with zero advantage", "drop": "dropped from the batch",
          "resample": f"dropped and refilled with fresh prompts (DAPO dynamic sampling, ≤{g.max_resample_rounds} "
                      f"extra rounds)"}[g.zero_variance]
    adv = {"grpo": "GRPO (r − mean)/std, population std", "rloo": "RLOO leave-one-out",
           "dr_grpo": "Dr. GRPO r − mean, no std"}[g.advantage]
    reference = g.beta > 0 if info["reference"] is None else info["reference"] or g.beta > 0
    if g.beta > 0 and g.kl_placement == "loss":
        kl = f"in the loss, per token (differentiated), beta={g.beta}, estimator {g.kl_estimator}"
    elif g.beta > 0:
        kl = (f"in the reward, per sequence (sum over tokens, folded in before the baseline), beta={g.beta}, "
              f"estimator {g.kl_estimator}")
    else:
        kl = "none in the objective (beta=0)"
    kl += "; KL to the reference logged every step (k3, per token)" if reference else "; no reference model kept"
    trunc = ("truncated completions masked out of the loss" if g.mask_truncated
             else "truncated completions get the checker's reward (strict: 0)")
    if g.soft_punish_cache:  # DAPO's overlong shaping is part of the reward: disclosed with it
        trunc += (f"; overlong shaping (DAPO): a penalty falling from 0 to −1 over the last {g.soft_punish_cache} "
                  f"token(s) up to {g.max_completion_length}, added to the reward")
    clip = f"epsilon={g.epsilon}, epsilon_high={g.epsilon_high}"
    if g.loss_type == "cispo":
        clip = (f"CISPO: importance weight capped at epsilon_high={g.epsilon_high} (constant), no token loses its "
                f"gradient")
    elif g.importance_sampling_level == "sequence":
        clip = f"GSPO: one length-normalised ratio per completion, clipped; {clip}"
        if (g.epsilon, g.epsilon_high) != GSPO_PAPER_EPSILONS:
            clip += (f" (the GSPO paper and TRL's docs clip at epsilon={GSPO_PAPER_EPSILONS[0]}, "
                     f"epsilon_high={GSPO_PAPER_EPSILONS[1]}: a sequence ratio moves far less than a token's)")
    roles = ["policy", "old policy (frozen log-probs)" if g.num_iterations > 1 else "old policy = current (mu=1)"]
    if reference:
        roles.append("reference (frozen SFT copy)" + ("" if g.beta > 0 else ", only to measure the KL"))
    systems["staleness"] = ONLINE_STALENESS
    if g.max_staleness > 0 and info["loop"] is None:  # derived from the config: what would run
        systems.update(placement="two processes: a rollout worker samples, the trainer updates",
                       loop=f"asynchronous, max_staleness={g.max_staleness}",
                       staleness=f"rollouts up to {g.max_staleness} optimiser steps old")
    systems["sampler"] = sampler_entry(g)
    info["environment_tokens_in_loss"] = not g.mask_env_tokens
    return dict(
        data_and_policy={"examples": f"online trajectories: {g.batch_prompts} prompts × {g.num_generations} "
                                     f"completions per step",
                         "generated_by": (f"the current actor, temperature {g.temperature}" if g.max_staleness == 0
                                          else f"the actor of {g.max_staleness} optimiser steps ago (a rollout "
                                               f"worker), temperature {g.temperature}"),
                         "reuse": f"each rollout used for mu={g.num_iterations} inner epoch(s), then discarded",
                         "overlap": "training prompts drawn fresh; held-out prompts never drawn"},
        reward_contract={"source": reward_source(g.reward), "granularity": reward_granularity(g.reward),
                         "truncation": trunc,
                         "verifier_evidence": "unit tests of the checker; loose vs strict compared in notebook "
                                              "11_reward_hacking"},
        optimisation={"algorithm": "on-policy" if g.max_staleness == 0 else
                      f"off-policy by up to {g.max_staleness} step(s), clipped ratio pi_theta/pi_old kept apart from "
                      f"the behaviour correction pi_old/pi_behaviour", "advantage": adv, "roles": roles, "kl": kl,
                      "kl_placement": g.kl_placement,
                      "kl_estimator": g.kl_estimator, "beta": g.beta, "averaging_unit": g.unit,
                      "clip": clip, "zero_variance_groups": zv},
        systems=systems,
        six_choices={
            "reward_definition": reward_source(g.reward),
            "zero_variance_groups": zv,
            "averaging_unit": g.unit,
            "kl_placement_and_coefficient": kl,
            "rollout_freshness": (f"fresh every step; mu={g.num_iterations}" if g.max_staleness == 0 else
                                  f"sampled max_staleness={g.max_staleness} steps behind; mu={g.num_iterations}"),
            "prompt_difficulty_and_length": (
                f"uniform {cfg.task.digits}-digit prompts (fixed difficulty); "
                f"max_completion_length={g.max_completion_length}"
                + ("" if g.adaptive_length_quantile is None else
                   f"; adaptive cap: the {g.adaptive_length_quantile} quantile of the last step's lengths + "
                   f"{g.adaptive_length_margin}")),
        },
    )


# ---- the GRPO family in TRL 1.16's words (the bridge's rows: course_lib.trl) ----------------------------------
VLLM_IS = tuple(f"vllm_importance_sampling_{x}" for x in ("correction", "mode", "clip_min", "clip_max"))


def _online_trl(cfg, num_processes: int) -> tuple[dict, list[Unmatched]]:
    """What GRPOTrainer and RLOOTrainer share: the rollout's shape and sampling, and the options neither has."""
    g = cfg.grpo
    per_device = trl_per_device(g.batch_prompts * g.num_generations, num_processes, "batch_prompts × num_generations")
    config = dict(
        # TRL counts optimiser steps and samples anew every steps_per_generation · num_iterations of
        # them; a course step is one rollout and μ optimiser steps on it: steps rollouts need steps·μ
        max_steps=g.steps * g.num_iterations,
        per_device_train_batch_size=per_device,
        num_generations=g.num_generations,
        steps_per_generation=1,  # one optimiser step per rollout batch, as the course does
        max_completion_length=g.max_completion_length,
        num_iterations=g.num_iterations,
        epsilon=g.epsilon,
        epsilon_high=g.epsilon_high,
        beta=g.beta,
        temperature=g.temperature,
        top_k=0,
        top_p=1.0,
        mask_truncated_completions=g.mask_truncated,
        shuffle_dataset=False,  # prompts are already fresh random draws
    )
    unmatched = [
        Unmatched("grpo.eval_every", g.eval_every, "not a TRL option: HeldoutAccuracy(task, every=...) callback, "
                  f"counted in TRL optimiser steps (num_iterations={g.num_iterations} per course step)"),
        Unmatched("model: <pad>/<bos> removed from the softmax", True,
                  "TRL samples and scores over the full vocabulary (after SFT these two tokens carry ~0 mass)"),
    ]
    if g.max_staleness > 0:
        unmatched.append(Unmatched(
            "grpo.max_staleness", g.max_staleness,
            "GRPOTrainer samples synchronously; TRL's asynchronous trainer is experimental.async_grpo."
            "AsyncGRPOTrainer (a vLLM server) with AsyncGRPOConfig.max_staleness, which drops samples older than "
            "K instead of sampling at a fixed lag; vllm_importance_sampling_* act only with use_vllm=True"))
    if g.sampler_temperature is not None and g.sampler_temperature != g.temperature:
        unmatched.append(Unmatched(
            "grpo.sampler_temperature", g.sampler_temperature,
            "a deliberate fault with no TRL option: TRL samples at temperature and scores at the same one; its "
            "vllm_importance_sampling_* correct the small sampler/trainer gap of a vLLM server"))
    if g.adaptive_length_quantile is not None:
        unmatched.append(Unmatched(
            "grpo.adaptive_length_quantile", g.adaptive_length_quantile,
            f"no TRL option: GRPOTrainer generates up to max_completion_length={g.max_completion_length} every "
            "step"))
    if g.zero_variance != "keep":
        unmatched.append(Unmatched("grpo.zero_variance", g.zero_variance,
                                   "TRL keeps zero-variance groups (zero advantage); no drop or dynamic resampling"))
    return config, unmatched


def _overlong_unmatched(g) -> list[Unmatched]:
    if g.soft_punish_cache <= 0:
        return []
    return [Unmatched(
        "grpo.soft_punish_cache", g.soft_punish_cache,
        "not a GRPOConfig option: TRL's reward function trl.rewards.get_soft_overlong_punishment("
        f"max_completion_len={g.max_completion_length}, soft_punish_cache={g.soft_punish_cache}), which "
        "make_trainer adds to reward_funcs (summed with weight 1, as the course adds it)")]


def grpo_trl(cfg, num_processes: int) -> TRLRecipe:
    """The GRPO family (GRPO, Dr. GRPO, DAPO's unit, GSPO, CISPO) as TRL's ``GRPOTrainer`` (``TRLRow.translate``)."""
    g = cfg.grpo
    if g.advantage == "rloo":
        raise ValueError("grpo.advantage='rloo' is TRL's RLOOTrainer: translate(cfg, 'rloo')")
    config, unmatched = _online_trl(cfg, num_processes)
    if g.beta > 0 and g.kl_placement != "loss":
        unmatched.append(Unmatched("grpo.kl_placement", g.kl_placement,
                                   "GRPOTrainer puts the KL in the loss only (RLOOTrainer puts k1 in the reward)"))
    elif g.beta > 0 and g.kl_estimator != "k3":
        unmatched.append(Unmatched("grpo.kl_estimator", g.kl_estimator, "GRPOTrainer always puts k3 in the loss"))
    unmatched += _overlong_unmatched(g)
    scale = {"grpo": "group", "dr_grpo": "none"}[g.advantage]
    # TRL's loss_type is the averaging unit, except cispo (its own objective, token-normalised)
    unit = {"sequence_mean": "grpo", "token_mean": "dapo", "constant": "dr_grpo"}[g.unit]
    config |= dict(scale_rewards=scale, loss_type="cispo" if g.loss_type == "cispo" else unit,
                   importance_sampling_level=g.importance_sampling_level)
    # the behaviour correction under TRL's own names; TRL applies it to a vLLM sampler's log-probs
    # (use_vllm=True), the course to a stale rollout worker's (max_staleness > 0)
    config |= {name: getattr(g, name) for name in VLLM_IS}
    if g.beta > 0:
        # TRL 1.16 multiplies k3 by the importance ratio by default (DeepSeek-V3.2's unbiased
        # reverse-KL gradient); the course's plain k3 in the loss is use_bias_correction_kl=False
        config["use_bias_correction_kl"] = False
    if g.advantage == "grpo":
        unmatched.append(Unmatched(
            "grpo.advantage", "grpo",
            "scale_rewards='group' divides by the sample std (ddof=1) + 1e-4; the course trainer uses the "
            "population std (ddof=0) and no epsilon: grpo_advantages(ddof=1, epsilon=1e-4) is TRL's form, "
            "so TRL's advantages are sqrt((G-1)/G) of ours",
        ))
    return TRLRecipe("GRPOTrainer", "GRPOConfig", config, unmatched)


def rloo_trl(cfg, num_processes: int) -> TRLRecipe:
    """GRPO's section with ``advantage="rloo"`` as TRL's ``RLOOTrainer`` (``TRLRow.translate``)."""
    g = cfg.grpo
    config, unmatched = _online_trl(cfg, num_processes)
    unmatched += _overlong_unmatched(g)
    config |= dict(normalize_advantages=False)
    if g.loss_type != "clipped" or g.importance_sampling_level != "token":
        unmatched.append(Unmatched(
            "grpo.loss_type / importance_sampling_level", (g.loss_type, g.importance_sampling_level),
            "RLOOTrainer has one objective: a clipped ratio per sequence (the sum of its token log-ratios, not "
            "GSPO's mean), no CISPO; translate(cfg, 'grpo') with advantage='grpo' or 'dr_grpo' has both"))
    unmatched.append(Unmatched(
        "grpo.unit", g.unit,
        "RLOOTrainer's ratio is per sequence (sum of token log-ratios) and its loss a mean over completions; "
        "the course clips per token and averages with the unit (the gradients agree only at μ=1 with "
        "unit='constant', max_length=1)",
    ))
    if g.beta > 0 and (g.kl_placement, g.kl_estimator) != ("reward", "k1"):
        unmatched.append(Unmatched(
            "grpo.kl_placement / kl_estimator", (g.kl_placement, g.kl_estimator),
            "RLOOTrainer puts k1 in the reward before the baseline (policy_loss.kl_shaped_rewards): "
            "kl_placement='reward', kl_estimator='k1' is its form",
        ))
    return TRLRecipe("RLOOTrainer", "RLOOConfig", config, unmatched)


def rollout_numbers(rows: list[dict]) -> dict:
    """What a recipe records of an online stage's rollouts (GRPO's, RFT's): the share of zero-variance groups and
    the mean reward of the first and the last rollout."""
    return {"zero_variance_share": row_mean(rows, "zero_variance_rate"),
            "reward_mean_first": rows[0]["reward_mean"] if rows else None,
            "reward_mean_last": rows[-1]["reward_mean"] if rows else None}


GRPO_TRL = {"grpo": TRLRow(grpo_trl, data="prompts"),
            "rloo": TRLRow(rloo_trl, data="prompts", requires={"advantage": "rloo"})}


@register("grpo", GRPOConfig, passport=grpo_passport, trl=GRPO_TRL, recipe_numbers=rollout_numbers,
          flops=grpo_run_flops, env=True, controls=("sft", "rft"),
          completion_length=lambda cfg: cfg.grpo.max_completion_length, time_split=True,
          rollout_worker=lambda g: f"max_staleness={g.max_staleness}" if g.max_staleness else "",
          gpu=dict(steps=200, batch_prompts=128, num_generations=8, max_completion_length=7, eval_every=20),
          test=dict(steps=4, batch_prompts=4, num_generations=4, max_completion_length=4, eval_every=2))
def grpo_stage(ctx: StageContext) -> StageResult:
    """``train grpo``: the GRPO family from the SFT policy; the SFT weights are the reference (KL logged)."""
    res = train_grpo(ctx.model, ctx.task, ctx.cfg.grpo, ctx.train, generator=ctx.generator,
                     reference_state=ctx.sft_weights, eval_fn=ctx.held_out, name=ctx.label)
    return StageResult(steps=res["steps"], rl_seconds=res["rl_seconds"], summary={"loop": res["loop"]})
