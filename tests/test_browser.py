"""JupyterLab driven in headless Chromium: what a student sees, end to end.

Starts JupyterLab from the project's .venv on loopback (token set, ``--allow-root`` as root, news
and update checks off, ``COURSE_FAST=1`` and this checkout's ``course_lib`` for the kernels) over a
scratch copy of the notebooks — so autosave never touches the repository — and drives Debian's
Chromium with the ``playwright`` package (never ``playwright install``). Checks:

1. every lecture notebook in ``notebooks/`` (the list is read from the folder; a notebook without an
   entry in ``FIRST_READOUT`` fails): Run All Cells; no error or stderr output; every figure
   (inline or inside a widget) loaded, not blank, and shown at >= 90% of its natural width; each
   explorer's first readout is the lesson's value;
2. notebook 01_bradley_terry: the win-rate ↔ gap explorer starts at 1.00 / 0.731, and after keyboard moves of
   either slider both slider readouts and the printed line agree;
3. notebook 02_dpo_margins: pressing → on the focused β slider moves it one step and the displayed loss
   changes to the value ``course_lib`` gives for the new β;
4. the first assignment notebook (Q1) shows nbgrader's Validate button in its toolbar.

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

from course_lib.preference import bt_probability, dpo_terms, win_rate_to_gap

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
NOTEBOOKS = ROOT / "notebooks"
LECTURE = NOTEBOOKS / "02_dpo_margins.ipynb"
EXERCISE = ROOT / "exercises" / "module14" / "q1_bradley_terry.ipynb"
LECTURES = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))


def _best_of_n_first_prompt() -> str:
    """08b's best-of-N explorer opens on held-out prompt 0: its text and its answer, from the task."""
    from course_lib.configs import get_config
    from course_lib.task import AdditionTask

    task = AdditionTask(get_config("cpu").task)
    a, b = task.heldout_pairs[0]
    return f"{task.prompt_text(a, b)}  (answer {a + b})"


# Each lecture notebook and the first readout of its explorer (the lesson's value), None without one.
# The regularised objective's line is π* for the lesson's π_ref, r and β = 0.5 (test_tinygpt_notebooks checks it against the
# closed form); 09's explorer starts with every field unanswered, none of run F's 8 matching.
FIRST_READOUT = {
    "00_start_here": None,
    "01_bradley_terry": "gap Δr = +1.00  ↔  win rate 0.731",
    "02_dpo_margins": "z = 0.170   loss = 0.6118   slope = 0.4576",
    "03_the_regularised_objective": "β = 0.5: E_π*[r] = 0.7572   KL(π*‖π_ref) = 0.6645   J(π*) = β·log Z = 0.4249",
    "04_group_baselines": "GRPO: [ 1.291 -0.775 -0.775  1.291",
    "05_from_advantages_to_an_update": "ratio short/long: 10.0",
    "06_baseline_bias_enumeration": "full mean                   0.18375   (0.875 × true)",
    "07_memory_and_rollout_budgets": "update 2.08 min, ratio 39.3",
    "08_tiny_gpt_dpo": None,
    "09_tiny_gpt_grpo": None,
    "11_reward_hacking": None,
    "12_the_rlhf_route": _best_of_n_first_prompt,
    "13_the_passport": "0 of 8 fields match",
    "14_rl_as_a_system": None,
    "15_environments_and_tools": None,
    "16_recipes": None,
    "17_ai_feedback": None,
    "18_graduating_to_trl": None,
    "10_the_kl_term": "β = 0.5: max |π* − forward optimum| = 0.0727",
    "19_closing": "use: DPO, IPO, SimPO (offline); a Bradley–Terry reward model, then RL",
}
FIGURELESS = {"00_start_here", "13_the_passport"}  # notebooks that draw no figure


def test_every_lecture_notebook_is_run_in_the_browser():
    assert LECTURES, "no notebook found in notebooks/"
    assert sorted(FIRST_READOUT) == LECTURES, (
        "give every notebook in notebooks/ (and only those) a FIRST_READOUT entry")


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
def lab(tmp_path_factory, shared_sft_start):  # the kernels read the session's SFT start (COURSE_CACHE)
    """A JupyterLab server over a scratch folder; yields (base_url, token, folder)."""
    if not CHROMIUM.exists():
        pytest.skip(f"Chromium is not installed at {CHROMIUM}: `apt-get install chromium` (.ci/run does)")
    pytest.importorskip("playwright.sync_api", reason="the playwright package is missing from .venv")
    root = tmp_path_factory.mktemp("lab")
    for name in LECTURES:
        lecture = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))
        lecture["metadata"].pop("jupytext", None)  # no paired .py written into the scratch folder
        (root / f"{name}.ipynb").write_text(json.dumps(lecture), encoding="utf-8")
    if EXERCISE.exists():
        shutil.copy(EXERCISE, root / EXERCISE.name)
    settings = root.parent / "lab-settings"
    for plugin, values in {
        "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
        "docmanager-extension/plugin": {"autosave": False},  # nothing is written while we test
        # the notebook's own kernel, always: on a busy machine the kernel list can arrive after the
        # notebook opens, and JupyterLab then asks "Select Kernel" (the dialog's "Always start the
        # preferred kernel")
        "notebook-extension/tracker": {"autoStartDefaultKernel": True},
    }.items():
        file = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(values))
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings),
           "JUPYTERLAB_WORKSPACES_DIR": str(root.parent / "lab-workspaces"),
           "COURSE_FAST": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cmd = [
        str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1",
        f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: the test can wait for a ready kernel
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
    """Open ``name`` and return its (visible) notebook panel once its kernel is idle.

    The first time, JupyterLab loads in a fresh workspace of its own; after that the notebook is
    opened from the file browser of the page already loaded (a reload costs seconds per notebook).
    """
    base, token, _ = lab
    if not page.url.startswith(f"{base}/lab"):
        workspace = Path(name).stem.replace("_", "-")
        page.goto(f"{base}/lab/workspaces/{workspace}/tree/{name}?reset&token={token}",
                  wait_until="domcontentloaded")
    else:
        item = page.locator(".jp-DirListing-item", has=page.locator(".jp-DirListing-itemText", has_text=name))
        item.first.dblclick()
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text=name).first.wait_for(timeout=60_000)
    panel = page.locator(".jp-NotebookPanel:visible").first
    # the kernel is connected and idle
    panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=90_000)
    return panel


def _close(page, lab) -> None:
    """Close the current notebook tab (discarding its outputs) and stop every kernel through the API."""
    dialog = page.locator(".jp-Dialog")
    if dialog.count():  # a dialog left open would swallow the click: say what it was
        text = dialog.first.inner_text()
        page.keyboard.press("Escape")
        raise AssertionError(f"JupyterLab shows a dialog: {text!r}")
    page.locator(".lm-TabBar-tab.lm-mod-current .lm-TabBar-tabCloseIcon").first.click()
    discard = page.get_by_role("button", name="Discard")
    try:
        discard.wait_for(timeout=5_000)
        discard.click()
    except Exception:  # noqa: BLE001 - no dialog: the notebook had no unsaved changes
        pass
    base, token, _ = lab
    for session in _get(f"{base}/api/sessions", token) or []:
        request = urllib.request.Request(f"{base}/api/sessions/{session['id']}", method="DELETE",
                                         headers={"Authorization": f"token {token}"})
        urllib.request.urlopen(request, timeout=10).close()


class RunAllNeverStarted(AssertionError):
    """No cell started: the page is reloaded and the notebook opened afresh, once."""


def _run_all(page, panel) -> None:
    """Run All Cells and wait until every code cell has an execution count and the kernel is idle.

    The menu command is disabled for a moment after a kernel connects; a click that lands then does
    nothing, so it is repeated (six times, 20 s apart) until a cell starts. A dialog instead fails
    the test with its text, and a Run All that never starts raises ``RunAllNeverStarted`` at once
    rather than waiting out the run's own time limit (the caller reloads the page and tries again).
    """
    # Run All sent before the notebook's kernel connection is ready clears the cells and runs none:
    # wait for JupyterLab's own promises (the app restored, the document and its session ready)
    page.evaluate("""async () => {
        const app = window.jupyterapp;
        await app.restored;
        const widget = app.shell.currentWidget;
        await widget.context.ready;
        await widget.sessionContext.ready;
    }""")
    started = r"""panel => [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
                        .some(p => /\[(\d+|\*)\]/.test(p.textContent))
                     || document.querySelector('.jp-Dialog') !== null"""
    for _ in range(6):
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        try:
            page.wait_for_function(started, arg=panel.element_handle(), timeout=20_000, polling=250)
            break
        except Exception:  # noqa: BLE001 - retried; fails below if no cell ever started
            page.keyboard.press("Escape")
    else:
        raise RunAllNeverStarted("Run All Cells never started a cell (6 tries, 20 s apart)")
    dialog = page.locator(".jp-Dialog")
    assert not dialog.count(), f"JupyterLab asks: {dialog.first.inner_text()!r}"
    page.wait_for_function(  # every cell ran, or one failed (Run All stops there); the kernel is idle
        r"""panel => {
            const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
            const failed = panel.querySelector(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']");
            return prompts.length > 0 && (failed !== null || prompts.every(p => /\[\d+\]/.test(p.textContent)))
                && panel.querySelector(".jp-Notebook-ExecutionIndicator[data-status='idle']") !== null;
        }""",
        arg=panel.element_handle(), timeout=900_000, polling=500,  # 08b trains for minutes on a busy CPU
    )


# For every image in the notebook: its natural and shown widths, and whether its pixels vary
# (drawn on a canvas; a blank or fully transparent image has a single colour).
FIGURES_JS = """panel => Promise.all([...panel.querySelectorAll('.jp-OutputArea-output img, img.widget-image')].map(
    img => (img.complete ? Promise.resolve() : new Promise(r => { img.onload = r; img.onerror = r; })).then(() => {
        const canvas = document.createElement('canvas');
        canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
        const ctx = canvas.getContext('2d');
        let colours = 0;
        if (img.naturalWidth > 0) {
            ctx.drawImage(img, 0, 0);
            const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
            const seen = new Set();
            for (let i = 0; i < data.length && seen.size < 3; i += 4 * 97) {
                seen.add(data[i + 3] === 0 ? 'transparent' : `${data[i]},${data[i + 1]},${data[i + 2]}`);
            }
            colours = seen.has('transparent') && seen.size === 1 ? 0 : seen.size;
        }
        return {natural: img.naturalWidth, shown: img.getBoundingClientRect().width, colours};
    })))"""


def _slider(panel, page, label: str):
    return panel.locator(".widget-slider", has=page.locator(".widget-label", has_text=re.compile(f"^{label}$"))).first


def _wait_text(page, element, text: str) -> None:
    page.wait_for_function("([el, text]) => el.innerText.includes(text)",
                           arg=[element.element_handle(), text], timeout=45_000)


def _wait_readout(page, panel, readout: str) -> None:
    """Wait until a widget's text (an HTML readout or an Output widget's lines) holds ``readout``.

    Read from the DOM text, not the rendering: JupyterLab skips painting cells scrolled out of view.
    """
    try:
        page.wait_for_function(
            r"""([panel, text]) => {
                const norm = s => s.replace(/\s+/g, ' ').trim();
                return [...panel.querySelectorAll('.widget-html, .widget-output')]
                    .some(el => norm(el.textContent).includes(norm(text)));
            }""", arg=[panel.element_handle(), readout], timeout=60_000, polling=500)
    except Exception:  # noqa: BLE001 - reported with what the widgets do show
        shown = panel.locator(".widget-html, .widget-output").evaluate_all("els => els.map(e => e.textContent)")
        raise AssertionError(f"no widget shows {readout!r}; the widgets show {shown}") from None


def _drive_win_rate_explorer(page, panel, shots) -> str:
    """01: both sliders by keyboard; the slider readouts and the printed line must agree every time."""
    line = panel.locator(".widget-html", has_text="gap Δr").first
    gap, rate = _slider(panel, page, "gap Δr"), _slider(panel, page, "win rate")
    gap.scroll_into_view_if_needed()

    def agree(gap_text: str, rate_text: str) -> None:
        _wait_text(page, line, f"gap Δr = {float(gap_text):+.2f}  ↔  win rate {rate_text}")
        for slider, text in ((gap, gap_text), (rate, rate_text)):  # the readouts settle with the line
            page.wait_for_function("([el, text]) => el.querySelector('.widget-readout').innerText.trim() === text",
                                   arg=[slider.element_handle(), text], timeout=45_000)

    agree("1.00", "0.731")  # the lesson's values, not rounded away by the slider's step
    gap.locator(".noUi-handle").first.focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    after_gap = round(float(bt_probability(1.03)), 3)
    agree("1.03", f"{after_gap:.3f}")
    rate.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowRight")
    moved = round(after_gap + 0.001, 3)
    agree(f"{round(float(win_rate_to_gap(moved)), 2):.2f}", f"{moved:.3f}")
    page.screenshot(path=str(shots / "01_explorer_after_keys.png"))
    return f"gap → 1.03 and win rate → {moved:.3f} by keyboard, sliders and line agree"


def _drive_dpo_explorer(page, panel, shots) -> str:
    """02: → on the focused β slider moves it one step; the loss shown is course_lib's for the new β."""
    explorer = panel.locator(".widget-html", has_text="β·slope").last
    slider = _slider(panel, page, "β")
    slider.scroll_into_view_if_needed()
    before = explorer.inner_text()
    slider.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowRight")
    expected = f"loss = {dpo_terms(-12.0, -11.5, -13.0, -10.8, beta=0.11).loss:.4f}"
    _wait_text(page, explorer, expected)
    page.screenshot(path=str(shots / "02_explorer_after_keys.png"))
    assert slider.locator(".widget-readout").inner_text().strip() == "0.11"
    return f"β 0.10 → 0.11 by keyboard, '{before.split('   ')[1]}' → '{expected}'"


DRIVE = {"01_bradley_terry": _drive_win_rate_explorer, "02_dpo_margins": _drive_dpo_explorer}


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("name", LECTURES)
def test_lecture_notebook_runs_in_jupyterlab_as_a_student_sees_it(name, lab, page, shots, request):
    start = time.monotonic()
    panel = _open(page, lab, f"{name}.ipynb")
    try:
        try:
            _run_all(page, panel)
        except RunAllNeverStarted:  # seen once on a fresh environment's first JupyterLab start, under load
            page.screenshot(path=str(shots / f"RETRIED-{name}.png"))
            page.reload(wait_until="domcontentloaded")
            page.locator(".lm-TabBar-tab.lm-mod-current", has_text=f"{name}.ipynb").first.wait_for(timeout=60_000)
            panel = page.locator(".jp-NotebookPanel:visible").first
            panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=90_000)
            _run_all(page, panel)
        readout = FIRST_READOUT[name]
        readout = readout() if callable(readout) else readout
        if readout is not None:  # an HTML readout, or the printed lines of an Output widget
            _wait_readout(page, panel, readout)
        errors = panel.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        assert errors.count() == 0, f"{name} shows error or stderr output:\n" + "\n".join(errors.all_inner_texts())
        figures = page.evaluate(FIGURES_JS, panel.element_handle())
        assert bool(figures) == (name not in FIGURELESS), f"{name} shows {len(figures)} figures"
        for index, figure in enumerate(figures):
            assert figure["natural"] > 0, f"{name}: figure {index + 1} did not load"
            assert figure["colours"] >= 2, f"{name}: figure {index + 1} is blank"
            assert figure["shown"] >= 0.9 * figure["natural"], (
                f"{name}: figure {index + 1} is shown at {figure['shown']:.0f} of its {figure['natural']} px")
        page.screenshot(path=str(shots / f"{name}.png"))
        driven = DRIVE[name](page, panel, shots) if name in DRIVE else ""
    except Exception:
        page.screenshot(path=str(shots / f"FAILED-{name}-open.png"))  # before the tab is closed
        raise
    finally:
        _close(page, lab)
    report_line(request.config, f"\nbrowser: {name} ran clean, {len(figures)} figures non-blank at full width"
                                f"{'; ' + driven if driven else ''} ({time.monotonic() - start:.1f} s)")


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
