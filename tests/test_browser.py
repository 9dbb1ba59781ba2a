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

Each training notebook runs once per session: its lesson test (test_tinygpt_notebooks.py) runs it
in JupyterLab first, on the same worker (conftest groups them), and check 1 is asserted on what
that run showed (``jupyterlab_run.SEEN``); a notebook nobody ran yet is run here. The server, the
page and the Run All machinery live in tests/jupyterlab_run.py. Screenshots go to
``test-artifacts/browser/``. The server is stopped by its own PID. Skips with a reason only when
Chromium is not installed (``.ci/run`` installs it with apt-get).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import ROOT, report_line
from jupyterlab_run import EXERCISE, LECTURES, SEEN, browse, close_notebook, open_notebook

from course_lib.formulas.preference import bt_probability, dpo_terms, win_rate_to_gap

NOTEBOOKS = ROOT / "notebooks"
LECTURE = NOTEBOOKS / "02_dpo_margins.ipynb"


def _best_of_n_first_prompt() -> str:
    """08b's best-of-N explorer opens on held-out prompt 0: its text and its answer, from the task."""
    from course_lib.tinygpt.task import AdditionTask
    from course_lib.trainers.configs import get_config

    task = AdditionTask(get_config("cpu").task)
    a, b = task.heldout_pairs[0]
    return f"{task.prompt_text(a, b)}  (answer {a + b})"


# Each lecture notebook and the first readout of its explorer (the lesson's value), None without one.
# The regularised objective's line is π* for the lesson's π_ref, r and β = 0.5 (test_tinygpt_notebooks checks it
# against the closed form); 09's explorer starts with every field unanswered, none of run F's 8 matching.
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


@pytest.fixture(autouse=True)
def screenshot_on_failure(request, shots):
    """Keep a picture of the page when a browser test fails (test-artifacts/browser/FAILED-*.png)."""
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before and "page" in request.fixturenames:
        request.getfixturevalue("page").screenshot(path=str(shots / f"FAILED-{request.node.name}.png"))


def _slider(panel, page, label: str):
    return panel.locator(".widget-slider", has=page.locator(".widget-label", has_text=re.compile(f"^{label}$"))).first


def _wait_text(page, element, text: str) -> None:
    page.wait_for_function("([el, text]) => el.innerText.includes(text)",
                           arg=[element.element_handle(), text], timeout=45_000)



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
    """Run All in JupyterLab, then what the page shows. A training notebook whose lesson test ran it in
    JupyterLab earlier on this worker (``jupyterlab_run.lesson_run``) is checked on that same run."""
    seen = SEEN.pop(name, None)
    if seen is None:
        readout = FIRST_READOUT[name]
        seen = browse(page, lab, shots, name, readout() if callable(readout) else readout, DRIVE.get(name))
        how = ""
    elif seen.failure is not None:
        raise AssertionError(f"{name}: the run in JupyterLab (the lesson test's) failed: "
                             f"{seen.failure!r}") from seen.failure
    else:
        how = ", the lesson test's run"
    if seen.readout_error:
        raise AssertionError(seen.readout_error)
    assert not seen.errors, f"{name} shows error or stderr output:\n" + "\n".join(seen.errors)
    figures = seen.figures
    assert bool(figures) == (name not in FIGURELESS), f"{name} shows {len(figures)} figures"
    for index, figure in enumerate(figures):
        assert figure["natural"] > 0, f"{name}: figure {index + 1} did not load"
        assert figure["colours"] >= 2, f"{name}: figure {index + 1} is blank"
        assert figure["shown"] >= 0.9 * figure["natural"], (
            f"{name}: figure {index + 1} is shown at {figure['shown']:.0f} of its {figure['natural']} px")
    assert name not in DRIVE or seen.driven, f"{name}: the explorer was not driven"
    report_line(request.config, f"\nbrowser: {name} ran clean, {len(figures)} figures non-blank at full width"
                                f"{'; ' + seen.driven if seen.driven else ''} ({seen.seconds:.1f} s{how})")


@pytest.mark.browser
@pytest.mark.slow
def test_exercise_shows_the_nbgrader_validate_button(lab, page, shots):
    if not EXERCISE.exists():
        pytest.skip(f"{EXERCISE.relative_to(ROOT)} is not there yet (written by the assignment helper)")
    assert '"nbgrader"' in EXERCISE.read_text(), "the exercise notebook carries no nbgrader metadata"
    panel = open_notebook(page, lab, EXERCISE.name)
    try:
        button = panel.locator(".validate-button").first
        button.wait_for(timeout=30_000)
        assert "Validate" in button.inner_text()
        page.screenshot(path=str(shots / "q1_validate_button.png"))
    finally:
        close_notebook(page, lab)
