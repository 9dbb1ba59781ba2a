"""A student's `make lab`: no news pop-up, each lecture notebook listed once, and git stays clean.

One JupyterLab server, started the way ``make lab`` starts it (``JUPYTER_CONFIG_DIR`` =
``instructor/lab_config/student``), over a scratch git clone holding one lecture notebook pair with
the output filter registered and the student lab config, as ``make lab`` has them
(``tools/strip_outputs.py``: a git clean filter and a post-save hook). A save
through the server's contents API (what the lab's save and autosave do, through Jupytext's pairing)
writes outputs and run metadata to disk; ``git status`` must stay clean, and without the filter it
must not (the check can fail).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT
from jupyterlab_run import _get, lab_server

from tools import strip_outputs

NOTEBOOK = "01_bradley_terry"
STUDENT_CONFIG = ROOT / "instructor" / "lab_config" / "student"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _put(url: str, token: str, model: dict) -> None:
    request = urllib.request.Request(url, data=json.dumps(model).encode(), method="PUT",
                                     headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=60).close()


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("clone")
    for path in (f"notebooks/{NOTEBOOK}.py", f"notebooks/{NOTEBOOK}.ipynb", ".gitattributes", ".gitignore",
                 "tools/__init__.py", "tools/strip_outputs.py"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, repo / path)
    shutil.copytree(STUDENT_CONFIG, repo / STUDENT_CONFIG.relative_to(ROOT))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "course")
    strip_outputs.install(repo)
    return repo


@pytest.fixture(scope="module")
def lab(clone, tmp_path_factory):
    scratch = tmp_path_factory.mktemp("lab-state")
    config = clone / STUDENT_CONFIG.relative_to(ROOT)  # as make lab: the clone's own student config
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config), "JUPYTER_RUNTIME_DIR": str(scratch / "runtime"),
           "JUPYTERLAB_WORKSPACES_DIR": str(scratch / "workspaces")}
    with lab_server(clone, env, scratch / "jupyterlab.log") as (base, token):
        yield base, token


def test_the_lab_asks_no_news_question(lab):
    base, token = lab
    request = urllib.request.Request(f"{base}/lab", headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        page = response.read().decode()
    data = json.loads(html.unescape(re.search(r'id="jupyter-config-data"[^>]*>(.*?)</script>', page, re.S).group(1)))
    # the plugin that asks "Would you like to get notified about official Jupyter news?" is off
    assert "@jupyterlab/apputils-extension:announcements" in data["disabledExtensions"]
    assert data["news"] == {"disabled": True}


def test_each_lecture_notebook_is_listed_once(lab, clone):
    base, token = lab
    listed = [item["name"] for item in _get(f"{base}/api/contents/notebooks", token)["content"]]
    assert (clone / "notebooks" / f"{NOTEBOOK}.py").exists()
    assert listed == [f"{NOTEBOOK}.ipynb"], listed


def test_a_saved_session_leaves_git_clean(lab, clone):
    base, token = lab
    url = f"{base}/api/contents/notebooks/{NOTEBOOK}.ipynb"
    model = _get(url, token)
    nb = model["content"]
    code = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    for count, cell in enumerate(code, 1):
        cell["execution_count"] = count
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": f"run {count}\n"}]
        cell["metadata"]["execution"] = {"iopub.status.busy": "2026-12-05T00:00:00Z"}
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.2"}
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    _put(url, token, {"type": "notebook", "format": "json", "content": nb})
    saved = json.loads((clone / "notebooks" / f"{NOTEBOOK}.ipynb").read_text(encoding="utf-8"))
    assert any(cell.get("outputs") for cell in saved["cells"]), "the student's file keeps its outputs"
    assert _git(clone, "status", "--porcelain") == "", "the lab session must leave git status clean"
    assert _git(clone, "diff") == ""
    _git(clone, "config", "--unset", f"filter.{strip_outputs.FILTER}.clean")
    try:
        assert f"notebooks/{NOTEBOOK}.ipynb" in _git(clone, "status",
                                                     "--porcelain"), "without the filter git sees outputs"
    finally:
        strip_outputs.install(clone)


def test_strip_keeps_committed_notebooks_as_they_are_and_passes_other_text_through():
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        text = path.read_text(encoding="utf-8")
        assert strip_outputs.without_outputs(text) == text, f"{path.name} is not committed as the filter writes it"
    assert strip_outputs.without_outputs("<<<<<<< ours\n") == "<<<<<<< ours\n"
