"""The course's primary sources: the lecture's list is all there, dated from arXiv, and one home.

The nineteen links below are the lecture's §20 list (data, copied once here to check against).
Notebooks cite a source by writing the Markdown ``cite(key)`` produces (the link text is checked
against it), and each method is cited where a student meets it first (``METHODS``, course order).
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

from course_lib.lesson.sources import SOURCES, cite, date, timeline

ROOT = Path(__file__).resolve().parents[1]
LECTURE_LIST = [
    "arxiv.org/abs/1706.03741", "arxiv.org/abs/2203.02155", "arxiv.org/abs/2305.18290", "arxiv.org/abs/2310.12036",
    "arxiv.org/abs/2402.01306", "arxiv.org/abs/2405.14734", "arxiv.org/abs/2403.07691", "arxiv.org/abs/2402.14740",
    "arxiv.org/abs/2402.03300", "arxiv.org/abs/2501.12948", "arxiv.org/abs/2503.14476", "arxiv.org/abs/2503.20783",
    "arxiv.org/abs/2510.00977", "arxiv.org/abs/2601.08521", "arxiv.org/abs/2212.08073", "arxiv.org/abs/2411.15124",
    "docs.nvidia.com/nemo/gym", "github.com/NVIDIA-NeMo/RL", "github.com/verl-project/verl",
]


def test_every_source_the_lecture_lists_is_there_and_marked():
    lecture = {s.url.split("://", 1)[1] for s in SOURCES.values() if s.lecture}
    assert lecture == set(LECTURE_LIST)


def test_dates_come_from_the_arxiv_identifier():
    assert date("dpo") == (2023, 5)
    assert date("christiano2017") == (2017, 6)
    assert date("biased_advantage") == (2026, 1)
    assert date("verl") == (2026, 0)  # software: the year the lecture places it in
    assert cite("dpo") == "[Rafailov et al. 2023](https://arxiv.org/abs/2305.18290)"
    order = [key for _, key in timeline()]
    assert order.index("dpo") < order.index("deepseekmath") < order.index("deepseek_r1")


def test_an_unknown_source_names_the_known_ones():
    with pytest.raises(KeyError, match="no source 'grpo'; known: .*deepseekmath"):
        cite("grpo")


def test_every_paper_a_notebook_links_to_has_its_home_here():
    known = {s.url for s in SOURCES.values()}
    for py in sorted((ROOT / "notebooks").glob("*.py")):
        for url in re.findall(r"https://arxiv\.org/abs/[\d.]+", py.read_text(encoding="utf-8")):
            assert url in known, f"{py.name} links to {url}, which course_lib.lesson.sources does not list"


# A method's name as the notebooks write it -> the key of its primary source. Course order is the
# order of the notebooks' file names. 00 is the map (it names what comes and says where it is cited).
METHODS = {
    r"Bradley[–-]Terry": "bradley_terry", r"\bREINFORCE\b": "williams1992", r"\bRLHF\b": "christiano2017",
    r"\bInstructGPT\b": "instructgpt", r"\bDPO\b": "dpo", r"\bIPO\b": "ipo", r"\bSimPO\b": "simpo",
    r"\bKTO\b": "kto", r"\bORPO\b": "orpo", r"\bPPO\b": "ppo", r"\bGAE\b": "gae", r"\bGRPO\b": "deepseekmath",
    r"\bRLOO\b": "rloo", r"\bDAPO\b": "dapo", r"Dr\. GRPO": "dr_grpo", r"\bGSPO\b": "gspo", r"\bCISPO\b": "cispo",
    r"\bR1(?:-Zero)?\b": "deepseek_r1", r"\bk3\b": "kl_approx", r"[Bb]est-of-N": "stiennon2020",
    r"over-?optimi[sz]ation|reward hacking": "gao2022", r"\bRFT\b|[Rr]ejection-sampling fine-tuning": "rft",
    r"\bRLVR\b": "tulu3", r"\bTRL\b": "trl", r"Constitutional AI": "constitutional_ai", r"\bverl\b": "verl",
    r"NeMo RL": "nemo_rl", r"NeMo Gym": "nemo_gym", r"Secretly DPO": "it_takes_two",
    r"Advantage Is Biased": "biased_advantage", r"\bTR-DPO\b": "tr_dpo",
}
COURSE = sorted(p.stem for p in (ROOT / "notebooks").glob("*.py") if p.stem != "00_start_here")
LINK = re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)")


def _cells(name):
    return jupytext.read(ROOT / "notebooks" / f"{name}.py").cells


def test_every_link_to_a_source_is_written_as_cite_writes_it():
    key_of = {s.url: key for key, s in SOURCES.items()}
    for py in sorted((ROOT / "notebooks").glob("*.py")):
        for text, url in LINK.findall(py.read_text(encoding="utf-8")):
            if url in key_of:
                assert f"[{text}]({url})" == cite(key_of[url]), (
                    f"{py.name}: [{text}]({url}) — write the link as cite({key_of[url]!r}) gives it: "
                    f"{cite(key_of[url])}")


def test_each_method_cites_its_source_where_a_student_first_meets_it():
    """The first markdown cell (course order) that names a method links to its source, or the code cell
    right after it displays citations (``cite(``)."""
    assert set(METHODS.values()) <= set(SOURCES)
    met = {}
    for name in COURSE:
        cells = _cells(name)
        for i, cell in enumerate(cells):
            if cell.cell_type != "markdown":
                continue
            for pattern, key in METHODS.items():
                if key in met or not re.search(pattern, cell.source):
                    continue
                met[key] = name
                following = next((c.source for c in cells[i + 1:] if c.cell_type == "code"), "")
                assert SOURCES[key].url in cell.source or "cite(" in following, (
                    f"{name}: first mention of {pattern!r} (cell {i}) without its source: add {cite(key)}")
    assert {"bradley_terry", "dpo", "deepseekmath", "ppo", "dapo", "gao2022",
            "trl"} <= set(met), "the map lost a method"
