"""The one trainer loop, and the registry of trainers a run can name.

Every trainer of the course (``sft``, ``dpo``, ``grpo``, ``rft``, ``ppo``, the reward model) is a
*step function* plus the state it needs to resume; ``train_loop`` does the rest, the same way for
all of them: count steps, time them, evaluate every ``eval_every`` steps and at the end, append one
metrics row per step (``MetricsLog``: memory and JSON lines), advance the progress bar, checkpoint
every ``checkpoint_every`` steps and at the end, and honour a stop request (the first Ctrl-C,
``runtime.stop_on_interrupt``) at the next step boundary: checkpoint, then raise ``Interrupted``.

``register(kind)`` adds a trainer to ``TRAINERS``, the table ``pipeline.run`` reads: a stage
function ``stage(ctx: StageContext) -> StageResult`` that runs the trainer from the SFT policy.
A new trainer is one file: its loop (through ``train_loop``) and its registered stage.

Simplifications, said out loud: one process (GRPO's asynchronous mode adds a rollout worker
process, ``course_lib.rollout_worker``; the loop itself runs in the trainer's); a step's seconds are its wall time without the
evaluation; the trainer restores its own parts of a checkpoint (optimizers, extra models, data),
the loop only the step counter and the elapsed seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from course_lib.runtime import Interrupted, MetricsLog, StepFailed, progress, stop_requested


def train_loop(
    name: str,
    step_fn: Callable[[int], dict],
    *,
    total: int,
    state_dict: Callable[[], dict],
    state: dict | None = None,
    eval_fn: Callable[[], dict] | None = None,
    eval_every: int = 1,
    log: MetricsLog | None = None,
    checkpoint=None,
    checkpoint_every: int = 10,
    show_progress: bool = True,
    time_budget: float | None = None,
    desc: str | None = None,
    postfix: Callable[[dict], dict] | None = None,
    seconds_key: str | None = None,
) -> dict:
    """Run ``step_fn`` until ``total`` steps in all (or for ``time_budget`` seconds); returns ``{"steps", "seconds"}``.

    ``step_fn(step)`` takes one optimiser step (``step`` counts those already taken) and returns
    its metrics row without ``"step"``. ``state_dict()`` is what the trainer needs to resume
    (optimizers, …); ``checkpoint(step, state_dict(), seconds)`` is called every
    ``checkpoint_every`` steps, at the last step, before stopping on a stop request, and before
    re-raising a ``runtime.StepFailed`` from ``step_fn`` (a failure outside the trainer's state) or
    an ``Interrupted`` (a stop requested while ``step_fn`` waited: the completed steps are saved).
    ``state`` (a checkpoint's ``step`` and ``seconds``) continues a run. ``eval_fn()`` is merged
    into the row every ``eval_every`` steps and at the last one (not under ``time_budget``);
    ``postfix(row)`` labels the bar then. ``seconds_key`` puts the elapsed seconds into each row.
    """
    step, seconds = (state["step"], state["seconds"]) if state is not None else (0, 0.0)
    log = log if log is not None else MetricsLog()
    bar = progress(total if time_budget is None else 0, desc or name, show_progress, initial=step)
    start = time.perf_counter()
    while (step < total) if time_budget is None else (time.perf_counter() - start < time_budget):
        t0 = time.perf_counter()
        try:
            row = step_fn(step)
        except StepFailed:  # e.g. the rollout worker died: keep the completed steps, then stop
            bar.close()
            if checkpoint is not None:
                checkpoint(step, state_dict(), seconds)
            raise
        except Interrupted:  # a stop requested while the step waited (on the rollout worker): the same
            bar.close()
            if checkpoint is not None:
                checkpoint(step, state_dict(), seconds)
            raise Interrupted(name, step) from None
        seconds += time.perf_counter() - t0
        step += 1
        row = {"step": step, **row}
        if seconds_key is not None:
            row[seconds_key] = seconds
        if eval_fn is not None and time_budget is None and (step % eval_every == 0 or step == total):
            row.update(eval_fn())
            if postfix is not None:
                bar.set_postfix(**postfix(row))
        log.append(row)
        bar.update(1)
        due = time_budget is None and (step % checkpoint_every == 0 or step == total)
        if checkpoint is not None and (due or stop_requested()):
            checkpoint(step, state_dict(), seconds)
        if stop_requested():
            bar.close()
            raise Interrupted(name, step)
    bar.close()
    return {"steps": step, "seconds": seconds}


# ---- the registry of trainers a run can name -------------------------------------------------------
@dataclass
class StageContext:
    """What a registered trainer gets from ``pipeline.run``: the SFT policy and the run's plumbing."""

    cfg: object  # configs.RunConfig
    task: object  # task.AdditionTask
    model: object  # the policy, holding the SFT weights (or the resumed stage's)
    seed: int
    out: object  # the run folder (pathlib.Path)
    state: dict | None  # this stage's checkpoint when resuming, else None
    log: MetricsLog
    checkpoint: Callable  # checkpoint(step, trainer_state, seconds)
    sft_weights: dict  # the SFT policy's state dict (the reference)
    generator: object  # the stage's data generator (torch.Generator, seeded by the pipeline)
    sft: dict  # the SFT stage: {"eval", "seconds", "steps"}
    say: Callable = print
    show_progress: bool = True


@dataclass
class StageResult:
    steps: int
    rl_seconds: float
    final: dict | None = None  # held-out evaluation of the trained policy (None: the pipeline evaluates it)
    summary: dict = field(default_factory=dict)  # extra summary entries (reward_model, memory, …)
    reward_model_info: dict | None = None  # a reward model's passport entry
    line: str | None = None  # the closing line, when the held-out accuracy is not the headline


@dataclass
class Registered:
    stage: Callable[[StageContext], StageResult]
    trains_policy: bool = True  # False: the policy is unchanged (a reward model)
    completion_length: Callable | None = None  # cfg -> max_completion_length of the final evaluation
    time_split: bool = False  # report generation vs update seconds (an online trainer's rows carry them)


TRAINERS: dict[str, Registered] = {}


def register(kind: str, *, trains_policy: bool = True, completion_length=None, time_split: bool = False):
    """Add ``stage(ctx) -> StageResult`` to ``TRAINERS`` under ``kind`` (a decorator)."""
    def add(stage):
        TRAINERS[kind] = Registered(stage, trains_policy, completion_length, time_split)
        return stage

    return add
