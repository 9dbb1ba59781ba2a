"""Tiny GPT notebooks 06–08 executed on fresh kernels with ``COURSE_FAST=1`` (a toy budget).

Students get the full small budget; CI checks that every cell runs, that nothing is written to
stderr or looks like a warning, and reads a few values back from the kernel: the numbers must be
real outputs of training (probabilities in [0, 1], logs with the expected keys), and notebook 08
must show its exploit (proxy reward above strict accuracy by a margin).
"""

from __future__ import annotations

import json
import os
import re

import jupytext
import nbformat
import pytest
from conftest import ROOT
from nbclient import NotebookClient

NOTEBOOKS = ROOT / "notebooks"
MARK = "@@NAMESPACE@@"
WARNING = re.compile(r"\b\w*Warning\b|Traceback \(most recent call last\)")


def execute(name: str, names: list[str], env: dict[str, str]) -> tuple[dict, list[tuple[str, str]]]:
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    probe = (
        "import json as _json\n"
        f"print({MARK!r} + _json.dumps({{_k: globals()[_k] for _k in {json.dumps(names)}}}, "
        "default=lambda o: o.tolist() if hasattr(o, 'tolist') else str(o)))"
    )
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    shown = []
    for cell in nb.cells[:-1]:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                shown.append((out["name"], out["text"]))
            elif "data" in out:
                shown.append(("data", str(out["data"].get("text/plain", ""))))
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    return json.loads(text.split(MARK, 1)[1]), shown


def assert_clean(name, shown):
    for kind, text in shown:
        assert kind != "stderr", f"{name} writes to stderr:\n{text}"
        assert not WARNING.search(text), f"{name} shows a warning:\n{text}"


FAST = {"COURSE_FAST": "1", "TQDM_DISABLE": "1"}


GENERATOR_REPR = "<torch._C.Generator"


def assert_no_generator_repr(name, shown):
    assert not any(GENERATOR_REPR in text for _, text in shown), f"{name} displays a torch.Generator object"


@pytest.mark.slow
def test_06_sft_then_dpo_runs(matplotlib_ready):
    ns, shown = execute("06_tiny_gpt_dpo", ["baseline", "results", "by_hand", "logs", "step_diff", "style_log",
                                            "before_style", "after_style"], FAST)
    assert_clean("06", shown)
    assert_no_generator_repr("06", shown)
    assert 0 <= ns["baseline"]["accuracy"] <= 1
    assert set(ns["results"]) == {"DPO", "DPO + NLL", "NLL only"}
    assert all(0 <= r["accuracy"] <= 1 for r in ns["results"].values())
    assert {"margin", "preference_accuracy", "reward_chosen", "kl_drift_offline"} <= set(ns["logs"]["DPO"][0])
    assert any("completion_logprobs" in text and "by hand" in text for _, text in shown)
    # the DPO update done by hand is the trainer's own step
    assert ns["step_diff"] < 1e-6
    # the style run tracks held-out pairs, and its training-pair metrics are separate
    tracked = [r for r in ns["style_log"] if "val_margin" in r]
    assert tracked and all(0 <= r["val_preference_accuracy"] <= 1 for r in tracked)
    assert all(0 <= x <= 1 for x in (*ns["before_style"], *ns["after_style"]))


@pytest.mark.slow
def test_07_grpo_family_runs(matplotlib_ready):
    names = ["baseline", "runs", "gen_s", "upd_s", "lecture_gen", "lecture_upd", "d_const", "d_group", "gap"]
    ns, shown = execute("07_tiny_gpt_grpo", names, FAST)
    assert_clean("07", shown)
    assert_no_generator_repr("07", shown)
    assert set(ns["runs"]) == {"GRPO", "RLOO", "Dr. GRPO adv.", "RFT"}
    assert all(0 <= r["accuracy"] <= 1 and r["rl_seconds"] > 0 for r in ns["runs"].values())
    assert ns["gap"] == pytest.approx(ns["runs"]["GRPO"]["accuracy"] - ns["runs"]["RFT"]["accuracy"])
    text = "".join(t for _, t in shown)
    # the sentence about RLOO vs Dr. GRPO follows the measured difference
    assert ("identical at every step" in text) == (ns["d_const"] == 0)
    assert ns["gen_s"] > 0 and ns["upd_s"] > 0
    assert ns["lecture_gen"] / ns["lecture_upd"] == pytest.approx(39.2511, abs=1e-3)
    assert any("six choices" in t for _, t in shown)


@pytest.mark.slow
def test_08_reward_hacking_shows_the_exploit(matplotlib_ready):
    ns, shown = execute("08_reward_hacking", ["start", "final", "alarms", "rows", "differ", "gap"], FAST)
    assert_clean("08", shown)
    assert_no_generator_repr("08", shown)
    start, loose, strict = ns["start"], ns["final"]["loose"], ns["final"]["strict"]
    assert ns["differ"] == {"reward": ["loose", "strict"]}  # the checker is the only difference
    # the exploit happens: the proxy pays for what the strict checker rejects, and exact match falls
    assert loose["loose_accuracy"] - loose["accuracy"] > 0.10, (start, loose)
    assert ns["gap"]["loose"] == pytest.approx(loose["loose_accuracy"] - loose["accuracy"])
    assert loose["accuracy"] < start["accuracy"]
    rows = ns["rows"]
    assert rows["loose"][-1]["completion_length"] > 1.5 * rows["loose"][0]["completion_length"]
    # the form alarms fire on the loose run only; the strict run's completions stay short
    for alarm in ("length > 1.5 × start", "truncated > 10%"):
        assert ns["alarms"]["loose"][alarm] is not None and ns["alarms"]["strict"][alarm] is None
    # the narrative quotes this run's numbers
    text = "".join(t for _, t in shown)
    assert f"{start['accuracy']:.1%} → {strict['accuracy']:.1%}" in text
