"""Shared fixtures for the notebook, browser and Colab tests (keep this file small)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# No CPU kernel pin: the tests run with the kernels torch picks, as a student's machine does (CI runs the
# cheapest lesson tests a second time under another set: tools/cpu_kernels.py). Numbers recorded on one
# kernel set are marked ``golden`` and skipped elsewhere (kernel_mismatch).


def kernel_mismatch(golden: Path) -> str | None:
    """Why numbers recorded in ``golden`` (its ``verified_on``: torch's version and CPU kernel set) cannot be
    compared here, or None when this process runs the same ones.

    Another torch or kernel set rounds differently, and over many steps that is another run, not a defect."""
    import json

    import torch

    on = json.loads(golden.read_text()).get("verified_on")
    here = {"torch": torch.__version__, "cpu_kernels": torch.backends.cpu.get_cpu_capability()}
    if on is None:
        return f"{golden.name} records no torch version and CPU kernel set (verified_on): nothing to compare with"
    if on != here:
        return (f"golden numbers of {golden.name} were verified on torch {on['torch']} with {on['cpu_kernels']} "
                f"kernels; this is torch {here['torch']} with {here['cpu_kernels']} kernels, which round differently "
                f"(run with ATEN_CPU_CAPABILITY={on['cpu_kernels'].lower()} on that torch to check them)")
    return None


def pytest_runtest_setup(item):
    """A test marked ``golden(path)`` runs only where its recorded numbers were verified (``kernel_mismatch``)."""
    mark = item.get_closest_marker("golden")
    if mark is not None:
        why = kernel_mismatch(ROOT / mark.args[0])
        if why:
            pytest.skip(why)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """``test-artifacts/`` (git-ignored): screenshots, timings, scratch environments."""
    path = ROOT / "test-artifacts"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def matplotlib_ready() -> None:
    """Build matplotlib's font cache once, outside any notebook.

    On a fresh machine the first import prints "Matplotlib is building the font cache" to stderr;
    inside a notebook that would look like a warning shown to a student.
    """
    subprocess.run([sys.executable, "-c", "import matplotlib.pyplot"], check=True, capture_output=True)


NOTEBOOK_SEEDS = (0, 1, 2)  # the seeds a training notebook reads its verdicts over


@pytest.fixture(scope="session")
def shared_sft_start():
    """The SFT starts of the `cpu` config, seeds ``NOTEBOOK_SEEDS`` (``course_lib.run.starts``), built once per
    test session side by side (``course_lib.run.seeds``); yields seed 0's.

    The tiny-GPT notebooks share them; ``COURSE_CACHE`` points their kernels (and the browser test's
    JupyterLab, and tests/test_colab.py's kernels on Colab's versions) at a folder of this session that
    both pytest-xdist workers see, and the cache's lock makes a second worker wait for the first and read
    its file.
    """
    from course_lib.run.seeds import train_seeds
    from course_lib.run.starts import sft_start
    from course_lib.trainers.configs import get_config

    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"serial-{os.getpid()}"
    folder = ROOT / "test-artifacts" / "sft-starts" / run_id
    old = os.environ.get("COURSE_CACHE")
    os.environ["COURSE_CACHE"] = str(folder)  # the notebooks' kernels inherit it
    train_seeds("sft", get_config("cpu"), list(NOTEBOOK_SEEDS))
    _, _, info = sft_start(get_config("cpu"), seed=0, verbose=False)
    yield info
    if old is None:
        os.environ.pop("COURSE_CACHE", None)
    else:
        os.environ["COURSE_CACHE"] = old


def report_line(config: pytest.Config, line: str) -> None:
    """Print a line in pytest's terminal summary even when output is captured."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            reporter.write_line(line)


EXECUTED = ROOT / "test-artifacts" / "executed"
SESSION_START = time.time()


def keep_executed(client, name: str) -> None:
    """Save the notebook as the lesson left it, just before the test's own probe (its last cell) runs.

    The site test (run last) builds its pages from these copies instead of running every notebook
    again. The copy is taken before the probe because a probe may move an explorer's widgets.
    """
    import copy

    import nbformat

    def before_cell(cell, cell_index, **_):
        if cell_index == len(client.nb.cells) - 1:
            client.set_widgets_metadata()
            nb = copy.deepcopy(client.nb)
            nb.cells = nb.cells[:-1]
            EXECUTED.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, EXECUTED / f"{name}.ipynb")

    client.on_cell_execute = before_cell


# `make test` runs the suite on two workers (pytest-xdist, `--dist loadgroup`): each group runs whole,
# in collection order, on one worker. A test file is its own group, except files that depend on each
# other or share files on disk, which share a group:
SHARED_GROUPS = {
    # the site test builds its pages from the notebooks these two executed (keep_executed), so it
    # needs their copies in test-artifacts/executed/ from the same worker, before it runs
    "test_notebooks.py": "executed-notebooks",
    "test_tinygpt_notebooks.py": "executed-notebooks",
    "test_site.py": "executed-notebooks",
    # ... and each tiny-GPT notebook runs once, in JupyterLab: its lesson test (test_tinygpt_notebooks.py)
    # runs it and its browser test (test_browser.py, that notebook's parameter) checks the same run,
    # after it on the same worker (see LESSON_NOTEBOOKS, group_of and pytest_collection_modifyitems)
    # both train into and read test-artifacts/lab-cache/ (the lab's SFT model and pairs)
    "test_lab.py": "lab14",
    "test_lab_pipeline.py": "lab14",
}
# The longest groups start first, so that no long group is the last one left on a worker (the longest
# processing time rule). A whole-suite run stores each group's seconds in pytest's cache
# (.pytest_cache, GROUP_SECONDS); the next run orders the groups it has measured by those, longest
# first, after any group it has not (a new file: started early, in case it is long). Without
# measurements (a fresh checkout, `-p no:cacheprovider`) the order is LONGEST_FIRST, then file order.
# (Only the order depends on these, never a result.)
LONGEST_FIRST = ["executed-notebooks", "test_assignment.py", "test_class_pipeline.py", "test_colab.py", "lab14",
                 "test_browser.py", "test_systems14.py", "test_tinygpt_cli.py", "test_student_repo.py",
                 "test_sandbox_grading.py", "test_trl_bridge.py"]
GROUP_SECONDS = "course/group_seconds"


# The notebooks the lesson tests execute (``execute("NN_name", ...)`` in test_tinygpt_notebooks.py):
# their browser tests join the lesson's group, so that they find the lesson's run in JupyterLab.
# (A notebook missing here is still checked, only run twice: test_suite_order.py checks the list.)
_LESSONS = ROOT / "tests" / "test_tinygpt_notebooks.py"
LESSON_NOTEBOOKS = frozenset(re.findall(r'\bexecute\(\s*"(\w+)"', _LESSONS.read_text(encoding="utf-8"))
                             if _LESSONS.exists() else ())
# Within a group: the lesson tests before the browser tests that read their runs, the site last.
LATE_IN_GROUP = {"test_browser.py": 1, "test_site.py": 2}


def group_of(nodeid: str) -> str:
    file = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    param = re.search(r"\[([^\]]+)\]$", nodeid)
    if file == "test_browser.py" and param and param.group(1) in LESSON_NOTEBOOKS:
        return SHARED_GROUPS["test_tinygpt_notebooks.py"]
    return SHARED_GROUPS.get(file, file)


def group_rank(groups: list[str], seconds: dict[str, float]) -> dict[str, int]:
    """Each group's place in the run: unmeasured groups first (LONGEST_FIRST, then ``groups``' order),
    then the measured ones, most ``seconds`` first."""
    static = {group: index for index, group in enumerate(LONGEST_FIRST)}
    unmeasured = sorted((g for g in groups if g not in seconds), key=lambda g: static.get(g, len(static)))
    measured = sorted((g for g in groups if g in seconds), key=lambda g: -seconds[g])
    return {group: index for index, group in enumerate([*unmeasured, *measured])}


def _cache(config):
    return getattr(config, "cache", None)  # None under -p no:cacheprovider


def pytest_collection_modifyitems(config, items):
    """Longest groups first; in a group, the browser tests after the lesson tests and the site's last."""
    groups = list(dict.fromkeys(group_of(item.nodeid) for item in items))
    seconds = _cache(config).get(GROUP_SECONDS, {}) if _cache(config) is not None else {}
    rank = group_rank(groups, seconds)
    items.sort(key=lambda item: (rank[group_of(item.nodeid)], LATE_IN_GROUP.get(item.path.name, 0)))


_ran_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Sum each group's setup, call and teardown seconds (on xdist's controller: every worker's reports)."""
    _ran_seconds[group_of(report.nodeid)] = _ran_seconds.get(group_of(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    """After a whole-suite run (no file, -k, -m, --lf or -x), store each group's seconds for the next run's order."""
    config = session.config
    whole = (config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.keyword
             and not config.option.markexpr and not config.getoption("lf", False) and not config.option.maxfail)
    if hasattr(config, "workerinput") or _cache(config) is None or not whole or not _ran_seconds:
        return
    stored = _cache(config).get(GROUP_SECONDS, {})
    _cache(config).set(GROUP_SECONDS, {**stored, **{g: round(s, 1) for g, s in _ran_seconds.items()}})


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: without the plugin, nothing to do
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the groups above.

    pytest-xdist's own loadgroup reads ``xdist_group`` marks by renaming each test's node id, which
    pytest 9 no longer lets a plugin do: the marks would be ignored and every test sent on its own.
    Its scope scheduler with our grouping of node ids does the same job through a public hook.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return FileGroups(config, log)


# JupyterLab in headless Chromium (session-scoped: the browser and the lesson tests share it)
from jupyterlab_run import _current_request, lab, page, pw_session, shots  # noqa: E402, F401
