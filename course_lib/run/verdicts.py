"""Verdicts over seeds: the one place a sentence about a training effect is made.

A statement about what training does (A beats B, a stage added accuracy, a correction recovered a
dip) is a statement about a distribution of runs. Every such sentence in the notebooks and the
benchmark tables (docs/results.md) comes from ``paired``: for each seed, the value under A and under B (the
same seed means the same SFT start, prompts and random streams, so the seed-by-seed *difference* is
the sharp reading), and from those

- the per-seed differences, in seed order;
- their median and range (lowest to highest);
- "A ahead on k of n seeds" (k counts the seeds where A − B > 0; ties are counted and said);
- "beyond the seed spread" (and which side is ahead on every seed) only when the rule below holds,
  else "within the seed spread".

The rule, stated once: an effect is **beyond the seed spread** when there are at least
``MIN_SEEDS`` (3) paired seeds, every difference is non-zero with the same sign, and the median's
magnitude exceeds ``margin`` (a floor the caller states in the value's own units, e.g. the held-out
evaluation's noise, ``evaluation_noise``; default 0). Anything else is "within the seed spread". With fewer than 3
seeds the sentence says so instead of judging.

Simplifications, said out loud: the rule is a sign test, not a confidence interval. With no effect at
all, n seeds share a sign with probability 2·0.5ⁿ (1 in 4 for 3 seeds, 1 in 16 for 5): "beyond the
seed spread" on 3 seeds is a consistent direction on few draws, not a significant result, and the
sentence always carries n so a reader can weigh it.

A notebook that trains one seed prints the committed multi-seed benchmark's verdicts beside its own numbers;
``committed_benchmarks`` finds that benchmark's folder in the repository this package was imported from (none
where the package is installed without it, e.g. on Colab).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MIN_SEEDS = 3  # fewer paired seeds than this: no judgement, only the numbers


@dataclass(frozen=True)
class Verdict:
    """Paired per-seed differences A − B and what they support (see the module docstring's rule)."""

    name_a: str
    name_b: str
    seeds: tuple
    differences: tuple[float, ...]
    margin: float = 0.0
    scale: float = 100.0
    unit: str = " pts"
    digits: int = 1

    @property
    def n(self) -> int:
        return len(self.differences)

    @property
    def k(self) -> int:
        """Seeds on which A − B > 0."""
        return sum(d > 0 for d in self.differences)

    @property
    def ties(self) -> int:
        return sum(d == 0 for d in self.differences)

    @property
    def median(self) -> float:
        return statistics.median(self.differences)

    @property
    def low(self) -> float:
        return min(self.differences)

    @property
    def high(self) -> float:
        return max(self.differences)

    @property
    def beyond(self) -> bool:
        """True when the effect is beyond the seed spread (module docstring's rule)."""
        same_sign = all(d > 0 for d in self.differences) or all(d < 0 for d in self.differences)
        return self.n >= MIN_SEEDS and same_sign and abs(self.median) > self.margin

    def fmt(self, x: float) -> str:
        return f"{self.scale * x:+.{self.digits}f}"

    def spread_words(self) -> str:
        if self.n < MIN_SEEDS:
            return f"too few seeds to judge ({self.n}; a verdict needs {MIN_SEEDS})"
        floor = f", by more than {self.fmt(self.margin).lstrip('+')}{self.unit}" if self.margin > 0 else ""
        if not self.beyond:
            return "within the seed spread"
        winner = self.name_a if self.median > 0 else self.name_b
        return f"beyond the seed spread{floor}: {winner} ahead on every seed"

    def sentence(self) -> str:
        """E.g. ``GRPO − RFT: +2.4 / -1.6 / -2.4 pts (seeds 0 / 1 / 2); median -1.6, range -2.4 to +2.4;
        GRPO ahead on 1 of 3 seeds; within the seed spread``."""
        per_seed = " / ".join(self.fmt(d) for d in self.differences)
        ties = f" ({self.ties} tied)" if self.ties else ""
        return (f"{self.name_a} − {self.name_b}: {per_seed}{self.unit} (seeds {' / '.join(map(str, self.seeds))}); "
                f"median {self.fmt(self.median)}, range {self.fmt(self.low)} to {self.fmt(self.high)}; "
                f"{self.name_a} ahead on {self.k} of {self.n} seeds{ties}; {self.spread_words()}")

    __str__ = sentence


def evaluation_noise(n_prompts: int) -> float:
    """Two standard errors of a difference of two held-out accuracies on ``n_prompts`` prompts, at 50%
    (where it is largest): 2·√2·√(0.25 / n). A floor for ``margin``: a gap below it is one the held-out
    set cannot see, whatever the seeds say."""
    if isinstance(n_prompts, bool) or not isinstance(n_prompts, int) or n_prompts < 1:
        raise ValueError(f"n_prompts must be an integer >= 1 (held-out prompts); got {n_prompts!r}")
    return 2 * math.sqrt(2) * math.sqrt(0.25 / n_prompts)


def _finite_list(values, name: str) -> list[float]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"{name} must be a sequence of numbers, one per seed; got {type(values).__name__}")
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{name}[{i}] must be a finite number; got {v!r}")
        out.append(float(v))
    return out


def paired(a, b=None, *, name_a: str, name_b: str, seeds=None, margin: float = 0.0, scale: float = 100.0,
           unit: str = " pts", digits: int = 1) -> Verdict:
    """The verdict on A − B from per-seed values ``a`` and ``b`` (same order, one per seed), or from the
    per-seed differences ``a`` alone when ``b`` is None.

    ``seeds`` names them (default 0, 1, …); ``margin`` is the floor |median| must exceed (value units,
    ≥ 0); ``scale``, ``unit`` and ``digits`` only format the sentence (default: fractions as points).
    """
    diffs = _finite_list(a, "a")
    if b is not None:
        other = _finite_list(b, "b")
        if len(other) != len(diffs):
            raise ValueError(f"a and b must hold one value per seed each; got {len(diffs)} and {len(other)}")
        diffs = [x - y for x, y in zip(diffs, other)]
    if not diffs:
        raise ValueError("a must hold at least one seed's value; got none")
    seeds = tuple(range(len(diffs))) if seeds is None else tuple(seeds)
    if len(seeds) != len(diffs):
        raise ValueError(f"seeds must name one seed per value; got {len(seeds)} seeds for {len(diffs)} values")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not math.isfinite(margin) or margin < 0:
        raise ValueError(f"margin must be a finite number >= 0 (the floor |median| must exceed); got {margin!r}")
    for name, text in (("name_a", name_a), ("name_b", name_b), ("unit", unit)):
        if not isinstance(text, str):
            raise ValueError(f"{name} must be a string; got {text!r}")
    return Verdict(name_a, name_b, seeds, tuple(diffs), float(margin), float(scale), unit, int(digits))


def committed_benchmarks(name: str) -> Path | None:
    """The folder ``benchmarks/`` of the repository this package was imported from when it holds the committed
    results file ``results/<name>.json`` (whatever the working directory, e.g. a notebook run from a scratch
    folder); None where the package is installed without its repository (Colab, a wheel)."""
    folder = Path(__file__).resolve().parents[2] / "benchmarks"
    return folder if (folder / "results" / f"{name}.json").is_file() and (folder / "tables.py").is_file() else None
