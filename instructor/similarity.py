"""Similarity report: submissions against the solutions and against each other, for review only.

The grade never depends on this report. It answers "whose code should I read side by side?":

- every answer cell of a submission (code only; cells left as released are skipped) is reduced to
  its *normalised tokens* (``normalise``): comments, blank lines and layout are dropped, every name
  that is not a keyword or a builtin becomes ``N`` (renaming variables or functions changes
  nothing), numbers and strings are kept (copied constants stay visible);
- two versions of a notebook are compared by the Jaccard similarity of their sets of
  ``SHINGLE``-token windows (reordering functions changes little, a different algorithm a lot);
- a pair at or above ``threshold`` (default 0.8) is flagged: against ``solutions/`` (a copy of the
  public or leaked solutions) or between two students. Answers shorter than ``MIN_TOKENS`` tokens
  are not compared (two one-line answers can only be alike).

Simplification said out loud: a token-window Jaccard, not a winnowed fingerprint (MOSS) or an
AST diff: for a class of 150 and notebooks of a few hundred tokens, all pairs take seconds.

Usage: python -m instructor.similarity [--assignment module14] [--threshold 0.8]
Writes similarity-report.md and similarity-report.json next to submitted/.
"""

from __future__ import annotations

import argparse
import builtins
import io
import itertools
import json
import keyword
import tokenize
from dataclasses import dataclass
from pathlib import Path

import nbformat

from instructor.scan import _to_python
from instructor.submission import rebuild

SHINGLE = 5
MIN_TOKENS = 40
KEPT_NAMES = set(keyword.kwlist) | set(dir(builtins))
SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
           tokenize.ENCODING, tokenize.ENDMARKER}


def normalise(source: str) -> list[str]:
    """The tokens of ``source`` with comments and layout gone and user names replaced by ``N``
    (IPython magics are turned into Python first; code that does not tokenise keeps its words)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(_to_python(source)).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source.split()
    out = []
    for tok in tokens:
        if tok.type in SKIPPED:
            continue
        if tok.type == tokenize.NAME and tok.string not in KEPT_NAMES:
            out.append("N")
        else:
            out.append(tok.string)
    return out


def shingles(tokens: list[str]) -> set[tuple[str, ...]]:
    if len(tokens) < SHINGLE:
        return {tuple(tokens)} if tokens else set()
    return {tuple(tokens[i:i + SHINGLE]) for i in range(len(tokens) - SHINGLE + 1)}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _answer_code(nb, release) -> list[str]:
    """Normalised tokens of the code answer cells that differ from the release's version."""
    released = {c.metadata["nbgrader"]["grade_id"]: normalise(c.source) for c in release.cells
                if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}
    tokens: list[str] = []
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in released:
            mine = normalise(cell.source)
            if mine != released[grade_id]:
                tokens += mine
    return tokens


@dataclass
class Pair:
    notebook: str
    first: str  # a student id, or "solutions"
    second: str
    similarity: float

    def line(self) -> str:
        return f"{self.notebook}: {self.first} ~ {self.second}: {self.similarity:.0%}"


def compare_submissions(root: Path, assignment: str, threshold: float = 0.8) -> list[Pair]:
    """Every flagged pair (similarity >= ``threshold``) of ``submitted/*/<assignment>/``, most similar first."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must lie in (0, 1], got {threshold!r}")
    release_dir, solution_dir = root / "exercises" / assignment, root / "solutions" / assignment
    releases = {p.stem: nbformat.read(str(p), as_version=4) for p in sorted(release_dir.glob("*.ipynb"))}
    if not releases:
        raise ValueError(f"no released notebooks in {release_dir} (run nbgrader generate_assignment {assignment})")
    flagged = []
    for name, release in releases.items():
        versions: dict[str, set] = {}
        solution = solution_dir / f"{name}.ipynb"
        if solution.exists():
            versions["solutions"] = shingles(_answer_code(nbformat.read(str(solution), as_version=4), release))
        for path in sorted((root / "submitted").glob(f"*/{assignment}/{name}.ipynb")):
            nb, _ = rebuild(path.read_bytes(), release)
            tokens = _answer_code(nb, release) if nb is not None else []
            if len(tokens) >= MIN_TOKENS:
                versions[path.parent.parent.name] = shingles(tokens)
        for first, second in itertools.combinations(versions, 2):
            score = jaccard(versions[first], versions[second])
            if score >= threshold:
                flagged.append(Pair(name, first, second, score))
    return sorted(flagged, key=lambda p: (-p.similarity, p.notebook, p.first, p.second))


def write_report(root: Path, assignment: str, pairs: list[Pair], threshold: float) -> str:
    lines = [f"# Similarity report: {assignment}", "",
             f"For review only (grades do not depend on it). Pairs at or above {threshold:.0%} similarity of "
             "normalised answer code (comments, layout and names ignored; see instructor/similarity.py).", ""]
    lines += [f"- {p.line()}" for p in pairs] or ["No pair reached the threshold."]
    text = "\n".join(lines) + "\n"
    (root / "similarity-report.md").write_text(text)
    (root / "similarity-report.json").write_text(json.dumps(
        {"assignment": assignment, "threshold": threshold, "pairs": [p.__dict__ for p in pairs]}, indent=1))
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", default="module14")
    parser.add_argument("--threshold", type=float, default=0.8)
    args = parser.parse_args(argv)
    root = Path.cwd()
    print(write_report(root, args.assignment, compare_submissions(root, args.assignment, args.threshold),
                       args.threshold), end="")


if __name__ == "__main__":
    main()
