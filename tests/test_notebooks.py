"""Lecture notebooks: Jupytext pairing, no committed outputs, and the exact ones (LECTURE) executed on fresh kernels.

Every ``notebooks/*.ipynb`` (the tiny-GPT ones included) must be paired with its ``py:percent`` source, in sync,
committed without outputs, and start with the Colab set-up cell from ``course_lib.lesson.colab``.
The notebooks in ``LECTURE`` (they train nothing) are executed here (restart and run all) with nbclient; a cell error,
any stderr output or a printed ``...Warning`` fails the test, and the lecture's numbers are read back
from the executed notebook's namespace (names or expressions evaluated after the last cell, some of
them acting on an explorer's widgets as a student would) and from what it displayed, widget state
included. Every figure must be non-blank and at most ``MAX_FIGURE_PX`` wide, so that JupyterLab
shows it at full size. The tiny-GPT notebooks are executed by their own test module (test_tinygpt_notebooks.py).
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
import shutil
import tempfile
import time
import tomllib
import unicodedata
from datetime import datetime

import jupytext
import nbformat
import pytest
from conftest import ROOT, keep_executed, report_line
from nbclient import NotebookClient
from traitlets.config import Config

from course_lib.lesson.colab import SETUP_CELL

NOTEBOOKS = ROOT / "notebooks"
LECTURE = [
    "00_start_here",
    "01_bradley_terry",
    "02_dpo_margins",
    "03_the_regularised_objective",
    "04_group_baselines",
    "05_from_advantages_to_an_update",
    "06_baseline_bias_enumeration",
    "07_memory_and_rollout_budgets",
    "13_the_passport",
    "19_closing",
]
PAIRED = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) or LECTURE
MARK = "@@NAMESPACE@@"
# JupyterLab's output area is about 1,000 px wide at a 1,400 px window with the file browser open:
# wider figures are scaled down (legends of 5 px). 960 px leaves room for the prompt column.
MAX_FIGURE_PX = 960
WARNING = re.compile(r"\b\w*Warning\b|Traceback \(most recent call last\)")
TIMINGS: dict[str, float] = {}
DETAIL: dict[str, dict] = {}


def _cells(nb) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source.strip()) for cell in nb.cells]


@pytest.mark.parametrize("name", PAIRED)
def test_notebook_is_paired_in_sync_and_has_no_outputs(name):
    ipynb, py = NOTEBOOKS / f"{name}.ipynb", NOTEBOOKS / f"{name}.py"
    assert py.exists(), f"{ipynb.name} has no py:percent source {py.name}; run `make sync`"
    committed = nbformat.read(ipynb, as_version=4)
    source = jupytext.read(py)
    assert "py:percent" in committed.metadata.get("jupytext", {}).get("formats", ""), (
        f"{ipynb.name} is not paired with a py:percent file"
    )
    assert _cells(committed) == _cells(source), f"{ipynb.name} and {py.name} differ: run `make sync`"
    for cell in committed.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{ipynb.name} is committed with outputs"
            assert cell.execution_count is None, f"{ipynb.name} is committed with execution counts"


def test_every_source_has_its_notebook():
    for py in NOTEBOOKS.glob("*.py"):
        assert (NOTEBOOKS / f"{py.stem}.ipynb").exists(), f"{py.name} has no paired .ipynb: run `make sync`"
    for name in LECTURE:
        assert (NOTEBOOKS / f"{name}.py").exists(), f"lecture notebook {name} is missing"


@pytest.mark.parametrize("name", PAIRED)
def test_first_cell_is_the_colab_setup_cell(name):
    first = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells[0]
    assert first.cell_type == "code"
    assert first.source.strip() == SETUP_CELL.strip(), (
        f"{name}: the first cell must be course_lib.lesson.colab.SETUP_CELL (copy it, then `make sync`)"
    )


def _display_width(line: str) -> int:
    """A line's width as ruff's E501 counts it: East Asian wide characters 2, combining marks 0, the rest 1."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


@pytest.mark.parametrize("name", PAIRED)
def test_only_markdown_table_rows_exceed_the_line_length(name):
    """ruff skips E501 in notebooks/*.py (pyproject.toml) only because a markdown table row cannot wrap: code,
    comments and prose keep to the project's line length."""
    limit = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["line-length"]
    lines = (NOTEBOOKS / f"{name}.py").read_text(encoding="utf-8").splitlines()
    over = [f"line {i}: {line[:50]}…" for i, line in enumerate(lines, 1)
            if _display_width(line) > limit and not line.startswith("# |")]
    assert not over, f"{name}.py has lines over {limit} characters that are not markdown table rows: {over}"


def _library_names() -> set[str]:
    import inspect

    from course_lib.formulas import advantages, budgets, kl, policy_loss, preference
    from course_lib.tinygpt import device

    names = set()
    for mod in (preference, advantages, policy_loss, kl, budgets, device):
        names |= {n for n, obj in vars(mod).items()
                  if not n.startswith("_") and inspect.isfunction(obj) and obj.__module__ == mod.__name__}
    return names


@pytest.mark.parametrize("name", [*LECTURE[1:], "10_the_kl_term"])
def test_lecture_notebook_has_the_teaching_shape(name):
    """Goals, derivation checked against course_lib (never a fork of it), an explorer, check-yourself."""
    text = (NOTEBOOKS / f"{name}.py").read_text(encoding="utf-8")
    assert "After this notebook you will be able to" in text
    assert re.search(r"^from course_lib\.[\w.]+ import", text,
                     re.M), "the notebook must check itself against course_lib"
    forks = {m for m in re.findall(r"^def (\w+)\(", text, re.M)} & _library_names()
    assert not forks, f"{name} redefines course_lib functions {forks}: import them instead"
    assert "widgets." in text and "display(" in text, "one ipywidgets explorer per notebook"
    assert "## Check yourself" in text and text.count("<details><summary>Answer</summary>") >= 3
    assert "predict(" in text, "ask the student to predict before a key result (course_lib.lesson.explore.predict)"
    assert "## Your turn" in text and "# your code here" in text, "a short exercise with its answer"


@pytest.mark.parametrize("name", LECTURE)
def test_lecture_section_numbers_are_pointers_only(name):
    """A student without the lecture must not be sent to it: § appears only where it is marked a pointer."""
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    for cell in nb.cells[1:]:
        for line in cell.source.splitlines():
            if "§" not in line:
                continue
            if name == "00_start_here":  # the two maps carry a column headed "lecture § (pointer)"
                assert line.lstrip("# ").startswith("|") or "point to the sections" in line, line
            else:
                assert "Pointer for readers" in line, f"{name}: a § reference outside the pointer line: {line!r}"


def test_predict_keeps_the_answer_until_reveal():
    from course_lib.lesson.explore import predict

    box = predict("2 + 2?", ["3", "4"], "4", "Four.")
    _, choice, button, verdict = box.children
    assert choice.value is None and verdict.value == ""
    button.click()
    assert "Commit to a prediction first" in verdict.value
    choice.value = "3"
    button.click()
    assert "✘" in verdict.value and "4" in verdict.value and "Four." in verdict.value
    choice.value = "4"
    button.click()
    assert "✔" in verdict.value
    with pytest.raises(ValueError, match="answer must be one of options"):
        predict("q", ["a", "b"], "c", "")
    with pytest.raises(ValueError, match="options must hold at least two"):
        predict("q", ["a"], "a", "")


# ---------------------------------------------------------------------------------------------
# Predictions ask before they tell. The convention, checked statically on the py:percent
# sources (all code cells read as one stream, in order; markdown cells and comments ignored):
# - a *prediction* is a call ``predict(`` (``course_lib.lesson.explore.predict``, the course's one widget);
# - a *reveal* is what shows a result: ``print(``, ``plt.show(`` or ``display(`` of anything but a
#   prediction;
# - a *run* is a training call (``train_*(``, ``*trainer.train(``, or a notebook's run helper ``*_run(``);
#   ``sft_start`` (the shared start, not a lesson) is not one.
# Rule 1: between the last reveal before a run and the first reveal after it there is a prediction, so
#   the student commits before any number of that run is on screen (its answer may be computed from the
#   run: the widget keeps it hidden until Reveal).
# Rule 2: a markdown cell that asks in prose ("Predict first", "Predict before", "*Predict*:" or ",") outside a
#   collapsed <details> answer is followed by a prediction before the next reveal and before the next
#   section heading.
PREDICTION = re.compile(r"\bpredict\(")
REVEAL = re.compile(r"\bprint\(|\bplt\.show\(|\bdisplay\((?!predict\()")
RUN = re.compile(r"\b(?:train_(?!loop)\w+|\w*trainer\.train|\w+_run)\(")
PROSE_ASK = re.compile(r"\bpredict (?:first|before)\b|\*predict\*[:,]", re.I)
ASKING = sorted(p.stem for p in NOTEBOOKS.glob("*.py"))


def _code_stream(nb) -> tuple[str, list[int]]:
    """The code cells' sources joined (comments blanked), and where each cell starts in the stream."""
    text, starts = "", []
    for cell in nb.cells:
        starts.append(len(text))
        if cell.cell_type == "code":
            text += re.sub(r"#[^\n]*", lambda m: " " * len(m.group()), cell.source) + "\n"
    return text, starts


@pytest.mark.parametrize("name", ASKING)
def test_every_run_and_every_prose_question_has_a_prediction_before_its_reveal(name):
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    code, starts = _code_stream(nb)
    reveals = [m.start() for m in REVEAL.finditer(code)]
    predictions = [m.start() for m in PREDICTION.finditer(code)]
    for run in RUN.finditer(code):
        if code[:run.start()].rstrip().endswith("def"):
            continue  # the helper's definition, not a call
        before = max([r for r in reveals if r < run.start()], default=-1)
        after = min([r for r in reveals if r > run.start()], default=len(code))
        assert any(before < p < after for p in predictions), (
            f"{name}: the run {run.group()} … is revealed (…{code[after:after + 60]!r}) with no predict( since the "
            "last reveal: add a prediction widget before its first print")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown" or "<details>" in cell.source or not PROSE_ASK.search(cell.source):
            continue
        heading = next((starts[j] for j in range(i + 1, len(nb.cells))
                        if nb.cells[j].cell_type == "markdown" and re.search(r"^#{1,3} ", nb.cells[j].source, re.M)),
                       len(code))
        first_reveal = min([r for r in reveals if r >= starts[i]], default=len(code))
        asked = [p for p in predictions if starts[i] <= p]
        assert asked and asked[0] < min(first_reveal, heading), (
            f"{name}: the prose question {PROSE_ASK.search(cell.source).group()!r} in cell {i} is answered on screen "
            "before any predict( widget: add one before the reveal")


# ---------------------------------------------------------------------------------------------
# Execution of LECTURE. For each notebook: the variables read back from its namespace, and text
# that must appear in what it displays (the lecture's rounding).

# Names, or expressions evaluated in order after the notebook ran (an expression may act on an
# explorer's widgets the way a student would, then read what it shows).
NAMESPACE = {
    "00_start_here": ["report", "checksum", "taste"],
    "01_bradley_terry": ["sigma_1", "sigma_2", "gap_75", "rm_loss", "r_chosen", "r_rejected", "probit_75",
                         "[gap_slider.value, gap_slider.min, gap_slider.step]",
                         "[rate_slider.value, rate_slider.min, rate_slider.step]",
                         "explorer_line.value",
                         "[setattr(gap_slider, 'value', 1.23), explorer_line.value, rate_slider.value][1:]",
                         "[setattr(rate_slider, 'value', 0.6), explorer_line.value, gap_slider.value][1:]"],
    "02_dpo_margins": ["z_I", "loss_I", "slope_I", "z_II", "slope_II", "z_beta05", "loss_beta05",
                       "slope_beta05", "reward_w", "reward_l", "h_cross", "explorer_text.value"],
    "03_the_regularised_objective": ["pi_ref", "reward", "beta", "pi_star", "J_star", "perturbation_gap",
                                     "reward_recovery_error", "bt_cancel_error", "dpo_fit_error", "uncovered_error",
                                     "mode_seeking", "mode_covering", "target_sd", "optimum_text.value"],
    "04_group_baselines": ["mean_r", "std_r", "adv_plus", "adv_minus", "adv_sum", "adv", "rloo",
                           "p_zero_var", "ddof_ratio", "constant_sgd", "constant_adam", "std_adam",
                           "clipped_adam", "advantage_text.value",
                           "[globals().__setitem__('_ticks', []), globals().__setitem__('figure_png', "
                           "(lambda f, _png=figure_png: (_ticks.append(list(f.axes[0].get_xticks())), _png(f))[1]))]",
                           "[setattr(reward_box, 'value', '1, 0, 0, 1'), _ticks[-1]][1]",
                           "[setattr(reward_box, 'value', '0.1, 0.1, 0.1'), advantage_text.value][1]",
                           "__import__('base64').b64encode(advantage_plot.value).decode()"],
    "05_from_advantages_to_an_update": ["seq_mean", "tok_mean", "const_mean", "L_max", "clip_gradients",
                                         "length_bias_ratio", "trainer_gap", "grad_gap", "clip_fraction",
                                         "[t.get_text().strip() for ax in clip_fig.axes for t in ax.texts]",
                                         "bias_text.value"],
    "06_baseline_bias_enumeration": ["true_grad", "full_mean_grad", "loo_grad", "rows", "mc", "grpo_grad",
                                     "se_100", "se_1000", "bias_text.value",
                                     "float((library_grad - by_hand).abs().max())"],
    "07_memory_and_rollout_budgets": ["trainable_gib", "frozen_gib", "ppo_gib", "dpo_gib", "ratio_mem",
                                      "critic_share", "tokens", "gen_s", "gen_min", "upd_min", "time_ratio",
                                      "budget_text.value",
                                      "[(w.description, w.style.description_width) for w in "
                                      "(size_slider, length_slider, throughput_slider, mfu_slider)]",
                                      "[setattr(coupled, 'value', True), budget_text.value][1]"],
    "13_the_passport": ["per_completion", "per_token", "constant", "easy_share", "recipe_1", "recipe_2",
                        "same_policy", "course_unit"],
    "19_closing": ["entries", "takeaways", "contract_text.value"],
}
SHOWN = {
    "00_start_here": ["0.731", "0.6118", "0.0577", "269.2 GiB"],
    "01_bradley_terry": ["σ(1) = 0.731", "σ(2) = 0.881", "log 3 = 1.099", "mean reward-model loss =",
                         "1.099 under the logistic link, 0.674 under the probit link",
                         " 3 wins of  4, λ = 0: fitted gap  1.099", "30 wins of 40, λ = 0: fitted gap  1.099",
                         " 4 wins of  4, λ = 0: fitted gap    inf"],
    "02_dpo_margins": ["z = 0.170   loss = 0.6118", "slope |dL/dz| = 0.4576", "pair II: z = 0.065",
                       "slope = 0.4838", "z = 0.85   loss = 0.356   slope = 0.299"],
    "03_the_regularised_objective": ["KL(π*‖π_ref) = 0.6645", "competitors beating π*: 0", "20 pairs"],
    "04_group_baselines": ["mean = 0.375   std = 0.4841", "A+ = 1.291   A− = -0.775", "sum of advantages = 0.0",
                           "= 0.0577", "√(7/8) = 0.9354", "zero_variance_groups([0.1, 0.1, 0.1]) = True",
                           "float32, two groups of eight 0.1s: [True, True]",
                           "p = 0.9: wasted groups 43.0% at G = 8, 3.4% at G = 32"],
    "05_from_advantages_to_an_update": ["response mean = 1.0   token mean = 0.5",
                                         "A = −1, ρ = 1.5: objective -1.50, dq/dρ = -1.0, clipped: False"],
    "06_baseline_bias_enumeration": ["256 groups", "full mean 0.18375", "leave-one-out 0.2100"],
    "07_memory_and_rollout_budgets": ["trainable copy 119.7 GiB", "frozen bf16 copy 14.96 GiB",
                                      "PPO 269.2 GiB   DPO 134.6 GiB   ratio 2.00", "critic = 44%",
                                      "rollout tokens 8,192,000", "4890.2 s = 81.5 min",
                                      "2.076444 min", "ratio 39.2511"],
    "13_the_passport": ["per completion (sequence_mean) = 1.00   per token (token_mean) = 0.50",
                        "identical policies: True", "averaging unit: token_mean"],
    "19_closing": ["1.099   (notebook 01)", "0.6118   (notebook 02)", "0.0577 of the time   (notebook 04)",
                   "269.2 vs 134.6 GiB   (notebook 07)", "39.3 ×   (notebook 07)"],
}


def _texts(outputs) -> list[tuple[str, str]]:
    """(kind, text) for every output: kind is the stream name, 'error', 'data' or 'markdown'."""
    found = []
    for out in outputs:
        if out.get("output_type") == "stream":
            found.append((out["name"], out["text"]))
        elif out.get("output_type") == "error":
            found.append(("error", f"{out['ename']}: {out['evalue']}"))
        elif "data" in out:
            found.append(("data", str(out["data"].get("text/plain", ""))))
            if "text/markdown" in out["data"]:
                found.append(("markdown", str(out["data"]["text/markdown"])))
    return found


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def _check_figure(png: bytes, where: str) -> None:
    """Not blank (some pixels differ, not fully transparent) and narrow enough to show at full size."""
    import matplotlib.image as mpimg

    width, _ = _png_size(png)
    assert width <= MAX_FIGURE_PX, f"{where}: a figure {width} px wide is shrunk in JupyterLab (≤ {MAX_FIGURE_PX})"
    pixels = mpimg.imread(io.BytesIO(png), format="png")
    assert pixels.shape[-1] < 4 or pixels[..., 3].max() > 0, f"{where}: a fully transparent figure"
    assert float(pixels[..., :3].std()) > 0.01, f"{where}: a blank figure"


def _figures(nb) -> list[bytes]:
    """Every PNG the notebook shows: inline figures and ``ipywidgets.Image`` values in the widget state."""
    pngs = [base64.b64decode(out["data"]["image/png"]) for cell in nb.cells if cell.cell_type == "code"
            for out in cell.outputs if "image/png" in out.get("data", {})]
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    for model in state.get("state", {}).values():
        if model.get("model_name") == "ImageModel":
            pngs += [base64.b64decode(b["data"]) for b in model.get("buffers", []) if b.get("path") == ["value"]]
    return pngs


def _cell_seconds(nb, started) -> dict:
    """Kernel start-up lag and the slowest cells, from nbclient's record_timing metadata."""
    def stamp(value):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))

    cells = []
    for index, cell in enumerate(nb.cells):
        timing = cell.metadata.get("execution", {})
        if "iopub.status.busy" in timing and "iopub.status.idle" in timing:
            busy, idle = stamp(timing["iopub.status.busy"]), stamp(timing["iopub.status.idle"])
            cells.append((index, busy, (idle - busy).total_seconds()))
    if not cells:
        return {}
    slowest = sorted(cells, key=lambda c: -c[2])[:3]
    return {"startup_s": round((cells[0][1] - started).total_seconds(), 2),
            "slowest_cells": {str(i): round(d, 2) for i, _, d in slowest}}


def _execute(name: str):
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    names = json.dumps(NAMESPACE[name])
    probe = (
        "import json as _json\n"
        f"print({MARK!r} + _json.dumps({{_k: eval(_k, globals()) for _k in {names}}}, "
        "default=lambda o: o.tolist() if hasattr(o, 'tolist') else str(o)))"
    )
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    # IPC sockets in a private folder: TCP ports picked at random can race with other kernels
    # started on the same machine at the same moment (a kernel that loses the race hangs).
    sockets = tempfile.mkdtemp(prefix="nbk")
    client = NotebookClient(
        nb, timeout=150, kernel_name="python3", record_timing=True, shutdown_kernel="immediate",
        resources={"metadata": {"path": str(NOTEBOOKS)}},
        config=Config({"KernelManager": {"transport": "ipc", "ip": f"{sockets}/k"}}),
    )
    keep_executed(client, name)  # for the site test
    start, started = time.perf_counter(), datetime.now().astimezone()
    client.execute()  # a fresh kernel: restart and run all; raises CellExecutionError on any error
    TIMINGS[name] = time.perf_counter() - start
    shutil.rmtree(sockets, ignore_errors=True)
    DETAIL[name] = _cell_seconds(nb, started)
    outputs = [out for cell in nb.cells[:-1] if cell.cell_type == "code" for out in cell.outputs]
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    widget_outputs = [
        out for model in state.get("state", {}).values() if model.get("model_name") == "OutputModel"
        for out in model["state"].get("outputs", [])
    ]
    widget_texts = [("stdout", model["state"].get("value", "")) for model in state.get("state", {}).values()
                    if model.get("model_name") == "HTMLModel"]
    probe_text = "".join(t for kind, t in _texts(nb.cells[-1].outputs) if kind == "stdout")
    namespace = json.loads(probe_text.split(MARK, 1)[1])
    for index, png in enumerate(_figures(nb)):
        _check_figure(png, f"{name}, figure {index + 1}")
    return namespace, _texts(outputs), _texts(widget_outputs) + widget_texts


def close(value, expected, digits):
    """Equal at the lecture's rounding: |value − expected| ≤ half a unit in the last digit."""
    return math.isclose(value, expected, abs_tol=0.5 * 10**-digits + 1e-12)


def check_00(ns, shown, widgets):
    import torch

    from course_lib.tinygpt.device import resolve_device

    report = ns["report"]
    assert report["torch"] == torch.__version__
    assert report["device"] == resolve_device("auto").type
    assert report["colab"] == "no" and report["course_lib"] != "not installed"
    assert math.isclose(ns["checksum"], 1.0, rel_tol=1e-4)
    from course_lib.lesson.course_map import notebook_map

    assert notebook_map() in shown, "notebook 00 shows the course map from course_lib.lesson.course_map"


def check_01(ns, shown, widgets):
    assert close(ns["sigma_1"], 0.731, 3) and close(ns["sigma_2"], 0.881, 3)
    assert close(ns["gap_75"], 1.099, 3) and math.isclose(ns["gap_75"], math.log(3), rel_tol=1e-12)
    gaps = [w - lose for w, lose in zip(ns["r_chosen"], ns["r_rejected"], strict=True)]
    expected = sum(math.log1p(math.exp(-g)) for g in gaps) / len(gaps)
    assert math.isclose(ns["rm_loss"], expected, rel_tol=1e-12)
    assert f"mean reward-model loss = {expected:.4f}" in shown
    from statistics import NormalDist

    assert math.isclose(ns["probit_75"], NormalDist().inv_cdf(0.75), rel_tol=1e-12)
    for k, n in ((3, 4), (30, 40), (4, 4)):  # the regularised fit solves k − n·σ(d) − d = 0 and shrinks the gap
        d = float(re.search(rf"{k:>2} wins of {n:>2}, λ = 1: fitted gap +([-\d.]+)", shown).group(1))
        assert abs(k - n / (1 + math.exp(-d)) - d) < 2e-3 and 0 < d < math.log(3)
    # The explorer starts at the lesson's values, on its sliders' step grids (a value off the grid is
    # snapped by the browser, which then rewrote the other slider: 0.731 → 0.730 → gap 0.99).
    for value, low, step in (ns["[gap_slider.value, gap_slider.min, gap_slider.step]"],
                             ns["[rate_slider.value, rate_slider.min, rate_slider.step]"]):
        assert abs((value - low) / step - round((value - low) / step)) < 1e-6, (value, low, step)
    assert ns["[gap_slider.value, gap_slider.min, gap_slider.step]"][0] == 1.0
    assert ns["[rate_slider.value, rate_slider.min, rate_slider.step]"][0] == 0.731
    assert "gap Δr = +1.00  ↔  win rate 0.731" in ns["explorer_line.value"]
    # moving one slider sets the other to its rounded value, and the line prints both sliders
    line, rate = ns["[setattr(gap_slider, 'value', 1.23), explorer_line.value, rate_slider.value][1:]"]
    assert rate == round(1 / (1 + math.exp(-1.23)), 3) and f"gap Δr = +1.23  ↔  win rate {rate:.3f}" in line
    line, gap = ns["[setattr(rate_slider, 'value', 0.6), explorer_line.value, gap_slider.value][1:]"]
    assert gap == round(math.log(0.6 / 0.4), 2) and f"gap Δr = {gap:+.2f}  ↔  win rate 0.600" in line


def check_02(ns, shown, widgets):
    assert close(ns["z_I"], 0.170, 3) and close(ns["loss_I"], 0.6118, 4) and close(ns["slope_I"], 0.4576, 4)
    assert close(ns["z_II"], 0.065, 3) and close(ns["slope_II"], 0.4838, 4)
    assert close(ns["z_beta05"], 0.85, 2) and close(ns["loss_beta05"], 0.356, 3)
    assert close(ns["slope_beta05"], 0.299, 3)
    assert math.isclose(ns["reward_w"] - ns["reward_l"], ns["z_I"], rel_tol=1e-9)
    assert "loss = 0.6118" in ns["explorer_text.value"], "the β explorer must print the DPO loss of pair I at start"
    # the crossing of the parameter-level weights β·σ(−βh) for β = 0.5 and β = 0.1, shown in the figure
    def weight_gap(h):
        return 0.5 / (1 + math.exp(0.5 * h)) - 0.1 / (1 + math.exp(0.1 * h))

    low, high = 0.1, 20.0
    for _ in range(60):
        low, high = (low, (low + high) / 2) if weight_gap((low + high) / 2) < 0 else ((low + high) / 2, high)
    assert abs(ns["h_cross"] - low) < 0.1 and f"while h < {ns['h_cross']:.1f}" in shown


def check_03_objective(ns, shown, widgets):
    import numpy as np

    pi_ref, reward, beta = np.array(ns["pi_ref"]), np.array(ns["reward"]), ns["beta"]
    # π* from the closed form, computed here independently of course_lib
    w = pi_ref * np.exp(reward / beta)
    expected = w / w.sum()
    np.testing.assert_allclose(ns["pi_star"], expected, atol=1e-12)
    kl_star = float((expected * np.log(expected / pi_ref)).sum())
    assert ns["J_star"] == pytest.approx(beta * np.log(w.sum()), abs=1e-12)
    assert ns["J_star"] == pytest.approx(expected @ reward - beta * kl_star, abs=1e-12)
    assert ns["perturbation_gap"] > 0  # no competitor reached π*'s objective
    assert ns["reward_recovery_error"] < 1e-12 and ns["bt_cancel_error"] < 1e-12
    assert ns["dpo_fit_error"] < 1e-6  # DPO on all pairs recovers π*
    assert ns["uncovered_error"] > 0.01  # ... and not when an answer is never compared
    # forward vs reverse on the two-mode target (modes at ±2, width 0.6)
    mu_rev, sigma_rev = ns["mode_seeking"]
    mu_fwd, sigma_fwd = ns["mode_covering"]
    assert abs(abs(mu_rev) - 2.0) < 1e-9 and abs(sigma_rev - 0.6) < 1e-9
    assert abs(mu_fwd) < 1e-9 and abs(sigma_fwd - ns["target_sd"]) < 0.1
    assert f"β = 0.5: E_π*[r] = {expected @ reward:.4f}" in ns["optimum_text.value"], (
        "the β explorer must show π*'s numbers at start")


def check_03(ns, shown, widgets):
    assert close(ns["mean_r"], 0.375, 3) and close(ns["std_r"], 0.4841, 4)
    assert close(ns["adv_plus"], 1.291, 3) and close(ns["adv_minus"], -0.775, 3)
    assert abs(sum(ns["adv"])) < 1e-12 and ns["adv_sum"] == 0.0
    assert close(ns["p_zero_var"], 0.0577, 4)
    assert math.isclose(ns["ddof_ratio"], math.sqrt(7 / 8), rel_tol=1e-12)
    assert math.isclose(ns["rloo"][0], 8 / 7 * (1 - 0.375), rel_tol=1e-12)
    # a constant advantage factor: a different trajectory under SGD, the same one under AdamW
    assert ns["constant_adam"] < 1e-6 and ns["constant_sgd"] > 0.1
    assert ns["std_adam"] > 0.05, "per-group std survives Adam"
    assert ns["clipped_adam"] > 0.05, "a gradient clip that acts on some steps breaks the cancellation"
    assert "GRPO: [ 1.291 -0.775" in ns["advantage_text.value"], "the explorer starts at the lesson's group"
    ticks = ns["[setattr(reward_box, 'value', '1, 0, 0, 1'), _ticks[-1]][1]"]
    assert ticks == [0, 1, 2, 3], f"four rewards need four integer ticks, got {ticks}"
    assert "zero-variance group" in ns["[setattr(reward_box, 'value', '0.1, 0.1, 0.1'), advantage_text.value][1]"]
    _check_figure(base64.b64decode(ns["__import__('base64').b64encode(advantage_plot.value).decode()"]),
                  "03 explorer, all-equal group")


def check_03b(ns, shown, widgets):
    assert ns["seq_mean"] == 1.0 and ns["tok_mean"] == 0.5
    assert math.isclose(ns["const_mean"], 2.0 / (2 * ns["L_max"]), rel_tol=1e-12)
    assert ns["clip_gradients"] == [0.0, -1.0, -1.0], "for A < 0 only ρ < 1 − ε_low loses its gradient"
    assert math.isclose(ns["length_bias_ratio"], 10.0, rel_tol=1e-9), "20 tokens against 2 under the sequence mean"
    assert ns["grad_gap"] < 1e-4 and ns["trainer_gap"] < 1e-5, "the walked update must equal the trainer's policy_step"
    assert 0 < ns["clip_fraction"] < 1
    labels = set(ns["[t.get_text().strip() for ax in clip_fig.axes for t in ax.texts]"])
    assert {"1 − ε_low = 0.8", "1 + ε = 1.2", "1 + ε_high = 1.28"} <= labels, f"unlabelled clip edges: {labels}"
    assert "ratio short/long: 10.0" in ns["bias_text.value"]


def check_04(ns, shown, widgets):
    p, g = 0.3, 8
    assert len(ns["rows"]) == 2**g
    assert math.isclose(ns["true_grad"], p * (1 - p), rel_tol=1e-12)
    assert math.isclose(ns["full_mean_grad"], (g - 1) * p * (1 - p) / g, rel_tol=1e-9)
    assert close(ns["full_mean_grad"], 0.18375, 5) and close(ns["loo_grad"], 0.21, 2)
    assert math.isclose(ns["loo_grad"], p * (1 - p), rel_tol=1e-9)
    (mean_full, se_full), (mean_loo, se_loo) = ns["mc"]
    assert abs(mean_full - 0.18375) < 4 * se_full and abs(mean_loo - 0.21) < 4 * se_loo
    assert abs(ns["grpo_grad"] - 0.21) > 0.05, "std normalisation should visibly change the expected update"
    # the check-yourself answer quotes this notebook's own simulated standard errors
    assert f"standard error of\n   {ns['se_1000']:.4f}" in shown and f"(s.e. {ns['se_100']:.4f})" in shown
    assert "full mean                   0.18375" in ns["bias_text.value"]
    # §6: GRPO at G = 2 keeps the whole gradient, and its loss is the contrastive pair, token by token
    assert "p = 0.3: GRPO at G = 2 → 0.2100   true p(1 − p) = 0.2100   full mean alone → 0.1050" in shown
    assert ns["float((library_grad - by_hand).abs().max())"] < 1e-12
    # §7: a correct answer's advantage, given an update: under-rated when hard, over-rated when easy
    assert ("p = 0.05: full mean +0.831 vs true +0.950" in shown
            and "p = 0.95: full mean +0.145 vs true +0.050" in shown)


def check_05(ns, shown, widgets):
    assert close(ns["trainable_gib"], 119.7, 1) and close(ns["frozen_gib"], 14.96, 2)
    assert close(ns["ppo_gib"], 269.2, 1) and close(ns["dpo_gib"], 134.6, 1)
    assert math.isclose(ns["ratio_mem"], 2.0, rel_tol=1e-12) and abs(ns["critic_share"] - 0.44) < 0.01
    assert ns["tokens"] == 8_192_000
    assert close(ns["gen_s"], 4890.2, 1) and close(ns["gen_min"], 81.5, 1)
    assert close(ns["upd_min"], 2.076444, 6) and close(ns["time_ratio"], 39.2511, 4)
    text = ns["budget_text.value"]
    assert "PPO 269.2" in text and "ratio 39.3" in text and "held fixed as the model grows" in text
    assert "dpo_cached_ref" not in text, "students see stage names, not the library's keys"
    for description, width in ns["[(w.description, w.style.description_width) for w in "
                                 "(size_slider, length_slider, throughput_slider, mfu_slider)]"]:
        assert width.endswith("px") and int(width[:-2]) >= 7 * len(description), f"label {description!r} is cut"
    assert "(scaled with model size)" in ns["[setattr(coupled, 'value', True), budget_text.value][1]"]


def check_09(ns, shown, widgets):
    assert ns["per_completion"] == 1.0 and ns["per_token"] == 0.5 and ns["constant"] == 0.25
    assert math.isclose(ns["easy_share"], 0.97**16 + 0.03**16, rel_tol=1e-12)
    text = (NOTEBOOKS / "13_the_passport.py").read_text(encoding="utf-8")
    # the check-yourself answer quotes the computed share and the resampling cost
    assert f"About {ns['easy_share']:.0%} of groups" in text
    assert f"about {1 - ns['easy_share']:.0%} of the batch" in text
    assert f"about {1 / (1 - ns['easy_share']):.1f}× the generation" in text
    assert ns["same_policy"] is True
    assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(ns["recipe_1"], ns["recipe_2"], strict=True))
    assert ns["course_unit"] == "token_mean", "the course's GRPO default unit changed: update section 6"
    assert "8 of 8 fields match" not in widgets and "0 of 8 fields match" in widgets


def check_11(ns, shown, widgets):
    from course_lib.lesson.sources import SOURCES

    assert [key for _, key in ns["entries"]] and {key for _, key in ns["entries"]} == set(SOURCES)
    years = [date[0] for date, _ in ns["entries"]]
    assert years == sorted(years), "the timeline is in date order"
    for _, key in ns["entries"]:  # every source is listed with its link
        assert SOURCES[key].url in shown, f"{key} is not listed"
    assert len(ns["takeaways"]) == 6
    assert "use: DPO, IPO, SimPO" in ns["contract_text.value"] and "Rafailov et al. 2023" in ns["contract_text.value"]


CHECKS = {"00_start_here": check_00, "01_bradley_terry": check_01, "02_dpo_margins": check_02,
          "03_the_regularised_objective": check_03_objective,
          "04_group_baselines": check_03, "05_from_advantages_to_an_update": check_03b,
          "06_baseline_bias_enumeration": check_04,
          "07_memory_and_rollout_budgets": check_05, "13_the_passport": check_09, "19_closing": check_11}


@pytest.fixture(scope="module")
def timing_report(request):
    yield TIMINGS
    if TIMINGS:
        total = sum(TIMINGS.values())
        parts = ", ".join(f"{k[:2]} {v:.1f}s" for k, v in TIMINGS.items())
        report_line(request.config, f"\nlecture notebooks executed in {total:.1f} s ({parts}); goal ≤ 60 s")
        (ROOT / "test-artifacts").mkdir(exist_ok=True)
        summary = {name: {"total_s": round(t, 2), **DETAIL.get(name, {})} for name, t in TIMINGS.items()}
        (ROOT / "test-artifacts" / "notebook-timings.json").write_text(json.dumps(summary, indent=1))


@pytest.mark.parametrize("name", LECTURE)
def test_lecture_notebook_runs_clean_and_shows_the_lecture_numbers(name, matplotlib_ready, timing_report):
    namespace, outputs, widget_outputs = _execute(name)
    for kind, text in outputs + widget_outputs:
        assert kind not in ("stderr", "error"), f"{name} shows {kind} output to students:\n{text}"
        assert not WARNING.search(text), f"{name} shows a warning to students:\n{text}"
    shown = "".join(text for kind, text in outputs if kind in ("stdout", "markdown"))
    for expected in SHOWN[name]:
        assert expected in shown, f"{name} does not display {expected!r}"
    widgets = "".join(text for kind, text in widget_outputs if kind == "stdout")
    CHECKS[name](namespace, shown, widgets)
