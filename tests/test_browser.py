"""JupyterLab driven in headless Chromium: what a student sees, end to end.

Starts JupyterLab from the project's .venv on loopback (token set, ``--allow-root`` as root, news
and update checks off) over a scratch copy of the notebooks — so autosave never touches the
repository — and drives Debian's Chromium with the ``playwright`` package (never
``playwright install``). Checks:

1. lecture notebook 02: Run All Cells; the β explorer shows the DPO loss of pair I (0.6118);
   pressing → on the focused β slider moves it one step and the displayed loss changes to the
   value ``course_lib`` gives for the new β;
2. the first assignment notebook (Q1) shows nbgrader's Validate button in its toolbar.

Screenshots go to ``test-artifacts/browser/``. The server is stopped by its own PID. Skips with a
reason only when Chromium is not installed (``.ci/run`` installs it with apt-get).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT, report_line

from course_lib.preference import dpo_terms

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
LECTURE = ROOT / "notebooks" / "02_dpo_margins.ipynb"
EXERCISE = ROOT / "exercises" / "module14" / "q1_bradley_terry.ipynb"

def test_nbgrader_extensions_are_enabled_in_the_course_venv():
    """The Validate button needs nbgrader's lab extension and its validate server extension.

    Read from the same config files ``jupyter server/labextension list`` read (much faster).
    """
    from jupyter_core.paths import jupyter_config_path, jupyter_path

    enabled, disabled = {}, set()
    for folder in map(Path, reversed(jupyter_config_path())):  # lowest priority first
        files = [*sorted((folder / "jupyter_server_config.d").glob("*.json")), folder / "jupyter_server_config.json"]
        for file in filter(Path.exists, files):
            enabled.update(json.loads(file.read_text()).get("ServerApp", {}).get("jpserver_extensions", {}))
        page = folder / "labconfig" / "page_config.json"
        if page.exists():
            off = json.loads(page.read_text()).get("disabledExtensions", {})
            disabled |= {k for k, v in off.items() if v} if isinstance(off, dict) else set(off)
    assert enabled.get("nbgrader.server_extensions.validate_assignment") is True
    assert any((Path(p) / "@jupyter" / "nbgrader" / "package.json").exists() for p in jupyter_path("labextensions"))
    assert not any(name.startswith("@jupyter/nbgrader") for name in disabled), disabled


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str):
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read() or b"null")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server over a scratch folder; yields (base_url, token, folder)."""
    if not CHROMIUM.exists():
        pytest.skip(f"Chromium is not installed at {CHROMIUM}: `apt-get install chromium` (.ci/run does)")
    pytest.importorskip("playwright.sync_api", reason="the playwright package is missing from .venv")
    root = tmp_path_factory.mktemp("lab")
    lecture = json.loads(LECTURE.read_text(encoding="utf-8"))
    lecture["metadata"].pop("jupytext", None)  # no paired .py written into the scratch folder
    (root / LECTURE.name).write_text(json.dumps(lecture), encoding="utf-8")
    if EXERCISE.exists():
        shutil.copy(EXERCISE, root / EXERCISE.name)
    settings = root.parent / "lab-settings"
    for plugin, values in {
        "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
        "docmanager-extension/plugin": {"autosave": False},  # nothing is written while we test
    }.items():
        file = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(values))
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings),
           "JUPYTERLAB_WORKSPACES_DIR": str(root.parent / "lab-workspaces")}
    cmd = [
        str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1",
        f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = (root.parent / "jupyterlab.log").open("w")
    server = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}/api/status", token)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start; see {log.name}") from None
                time.sleep(0.5)
        yield base, token, root
    finally:
        try:  # shut kernels down through the API, then stop the server by its own PID
            for kernel in _get(f"{base}/api/kernels", token) or []:
                request = urllib.request.Request(
                    f"{base}/api/kernels/{kernel['id']}", method="DELETE",
                    headers={"Authorization": f"token {token}"},
                )
                urllib.request.urlopen(request, timeout=10).close()
        except OSError:
            pass
        os.kill(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


@pytest.fixture(scope="module")
def page(lab, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),  # a fresh --user-data-dir
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 1000},
        )
        try:
            page = context.new_page()
            page.set_default_timeout(60_000)
            yield page
        finally:
            context.close()


@pytest.fixture(scope="module")
def shots(artifacts_dir):
    folder = artifacts_dir / "browser"
    folder.mkdir(exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return folder


@pytest.fixture(autouse=True)
def screenshot_on_failure(request, shots):
    """Keep a picture of the page when a browser test fails (test-artifacts/browser/FAILED-*.png)."""
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before and "page" in request.fixturenames:
        request.getfixturevalue("page").screenshot(path=str(shots / f"FAILED-{request.node.name}.png"))


def _open(page, lab, name: str):
    """Open ``name`` in a fresh workspace of its own; return its (visible) notebook panel."""
    base, token, _ = lab
    workspace = Path(name).stem.replace("_", "-")
    page.goto(f"{base}/lab/workspaces/{workspace}/tree/{name}?reset&token={token}",
              wait_until="domcontentloaded")
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text=name).first.wait_for(timeout=60_000)
    panel = page.locator(".jp-NotebookPanel:visible").first
    # the kernel is connected and idle
    panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=90_000)
    return panel


@pytest.mark.browser
@pytest.mark.slow
def test_dpo_explorer_responds_to_the_keyboard(lab, page, shots, request):
    start = time.monotonic()
    panel = _open(page, lab, LECTURE.name)
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()

    explorer = panel.locator(".widget-output", has_text="β·slope").last
    explorer.wait_for(timeout=120_000)
    before = explorer.inner_text()
    assert "loss = 0.6118" in before, before
    slider = panel.locator(".widget-slider", has=page.locator(".widget-label", has_text=re.compile(r"^β$")))
    slider.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "02_explorer_before.png"))

    handle = slider.locator(".noUi-handle").first
    handle.focus()
    page.keyboard.press("ArrowRight")
    expected = f"loss = {dpo_terms(-12.0, -11.5, -13.0, -10.8, beta=0.11).loss:.4f}"
    page.wait_for_function(
        "([el, text]) => el.innerText.includes(text)",
        arg=[explorer.element_handle(), expected], timeout=45_000,
    )
    after = explorer.inner_text()
    page.screenshot(path=str(shots / "02_explorer_after.png"))
    assert expected in after and after != before
    assert slider.locator(".widget-readout").inner_text().strip() == "0.11"
    report_line(request.config, f"\nbrowser: notebook 02 ran, β 0.10 → 0.11 by keyboard, "
                                f"'{before.split('   ')[1]}' → '{expected}' in {time.monotonic() - start:.1f} s")


@pytest.mark.browser
@pytest.mark.slow
def test_exercise_shows_the_nbgrader_validate_button(lab, page, shots):
    if not EXERCISE.exists():
        pytest.skip(f"{EXERCISE.relative_to(ROOT)} is not there yet (written by the assignment helper)")
    assert '"nbgrader"' in EXERCISE.read_text(), "the exercise notebook carries no nbgrader metadata"
    panel = _open(page, lab, EXERCISE.name)
    button = panel.locator(".validate-button").first
    button.wait_for(timeout=30_000)
    assert "Validate" in button.inner_text()
    page.screenshot(path=str(shots / "q1_validate_button.png"))
