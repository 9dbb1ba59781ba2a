"""How many CPU threads the tiny GPT's trainers should use: SFT and GRPO step times, 1 vs 2 threads.

The trainers set ``runtime.DEFAULT_THREADS``; this measures the choice. Thread counts are
interleaved within each repeat (so a change in the machine's load hits both alike) and the
medians over repeats are printed. Default ``cpu`` config: SFT batch 64; GRPO B = 32 × G = 8.

    python benchmarks/tinygpt_threads.py [--threads 1 2] [--repeats 3] [--sft-steps 40] [--grpo-steps 4]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from course_lib.run.pipeline import build_policy, rl_generator
from course_lib.trainers.configs import get_config
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.sft import train_sft
from course_lib.trainers.trainer import TrainContext


def step_times(threads: int, sft_steps: int, grpo_steps: int, seed: int) -> tuple[float, float]:
    cfg = get_config("cpu")
    task, model = build_policy(cfg, seed=seed, device="cpu")
    sft = train_sft(model, task, cfg.sft, TrainContext(steps=sft_steps, show_progress=False, threads=threads),
                    seed=seed, eval_at_end=False)
    cfg.grpo.eval_every = 10**9  # time the steps, not the held-out evaluation
    grpo = train_grpo(model, task, cfg.grpo, TrainContext(steps=grpo_steps, show_progress=False, threads=threads),
                      generator=rl_generator(seed), eval_fn=lambda m: {"accuracy": float("nan")})
    return sft["seconds"] / sft_steps, grpo["rl_seconds"] / grpo_steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sft-steps", type=int, default=40)
    parser.add_argument("--grpo-steps", type=int, default=4)
    args = parser.parse_args()
    times = {n: [] for n in args.threads}
    for rep in range(args.repeats):
        for n in args.threads:
            times[n].append(step_times(n, args.sft_steps, args.grpo_steps, seed=rep))
            print(f"repeat {rep} threads {n}: SFT step {1e3 * times[n][-1][0]:.1f} ms, "
                  f"GRPO step {1e3 * times[n][-1][1]:.0f} ms", flush=True)
    print(f"\nmedian over {args.repeats} repeats (torch {torch.__version__}, machine load shared with other jobs):")
    base = args.threads[0]
    for n in args.threads:
        sft = statistics.median(t[0] for t in times[n])
        grpo = statistics.median(t[1] for t in times[n])
        ref_sft = statistics.median(t[0] for t in times[base])
        ref_grpo = statistics.median(t[1] for t in times[base])
        print(f"  {n} thread(s): SFT step {1e3 * sft:.1f} ms ({ref_sft / sft:.2f}× vs {base}), "
              f"GRPO step {1e3 * grpo:.0f} ms ({ref_grpo / grpo:.2f}× vs {base})")


if __name__ == "__main__":
    main()
