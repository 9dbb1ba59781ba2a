"""Asynchronous GRPO on two cores: optimiser steps per second and accuracy, synchronous vs K steps stale (§11).

For every seed the same SFT policy starts each setting: K = 0 (synchronous, one process) and each
K in ``--staleness`` (a rollout worker process, ``course_lib.trainers.rollout_worker``), with the behaviour
correction on and, with ``--without-correction``, off. Settings are interleaved within a seed, so a
change in the machine's load hits them alike. Recorded per run: steps per wall-clock second of the
steps (evaluation excluded), the trainer's and the worker's CPU seconds (evaluation excluded), the
held-out accuracy at the end and every ``--eval-every`` steps (greedy evaluation draws no random
number, so it changes no run), the means of the staleness, the mismatch KL, the effective sample size
and the masked share, and the load average before and after. The SFT start of each seed is the shared
cached one (``course_lib.run.starts.sft_start``: the same weights as ``pipeline.sft_policy``). The JSON is
rewritten after every run (``"complete": false`` until the last), so a cut-short sweep keeps what ran.

    python benchmarks/tinygpt_async.py                         # K in {1, 2, 4, 8} and K = 0, 3 seeds, 300 steps
    python benchmarks/tinygpt_async.py --staleness 1 2 4 8 --without-correction   # the sweep (async.json)
    python benchmarks/tinygpt_async.py --staleness 1 --out benchmarks/results/async_speed.json  # speed, idle machine

Wall-clock numbers mean something only on an otherwise idle machine with two free cores; the
CPU seconds say how much work each setting did whatever the load.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from course_lib.run.pipeline import load_sft_checkpoint, rl_generator
from course_lib.run.starts import sft_start
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.model import build_model
from course_lib.tinygpt.runtime import MetricsLog
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import get_config
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.trainer import TrainContext

sys.path.insert(0, str(Path(__file__).resolve().parent))
from writer import RESULTS, record_start, save  # noqa: E402

OUT = RESULTS / "async.json"


def sft_weights(cfg, seed: int, checkpoint: str | None) -> tuple[dict, float]:
    """The SFT start's weights and its held-out accuracy: a checkpoint, or the shared cached start of ``seed``."""
    if checkpoint:
        weights = load_sft_checkpoint(checkpoint, cfg)["model"]
        model = build_model(cfg.model, AdditionTask(cfg.task).tokenizer)
        model.load_state_dict(weights)
        return weights, evaluate(model, AdditionTask(cfg.task))["accuracy"]
    _, model, info = sft_start(cfg, seed=seed, verbose=False)
    return model.state_dict(), info["accuracy"]


def one_run(cfg, task, weights, seed: int, K: int, correction: bool, steps: int,
            eval_every: int | None = None) -> dict:
    g = dataclasses.replace(cfg.grpo, max_staleness=K, vllm_importance_sampling_correction=correction,
                            eval_every=eval_every or 10**9)
    model = build_model(cfg.model, task.tokenizer)
    model.load_state_dict(weights)
    log = MetricsLog()
    eval_cpu = {"s": 0.0}

    def curve_point(m):  # the accuracy curve; its CPU seconds are kept out of the trainer's
        c0 = time.process_time()
        out = {"accuracy": evaluate(m, task, max_completion_length=g.max_completion_length)["accuracy"]}
        eval_cpu["s"] += time.process_time() - c0
        return out

    load_before = os.getloadavg()[0]
    res = train_grpo(model, task, g, TrainContext(log=log, steps=steps, show_progress=False),
                     generator=rl_generator(seed),
                     eval_fn=curve_point if eval_every else (lambda m: {"accuracy": float("nan")}),
                     reference_state=weights)
    acc = evaluate(model, task, max_completion_length=g.max_completion_length)["accuracy"]
    rows = log.rows

    def mean(key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return statistics.fmean(vals) if vals else None

    loop = res["loop"]
    trainer_cpu = loop["trainer_cpu_seconds"] - eval_cpu["s"]
    cpu = trainer_cpu + (loop.get("worker_cpu_seconds") or 0.0)
    curve = [[r["step"], r["accuracy"]] for r in rows if eval_every and r.get("accuracy") is not None]
    return {"seed": seed, "max_staleness": K, "correction": correction, "steps": res["steps"],
            "rl_seconds": res["rl_seconds"], "steps_per_second": res["steps"] / res["rl_seconds"],
            "trainer_cpu_seconds": trainer_cpu, "worker_cpu_seconds": loop.get("worker_cpu_seconds"),
            "cpu_seconds": cpu, "accuracy": acc, "accuracy_curve": curve,
            "staleness": mean("staleness"), "mismatch_kl": mean("mismatch_kl"),
            "is_ess": mean("is_ess"), "is_clipped_fraction": mean("is_clipped_fraction"),
            "gen_seconds": mean("gen_seconds"), "update_seconds": mean("update_seconds"),
            "wait_seconds": mean("wait_seconds"), "load_before": load_before, "load_after": os.getloadavg()[0]}


def main(argv=None) -> None:
    record_start()  # the commit and sources digest of the code that runs: the code now
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="cpu")
    parser.add_argument("--staleness", type=int, nargs="+", default=[1, 2, 4, 8], help="K >= 1 (K = 0 always runs)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the config's)")
    parser.add_argument("--eval-every", type=int, default=None,
                        help="also record held-out accuracy every N steps (default: only at the end)")
    parser.add_argument("--without-correction", action="store_true", help="also run each K without the correction")
    parser.add_argument("--sft-checkpoint", default=None,
                        help="one SFT policy for every seed (default: each seed's shared start)")
    parser.add_argument("--sft-seed", type=int, default=None,
                        help="the shared SFT start of this seed for every seed (the seeds then vary the RL runs only)")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    cfg = get_config(args.config)
    steps = args.steps or cfg.grpo.steps
    settings = [(0, True)] + [(K, c) for K in args.staleness
                              for c in ((True, False) if args.without_correction else (True,))]
    out = Path(args.out)
    command = ["tinygpt_async.py", *(sys.argv[1:] if argv is None else argv)]
    meta = {"config": args.config, "steps": steps, "config_steps": cfg.grpo.steps, "torch": torch.__version__,
            "machine": platform.platform(), "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
            "planned_runs": len(settings) * len(args.seeds),
            "sft_start": ("one checkpoint for every seed" if args.sft_checkpoint else "each seed's own shared start"
                          if args.sft_seed is None else f"seed {args.sft_seed}'s shared start for every seed")}
    runs = []
    for seed in args.seeds:
        weights, start = sft_weights(cfg, seed if args.sft_seed is None else args.sft_seed, args.sft_checkpoint)
        task = AdditionTask(cfg.task)
        for K, correction in settings:
            r = {**one_run(cfg, task, weights, seed, K, correction, steps, args.eval_every), "sft_accuracy": start}
            runs.append(r)
            print(f"seed {seed} K={K} correction={correction}: {r['steps_per_second']:.2f} steps/s wall, "
                  f"CPU {r['cpu_seconds']:.1f} s (trainer {r['trainer_cpu_seconds']:.1f}), "
                  f"accuracy {r['accuracy']:.3f} (start {start:.3f}), load {r['load_before']:.1f}", flush=True)
            complete = seed == args.seeds[-1] and (K, correction) == settings[-1]
            save(out.stem, command, runs, out.parent, complete=complete, **meta)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
