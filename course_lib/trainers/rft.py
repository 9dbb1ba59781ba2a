"""Online rejection-sampling fine-tuning (RFT): the control every GRPO result needs.

Lecture §9 (what the group baseline adds), §15 (the checker is the reward). One step:

1. draw B fresh prompts and sample G completions each — the very rollout GRPO collects
   (``course_lib.tinygpt.rollout.collect_rollouts``, same prompts, temperature and length budget);
2. score them with the same checker;
3. keep what the checker approves and take one supervised step on it (token-mean negative
   log-likelihood), with the same optimiser, learning rate and gradient clipping as GRPO.

Written as a policy gradient, RFT is GRPO with the advantage replaced by an indicator
``A_i = 1[r_i ≥ threshold]``: no baseline, no negative samples. So "GRPO minus RFT" measures
exactly what the baseline and the negative samples buy; when the difference is zero, the
gain came from sampling and checking, not from GRPO's advantage.

``weighting="reward"`` replaces the indicator by the reward itself (reward-weighted SFT,
i.e. REINFORCE without a baseline, all weights ≥ 0). With binary rewards the two coincide;
with partial credit (``reward="partial"``) the reward-weighted form also reinforces answers
that are only half right — the case where subtracting a baseline matters.

Simplifications, said out loud: no KL term and no reference model (GRPO's default β = 0 has
none either); a step whose rollout has nothing to keep makes no update, as a GRPO step whose
groups all have zero variance.
"""

from __future__ import annotations

import time

import torch

from course_lib.formulas.advantages import rft_weights
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.model import completion_logprobs
from course_lib.tinygpt.rewards import resolve_reward
from course_lib.tinygpt.rollout import collect_rollouts
from course_lib.tinygpt.runtime import autocast, make_optimizer, optimizer_step, set_threads
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers import reward_model  # noqa: F401 - registers the rm:DIR reward source
from course_lib.trainers.configs import GRPOConfig
from course_lib.trainers.grpo import grpo_passport, rollout_numbers
from course_lib.trainers.trainer import (
    StageContext,
    StageResult,
    StageStopped,
    TrainContext,
    register_stage,
    row_mean,
    train_loop,
)


def rft_loss(model, batch: dict, weights: torch.Tensor, *, prompt_length: int = 1) -> torch.Tensor:
    """Weighted token-mean NLL: −Σ_i w_i Σ_t log π(y_it) / Σ_i w_i·|y_i| (SFT when w ∈ {0, 1}).

    ``prompt_length``: completion tokens start at or after it (``completion_logprobs``'s ``start``).
    """
    logps, mask = completion_logprobs(model, batch["input_ids"], batch["attention_mask"], batch["completion_mask"],
                                      start=prompt_length)
    w = weights.to(logps.device)[:, None]
    return -(w * logps).sum() / (w * mask).sum()


def train_rft(
    model,
    task: AdditionTask,
    cfg: GRPOConfig,
    ctx: TrainContext | None = None,
    *,
    generator: torch.Generator,
    weighting: str = "filter",
    threshold: float = 1.0,
    eval_fn=None,
) -> dict:
    """RFT on GRPO's rollouts: ``cfg`` is a ``GRPOConfig`` and is read exactly as GRPO reads it.

    Options that only shape GRPO's advantage or surrogate (``advantage``, ``unit``,
    ``epsilon*``, ``beta``) have no meaning here; ``num_iterations`` > 1 is refused, since a
    supervised step has no old policy to clip against. Logs the rollout statistics GRPO logs,
    plus ``kept_fraction`` (share of completions with weight > 0) and the loss. ``ctx.state``,
    ``checkpoint`` and ``ctx.checkpoint_every`` resume and checkpoint as in ``train_grpo``.
    """
    ctx = ctx if ctx is not None else TrainContext()
    if cfg.num_iterations != 1:
        raise ValueError(f"RFT takes one supervised step per rollout; num_iterations must be 1, got "
                         f"{cfg.num_iterations}")
    rft_weights(torch.zeros(1), weighting=weighting, threshold=threshold)  # validate the options once
    state = ctx.state
    set_threads(ctx.threads)
    reward_fn = resolve_reward(cfg.reward, task)
    device = next(model.parameters()).device
    opt = make_optimizer(model, cfg.learning_rate)
    if state is not None:
        opt.load_state_dict(state["optimizer"])
    eval_fn = eval_fn or (lambda m: evaluate(m, task, max_completion_length=cfg.max_completion_length))

    def one_step(step: int) -> dict:
        rollout = collect_rollouts(model, task, cfg, generator, reward_fn)
        stats = rollout["stats"]
        t1 = time.perf_counter()
        upd = {"loss": 0.0, "kept_fraction": 0.0, "skipped": 1}
        if "batch" in rollout:
            weights = rft_weights(rollout["batch"]["rewards"].flatten(), weighting=weighting, threshold=threshold)
            kept = weights > 0
            if bool(kept.any()):
                batch = {k: rollout["batch"][k][kept.to(rollout["batch"][k].device)]
                         for k in ("input_ids", "attention_mask", "completion_mask")}
                model.train()
                with autocast(device):
                    loss = rft_loss(model, batch, weights[kept], prompt_length=task.prompt_length)
                optimizer_step(loss, ctx.max_grad_norm, (model, opt))
                model.eval()
                upd = {"loss": loss.item(), "kept_fraction": float(kept.float().mean()), "skipped": 0}
        if device.type == "cuda":
            torch.cuda.synchronize()
        return {**stats, **upd, "update_seconds": time.perf_counter() - t1}

    done = train_loop("rft", one_step, ctx, total=cfg.steps if ctx.steps is None else ctx.steps,
                      state_dict=lambda: {"optimizer": opt.state_dict()}, eval_fn=lambda: eval_fn(model),
                      eval_every=cfg.eval_every, desc=f"rft[{weighting}]", seconds_key="rl_seconds",
                      postfix=lambda row: {"acc": f"{row['accuracy']:.2f}", "reward": f"{row['reward_mean']:.2f}"})
    model.eval()
    return {"steps": done["steps"], "rl_seconds": done["seconds"]}


def rft_passport(cfg, info: dict) -> dict:
    """RFT's passport sections: GRPO's rollouts, a supervised step on the accepted samples."""
    out = grpo_passport(cfg, info)
    out.pop("six_choices")
    out["data_and_policy"]["reuse"] = ("each rollout used for one supervised step on its accepted samples, then "
                                       "discarded")
    out["optimisation"] = {"algorithm": "online rejection-sampling fine-tuning (RFT), on-policy",
                           "advantage": "none: weight 1[reward >= 1] per completion (no baseline, no negatives)",
                           "roles": ["policy"], "kl": "none", "averaging_unit": "token_mean (NLL of accepted samples)"}
    return out


def rft_numbers(rows: list[dict]) -> dict:
    """What a recipe records of an RFT stage: the share of samples accepted, then GRPO's rollout numbers."""
    return {"acceptance_rate": row_mean(rows, "kept_fraction"), **rollout_numbers(rows)}


@register_stage("rft", "grpo", passport=rft_passport, control=True, recipe_numbers=rft_numbers)
def rft_stage(ctx: StageContext) -> StageResult:
    """RFT from the stage's policy: a run's control (``ctx.sft`` set: from the SFT policy, GRPO's prompts and
    steps), or a recipe's stage, refused there (``StageStopped``) when the first rollout, the very one its first
    step draws, has nothing to fine-tune on."""
    g = ctx.cfg.grpo
    if ctx.sft is None:  # a recipe's stage: look at the first rollout without drawing it
        state = ctx.generator.get_state()
        with torch.random.fork_rng(devices=[]):
            rollout = collect_rollouts(ctx.model, ctx.task, g, ctx.generator, resolve_reward(g.reward, ctx.task))
        ctx.generator.set_state(state)
        if rollout["stats"]["reward_mean"] <= 0:
            n = g.batch_prompts * g.num_generations
            raise StageStopped(f"rejection sampling accepts nothing: the checker approved 0 of the first rollout's "
                               f"{n} samples, so there is nothing to fine-tune on (train the policy further first)")
    res = train_rft(ctx.model, ctx.task, g, ctx.train, generator=ctx.generator, eval_fn=ctx.held_out)
    return StageResult(steps=res["steps"], rl_seconds=res["rl_seconds"])
