"""How long a notebook's run took, printed from a measurement (never a typed "about N minutes").

A notebook starts a ``Stopwatch`` in its first cell and prints ``stopwatch.report()`` in its
last: the wall-clock seconds (what a student waits; it grows when other programs share the CPU)
and the CPU seconds of this process (what the run costs; with one torch thread it barely changes
with the machine's load), for the budget that ran.

Simplification, said out loud: CPU time counts this process only (torch runs in it with one
thread by default); a notebook that starts other processes would under-count.
"""

from __future__ import annotations

import time


class Stopwatch:
    """Wall-clock and process CPU seconds since creation (or since ``restart``)."""

    def __init__(self, budget: str):
        if not isinstance(budget, str) or not budget:
            raise ValueError(f"budget must be a non-empty name such as 'COURSE_FAST=1' or 'full'; got {budget!r}")
        self.budget = budget
        self.restart()

    def restart(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def seconds(self) -> tuple[float, float]:
        """``(wall, cpu)`` seconds so far."""
        return time.perf_counter() - self._wall, time.process_time() - self._cpu

    def report(self) -> str:
        wall, cpu = self.seconds()
        return (f"this run ({self.budget} budget) took {wall:.0f} s of wall-clock time and {cpu:.0f} s of CPU time "
                f"(wall-clock grows when other programs share the CPU)")
