"""Recipes on the tiny GPT: DeepSeek-R1's stages, R1-Zero from the random initialisation and
from a weak start, per stage (``course_lib.run.recipes``). What each stage adds, and what RL can amplify.

Variants, each over the seeds:

- ``random init``   no training: the policy r1 and r1-zero start from, measured as every stage is
                    (``recipes.policy_numbers``; no KL), the "before" of R1-Zero;
- ``r1``            cold-start SFT (a tenth of the demonstrations) → GRPO → RFT → GRPO;
- ``r1-zero``       GRPO from the random initialisation (every group at reward 0: zero variance everywhere);
- ``weak start``    SFT on ``--weak-demos`` demonstrations for ``--weak-steps`` steps → GRPO;
- ``digit base``    pretraining on plain digit text for ``--pretrain-steps`` steps (no task) → GRPO.

GRPO from the full SFT start (the fourth start of notebook 16) is ``train grpo``, not repeated here: the
GRPO table (``benchmarks/tinygpt_grpo.py``) measures it over the same seeds, at its own commit.

Writes ``benchmarks/results/recipes.json`` (one entry per seed, variant and stage: pass@1, sampled pass@1,
pass@8, completion length, entropy, KL to the stage's start and to the first policy, acceptance rate and
zero-variance share, CPU seconds), rewritten after every variant, so a run stopped early keeps what finished.
``--variants`` runs a subset (a reduced run says so in the JSON: its command line).

    python benchmarks/tinygpt_recipes.py [--seeds 0 1 2] [--config cpu] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

from course_lib.run.pipeline import build_policy
from course_lib.run.recipes import PASS_K, policy_numbers, run_recipe
from course_lib.tinygpt.runtime import DEFAULT_THREADS, set_threads
from course_lib.trainers.configs import CONFIGS, get_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from writer import RESULTS, record_start, save  # noqa: E402

RANDOM_INIT = "random init"


def variants(weak_demos: int, weak_steps: int, pretrain_steps: int) -> dict[str, str | None]:
    """variant -> its stages (None: the random initialisation, measured without training)."""
    return {RANDOM_INIT: None, "r1": "r1", "r1-zero": "r1-zero",
            "weak start": f"sft:task.n_demos={weak_demos}:steps={weak_steps},grpo",
            "digit base": f"pretrain:steps={pretrain_steps},grpo"}


def random_init(cfg, seed: int) -> dict:
    """The random initialisation's row: stage 0, measured as a stage's policy is (no KL: it moved nowhere)."""
    task, model = build_policy(cfg, seed=seed, device="cpu")
    model.eval().requires_grad_(False)
    return {"stage": 0, "kind": "none", "steps": 0, **policy_numbers(model, task, cfg, seed=seed)}


def main(argv=None) -> None:
    record_start()  # the commit and sources digest of the code that runs: the code now
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--config", default="cpu", choices=tuple(CONFIGS))
    parser.add_argument("--weak-demos", type=int, default=20)
    parser.add_argument("--weak-steps", type=int, default=100)
    parser.add_argument("--pretrain-steps", type=int, default=300)
    parser.add_argument("--variants", nargs="+", default=None, metavar="NAME",
                        help="run only these variants (default: all)")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    parser.add_argument("--out", default="runs/bench")
    parser.add_argument("--results", default=str(RESULTS), help="folder of the JSON (default: benchmarks/results)")
    args = parser.parse_args(argv)
    every = variants(args.weak_demos, args.weak_steps, args.pretrain_steps)
    chosen = args.variants or list(every)
    unknown = [v for v in chosen if v not in every]
    if unknown:
        parser.error(f"--variants: unknown {unknown}; choose from {list(every)}")
    set_threads(args.threads)
    runs = []
    for seed in args.seeds:
        for variant in chosen:
            stages = every[variant]
            if stages is None:
                entries, stopped = [random_init(get_config(args.config), seed)], None
            else:
                folder = f"{args.out}/recipes_{variant.replace(' ', '_')}_s{seed}"
                summary = run_recipe(stages, get_config(args.config), folder, seed=seed, overwrite=True,
                                     threads=args.threads, show_progress=False, verbose=False)
                entries, stopped = summary["finished"], summary["stopped"]
            for entry in entries:
                runs.append({"variant": variant, "seed": seed, **{k: v for k, v in entry.items() if k != "overrides"},
                             "overrides": entry.get("overrides", {})})
                print(f"seed {seed} {variant:>11} stage {entry['stage']} {entry['kind']:>8}: pass@1 "
                      f"{entry['pass@1']:.3f}, pass@{PASS_K} {entry[f'pass@{PASS_K}']:.3f}"
                      + (f", KL to start {entry['kl_to_stage_start']:.2f}" if "kl_to_stage_start" in entry else "")
                      + (f", zero-variance {entry['zero_variance_share']:.0%}" if "zero_variance_share" in entry
                         else "")
                      + (f", acceptance {entry['acceptance_rate']:.2f}" if "acceptance_rate" in entry else "")
                      + (f"; {entry['cpu_seconds']:.0f} CPU s" if "cpu_seconds" in entry else ""), flush=True)
            if stopped:
                runs.append({"variant": variant, "seed": seed, "stopped": stopped})
            save("recipes", ["tinygpt_recipes.py", *sys.argv[1:]], runs, results=Path(args.results),
                 config=args.config, weak_demos=args.weak_demos, weak_steps=args.weak_steps,
                 pretrain_steps=args.pretrain_steps,
                 machine=f"{platform.machine()}, {args.threads} thread(s), a CPU shared with other jobs "
                         f"({os.cpu_count()} cores): CPU seconds, not wall-clock, are the cost")


if __name__ == "__main__":
    main()
