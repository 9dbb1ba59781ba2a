"""JupyterLab in headless Chromium, shared by the browser test and the tiny-GPT lesson tests.

A training notebook is executed once per test session: in JupyterLab, by Run All, as a student runs
it. ``run_in_lab`` records what the page showed (the browser test's checks: errors, figures, the
explorer's first readout) and, for a lesson test, evaluates the lesson's names in that same kernel
(attached with ``jupyter_client`` through the server's connection file) and keeps the executed
notebook (outputs as JupyterLab holds them, widget state from the kernel) for the site test.

Where Chromium or playwright is missing, ``available()`` is false: the lesson tests execute with
nbclient instead (tests/test_tinygpt_notebooks.py) and the browser tests skip with the reason.

Fixtures (session-scoped, imported into conftest): ``lab`` (a JupyterLab server over a scratch copy
of the notebooks), ``page`` (Chromium on it), ``shots`` (test-artifacts/browser/).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
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
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import EXECUTED, ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
NOTEBOOKS = ROOT / "notebooks"
EXERCISE = ROOT / "exercises" / "module14" / "q1_bradley_terry.ipynb"
LECTURES = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
MARK = "@@NAMESPACE@@"


def missing() -> str | None:
    """Why the browser cannot run here, or None."""
    if not CHROMIUM.exists():
        return f"Chromium is not installed at {CHROMIUM}: `apt-get install chromium` (.ci/run does)"
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is missing from .venv"
    return None


def available() -> bool:
    return missing() is None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str):
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read() or b"null")


@dataclass
class Lab:
    base: str
    token: str
    root: Path
    runtime: Path  # the server's runtime folder: the kernels' connection files

    def __iter__(self):  # (base_url, token, folder), as the browser test's helpers take it
        return iter((self.base, self.token, self.root))


@contextlib.contextmanager
def lab_server(root: Path, env: dict, log_path: Path, *args: str, timeout: float = 90):
    """A JupyterLab server over ``root`` on a free port of 127.0.0.1, with a fresh token and ``args``;
    yields ``(base_url, token)`` once it answers, and stops it by its own PID. Its output goes to
    ``log_path``, whose end a failed start reports."""
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", *args]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    with open(log_path, "w") as log:
        server = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    _get(f"{base}/api/status", token)
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"JupyterLab did not start: {Path(log_path).read_text()[-2000:]}") from None
                    time.sleep(0.5)
            yield base, token
        finally:
            os.kill(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(server.pid, signal.SIGKILL)
                server.wait()


@pytest.fixture(scope="session")
def lab(tmp_path_factory, shared_sft_start):  # the kernels read the session's SFT start (COURSE_CACHE)
    """A JupyterLab server over a scratch folder (one per pytest-xdist worker that needs it)."""
    if missing():
        pytest.skip(missing())
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
    runtime = root.parent / "lab-runtime"
    # The kernels inherit this process's environment, thread settings included (OMP_NUM_THREADS, as a
    # student's `make lab` does): the lesson tests read their numbers from these runs, and torch's
    # sums differ in the last bits between one thread and two, which changes a training run.
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings),
           "JUPYTERLAB_WORKSPACES_DIR": str(root.parent / "lab-workspaces"), "JUPYTER_RUNTIME_DIR": str(runtime),
           "COURSE_FAST": "1", "PYTHONPATH": str(ROOT)}
    with lab_server(root, env, root.parent / "jupyterlab.log", "--LabApp.news_url=None",
                    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                    "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: the test can wait for a ready kernel
                    timeout=60) as (base, token):
        try:
            yield Lab(base, token, root, runtime)
        finally:
            try:  # shut kernels down through the API before the server stops
                for kernel in _get(f"{base}/api/kernels", token) or []:
                    request = urllib.request.Request(
                        f"{base}/api/kernels/{kernel['id']}", method="DELETE",
                        headers={"Authorization": f"token {token}"},
                    )
                    urllib.request.urlopen(request, timeout=10).close()
            except OSError:
                pass


@pytest.fixture(scope="session")
def pw_session():
    """The worker's one playwright driver: its sync API may run only once per thread at a time, so
    JupyterLab's page and the site's browser (tests/test_site.py) both start Chromium from it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="session")
def page(lab, pw_session, tmp_path_factory):
    context = pw_session.chromium.launch_persistent_context(
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


@pytest.fixture(scope="session")
def shots(artifacts_dir):
    """test-artifacts/browser/, emptied of an earlier session's pictures (once: both workers use it)."""
    folder = artifacts_dir / "browser"
    folder.mkdir(exist_ok=True)
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"serial-{os.getpid()}"
    marker = folder / ".session"
    if not marker.exists() or marker.read_text() != run:
        for old in folder.glob("*.png"):
            old.unlink(missing_ok=True)
        marker.write_text(run)
    return folder


# The test running now: the lesson tests call ``execute`` (a plain function), which reaches the
# session's JupyterLab fixtures through it.
CURRENT: dict = {}


@pytest.fixture(autouse=True)
def _current_request(request):
    CURRENT["request"] = request
    yield
    CURRENT.pop("request", None)


def open_notebook(page, lab, name: str):
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


def close_notebook(page, lab) -> None:
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


def run_all(page, panel) -> None:
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
            const failed = panel.querySelector(
                ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']");
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


def wait_readout(page, panel, readout: str) -> None:
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


@dataclass
class Seen:
    """What one Run All in JupyterLab showed: the browser test's evidence."""

    name: str
    readout_error: str | None = None  # the explorer's first readout did not appear: why
    errors: list[str] = field(default_factory=list)  # texts of error or stderr outputs
    figures: list[dict] = field(default_factory=list)  # FIGURES_JS's record of every image
    seconds: float = 0.0
    driven: str = ""
    failure: BaseException | None = None  # the run itself failed (Run All, a dialog, a time-out)


# name -> Seen for the notebooks a lesson test ran in JupyterLab in this process (this worker): the
# browser test asserts on these instead of running the notebook a second time.
SEEN: dict[str, Seen] = {}


def browse(page, lab, shots, name: str, readout: str | None, drive=None, after=None) -> Seen:
    """Open ``name``, Run All, record what the page shows; ``drive(page, panel, shots)`` then moves an
    explorer and ``after(page)`` reads what it needs before the tab is closed (and its kernel stopped)."""
    start = time.monotonic()
    seen = Seen(name)
    panel = open_notebook(page, lab, f"{name}.ipynb")
    try:
        try:
            run_all(page, panel)
        except RunAllNeverStarted:  # seen once on a fresh environment's first JupyterLab start, under load
            page.screenshot(path=str(shots / f"RETRIED-{name}.png"))
            page.reload(wait_until="domcontentloaded")
            page.locator(".lm-TabBar-tab.lm-mod-current", has_text=f"{name}.ipynb").first.wait_for(timeout=60_000)
            panel = page.locator(".jp-NotebookPanel:visible").first
            panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=90_000)
            run_all(page, panel)
        if readout is not None:  # an HTML readout, or the printed lines of an Output widget
            try:
                wait_readout(page, panel, readout)
            except AssertionError as err:
                seen.readout_error = str(err)
        errors = panel.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        seen.errors = errors.all_inner_texts()
        seen.figures = page.evaluate(FIGURES_JS, panel.element_handle())
        page.screenshot(path=str(shots / f"{name}.png"))
        if drive is not None and not seen.readout_error and not seen.errors:
            seen.driven = drive(page, panel, shots)
        if after is not None:
            after(page)
    except Exception:
        page.screenshot(path=str(shots / f"FAILED-{name}-open.png"))  # before the tab is closed
        raise
    finally:
        close_notebook(page, lab)
    seen.seconds = time.monotonic() - start
    return seen


# ------------------------------------------------------------------ the lesson tests' side


def _kernel_client(lab: Lab, kernel_id: str):
    from jupyter_client import BlockingKernelClient

    client = BlockingKernelClient(connection_file=str(lab.runtime / f"kernel-{kernel_id}.json"))
    client.load_connection_file()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    return client


def _evaluate(client, code: str, timeout: float = 600) -> str:
    """Run ``code`` in the kernel (out of the notebook's history); its stdout, or an error with its traceback."""
    out, errors = [], []

    def hook(msg):
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream" and content["name"] == "stdout":
            out.append(content["text"])
        elif kind == "error":
            errors.append("\n".join(content["traceback"]))

    reply = client.execute_interactive(code, store_history=False, timeout=timeout, output_hook=hook)
    if reply["content"]["status"] != "ok" or errors:
        raise AssertionError("evaluating the lesson's names failed:\n" + "\n".join(errors))
    return "".join(out)


WIDGET_STATE = (  # what nbclient's store_widget_state keeps: every live widget's full state (no name left behind)
    "def _course_widget_state():\n"
    "    import json\n"
    "    try:\n        from ipywidgets import Widget\n    except ImportError:\n        return 'null'\n"
    "    return json.dumps(Widget.get_manager_state())\n"
    f"print({MARK!r} + _course_widget_state())\n"
    "del _course_widget_state"
)


def probe_source(names: list[str]) -> str:
    """The names (or expressions) evaluated in the notebook's namespace, in order, printed as JSON."""
    return ("import json as _json\n"
            f"print({MARK!r} + _json.dumps({{_k: eval(_k, globals()) for _k in {json.dumps(names)}}}, "
            "default=lambda o: o.tolist() if hasattr(o, 'tolist') else str(o)))")


def shown_outputs(cells) -> list[tuple[str, str]]:
    """(kind, text) of every output of ``cells``: a stream's name, "stderr" for an error, or "data"."""
    shown = []
    for cell in cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                shown.append((out["name"], out["text"]))
            elif out.get("output_type") == "error":
                shown.append(("stderr", f"{out['ename']}: {out['evalue']}"))
            elif "data" in out:
                shown.append(("data", str(out["data"].get("text/plain", ""))))
    return shown


def lesson_run(name: str, names: list[str]) -> tuple[dict, list[tuple[str, str]]]:
    """Execute ``name`` in JupyterLab (Run All, ``COURSE_FAST=1``) and read the lesson back from it.

    Returns ``(namespace, shown)`` as the nbclient path does: ``names`` evaluated in the notebook's
    kernel after its last cell, and every output (kind, text) of its cells. The executed notebook is
    kept for the site (``EXECUTED``), and what the page showed in ``SEEN`` for the browser test.
    """
    import nbformat

    request = CURRENT["request"]
    lab_, page_, shots_ = (request.getfixturevalue(f) for f in ("lab", "page", "shots"))
    result: dict = {}

    def harvest(page):
        try:
            _harvest(page)
        except Exception as err:  # noqa: BLE001 - the lesson test's failure, not the page's: raised below
            result["error"] = err

    def _harvest(page):
        nb = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.toJSON()")
        kernel_id = page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.id")
        for cell in nb["cells"]:  # JupyterLab writes null for absent fields (attachments); nbformat omits them
            for key in [k for k, v in cell.items() if v is None and k != "execution_count"]:
                del cell[key]
        nb = nbformat.reads(json.dumps(nb), as_version=4)
        client = _kernel_client(lab_, kernel_id)
        try:
            state = json.loads(_evaluate(client, WIDGET_STATE).split(MARK, 1)[1])
            if state and state["state"]:
                nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": state}
            EXECUTED.mkdir(parents=True, exist_ok=True)
            nbformat.write(copy.deepcopy(nb), EXECUTED / f"{name}.ipynb")  # the site is built from FAST runs
            result["nb"] = nb
            result["namespace"] = json.loads(_evaluate(client, probe_source(names)).split(MARK, 1)[1])
        finally:
            client.stop_channels()

    import test_browser  # the explorer's first readout is the browser test's to say

    readout = test_browser.FIRST_READOUT.get(name)
    readout = readout() if callable(readout) else readout
    try:
        SEEN[name] = browse(page_, lab_, shots_, name, readout, after=harvest)
    except Exception as err:
        SEEN[name] = Seen(name, failure=err)
        raise
    if "error" in result:
        raise result["error"]
    nb = result["nb"]
    failed = [out for cell in nb.cells for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not failed, f"{name}: a cell failed in JupyterLab:\n" + "\n".join(
        f"{o['ename']}: {o['evalue']}" for o in failed)
    unrun = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and cell.source.strip()
             and cell.get("execution_count") is None]
    assert not unrun, f"{name}: cells {unrun} did not run"
    return result["namespace"], shown_outputs(nb.cells)
