"""Tiny GPT notebooks (06–08b, 10, 15 and the KL term's β sweep) executed on fresh kernels with ``COURSE_FAST=1``.

``COURSE_FAST=1`` is the same lesson at a smaller budget: the `cpu` config's task, model and SFT
start, fewer RL steps. CI checks that every cell runs, that nothing is written to stderr or looks
like a warning, and reads values back from the kernel to assert each notebook's lesson on its FAST
run: SFT learns the task (>= 30% held-out), DPO lifts it (06), GRPO lifts it by >= 10 points (07),
the frontier is not flat (02b), the hack appears (08), the reward model beats chance, best-of-N
peaks above N = 1 and the proxy rises under PPO (08b); a judge trained on principles shows their position and
length biases, and dropping the position rule removes the first (15).

The notebooks share one SFT start (``course_lib.starts``); ``shared_sft_start`` builds it once per
test session in a folder both pytest-xdist workers see (the cache's lock makes a second worker wait
for the first and read its file).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re

import jupytext
import nbformat
import pytest
from conftest import ROOT, keep_executed
from nbclient import NotebookClient

NOTEBOOKS = ROOT / "notebooks"
MARK = "@@NAMESPACE@@"
WARNING = re.compile(r"\b\w*Warning\b|Traceback \(most recent call last\)")


def execute(name: str, names: list[str], env: dict[str, str]) -> tuple[dict, list[tuple[str, str]]]:
    """Run a notebook; ``names`` are names or expressions evaluated in its namespace afterwards.

    A cell may run 15 minutes: a guard against a hung kernel, not a speed check (a shared CPU runs
    the FAST budget several times slower than an idle one)."""
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    probe = (
        "import json as _json\n"
        f"print({MARK!r} + _json.dumps({{_k: eval(_k, globals()) for _k in {json.dumps(names)}}}, "
        "default=lambda o: o.tolist() if hasattr(o, 'tolist') else str(o)))"
    )
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}})
        if env.get("COURSE_FAST") == "1":
            keep_executed(client, name)  # the site is built from FAST runs
        client.execute()
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
SFT_LEARNS = 0.30  # the shared SFT start's held-out accuracy must reach this: it learned the task



GENERATOR_REPR = "<torch._C.Generator"


def assert_no_generator_repr(name, shown):
    assert not any(GENERATOR_REPR in text for _, text in shown), f"{name} displays a torch.Generator object"


@pytest.mark.slow
def test_06_sft_then_dpo_runs(matplotlib_ready, shared_sft_start):
    ns, shown = execute("06_tiny_gpt_dpo", ["baseline", "results", "by_hand", "logs", "step_diff", "style_rows",
                                            "before_style", "after_style", "results_kto", "z0", "gap"], FAST)
    assert_clean("06", shown)
    assert_no_generator_repr("06", shown)
    assert 0 <= ns["baseline"]["accuracy"] <= 1
    assert set(ns["results"]) == {"DPO", "DPO + NLL", "NLL only"}
    assert all(0 <= r["accuracy"] <= 1 for r in ns["results"].values())
    # the lesson: SFT learned the task, and DPO (with or without the NLL term) lifted it
    assert ns["baseline"]["accuracy"] >= SFT_LEARNS
    assert ns["baseline"]["accuracy"] == shared_sft_start["accuracy"]  # the shared start, read from the cache
    for name in ("DPO", "DPO + NLL"):
        assert ns["results"][name]["accuracy"] - ns["baseline"]["accuracy"] >= 0.05, (name, ns["results"][name])
    assert {"margin", "preference_accuracy", "reward_chosen", "kl_drift_offline"} <= set(ns["logs"]["DPO"][0])
    assert any("completion_logprobs" in text and "by hand" in text for _, text in shown)
    # the DPO update done by hand is the trainer's own step
    assert ns["step_diff"] < 5e-6  # float32 rounding; one AdamW step moves weights by ~lr = 1e-4
    # the style run tracks held-out pairs, and its training-pair metrics are separate
    tracked = [r for r in ns["style_rows"] if "val_margin" in r]
    assert tracked and all(0 <= r["val_preference_accuracy"] <= 1 for r in tracked)
    assert all(0 <= x <= 1 for x in (*ns["before_style"], *ns["after_style"]))
    # 8b: KTO on the same answers, unpaired: z0 starts at 0 (policy = reference), is never negative,
    # KTO lifts the SFT policy, and the printed lines are the ones the numbers give
    assert 0 <= ns["z0"][0] < 1e-4 and min(ns["z0"]) >= 0
    assert any(f"above 0 on {sum(v > 0 for v in ns['z0'])} of {len(ns['z0'])} steps" in text for _, text in shown)
    assert ns["results_kto"]["accuracy"] - ns["baseline"]["accuracy"] >= 0.05, ns["results_kto"]
    verdict = "tied" if abs(ns["gap"]) < 0.5 / 500 else ("beat" if ns["gap"] > 0 else "trailed")
    assert any(f"KTO {verdict} DPO" in text for _, text in shown)


@pytest.mark.slow
def test_07_grpo_family_runs(matplotlib_ready, shared_sft_start):
    names = ["baseline", "runs", "gen_s", "upd_s", "lecture_gen", "lecture_upd", "d_const", "d_group", "gap", "c",
             "sgd_ratio", "adam_diff", "clip_free", "clipped", "logs", "live", "dapo_gap", "dapo_cost", "penalty",
             "d_unit", "DAPO", "cfg.grpo.batch_prompts", "cfg.grpo.max_resample_rounds"]
    ns, shown = execute("07_tiny_gpt_grpo", names, FAST)
    assert_clean("07", shown)
    assert_no_generator_repr("07", shown)
    assert set(ns["runs"]) == {"GRPO", "RLOO", "Dr. GRPO adv.", "RFT", "DAPO", "Dr. GRPO"}
    assert all(0 <= r["accuracy"] <= 1 and r["rl_seconds"] > 0 for r in ns["runs"].values())
    assert ns["gap"] == pytest.approx(ns["runs"]["GRPO"]["accuracy"] - ns["runs"]["RFT"]["accuracy"])
    text = "".join(t for _, t in shown)
    # the lesson: SFT learned the task and GRPO lifted it by at least 10 points, and the text says so
    sft, grpo = ns["baseline"]["accuracy"], ns["runs"]["GRPO"]["accuracy"]
    assert sft >= SFT_LEARNS and grpo - sft >= 0.10, (sft, grpo)
    assert f"a gain of {100 * (grpo - sft):.1f} points over SFT" in text
    assert "budget) took " in text  # the measured time of this budget
    # a constant factor: exactly a larger step under SGD, cancelled by AdamW
    assert ns["sgd_ratio"] == pytest.approx(ns["c"], rel=1e-5) and ns["adam_diff"] < 1e-6
    # ... unless gradient clipping acts on some steps of one run and not the other
    assert ns["clip_free"] < 1e-6 < 1e-5 < ns["clipped"]
    # the dashboard's KL panel has data: the GRPO runs log the KL to the SFT reference
    assert all(r["kl"] is not None for r in ns["logs"]["GRPO"])
    # the sentence about RLOO vs Dr. GRPO follows the measured difference
    assert ("identical at every step" in text) == (ns["d_const"] == 0)
    assert ns["gen_s"] > 0 and ns["upd_s"] > 0
    assert ns["lecture_gen"] / ns["lecture_upd"] == pytest.approx(39.2511, abs=1e-3)
    assert any("six choices" in t for _, t in shown)
    # DAPO with its four mechanisms and Dr. GRPO with its constant unit, live (issue 27)
    live, logs, runs = ns["live"], ns["logs"], ns["runs"]
    assert (ns["DAPO"]["epsilon_high"], ns["DAPO"]["zero_variance"], ns["DAPO"]["unit"]) == (0.28, "resample", "token_mean")
    assert ns["DAPO"]["soft_punish_cache"] == 2 and ns["DAPO"]["num_iterations"] == 2
    assert live["DAPO"]["optimiser steps"] == live["GRPO"]["optimiser steps"]  # the same optimiser steps
    b, rounds = ns["cfg.grpo.batch_prompts"], ns["cfg.grpo.max_resample_rounds"]
    # dynamic sampling: every DAPO step filled its batch or spent every extra round
    assert all(r["groups_used"] == b or r["groups_sampled"] == b * (rounds + 1) for r in logs["DAPO"])
    assert ns["dapo_gap"] == pytest.approx(runs["DAPO"]["accuracy"] - runs["GRPO"]["accuracy"])
    assert f"DAPO − GRPO = {100 * ns['dapo_gap']:+.1f} points" in text and f"{ns['dapo_cost']:.2f}× the generated" in text
    assert all(r["overlong_penalty"] <= 0 for r in logs["DAPO"]) and not any("overlong_penalty" in r for r in logs["GRPO"])
    assert ns["penalty"] == pytest.approx(sum(r["overlong_penalty"] for r in logs["DAPO"]) / len(logs["DAPO"]))
    assert ("it almost never fired" in text) == (-ns["penalty"] < 0.01)
    assert all(r["verifier_failures"] >= 0 for name in ("GRPO", "DAPO", "Dr. GRPO") for r in logs[name])
    assert f"largest per-step difference in mean reward {ns['d_unit']:.4f}" in text


@pytest.mark.slow
def test_08_reward_hacking_shows_the_exploit(matplotlib_ready, shared_sft_start):
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


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="TRL is not installed: pip install -e '.[trl]'")
def test_10_graduating_to_trl_runs(matplotlib_ready, shared_sft_start):
    ns, shown = execute("10_graduating_to_trl", ["baseline", "course", "trl", "dpo_results", "ratio", "chat_rewards",
                                                 "bridged"], FAST)
    assert_clean("10", shown)
    assert ns["ratio"] == pytest.approx((7 / 8) ** 0.5, rel=1e-3)  # TRL's ddof=1 + 1e-4 over the population std
    for run in (ns["course"], ns["trl"]):
        assert 0 <= run["final"] <= 1 and run["step_s"] > 0 and len(run["reward"]) == 10
        assert run["curve"][0] == [0, ns["baseline"]["accuracy"]]  # both curves start at the same SFT policy
    assert ns["baseline"]["accuracy"] >= SFT_LEARNS  # the shared SFT start learned the task
    assert set(ns["dpo_results"]) == {"course_lib", "TRL DPOTrainer"}
    assert len(ns["chat_rewards"]) == 2 and all(0 <= r <= 1 for r in ns["chat_rewards"])
    assert any("no exact TRL equivalent" in text for _, text in shown)


KL_NAMES = ["pi_ref", "reward", "beta", "pi_star", "J_star", "perturbation_gap", "reward_recovery_error",
            "bt_cancel_error", "dpo_fit_error", "uncovered_error", "mode_seeking", "mode_covering", "target_sd",
            "true_kl", "value_rows", "gradient_checks", "dynamics", "pi_forward", "grpo_kl_amplification",
            "drift_no_ref", "drift_with_ref", "optimum_text.value",
            "{f'{e} {d}': c for (e, d), c in reward_placement_cosines.items()}"]


def _check_kl_exact_sections(ns, shown):
    import numpy as np

    pi_ref, reward, beta = np.array(ns["pi_ref"]), np.array(ns["reward"]), ns["beta"]
    # π* from the closed form, computed here independently of course_lib
    w = pi_ref * np.exp(reward / beta)
    expected = w / w.sum()
    np.testing.assert_allclose(ns["pi_star"], expected, atol=1e-12)
    kl_star = float((expected * np.log(expected / pi_ref)).sum())
    assert ns["true_kl"] == pytest.approx(kl_star, abs=1e-12)
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
    # estimators as values: k1 and k3 unbiased, k2 not; simulations agree with the exact means
    rows = ns["value_rows"]
    assert abs(rows["k1"]["bias"]) < 1e-12 and abs(rows["k3"]["bias"]) < 1e-12 and abs(rows["k2"]["bias"]) > 1e-3
    for est in ("k1", "k2", "k3"):
        assert abs(rows[est]["sim_mean"] - rows[est]["mean"]) < 5 * rows[est]["sim_se"]
    assert rows["k1"]["min"] < 0 <= min(rows["k2"]["min"], rows["k3"]["min"])
    # estimators as loss terms: the three expected gradients (and k1 in the reward)
    assert set(ns["gradient_checks"]) == {"k1 loss = 0", "k2 loss = ∇reverse", "k3 loss = ∇forward",
                                          "k1 reward = ∇reverse"}
    assert max(ns["gradient_checks"].values()) < 1e-12
    dyn = ns["dynamics"]
    assert dyn["k1 in the loss"]["probs"][int(np.argmax(reward))] > 0.99  # no penalty: collapse on the best answer
    assert dyn["k2 in the loss"]["to_reverse_opt"] < 1e-9 and dyn["k1 in the reward"]["to_reverse_opt"] < 1e-9
    assert dyn["k3 in the loss"]["to_forward_opt"] < 1e-9 and dyn["k3 in the loss"]["to_reverse_opt"] > 0.01
    lam = reward + beta * pi_ref / np.array(ns["pi_forward"])  # the forward optimum's stationarity condition
    assert np.ptp(lam) < 1e-9
    # placement: GRPO's std blows a 0.01·KL difference up to unit-scale advantages
    assert ns["grpo_kl_amplification"] > 100
    # two anchors: only π_ref stops the drift, at KL(π*‖π_ref)
    assert ns["drift_with_ref"] == pytest.approx(kl_star, abs=1e-4)
    assert ns["drift_no_ref"] > 1.5
    # §7b: in the reward only k1's expected gradient is ∇KL(π‖π_ref); k3's points away, near and far
    cos = ns["{f'{e} {d}': c for (e, d), c in reward_placement_cosines.items()}"]  # JSON keys are strings
    assert cos["k1 0.05"] == pytest.approx(1.0) and cos["k1 2.0"] == pytest.approx(1.0)
    assert cos["k3 0.05"] < 0 and cos["k3 2.0"] < 0
    assert any("refused:" in text and "only k1" in text for _, text in shown)
    assert f"β = 0.5: E_π*[r] = {expected @ reward:.4f}" in ns["optimum_text.value"], (
        "the β explorer must show π*'s numbers at start")


@pytest.mark.slow
def test_02b_the_kl_term(matplotlib_ready, shared_sft_start):
    ns, shown = execute("02b_the_kl_term", [*KL_NAMES, "sweep", "baseline"], FAST)
    assert_clean("02b", shown)
    _check_kl_exact_sections(ns, shown)
    # the β sweep: every placement and β trained and measured with the same held-out KL
    sweep = ns["sweep"]
    assert [(r["placement"], r["beta"]) for r in sweep] == [
        ("none", 0.0), ("loss", 0.01), ("loss", 0.04), ("loss", 0.2),
        ("reward", 0.01), ("reward", 0.04), ("reward", 0.2)]
    assert {r["estimator"] for r in sweep if r["placement"] == "loss"} == {"k3"}
    assert {r["estimator"] for r in sweep if r["placement"] == "reward"} == {"k1"}
    for r in sweep:
        assert 0 <= r["accuracy"] <= 1 and r["kl"] >= 0 and r["kl_se"] >= 0 and r["n"] > 0
        if r["beta"] > 0:
            assert r["kl_curve"], "the trainer logs the KL to the reference whenever one exists"
    # the lesson: from an SFT start that learned the task the frontier is not flat — without a penalty
    # GRPO moves away from the reference (KL > 0) and gains accuracy
    sft, free = ns["baseline"]["accuracy"], sweep[0]
    assert sft >= SFT_LEARNS
    assert free["accuracy"] - sft >= 0.05 and free["kl"] > 0.01, (sft, free)


@pytest.mark.slow
def test_08b_the_rlhf_route_runs(matplotlib_ready, shared_sft_start):
    ns, shown = execute("08b_the_rlhf_route", ["m", "bon", "summary", "runs", "memory", "adv_hand", "measured_share", "float(v.grad)"], FAST)
    assert_clean("08b", shown)
    m = ns["m"]
    assert 0.5 < m["noise_ceiling"] <= 1 and 0 <= m["heldout_accuracy"] <= 1
    assert m["of_ceiling"] == pytest.approx(m["heldout_accuracy"] / m["noise_ceiling"])
    # best-of-N: the proxy of the kept answer never decreases with N (it is a maximum over more samples)
    proxies = [row["proxy"] for row in ns["bon"]]
    assert all(b >= a - 1e-6 for a, b in zip(proxies, proxies[1:]))
    # the √KL axis is the exact KL over each prompt's samples: never above log N − (N − 1)/N
    assert all(0 <= row["kl"] <= row["kl_bound"] + 1e-9 for row in ns["bon"]) and ns["bon"][0]["kl"] == 0
    assert ns["float(v.grad)"] == 0.0  # the value clip removed the gradient; V had moved 0.5 > ε_v anyway
    assert {s["beta"] for s in ns["summary"]} == {0.0, 0.05}
    assert set(ns["runs"]) == {"GRPO", "RLOO", "PPO"} and all(0 <= r["accuracy"] <= 1 for r in ns["runs"].values())
    assert ns["memory"]["critic"]["total"] >= 4 * ns["memory"]["critic"]["weights"]  # weights, grads, two Adam moments
    assert ns["adv_hand"] == pytest.approx([0.77025, 0.495, 0.1], abs=1e-6)  # δ = 0.3, 0.4, 0.1; γ = 1, λ = 0.95
    assert ns["measured_share"] == pytest.approx(0.40, abs=0.01)
    assert any("gold peaks at N=" in text for _, text in shown)
    # the lesson: the reward model beats chance on held-out pairs, best-of-N's gold peaks above N = 1,
    # and PPO against the reward model raises the proxy it optimises
    assert m["heldout_gold_accuracy"] >= 0.6 and m["heldout_accuracy"] >= 0.6, m
    peak = max(ns["bon"], key=lambda row: row["gold"])
    assert peak["n"] > 1 and peak["gold"] > ns["bon"][0]["gold"], ns["bon"]
    assert any(s["proxy_end"] > s["proxy_start"] for s in ns["summary"]), ns["summary"]


@pytest.mark.slow
def test_15_ai_feedback(matplotlib_ready, shared_sft_start):
    ns, shown = execute("15_ai_feedback", ["shares", "top", "rules", "jm", "fm", "fixed['rules']", "rm_biased", "rm_fixed",
                                           "rows_biased", "rows_fixed", "curve_biased", "curve_fixed"], FAST)
    assert_clean("15", shown)
    # the constitution cannot see the carry error: the position rule decides most training pairs
    assert ns["top"] == "first" and ns["shares"]["first"] > 0.5 * sum(ns["shares"].values()), ns["shares"]
    # the judge inherits the rules' biases (measured with the swap test, from both orders) and its own errors
    assert ns["rules"]["position_bias"] > 0.5 and ns["jm"]["position_bias"] > 0.5, (ns["rules"], ns["jm"])
    assert ns["jm"]["length_bias"] > 0.5 and ns["rules"]["length_bias"] == 1.0
    # the one change: without "first" the rules have no position bias, and the trained judge's is gone
    assert ns["fixed['rules']"]["position_bias"] == 0.0
    assert abs(ns["fm"]["position_bias"]) < 0.1, ns["fm"]
    assert any("gone (|bias| < 0.1)" in text for _, text in shown)
    # the reward model on either judge's labels keeps the length rule, and RL raises the proxy it optimises
    assert ns["rm_biased"]["rm_length_bias"] > 0.3 and ns["rm_fixed"]["rm_length_bias"] > 0.3
    assert ns["rm_fixed"]["train_pairs"] < ns["rm_biased"]["train_pairs"]  # the new judge abstains on the ties
    assert any(c["proxy_end"] > c["proxy_start"] for c in (ns["curve_biased"], ns["curve_fixed"]))
    assert len(ns["rows_biased"]) == len(ns["rows_fixed"]) and all(0 <= r["gold"] <= 1 for r in ns["rows_biased"])
