"""Command line: ``python -m course_lib train {sft,dpo,grpo} [options]``.

Runs end to end from nothing: builds the task and a fresh tiny GPT, trains its own SFT
baseline (or loads one with ``--sft-checkpoint``), runs the chosen trainer, and writes into
``--out``:

- ``summary.json``   baseline/final held-out accuracy, seconds, device, passport (and the
                      control's accuracy with ``--control``)
- ``metrics.jsonl``  one line per step
- ``dashboard.png``  the metrics as a figure
- ``passport.json``  the run's post-training passport (§17), also printed
- ``sft.pt``, ``checkpoint.pt``  atomic checkpoints; ``--resume DIR`` continues a run

Every field of the config can be overridden: ``--beta 0.04 --loss-type ipo`` (the section
is the trainer's own: ``--beta`` means GRPO's β for ``grpo`` and DPO's β for ``dpo``).
Examples::

    python -m course_lib train grpo --out runs/grpo --control
    python -m course_lib train dpo --out runs/dpo --rpo-alpha 1.0
    python -m course_lib train grpo --config test --steps 4 --out /tmp/t
    python -m course_lib train grpo --resume runs/grpo --steps 120
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

from course_lib import configs
from course_lib.dashboard import save_dashboard
from course_lib.device import resolve_device
from course_lib.grpo import format_passport, passport, train_grpo
from course_lib.model import build_model, n_params
from course_lib.task import AdditionTask
from course_lib.train import (
    MetricsLog,
    build_preference_pairs,
    evaluate,
    load_checkpoint,
    reference_logprobs,
    rng_state,
    save_checkpoint,
    set_rng_state,
    train_dpo,
    train_sft,
)

KINDS = ("sft", "dpo", "grpo")


def _seed_all(seed: int) -> None:
    torch.manual_seed(seed)


def run(
    kind: str,
    cfg: configs.RunConfig | None = None,
    out: str | Path = "runs/tinygpt",
    *,
    device: str = "auto",
    seed: int = 0,
    steps: int | None = None,
    control: bool = False,
    resume: bool = False,
    sft_checkpoint: str | None = None,
    show_progress: bool = True,
    verbose: bool = True,
) -> dict:
    """Train ``kind`` end to end and write the run folder; returns the summary dict."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    out = Path(out)
    wall_start = time.perf_counter()
    ckpt_path = out / "checkpoint.pt"
    state = None
    if resume:
        state = load_checkpoint(ckpt_path, kind=kind)
        cfg = configs.from_dict(json.loads(state["config"]))
        seed = state["seed"]
    cfg = configs.validate(copy.deepcopy(cfg or configs.get_config()))
    section = {"sft": cfg.sft, "dpo": cfg.dpo, "grpo": cfg.grpo}[kind]
    if steps is not None:
        if steps < 0:
            raise ValueError(f"steps must be >= 0; got {steps}")
        section.steps = steps
    dev = resolve_device(device)
    out.mkdir(parents=True, exist_ok=True)
    say = print if verbose else (lambda *a, **k: None)

    _seed_all(seed)
    task = AdditionTask(cfg.task)
    model = build_model(cfg.model, task.tokenizer).to(dev)
    say(f"[course_lib] {kind} on {dev.type}, config {cfg.name!r}, {n_params(model):,} parameters, seed {seed}")

    # --- the SFT baseline ---------------------------------------------------------------
    sft_path = out / "sft.pt"
    sft_seconds = 0.0
    if kind == "sft":
        baseline = evaluate(model, task)
    elif resume or sft_checkpoint:
        src = sft_path if resume else Path(sft_checkpoint)
        sft_state = load_checkpoint(src, kind="sft")
        model.load_state_dict(sft_state["model"])
        baseline = sft_state["metrics"]
    else:
        say(f"[course_lib] training the SFT baseline ({cfg.sft.steps} steps)")
        sft_res = train_sft(model, task, cfg.sft, seed=seed, max_grad_norm=cfg.max_grad_norm, show_progress=show_progress)
        sft_seconds = sft_res["seconds"]
        baseline = {"accuracy": sft_res["accuracy"], "loose_accuracy": sft_res["loose_accuracy"]}
        save_checkpoint(sft_path, {"kind": "sft", "model": model.state_dict(), "metrics": baseline,
                                   "config": json.dumps(configs.to_dict(cfg)), "seed": seed})
    say(f"[course_lib] baseline held-out accuracy {baseline['accuracy']:.3f}")
    baseline_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}

    # --- the trainer --------------------------------------------------------------------
    data_gen = torch.Generator().manual_seed(seed + 1)
    if state is not None:
        model.load_state_dict(state["model"])
        set_rng_state(state["rng"], data_gen)
    log = MetricsLog(out / "metrics.jsonl", rows=state["metrics"] if state else None)
    config_json = json.dumps(configs.to_dict(cfg))

    def checkpoint(step, opt, seconds, extra=None):
        save_checkpoint(ckpt_path, {
            "kind": kind, "model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
            "rl_seconds": seconds, "rng": rng_state(data_gen), "metrics": log.rows, "config": config_json,
            "seed": seed, **(extra or {}),
        })

    if kind == "sft":
        res = _train_sft_resumable(model, task, cfg, log, state, data_gen, checkpoint, show_progress)
    elif kind == "dpo":
        if state is not None:
            data = {k[5:]: v for k, v in state.items() if k.startswith("data_")}
        else:
            say("[course_lib] sampling preference pairs from the SFT policy, caching reference log-probs")
            t0 = time.perf_counter()
            data = build_preference_pairs(model, task, cfg.dpo, generator=data_gen)
            data.update(reference_logprobs(model, data))
            data["pair_seconds"] = time.perf_counter() - t0  # counted in rl_seconds: DPO's data cost
            say(f"[course_lib] {data['n_pairs']} pairs from {data['n_prompts']} prompts")
        extra = {f"data_{k}": v for k, v in data.items()}
        res = train_dpo(
            model, task, cfg.dpo, data, log=log, state=state, generator=data_gen, max_grad_norm=cfg.max_grad_norm,
            checkpoint=lambda s, o, sec: checkpoint(s, o, sec, extra), checkpoint_every=cfg.checkpoint_every,
            show_progress=show_progress,
        )
    else:
        res = train_grpo(
            model, task, cfg.grpo, generator=data_gen, log=log, state=state, reference_state=baseline_weights,
            max_grad_norm=cfg.max_grad_norm, checkpoint=checkpoint, checkpoint_every=cfg.checkpoint_every,
            show_progress=show_progress,
        )
    final = evaluate(model, task, max_completion_length=cfg.grpo.max_completion_length if kind == "grpo" else None)
    rl_seconds = res["rl_seconds"] + (data["pair_seconds"] if kind == "dpo" else 0.0)

    # --- the control: the same wall-clock spent on more SFT --------------------------------
    control_accuracy = None
    if control and kind != "sft":
        ctrl = build_model(cfg.model, task.tokenizer).to(dev)
        ctrl.load_state_dict(baseline_weights)
        say(f"[course_lib] control: continuing SFT for {rl_seconds:.1f} s")
        ctrl_res = train_sft(ctrl, task, cfg.sft, seed=seed + 2, time_budget=rl_seconds,
                             max_grad_norm=cfg.max_grad_norm, show_progress=show_progress)
        control_accuracy = ctrl_res["accuracy"]

    rows = log.rows
    gen_s = sum(r.get("gen_seconds", 0.0) for r in rows)
    upd_s = sum(r.get("update_seconds", 0.0) for r in rows)
    split = {"generation_seconds": gen_s, "update_seconds": upd_s,
             "generation_fraction": gen_s / (gen_s + upd_s) if gen_s + upd_s > 0 else 0.0} if kind == "grpo" else None
    pp = passport(cfg, kind, time_split=split)
    summary = {
        "kind": kind,
        "config": cfg.name,
        "seed": seed,
        "device": dev.type,
        "n_params": n_params(model),
        "steps": res["steps"],
        "baseline_accuracy": baseline["accuracy"],
        "final_accuracy": final["accuracy"],
        "final_loose_accuracy": final["loose_accuracy"],
        "control_accuracy": control_accuracy,
        "sft_seconds": sft_seconds,
        "rl_seconds": rl_seconds,
        "wall_seconds": time.perf_counter() - wall_start,
        "passport": pp,
        "options": configs.to_dict(cfg),
    }
    if split:
        summary["time_split"] = split
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "passport.json").write_text(json.dumps(pp, indent=2))
    save_dashboard(rows, out / "dashboard.png", title=f"{kind} ({cfg.name})", baseline_accuracy=baseline["accuracy"])
    say(format_passport(pp))
    line = f"[course_lib] held-out accuracy {baseline['accuracy']:.3f} -> {final['accuracy']:.3f} in {rl_seconds:.1f} s"
    if control_accuracy is not None:
        line += f"; same-time SFT control {control_accuracy:.3f}"
    say(line)
    say(f"[course_lib] wrote {out / 'summary.json'}, metrics.jsonl, dashboard.png")
    return summary


def _train_sft_resumable(model, task, cfg, log, state, data_gen, checkpoint, show_progress):
    """``train sft`` as its own run: chunks of ``checkpoint_every`` steps with checkpoints."""
    # Plain SFT is cheap; resume granularity is the checkpoint interval.
    start = state["step"] if state else 0
    seconds = state["rl_seconds"] if state else 0.0
    total = cfg.sft.steps
    step = start
    opt = None
    from course_lib.train import autocast, make_optimizer, sft_loss

    device = next(model.parameters()).device
    ids, attn, cmask = task.demonstrations(device)
    opt = make_optimizer(model, cfg.sft.learning_rate)
    if state:
        opt.load_state_dict(state["optimizer"])
    model.train()
    while step < total:
        t0 = time.perf_counter()
        idx = torch.randint(0, ids.shape[0], (cfg.sft.batch_size,), generator=data_gen).to(device)
        with autocast(device):
            loss = sft_loss(model, ids[idx], attn[idx], cmask[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        opt.step()
        step += 1
        seconds += time.perf_counter() - t0
        row = {"step": step, "loss": loss.item(), "update_seconds": time.perf_counter() - t0}
        if step % cfg.sft.eval_every == 0 or step == total:
            row.update(evaluate(model, task))
            model.train()
        log.append(row)
        if step % cfg.checkpoint_every == 0 or step == total:
            checkpoint(step, opt, seconds)
    model.eval()
    return {"steps": step, "rl_seconds": seconds}


def _add_overrides(parser: argparse.ArgumentParser) -> None:
    """One ``--flag`` per config field of the trainer sections (and task/model)."""
    seen = set()
    for section_cls in (configs.GRPOConfig, configs.DPOConfig, configs.SFTConfig, configs.TaskConfig, configs.ModelConfig):
        for f in dataclasses.fields(section_cls):
            if f.name in seen or f.name in ("steps", "seed"):
                continue
            seen.add(f.name)
            flag = "--" + f.name.replace("_", "-")
            kind = type(f.default)
            if kind is bool:
                parser.add_argument(flag, type=lambda s: s.lower() in ("1", "true", "yes"), default=None, metavar="BOOL")
            else:
                parser.add_argument(flag, type=kind, default=None, metavar=kind.__name__.upper())


def apply_overrides(cfg: configs.RunConfig, kind: str, values: dict) -> configs.RunConfig:
    """Put CLI overrides into the trainer's own section first, then task/model/sft."""
    order = {"sft": ("sft",), "dpo": ("dpo", "sft"), "grpo": ("grpo", "sft")}[kind] + ("task", "model")
    for name, value in values.items():
        if value is None:
            continue
        for sec_name in order:
            sec = getattr(cfg, sec_name)
            if hasattr(sec, name):
                setattr(sec, name, value)
                break
        else:
            raise ValueError(f"option --{name.replace('_', '-')} does not apply to '{kind}'")
    return cfg


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib", description="Train the course's tiny GPT.")
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train sft, dpo or grpo end to end")
    tr.add_argument("kind", choices=KINDS)
    tr.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda", "mps"))
    tr.add_argument("--out", default=None, help="run folder (default runs/<kind>)")
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--steps", type=int, default=None, help="steps of the chosen trainer")
    tr.add_argument("--config", default="cpu", help=f"named config: {', '.join(configs.CONFIGS)}")
    tr.add_argument("--control", action="store_true", help="also spend the same wall-clock on more SFT")
    tr.add_argument("--resume", default=None, metavar="DIR", help="continue the run in DIR")
    tr.add_argument("--sft-checkpoint", default=None, help="start from this sft.pt instead of training SFT")
    tr.add_argument("--no-progress", action="store_true", help="hide tqdm progress bars")
    _add_overrides(tr)
    args = parser.parse_args(argv)
    known = {"command", "kind", "device", "out", "seed", "steps", "config", "control", "resume", "sft_checkpoint", "no_progress"}
    overrides = {k: v for k, v in vars(args).items() if k not in known}
    try:
        if args.resume:
            if any(v is not None for v in overrides.values()):
                raise ValueError("--resume continues a run with its saved options; only --steps may change")
            cfg = None
            out = args.resume
        else:
            cfg = apply_overrides(configs.get_config(args.config), args.kind, overrides)
            out = args.out or f"runs/{args.kind}"
        run(args.kind, cfg, out, device=args.device, seed=args.seed, steps=args.steps, control=args.control,
            resume=bool(args.resume), sft_checkpoint=args.sft_checkpoint, show_progress=not args.no_progress)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
