"""Where a benchmark's numbers came from: the commit, the code that computed them, torch and its CPU kernels.

Every results file records ``provenance.record()``. The commit alone says too little (a README edit
makes a new commit; the numbers do not change) and too much is needed to compare two runs: the
**sources digest** is a hash of exactly the files that compute the numbers — ``course_lib/``,
``configs/`` and the benchmark scripts (not ``tables.py``, which only renders, nor this file) — so two
results files with the same digest ran the same code, at whichever commits. A file that differed
from its commit when the run started is marked ``+changes`` (its digest then means nothing).
``benchmarks/run_all.py`` uses the digest to re-run only what is stale.

Simplified on purpose: the digest hashes git's blob ids (``git ls-files -s``), so it needs a git
checkout; outside one it is ``"unknown"`` and every results file counts as stale.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The files that decide a benchmark's numbers. Rendering (tables.py and its goals.py), writing (writer.py),
# this file and the runner are left out, and so is the grading benchmark: it measures the grader, and has its
# own second digest (EXTRA_SOURCES).
NOT_SOURCES = {"benchmarks/tables.py", "benchmarks/goals.py", "benchmarks/writer.py", "benchmarks/provenance.py",
               "benchmarks/run_all.py", "benchmarks/class_grading.py"}
SOURCES = ("course_lib", "configs", "benchmarks")
EXTRA_SOURCES = {"class_grading": ("instructor", "solutions", "nbgrader_config.py", "benchmarks/class_grading.py")}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True, cwd=ROOT).stdout


def sources(paths: tuple[str, ...] = SOURCES) -> str:
    """12 hex digits of sha256 over (mode, blob, path) of every tracked file under ``paths``; ``+changes``
    when one of them differs from the commit (uncommitted edits), ``unknown`` outside git."""
    left_out = NOT_SOURCES if paths == SOURCES else set()

    def _counts(path: str) -> bool:
        return path not in left_out and not path.startswith("benchmarks/results/")

    try:
        listing = [line for line in _git("ls-files", "-s", "--", *paths).splitlines()
                   if _counts(line.split("\t", 1)[1])]
        dirty = [line for line in _git("status", "--porcelain", "--untracked-files=no", "--", *paths).splitlines()
                 if _counts(line[3:])]
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    digest = hashlib.sha256("\n".join(listing).encode()).hexdigest()[:12]
    return digest + ("+changes" if dirty else "")


def commit() -> str:
    """The short commit of the checkout ('+changes' when a source file differs from it), 'unknown' outside git."""
    try:
        head = _git("rev-parse", "--short", "HEAD").strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if sources().endswith("+changes") else "")


def runtime() -> dict:
    """torch's version and CPU kernel set (the kernel set changes the rounding, so a run's numbers depend on it)."""
    import torch

    return {"torch": torch.__version__, "cpu_kernels": torch.backends.cpu.get_cpu_capability()}


def record(name: str = "") -> dict:
    """What a results file records about its run: commit, sources digest, torch version and CPU kernels.

    Call it when the benchmark starts (the code that runs is the code at that moment)."""
    extra = {"extra_sources": sources(EXTRA_SOURCES[name])} if name in EXTRA_SOURCES else {}
    return {"commit": commit(), "sources": sources(), **extra, **runtime()}
