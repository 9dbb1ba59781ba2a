"""Asynchronous GRPO on two cores: optimiser steps per second and accuracy, synchronous vs K steps stale (§11).

For every seed the same SFT policy starts each setting: K = 0 (synchronous, one process) and each
K in ``--staleness`` (a rollout worker process, ``course_lib.rollout_worker``), with the behaviour
correction on and, with ``--without-correction``, off. Settings are interleaved within a seed, so a
change in the machine's load hits them alike. Recorded per run: steps per wall-clock second of the
steps (evaluation excluded: held-out accuracy is measured once, at the end), the trainer's and the
worker's CPU seconds, the held-out accuracy, and the means of the staleness, the mismatch KL and
the effective sample size. Writes ``benchmarks/results/async.json``.

    python benchmarks/tinygpt_async.py                         # K in {0, 1, 2, 4, 8}, 3 seeds, 300 steps
    python benchmarks/tinygpt_async.py --staleness 1 --seeds 0 --steps 30 --sft-checkpoint runs/grpo/sft.pt

Wall-clock numbers mean something only on an otherwise idle machine with two free cores; the
CPU seconds say how much work each setting did whatever the load.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from course_lib.configs import get_config
from course_lib.evaluation import evaluate
from course_lib.grpo import train_grpo
from course_lib.model import build_model
from course_lib.pipeline import load_sft_checkpoint, rl_generator, sft_policy
from course_lib.runtime import MetricsLog
from course_lib.task import AdditionTask

OUT = Path(__file__).resolve().parent / "results" / "async.json"


def sft_weights(cfg, seed: int, checkpoint: str | None) -> dict:
    if checkpoint:
        return load_sft_checkpoint(checkpoint, cfg)["model"]
    _, model, _ = sft_policy(cfg, seed=seed, device="cpu", show_progress=False)
    return model.state_dict()


def one_run(cfg, task, weights, seed: int, K: int, correction: bool, steps: int) -> dict:
    g = dataclasses.replace(cfg.grpo, max_staleness=K, vllm_importance_sampling_correction=correction,
                            eval_every=10**9)
    model = build_model(cfg.model, task.tokenizer)
    model.load_state_dict(weights)
    log = MetricsLog()
    res = train_grpo(model, task, g, generator=rl_generator(seed), log=log, steps=steps, show_progress=False,
                     eval_fn=lambda m: {"accuracy": float("nan")}, reference_state=weights)
    acc = evaluate(model, task, max_completion_length=g.max_completion_length)["accuracy"]
    rows = log.rows

    def mean(key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return statistics.fmean(vals) if vals else None

    loop = res["loop"]
    cpu = loop["trainer_cpu_seconds"] + (loop.get("worker_cpu_seconds") or 0.0)
    return {"seed": seed, "max_staleness": K, "correction": correction, "steps": res["steps"],
            "rl_seconds": res["rl_seconds"], "steps_per_second": res["steps"] / res["rl_seconds"],
            "trainer_cpu_seconds": loop["trainer_cpu_seconds"], "worker_cpu_seconds": loop.get("worker_cpu_seconds"),
            "cpu_seconds": cpu, "accuracy": acc, "staleness": mean("staleness"), "mismatch_kl": mean("mismatch_kl"),
            "is_ess": mean("is_ess"), "is_clipped_fraction": mean("is_clipped_fraction"),
            "gen_seconds": mean("gen_seconds"), "update_seconds": mean("update_seconds"),
            "wait_seconds": mean("wait_seconds")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="cpu")
    parser.add_argument("--staleness", type=int, nargs="+", default=[1, 2, 4, 8], help="K >= 1 (K = 0 always runs)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the config's)")
    parser.add_argument("--without-correction", action="store_true", help="also run each K without the correction")
    parser.add_argument("--sft-checkpoint", default=None, help="one SFT policy for every seed (default: train one per seed)")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    cfg = get_config(args.config)
    steps = args.steps or cfg.grpo.steps
    settings = [(0, True)] + [(K, c) for K in args.staleness for c in ((True, False) if args.without_correction else (True,))]
    runs = []
    for seed in args.seeds:
        weights = sft_weights(cfg, seed, args.sft_checkpoint)
        task = AdditionTask(cfg.task)
        for K, correction in settings:
            r = one_run(cfg, task, weights, seed, K, correction, steps)
            runs.append(r)
            print(f"seed {seed} K={K} correction={correction}: {r['steps_per_second']:.2f} steps/s wall, "
                  f"CPU {r['cpu_seconds']:.1f} s (trainer {r['trainer_cpu_seconds']:.1f}), "
                  f"accuracy {r['accuracy']:.3f}", flush=True)
    out = {"config": args.config, "steps": steps, "seeds": args.seeds, "torch": torch.__version__,
           "machine": platform.platform(), "date": time.strftime("%Y-%m-%d"), "runs": runs}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
