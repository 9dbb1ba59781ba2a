"""Shared fixtures for the notebook, browser and Colab tests (keep this file small)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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


def pytest_collection_modifyitems(config, items):
    """The site is built from the notebooks the other tests executed: its tests run last."""
    items.sort(key=lambda item: item.nodeid.startswith("tests/test_site.py"))
