"""Supervised fine-tuning of the tiny GPT: the one SFT loop (the reference policy, §6).

Every SFT in the course runs through ``train_sft``: ``python -m course_lib train sft``, the SFT
stage before DPO and GRPO, the notebooks, the "same wall-clock on more SFT" control and the
"NLL only" control (``demos=``: other demonstrations, e.g. checker-approved samples). So
``train sft --seed 0`` and the SFT inside ``train grpo --seed 0`` are the same model.

Simplifications, said out loud: batches are drawn with replacement from a small fixed set of
demonstrations (``TaskConfig.n_demos``) by a dedicated ``torch.Generator``; AdamW with a constant
learning rate and gradient clipping; the loss is the token-mean negative log-likelihood of the
completion tokens (``policy_loss.aggregate`` with ``unit="token_mean"``).
"""

from __future__ import annotations

import torch

from course_lib.formulas.policy_loss import aggregate
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.model import completion_logprobs
from course_lib.tinygpt.runtime import to_device
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import SFTConfig
from course_lib.trainers.trainer import (
    StageContext,
    StageResult,
    TrainContext,
    TRLRecipe,
    TRLRow,
    Unmatched,
    register,
    train_offline,
    trl_per_device,
)
from course_lib.trainers.utilisation import supervised_run_flops


def sft_loss(model, ids, attn, cmask, *, prompt_length: int = 1, validate: bool = True) -> torch.Tensor:
    """Token-mean negative log-likelihood of the completion tokens.

    ``prompt_length``: completion tokens start at or after this position, so the language-model
    head runs only from there (1 scores every position). ``validate=False``: no input checks.
    """
    logps, mask = completion_logprobs(model, ids, attn, cmask, start=prompt_length, validate=validate)
    return aggregate(-logps, mask, unit="token_mean", validate=validate)


def train_sft(
    model,
    task: AdditionTask,
    cfg: SFTConfig,
    ctx: TrainContext | None = None,
    *,
    seed: int = 0,
    generator: torch.Generator | None = None,
    time_budget: float | None = None,
    eval_at_end: bool = True,
    demos: tuple | None = None,
) -> dict:
    """Supervised fine-tuning on the task's (scarce, partly flawed) demonstrations.

    Runs until ``ctx.steps`` optimizer steps in total (default ``cfg.steps``), or until
    ``time_budget`` seconds have passed when given (the "same wall-clock on more SFT" control).
    Batches come from ``generator`` (default: a fresh one seeded with ``seed``). ``demos``
    replaces the demonstrations with other ``(input_ids, attention_mask, completion_mask)``.
    ``ctx.state`` (``optimizer``, ``step``, ``seconds`` from a checkpoint) resumes; the caller
    restores the generator. ``ctx.checkpoint(step, {"optimizer": …}, seconds)`` is called every
    ``ctx.checkpoint_every`` steps, at the end, and before stopping on a requested stop (Ctrl-C).
    Returns ``{"steps", "seconds"}`` (training seconds, evaluations excluded) plus
    ``evaluate``'s accuracies when ``eval_at_end``.
    """
    ctx = ctx if ctx is not None else TrainContext()
    device = next(model.parameters()).device
    ids, attn, cmask = (t.to(device) for t in demos) if demos is not None else task.demonstrations(device)
    gen = generator if generator is not None else torch.Generator().manual_seed(seed)

    def batch_of(step: int) -> dict:
        idx = to_device(torch.randint(0, ids.shape[0], (cfg.batch_size,), generator=gen), device)  # non-blocking
        return {"ids": ids[idx], "attn": attn[idx], "cmask": cmask[idx]}

    def loss_of(batch: dict, validate: bool) -> tuple[torch.Tensor, dict]:
        loss = sft_loss(model, batch["ids"], batch["attn"], batch["cmask"], prompt_length=task.prompt_length,
                        validate=validate)
        return loss, {"loss": loss.item()}

    done = train_offline("sft", model, task, cfg, batch_of, loss_of, ctx, time_budget=time_budget)
    result = {"steps": done["steps"], "seconds": done["rl_seconds"]}
    if eval_at_end:
        result.update(evaluate(model, task))
    return result

def demonstrations(cfg) -> str:
    """The passport's words for the task's demonstrations (SFT's data)."""
    return (f"{cfg.task.n_demos} demonstrations of {cfg.task.digits}-digit addition, "
            f"{cfg.task.teacher_error_rate:.0%} from a teacher that drops the ones-column carry")


def sft_passport(cfg, info: dict) -> dict:
    """SFT's passport sections (``course_lib.run.passport``)."""
    return dict(
        data_and_policy={"examples": demonstrations(cfg), "generated_by": "fixed teacher (offline)",
                         "reuse": "sampled with replacement every step",
                         "overlap": "held-out prompts excluded from the demonstrations"},
        reward_contract={"source": "none (imitation of demonstrations)", "granularity": "per token (NLL)"},
        optimisation={"algorithm": "supervised, offline", "roles": ["policy"], "kl": "none",
                      "averaging_unit": "token_mean"},
    )


def sft_from_context(ctx: StageContext, demos: tuple | None = None) -> StageResult:
    """``train_sft`` on the stage's model, data generator, log and checkpoints (``demos``: other demonstrations)."""
    res = train_sft(ctx.model, ctx.task, ctx.cfg.sft, ctx.train, generator=ctx.generator, demos=demos)
    return StageResult(steps=res["steps"], rl_seconds=res["seconds"])


def sft_trl(cfg, num_processes: int) -> TRLRecipe:
    """SFT as TRL's ``SFTTrainer`` (``TRLRow.translate``)."""
    s = cfg.sft
    config = dict(
        per_device_train_batch_size=trl_per_device(s.batch_size, num_processes, "sft.batch_size"),
        completion_only_loss=True,  # token-mean NLL of the completion tokens, as train.sft_loss
        max_length=cfg.task.prompt_length + cfg.task.answer_length,
    )
    unmatched = [
        Unmatched("sft data order", "with replacement", "TRL walks shuffled epochs over the demonstrations"),
        Unmatched("sft.eval_every", s.eval_every, "not a TRL option: HeldoutAccuracy(task, every=...) callback"),
    ]
    return TRLRecipe("SFTTrainer", "SFTConfig", config, unmatched)


@register("sft", SFTConfig, passport=sft_passport, env=True, trl=TRLRow(sft_trl, data="demonstrations"),
          flops=lambda cfg, rows, **kw: supervised_run_flops(cfg, rows, vocab=kw["vocab"],
                                                              sequences=cfg.sft.batch_size),
          gpu=dict(steps=1500, batch_size=256, learning_rate=1e-3, eval_every=250),
          test=dict(steps=60, batch_size=16, learning_rate=3e-3, eval_every=30), start_provider=True)
def sft_stage(ctx: StageContext) -> StageResult:
    """``train sft``: the pipeline's SFT provider already trained (or resumed) the policy, so report it; in a
    recipe (``ctx.sft`` None) train it here."""
    if ctx.sft is None:
        return sft_from_context(ctx)
    return StageResult(steps=ctx.sft["steps"], rl_seconds=0.0, final=ctx.sft["eval"], flop_seconds=ctx.sft["seconds"])
