"""`make bench`: every benchmark with the command that writes its results file, re-run where the code changed.

``PLAN`` is the one list of what the docs' tables come from: per results file, the command line
that produced it (the budgets the tables state) and its measured cost. A results file is **current**
when it records the sources digest of the code now checked out (``provenance.py``: course_lib, configs
and the benchmark scripts; plus instructor/ and solutions/ for class grading) and its benchmark ran to
the end under this runner (which marks it ``complete``: several benchmarks save after every seed, so a
stopped run leaves a partial file); ``make bench`` re-runs
only the stale ones, so a long re-run can be spread over several sittings as long as the code does
not change, and every table still comes from one version of the code. Every run gets one torch
thread (the trainers' default) and torch's AVX2 kernels where the CPU has them (``tools/cpu_kernels.py``:
the kernels the tests' recorded numbers ran on).

    python benchmarks/run_all.py --status          # which results are current, what a re-run costs
    python benchmarks/run_all.py                   # re-run every stale benchmark (make bench)
    python benchmarks/run_all.py dpo grpo          # re-run these, current or not
    python benchmarks/run_all.py --diagnostics     # also the print-only diagnostics

Simplified: benchmarks run one after another (each is single-threaded; run two sittings side by
side by naming different benchmarks). ``async_speed`` and ``class_grading`` measure wall-clock time
and need an otherwise idle machine; the rest report CPU seconds and exact accuracies, which a busy
machine does not change.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
import provenance  # noqa: E402

from tools import cpu_kernels  # noqa: E402

RESULTS = HERE / "results"

# results file -> (the command that writes it, CPU minutes it takes (approximate, from its last runs), needs an idle
# machine)
PLAN: dict[str, tuple[list[str], int, bool]] = {
    "grpo": (["tinygpt_grpo.py"], 10, False),
    "seeds": (["tinygpt_seeds.py", "--steps", "50"], 12, True),
    "rollout": (["tinygpt_rollout.py"], 1, False),
    "dpo": (["tinygpt_dpo.py"], 21, False),
    "reward_hacking": (["tinygpt_reward_hacking.py"], 16, False),
    "rlhf": (["tinygpt_rlhf.py"], 15, False),
    "recipes": (["tinygpt_recipes.py"], 13, False),
    "ai_feedback": (["tinygpt_ai_feedback.py", "--budget", "full"], 15, False),
    "tools": (["tinygpt_tools.py", "--steps", "60"], 5, False),
    "async": (["tinygpt_async.py", "--staleness", "1", "2", "4", "8", "--without-correction", "--steps", "50",
               "--sft-seed", "0", "--eval-every", "10"], 5, False),
    "trl_vs_course_grpo": (["trl_vs_course_grpo.py"], 15, False),
    "t4_estimate": (["t4_estimate.py"], 2, False),
    "grpo_family": (["tinygpt_grpo_family.py"], 30, False),
    "kl_frontier": (["tinygpt_kl_frontier.py"], 10, False),
    "async_speed": (["tinygpt_async.py", "--staleness", "1", "--out", "benchmarks/results/async_speed.json"], 5, True),
    "class_grading": (["class_grading.py", "--students", "150", "--jobs", "2", "3"], 12, True),
}
# print-only measurements behind a sentence in docs/: no results file, run with --diagnostics or by name
DIAGNOSTICS: dict[str, list[str]] = {"threads": ["tinygpt_threads.py"], "update_flops": ["tinygpt_update_flops.py"]}


def status(name: str, current: dict[str, str]) -> str:
    """'current', 'stale (why)' or 'missing' for one results file."""
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        return "missing"
    data = json.loads(path.read_text())
    recorded = data.get("sources")
    if not recorded:
        return "stale (no sources digest recorded)"
    if recorded.endswith("+changes"):
        return "stale (ran with uncommitted changes)"
    if recorded != current["sources"]:
        return f"stale (ran sources {recorded}, now {current['sources']})"
    extra = provenance.EXTRA_SOURCES.get(name)
    if extra and data.get("extra_sources") != current.get(name):
        return f"stale ({', '.join(extra)} changed)"
    if data.get("complete") is not True:  # several benchmarks save after every seed: a stopped run leaves a part
        return "stale (incomplete)" if data.get("complete") is False else "stale (not finished through run_all)"
    return "current"


def current_sources() -> dict[str, str]:
    return {"sources": provenance.sources(),
            **{name: provenance.sources(extra) for name, extra in provenance.EXTRA_SOURCES.items()}}


def run(name: str, argv: list[str], env: dict[str, str]) -> float:
    """Run one benchmark script; return its CPU seconds (it and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    print(f"== {name}: {' '.join(argv)}", flush=True)
    proc = subprocess.run([sys.executable, str(HERE / argv[0]), *argv[1:]], cwd=ROOT, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    wall = time.time() - start
    print(f"== {name}: {wall:.0f} s wall, {cpu:.0f} s CPU, exit {proc.returncode}", flush=True)
    if proc.returncode:
        raise SystemExit(f"benchmark {name} failed (exit {proc.returncode}); the results written so far are kept")
    if name in PLAN:
        mark_complete(name, wall, cpu)
    return cpu


def mark_complete(name: str, wall: float, cpu: float) -> None:
    """Record in the results file that its benchmark ran to the end, and what the whole run cost."""
    path = RESULTS / f"{name}.json"
    data = json.loads(path.read_text())
    data.update(complete=True, bench_wall_seconds=round(wall), bench_cpu_seconds=round(cpu))
    path.write_text(json.dumps(data, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="benchmarks to run, current or not (any of: "
                                                 f"{', '.join([*PLAN, *DIAGNOSTICS])})")
    parser.add_argument("--status", action="store_true", help="print each results file's state and stop")
    parser.add_argument("--diagnostics", action="store_true", help="also run the print-only diagnostics")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in PLAN and n not in DIAGNOSTICS]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}: choose from {', '.join([*PLAN, *DIAGNOSTICS])}")
    current = current_sources()
    states = {name: status(name, current) for name in PLAN}
    if args.status:
        for name, (_, minutes, idle) in PLAN.items():
            print(f"{name:20} {states[name]:60} ~{minutes:4d} CPU min{'  (needs an idle machine)' if idle else ''}")
        stale = [n for n, s in states.items() if s != "current"]
        print(f"{len(PLAN) - len(stale)} of {len(PLAN)} current (sources {current['sources']}); a re-run of the "
              f"rest takes ~{sum(PLAN[n][1] for n in stale)} CPU min")
        return 0
    if current["sources"].endswith("+changes"):
        parser.error("course_lib, configs or a benchmark script has uncommitted changes: commit them first, so the "
                     "results record the code they ran")
    todo = args.names or [n for n, s in states.items() if s != "current"] + (list(DIAGNOSTICS) if args.diagnostics
                                                                             else [])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cpu_kernels.pin(env)
    for name in todo:
        run(name, PLAN[name][0] if name in PLAN else DIAGNOSTICS[name], env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
