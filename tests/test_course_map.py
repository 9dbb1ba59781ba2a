"""The course map has one source (``course_lib.lesson.course_map``): the README's map and
docs/course-map.md are generated from it (``tools/course_map.py --check``), notebook 00 displays
it, and it lists every lecture notebook in order with links that resolve where each map is read."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

from course_lib.lesson import colab, course_map
from tools import course_map as generator
from tools import doc_blocks


def test_the_readme_and_docs_hold_the_map_the_source_renders():
    assert generator.main(["--check"]) == 0


def test_the_map_lists_every_lecture_notebook_in_course_order():
    stems = [nb.stem for nb in course_map.NOTEBOOKS]
    assert stems == sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert all(nb.title and nb.lecture and nb.does and nb.teaches for nb in course_map.NOTEBOOKS)


@pytest.mark.parametrize(("at", "page"), [("", ROOT / "README.md"),
                                          ("notebooks", ROOT / "notebooks" / "x.ipynb"),
                                          ("docs", ROOT / "docs" / "course-map.md")])
def test_every_link_resolves_from_the_folder_the_map_is_read_in(at, page):
    text = course_map.table(("lecture", "does", "teaches"), at=at) + course_map.assignments(at=at)
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert len(links) >= len(course_map.NOTEBOOKS) + 7  # notebooks, the assignments' six, the guide
    for link in links:
        assert (page.parent / link).resolve().exists(), f"{link} does not resolve in {page.parent}"


def test_the_readme_map_has_a_colab_badge_per_notebook_and_the_badge_once():
    text = course_map.BLOCKS["table"]()
    for nb in course_map.NOTEBOOKS:
        assert f"[![Open in Colab][colab]]({colab.colab_url(colab.notebook_path(nb.stem))})" in text
    assert text.count(colab.BADGE) == 1


def test_notebook_00_displays_the_map_and_repeats_no_table_by_hand():
    source = (ROOT / "notebooks" / "00_start_here.py").read_text(encoding="utf-8")
    assert re.search(r"^Markdown\(notebook_map\(\)\)$", source, re.M)
    assert not re.search(r"^# \| \[\d\d ", source, re.M), "a hand-written map row in notebook 00"


def test_a_stale_or_unknown_block_is_caught_and_a_rewrite_fixes_it(tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    block = "<!-- map:assignments -->\ntyped by hand\n<!-- /map:assignments -->\n"
    (tmp_path / "README.md").write_text(f"intro\n{block}")
    (tmp_path / "docs" / "course-map.md").write_text("<!-- map:full -->\n<!-- /map:full -->\n")
    assert generator.main(["--check", "--root", str(tmp_path)]) == 1
    assert "README.md, " in capsys.readouterr().err  # both pages named
    assert generator.main(["--root", str(tmp_path)]) == 0
    assert course_map.assignments() in (tmp_path / "README.md").read_text()
    assert generator.main(["--check", "--root", str(tmp_path)]) == 0
    (tmp_path / "docs" / "course-map.md").write_text("<!-- map:nope -->\n<!-- /map:nope -->\n")
    with pytest.raises(ValueError, match="'nope'.*'assignments', 'full', 'table'"):
        generator.main(["--check", "--root", str(tmp_path)])
    (tmp_path / "docs" / "course-map.md").write_text("no block\n")
    (tmp_path / "README.md").write_text("no block\n")
    assert generator.main(["--check", "--root", str(tmp_path)]) == 1  # nothing checked: a failure
    assert "no <!-- map:NAME --> block" in capsys.readouterr().err


def test_bad_arguments_are_refused_with_what_is_accepted():
    with pytest.raises(ValueError, match="at must be one of"):
        course_map.table(("does",), at="nowhere")
    with pytest.raises(ValueError, match="columns must be a non-empty tuple of"):
        course_map.table(("colour",))
    with pytest.raises(ValueError, match="columns must be"):
        course_map.table(())


def test_the_pages_are_the_readme_then_docs_in_name_order():
    pages = doc_blocks.pages(ROOT)
    assert pages[0] == ROOT / "README.md" and pages[1:] == sorted((ROOT / "docs").glob("*.md"))
    assert ROOT / "docs" / "course-map.md" in pages
