"""The glossary (course_lib.lesson.glossary) read against the notebooks in course order: no notebook uses a term
before the notebook that defines it, and the defining notebook shows the term in bold."""

from __future__ import annotations

import re

import jupytext
import pytest
from conftest import ROOT

from course_lib.lesson.glossary import GLOSSARY

NOTEBOOKS = ROOT / "notebooks"
ORDER = sorted(p.stem for p in NOTEBOOKS.glob("*.py"))
MAP_ROW = re.compile(r"^\| \[[^\]\n]*\]\([^)\s]*\.ipynb\)")
NOTEBOOK_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]*\.ipynb)\)")
CODE_SPAN = re.compile(r"`[^`\n]*`")


def prose(stem: str) -> str:
    """A notebook's markdown as a student reads it for terms: no code, maps' rows or notebook-link texts."""
    cells = jupytext.read(NOTEBOOKS / f"{stem}.py").cells
    lines = [line for cell in cells if cell.cell_type == "markdown"
             for line in cell.source.splitlines() if not MAP_ROW.match(line)]
    text = " ".join(lines)
    return CODE_SPAN.sub(" ", NOTEBOOK_LINK.sub(r"(\1)", text))


@pytest.fixture(scope="module")
def texts():
    return {stem: prose(stem) for stem in ORDER}


def _uses(term, text):
    spec = GLOSSARY[term]
    return re.search(spec.pattern, text, 0 if spec.case_sensitive else re.I)


def test_the_glossary_has_the_terms_the_course_needs():
    needed = {"KL drift", "critic", "REINFORCE", "score function", "π_old", "clip", "RLVR", "on-policy", "offline",
              "rollout", "trajectory", "policy entropy", "advantage", "reference model", "reward model",
              "zero-variance group", "importance ratio"}
    assert needed <= set(GLOSSARY)
    for term, spec in GLOSSARY.items():
        assert spec.stem in ORDER, f"{term}: no notebook {spec.stem}"
        assert spec.definition and "\n" not in spec.definition, f"{term}: one line of definition"


@pytest.mark.parametrize("term", sorted(GLOSSARY))
def test_no_notebook_uses_a_term_before_its_definition(term, texts):
    home = ORDER.index(GLOSSARY[term].stem)
    early = [stem for stem in ORDER[:home] if _uses(term, texts[stem])]
    assert not early, (f"{term!r} is used in {early} before {GLOSSARY[term].stem} defines it: define it where "
                       f"first used (and move its home in course_lib/lesson/glossary.py) or reword")


@pytest.mark.parametrize("term", sorted(GLOSSARY))
def test_the_defining_notebook_shows_the_term_in_bold(term, texts):
    bold = re.findall(r"\*\*(.+?)\*\*", texts[GLOSSARY[term].stem])
    assert any(_uses(term, span) for span in bold), (
        f"{GLOSSARY[term].stem} must define {term!r} in bold (**…**) where it first explains it")


def test_a_forward_reference_is_caught():
    text = {"00_a": "the critic predicts", "01_b": "a **critic** is a value model"}
    assert _uses("critic", text["00_a"]) and not _uses("critic", "criticism aside")
    assert not _uses("RLVR", "rlvr")  # acronyms are case-sensitive
