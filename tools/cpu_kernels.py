"""One home for choosing torch's CPU kernel set (``ATEN_CPU_CAPABILITY``).

The benchmarks' results files were produced with AVX2 kernels; AVX-512 kernels round differently, and
over hundreds of steps that is another run (the ``cpu`` config's seed-0 SFT start: 56.6% held-out with
AVX2, 51.2% with AVX-512). ``pin()`` sets ``ATEN_CPU_CAPABILITY=avx2`` in an environment before torch
is imported there (``make bench``, ``make site``), so every process started from it runs the same
kernels. A value set by hand wins; a machine without AVX2 (or not Linux) is left alone.

The tests run with the kernels a student gets (no pin); CI runs the cheapest lesson tests a second
time under ``other()``: AVX2 where the CPU also has AVX-512 (torch then picks AVX-512), else torch's
``default`` (non-vectorised) kernels. ``python tools/cpu_kernels.py --other`` prints it.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path


def _flags() -> str | None:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:  # not Linux
        return None


def other() -> str:
    """The kernel set for a second run of the lessons: ``avx2`` where the CPU has AVX-512 and AVX2, else
    ``default``."""
    flags = _flags() or ""
    return "avx2" if " avx512f" in flags and " avx2" in flags else "default"


def pin(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """Set ``ATEN_CPU_CAPABILITY`` to ``avx2`` in ``environ`` where that applies; return the value in force."""
    flags = _flags()
    if flags is None:  # not Linux: leave torch's choice alone
        return environ.get("ATEN_CPU_CAPABILITY")
    if " avx2" in flags:
        environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
    return environ.get("ATEN_CPU_CAPABILITY")


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--other"]:
        sys.exit("usage: python tools/cpu_kernels.py --other   (prints the kernel set for CI's second run of the "
                 "lessons)")
    print(other())
