"""Recipes on the tiny GPT (issue 26): DeepSeek-R1's stages, R1-Zero from the random initialisation and
from a weak start, per stage (``course_lib.recipes``). What each stage adds, and what RL can amplify.

Variants, each over the seeds:

- ``r1``            cold-start SFT (a tenth of the demonstrations) → GRPO → RFT → GRPO;
- ``r1-zero``       GRPO from the random initialisation (every group at reward 0: zero variance everywhere);
- ``weak start``    SFT on ``--weak-demos`` demonstrations for ``--weak-steps`` steps → GRPO;
- ``digit base``    pretraining on plain digit text for ``--pretrain-steps`` steps (no task) → GRPO.

Writes ``benchmarks/results/recipes.json`` (one entry per seed, variant and stage: pass@1, sampled pass@1,
pass@8, completion length, entropy, KL to the stage's start and to the first policy, acceptance rate and
zero-variance share, CPU seconds).

    python benchmarks/tinygpt_recipes.py [--seeds 0 1 2] [--config cpu] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from course_lib.configs import CONFIGS, get_config
from course_lib.recipes import run_recipe
from course_lib.runtime import DEFAULT_THREADS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import RESULTS, save  # noqa: E402


def variants(weak_demos: int, weak_steps: int, pretrain_steps: int) -> dict[str, str]:
    return {"r1": "r1", "r1-zero": "r1-zero",
            "weak start": f"sft:task.n_demos={weak_demos}:steps={weak_steps},grpo",
            "digit base": f"pretrain:steps={pretrain_steps},grpo"}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--config", default="cpu", choices=tuple(CONFIGS))
    parser.add_argument("--weak-demos", type=int, default=20)
    parser.add_argument("--weak-steps", type=int, default=100)
    parser.add_argument("--pretrain-steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    parser.add_argument("--out", default="runs/bench")
    parser.add_argument("--results", default=str(RESULTS), help="folder of the JSON (default: benchmarks/results)")
    args = parser.parse_args(argv)
    runs = []
    for seed in args.seeds:
        for variant, stages in variants(args.weak_demos, args.weak_steps, args.pretrain_steps).items():
            folder = f"{args.out}/recipes_{variant.replace(' ', '_')}_s{seed}"
            summary = run_recipe(stages, get_config(args.config), folder, seed=seed, overwrite=True,
                                 threads=args.threads, show_progress=False, verbose=False)
            for entry in summary["finished"]:
                runs.append({"variant": variant, "seed": seed, **{k: v for k, v in entry.items() if k != "overrides"},
                             "overrides": entry["overrides"]})
                print(f"seed {seed} {variant:>10} stage {entry['stage']} {entry['kind']:>4}: pass@1 {entry['pass@1']:.3f}"
                      f", pass@8 {entry['pass@8']:.3f}, KL to start {entry['kl_to_stage_start']:.2f}"
                      + (f", zero-variance {entry['zero_variance_share']:.0%}" if "zero_variance_share" in entry else "")
                      + (f", acceptance {entry['acceptance_rate']:.2f}" if "acceptance_rate" in entry else ""), flush=True)
            if summary["stopped"]:
                runs.append({"variant": variant, "seed": seed, "stopped": summary["stopped"]})
            save("recipes", ["tinygpt_recipes.py", *sys.argv[1:]], runs, results=Path(args.results),
                 config=args.config, weak_demos=args.weak_demos, weak_steps=args.weak_steps,
                 pretrain_steps=args.pretrain_steps)


if __name__ == "__main__":
    main()
