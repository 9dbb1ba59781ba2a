"""Our GRPO step against TRL's GRPOTrainer on the same recipe, side by side.

Same SFT start (one course SFT run per seed, copied into both), same model, tokenizer, prompt
sampler and strict checker; B = 32 prompts × G = 8, L_max = 6, μ = 1, β = 0, lr 3e-4,
token-mean loss (TRL ``loss_type="dapo"``), one thread. TRL runs twice: gradient checkpointing
off (the bridge's default) and on (TRL's own default). Prints, per seed and as medians over
seeds: held-out exact match before and after, the median wall-clock seconds per step, the CPU
seconds per step (the RL stage's process time over its steps: on a machine shared with other
jobs, wall-clock time measures the other jobs too, CPU time much less), and RL seconds. The
goal is the course's CPU seconds per step at most half of TRL's with checkpointing
off, at the same held-out accuracy; the summary line states the measured ratio.

The known formula difference is reported, not hidden: TRL's ``scale_rewards="group"`` divides by
the sample std + 1e-4, the course trainer by the population std (see course_lib.trl.trl_bridge).

    python benchmarks/trl_vs_course_grpo.py [--seeds 0 1 2] [--steps 300] [--threads 1]

Skips (exit 0, with the reason) when TRL is not installed.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from course_lib.run.pipeline import rl_generator, sft_policy
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.runtime import MetricsLog
from course_lib.trainers.configs import get_config
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.trainer import TrainContext
from course_lib.trl import trl_bridge

sys.path.insert(0, str(Path(__file__).resolve().parent))
from writer import record_start, save  # noqa: E402

LABELS = {"course": "course_lib `train_grpo`", "trl": "TRL `GRPOTrainer` (bridge)",
          "trl_checkpointing": "TRL `GRPOTrainer`, gradient checkpointing on"}


def course_run(model, task, cfg, seed: int, threads: int) -> dict:
    log = MetricsLog()
    g = dataclasses.replace(cfg.grpo, eval_every=10**9)  # evaluated once, after the run, as TRL's
    cpu = time.process_time()
    out = train_grpo(model, task, g,
                     TrainContext(log=log, max_grad_norm=cfg.max_grad_norm, show_progress=False, threads=threads),
                     generator=rl_generator(seed), eval_fn=lambda m: {"accuracy": float("nan")})
    cpu = time.process_time() - cpu
    step_seconds = [r["update_seconds"] + r["gen_seconds"] + r["other_seconds"] for r in log.rows]
    return {"seconds": out["rl_seconds"], "step": statistics.median(step_seconds), "cpu_step": cpu / len(log.rows)}


def trl_run(model, task, cfg, seed: int, checkpointing: bool, out_dir: str) -> dict:
    rl_generator(seed)  # the same torch seed for sampling as the course's RL stage
    trainer, _ = trl_bridge.make_trainer("grpo", model, task, cfg, seed=seed + 1, output_dir=out_dir,
                                         checkpointing=checkpointing)
    cpu = time.process_time()
    trainer.train()
    cpu = time.process_time() - cpu
    steps = [r["step_time"] for r in trainer.state.log_history if "step_time" in r]
    return {"seconds": sum(steps), "step": statistics.median(steps), "cpu_step": cpu / trainer.state.global_step}


def main() -> None:
    record_start()  # the commit and sources digest of the code that runs: the code now
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="runs/bench_trl")
    args = parser.parse_args()
    if not trl_bridge.trl_available():
        print(f"skipped: {trl_bridge.INSTALL_HINT}")
        return
    trl_bridge.quiet()
    torch.set_num_threads(args.threads)
    cfg = get_config("cpu")
    cfg.grpo.steps = args.steps
    L = cfg.grpo.max_completion_length

    def acc(m):
        return evaluate(m, task, max_completion_length=L)["accuracy"]

    runs = {"course": [], "trl": [], "trl_checkpointing": []}
    for seed in args.seeds:
        task, sft, _ = sft_policy(cfg, TrainContext(show_progress=False, threads=args.threads), seed=seed,
                                  device="cpu")
        base = acc(sft)
        line = [f"seed {seed}: SFT {base:.3f}"]
        for name in runs:
            model = copy.deepcopy(sft)
            t0 = time.perf_counter()
            if name == "course":
                r = course_run(model, task, cfg, seed, args.threads)
            else:
                r = trl_run(model, task, cfg, seed, name == "trl_checkpointing", f"{args.out}/{name}_s{seed}")
            torch.set_num_threads(args.threads)
            r.update(wall=time.perf_counter() - t0, baseline=base, final=acc(model))
            runs[name].append(r)
            line.append(f"{name} {r['final']:.3f} ({r['step']:.3f} s/step, {r['cpu_step']:.3f} CPU s/step, "
                        f"{r['seconds']:.0f} s)")
        print("; ".join(line), flush=True)
    rows = [{"seed": seed, "variant": LABELS[name], "baseline_accuracy": r["baseline"], "final_accuracy": r["final"],
             "lift": r["final"] - r["baseline"], "step_seconds": r["step"], "cpu_step_seconds": r["cpu_step"],
             "rl_seconds": r["seconds"]}
            for name, results in runs.items() for seed, r in zip(args.seeds, results)]
    ratios = [c["cpu_step"] / t["cpu_step"] for c, t in zip(runs["course"], runs["trl"])]
    print(f"course / TRL CPU seconds per step: median {statistics.median(ratios):.2f} "
          f"(per seed {' / '.join(f'{x:.2f}' for x in ratios)}); goal <= 0.5")
    load = os.getloadavg()[0]
    path = save("trl_vs_course_grpo", ["trl_vs_course_grpo.py", *sys.argv[1:]], rows, steps=args.steps,
                machine=f"{args.threads} thread(s), 2-core CPU, load average {load:.1f} at the end")
    print(f"wrote {path}; python benchmarks/tables.py puts the table in docs/trl.md")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
