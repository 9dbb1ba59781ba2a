"""GRPO on the default CPU config: lift over the SFT baseline, the same-time SFT control, and
where a step's time goes. Prints medians over seeds (curves are noisy: single runs mislead).

Targets: ≥ 30 points over the SFT baseline in ≤ 180 s of RL, above the same-time SFT
control; the generation/update split at 256 samples per step.

    python benchmarks/tinygpt_grpo.py [--seeds 0 1 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from course_lib.run.pipeline import run
from course_lib.tinygpt.runtime import DEFAULT_THREADS
from course_lib.trainers.configs import get_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from writer import record_start, save  # noqa: E402


def main() -> None:
    record_start()  # the commit and sources digest of the code that runs: the code now
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    parser.add_argument("--out", default="runs/bench")
    args = parser.parse_args()
    rows, runs = [], []
    for seed in args.seeds:
        s = run("grpo", get_config("cpu"), f"{args.out}/grpo_s{seed}", seed=seed, control=True,
                overwrite=True, threads=args.threads, show_progress=False, verbose=False)
        split = s["time_split"]
        runs.append({"variant": "GRPO (cpu config)", "seed": seed, "sft_accuracy": s["sft_accuracy"],
                     "final_accuracy": s["final_accuracy"], "control_accuracy": s["control_accuracy"],
                     "rl_seconds": s["rl_seconds"], "generation_fraction": split["generation_fraction"]})
        cfg = get_config("cpu").grpo
        save("grpo", ["tinygpt_grpo.py", *sys.argv[1:]], runs, unit=cfg.unit, steps=cfg.steps)
        rows.append((s["sft_accuracy"], s["final_accuracy"], s["control_accuracy"], s["rl_seconds"],
                     split["generation_fraction"]))
        print(f"seed {seed}: SFT {s['sft_accuracy']:.3f} → GRPO {s['final_accuracy']:.3f} "
              f"(+{100 * (s['final_accuracy'] - s['sft_accuracy']):.1f} pts) in {s['rl_seconds']:.0f} s RL; "
              f"same-time SFT control {s['control_accuracy']:.3f}; generation share "
              f"{split['generation_fraction']:.0%}",
              flush=True)
    med = [statistics.median(col) for col in zip(*rows)]
    print(f"\nmedian over {len(rows)} seeds: SFT {med[0]:.3f}, GRPO {med[1]:.3f} "
          f"(lift {100 * statistics.median(r[1] - r[0] for r in rows):+.1f} pts), control {med[2]:.3f}, "
          f"RL {med[3]:.0f} s, generation/update split {med[4]:.0%}/{1 - med[4]:.0%}")


if __name__ == "__main__":
    main()
