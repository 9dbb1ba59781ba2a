"""AI feedback on the tiny GPT (notebook 17): a judge trained on written principles,
measured against gold, a reward model on its labels and PPO against it; then one principle dropped.

Per seed (``ai_feedback.seed_run``: the shared SFT start of that seed, ``course_lib.run.starts``; seeds side
by side, ``course_lib.run.seeds``), at notebook 17's budget
(``ai_feedback.notebook_budget``: ``fast`` is its ``COURSE_FAST=1`` budget, ``full`` its full one):

- ``constitution``  the rules themselves on held-out pairs (no model): agreement, position bias (swap
                    test, both orders), length bias;
- ``judge``         the judge trained on the rules' labels, measured the same way;
- ``RM + PPO``      a reward model on the judge's labels (held-out agreement with gold, its length bias),
                    then PPO against it: proxy and gold (moving means) at the start and the end;

for the default constitution (``BIASED``) and without the position rule (``UNBIASED_POSITION``),
on the same pairs. Writes ``benchmarks/results/ai_feedback.json``.

    python benchmarks/tinygpt_ai_feedback.py [--seeds 0 1 2] [--budget fast] [--processes N]
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sys
from pathlib import Path

from course_lib.run.ai_feedback import BUDGETS, notebook_budget, seed_run
from course_lib.run.seeds import over_seeds

sys.path.insert(0, str(Path(__file__).resolve().parent))
from writer import RESULTS, record_start, save  # noqa: E402


def main(argv=None) -> None:
    record_start()  # the commit and sources digest of the code that runs: the code now
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budget", default="fast", choices=BUDGETS)
    parser.add_argument("--processes", type=int, default=None, help="seeds side by side (default: the cores)")
    parser.add_argument("--results", default=str(RESULTS), help="folder of the JSON (default: benchmarks/results)")
    args = parser.parse_args(argv)
    judge_cfg, rm_cfg, ppo_cfg, window = notebook_budget(args.budget)
    runs = [row for r in over_seeds(functools.partial(seed_run, budget=args.budget), args.seeds,
                                    processes=args.processes)
            for row in r["result"]]
    for run in runs:
        print(f"seed {run['seed']} {run['variant']}: judge agreement {run['judge_agreement']:.3f} on decided pairs "
              f"({run['judge_ties']:.1%} ties), position bias "
              f"{run['judge_position_bias']:+.2f}, length bias {run['judge_length_bias']:+.2f}; RM gold "
              f"{run['rm_heldout_gold_accuracy']:.3f}; PPO gold {run['ppo_gold_start']:.3f} -> "
              f"{run['ppo_gold_end']:.3f}, proxy {run['ppo_proxy_start']:+.2f} -> {run['ppo_proxy_end']:+.2f}; "
              f"{run['cpu_seconds']:.0f} CPU s")
    save("ai_feedback", ["tinygpt_ai_feedback.py", *sys.argv[1:]], runs, results=Path(args.results),
         budget=args.budget, ppo_steps=ppo_cfg.steps, judge_steps=judge_cfg.steps, rm_steps=rm_cfg.steps,
         window=window,
         machine=f"{platform.machine()}, seeds side by side, one thread each, on a CPU shared with other jobs "
                 f"({os.cpu_count()} cores): CPU seconds, not wall-clock, are the cost")


if __name__ == "__main__":
    main()
