"""A training run end to end: the API behind the command line's ``train``, benchmarks, notebooks.

``run(kind, cfg, out)`` builds the task and a fresh tiny GPT, runs the SFT stage (or takes an
SFT checkpoint), then the chosen trainer's registered stage, optionally a control (the "same wall-clock
on more SFT", or a stage registered as a control: RFT), and writes into ``out``. ``stage_from_sft`` is
the one place a registered stage runs from the SFT policy: the trainer's, the control's, and
``seeds.train_seeds``' from each seed's cached start. The pipeline asks the registry what a trainer is;
the one it treats apart is the start provider (``register(start_provider=True)``: SFT), whose run is the
SFT stage itself, measured from the random initialisation. Into ``out``:

- ``summary.json``   start/SFT/final held-out accuracy, seconds, device, threads, passport (and
                     the control's accuracy with ``control=True``)
- ``metrics.jsonl``  one line per step of the chosen trainer (``sft_metrics.jsonl``: the SFT
                     stage of a run of another trainer)
- ``dashboard.png``  the metrics as a figure; ``passport.json`` the run's passport (§17)
- ``sft.pt``         the SFT policy (written when the SFT stage ends: ``--sft-checkpoint`` takes it)
- ``checkpoint.pt``  the latest state of the running stage (atomic): ``resume=True`` continues it

Seeds: the model is initialised after ``torch.manual_seed(seed)``; the SFT stage draws its
batches from ``torch.Generator().manual_seed(seed)`` (``sft_policy``); the stage after it
re-seeds torch and its data generator with ``seed + 1`` (``rl_generator``), so a run resumed at
any checkpoint, or started from ``sft.pt``, follows the uninterrupted run exactly on a CPU.

Simplification: one process, one device, stages run one after the other (a GRPO run with
``max_staleness`` >= 1 adds a rollout worker process for its stage).
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import torch

from course_lib._validate import number
from course_lib.run.dashboard import save_dashboard
from course_lib.run.passport import format_passport, passport
from course_lib.tinygpt.device import resolve_device
from course_lib.tinygpt.environments import make_task
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.model import build_model, n_params
from course_lib.tinygpt.rewards import resolve_reward
from course_lib.tinygpt.runtime import (
    DEFAULT_THREADS,
    Interrupted,
    MetricsLog,
    StepFailed,
    load_checkpoint,
    resume_command,
    rng_state,
    save_checkpoint,
    set_rng_state,
    set_threads,
)
from course_lib.trainers import configs
from course_lib.trainers.sft import train_sft
from course_lib.trainers.trainer import StageContext, StageResult, TrainContext, entry, stage_entry, stages, trainers
from course_lib.trainers.utilisation import mfu_entry

KINDS = tuple(trainers())  # the course's own trainers; a trainer registered later is in trainers()
RUN_FILES = ("checkpoint.pt", "checkpoint.pt.tmp", "sft.pt", "sft.pt.tmp", "metrics.jsonl", "sft_metrics.jsonl",
             "summary.json", "passport.json", "dashboard.png", "reward_model.json", "judge.json")
ACCURACY_KEYS = ("accuracy", "loose_accuracy", "accuracy_carry", "accuracy_no_carry")


def controls() -> tuple[str, ...]:
    """The controls a run can add: the same wall-clock on more SFT, and every stage registered as a control
    (``register_stage(control=True)``: RFT on GRPO's prompts, ``course_lib.trainers.rft``)."""
    return ("sft", *(k for k, s in stages().items() if s.control))


def build_policy(cfg: configs.RunConfig, *, seed: int = 0, device: str | torch.device = "auto"):
    """The task and a freshly initialised tiny GPT, seeded as every run seeds it."""
    dev = device if isinstance(device, torch.device) else resolve_device(device)
    task = make_task(cfg.task)  # with task.env, the task owns its environment (and the tokenizer its tool syntax)
    torch.manual_seed(seed)
    return task, build_model(cfg.model, task.tokenizer).to(dev)


def sft_policy(cfg: configs.RunConfig, ctx: TrainContext | None = None, *, seed: int = 0,
               device: str | torch.device = "auto"):
    """``(task, model, result)``: a fresh model after the run's SFT stage (``train_sft``'s result).

    The same model as ``train sft --seed SEED`` and as the SFT stage of every other trainer's run
    with that seed and config. ``ctx`` goes to ``train_sft`` (``steps``, ``log``, …).
    """
    task, model = build_policy(cfg, seed=seed, device=device)
    result = train_sft(model, task, cfg.sft, ctx, generator=torch.Generator().manual_seed(seed))
    return task, model, result


def rl_generator(seed: int) -> torch.Generator:
    """Seed torch (sampling) and return the data generator of the stage after SFT."""
    torch.manual_seed(seed + 1)
    return torch.Generator().manual_seed(seed + 1)


def load_sft_checkpoint(path, cfg: configs.RunConfig) -> dict:
    """A finished SFT stage (``sft.pt``, or a ``train sft`` run's checkpoint) for this task and model."""
    state = load_checkpoint(path)
    if state.get("stage") != "sft":
        raise ValueError(f"{path} holds a {state.get('stage')!r} stage checkpoint, not an SFT policy")
    saved = configs.from_dict(json.loads(state["config"]))
    if state["step"] < saved.sft.steps:
        raise ValueError(f"{path} is an unfinished SFT stage (step {state['step']} of {saved.sft.steps}); resume it "
                         f"first")
    for section in ("task", "model"):
        mine, theirs = configs.to_dict(cfg)[section], configs.to_dict(saved)[section]
        if mine != theirs:
            diff = ", ".join(f"{k}={theirs[k]!r} (this run: {mine[k]!r})" for k in mine if mine[k] != theirs[k])
            raise ValueError(f"--sft-checkpoint {path} was trained with another {section}: {diff}")
    return state


def prepare_out(out: Path, overwrite: bool, kind: str) -> None:
    """Refuse to mix a fresh run with an old one in ``out`` unless ``overwrite`` (then remove the old files)."""
    existing = [name for name in RUN_FILES if (out / name).exists()]
    if existing and not overwrite:
        raise ValueError(f"{out} already holds a run ({', '.join(existing)}); pass --overwrite to replace it, "
                         f"or continue it: {resume_command(kind, out)}")
    for name in existing:
        (out / name).unlink()
    out.mkdir(parents=True, exist_ok=True)


def run(
    kind: str,
    cfg: configs.RunConfig | None = None,
    out: str | Path = "runs/tinygpt",
    *,
    device: str = "auto",
    seed: int = 0,
    steps: int | None = None,
    control: bool | str | None = None,
    resume: bool = False,
    sft_checkpoint: str | None = None,
    overwrite: bool = False,
    threads: int | None = DEFAULT_THREADS,
    show_progress: bool = True,
    verbose: bool = True,
) -> dict:
    """Train ``kind`` end to end and write the run folder; returns the summary dict.

    ``steps`` is the chosen trainer's total step count (a resumed run continues up to it).
    ``control``: ``"sft"`` (or ``True``) also spends the same wall-clock on more SFT; ``"rft"``
    (GRPO only) also runs rejection-sampling fine-tuning from the same SFT policy with the same
    prompts, sampling, steps and optimiser (``course_lib.trainers.rft``): GRPO without baseline and negatives.
    ``resume=True`` continues ``out`` with its saved options (``cfg`` must be None).
    Raises ``runtime.Interrupted`` after saving a checkpoint when a stop was requested (Ctrl-C).
    """
    registered = entry(kind)  # a ValueError names the registered trainers
    control = "sft" if control is True else (control or None)
    if control is not None and control not in controls():
        raise ValueError(f"control must be one of {controls()} (or True for 'sft'); got {control!r}")
    if control not in (None, "sft") and control not in registered.controls:
        owners = "/".join(k.upper() for k, e in trainers().items() if control in e.controls)
        raise ValueError(f"control={control!r} is {owners}'s control (same prompts, samples and steps); "
                         f"kind is {kind!r}")
    if cfg is not None and cfg.task.env and (registered.env is not True or control):
        episodes = " and ".join(k for k, e in trainers().items() if e.env is True)
        raise ValueError(f"task.env (--env) runs with {episodes} and no control; got kind {kind!r}"
                         + (f" with control {control!r}" if control else "")
                         + (f": {registered.env}" if isinstance(registered.env, str) else ""))
    if control and not registered.trains_policy:
        raise ValueError(f"control (--control) compares RL with more SFT; an {kind} run trains no policy")
    out = Path(out)
    wall_start = time.perf_counter()
    say = print if verbose else (lambda *a, **k: None)
    set_threads(threads)
    ckpt_path = out / "checkpoint.pt"
    state = None
    if resume:
        if cfg is not None or sft_checkpoint is not None:
            raise ValueError("resume continues a run with its saved options; pass no config and no sft_checkpoint")
        state = load_checkpoint(ckpt_path, kind=kind)
        cfg = configs.from_dict(json.loads(state["config"]))
        seed, control = state["seed"], control or state["control"]
        control = "sft" if control is True else (control or None)
        sft_checkpoint = state["sft_checkpoint"]
        wall_start -= state.get("wall_seconds", 0.0)  # summary.json's wall_seconds counts every process of the run
    elif sft_checkpoint is not None and registered.start_provider:
        raise ValueError(f"sft_checkpoint (--sft-checkpoint) applies to the stages after SFT, not to {kind}")
    cfg = configs.validate(copy.deepcopy(cfg or configs.get_config()))  # bad options first, then the folder
    section = getattr(cfg, kind)
    if steps is not None:
        number(steps, "steps", integer=True, low=0, why=f" (the total for {kind})")
        if state is not None and state["stage"] == kind and steps < state["step"]:
            raise ValueError(f"steps is the total: the run in {out} is already at {kind} step {state['step']}")
        section.steps = steps
    if not resume:
        prepare_out(out, overwrite, kind)
    task, model = build_policy(cfg, seed=seed, device=device)
    spec = getattr(section, "reward", "")
    if spec.startswith("rm:"):
        resolve_reward(spec, task)  # a bad reward-model directory fails now, not after the SFT stage
    dev = next(model.parameters()).device
    say(f"[course_lib] {kind} on {dev.type} ({torch.get_num_threads()} CPU thread(s)), config {cfg.name!r}, "
        f"{n_params(model):,} parameters, seed {seed}")
    if state is not None:
        stage_total = getattr(cfg, state["stage"]).steps
        say(f"[course_lib] resuming {out}: {state['stage']} stage at step {state['step']} of {stage_total} "
            f"(--steps is the total)")
    common = {"kind": kind, "config": json.dumps(configs.to_dict(cfg)), "seed": seed, "control": control,
              "sft_checkpoint": sft_checkpoint}
    try:
        return _stages(kind, cfg, out, task, model, state, common, control, show_progress, say, wall_start)
    except Interrupted as stop:
        say(f"[course_lib] stopped: {stop.stage} step {stop.step} is saved; continue with: "
            f"{resume_command(kind, out)}")
        raise
    except StepFailed:
        say(f"[course_lib] failed: the completed steps are saved; continue with: {resume_command(kind, out)}")
        raise


def provide_sft(kind, cfg, out, task, model, state, common, show_progress, say, wall_start) -> dict:
    """The SFT policy of a run, into ``model``: trained, resumed from the run's checkpoint, or loaded.

    Returns ``{"eval", "seconds", "steps", "start_eval", "log"}`` (``log``: the SFT stage's
    metrics when it trained here). Writes ``sft.pt`` when the stage ends.
    """
    ckpt_path, sft_path = out / "checkpoint.pt", out / "sft.pt"
    start_eval = state.get("start_eval") if state is not None else None
    sft_run = entry(kind).start_provider  # the run is the SFT stage itself: measured from the random initialisation
    if sft_run and start_eval is None:
        start_eval = evaluate(model, task)  # the random initialisation
    if state is not None and state["stage"] != "sft":  # resuming a later stage: the finished SFT policy
        saved = load_checkpoint(sft_path, kind="sft")
        model.load_state_dict(saved["model"])
        return {"eval": saved["sft_eval"], "seconds": saved["seconds"], "steps": saved["step"],
                "start_eval": start_eval, "log": None}
    if state is None and common["sft_checkpoint"]:  # a finished SFT policy from elsewhere
        saved = load_sft_checkpoint(common["sft_checkpoint"], cfg)
        cfg.sft = configs.from_dict(json.loads(saved["config"])).sft
        common["config"] = json.dumps(configs.to_dict(cfg))
        model.load_state_dict(saved["model"])
        sft_eval = evaluate(model, task)
        say(f"[course_lib] SFT policy from {common['sft_checkpoint']}")
        save_checkpoint(sft_path, {**common, "kind": "sft", "stage": "sft", "model": model.state_dict(),
                                   "sft_eval": sft_eval, "step": cfg.sft.steps, "seconds": saved["seconds"]})
        return {"eval": sft_eval, "seconds": saved["seconds"], "steps": cfg.sft.steps, "start_eval": start_eval,
                "log": None}
    gen = torch.Generator().manual_seed(common["seed"])
    log = MetricsLog(out / ("metrics.jsonl" if sft_run else "sft_metrics.jsonl"),
                     rows=state["metrics"] if state else None)
    if state is not None:  # a checkpoint of the SFT stage
        model.load_state_dict(state["model"])
        set_rng_state(state["rng"], gen)
    else:
        say(f"[course_lib] SFT stage: {cfg.sft.steps} steps")

    def checkpoint(step, trainer_state, seconds):
        save_checkpoint(ckpt_path, {**common, "stage": "sft", "model": model.state_dict(), **trainer_state,
                                    "step": step, "seconds": seconds, "rng": rng_state(gen), "metrics": log.rows,
                                    "start_eval": start_eval, "wall_seconds": time.perf_counter() - wall_start})

    train = TrainContext(state=state, log=log, checkpoint=checkpoint, checkpoint_every=cfg.checkpoint_every,
                         max_grad_norm=cfg.max_grad_norm, show_progress=show_progress, threads=None)
    res = train_sft(model, task, cfg.sft, train, generator=gen)
    sft_eval = {k: res[k] for k in (*ACCURACY_KEYS, "tool_use_carry", "tool_use_no_carry") if k in res}
    save_checkpoint(sft_path, {**common, "kind": "sft", "stage": "sft", "model": model.state_dict(),
                               "sft_eval": sft_eval, "step": res["steps"], "seconds": res["seconds"],
                               "metrics": log.rows})
    return {"eval": sft_eval, "seconds": res["seconds"], "steps": res["steps"], "start_eval": start_eval, "log": log}


def _stages(kind, cfg, out, task, model, state, common, control, show_progress, say, wall_start) -> dict:
    """The SFT provider, the registered trainer, the control, the outputs."""
    seed, registered = common["seed"], entry(kind)
    sft = provide_sft(kind, cfg, out, task, model, state, common, show_progress, say, wall_start)
    sft_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    gen, stage_state, log = None, None, sft["log"]
    if not registered.start_provider:  # a stage after the SFT stage: seeded, resumed and logged on its own
        say(f"[course_lib] SFT policy held-out accuracy {sft['eval']['accuracy']:.3f}")
        gen = rl_generator(seed)
        stage_state = state if state is not None and state["stage"] == kind else None
        if stage_state is not None:
            model.load_state_dict(stage_state["model"])
            set_rng_state(stage_state["rng"], gen)
        log = MetricsLog(out / "metrics.jsonl", rows=stage_state["metrics"] if stage_state else None)

    def checkpoint(step, trainer_state, seconds):
        save_checkpoint(out / "checkpoint.pt", {**common, "stage": kind, "model": model.state_dict(), **trainer_state,
                                                "step": step, "seconds": seconds, "rng": rng_state(gen),
                                                "metrics": log.rows, "wall_seconds": time.perf_counter() - wall_start})

    train = TrainContext(log=log, state=stage_state, checkpoint=checkpoint, checkpoint_every=cfg.checkpoint_every,
                         max_grad_norm=cfg.max_grad_norm, show_progress=show_progress, threads=None)
    result, final = stage_from_sft(kind, cfg, task, model, train, seed=seed, sft=sft, sft_weights=sft_weights,
                                   generator=gen, out=out, say=say)
    control_accuracy = None
    if control and not registered.start_provider:
        control_accuracy = run_control(control, cfg, out, task, next(model.parameters()).device, sft_weights,
                                       seed=seed, steps=result.steps, rl_seconds=result.rl_seconds,
                                       show_progress=show_progress, say=say, sft=sft)
    return write_outputs(kind, cfg, out, model, common, registered, result, sft, final, control, control_accuracy,
                         log.rows, say, wall_start)


def stage_from_sft(kind: str, cfg: configs.RunConfig, task, model, train: TrainContext, *, seed: int, sft: dict,
                   sft_weights: dict, generator, out=None, say=print) -> tuple[StageResult, dict]:
    """``kind``'s registered stage (a trainer's, or a stage's: RFT) from the SFT policy in ``model``, as a run trains
    it: ``(its StageResult, the trained policy's held-out evaluation)``.

    ``sft``: the SFT stage's ``{"eval", "seconds", "steps"}``; ``sft_weights``: the reference; ``generator``: the
    stage's data generator (``rl_generator``); ``train``: its log, checkpoint and steps. ``pipeline.run`` (its
    trainer and its control) and ``seeds.train_seeds`` (from each seed's cached start) run a stage through it.
    """
    registered = stage_entry(kind)
    ctx = StageContext(cfg=cfg, task=task, model=model, seed=seed, out=out, train=train, sft_weights=sft_weights,
                       generator=generator, sft=sft, say=say)
    result = registered.stage(ctx)
    owner = registered.section if kind in stages() else kind  # a stage is evaluated as its section's trainer
    if result.final is not None:
        return result, result.final
    if not entry(owner).trains_policy:
        return result, sft["eval"]
    return result, evaluate(model, task, max_completion_length=eval_length(owner, cfg))


def eval_length(kind: str, cfg: configs.RunConfig) -> int | None:
    """The completion length ``kind``'s policy is evaluated with (``register(completion_length=)``; None: the
    task's default)."""
    length = entry(kind).completion_length
    return length(cfg) if length is not None else None


def run_control(control, cfg, out, task, device, sft_weights, *, seed, steps, rl_seconds, show_progress, say, sft):
    """The control's held-out accuracy: a stage registered as a control (``register_stage(control=True)``: RFT)
    on its section's prompts for the same steps, or more SFT for the same seconds.

    Both start from the SFT weights; a stop request (Ctrl-C) stops them at a step boundary, and a
    resumed run runs the control again from its start (it is deterministic on a CPU).
    """
    previous = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    if previous.get("steps") == steps and previous.get("control_accuracy") is not None:
        return previous["control_accuracy"]  # a resumed, already finished run
    ctrl = build_model(cfg.model, task.tokenizer).to(device)
    ctrl.load_state_dict(sft_weights)
    if control != "sft":
        section = stages()[control].section
        say(f"[course_lib] control: {control.upper()} on {section.upper()}'s prompts for "
            f"{getattr(cfg, section).steps} steps")
        train = TrainContext(max_grad_norm=cfg.max_grad_norm, steps=steps, show_progress=show_progress, threads=None)
        _, final = stage_from_sft(control, cfg, task, ctrl, train, seed=seed, sft=sft, sft_weights=sft_weights,
                                  generator=rl_generator(seed), out=out, say=say)
        return final["accuracy"]
    say(f"[course_lib] control: continuing SFT for {rl_seconds:.1f} s")
    res = train_sft(ctrl, task, cfg.sft,
                    TrainContext(max_grad_norm=cfg.max_grad_norm, show_progress=show_progress, threads=None),
                    generator=torch.Generator().manual_seed(seed + 2), time_budget=rl_seconds)
    return res["accuracy"]


def write_outputs(kind, cfg, out, model, common, registered, result, sft, final, control, control_accuracy, rows, say,
                  wall_start) -> dict:
    """summary.json, passport.json and dashboard.png; the closing lines. Returns the summary."""
    rl_seconds = result.rl_seconds
    gen_s = sum(r.get("gen_seconds", 0.0) for r in rows)
    upd_s = sum(r.get("update_seconds", 0.0) for r in rows)
    split = None
    if registered.time_split:
        split = {"generation_seconds": gen_s, "update_seconds": upd_s,
                 "generation_fraction": gen_s / (gen_s + upd_s) if gen_s + upd_s > 0 else 0.0}
    dev = next(model.parameters()).device
    seconds = rl_seconds if result.flop_seconds is None else result.flop_seconds  # the counted FLOPs' seconds
    mfu = mfu_entry(kind, cfg, rows, seconds, dev, vocab=model.config.vocab_size)
    pp = passport(cfg, kind, time_split=split, threads=torch.get_num_threads(), device=dev.type, reference=True,
                  reward_model_info=result.reward_model_info, memory=result.summary.get("memory"), utilisation=mfu,
                  loop=result.summary.get("loop"))
    start_accuracy = sft["start_eval" if registered.start_provider else "eval"]["accuracy"]
    summary = {
        "kind": kind,
        "config": cfg.name,
        "seed": common["seed"],
        "device": dev.type,
        "cpu_threads": torch.get_num_threads(),
        "n_params": n_params(model),
        "steps": result.steps,
        "start_accuracy": start_accuracy,
        "sft_accuracy": sft["eval"]["accuracy"],
        "final_accuracy": final["accuracy"],
        "final_loose_accuracy": final["loose_accuracy"],
        "control": control,
        "control_accuracy": control_accuracy,
        "sft_checkpoint": common["sft_checkpoint"],
        "sft_seconds": sft["seconds"],
        "rl_seconds": rl_seconds,
        "wall_seconds": time.perf_counter() - wall_start,
        "passport": pp,
        "options": configs.to_dict(cfg),
    }
    if cfg.task.env:  # with an environment: accuracy and tool use by carry, at the start and the end
        for k in ("accuracy_carry", "accuracy_no_carry", "tool_use_carry", "tool_use_no_carry"):
            summary[f"sft_{k}"], summary[f"final_{k}"] = sft["eval"].get(k), final.get(k)
    if split:
        summary["time_split"] = split
    summary.update(result.summary)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "passport.json").write_text(json.dumps(pp, indent=2))
    save_dashboard(rows, out / "dashboard.png", title=f"{kind} ({cfg.name})", baseline_accuracy=start_accuracy)
    say(format_passport(pp))
    line = result.line or f"[course_lib] held-out accuracy {start_accuracy:.3f} -> {final['accuracy']:.3f}"
    line += f" in {sft['seconds']:.1f} s of SFT" if registered.start_provider else f" in {rl_seconds:.1f} s"
    if control_accuracy is not None:
        line += f"; {'same-time SFT' if control == 'sft' else control.upper()} control {control_accuracy:.3f}"
    say(line)
    say(f"[course_lib] wrote {out / 'summary.json'}, metrics.jsonl, dashboard.png")
    return summary
