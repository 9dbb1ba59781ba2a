"""Colab readiness: the one place that knows where the course lives.

Every notebook starts with the same set-up cell, ``SETUP_CELL`` below (a test checks the
notebooks against it, and the README's "Open in Colab" links against ``colab_url``). The cell
cannot import this module -- on a fresh Colab runtime course_lib is not installed yet -- so it
carries the repository address as text; this file is where that text is written.

What the cell does, and what it deliberately does not:
- If ``course_lib`` imports, it does nothing (a laptop with ``make lab``, CI).
- Otherwise it pip-installs course_lib with ``--no-deps`` from ``COURSE_LIB_SOURCE`` (an
  environment variable the Colab simulation test points at the local checkout) or, by default,
  from ``REPO_URL``; then it installs only the small runtime packages the notebooks import and
  the runtime lacks. It never installs torch: Colab's own CUDA build stays.
- It then prints the device ``course_lib.tinygpt.device.resolve_device("auto")`` picks: CUDA when the
  runtime has a GPU, else MPS, else the CPU.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = "learning-from-feedback/learning-from-feedback"  # owner/name on GitHub
BRANCH = "main"
REPO_URL = f"https://github.com/{REPO}"
SOURCE_ENV = "COURSE_LIB_SOURCE"
# What the notebooks import beyond torch, numpy, matplotlib and ipywidgets (which Colab ships).
RUNTIME_EXTRAS = ("tqdm>=4.66", "transformers>=5.15,<6")  # as pyproject.toml declares them

SETUP_CELL = f'''\
# Set-up: does nothing where the course is installed (make lab). On Colab or any
# fresh runtime it installs course_lib from the course repository, keeps the
# runtime's own torch, and picks the device.
import importlib
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("course_lib") is None:
    source = os.environ.get(
        "{SOURCE_ENV}",
        "git+{REPO_URL}.git@{BRANCH}",
    )
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    # Colab runs pip as root; this silences pip's warning about it.
    env = {{**os.environ, "PIP_ROOT_USER_ACTION": "ignore"}}
    subprocess.run([*pip, "--no-deps", source], check=True, env=env)
    extras = [{", ".join(json.dumps(r) for r in RUNTIME_EXTRAS)}]
    subprocess.run([*pip, *extras], check=True, env=env)
    importlib.invalidate_caches()

from course_lib.tinygpt.device import on_colab, resolve_device

DEVICE = resolve_device("auto")
print(f"device: {{DEVICE.type}} · Colab: {{'yes' if on_colab() else 'no'}}")'''


def notebook_path(name: str) -> str:
    """Repository path of a lecture notebook, e.g. ``notebook_path("02_dpo_margins")``."""
    return f"notebooks/{name}.ipynb"


def colab_url(path: str) -> str:
    """The "Open in Colab" address of a notebook at ``path`` in the repository."""
    return f"https://colab.research.google.com/github/{REPO}/blob/{BRANCH}/{path}"


BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
SETUP_MARKER = '# %% tags=["colab-setup"]'


def write_setup_cells(paths) -> list[str]:
    """Rewrite the ``colab-setup`` cell of py:percent notebooks to ``SETUP_CELL``.

    Returns the paths that changed. ``make sync`` runs this over ``notebooks/*.py`` before
    Jupytext re-pairs, so a change of address or set-up reaches every notebook at once.
    """
    changed = []
    for path in map(Path, paths):
        lines = path.read_text(encoding="utf-8").split("\n")
        if SETUP_MARKER not in lines:
            raise ValueError(f"{path}: no cell tagged colab-setup (start it with {SETUP_MARKER})")
        start = lines.index(SETUP_MARKER) + 1
        end = next((i for i in range(start, len(lines)) if lines[i].startswith("# %%")), len(lines))
        new = [*lines[:start], *SETUP_CELL.split("\n"), "", *lines[end:]]
        if new != lines:
            path.write_text("\n".join(new), encoding="utf-8")
            changed.append(str(path))
    return changed


if __name__ == "__main__":  # python -m course_lib.lesson.colab notebooks/*.py
    for changed_path in write_setup_cells(sys.argv[1:]):
        print(f"updated the set-up cell of {changed_path}")
