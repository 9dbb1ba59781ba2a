"""Lecture notebooks: Jupytext pairing, no committed outputs, and 00–05 executed on fresh kernels.

Every ``notebooks/*.ipynb`` (06–08 included) must be paired with its ``py:percent`` source, in sync,
committed without outputs, and start with the Colab set-up cell from ``course_lib.colab``.
Notebooks 00–05 are executed here (restart and run all) with nbclient; a cell error, any stderr
output or a printed ``...Warning`` fails the test, and the lecture's numbers are read back from the
executed notebook's namespace and from what it displayed. The tiny-GPT notebooks 06–08 are executed
by their own test module.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
import time
from datetime import datetime

import jupytext
import nbformat
import pytest
from conftest import ROOT, report_line
from nbclient import NotebookClient
from traitlets.config import Config

from course_lib.colab import SETUP_CELL

NOTEBOOKS = ROOT / "notebooks"
LECTURE = [
    "00_start_here",
    "01_bradley_terry",
    "02_dpo_margins",
    "03_group_baselines",
    "04_baseline_bias_enumeration",
    "05_memory_and_rollout_budgets",
    "09_the_passport",
]
PAIRED = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) or LECTURE
MARK = "@@NAMESPACE@@"
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
        f"{name}: the first cell must be course_lib.colab.SETUP_CELL (copy it, then `make sync`)"
    )


def _library_names() -> set[str]:
    import importlib
    import inspect

    names = set()
    for module in ("preference", "advantages", "policy_loss", "budgets", "device"):
        mod = importlib.import_module(f"course_lib.{module}")
        names |= {n for n, obj in vars(mod).items()
                  if not n.startswith("_") and inspect.isfunction(obj) and obj.__module__ == mod.__name__}
    return names


@pytest.mark.parametrize("name", LECTURE[1:])
def test_lecture_notebook_has_the_teaching_shape(name):
    """Goals, derivation checked against course_lib (never a fork of it), an explorer, check-yourself."""
    text = (NOTEBOOKS / f"{name}.py").read_text(encoding="utf-8")
    assert "After this notebook you will be able to" in text
    assert re.search(r"^from course_lib\.\w+ import", text, re.M), "the notebook must check itself against course_lib"
    forks = {m for m in re.findall(r"^def (\w+)\(", text, re.M)} & _library_names()
    assert not forks, f"{name} redefines course_lib functions {forks}: import them instead"
    assert "widgets." in text and "display(" in text, "one ipywidgets explorer per notebook"
    assert "## Check yourself" in text and text.count("<details><summary>Answer</summary>") >= 3


# ---------------------------------------------------------------------------------------------
# Execution of 00–05. For each notebook: the variables read back from its namespace, and text
# that must appear in what it displays (the lecture's rounding).

NAMESPACE = {
    "00_start_here": ["report", "checksum", "taste"],
    "01_bradley_terry": ["sigma_1", "sigma_2", "gap_75", "rm_loss", "r_chosen", "r_rejected"],
    "02_dpo_margins": ["z_I", "loss_I", "slope_I", "z_II", "slope_II", "z_beta05", "loss_beta05",
                       "slope_beta05", "reward_w", "reward_l"],
    "03_group_baselines": ["mean_r", "std_r", "adv_plus", "adv_minus", "adv_sum", "adv", "rloo",
                           "p_zero_var", "ddof_ratio", "seq_mean", "tok_mean", "const_mean", "L_max"],
    "04_baseline_bias_enumeration": ["true_grad", "full_mean_grad", "loo_grad", "rows", "mc", "grpo_grad"],
    "05_memory_and_rollout_budgets": ["trainable_gib", "frozen_gib", "ppo_gib", "dpo_gib", "ratio_mem",
                                      "critic_share", "tokens", "gen_s", "gen_min", "upd_min", "time_ratio"],
    "09_the_passport": ["per_completion", "per_token", "constant", "easy_share", "recipe_1", "recipe_2",
                        "same_policy", "course_unit"],
}
SHOWN = {
    "00_start_here": ["0.731", "0.6118", "0.0577", "269.2 GiB"],
    "01_bradley_terry": ["σ(1) = 0.731", "σ(2) = 0.881", "log 3 = 1.099", "mean reward-model loss ="],
    "02_dpo_margins": ["z = 0.170   loss = 0.6118", "slope |dL/dz| = 0.4576", "pair II: z = 0.065",
                       "slope = 0.4838", "z = 0.85   loss = 0.356   slope = 0.299"],
    "03_group_baselines": ["mean = 0.375   std = 0.4841", "A+ = 1.291   A− = -0.775", "sum of advantages = 0.0",
                           "= 0.0577", "√(7/8) = 0.9354", "response mean = 1.0   token mean = 0.5"],
    "04_baseline_bias_enumeration": ["256 groups", "full mean 0.18375", "leave-one-out 0.2100"],
    "05_memory_and_rollout_budgets": ["trainable copy 119.7 GiB", "frozen bf16 copy 14.96 GiB",
                                      "PPO 269.2 GiB   DPO 134.6 GiB   ratio 2.00", "critic = 44%",
                                      "rollout tokens 8,192,000", "4890.2 s = 81.5 min",
                                      "2.076444 min", "ratio 39.2511"],
    "09_the_passport": ["per completion (sequence_mean) = 1.00   per token (token_mean) = 0.50",
                        "identical policies: True", "averaging unit: token_mean"],
}


def _texts(outputs) -> list[tuple[str, str]]:
    """(kind, text) for every output: kind is the stream name, 'error', or 'data'."""
    found = []
    for out in outputs:
        if out.get("output_type") == "stream":
            found.append((out["name"], out["text"]))
        elif out.get("output_type") == "error":
            found.append(("error", f"{out['ename']}: {out['evalue']}"))
        elif "data" in out:
            found.append(("data", str(out["data"].get("text/plain", ""))))
    return found


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
        f"print({MARK!r} + _json.dumps({{_k: globals()[_k] for _k in {names}}}, "
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
    probe_text = "".join(t for kind, t in _texts(nb.cells[-1].outputs) if kind == "stdout")
    namespace = json.loads(probe_text.split(MARK, 1)[1])
    return namespace, _texts(outputs), _texts(widget_outputs)


def close(value, expected, digits):
    """Equal at the lecture's rounding: |value − expected| ≤ half a unit in the last digit."""
    return math.isclose(value, expected, abs_tol=0.5 * 10**-digits + 1e-12)


def check_00(ns, shown, widgets):
    import torch

    from course_lib.device import resolve_device

    report = ns["report"]
    assert report["torch"] == torch.__version__
    assert report["device"] == resolve_device("auto").type
    assert report["colab"] == "no" and report["course_lib"] != "not installed"
    assert math.isclose(ns["checksum"], 1.0, rel_tol=1e-4)


def check_01(ns, shown, widgets):
    assert close(ns["sigma_1"], 0.731, 3) and close(ns["sigma_2"], 0.881, 3)
    assert close(ns["gap_75"], 1.099, 3) and math.isclose(ns["gap_75"], math.log(3), rel_tol=1e-12)
    gaps = [w - lose for w, lose in zip(ns["r_chosen"], ns["r_rejected"], strict=True)]
    expected = sum(math.log1p(math.exp(-g)) for g in gaps) / len(gaps)
    assert math.isclose(ns["rm_loss"], expected, rel_tol=1e-12)
    assert f"mean reward-model loss = {expected:.4f}" in shown


def check_02(ns, shown, widgets):
    assert close(ns["z_I"], 0.170, 3) and close(ns["loss_I"], 0.6118, 4) and close(ns["slope_I"], 0.4576, 4)
    assert close(ns["z_II"], 0.065, 3) and close(ns["slope_II"], 0.4838, 4)
    assert close(ns["z_beta05"], 0.85, 2) and close(ns["loss_beta05"], 0.356, 3)
    assert close(ns["slope_beta05"], 0.299, 3)
    assert math.isclose(ns["reward_w"] - ns["reward_l"], ns["z_I"], rel_tol=1e-9)
    assert "loss = 0.6118" in widgets, "the β explorer must print the DPO loss of pair I at start"


def check_03(ns, shown, widgets):
    assert close(ns["mean_r"], 0.375, 3) and close(ns["std_r"], 0.4841, 4)
    assert close(ns["adv_plus"], 1.291, 3) and close(ns["adv_minus"], -0.775, 3)
    assert abs(sum(ns["adv"])) < 1e-12 and ns["adv_sum"] == 0.0
    assert close(ns["p_zero_var"], 0.0577, 4)
    assert math.isclose(ns["ddof_ratio"], math.sqrt(7 / 8), rel_tol=1e-12)
    assert math.isclose(ns["rloo"][0], 8 / 7 * (1 - 0.375), rel_tol=1e-12)
    assert ns["seq_mean"] == 1.0 and ns["tok_mean"] == 0.5
    assert math.isclose(ns["const_mean"], 2.0 / (2 * ns["L_max"]), rel_tol=1e-12)


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


def check_05(ns, shown, widgets):
    assert close(ns["trainable_gib"], 119.7, 1) and close(ns["frozen_gib"], 14.96, 2)
    assert close(ns["ppo_gib"], 269.2, 1) and close(ns["dpo_gib"], 134.6, 1)
    assert math.isclose(ns["ratio_mem"], 2.0, rel_tol=1e-12) and abs(ns["critic_share"] - 0.44) < 0.01
    assert ns["tokens"] == 8_192_000
    assert close(ns["gen_s"], 4890.2, 1) and close(ns["gen_min"], 81.5, 1)
    assert close(ns["upd_min"], 2.076444, 6) and close(ns["time_ratio"], 39.2511, 4)


def check_09(ns, shown, widgets):
    assert ns["per_completion"] == 1.0 and ns["per_token"] == 0.5 and ns["constant"] == 0.25
    assert math.isclose(ns["easy_share"], 0.97**16 + 0.03**16, rel_tol=1e-12)
    text = (NOTEBOOKS / "09_the_passport.py").read_text(encoding="utf-8")
    # the check-yourself answer quotes the computed share and the resampling cost
    assert f"About {ns['easy_share']:.0%} of groups" in text
    assert f"about {1 - ns['easy_share']:.0%} of the batch" in text
    assert f"about {1 / (1 - ns['easy_share']):.1f}× the generation" in text
    assert ns["same_policy"] is True
    assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(ns["recipe_1"], ns["recipe_2"], strict=True))
    assert ns["course_unit"] == "token_mean", "the course's GRPO default unit changed: update section 6"
    assert "8 of 8 fields match" not in widgets and "0 of 8 fields match" in widgets


CHECKS = {"00_start_here": check_00, "01_bradley_terry": check_01, "02_dpo_margins": check_02,
          "03_group_baselines": check_03, "04_baseline_bias_enumeration": check_04,
          "05_memory_and_rollout_budgets": check_05, "09_the_passport": check_09}


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
    shown = "".join(text for kind, text in outputs if kind == "stdout")
    for expected in SHOWN[name]:
        assert expected in shown, f"{name} does not display {expected!r}"
    widgets = "".join(text for kind, text in widget_outputs if kind == "stdout")
    CHECKS[name](namespace, shown, widgets)
