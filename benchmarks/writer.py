"""Results on disk: ``save`` writes ``benchmarks/results/<name>.json``, the one file a benchmark leaves.

A results file holds the runs, the command line, and the commit and sources digest of the code that
ran (``provenance.py``), read by ``record_start()`` when the benchmark starts (the code that runs is the code
at that moment), with torch's version and CPU kernel set. ``tables.py`` renders the files; it never
writes one.
"""

from __future__ import annotations

import json
from pathlib import Path

import provenance
from tables import RESULTS

_AT_START: dict = {}


def record_start() -> None:
    """Read the commit and the sources digests now; a benchmark calls it first (``save`` reads them if
    no one did)."""
    if not _AT_START:
        _AT_START.update(commit=provenance.commit(), sources=provenance.sources(),
                         extra={name: provenance.sources(paths) for name, paths in provenance.EXTRA_SOURCES.items()})


def save(name: str, command: list[str], runs: list[dict], results: Path = RESULTS, **meta) -> Path:
    """Write ``results/<name>.json``: the runs, the command line, the code's provenance at ``record_start()``,
    torch's version and CPU kernels (``provenance.runtime``) and ``meta``."""
    record_start()
    path = results / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = {"extra_sources": _AT_START["extra"][name]} if name in _AT_START["extra"] else {}
    meta = {"commit": _AT_START["commit"], "sources": _AT_START["sources"], **extra, **provenance.runtime(), **meta}
    path.write_text(json.dumps({"benchmark": name, "command": " ".join(command), **meta,
                                "seeds": sorted({r["seed"] for r in runs}), "runs": runs}, indent=1) + "\n")
    return path
