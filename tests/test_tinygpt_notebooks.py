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


@pytest.mark.slow
def test_06_sft_then_dpo_runs(matplotlib_ready):
    ns, shown = execute("06_tiny_gpt_dpo", ["baseline", "results", "by_hand", "logs"], FAST)
    assert_clean("06", shown)
    assert 0 <= ns["baseline"]["accuracy"] <= 1
    assert set(ns["results"]) == {"DPO", "DPO + NLL", "NLL only"}
    assert all(0 <= r["accuracy"] <= 1 for r in ns["results"].values())
    assert {"margin", "preference_accuracy", "reward_chosen", "kl_drift_offline"} <= set(ns["logs"]["DPO"][0])
    assert any("completion_logprobs" in text and "by hand" in text for _, text in shown)


@pytest.mark.slow
def test_07_grpo_family_runs(matplotlib_ready):
    ns, shown = execute("07_tiny_gpt_grpo", ["baseline", "runs", "gen_s", "upd_s", "lecture_gen", "lecture_upd"], FAST)
    assert_clean("07", shown)
    assert set(ns["runs"]) == {"GRPO", "RLOO", "Dr. GRPO", "DAPO options"}
    assert all(0 <= r["accuracy"] <= 1 and r["rl_seconds"] > 0 for r in ns["runs"].values())
    assert ns["gen_s"] > 0 and ns["upd_s"] > 0
    assert ns["lecture_gen"] / ns["lecture_upd"] == pytest.approx(39.2511, abs=1e-3)
    assert any("six choices" in text for _, text in shown)


@pytest.mark.slow
def test_08_reward_hacking_shows_the_exploit(matplotlib_ready):
    ns, shown = execute(
        "08_reward_hacking", ["start", "loose_final", "strict_final", "exploit_gap", "alarms", "loose_rows"], FAST
    )
    assert_clean("08", shown)
    start, loose = ns["start"], ns["loose_final"]
    # the exploit happens: the proxy pays for what the strict checker rejects
    assert loose["loose_accuracy"] - loose["accuracy"] > 0.10, (start, loose)
    assert ns["exploit_gap"] == pytest.approx(loose["loose_accuracy"] - loose["accuracy"])
    assert loose["accuracy"] < start["accuracy"]  # strict held-out accuracy falls
    rows = ns["loose_rows"]
    assert rows[-1]["completion_length"] > 1.5 * rows[0]["completion_length"]  # length drifts
    assert ns["alarms"]["length > 1.5 × start"] is not None
    # the re-run against the strict checker behaves: no truncation drift, strict accuracy kept
    assert ns["strict_final"]["accuracy"] >= start["accuracy"] - 0.02


@pytest.mark.slow
def test_08b_the_rlhf_route_runs(matplotlib_ready):
    ns, shown = execute("08b_the_rlhf_route", ["m", "bon", "summary", "runs", "memory", "adv_hand", "measured_share"], FAST)
    assert_clean("08b", shown)
    m = ns["m"]
    assert 0.5 < m["noise_ceiling"] <= 1 and 0 <= m["heldout_accuracy"] <= 1
    assert m["of_ceiling"] == pytest.approx(m["heldout_accuracy"] / m["noise_ceiling"])
    # best-of-N: the proxy of the kept answer never decreases with N (it is a maximum over more samples)
    proxies = [row["proxy"] for row in ns["bon"]]
    assert all(b >= a - 1e-6 for a, b in zip(proxies, proxies[1:]))
    assert {s["beta"] for s in ns["summary"]} == {0.0, 0.05}
    assert set(ns["runs"]) == {"GRPO", "RLOO", "PPO"} and all(0 <= r["accuracy"] <= 1 for r in ns["runs"].values())
    assert ns["memory"]["critic"]["total"] >= 4 * ns["memory"]["critic"]["weights"]  # weights, grads, two Adam moments
    assert ns["adv_hand"] == pytest.approx([0.77025, 0.495, 0.1], abs=1e-6)  # δ = 0.3, 0.4, 0.1; γ = 1, λ = 0.95
    assert ns["measured_share"] == pytest.approx(0.40, abs=0.01)
    assert any("gold peaks at N=" in text for _, text in shown)
