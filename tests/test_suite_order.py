"""The order `make test` hands test groups to its two workers (tests/conftest.py): the longest first,
by the seconds each group took in the last whole-suite run, with groups never measured started first."""

from __future__ import annotations

from types import SimpleNamespace

import conftest
import pytest
from conftest import LONGEST_FIRST, group_rank


def test_without_measurements_the_static_list_leads_then_file_order():
    groups = ["test_a.py", "executed-notebooks", "test_b.py", "test_browser.py"]
    rank = group_rank(groups, {})
    assert sorted(groups, key=rank.get) == ["test_browser.py", "executed-notebooks", "test_a.py", "test_b.py"]
    assert LONGEST_FIRST.index("test_browser.py") < LONGEST_FIRST.index("executed-notebooks")


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
