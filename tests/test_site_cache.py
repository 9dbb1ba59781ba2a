"""`make site`'s cache: a rebuild runs only the notebooks whose inputs changed, per budget.

`tools.build_site.execute` is replaced by a stand-in that returns a one-cell notebook and counts its
calls, over a folder of two small notebooks and a two-file "library", so the cache logic is tested
without starting kernels. The real execution is tested by tests/test_site.py.
"""

from __future__ import annotations

import nbformat
import pytest

from tools import build_site


@pytest.fixture
def course(tmp_path, monkeypatch):
    notebooks, library = tmp_path / "notebooks", tmp_path / "course_lib"
    notebooks.mkdir()
    library.mkdir()
    for name in ("01_a", "02_b"):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# Notebook {name}"),
                                             nbformat.v4.new_code_cell("print(1)")])
        nbformat.write(nb, notebooks / f"{name}.ipynb")
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "frontier.json").write_text('{"runs": [1]}\n')
    (tmp_path / "benchmarks" / "tables.py").write_text("def load(name): ...\n")
    (tmp_path / "benchmarks" / "goals.py").write_text("GOAL = 1\n")
    nb = nbformat.read(notebooks / "01_a.ipynb", as_version=4)  # 01_a shows a benchmark's results, as 09 does
    nb.cells[1].source = 'from tables import load\nload("frontier.json")'
    nbformat.write(nb, notebooks / "01_a.ipynb")
    (library / "a.py").write_text("A = 1\n")
    (library / "b.py").write_text("B = 2\n")
    runs: list[tuple[str, bool]] = []

    def fake_execute(name, *, fast, timeout=0):
        runs.append((name, fast))
        nb = nbformat.read(notebooks / f"{name}.ipynb", as_version=4)
        nb.cells[1].outputs = [nbformat.v4.new_output("stream", text=f"ran {name} fast={fast}\n")]
        return nb

    monkeypatch.setattr(build_site, "NOTEBOOKS", notebooks)
    monkeypatch.setattr(build_site, "LIBRARY", library)
    monkeypatch.setattr(build_site, "BENCHMARKS", tmp_path / "benchmarks")
    monkeypatch.setattr(build_site, "execute", fake_execute)
    monkeypatch.setattr(build_site, "copy_mathjax", lambda out: None)
    return notebooks, library, runs, tmp_path / "cache"


def _build(tmp_path, cache, *, fast):
    return build_site.build(tmp_path / "site", fast=fast, names=["01_a", "02_b"], cache=cache)


def test_a_rebuild_reruns_only_the_changed_notebook(course, tmp_path, capsys):
    notebooks, _, runs, cache = course
    _build(tmp_path, cache, fast=False)
    assert runs == [("01_a", False), ("02_b", False)]
    _build(tmp_path, cache, fast=False)
    assert len(runs) == 2, "unchanged notebooks must come from the cache"
    assert "02_b: from the cache (ran" in capsys.readouterr().out
    nb = nbformat.read(notebooks / "02_b.ipynb", as_version=4)
    nb.cells[1].source = "print(2)"
    nbformat.write(nb, notebooks / "02_b.ipynb")
    _build(tmp_path, cache, fast=False)
    assert runs[2:] == [("02_b", False)]


def test_a_results_file_or_tables_py_reruns_only_the_notebook_that_reads_it(course, tmp_path):
    """A page that shows a benchmark's table must not be served from before the benchmark re-ran."""
    _, _, runs, cache = course
    _build(tmp_path, cache, fast=False)
    (tmp_path / "benchmarks" / "results" / "frontier.json").write_text('{"runs": [2]}\n')
    _build(tmp_path, cache, fast=False)
    assert runs[2:] == [("01_a", False)]
    (tmp_path / "benchmarks" / "results" / "other.json").write_text("{}\n")  # a file no notebook names
    _build(tmp_path, cache, fast=False)
    assert len(runs) == 3
    (tmp_path / "benchmarks" / "tables.py").write_text("def load(name): return {}\n")
    _build(tmp_path, cache, fast=False)
    assert runs[3:] == [("01_a", False)]


def test_a_library_change_reruns_every_notebook(course, tmp_path):
    _, library, runs, cache = course
    _build(tmp_path, cache, fast=False)
    (library / "b.py").write_text("B = 3\n")
    _build(tmp_path, cache, fast=False)
    assert runs[2:] == [("01_a", False), ("02_b", False)]


def test_another_cpu_kernel_set_reruns_every_notebook(course, tmp_path, monkeypatch):
    """AVX-512 kernels round differently from AVX2 (tools/cpu_kernels.py): their outputs are another run."""
    _, _, runs, cache = course
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    _build(tmp_path, cache, fast=False)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx512")
    _build(tmp_path, cache, fast=False)
    assert runs[2:] == [("01_a", False), ("02_b", False)]
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    _build(tmp_path, cache, fast=False)
    assert len(runs) == 6, "one cache entry per notebook and budget: the key decides, so switching back runs again"


def test_budgets_have_their_own_cache_and_every_page_names_its_budget(course, tmp_path):
    _, _, runs, cache = course
    _build(tmp_path, cache, fast=True)
    pages = {p.name: p.read_text() for p in (tmp_path / "site").glob("*.html")}
    assert all('data-budget="fast"' in text for text in pages.values()), "every page says its budget"
    assert "ran 01_a fast=True" in pages["01_a.html"]
    _build(tmp_path, cache, fast=False)
    assert runs == [("01_a", True), ("02_b", True), ("01_a", False), ("02_b", False)]
    text = (tmp_path / "site" / "01_a.html").read_text()
    assert 'data-budget="full"' in text and "ran 01_a fast=False" in text
    assert "Executed " in text and " s." in text, "a full page says when and how long it ran"


def test_no_cache_runs_everything_and_a_stale_key_is_never_reused(course, tmp_path):
    notebooks, _, runs, cache = course
    build_site.build(tmp_path / "site", fast=False, names=["01_a"], cache=None)
    build_site.build(tmp_path / "site", fast=False, names=["01_a"], cache=None)
    assert runs == [("01_a", False), ("01_a", False)]
    _build(tmp_path, cache, fast=False)
    entry = cache / "full" / "01_a.ipynb"
    nb = nbformat.read(entry, as_version=4)
    nb.metadata["course_site"]["key"] = "stale"
    nbformat.write(nb, entry)
    _build(tmp_path, cache, fast=False)
    assert runs[-1] == ("01_a", False) and runs.count(("02_b", False)) == 1


def test_the_kernel_gets_the_budget_asked_for_whatever_the_shell_says(monkeypatch):
    seen = {}

    class Client:
        def __init__(self, nb, **kwargs):
            pass

        def execute(self):
            import os
            seen["fast"] = os.environ.get("COURSE_FAST")

    monkeypatch.setattr(build_site, "NotebookClient", Client)
    monkeypatch.setenv("COURSE_FAST", "1")
    build_site.execute("00_start_here", fast=False)
    assert seen["fast"] is None
    import os
    assert os.environ["COURSE_FAST"] == "1", "the caller's environment is restored"
    monkeypatch.delenv("COURSE_FAST")
    build_site.execute("00_start_here", fast=True)
    assert seen["fast"] == "1" and "COURSE_FAST" not in os.environ
