"""The accuracy–KL frontier of GRPO on the tiny GPT: β swept for both KL placements, medians over seeds.

Every run starts from its seed's SFT checkpoint, draws the same prompts (the data generator is
seeded alike) and takes the same number of steps (``--steps``, 80 by default: the budget of the
sweep in the notebook "The KL term", which shows seed 0). Rows:

- ``β = 0``: no penalty (one run: the placement does not matter without a penalty);
- ``loss``, β ∈ {0.01, 0.04, 0.2}: β·k3 per token in the loss, as GRPO and TRL do (its expected
  gradient on on-policy samples is that of the *forward* KL(π_ref‖π));
- ``reward``, β ∈ {0.01, 0.04, 0.2}: β·Σ_t k1 folded into each completion's reward before the
  baseline (``kl_shaped_rewards``), as InstructGPT-style PPO and RLOO do.

Each run reports greedy held-out accuracy and the sequence-level KL(π_θ‖π_ref) on the held-out
prompts (``course_lib.tinygpt.evaluation.reference_kl``: 4 samples per prompt, the same measurement for every
run). Prints the frontier table and writes ``benchmarks/results/kl_frontier.json`` (every run and
the command line). Finished runs are cached in ``--cache`` so an interrupted benchmark resumes.

    python benchmarks/tinygpt_kl_frontier.py [--seeds 0 1 2] [--steps 80] [--threads 1] [--jobs 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from course_lib.tinygpt.evaluation import evaluate, reference_kl
from course_lib.tinygpt.model import build_model
from course_lib.tinygpt.runtime import MetricsLog, set_threads
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import get_config
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.sft import train_sft
from course_lib.trainers.trainer import TrainContext

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import record  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BETAS = (0.01, 0.04, 0.2)
# placement -> the estimator each placement is used with in practice
PLACEMENTS = {"loss": "k3", "reward": "k1"}


def sweep_settings() -> list[tuple[str, float, str]]:
    """(placement, β, estimator) for every run; β = 0 once."""
    return [("none", 0.0, "k3")] + [(p, b, e) for p, e in PLACEMENTS.items() for b in BETAS]


def sft_start(cfg, task, seed: int, cache: Path) -> tuple[dict, dict]:
    path = cache / f"sft_s{seed}.pt"
    if path.exists():
        saved = torch.load(path, weights_only=True)
        return saved["model"], saved["metrics"]
    torch.manual_seed(seed)
    model = build_model(cfg.model, task.tokenizer)
    train_sft(model, task, cfg.sft, TrainContext(show_progress=False, threads=None), seed=seed)
    metrics = evaluate(model, task)
    metrics.update(reference_kl(model, model, task))
    cache.mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict(), "metrics": metrics}, path)
    return model.state_dict(), metrics


def one_run(cfg, task, sft_weights: dict, seed: int, placement: str, beta: float, estimator: str, steps: int) -> dict:
    torch.manual_seed(seed)
    model = build_model(cfg.model, task.tokenizer)
    model.load_state_dict(sft_weights)
    reference = build_model(cfg.model, task.tokenizer)
    reference.load_state_dict(sft_weights)
    reference.eval().requires_grad_(False)
    gcfg = dataclasses.replace(cfg.grpo, beta=beta, kl_estimator=estimator,
                               kl_placement="loss" if placement == "none" else placement, steps=steps)
    log = MetricsLog()
    torch.manual_seed(seed)
    out = train_grpo(model, task, gcfg, TrainContext(log=log, show_progress=False, threads=None),
                     generator=torch.Generator().manual_seed(seed + 1), reference_state=sft_weights)
    final = evaluate(model, task, max_completion_length=gcfg.max_completion_length)
    kl = reference_kl(model, reference, task, max_completion_length=gcfg.max_completion_length)
    return {"accuracy": final["accuracy"], "accuracy_carry": final["accuracy_carry"], **kl,
            "rl_seconds": out["rl_seconds"],
            "train_kl_curve": [[r["step"], r["kl"]] for r in log.rows if r.get("kl") is not None],
            "accuracy_curve": [[r["step"], r["accuracy"]] for r in log.rows if "accuracy" in r]}


def run_seed(config: str, seed: int, steps: int, threads: int, cache: str) -> list[dict]:
    set_threads(threads)
    cache = Path(cache)
    cfg = get_config(config)
    task = AdditionTask(cfg.task)
    weights, base = sft_start(cfg, task, seed, cache)
    rows = []
    for placement, beta, estimator in sweep_settings():
        done = cache / f"{placement}_{beta}_{estimator}_{steps}steps_s{seed}.json"
        if done.exists():
            row = json.loads(done.read_text())
        else:
            t0 = time.perf_counter()
            row = {"seed": seed, "placement": placement, "beta": beta, "estimator": estimator, "steps": steps,
                   "baseline_accuracy": base["accuracy"], "baseline_kl": base["kl"],
                   **one_run(cfg, task, weights, seed, placement, beta, estimator, steps)}
            row["wall_seconds"] = time.perf_counter() - t0
            done.write_text(json.dumps(row))
        print(f"seed {seed} {placement:6} β={beta:<5} ({estimator}): accuracy {row['accuracy']:.3f}  "
              f"KL to π_ref {row['kl']:.3f} ± {row['kl_se']:.3f}  ({row['rl_seconds']:.0f} s RL)", flush=True)
        rows.append(row)
    return rows


def frontier_table(runs: list[dict]) -> list[dict]:
    """Medians over seeds for each (placement, β)."""
    table = []
    for placement, beta, estimator in sweep_settings():
        rows = [r for r in runs if r["placement"] == placement and r["beta"] == beta]
        if rows:
            table.append({"placement": placement, "beta": beta, "estimator": estimator, "seeds": len(rows),
                          "accuracy": statistics.median(r["accuracy"] for r in rows),
                          "kl": statistics.median(r["kl"] for r in rows),
                          "accuracy_per_seed": [r["accuracy"] for r in rows],
                          "kl_per_seed": [r["kl"] for r in rows]})
    return table


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1, help="seeds run in parallel processes")
    parser.add_argument("--config", default="cpu", help="named config (test: a seconds-long smoke run)")
    parser.add_argument("--cache", default="runs/bench/kl", help="per-run results and SFT checkpoints")
    parser.add_argument("--out", default=str(RESULTS / "kl_frontier.json"))
    args = parser.parse_args(argv)
    started = record()  # the code this process runs; cached runs are reused only for the same sources
    cache = str(Path(args.cache) / started["sources"])
    jobs = [(args.config, seed, args.steps, args.threads, cache) for seed in args.seeds]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            runs = [row for rows in pool.map(run_seed, *zip(*jobs)) for row in rows]
    else:
        runs = [row for job in jobs for row in run_seed(*job)]
    table = frontier_table(runs)
    baseline = statistics.median(r["baseline_accuracy"] for r in runs if r["placement"] == "none")
    print(f"\nmedian over {len(args.seeds)} seeds, {args.steps} GRPO steps; SFT baseline accuracy {baseline:.3f}")
    print(f"{'placement':10} {'β':>5} {'estimator':>9} {'held-out accuracy':>18} {'KL(π‖π_ref)':>12}")
    for t in table:
        print(f"{t['placement']:10} {t['beta']:5} {t['estimator']:>9} {t['accuracy']:18.3f} {t['kl']:12.3f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "benchmark": "kl_frontier",
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        **started,
        "config": args.config,
        "seeds": args.seeds,
        "steps": args.steps,
        "machine": f"{platform.machine()}, {args.threads} thread(s) per seed, {args.jobs} job(s), shared 2-core CPU",
        "table": table,
        "runs": runs,
    }, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
