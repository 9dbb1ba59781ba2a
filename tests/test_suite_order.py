"""The order `make test` hands test groups to its two workers (tests/conftest.py): the longest first,
by the seconds each group took in the last whole-suite run, with groups never measured started first."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest
from conftest import LONGEST_FIRST, group_rank


def test_without_measurements_the_static_list_leads_then_file_order():
    groups = ["test_a.py", "test_browser.py", "test_b.py", "executed-notebooks"]
    rank = group_rank(groups, {})
    assert sorted(groups, key=rank.get) == ["executed-notebooks", "test_browser.py", "test_a.py", "test_b.py"]
    # the tiny-GPT notebooks' single runs (lesson and browser tests together) make this the longest group
    assert LONGEST_FIRST.index("executed-notebooks") < LONGEST_FIRST.index("test_browser.py")


def test_measured_groups_run_longest_first_after_the_unmeasured():
    groups = ["test_a.py", "test_new.py", "test_browser.py", "lab14", "test_b.py"]
    seconds = {"test_a.py": 30.0, "test_browser.py": 500.0, "lab14": 620.0, "test_b.py": 31.0, "gone.py": 999.0}
    rank = group_rank(groups, seconds)
    assert sorted(groups, key=rank.get) == ["test_new.py", "lab14", "test_browser.py", "test_b.py", "test_a.py"]


class _Cache(dict):
    def get(self, key, default):
        return super().get(key, default)

    def set(self, key, value):
        self[key] = value


def _session(**option):
    opts = {"keyword": "", "markexpr": "", "maxfail": 0, **option}
    config = SimpleNamespace(args_source=pytest.Config.ArgsSource.TESTPATHS, option=SimpleNamespace(**opts),
                             getoption=lambda name, default=None: False, cache=_Cache())
    return SimpleNamespace(config=config)


def test_a_whole_run_stores_each_groups_seconds_and_a_partial_run_does_not(monkeypatch):
    monkeypatch.setattr(conftest, "_ran_seconds", {})
    for nodeid, duration in (("tests/test_lab.py::t1", 2.0), ("tests/test_lab_pipeline.py::t2", 3.5),
                             ("tests/test_x.py::t3", 1.0)):
        conftest.pytest_runtest_logreport(SimpleNamespace(nodeid=nodeid, duration=duration))
    whole = _session()
    whole.config.cache.set(conftest.GROUP_SECONDS, {"test_x.py": 9.0, "test_old.py": 4.0})
    conftest.pytest_sessionfinish(whole, 0)
    assert whole.config.cache[conftest.GROUP_SECONDS] == {"lab14": 5.5, "test_x.py": 1.0, "test_old.py": 4.0}
    for partial in (_session(keyword="lab"), _session(markexpr="not slow"), _session(maxfail=1)):
        conftest.pytest_sessionfinish(partial, 0)
        assert conftest.GROUP_SECONDS not in partial.config.cache


BROWSER = "tests/test_browser.py::test_lecture_notebook_runs_in_jupyterlab_as_a_student_sees_it[{}]"


def test_every_training_notebook_is_run_once_for_its_lesson_and_browser_tests():
    """Every notebook test_notebooks.py does not execute is executed by a lesson test, and its browser
    test joins that lesson's group (one worker), where it checks the lesson's run in JupyterLab."""
    from jupyterlab_run import LECTURES
    from test_notebooks import LECTURE

    assert conftest.LESSON_NOTEBOOKS == set(LECTURES) - set(LECTURE)
    for name in LECTURES:
        assert conftest.group_of(BROWSER.format(name)) == (
            "test_browser.py" if name in LECTURE else conftest.group_of("tests/test_tinygpt_notebooks.py::t"))
    assert (conftest.group_of("tests/test_browser.py::test_exercise_shows_the_nbgrader_validate_button")
            == "test_browser.py")


def test_in_a_group_the_lessons_run_before_the_browser_checks_and_the_site_comes_last():
    # in collection (file) order, as pytest hands them over
    ids = [BROWSER.format("00_start_here"), BROWSER.format(sorted(conftest.LESSON_NOTEBOOKS)[0]),
           "tests/test_assignment.py::test_z", "tests/test_notebooks.py::test_y", "tests/test_site.py::test_a_page",
           "tests/test_tinygpt_notebooks.py::test_x"]
    items = [SimpleNamespace(nodeid=i, path=Path(i.split("::")[0])) for i in ids]
    conftest.pytest_collection_modifyitems(SimpleNamespace(), items)
    assert [i.nodeid for i in items] == [ids[3], ids[5], ids[1], ids[4], ids[2], ids[0]]

