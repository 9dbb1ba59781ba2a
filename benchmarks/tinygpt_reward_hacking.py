"""Notebook 11_reward_hacking's experiment over seeds: the same GRPO against a loose and a strict checker.

The notebook's experiment exactly (``course_lib.run.hacking.experiment_config``), at more seeds.
For each seed: a weak SFT start (``course_lib.run.hacking.SFT_STEPS``), then two GRPO runs that
differ only in the checker. Records held-out strict and loose accuracy, completion length,
truncation and entropy over steps, and the first step at which each of
``course_lib.run.hacking.ALARMS`` fires, for both runs (an alarm that also fires in the strict
run is a false alarm). Writes ``benchmarks/results/reward_hacking.json``.

    python benchmarks/tinygpt_reward_hacking.py [--seeds 0 1 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path

import torch

from course_lib.run.hacking import SFT_STEPS, experiment_config, first_alarms
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.model import build_model
from course_lib.tinygpt.runtime import MetricsLog
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.sft import train_sft
from course_lib.trainers.trainer import TrainContext

RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(RESULTS.parent))
from provenance import record  # noqa: E402

KEEP = ("step", "reward_mean", "completion_length", "truncated_rate", "entropy", "accuracy", "loose_accuracy")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(RESULTS / "reward_hacking.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    started_at = record()  # the code this process runs
    cfg = experiment_config()
    task = AdditionTask(cfg.task)
    L = cfg.grpo.max_completion_length
    runs = []
    for seed in args.seeds:
        torch.manual_seed(seed)
        model = build_model(cfg.model, task.tokenizer)
        train_sft(model, task, cfg.sft, TrainContext(steps=SFT_STEPS, show_progress=False), seed=seed,
                  eval_at_end=False)
        start = evaluate(model, task, max_completion_length=L)
        weights = {k: v.clone() for k, v in model.state_dict().items()}
        for reward in ("loose", "strict"):
            t0 = time.perf_counter()
            model.load_state_dict(weights)
            log = MetricsLog()
            torch.manual_seed(seed)
            train_grpo(model, task, dataclasses.replace(cfg.grpo, reward=reward),
                       TrainContext(log=log, show_progress=False), generator=torch.Generator().manual_seed(seed + 1))
            final = evaluate(model, task, max_completion_length=L)
            alarms = first_alarms(log.rows, start["accuracy"])
            runs.append({
                "seed": seed, "reward": reward, "start": start, "final": final, "alarms": alarms,
                "rows": [{k: r[k] for k in KEEP if k in r} for r in log.rows],
                "wall_seconds": time.perf_counter() - t0,
            })
            print(f"seed {seed} {reward:6}: strict {start['accuracy']:.3f} → {final['accuracy']:.3f}, loose "
                  f"{start['loose_accuracy']:.3f} → {final['loose_accuracy']:.3f}; alarms {alarms}", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "benchmark": "reward_hacking",
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        **started_at,
        "seeds": args.seeds, "sft_steps": SFT_STEPS, "rl_steps": cfg.grpo.steps, "n_heldout": cfg.task.n_heldout,
        "machine": f"{platform.machine()}, {args.threads} thread(s), shared 2-core CPU",
        "runs": runs,
    }, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
