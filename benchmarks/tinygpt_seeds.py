"""Seeds side by side: GRPO on the `cpu` config for 1, 2 and 4 seeds at once, wall and CPU seconds.

``course_lib.run.seeds.train_seeds`` runs each seed in its own process with one torch thread, as many at
once as the machine has cores. Goal: 4 seeds in ≤ 2.2× the wall-clock of one on 2 cores
(the bound there is 2×). The SFT starts are read from the cache, built before the clock starts
(side by side too), so the seconds are GRPO's plus reading a start; evaluation is included.
Every count runs ``--repeats`` times, the counts interleaved round by round (1, 2, 4, 1, 2, 4, …) so
that a drift of the machine touches them alike; the table reports the median wall and the median CPU
(all processes) of each count's rounds. Wall-clock is evidence only on an otherwise idle machine.

    python benchmarks/tinygpt_seeds.py [--seeds 0 1 2 3] [--counts 1 2 4] [--steps N] [--repeats R]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

from course_lib.run.seeds import cores, train_seeds
from course_lib.trainers.configs import get_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from writer import record_start, save  # noqa: E402


def main() -> None:
    record_start()  # the commit and sources digest of the code that runs: the code now
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4], help="seeds side by side, per run")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps per seed (default: the config's)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds over the counts; the table shows medians")
    args = parser.parse_args()
    if max(args.counts) > len(args.seeds) or min(args.counts) < 1:
        parser.error(f"--counts must be between 1 and the number of --seeds ({len(args.seeds)}); got {args.counts}")
    if args.repeats < 1:
        parser.error(f"--repeats must be an integer >= 1 (rounds over the counts); got {args.repeats}")
    cfg = get_config("cpu")
    train_seeds("sft", cfg, args.seeds)  # the starts, cached before any clock runs
    runs, walls, cpus = [], {n: [] for n in args.counts}, {n: [] for n in args.counts}
    for round_ in range(args.repeats):
        for n in args.counts:
            t0 = time.perf_counter()
            got = train_seeds("grpo", cfg, args.seeds[:n], steps=args.steps)
            walls[n].append(time.perf_counter() - t0)
            cpus[n].append(sum(r["cpu_seconds"] for r in got))
            for r in got:
                runs.append({"variant": f"{n} side by side", "n_seeds": n, "round": round_, "seed": r["seed"],
                             "start_accuracy": r["start"]["accuracy"], "final_accuracy": r["final"]["accuracy"],
                             "wall_seconds": r["wall_seconds"], "cpu_seconds": r["cpu_seconds"],
                             "rl_seconds": r["rl_seconds"]})
            first = statistics.median(walls[args.counts[0]])
            print(f"round {round_ + 1}/{args.repeats}, {n} seed(s) side by side: {walls[n][-1]:.1f} s wall, "
                  f"{cpus[n][-1]:.1f} s CPU (median so far {statistics.median(walls[n]) / first:.2f}× the wall of "
                  f"{args.counts[0]})", flush=True)
            done = {k: v for k, v in walls.items() if v}
            save("seeds", ["tinygpt_seeds.py", *sys.argv[1:]], runs, config="cpu", cores=cores(),
                 steps=args.steps or cfg.grpo.steps, machine=platform.platform(), repeats=len(walls[args.counts[-1]]),
                 wall_seconds={str(k): statistics.median(v) for k, v in done.items()},
                 cpu_seconds={str(k): statistics.median(cpus[k]) for k in done},
                 rounds={str(k): {"wall_seconds": v, "cpu_seconds": cpus[k]} for k, v in done.items()})


if __name__ == "__main__":
    main()
