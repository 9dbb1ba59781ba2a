"""Offline DPO on the default CPU config: plain DPO, DPO + NLL (rpo_alpha=1), medians over seeds.

Target (issue 6): plain DPO (no NLL term) ≥ 10 points over the SFT baseline in ≤ 120 s. The
DPO + NLL row shows how much the NLL term adds; notebook 06 also runs "NLL only".
Reuses ``runs/bench/grpo_s<seed>/sft.pt`` when the GRPO benchmark has written it.

    python benchmarks/tinygpt_dpo.py [--seeds 0 1 2] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

from course_lib.configs import get_config
from course_lib.pipeline import run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import save  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="runs/bench")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results, runs = {"DPO": [], "DPO + NLL": []}, []
    for seed in args.seeds:
        sft = Path(f"{args.out}/grpo_s{seed}/sft.pt")
        for name, alpha in (("DPO", 0.0), ("DPO + NLL", 1.0)):
            cfg = get_config("cpu")
            cfg.dpo.rpo_alpha = alpha
            s = run("dpo", cfg, f"{args.out}/dpo{'_nll' if alpha else ''}_s{seed}", seed=seed,
                    sft_checkpoint=str(sft) if sft.exists() else None, overwrite=True, show_progress=False, verbose=False)
            results[name].append((s["sft_accuracy"], s["final_accuracy"], s["rl_seconds"]))
            runs.append({"variant": name, "seed": seed, "sft_accuracy": s["sft_accuracy"],
                         "final_accuracy": s["final_accuracy"], "rl_seconds": s["rl_seconds"]})
            save("dpo", ["tinygpt_dpo.py", *sys.argv[1:]], runs)
            print(f"seed {seed} {name:9}: SFT {s['sft_accuracy']:.3f} → {s['final_accuracy']:.3f} "
                  f"({100 * (s['final_accuracy'] - s['sft_accuracy']):+.1f} pts) in {s['rl_seconds']:.0f} s",
                  flush=True)
    print()
    for name, rows in results.items():
        lift = statistics.median(100 * (f - b) for b, f, _ in rows)
        print(f"median over {len(rows)} seeds, {name:9}: SFT {statistics.median(r[0] for r in rows):.3f} → "
              f"{statistics.median(r[1] for r in rows):.3f} (lift {lift:+.1f} pts), "
              f"{statistics.median(r[2] for r in rows):.0f} s")


if __name__ == "__main__":
    main()
