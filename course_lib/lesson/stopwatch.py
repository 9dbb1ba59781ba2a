"""How long a notebook's run took, printed from a measurement (never a typed "about N minutes").

A notebook starts a ``Stopwatch`` in its first cell and prints ``stopwatch.report()`` in its
last: the wall-clock seconds (what a student waits; it grows when other programs share the CPU)
and the CPU seconds of this process and of the child processes it has waited for (a notebook's
background seeds, ``course_lib.run.seeds``; a rollout worker) — what the run costs; with one torch
thread each it barely changes with the machine's load — for the budget that ran.

Simplification, said out loud: a child process counts once it has ended and been waited for (the
operating system's rule); where the OS keeps no such count (Windows), this process only.
"""

from __future__ import annotations

import time

try:
    import resource
except ImportError:  # Windows
    resource = None


def _cpu() -> float:
    """CPU seconds of this process and of its children that have ended."""
    if resource is None:
        return time.process_time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


class Stopwatch:
    """Wall-clock and CPU seconds (this process and its ended children) since creation (or since ``restart``)."""

    def __init__(self, budget: str):
        if not isinstance(budget, str) or not budget:
            raise ValueError(f"budget must be a non-empty name such as 'COURSE_FAST=1' or 'full'; got {budget!r}")
        self.budget = budget
        self.restart()

    def restart(self) -> None:
        self._wall, self._cpu = time.perf_counter(), _cpu()

    def seconds(self) -> tuple[float, float]:
        """``(wall, cpu)`` seconds so far."""
        return time.perf_counter() - self._wall, _cpu() - self._cpu

    def report(self) -> str:
        wall, cpu = self.seconds()
        return (f"this run ({self.budget} budget) took {wall:.0f} s of wall-clock time and {cpu:.0f} s of CPU time "
                f"(wall-clock grows when other programs share the CPU)")
