"""The course's primary sources: the lecture's list is all there, dated from arXiv, and one home.

The nineteen links below are the lecture's §20 list (data, copied once here to check against).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from course_lib.sources import SOURCES, cite, date, timeline

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
            assert url in known, f"{py.name} links to {url}, which course_lib.sources does not list"
