"""Code says what it does, not its history: no comment or string in the project cites an issue.

The site and git keep the history; a docstring states what the code does and the goals it is
held to. Read with ``tokenize``: every comment and every string literal (docstrings included) of
every ``.py`` file under the folders below, the notebooks' py:percent sources among them (their
markdown cells are comments). This file is left out: its own examples cite issues on purpose.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from conftest import ROOT

FOLDERS = ("course_lib", "instructor", "benchmarks", "tools", "tests", "notebooks")
CITATION = re.compile(r"\b[Ii]ssues?\s+#?\d+")
TEXT_TOKENS = {tokenize.COMMENT, tokenize.STRING}


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
