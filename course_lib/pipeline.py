"""A training run end to end: the API behind ``python -m course_lib train``, the benchmarks and
the notebooks.

``run(kind, cfg, out)`` builds the task and a fresh tiny GPT, runs the SFT stage (or takes an
SFT checkpoint), then the chosen trainer, optionally the "same wall-clock on more SFT" control,
and writes into ``out``:

- ``summary.json``   start/SFT/final held-out accuracy, seconds, device, threads, passport (and
                     the control's accuracy with ``control=True``)
- ``metrics.jsonl``  one line per step of the chosen trainer (``sft_metrics.jsonl``: the SFT
                     stage of a DPO or GRPO run)
- ``dashboard.png``  the metrics as a figure; ``passport.json`` the run's passport (§17)
- ``sft.pt``         the SFT policy (written when the SFT stage ends: ``--sft-checkpoint`` takes it)
- ``checkpoint.pt``  the latest state of the running stage (atomic): ``resume=True`` continues it

Seeds: the model is initialised after ``torch.manual_seed(seed)``; the SFT stage draws its
batches from ``torch.Generator().manual_seed(seed)`` (``sft_policy``); the DPO/GRPO stage
re-seeds torch and its data generator with ``seed + 1`` (``rl_generator``), so a run resumed at
any checkpoint, or started from ``sft.pt``, follows the uninterrupted run exactly on a CPU.

Simplification: one process, one device, stages run one after the other.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import torch

from course_lib import configs
from course_lib.dashboard import save_dashboard
from course_lib.device import resolve_device
from course_lib.dpo import build_preference_pairs, reference_logprobs, train_dpo
from course_lib.evaluation import evaluate
from course_lib.grpo import train_grpo
from course_lib.model import build_model, n_params
from course_lib.passport import format_passport, passport
from course_lib.ppo import build_critic, train_ppo
from course_lib.reward_model import fit_reward_model, save_reward_model
from course_lib.rewards import resolve_reward
from course_lib.rft import train_rft
from course_lib.runtime import (
    DEFAULT_THREADS,
    Interrupted,
    MetricsLog,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
    set_threads,
)
from course_lib.sft import train_sft
from course_lib.task import AdditionTask
from course_lib.utilisation import mfu_entry

KINDS = ("sft", "dpo", "grpo", "rm", "ppo")
CONTROLS = ("sft", "rft")  # the same wall-clock on more SFT | RFT on GRPO's prompts (course_lib.rft)
RUN_FILES = ("checkpoint.pt", "checkpoint.pt.tmp", "sft.pt", "sft.pt.tmp", "metrics.jsonl", "sft_metrics.jsonl",
             "summary.json", "passport.json", "dashboard.png", "reward_model.json")
ACCURACY_KEYS = ("accuracy", "loose_accuracy", "accuracy_carry", "accuracy_no_carry")


def build_policy(cfg: configs.RunConfig, *, seed: int = 0, device: str | torch.device = "auto"):
    """The task and a freshly initialised tiny GPT, seeded as every run seeds it."""
    dev = device if isinstance(device, torch.device) else resolve_device(device)
    task = AdditionTask(cfg.task)
    torch.manual_seed(seed)
    return task, build_model(cfg.model, task.tokenizer).to(dev)


def sft_policy(cfg: configs.RunConfig, *, seed: int = 0, device: str | torch.device = "auto", **train_kwargs):
    """``(task, model, result)``: a fresh model after the run's SFT stage (``train_sft``'s result).

    The same model as ``train sft --seed SEED`` and as the SFT stage of every DPO/GRPO run
    with that seed and config. ``train_kwargs`` go to ``train_sft`` (``steps``, ``log``, …).
    """
    task, model = build_policy(cfg, seed=seed, device=device)
    result = train_sft(model, task, cfg.sft, generator=torch.Generator().manual_seed(seed), **train_kwargs)
    return task, model, result


def rl_generator(seed: int) -> torch.Generator:
    """Seed torch (sampling) and return the data generator of the DPO/GRPO stage."""
    torch.manual_seed(seed + 1)
    return torch.Generator().manual_seed(seed + 1)


def load_sft_checkpoint(path, cfg: configs.RunConfig) -> dict:
    """A finished SFT stage (``sft.pt``, or a ``train sft`` run's checkpoint) for this task and model."""
    state = load_checkpoint(path)
    if state.get("stage") != "sft":
        raise ValueError(f"{path} holds a {state.get('stage')!r} stage checkpoint, not an SFT policy")
    saved = configs.from_dict(json.loads(state["config"]))
    if state["step"] < saved.sft.steps:
        raise ValueError(f"{path} is an unfinished SFT stage (step {state['step']} of {saved.sft.steps}); resume it first")
    for section in ("task", "model"):
        mine, theirs = configs.to_dict(cfg)[section], configs.to_dict(saved)[section]
        if mine != theirs:
            diff = ", ".join(f"{k}={theirs[k]!r} (this run: {mine[k]!r})" for k in mine if mine[k] != theirs[k])
            raise ValueError(f"--sft-checkpoint {path} was trained with another {section}: {diff}")
    return state


def prepare_out(out: Path, overwrite: bool) -> None:
    """Refuse to mix a fresh run with an old one in ``out`` unless ``overwrite`` (then remove the old files)."""
    existing = [name for name in RUN_FILES if (out / name).exists()]
    if existing and not overwrite:
        raise ValueError(f"{out} already holds a run ({', '.join(existing)}); pass --overwrite to replace it, "
                         f"or --resume {out} to continue it")
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
    prompts, sampling, steps and optimiser (``course_lib.rft``): GRPO without baseline and negatives.
    ``resume=True`` continues ``out`` with its saved options (``cfg`` must be None).
    Raises ``runtime.Interrupted`` after saving a checkpoint when a stop was requested (Ctrl-C).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    control = "sft" if control is True else (control or None)
    if control is not None and control not in CONTROLS:
        raise ValueError(f"control must be one of {CONTROLS} (or True for 'sft'); got {control!r}")
    if control == "rft" and kind != "grpo":
        raise ValueError(f"control='rft' is GRPO's control (same prompts, samples and steps); kind is {kind!r}")
    if resume and kind in ("rm", "ppo"):
        raise ValueError(f"resume is not available for {kind} runs (they write no mid-run checkpoint); start it again")
    if control and kind == "rm":
        raise ValueError("control (--control) compares RL with more SFT; an rm run trains no policy")
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
    else:
        if sft_checkpoint is not None and kind == "sft":
            raise ValueError("sft_checkpoint (--sft-checkpoint) applies to dpo and grpo runs, not to sft")
        prepare_out(out, overwrite)
    cfg = configs.validate(copy.deepcopy(cfg or configs.get_config()))
    section = getattr(cfg, kind)
    if steps is not None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"steps must be an integer >= 0 (the total for {kind}); got {steps!r}")
        if state is not None and state["stage"] == kind and steps < state["step"]:
            raise ValueError(f"steps is the total: the run in {out} is already at {kind} step {state['step']}")
        section.steps = steps
    task, model = build_policy(cfg, seed=seed, device=device)
    spec = {"grpo": cfg.grpo.reward, "ppo": cfg.ppo.reward}.get(kind, "")
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
        say(f"[course_lib] stopped: {stop.stage} step {stop.step} is saved; continue with --resume {out}")
        raise


def _stages(kind, cfg, out, task, model, state, common, control, show_progress, say, wall_start) -> dict:
    ckpt_path, sft_path = out / "checkpoint.pt", out / "sft.pt"
    seed = common["seed"]

    # --- the SFT stage (or the start of an SFT run) -----------------------------------------
    start_eval = state.get("start_eval") if state is not None else None
    if kind == "sft" and start_eval is None:
        start_eval = evaluate(model, task)  # the random initialisation
    if state is not None and state["stage"] != "sft":
        saved = load_checkpoint(sft_path, kind="sft")
        model.load_state_dict(saved["model"])
        sft_eval, sft_seconds = saved["sft_eval"], saved["seconds"]
    elif state is None and common["sft_checkpoint"]:
        saved = load_sft_checkpoint(common["sft_checkpoint"], cfg)
        cfg.sft = configs.from_dict(json.loads(saved["config"])).sft
        common["config"] = json.dumps(configs.to_dict(cfg))
        model.load_state_dict(saved["model"])
        sft_eval, sft_seconds = evaluate(model, task), saved["seconds"]
        say(f"[course_lib] SFT policy from {common['sft_checkpoint']}")
        save_checkpoint(sft_path, {**common, "kind": "sft", "stage": "sft", "model": model.state_dict(),
                                   "sft_eval": sft_eval, "step": cfg.sft.steps, "seconds": sft_seconds})
    else:
        sft_state = state  # None, or a checkpoint of the SFT stage
        gen = torch.Generator().manual_seed(seed)
        log = MetricsLog(out / ("metrics.jsonl" if kind == "sft" else "sft_metrics.jsonl"),
                         rows=sft_state["metrics"] if sft_state else None)
        if sft_state is not None:
            model.load_state_dict(sft_state["model"])
            set_rng_state(sft_state["rng"], gen)
        else:
            say(f"[course_lib] SFT stage: {cfg.sft.steps} steps")

        def sft_checkpoint(step, opt, seconds):
            save_checkpoint(ckpt_path, {**common, "stage": "sft", "model": model.state_dict(), "optimizer": opt.state_dict(),
                                        "step": step, "seconds": seconds, "rng": rng_state(gen), "metrics": log.rows,
                                        "start_eval": start_eval})

        res = train_sft(model, task, cfg.sft, generator=gen, state=sft_state, log=log, checkpoint=sft_checkpoint,
                        checkpoint_every=cfg.checkpoint_every, max_grad_norm=cfg.max_grad_norm, show_progress=show_progress,
                        threads=None)
        sft_eval, sft_seconds = {k: res[k] for k in ACCURACY_KEYS}, res["seconds"]
        save_checkpoint(sft_path, {**common, "kind": "sft", "stage": "sft", "model": model.state_dict(),
                                   "sft_eval": sft_eval, "step": res["steps"], "seconds": sft_seconds, "metrics": log.rows})
    sft_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if kind != "sft":
        say(f"[course_lib] SFT policy held-out accuracy {sft_eval['accuracy']:.3f}")

    # --- the chosen trainer ------------------------------------------------------------------
    rl_seconds, data, extra_summary, rm_info = 0.0, None, {}, None
    if kind == "sft":
        final, steps_done, rows = sft_eval, res["steps"], log.rows
    else:
        gen = rl_generator(seed)
        rl_state = state if state is not None and state["stage"] == kind else None
        if rl_state is not None:
            model.load_state_dict(rl_state["model"])
            set_rng_state(rl_state["rng"], gen)
        log = MetricsLog(out / "metrics.jsonl", rows=rl_state["metrics"] if rl_state else None)
        extra = {}

        def rl_checkpoint(step, opt, seconds):
            save_checkpoint(ckpt_path, {**common, "stage": kind, "model": model.state_dict(), "optimizer": opt.state_dict(),
                                        "step": step, "seconds": seconds, "rng": rng_state(gen), "metrics": log.rows, **extra})

        run_kwargs = dict(log=log, state=rl_state, max_grad_norm=cfg.max_grad_norm, checkpoint=rl_checkpoint,
                          checkpoint_every=cfg.checkpoint_every, show_progress=show_progress, threads=None)
        if kind == "rm":  # the SFT policy writes the pairs and lends the reward model its transformer
            fit = fit_reward_model(model, task, cfg.rm, seed=seed)
            for row in fit["log"]:
                log.append(row)
            save_reward_model(fit["model"], task.tokenizer, out, task_config=cfg.task, cfg=cfg.rm, metrics=fit["metrics"])
            rm_info = json.loads((out / "reward_model.json").read_text())
            m = fit["metrics"]
            say(f"[course_lib] reward model: {m['train_pairs']} pairs, held-out pairwise accuracy {m['heldout_accuracy']:.3f} "
                f"= {m['of_ceiling']:.1%} of the noise ceiling {m['noise_ceiling']:.3f} (gold {m['heldout_gold_accuracy']:.3f})")
            res = {"steps": cfg.rm.steps, "rl_seconds": m["data_seconds"] + m["train_seconds"]}
            extra_summary = {"reward_model": m}
        elif kind == "ppo":
            reward_fn = resolve_reward(cfg.ppo.reward, task)  # a bad rm:DIR fails here, with its reason
            if cfg.ppo.reward.startswith("rm:"):  # the reward model's own passport entry travels with the run
                rm_info = json.loads((Path(cfg.ppo.reward[3:]) / "reward_model.json").read_text())
            critic = build_critic(model, task.tokenizer)
            res = train_ppo(model, critic, task, cfg.ppo, reward_fn, generator=gen, log=log,
                            max_grad_norm=cfg.max_grad_norm, show_progress=show_progress, threads=None)
            extra_summary = {"memory": res["memory"]}
        elif kind == "dpo":
            if rl_state is not None:
                data = {k[5:]: v for k, v in rl_state.items() if k.startswith("data_")}
            else:
                say("[course_lib] sampling preference pairs from the SFT policy, caching reference log-probs")
                t0 = time.perf_counter()
                data = build_preference_pairs(model, task, cfg.dpo, generator=gen, show_progress=show_progress)
                data.update(reference_logprobs(model, data, prompt_length=task.prompt_length))
                data["pair_seconds"] = time.perf_counter() - t0  # counted in rl_seconds: DPO's data cost
                say(f"[course_lib] {data['n_pairs']} pairs from {data['n_prompts']} prompts")
            extra.update({f"data_{k}": v for k, v in data.items()})
            res = train_dpo(model, task, cfg.dpo, data, generator=gen, **run_kwargs)
            rl_seconds = res["rl_seconds"] + data["pair_seconds"]
        else:
            res = train_grpo(model, task, cfg.grpo, generator=gen, reference_state=sft_weights, **run_kwargs)
        if kind != "dpo":
            rl_seconds = res["rl_seconds"]
        steps_done, rows = res["steps"], log.rows
        length = {"grpo": cfg.grpo.max_completion_length, "ppo": cfg.ppo.max_completion_length}.get(kind)
        final = sft_eval if kind == "rm" else evaluate(model, task, max_completion_length=length)

    # --- the control: the same wall-clock spent on more SFT, or RFT on the same prompts ----------
    control_accuracy = None
    if control and kind != "sft":
        previous = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
        if previous.get("steps") == steps_done and previous.get("control_accuracy") is not None:
            control_accuracy = previous["control_accuracy"]  # a resumed, already finished run
        elif control == "rft":
            ctrl = build_model(cfg.model, task.tokenizer).to(next(model.parameters()).device)
            ctrl.load_state_dict(sft_weights)
            say(f"[course_lib] control: RFT on GRPO's prompts for {cfg.grpo.steps} steps")
            train_rft(ctrl, task, cfg.grpo, generator=rl_generator(seed), max_grad_norm=cfg.max_grad_norm,
                      steps=steps_done, show_progress=show_progress, threads=None)
            control_accuracy = evaluate(ctrl, task, max_completion_length=cfg.grpo.max_completion_length)["accuracy"]
        else:
            ctrl = build_model(cfg.model, task.tokenizer).to(next(model.parameters()).device)
            ctrl.load_state_dict(sft_weights)
            say(f"[course_lib] control: continuing SFT for {rl_seconds:.1f} s")
            ctrl_res = train_sft(ctrl, task, cfg.sft, generator=torch.Generator().manual_seed(seed + 2),
                                 time_budget=rl_seconds, max_grad_norm=cfg.max_grad_norm, show_progress=show_progress,
                                 threads=None)
            control_accuracy = ctrl_res["accuracy"]

    gen_s = sum(r.get("gen_seconds", 0.0) for r in rows)
    upd_s = sum(r.get("update_seconds", 0.0) for r in rows)
    split = {"generation_seconds": gen_s, "update_seconds": upd_s,
             "generation_fraction": gen_s / (gen_s + upd_s) if gen_s + upd_s > 0 else 0.0} if kind == "grpo" else None
    dev = next(model.parameters()).device
    mfu = mfu_entry(kind, cfg, rows, sft_seconds if kind == "sft" else rl_seconds, dev, vocab=len(task.tokenizer))
    pp = passport(cfg, kind, time_split=split, threads=torch.get_num_threads(), device=dev.type, reference=True,
                  reward_model_info=rm_info, memory=extra_summary.get("memory"), utilisation=mfu)
    start_accuracy = start_eval["accuracy"] if kind == "sft" else sft_eval["accuracy"]
    summary = {
        "kind": kind,
        "config": cfg.name,
        "seed": seed,
        "device": dev.type,
        "cpu_threads": torch.get_num_threads(),
        "n_params": n_params(model),
        "steps": steps_done,
        "start_accuracy": start_accuracy,
        "sft_accuracy": sft_eval["accuracy"],
        "final_accuracy": final["accuracy"],
        "final_loose_accuracy": final["loose_accuracy"],
        "control": control,
        "control_accuracy": control_accuracy,
        "sft_checkpoint": common["sft_checkpoint"],
        "sft_seconds": sft_seconds,
        "rl_seconds": rl_seconds,
        "wall_seconds": time.perf_counter() - wall_start,
        "passport": pp,
        "options": configs.to_dict(cfg),
    }
    if split:
        summary["time_split"] = split
    summary.update(extra_summary)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "passport.json").write_text(json.dumps(pp, indent=2))
    save_dashboard(rows, out / "dashboard.png", title=f"{kind} ({cfg.name})", baseline_accuracy=start_accuracy)
    say(format_passport(pp))
    line = f"[course_lib] held-out accuracy {start_accuracy:.3f} -> {final['accuracy']:.3f}"
    if kind == "rm":  # the policy is unchanged: report the reward model
        m = extra_summary["reward_model"]
        line = (f"[course_lib] reward model held-out pairwise accuracy {m['heldout_accuracy']:.3f} = {m['of_ceiling']:.1%} "
                f"of the noise ceiling; use it with --reward rm:{out}")
    line += f" in {rl_seconds:.1f} s" if kind != "sft" else f" in {sft_seconds:.1f} s of SFT"
    if control_accuracy is not None:
        line += f"; {'RFT' if control == 'rft' else 'same-time SFT'} control {control_accuracy:.3f}"
    say(line)
    say(f"[course_lib] wrote {out / 'summary.json'}, metrics.jsonl, dashboard.png")
    return summary
