"""The module map in docs/library.md is course_lib's own docstrings, current, one line per module."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tools import doc_blocks, module_map

ROOT = Path(__file__).resolve().parents[1]


def test_every_module_and_package_of_course_lib_is_in_the_map_with_its_summary():
    rows = {name: text for name, text, _ in module_map.modules()}
    files = [p for p in (ROOT / "course_lib").rglob("*.py") if "__pycache__" not in p.parts]
    names = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for p in files}
    assert set(rows) == names
    assert rows["course_lib.formulas.preference" if "course_lib.formulas.preference" in rows
                else "course_lib.formulas.preference"] \
        .startswith("Pairwise preferences: Bradley–Terry")


def test_the_rendered_map_in_docs_is_current():
    assert module_map.main(["--check"]) == 0
    text = (ROOT / "docs" / "library.md").read_text(encoding="utf-8")
    assert doc_blocks.pattern("modules").search(text).group("body") == module_map.table()


def test_a_stale_map_is_found_and_rewritten(tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("no block\n")
    page = tmp_path / "docs" / "library.md"
    page.write_text("<!-- modules:course_lib -->\n| `course_lib.gone` | a module since removed |\n"
                    "<!-- /modules:course_lib -->\n")
    assert module_map.main(["--check", "--root", str(tmp_path)]) == 1
    assert "stale modules blocks" in capsys.readouterr().err
    assert module_map.main(["--root", str(tmp_path)]) == 0
    assert "course_lib.gone" not in page.read_text() and module_map.main(["--check", "--root", str(tmp_path)]) == 0
    page.write_text("<!-- modules:nope -->\n<!-- /modules:nope -->\n")
    with pytest.raises(ValueError, match="'nope'.*'course_lib'"):
        module_map.main(["--check", "--root", str(tmp_path)])


@pytest.mark.parametrize("doc, problem", [
    ("", "it has none"),
    ('"""\nstarts on the second line.\n"""\n', "it has none"),
    ('"""A first sentence that runs\nonto a second line."""\n', "runs onto a second line"),
    ('"""' + "x" * (module_map.LINE - 2) + '."""\n',
     f"at most {module_map.LINE - 3} characters; it has {module_map.LINE - 1}"),
])
def test_a_module_without_a_one_line_summary_stops_the_map(tmp_path, doc, problem):
    package = tmp_path / "pkg"
    shutil.copytree(ROOT / "course_lib", package, ignore=shutil.ignore_patterns("__pycache__"))
    assert len(module_map.modules(package, "pkg")) == len(module_map.modules())
    (package / "new_module.py").write_text(doc + "X = 1\n")
    with pytest.raises(ValueError, match=rf"new_module\.py: the module docstring must start with a one-line "
                                         rf"summary.*{problem}"):
        module_map.modules(package, "pkg")
