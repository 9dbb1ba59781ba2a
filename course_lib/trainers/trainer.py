"""The one trainer loop, and the registry of trainers a run can name.

Every trainer of the course (``sft``, ``dpo``, ``kto``, ``orpo``, ``grpo``, ``rft``, ``ppo``, the reward
model, the AI-feedback judge) is a *step function* plus the state it needs to resume; ``train_loop`` does the
rest, the same way for all of them: count steps, time them, evaluate every ``eval_every`` steps and
at the end, append one metrics row per step (``MetricsLog``: memory and JSON lines), advance the
progress bar, checkpoint every ``checkpoint_every`` steps and at the end, and honour a stop request
(the first Ctrl-C, ``runtime.stop_on_interrupt``) at the next step boundary: checkpoint, then raise
``Interrupted``.
``train_offline`` is the offline trainers' step on top of it (SFT, the DPO family, KTO, ORPO,
the reward model, the AI-feedback judge): a batch, a loss, one ``runtime.optimizer_step``. Every trainer
takes its model(s), the task, its config section and what it trains on, then ``ctx``, a ``TrainContext``:
``train_sft(model, task, cfg, ctx)``, ``train_dpo(model, task, cfg, data, ctx)``, ``train_ppo(policy, critic,
task, cfg, reward_fn, ctx)``, its own options keyword-only after. ``ctx`` is the plumbing, the same for all of
them (log, resume state, checkpoint and its cadence, gradient clip, steps, progress bar, threads).

``register(kind, ConfigClass, …)`` adds a trainer to ``TRAINERS``: a stage function
``stage(ctx: StageContext) -> StageResult`` that runs the trainer from the SFT policy, its config
section with the named configs' values, its passport sections, its FLOP count, whether it can
be a recipe's stage and what a recipe records of it, and its row in the TRL bridge (``TRLRow``:
TRL's trainer and config, the translation of its section, the data it trains on; or why it has
none). ``register_stage`` adds a stage that reads another trainer's section (RFT, GRPO's control;
the recipes' pretraining). Everything that names trainers loops over these tables:
``configs.RunConfig``, ``validate`` and ``from_dict``, the CLI, ``pipeline.run`` and its controls,
the seeds (``course_lib.run.seeds``), the passport, the recipes' stages, ``course_lib.trl``. A new
trainer is one file: its config, its loop (through ``train_loop``) and its registered stage. The
course's own trainers are imported the first time the table is read (``trainers()``).

Simplifications, said out loud: one process (GRPO's asynchronous mode adds a rollout worker
process, ``course_lib.trainers.rollout_worker``; the loop itself runs in the trainer's); a step's
seconds are its wall time without the evaluation; the trainer restores its own parts of a checkpoint
(optimizers, extra models, data), the loop only the step counter and the elapsed seconds.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from course_lib._validate import number
from course_lib.tinygpt.runtime import (
    DEFAULT_THREADS,
    Interrupted,
    MetricsLog,
    StepFailed,
    autocast,
    check_threads,
    make_optimizer,
    optimizer_step,
    progress,
    set_threads,
    stop_requested,
)

DATA_PREFIX = "data_"  # how a stage's own data is named inside its checkpoint


@dataclass(frozen=True)
class TrainContext:
    """A trainer's plumbing, the same for every ``train_x(…, ctx)``: where it logs, resumes, checkpoints.

    ``log``: the metrics rows (a fresh ``MetricsLog`` if None); ``state``: a checkpoint to resume;
    ``checkpoint(step, trainer_state, seconds)`` every ``checkpoint_every`` steps and at the end;
    ``max_grad_norm``: the gradient clip; ``steps``: the steps in total (None: the config's);
    ``threads``: torch's CPU threads (None: leave torch's setting). Bad values: ValueError naming the field.
    """

    log: MetricsLog | None = None
    state: dict | None = None
    checkpoint: Callable | None = None
    checkpoint_every: int = 10
    max_grad_norm: float = 1.0
    steps: int | None = None
    show_progress: bool = True
    threads: int | None = DEFAULT_THREADS

    def __post_init__(self):
        number(self.steps, "steps", integer=True, low=0, none="the config's steps")
        number(self.checkpoint_every, "checkpoint_every", integer=True, low=1)
        number(self.max_grad_norm, "max_grad_norm", low=0, low_open=True)
        check_threads(self.threads)

    def replace(self, **changes) -> TrainContext:
        """A copy with ``changes`` (validated again)."""
        return replace(self, **changes)

    def keeping(self, data: dict) -> TrainContext:
        """A copy whose checkpoints also hold ``data`` (a stage's sampled pairs): a resume reads them back with
        ``saved_data`` instead of sampling again. Without a checkpoint there is nothing to keep them in: ``self``."""
        if self.checkpoint is None:
            return self
        saved = {DATA_PREFIX + k: v for k, v in data.items()}
        return self.replace(checkpoint=lambda step, state, seconds: self.checkpoint(step, {**state, **saved}, seconds))

    def saved_data(self) -> dict:
        """The ``data`` a checkpoint written through ``keeping`` holds (``state`` must be a checkpoint)."""
        return {k[len(DATA_PREFIX):]: v for k, v in self.state.items() if k.startswith(DATA_PREFIX)}


def train_loop(
    name: str,
    step_fn: Callable[[int], dict],
    ctx: TrainContext | None = None,
    *,
    total: int,
    state_dict: Callable[[], dict],
    eval_fn: Callable[[], dict] | None = None,
    eval_every: int = 1,
    time_budget: float | None = None,
    desc: str | None = None,
    postfix: Callable[[dict], dict] | None = None,
    seconds_key: str | None = None,
) -> dict:
    """Run ``step_fn`` until ``total`` steps in all (or for ``time_budget`` seconds); returns ``{"steps", "seconds"}``.

    ``step_fn(step)`` takes one optimiser step (``step`` counts those already taken) and returns
    its metrics row without ``"step"``, appended to ``ctx.log``. ``state_dict()`` is what the trainer needs
    to resume (optimizers, …); ``ctx.checkpoint(step, state_dict(), seconds)`` is called every
    ``ctx.checkpoint_every`` steps, at the last step, before stopping on a stop request, and before
    re-raising a ``runtime.StepFailed`` from ``step_fn`` (a failure outside the trainer's state) or
    an ``Interrupted`` (a stop requested while ``step_fn`` waited: the completed steps are saved).
    ``ctx.state`` (a checkpoint's ``step`` and ``seconds``) continues a run (``ctx.steps``, ``threads`` and
    ``max_grad_norm`` are the trainer's to use). ``eval_fn()`` is merged
    into the row every ``eval_every`` steps and at the last one (not under ``time_budget``);
    ``postfix(row)`` labels the bar then. ``seconds_key`` puts the elapsed seconds into each row.
    """
    ctx = ctx if ctx is not None else TrainContext()
    state, checkpoint = ctx.state, ctx.checkpoint
    step, seconds = (state["step"], state["seconds"]) if state is not None else (0, 0.0)
    log = ctx.log if ctx.log is not None else MetricsLog()
    bar = progress(total if time_budget is None else 0, desc or name, ctx.show_progress, initial=step)
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
        due = time_budget is None and (step % ctx.checkpoint_every == 0 or step == total)
        if checkpoint is not None and (due or stop_requested()):
            checkpoint(step, state_dict(), seconds)
        if stop_requested():
            bar.close()
            raise Interrupted(name, step)
    bar.close()
    return {"steps": step, "seconds": seconds}


def train_offline(name: str, model, task, cfg, batch_of, loss_of, ctx: TrainContext | None = None, *,
                  time_budget: float | None = None, held_out: Callable[[], dict] | None = None,
                  extra_state: Callable[[], dict] | None = None, mixed_precision: bool = True) -> dict:
    """The one step loop of the offline trainers (SFT, DPO and its variants, KTO, ORPO, the reward model, the judge).

    Each step takes ``batch_of(step)`` (a dict of tensors already on the model's device), computes
    ``loss_of(batch, validate) -> (loss, stats)`` under autocast (``validate`` only on the first
    step: the inputs are checked once; ``mixed_precision=False``: float32), and makes one clipped
    AdamW step at ``cfg.learning_rate`` (``runtime.optimizer_step``). Every ``cfg.eval_every``
    steps: ``held_out()``, by default the policy's held-out accuracy on ``task``
    (``evaluation.evaluate``; ``task=None``: no evaluation). Runs until ``ctx.steps`` in total
    (default ``cfg.steps``), or for ``time_budget`` seconds. ``ctx.state`` resumes optimizer, step
    and seconds (the caller restores the RNG and what ``extra_state()`` saved);
    ``ctx.checkpoint(step, {"optimizer": …, **extra_state()}, seconds)`` is called every
    ``ctx.checkpoint_every`` steps, at the end and before stopping on a requested stop (Ctrl-C).
    Returns ``{"steps", "rl_seconds"}``.
    """
    from course_lib.tinygpt.evaluation import evaluate

    ctx = ctx if ctx is not None else TrainContext()
    state = ctx.state
    set_threads(ctx.threads)
    device = next(model.parameters()).device
    opt = make_optimizer(model, cfg.learning_rate)
    if state is not None:
        opt.load_state_dict(state["optimizer"])
    first = state["step"] if state is not None else 0  # the first step checks its inputs; then no checks
    model.train()

    def one_step(step: int) -> dict:
        t0 = time.perf_counter()
        batch = batch_of(step)
        with autocast(device) if mixed_precision else contextlib.nullcontext():
            loss, stats = loss_of(batch, step == first)
        optimizer_step(loss, ctx.max_grad_norm, (model, opt))
        return {**stats, "update_seconds": time.perf_counter() - t0}

    def accuracy() -> dict:
        out = evaluate(model, task)
        model.train()
        return out

    eval_fn = held_out if held_out is not None or task is None else accuracy
    done = train_loop(name, one_step, ctx, total=cfg.steps if ctx.steps is None else ctx.steps,
                      state_dict=lambda: {"optimizer": opt.state_dict(), **(extra_state() if extra_state else {})},
                      eval_fn=eval_fn, eval_every=cfg.eval_every, time_budget=time_budget,
                      postfix=(lambda row: {"acc": f"{row['accuracy']:.2f}"}) if eval_fn is accuracy else None)
    model.eval()
    return {"steps": done["steps"], "rl_seconds": done["seconds"]}


# How a synchronous trainer's loop is placed and run, and how stale an online trainer's rollouts are (the
# passport's systems group and grpo.loop_entry's account of the loop that ran)
SYNCHRONOUS = {"placement": "colocated: one process, generation and training share the weights",
               "loop": "synchronous (generate, then update)"}
ONLINE_STALENESS = "none beyond the inner epochs on one rollout"


# ---- the registry of trainers a run can name -------------------------------------------------------
@dataclass
class StageContext:
    """What a registered stage gets (``pipeline.stage_from_sft``, a recipe, ``seeds.rl_from_sft``): the policy to
    train, the SFT weights and the run's plumbing."""

    cfg: object  # configs.RunConfig
    task: object  # task.AdditionTask
    model: object  # the policy, holding the SFT weights (or the resumed stage's)
    seed: int
    out: object  # the run folder (pathlib.Path)
    train: TrainContext  # log, checkpoint, the stage's checkpoint when resuming (state), the run's clip and cadence
    sft_weights: dict  # the SFT policy's state dict (the reference)
    generator: object  # the stage's data generator (torch.Generator, seeded by the pipeline)
    sft: dict | None  # the pipeline's SFT stage: {"eval", "seconds", "steps"}; None in a recipe (no SFT provider)
    say: Callable = print
    held_out: Callable | None = None  # model -> the held-out evaluation its loop runs (None: the trainer's own)
    label: str | None = None  # its progress bar's label (None: the trainer's own)


@dataclass
class StageResult:
    steps: int
    rl_seconds: float
    final: dict | None = None  # held-out evaluation of the trained policy (None: the pipeline evaluates it)
    summary: dict = field(default_factory=dict)  # extra summary entries (reward_model, memory, …)
    reward_model_info: dict | None = None  # a reward model's or a judge's passport entry (its saved info file)
    line: str | None = None  # the closing line, when the held-out accuracy is not the headline
    flop_seconds: float | None = None  # the seconds its counted FLOPs ran in, when not rl_seconds


# ---- a trainer's row in the TRL bridge: pure data (course_lib.trl translates and builds it; no TRL here) ----
@dataclass
class Unmatched:
    """A course option TRL has no exact equivalent for, and what TRL does instead."""

    option: str
    value: object
    trl_does: str

    def __str__(self) -> str:
        return f"{self.option}={self.value!r}: {self.trl_does}"


@dataclass
class TRLRecipe:
    """A trainer's recipe in TRL 1.16's words (what a ``TRLRow``'s ``translate`` returns).

    ``trainer`` and ``config_class``: TRL's class names, found in ``module``; ``config``: the config's keyword
    arguments beyond those every recipe shares (``course_lib.trl.trl_translate`` adds precision, steps, learning
    rate, clipping, logging); ``unmatched``: the course options without an exact TRL equivalent.
    """

    trainer: str
    config_class: str
    config: dict
    unmatched: list[Unmatched]
    module: str = "trl"


TRL_DATA = ("demonstrations", "pairs", "answers", "prompts")  # what a TRL trainer trains on (TRLRow.data)
NO_TRL_ROW = "no TRL row: the TRL bridge does not translate this trainer"


@dataclass(frozen=True)
class TRLRow:
    """How the TRL bridge (``course_lib.trl``) hands a trainer's recipe to TRL (``register(trl=)``).

    ``translate(cfg, num_processes) -> TRLRecipe`` reads the run config (``trl_per_device`` divides a
    batch among ``accelerate launch``'s processes). ``data``: what TRL trains on, which the bridge
    builds: ``"demonstrations"`` (the task's), ``"pairs"`` (DPO's preference pairs), ``"answers"``
    (those pairs made into the trainer's own data by ``prepare(task, pairs, section, generator)``),
    ``"prompts"`` (fresh prompts scored by the section's ``reward``).
    ``section``: the config section it reads (default: the trainer's own); ``requires``: options
    of that section the row needs (RLOO's ``advantage="rloo"``; the bridge's CLI sets them);
    ``names``: course option -> TRL argument where every option maps by name or is listed
    unmatched; ``start(cfg, task, seed)``: the weights TRL trains when not the SFT policy.
    """

    translate: Callable
    data: str
    section: str = ""
    requires: dict = field(default_factory=dict)
    names: dict = field(default_factory=dict)
    prepare: Callable | None = None
    start: Callable | None = None

    def __post_init__(self):
        if self.data not in TRL_DATA:
            raise ValueError(f"data must be one of {TRL_DATA}; got {self.data!r}")
        if self.data == "answers" and self.prepare is None:
            raise ValueError("data='answers' needs prepare(task, pairs, section, generator): the pairs made answers")


def trl_per_device(total: int, num_processes: int, what: str) -> int:
    """``total`` (the option ``what``, e.g. ``dpo.batch_size``) per process: one step still sees the course's batch."""
    if total % num_processes:
        raise ValueError(f"{what} ({total}) must be divisible by num_processes ({num_processes})")
    return total // num_processes


@dataclass
class Registered:
    """What the code outside a trainer knows about it, in one place (``register``'s arguments)."""

    stage: Callable[[StageContext], StageResult]
    config: type  # its section of RunConfig, named as the trainer (the class's defaults: the ``cpu`` config)
    gpu: dict = field(default_factory=dict)  # the section's options in the ``gpu`` config, over the class defaults
    test: dict = field(default_factory=dict)  # … and in the ``test`` config
    passport: Callable | None = None  # passport(cfg, info) -> its passport sections (``course_lib.run.passport``)
    flops: Callable | None = None  # flops(cfg, rows, vocab, reference) -> the run's FLOPs (trainers.utilisation)
    recipe_stage: bool | str = True  # can continue a previous stage's policy in a recipe; a str says why not
    env: bool | str = False  # runs episodes with an environment (task.env); a str says why not
    controls: tuple = ("sft",)  # the controls (pipeline.run's control=) it can be compared with
    trains_policy: bool = True  # False: the policy is unchanged (a reward model)
    completion_length: Callable | None = None  # cfg -> max_completion_length of the final evaluation
    time_split: bool = False  # report generation vs update seconds (an online trainer's rows carry them)
    trl: dict | str = NO_TRL_ROW  # {TRL kind: TRLRow} (course_lib.trl), or why it has none
    recipe_numbers: Callable | None = None  # rows -> the numbers a recipe's stage adds from its metrics rows
    full_precision: bool = False  # its matmuls run in float32 with TF32 off wherever it runs (runtime.full_precision)
    start_provider: bool = False  # its run is the pipeline's SFT stage itself, measured from the random initialisation
    rollout_worker: Callable | None = None  # section -> the options that start a rollout worker process ("" if none)


TRAINERS: dict[str, Registered] = {}
# The course's own trainers, imported (so registered) the first time the registry is read: ``trainers()``.
BUILTIN = ("course_lib.trainers.sft", "course_lib.trainers.dpo", "course_lib.trainers.grpo",
           "course_lib.trainers.reward_model", "course_lib.trainers.ppo", "course_lib.trainers.kto",
           "course_lib.trainers.orpo", "course_lib.trainers.rft",  # rft: a stage (register_stage), GRPO's control
           "course_lib.trainers.judge")
_loading: list[bool] = []


def register(kind: str, config: type, *, gpu: dict | None = None,
             test: dict | None = None, passport: Callable | None = None, flops: Callable | None = None,
             recipe_stage: bool | str = True, env: bool | str = False, controls: tuple | None = None,
             trains_policy: bool = True, completion_length=None, time_split: bool = False,
             trl: TRLRow | dict | str = NO_TRL_ROW, recipe_numbers: Callable | None = None,
             full_precision: bool = False, start_provider: bool = False, rollout_worker: Callable | None = None):
    """Add ``stage(ctx) -> StageResult`` to ``TRAINERS`` under ``kind`` (a decorator): a new trainer is this one line.

    ``config`` is its section of ``configs.RunConfig`` (named ``kind``), with the ``gpu`` and
    ``test`` configs' values over its defaults; the CLI's flags, ``validate`` and ``from_dict``
    follow from it. ``trl``: its row in the TRL bridge (a ``TRLRow``, named ``kind``, or
    ``{TRL kind: TRLRow}`` for several), or a sentence saying why it has none. ``recipe_numbers(rows)``:
    what a recipe records of its stage beyond the held-out numbers (e.g. GRPO's rewards). ``full_precision``:
    its matmuls run in float32 with TF32 off on every device, so its MFU is against the fp32 peak.
    ``passport(cfg, info)``: its passport sections (required). ``controls``: the controls it can be compared
    with (default: the same wall-clock on more SFT for a trainer that trains a policy, none otherwise).
    ``start_provider``: its run is the pipeline's SFT stage (SFT). ``rollout_worker(section)``: the options that
    make its run start a rollout worker process (GRPO's ``max_staleness``), "" when it runs in one process.
    """
    if not callable(passport):
        raise ValueError(f"passport must be a function passport(cfg, info) -> its passport sections; got {passport!r}")
    controls = (("sft",) if trains_policy else ()) if controls is None else controls
    if isinstance(trl, TRLRow):
        trl = {kind: trl}
    if isinstance(trl, dict):
        trl = {name: replace(row, section=row.section or kind) for name, row in trl.items()}
    elif not isinstance(trl, str):
        raise ValueError(f"trl must be a TRLRow, a dict of them or a str saying why none; got {trl!r}")

    def add(stage):
        TRAINERS[kind] = Registered(stage, config, dict(gpu or {}), dict(test or {}), passport, flops,
                                    recipe_stage, env, tuple(controls), trains_policy, completion_length, time_split,
                                    trl, recipe_numbers, full_precision, start_provider, rollout_worker)
        return stage

    return add


class StageStopped(Exception):
    """A recipe's stage could not start (e.g. nothing to learn from); the stages finished before it are kept."""


@dataclass
class Stage:
    """A stage that is not a trainer of its own (``register_stage``'s arguments): it reads another trainer's config
    ``section``; ``control``: it can also be a run's control (``pipeline.run(control=kind)``), trained from the SFT
    policy on that section's prompts for the trainer's steps; ``recipe_numbers`` as ``Registered``'s."""

    stage: Callable[[StageContext], StageResult]
    section: str
    passport: Callable
    control: bool = False
    recipe_numbers: Callable | None = None


STAGES: dict[str, Stage] = {}  # rft (course_lib.trainers.rft), pretrain (course_lib.run.recipes)


def register_stage(kind: str, section: str, *, passport: Callable, control: bool = False,
                   recipe_numbers: Callable | None = None):
    """Add a stage ``stage(ctx) -> StageResult`` to ``STAGES`` (a decorator), reading ``section``: a recipe's
    stage, and with ``control=True`` a run's control (the trainers that offer it list it in ``controls``)."""
    def add(stage):
        STAGES[kind] = Stage(stage, section, passport, control, recipe_numbers)
        return stage

    return add


def stages() -> dict[str, Stage]:
    """The registered stages (the course's own imported first, as ``trainers()`` does)."""
    trainers()
    return dict(STAGES)


def stage_entry(kind: str) -> Registered | Stage:
    """What a recipe's stage ``kind`` runs: a registered stage, else the registered trainer (ValueError if neither)."""
    return stages()[kind] if kind in stages() else entry(kind)


def row_mean(rows: list[dict], key: str) -> float | None:
    """The mean of ``key`` over the metrics rows that have it; None if none does."""
    values = [r[key] for r in rows if r.get(key) is not None]
    return sum(values) / len(values) if values else None


def passport_sections(kind: str) -> Callable:
    """The function that writes ``kind``'s own passport sections (``register(passport=)`` or ``register_stage``)."""
    if kind in trainers() and trainers()[kind].passport is not None:
        return trainers()[kind].passport
    if kind in stages():
        return STAGES[kind].passport
    known = tuple(k for k, e in TRAINERS.items() if e.passport) + tuple(STAGES)
    raise ValueError(f"kind must be one of {known} (a kind with a passport); got {kind!r}")


def trainers() -> dict[str, Registered]:
    """The registered trainers, the course's own first in ``BUILTIN``'s order (importing their modules registers
    them), then any other in the order registered."""
    if not _loading:
        _loading.append(True)
        for module in BUILTIN:
            importlib.import_module(module)

    def rank(item: tuple[str, Registered]) -> int:
        module = item[1].stage.__module__
        return BUILTIN.index(module) if module in BUILTIN else len(BUILTIN)

    return dict(sorted(TRAINERS.items(), key=rank))


def sections() -> dict[str, type]:
    """The trainer sections of ``configs.RunConfig``: ``{name: config class}``, in ``trainers()``' order."""
    return {kind: e.config for kind, e in trainers().items()}


def trl_rows() -> dict[str, TRLRow]:
    """Every TRL kind the bridge translates: ``{TRL kind: TRLRow}``, in ``trainers()``' order."""
    return {name: row for e in trainers().values() if isinstance(e.trl, dict) for name, row in e.trl.items()}


def entry(kind: str) -> Registered:
    """The registered trainer ``kind``; a ValueError names the registered ones."""
    if kind not in trainers():
        raise ValueError(f"kind must be one of {tuple(trainers())}; got {kind!r}")
    return TRAINERS[kind]
