"""One home for pinning torch's CPU kernel set: AVX2 on an x86 machine that also has AVX-512.

The course's recorded numbers (tests/golden, the lessons asserted on FAST runs, the benchmarks'
results files) were produced with AVX2 kernels; AVX-512 kernels round differently, and over hundreds
of steps that is another run (the ``cpu`` config's seed-0 SFT start: 56.6% held-out with AVX2, 51.2%
with AVX-512). ``pin()`` sets ``ATEN_CPU_CAPABILITY=avx2`` in an environment before torch is
imported there (the tests' conftest, ``make bench``, ``make site``), so every process started from it
runs the same kernels. A value set by hand wins; a machine without AVX2 (or not Linux) is left alone.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path


def pin(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """Set ``ATEN_CPU_CAPABILITY`` to ``avx2`` in ``environ`` where that applies; return the value in force."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:  # not Linux: leave torch's choice alone
        return environ.get("ATEN_CPU_CAPABILITY")
    if " avx2" in flags:
        environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
    return environ.get("ATEN_CPU_CAPABILITY")
