"""AI feedback on the tiny GPT (notebook 17): a judge trained on written principles,
measured against gold, a reward model on its labels and PPO against it; then one principle dropped.

Per seed (the shared SFT start of that seed, ``course_lib.starts``), at notebook 17's budget
(``ai_feedback.notebook_budget``: ``fast`` is its ``COURSE_FAST=1`` budget, ``full`` its full one):

- ``constitution``  the rules themselves on held-out pairs (no model): agreement, position bias (swap
                    test, both orders), length bias;
- ``judge``         the judge trained on the rules' labels, measured the same way;
- ``RM + PPO``      a reward model on the judge's labels (held-out agreement with gold, its length bias),
                    then PPO against it: proxy and gold (moving means) at the start and the end;

for the default constitution (``BIASED``) and without the position rule (``UNBIASED_POSITION``),
on the same pairs. Writes ``benchmarks/results/ai_feedback.json``.

    python benchmarks/tinygpt_ai_feedback.py [--seeds 0 1 2] [--budget fast] [--threads 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import time
from pathlib import Path

from course_lib.ai_feedback import (
    BIASED,
    BUDGETS,
    UNBIASED_POSITION,
    fit_judge,
    fit_reward_model_on_judge,
    notebook_budget,
    rl_against,
)
from course_lib.configs import get_config
from course_lib.reward_model import over_optimisation
from course_lib.runtime import set_threads
from course_lib.starts import sft_start

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import RESULTS, save  # noqa: E402

CONSTITUTIONS = {"default (first as the fallback)": BIASED, "without 'first'": UNBIASED_POSITION}
KEEP = ("agreement", "position_bias", "flip_rate", "length_bias", "ties", "decided")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budget", default="fast", choices=BUDGETS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--results", default=str(RESULTS), help="folder of the JSON (default: benchmarks/results)")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    judge_cfg, rm_cfg, ppo_cfg, window = notebook_budget(args.budget)
    runs = []
    for seed in args.seeds:
        task, policy, sft = sft_start(get_config("cpu"), seed=seed, verbose=False)
        data = heldout = None
        for variant, principles in CONSTITUTIONS.items():
            cpu0 = time.process_time()
            judged = fit_judge(policy, task, dataclasses.replace(judge_cfg, principles=principles), seed=seed,
                               data=data, heldout=heldout)
            data, heldout = judged["train"], judged["heldout"]  # the second constitution sees the same pairs
            rm = fit_reward_model_on_judge(policy, task, judged["judge_fn"], rm_cfg, tie_margin=judge_cfg.tie_margin,
                                           seed=seed)
            rows, _ = rl_against(policy, task, rm["model"], ppo_cfg, seed=seed)
            curve = over_optimisation(rows, window=window)
            run = {"variant": variant, "seed": seed, "sft_accuracy": sft["accuracy"], "pairs": judged["metrics"]["pairs"],
                   **{f"rules_{k}": judged["rules"][k] for k in KEEP}, **{f"judge_{k}": judged["metrics"][k] for k in KEEP},
                   **{f"rm_{k}": v for k, v in rm["metrics"].items() if not k.startswith("rm_")},
                   **{k: v for k, v in rm["metrics"].items() if k.startswith("rm_")},
                   **{f"ppo_{k}": curve[k] for k in ("proxy_start", "proxy_end", "gold_start", "gold_end", "shape")},
                   "ppo_gold_change": curve["gold_end"] - curve["gold_start"],
                   "ppo_proxy_change": curve["proxy_end"] - curve["proxy_start"],
                   "ppo_length_start": rows[0]["length"], "ppo_length_end": rows[-1]["length"],
                   "cpu_seconds": time.process_time() - cpu0}
            runs.append(run)
            print(f"seed {seed} {variant}: judge agreement {run['judge_agreement']:.3f} on decided pairs "
                  f"({run['judge_ties']:.1%} ties), position bias "
                  f"{run['judge_position_bias']:+.2f}, length bias {run['judge_length_bias']:+.2f}; RM gold "
                  f"{run['rm_heldout_gold_accuracy']:.3f}; PPO gold {run['ppo_gold_start']:.3f} -> {run['ppo_gold_end']:.3f}, "
                  f"proxy {run['ppo_proxy_start']:+.2f} -> {run['ppo_proxy_end']:+.2f}; {run['cpu_seconds']:.0f} CPU s",
                  flush=True)
            save("ai_feedback", ["tinygpt_ai_feedback.py", *sys.argv[1:]], runs, results=Path(args.results),
                 budget=args.budget, ppo_steps=ppo_cfg.steps, judge_steps=judge_cfg.steps, rm_steps=rm_cfg.steps,
                 window=window,
                 machine=f"{platform.machine()}, {args.threads} thread(s), a CPU shared with other jobs "
                         f"({os.cpu_count()} cores): CPU seconds, not wall-clock, are the cost")


if __name__ == "__main__":
    main()
