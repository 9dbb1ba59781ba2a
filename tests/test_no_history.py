"""Code says what it does, not its history: no comment or string in the project cites an issue, and no
comment or docstring keeps a past state or a past measurement.

The site and git keep the history; a docstring states what the code does and the goals it is
held to. Read with ``tokenize``: every comment and every string literal (docstrings included) of
every ``.py`` file under the folders below, the notebooks' py:percent sources among them (their
markdown cells are comments). This file is left out: its own examples cite issues on purpose.

History in a comment or a docstring (``HISTORY``): an aside that says what the code *was*
("(was: the lab's own copies)"), a number from "an earlier run", or a measurement's before and
after ("48.6% → 41.8%"). Strings that are not docstrings are left alone: a table's f-string renders
"start → end" percentages on purpose.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from conftest import ROOT

FOLDERS = ("course_lib", "instructor", "benchmarks", "tools", "tests", "notebooks")
CITATION = re.compile(r"\b[Ii]ssues?\s+#?\d+")
TEXT_TOKENS = {tokenize.COMMENT, tokenize.STRING}
HISTORY = re.compile(r"[(;—]\s*was:|\bin an? (?:earlier|previous|older|former) (?:run|version)\b"
                     r"|\d+(?:\.\d+)?\s*%\s*(?:→|->)\s*[-+]?\d+(?:\.\d+)?\s*%", re.IGNORECASE)


def citations(source: str) -> list[tuple[int, str]]:
    """(line, text) of each comment or string in ``source`` that cites an issue by number."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in TEXT_TOKENS and CITATION.search(token.string):
            found.append((token.start[0], CITATION.search(token.string).group(0)))
    return found


def test_the_reader_finds_a_citation_in_a_docstring_a_comment_and_across_a_line_break():
    source = ('"""A module (issue 7)."""\nx = 1  # see Issue #12\n'
              'y = """fixed in issue\n3"""\nz = "tissue 4"\n')
    assert citations(source) == [(1, "issue 7"), (2, "Issue #12"), (3, "issue\n3")]
    assert citations('"""An issue the code still has: none."""\nn = 3  # three issues\n') == []


def test_no_comment_or_docstring_cites_an_issue_number():
    files = [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))
             if p.name != Path(__file__).name]
    assert len(files) > 100
    cited = [f"{path.relative_to(ROOT)}:{line}: {text!r}" for path in files
             for line, text in citations(path.read_text(encoding="utf-8"))]
    assert not cited, "say what the code does (git keeps the history):\n" + "\n".join(cited)


def history(source: str) -> list[tuple[int, str]]:
    """(line, text) of each comment or docstring in ``source`` that keeps a past state or measurement."""
    texts = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)
             if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value,
                                                                                                    str):
                texts.append((first.lineno, first.value.value))
    return sorted((line, m.group(0)) for line, text in texts for m in HISTORY.finditer(text))


def test_the_reader_finds_history_in_comments_and_docstrings_only():
    source = ('"""A model (75.4% in an earlier run)."""\n'
              'RECIPE = 2  # the library\'s loop (was: the lab\'s own copies)\n'
              'def f():\n    """Lowered accuracy (48.6% → 41.8%)."""\n'
              'line = f"{a:.1%} → {b:.1%}"  # a table renders before → after\n'
              'x = "it was: fine; 50% -> 40%"\n'
              '# whatever part of the message it was: the output says\n')
    assert history(source) == [(1, "in an earlier run"), (2, "(was:"), (4, "48.6% → 41.8%")]


def test_no_comment_or_docstring_keeps_history():
    files = [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))
             if p.name != Path(__file__).name]
    found = [f"{path.relative_to(ROOT)}:{line}: {text!r}" for path in files
             for line, text in history(path.read_text(encoding="utf-8"))]
    assert not found, "say what the code does now (git and the results keep the history):\n" + "\n".join(found)

