"""Tiny GPT notebooks (the DPO, GRPO, reward-hacking and RLHF-route runs, graduating to TRL, RL as a system,
environments, recipes, AI feedback, and the KL term's β sweep) executed on fresh kernels with ``COURSE_FAST=1``.

``COURSE_FAST=1`` is the same lesson at a smaller budget: the `cpu` config's task, model and SFT
start, fewer RL steps. CI checks that every cell runs, that nothing is written to stderr or looks
like a warning, and reads values back from the kernel to assert each notebook's lesson on its FAST
run: SFT learns the task (>= 30% held-out), DPO lifts it, GRPO lifts it by >= 10 points,
the KL term's frontier is not flat, the reward hack appears, and in the RLHF route the reward model beats
chance, best-of-N peaks above N = 1 and the proxy rises under PPO; the mismatch KL grows
with staleness and a mismatched sampler shows one at K = 0, and four stale steps without the behaviour
correction cost accuracy on every seed; R1-Zero from the random
initialisation has (almost) no group with signal while GRPO from the SFT start gains the most of four starts; a judge
trained on principles shows their position and length biases, and dropping the position rule removes the first.

The notebooks share the SFT starts of seeds 0, 1, 2 (``course_lib.run.starts``); ``shared_sft_start`` builds
them once per test session, side by side, in a folder both pytest-xdist workers see (the cache's lock
makes a second worker wait for the first and read its file). Notebooks 09, 12, 14, 16 and 17 read their
verdicts over those three seeds; their thresholds come from the seeds' spread with a margin. Notebooks 08, 10, 11,
15 and 18 train one seed: they print its differences as numbers of this run, and beside them the committed
benchmark's verdicts over seeds, which the tests compare with the lines ``benchmarks/tables.py`` makes from its
JSON. No CPU kernel set is pinned: the lessons hold on the kernels torch picks (CI runs 08, 09, 12, 14 and 16
again under another set).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import statistics
import sys

import jupyterlab_run
import jupytext
import nbformat
import pytest
from conftest import ROOT, keep_executed
from nbclient import NotebookClient

sys.path.insert(0, str(ROOT / "benchmarks"))
import tables  # noqa: E402  (the benchmarks' verdict lines, which the one-seed notebooks print)

NOTEBOOKS = ROOT / "notebooks"
WARNING = re.compile(r"\b\w*Warning\b|Traceback \(most recent call last\)")


def execute(name: str, names: list[str], env: dict[str, str]) -> tuple[dict, list[tuple[str, str]]]:
    """Run a notebook; ``names`` are names or expressions evaluated in its namespace afterwards.

    At the FAST budget, where Chromium is installed, the run is the browser test's: Run All in
    JupyterLab (``jupyterlab_run.lesson_run``), read back from that kernel, and checked by
    test_browser.py on the same run. Elsewhere nbclient runs it here. A cell may run 15 minutes: a
    guard against a hung kernel, not a speed check (a shared CPU runs the FAST budget several times
    slower than an idle one)."""
    if env == FAST and jupyterlab_run.available():
        return jupyterlab_run.lesson_run(name, names)
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    nb.cells.append(nbformat.v4.new_code_cell(jupyterlab_run.probe_source(names)))
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = NotebookClient(nb, timeout=900, kernel_name="python3",
                                resources={"metadata": {"path": str(NOTEBOOKS)}})
        if env.get("COURSE_FAST") == "1":
            keep_executed(client, name)  # the site is built from FAST runs
        client.execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    return json.loads(text.split(jupyterlab_run.MARK, 1)[1]), jupyterlab_run.shown_outputs(nb.cells[:-1])


def assert_clean(name, shown):
    for kind, text in shown:
        assert kind != "stderr", f"{name} writes to stderr:\n{text}"
        assert not WARNING.search(text), f"{name} shows a warning:\n{text}"


FAST = {"COURSE_FAST": "1", "TQDM_DISABLE": "1"}
SFT_LEARNS = 0.30  # the shared SFT start's held-out accuracy must reach this: it learned the task
VERDICTS = "{k: [v.k, v.n, v.beyond, v.median, v.sentence()] for k, v in verdicts.items()}"  # a notebook's verdicts



def assert_benchmark_verdicts(printed: list[str], expected: list[str], text: str, comparisons: tuple[str, ...]):
    """A notebook that trains one seed prints the committed benchmark's verdicts: exactly the lines
    ``benchmarks/tables.py`` makes from the JSON (each over >= 3 seeds, saying "k of n"), every one shown, and one
    for each comparison the notebook's lesson rests on."""
    assert printed == expected and expected, printed
    for line in expected:
        assert line in text and re.search(r"ahead on \d+ of ([3-9]|\d\d+) seeds", line), line
    for comparison in comparisons:
        assert any(f"{comparison}:" in line for line in expected), comparison


GENERATOR_REPR = "<torch._C.Generator"


def assert_no_generator_repr(name, shown):
    assert not any(GENERATOR_REPR in text for _, text in shown), f"{name} displays a torch.Generator object"


@pytest.mark.slow
def test_08_tiny_gpt_dpo_runs(matplotlib_ready, shared_sft_start):
    ns, shown = execute("08_tiny_gpt_dpo", ["baseline", "results", "by_hand", "logs", "step_diff", "style_rows",
                                            "before_style", "after_style", "style", "ref_logp", "results_kto", "z0",
                                            "gap", "bench_lines"], FAST)
    assert_clean("08", shown)
    assert_no_generator_repr("08", shown)
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
    # the style lesson: plain DPO wins every held-out pair by its margin, yet the fixed-width answer stays
    # the less likely one and greedy answers keep the plain style; the NLL term makes the style reach them
    dpo, nll = ns["style"]["DPO"], ns["style"]["DPO + NLL"]
    assert tracked[-1]["val_preference_accuracy"] >= 0.95
    assert dpo["style"][0] < 0.1 and dpo["chosen_more_likely"] < 0.5, dpo["style"]
    assert nll["style"][0] > 0.5 and nll["chosen_more_likely"] > 0.5, nll["style"]
    chosen_ref, rejected_ref = ns["ref_logp"]  # the SFT policy writes the plain style
    assert sum(c > r for c, r in zip(chosen_ref, rejected_ref)) < 0.05 * len(chosen_ref)
    assert any("the style was taught (over half the held-out answers at fixed width) by: DPO + NLL" in text
               for _, text in shown)
    # 8b: KTO on the same answers, unpaired: z0 starts at 0 (policy = reference), is never negative,
    # KTO lifts the SFT policy, and the printed lines are the ones the numbers give
    assert 0 <= ns["z0"][0] < 1e-4 and min(ns["z0"]) >= 0
    assert any(f"above 0 on {sum(v > 0 for v in ns['z0'])} of {len(ns['z0'])} steps" in text for _, text in shown)
    assert ns["results_kto"]["accuracy"] - ns["baseline"]["accuracy"] >= 0.05, ns["results_kto"]
    # one seed's differences are printed as this run's numbers, with no verdict; the verdicts (what the preference
    # term adds beside the NLL term, KTO against DPO) are the committed benchmark's over >= 3 seeds, from its JSON
    text, acc = "".join(t for _, t in shown), {k: r["accuracy"] for k, r in ns["results"].items()}
    assert f"KTO − DPO {100 * ns['gap']:+.1f} pts" in text
    for a, b in (("DPO + NLL", "NLL only"), ("DPO + NLL", "DPO")):
        assert f"{a} − {b} {100 * (acc[a] - acc[b]):+.1f} pts" in text
    assert not re.search(r"\b(beat|trailed|added something)\b", text)
    assert_benchmark_verdicts(ns["bench_lines"], tables.dpo_verdicts(tables.load("dpo"), 500), text,
                              ("DPO + NLL − NLL only", "KTO − DPO"))


@pytest.mark.slow
def test_09_tiny_gpt_grpo_runs(matplotlib_ready, shared_sft_start):
    names = ["baseline", "runs", "gen_s", "upd_s", "lecture_gen", "lecture_upd", "d_const", "d_group", "gap",
             "zv_first", "zv_last", "zv_answer", "rft_answer", "logs", "live", "dapo_gap", "dapo_cost", "penalty",
             "d_unit", "DAPO", "cfg.grpo.batch_prompts", "cfg.grpo.max_resample_rounds", "SEEDS", VERDICTS,
             "same_const", "{s: {k: v['accuracy'] for k, v in r.items()} for s, r in per_seed.items()}"]
    ns, shown = execute("09_tiny_gpt_grpo", names, FAST)
    assert_clean("07", shown)
    assert_no_generator_repr("07", shown)
    assert set(ns["runs"]) == {"GRPO", "RLOO", "Dr. GRPO adv.", "RFT", "DAPO", "Dr. GRPO"}
    assert all(0 <= r["accuracy"] <= 1 and r["rl_seconds"] > 0 for r in ns["runs"].values())
    assert ns["gap"] == pytest.approx(ns["runs"]["GRPO"]["accuracy"] - ns["runs"]["RFT"]["accuracy"])
    text = "".join(t for _, t in shown)
    # this seed's sentence follows its numbers
    sft, grpo = ns["baseline"]["accuracy"], ns["runs"]["GRPO"]["accuracy"]
    assert (f"a gain of {100 * (grpo - sft):.1f} points over SFT" in text
            or f"no gain over SFT ({100 * (grpo - sft):+.1f}" in text)
    # the lesson, over seeds (each its own SFT start): SFT learned the task on every seed, and GRPO lifted it on
    # every seed beyond the evaluation noise, by >= 10 points at the median (FAST with AVX-512 kernels, seeds 0-2:
    # SFT 51.2 / 59.8 / 59.6%, GRPO +17.0 / +20.2 / +20.6 points; seed 0 with AVX2: SFT 56.6%)
    seeds, verdicts, acc = ns["SEEDS"], ns[VERDICTS], ns["{s: {k: v['accuracy'] for k, v in r.items()} for s, r in "
                                                         "per_seed.items()}"]
    n = len(seeds)
    assert n >= 3 and sorted(map(int, acc)) == sorted(seeds)
    assert all(acc[str(s)]["SFT"] >= SFT_LEARNS for s in seeds), acc
    k, count, beyond, median, _ = verdicts["gain"]
    assert count == n and k == n and beyond and median >= 0.10, verdicts["gain"]
    for key, (_, count, _, _, sentence) in verdicts.items():
        assert count == n and sentence in text, key
    assert f"identical reward curves on {ns['same_const']} of {n} seeds" in text
    assert "budget) took " in text  # the measured time of this budget
    # the predictions' answers are the run's: computed before the reveal, from the numbers shown after it
    zv_moved = ns["zv_last"] - ns["zv_first"]
    assert ns["zv_answer"] == ("it rises" if zv_moved > 0.02 else "it falls" if zv_moved < -0.02
                               else "it stays about the same")
    assert ns["rft_answer"] == ("within 5 points of GRPO" if abs(ns["gap"]) <= 0.05 else
                                "more than 5 points below GRPO" if ns["gap"] > 0 else "more than 5 points above GRPO")
    # the dashboard's KL panel has data: the GRPO runs log the KL to the SFT reference
    assert all(r["kl"] is not None for r in ns["logs"]["GRPO"])
    # the sentence about RLOO vs Dr. GRPO follows the measured difference
    assert ("identical at every step" in text) == (ns["d_const"] == 0)
    assert ns["gen_s"] > 0 and ns["upd_s"] > 0
    assert ns["lecture_gen"] / ns["lecture_upd"] == pytest.approx(39.2511, abs=1e-3)
    assert any("six choices" in t for _, t in shown)
    # DAPO with its four mechanisms and Dr. GRPO with its constant unit, live
    live, logs, runs = ns["live"], ns["logs"], ns["runs"]
    assert (ns["DAPO"]["epsilon_high"], ns["DAPO"]["zero_variance"], ns["DAPO"]["unit"]) == (0.28, "resample",
                                                                                             "token_mean")
    assert ns["DAPO"]["soft_punish_cache"] == 2 and ns["DAPO"]["num_iterations"] == 2
    assert live["DAPO"]["optimiser steps"] == live["GRPO"]["optimiser steps"]  # the same optimiser steps
    b, rounds = ns["cfg.grpo.batch_prompts"], ns["cfg.grpo.max_resample_rounds"]
    # dynamic sampling: every DAPO step filled its batch or spent every extra round
    assert all(r["groups_used"] == b or r["groups_sampled"] == b * (rounds + 1) for r in logs["DAPO"])
    assert ns["dapo_gap"] == pytest.approx(runs["DAPO"]["accuracy"] - runs["GRPO"]["accuracy"])
    assert (f"DAPO − GRPO = {100 * ns['dapo_gap']:+.1f} points" in text
            and f"{ns['dapo_cost']:.2f}× the generated" in text)
    assert all(r["overlong_penalty"] <= 0 for r in logs["DAPO"]) and not any("overlong_penalty" in r
                                                                             for r in logs["GRPO"])
    assert ns["penalty"] == pytest.approx(sum(r["overlong_penalty"] for r in logs["DAPO"]) / len(logs["DAPO"]))
    assert ("it almost never fired" in text) == (-ns["penalty"] < 0.01)
    assert all(r["verifier_failures"] >= 0 for name in ("GRPO", "DAPO", "Dr. GRPO") for r in logs[name])
    assert f"largest per-step difference in mean reward {ns['d_unit']:.4f}" in text


@pytest.mark.slow
def test_11_reward_hacking_shows_the_exploit(matplotlib_ready, shared_sft_start):
    ns, shown = execute("11_reward_hacking", ["start", "final", "alarms", "rows", "differ", "gap",
                                                    "verdicts", "bench_lines"], FAST)
    assert_clean("08", shown)
    assert_no_generator_repr("08", shown)
    start, loose, strict = ns["start"], ns["final"]["loose"], ns["final"]["strict"]
    assert ns["differ"] == {"reward": ["loose", "strict"]}  # the checker is the only difference
    # section 1's prediction: the loose checker accepts 65, 5565 and the truncated spray; the strict one 65 alone
    assert ns["verdicts"] == {"65": [1, 1], "55": [0, 0], "5565": [0, 1], "1637095": [0, 1]}
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
    # what the strict run did is this run's number, without a verdict word; over seeds it is the benchmark's verdict
    assert f"({100 * (strict['accuracy'] - start['accuracy']):+.1f} points in this run; section 5 reads it" in text
    assert not re.search(r"The strict run (improved|fell|stayed)", text)
    assert_benchmark_verdicts(ns["bench_lines"], tables.hacking_verdicts(tables.load("reward_hacking")), text,
                              ("strict-checker run, strict held-out at the end − at the start",
                               "loose-checker run at the end, loose held-out − strict held-out"))


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="TRL is not installed: pip install -e '.[trl]'")
def test_18_graduating_to_trl_runs(matplotlib_ready, shared_sft_start):
    ns, shown = execute("18_graduating_to_trl", ["baseline", "course", "trl", "dpo_results", "ratio", "chat_rewards",
                                                 "bridged", "{k: b.trainer for k, b in preference_bridges.items()}",
                                                 "bench_lines"], FAST)
    assert_clean("18", shown)
    assert ns["ratio"] == pytest.approx((7 / 8) ** 0.5, rel=1e-3)  # TRL's ddof=1 + 1e-4 over the population std
    for run in (ns["course"], ns["trl"]):
        assert 0 <= run["final"] <= 1 and run["step_s"] > 0 and len(run["reward"]) == 10
        assert run["curve"][0] == [0, ns["baseline"]["accuracy"]]  # both curves start at the same SFT policy
    assert ns["baseline"]["accuracy"] >= SFT_LEARNS  # the shared SFT start learned the task
    assert set(ns["dpo_results"]) == {"course_lib", "TRL DPOTrainer"}
    assert len(ns["chat_rewards"]) == 2 and all(0 <= r <= 1 for r in ns["chat_rewards"])
    assert any("no exact TRL equivalent" in text for _, text in shown)
    assert ns["{k: b.trainer for k, b in preference_bridges.items()}"] == {"kto": "KTOTrainer", "orpo": "ORPOTrainer"}
    assert any("orpo NLL tokens" in text for _, text in shown)
    assert any("kto.desirable_fraction" in text for _, text in shown)
    # one seed's lifts are this run's numbers; the ranking of the trainers is the committed benchmark's, over seeds
    text, base = "".join(t for _, t in shown), ns["baseline"]["accuracy"]
    course, trl = ns["course"]["final"], ns["trl"]["final"]
    assert (f"course_lib {100 * (course - base):+.1f} points, TRL {100 * (trl - base):+.1f} points" in text
            and f"course_lib − TRL {100 * (course - trl):+.1f} points" in text)
    assert "either way is noise" not in text
    assert_benchmark_verdicts(ns["bench_lines"], tables.trl_verdicts(tables.load("trl_vs_course_grpo"), 500), text,
                              ("course_lib − TRL",))


KL_NAMES = ["pi_ref", "reward", "beta", "pi_star", "true_kl", "value_rows", "gradient_checks", "dynamics",
            "pi_forward", "grpo_kl_amplification", "drift_no_ref", "drift_with_ref", "optima_text.value",
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
    # the explorer opens at β = 0.5 on the gap between the reverse- and forward-KL optima
    gap = np.abs(expected - np.array(ns["pi_forward"])).max()
    assert f"β = 0.5: max |π* − forward optimum| = {gap:.4f}" in ns["optima_text.value"]


@pytest.mark.slow
def test_10_the_kl_term(matplotlib_ready, shared_sft_start):
    ns, shown = execute("10_the_kl_term", [*KL_NAMES, "sweep", "baseline", "bench_lines"], FAST)
    assert_clean("10_the_kl_term", shown)
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
    # what the strongest β did is printed as this run's numbers; what it does over seeds is the committed
    # benchmark's verdict (accuracy and KL against β = 0 for each placement, and the two placements' KL)
    text = "".join(t for _, t in shown)
    for row in (sweep[3], sweep[6]):
        assert (f"in this run (one seed): KL in the {row['placement']}, β = {row['beta']}: KL {row['kl']:.3f} vs "
                f"{free['kl']:.3f} at β = 0") in text
        assert f"({100 * (row['accuracy'] - free['accuracy']):+.1f} points)" in text
    assert_benchmark_verdicts(ns["bench_lines"], tables.kl_frontier_verdicts(tables.load("kl_frontier"), 500), text,
                              ("KL in the loss, β = 0.2 − β = 0",
                               "k3 in the loss, β = 0.2 − k1 in the reward, β = 0.2"))


@pytest.mark.slow
def test_12_the_rlhf_route_runs(matplotlib_ready, shared_sft_start):
    ns, shown = execute("12_the_rlhf_route", ["m", "bon", "summary", "runs", "memory", "adv_hand", "measured_share",
                                              "float(v.grad)", "SEEDS", VERDICTS, "peaks", "bon_up", "rose",
                                              "everyone",
                                              "{s: r['rm']['heldout_gold_accuracy'] for s, r in per_seed.items()}"],
                                              FAST)
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
    # the same lesson over seeds, each its own SFT start and reward model: the reward model beats chance against
    # gold on every seed, best-of-N's gold peaks above N = 1 on every seed, and the proxy rises under PPO in most
    # runs (FAST with AVX2 kernels, seeds 0-2: reward model 77.5 / 69.3 / 75.7% against gold, best-of-N's gold
    # peaking at N = 4 / 8 / 8, the proxy up in 4 of 6 runs; the same thresholds hold with AVX-512 kernels)
    seeds, verdicts, text = ns["SEEDS"], ns[VERDICTS], "".join(t for _, t in shown)
    n = len(seeds)
    gold_rm = ns["{s: r['rm']['heldout_gold_accuracy'] for s, r in per_seed.items()}"]
    assert n >= 3 and sorted(map(int, gold_rm)) == sorted(seeds)
    assert all(x >= 0.58 for x in gold_rm.values()), gold_rm
    assert ns["bon_up"] == n and all(p > 1 for p in ns["peaks"].values()), ns["peaks"]
    assert f"peaked above N = 1 on {n} of {n} seeds" in text
    assert len(ns["everyone"]) == 2 * n and len(ns["rose"]) >= n, ns["everyone"]
    for key, (_, count, _, _, sentence) in verdicts.items():
        assert count == n and sentence in text, key


@pytest.mark.slow
def test_14_rl_as_a_system(matplotlib_ready, shared_sft_start):
    names = ["baseline", "kv", "table", "share", "bound", "g_s", "u_s", "cpu_sync", "cpu_k1", "kl1", "kl4", "kl_hot",
             "dynamic", "adaptive", "NOISE", "B", "L_MAX", "STEPS", "hot_passport['systems']",
             "{k: [r.get('staleness') for r in v['rows']] for k, v in runs.items()}",
             "{k: [r['groups_sampled'] for r in v['rows']] for k, v in runs.items()}", "knob_table", "paths", "swing",
             "kl_peak", "SEEDS", VERDICTS, "lags", "kl_grew", "kl_slower", "seed_paths",
             "{s: {k: v['accuracy'] for k, v in r.items()} for s, r in per_seed.items()}",
             "{s: {k: summarise(v)['mismatch_kl'] for k, v in r.items() if k != 'SFT'} for s, r in per_seed.items()}",
             "{s: {k: [x.get('staleness') for x in r[k]['rows']] for k in ('K = 1', 'K = 4')} "
             "for s, r in per_seed.items()}"]
    ns, shown = execute("14_rl_as_a_system", names, FAST)
    assert_clean("14", shown)
    assert_no_generator_repr("14", shown)
    text = "".join(t for _, t in shown)
    table, kv = ns["table"], ns["kv"]
    assert ns["baseline"]["accuracy"] == shared_sft_start["accuracy"]  # the shared SFT start
    # 1. the KV cache: the same samples bit for bit, and cheaper in CPU seconds (by construction: the uncached
    # loop re-runs the prompt for each of the G completions at every token)
    assert kv["same"] and "identical, bit for bit" in text
    assert kv["speedup"] > 1.2, kv
    assert f"the cache is {kv['speedup']:.1f}× cheaper" in text
    # 2. staleness: the recorded lags are the fixed lag max(0, s − K), and the mismatch grows with K
    stale = ns["{k: [r.get('staleness') for r in v['rows']] for k, v in runs.items()}"]
    steps = ns["STEPS"]
    assert stale["K = 1"] == [min(s, 1) for s in range(steps)] and stale["K = 4"] == [min(s, 4) for s in range(steps)]
    assert set(stale["synchronous"]) == {None}
    assert ns["kl4"] > 2 * ns["kl1"] > 0, (ns["kl1"], ns["kl4"])
    assert table["K = 4"]["ess"] < 1 and table["K = 4"]["masked"] >= 0
    # the correction changes the update only where it acts: the no-correction run measures the same things
    assert table["K = 4, no correction"]["mismatch_kl"] > ns["kl1"]
    # the overlap bound is computed from the measured split, and the sentences print it
    g, u = ns["g_s"], ns["u_s"]
    assert ns["share"] == pytest.approx(g / (g + u)) and ns["bound"] == pytest.approx((g + u) / max(g, u))
    assert 1 < ns["bound"] <= 2
    assert f"generation share {ns['share']:.0%}" in text and f"= {ns['bound']:.2f}×" in text
    # each path is read from its own accuracy curve (every 2 steps), and seed 0's swing sentence follows its numbers
    for name, p in ns["paths"].items():
        assert p["low"] <= p["final"] <= p["high"] and p["final_step"] == steps, (name, p)
        assert f"lowest {p['low']:.1%} (step {p['low_step']})" in text
    fell = ns["baseline"]["accuracy"] - ns["paths"]["K = 4"]["low"]
    assert ns["swing"].startswith("seed 0: K = 4 fell" if fell > ns["NOISE"] else "seed 0: K = 4 never fell")
    assert ns["swing"] in text
    assert ns["kl_peak"] >= ns["kl4"] and f"mismatch KL peaked at {ns['kl_peak']:.3f}" in text
    assert "K = 4, lr / 4" in ns["paths"] and "seed 0, K = 4's lowest point against its start" in text
    # 3. the mismatched sampler: a mismatch at K = 0 far above K = 4's, recorded in the passport
    assert ns["kl_hot"] > ns["kl4"] > 2 * ns["kl1"], (ns["kl_hot"], ns["kl4"], ns["kl1"])
    assert ns["hot_passport['systems']"]["sampler"].startswith("deliberately mismatched: samples at temperature 2.0")
    assert ns["hot_passport['systems']"]["loop"].startswith("synchronous")
    # 4. dynamic sampling: extra groups are exactly those drawn beyond B per step
    groups = ns["{k: [r['groups_sampled'] for r in v['rows']] for k, v in runs.items()}"]
    assert ns["dynamic"]["extra_groups"] == sum(groups["dynamic sampling"]) - ns["B"] * steps > 0
    assert all(n % ns["B"] == 0 for n in groups["dynamic sampling"])  # each extra round draws a whole batch
    assert all(n == ns["B"] for n in groups["synchronous"])
    assert f"dynamic sampling drew {ns['dynamic']['extra_groups']} extra groups" in text
    # 5. the adaptive cap: first step at L_max, never below the longest right answer + <eos>, never above L_max
    caps = ns["adaptive"]["caps"]
    assert len(caps) == steps and caps[0] == ns["L_MAX"]
    assert all(ns["adaptive"]["floor"] <= c <= ns["L_MAX"] for c in caps)
    # 6. the engines' knobs, each with its primary source
    for knob in ("max_async_level", "max_head_offpolicyness", "one_step_off_policy", "max_staleness",
                 "max_trajectory_age_steps", "in-flight weight updates"):
        assert knob in ns["knob_table"]
    assert "arxiv.org/abs/2505.24298" in ns["knob_table"] and "arxiv.org/abs/2509.19128" in ns["knob_table"]
    assert "budget) took " in text
    # 7. over seeds, each its own SFT start: seed 0's runs are the ones above, and the mechanism holds on every
    # seed (the lag of every batch; the mismatch KL grows with K, and the hot sampler's exceeds K = 4's)
    seeds, verdicts, n = ns["SEEDS"], ns[VERDICTS], len(ns["SEEDS"])
    acc = ns["{s: {k: v['accuracy'] for k, v in r.items()} for s, r in per_seed.items()}"]
    acc = {int(s): r for s, r in acc.items()}
    kls = {int(s): r for s, r in ns["{s: {k: summarise(v)['mismatch_kl'] for k, v in r.items() if k != 'SFT'} "
                                    "for s, r in per_seed.items()}"].items()}
    lags = ns["{s: {k: [x.get('staleness') for x in r[k]['rows']] for k in ('K = 1', 'K = 4')} "
              "for s, r in per_seed.items()}"]
    assert n >= 3 and sorted(acc) == sorted(seeds) and acc[seeds[0]]["SFT"] == ns["baseline"]["accuracy"]
    assert all(acc[seeds[0]][k] == table[k]["accuracy"] for k in table)
    assert len({acc[s]["SFT"] for s in seeds}) == n  # each seed its own SFT start
    for s, lag in lags.items():
        assert lag == {"K = 1": [min(i, 1) for i in range(steps)], "K = 4": [min(i, 4) for i in range(steps)]}, s
    assert all(ns["lags"].values()) and all(ns["kl_grew"].values()) and all(ns["kl_slower"].values())
    assert f"on {n} of {n} seeds; the mismatch KL larger at K = 4 than at K = 1 on {n} of {n} seeds" in text
    assert f"smaller at K = 4 with lr / 4 than with the full lr on {n} of {n}" in text
    for s, kl in kls.items():
        assert kl["sampler T = 2.0"] > kl["K = 4"] > 2 * kl["K = 1"] > 0 and kl["K = 4, lr / 4"] < kl["K = 4"], (s, kl)
    # every verdict is read from its own per-seed numbers, and printed
    pairs = {"K = 1": ("K = 1", "synchronous"), "K = 4": ("K = 4", "synchronous"),
             "K = 4 uncorrected": ("K = 4, no correction", "synchronous"),
             "correction": ("K = 4", "K = 4, no correction"), "harm": ("K = 4, no correction", "SFT"),
             "sampler": ("sampler T = 2.0", "sampler T = 2.0, no correction"),
             "dynamic": ("dynamic sampling", "synchronous"), "adaptive": ("adaptive length", "synchronous")}
    low = {int(s): {k: p["low"] for k, p in r.items()} for s, r in ns["seed_paths"].items()}
    diffs = {key: [acc[s][a] - acc[s][b] for s in seeds] for key, (a, b) in pairs.items()}
    diffs["dip"] = [low[s]["K = 4"] - acc[s]["SFT"] for s in seeds]
    diffs["lr / 4"] = [low[s]["K = 4, lr / 4"] - low[s]["K = 4"] for s in seeds]
    assert set(verdicts) == set(diffs)
    for key, (k, count, beyond, median, sentence) in verdicts.items():
        d = diffs[key]
        assert count == n and k == sum(x > 0 for x in d) and median == pytest.approx(statistics.median(d)), key
        same_sign = all(x > 0 for x in d) or all(x < 0 for x in d)
        assert beyond == (same_sign and abs(median) > ns["NOISE"]) and sentence in text, key
    assert "the live runs, this budget" in text
    # the lesson, over seeds, at this budget: four stale steps without the correction cost accuracy on every seed, by
    # more than 3 points at the median; with the correction K = 4 still ends below the synchronous run at the median;
    # a quarter of the learning rate keeps K = 4's lowest point higher (FAST, seeds 0-2, AVX-512 / AVX2 kernels:
    # uncorrected − synchronous -22.8 / -15.6 / -4.2 and -6.8 / -13.0 / -6.0 points; corrected − synchronous median
    # -7.0 and -13.0; lowest point at lr / 4 − at the full lr +3.6 / +2.4 / +0.4 and +6.0 / +4.8 / +13.8). What the
    # correction recovers needs more steps: +8.2 / +8.6 / +11.8 with AVX-512 kernels but -8.4 / +4.6 / -7.0 with
    # AVX2 at FAST, beyond the seed spread in the committed benchmark (50 steps), which the notebook prints beside it
    k, _, _, median, sentence = verdicts["K = 4 uncorrected"]
    assert k == 0 and median <= -0.03, sentence
    assert verdicts["K = 4"][3] < 0, verdicts["K = 4"][4]
    assert verdicts["lr / 4"][0] >= n - 1 and verdicts["lr / 4"][3] > 0, verdicts["lr / 4"][4]
    # the committed benchmark beside the live runs (the repository's benchmarks/ wherever the notebook runs)
    assert "the committed benchmark (benchmarks/tinygpt_async.py" in text
    assert text.count("- K = 4 with the correction − without:") == 2


def test_16_recipes_runs_r1_r1_zero_and_measures_what_rl_amplifies(matplotlib_ready, shared_sft_start):
    from course_lib.lesson.sources import cite

    names = ["r1", "zero", "digits", "full", "starts", "gain", "sft_start_numbers", "as_rft", "as_sft", "zero_rows",
             "below", "zero_answer", "RL_STEPS", "SEEDS", VERDICTS, "seed_gains", "zero_share", "sft_top",
             "stage_answer",
             "{s: [e['pass@1'] for e in r['r1']] for s, r in per_seed.items()}"]
    ns, shown = execute("16_recipes", names, FAST)
    assert_clean("16", shown)
    assert_no_generator_repr("16", shown)
    text = "".join(t for _, t in shown)
    r1, zero, digits, full = ns["r1"], ns["zero"], ns["digits"], ns["full"]
    # r1: four stages, each measured; stage 1 starts at the first policy (one KL measurement)
    assert r1["recipe"] == "r1" and r1["source"] == cite("deepseek_r1") and r1["stopped"] is None
    assert [e["kind"] for e in r1["finished"]] == ["sft", "grpo", "rft", "grpo"]
    for entry in (*r1["finished"], *zero["finished"], *digits["finished"], *full["finished"]):
        assert 0 <= entry["pass@1"] <= 1 and 0 <= entry["sampled_pass@1"] <= entry["pass@8"] <= 1
        assert entry["kl_to_stage_start"] >= 0 and entry["kl_to_first_policy"] >= 0 and entry["cpu_seconds"] > 0
        assert entry["completion_length"] > 0 and entry["entropy"] > 0
    cold, grpo1, rft, grpo2 = r1["finished"]
    assert cold["kl_to_stage_start"] == cold["kl_to_first_policy"] and cold["pass@1"] > 0.02  # the cold start learned
    assert all(e["zero_variance_share"] is not None for e in (grpo1, rft, grpo2)) and grpo1["steps"] == ns["RL_STEPS"]
    # the porous boundary: RFT accepted some samples, and its loss on them is the SFT loss
    assert 0 < rft["acceptance_rate"] <= 1
    assert ns["as_rft"] == pytest.approx(ns["as_sft"], abs=1e-5)
    assert f"RFT kept {rft['acceptance_rate']:.1%} of its samples" in text
    # R1-Zero from the random initialisation: (almost) no group has a success, nothing is learned
    z = zero["finished"][0]
    assert z["zero_variance_share"] >= 0.9 and z["pass@1"] < 0.05 and ns["zero_answer"] == "over 90%"
    assert f"R1-Zero on the tiny GPT: {z['zero_variance_share']:.1%} of groups without signal" in text
    assert len(ns["zero_rows"]) == ns["RL_STEPS"]
    # the digit-text base: a pretrain stage, then GRPO with (almost) no signal
    assert [e["kind"] for e in digits["finished"]] == ["pretrain", "grpo"]
    assert digits["finished"][1]["zero_variance_share"] >= 0.9
    # the SFT start (the shared cache, given as init) is where GRPO's gain is
    assert full["starts_from"] == "the shared SFT start" and [e["kind"] for e in full["finished"]] == ["grpo"]
    assert ns["sft_start_numbers"]["pass@1"] == shared_sft_start["accuracy"] >= SFT_LEARNS
    gain = ns["gain"]
    assert set(gain) == {"random init", "digit-text base", "cold start", "SFT start"}
    assert gain["SFT start"] >= 0.05 and gain["SFT start"] > max(gain["random init"], gain["digit-text base"]), gain
    assert "the largest gain came from the SFT start" in text
    assert f"in {len(ns['below'])} of 4 starts" in text
    # the lesson, over seeds (each its own initialisation and SFT start): GRPO gains the most from the SFT start,
    # beyond the seed spread against every weaker start, by >= 10 points at the median, and R1-Zero has (almost)
    # no group with signal on every seed (FAST, seeds 0-2: gains from the SFT start +19.0 / +17.0 / +20.0 points
    # with AVX-512 kernels, +14.4 / +17.8 / +16.6 with AVX2; from the three others -2.0 to +1.4 on both; R1-Zero
    # 99.2-99.7% of groups without signal on both)
    seeds, verdicts, gains = ns["SEEDS"], ns[VERDICTS], ns["seed_gains"]
    n = len(seeds)
    assert n >= 3 and sorted(map(int, gains)) == sorted(seeds)
    assert ns["sft_top"] == n and f"came from the SFT start on {n} of {n} seeds" in text
    for other in ("random init", "digit-text base", "cold start"):
        k, count, beyond, median, _ = verdicts[other]
        assert count == n and k == n and beyond and median >= 0.10, verdicts[other]
    assert all(x >= 0.9 for x in ns["zero_share"]) and f"(over 90% on {n} of {n} seeds)" in text
    for key, (_, count, _, _, sentence) in verdicts.items():
        assert count == n and sentence in text, key
    # the reveal is the runs': the stage with the largest median among those beyond the seed spread, if any
    stages = {k: v for k, v in verdicts.items() if k.startswith(("GRPO (", "RFT (", "GRPO again"))}
    added = {k: v[3] for k, v in stages.items() if v[2] and v[3] > 0}
    assert len(stages) == 3 and ns["stage_answer"] == (max(added, key=added.get) if added else "none of them")
    pass1 = ns["{s: [e['pass@1'] for e in r['r1']] for s, r in per_seed.items()}"]
    assert [round(x, 6) for x in pass1[str(seeds[0])]] == [round(e["pass@1"], 6) for e in r1["finished"]]


def test_15_environments_and_tools_runs(matplotlib_ready, shared_sft_start):
    names = ["starts", "runs", "sampled", "probe", "proxy", "strict", "before", "episode.policy_mask", "RL_STEPS",
             "pays", "bench_lines", "lines", "masking_lines"]
    ns, shown = execute("15_environments_and_tools", names, FAST)
    assert_clean("15", shown)
    assert_no_generator_repr("15", shown)
    text = "".join(t for _, t in shown)
    starts, runs, sampled, probe = ns["starts"], ns["runs"], ns["sampled"], ns["probe"]
    # the episode by hand: the policy wrote [7+5] and 82<eos>, the prompt and the tool's 12 are context
    assert ns["episode.policy_mask"] == [0] * 7 + [1] * 5 + [0, 0] + [1] * 3
    assert starts["plain"]["accuracy"] == shared_sft_start["accuracy"] >= SFT_LEARNS
    # SFT on every carry demonstration teaches where the tool helps: calls on carry prompts, not elsewhere
    every, few = starts["every carry demo"], starts["100 demos"]
    assert every["tool_use_carry"] >= 0.5 and every["tool_use_no_carry"] <= 0.1, every
    assert few["tool_use_carry"] < every["tool_use_carry"] - 0.3, (few, every)
    # GRPO keeps the tool where the policy already uses it well, and lifts accuracy from every start
    assert runs["every carry demo"]["tool_use_carry"] >= 0.5, runs["every carry demo"]
    assert runs["plain"]["accuracy"] - starts["plain"]["accuracy"] >= 0.05, runs["plain"]
    assert f"{'GRPO, plain':28} held-out {runs['plain']['accuracy']:6.1%}" in text  # the printed table is the run's
    # the masking ablation: with the environment's tokens in the loss the policy learns the tool's answer
    masked, unmasked = probe["GRPO, masked"][0], probe["GRPO, env tokens in the loss"][0]
    assert unmasked > masked + 1.0, probe
    assert f"log-prob of {unmasked:.2f} instead of {masked:.2f}" in text
    # from 100 tool demonstrations GRPO drops the tool: the sampled call rate falls
    assert sampled["100 demos"][1] < sampled["100 demos"][0], sampled
    # ... because, early in GRPO, on carry prompts the episodes that call are right less often than those that do not
    with_call, without = ns["pays"]["100 demos"]
    assert with_call is not None and with_call < without, ns["pays"]
    assert f"the carry episodes that called were right {with_call:.1%} of the time" in text
    assert "A call paid less than the policy's own answer" in text
    # the trusting verifier over-reports: its held-out score is above the strict accuracy of the same policy
    assert ns["proxy"]["accuracy"] - ns["strict"]["accuracy"] >= 0.05, (ns["proxy"], ns["strict"])
    assert f"strict accuracy {ns['strict']['accuracy']:6.1%}" in text
    # ... and RL chases the loophole: it calls more, and the reported score outruns the strict one
    loose, before = sampled["loose verifier"], ns["before"]
    assert loose[1] > loose[0] + 0.1, loose
    gained = ((ns["proxy"]["accuracy"] - before["proxy"]["accuracy"])
              - (ns["strict"]["accuracy"] - before["strict"]["accuracy"]))
    assert gained >= 0.1, (before, ns["proxy"], ns["strict"])
    assert "budget) took " in text
    # section 3's comparisons are this run's (one seed, said so); whether a tool start beats the control and whether
    # GRPO drops a rarely-used tool over seeds is the committed benchmark's verdict, printed from its JSON
    assert ns["lines"][0] == f"In this run (one seed, {ns['RL_STEPS']} GRPO steps from each start):"
    assert_benchmark_verdicts(ns["bench_lines"], tables.tools_verdicts(tables.load("tools")), text,
                              ("tool, few demos, sampled call rate on carry prompts: last quarter of the steps "
                               "− first", "tool, every carry demo − no tool, same extra SFT"))
    unmasked_gain = runs["env tokens in the loss"]["accuracy"] - runs["every carry demo"]["accuracy"]
    assert f"accuracy moved {100 * unmasked_gain:+.1f} points (in this run)" in text
    assert_benchmark_verdicts(ns["masking_lines"], tables.masking_verdicts(tables.load("tools"), 500), text,
                              ("log-prob of the tool's answer: env tokens in the loss − masked",
                               "held-out accuracy after GRPO: env tokens in the loss − masked"))


def test_17_ai_feedback(matplotlib_ready, shared_sft_start):
    ns, shown = execute("17_ai_feedback",
                        ["shares", "top", "rules", "jm", "fm", "rm_biased", "rm_fixed", "rows_biased", "rows_fixed",
                         "curve_biased", "curve_fixed", "SEEDS", "seed_rows", "top_first", "gone_on", VERDICTS], FAST)
    assert_clean("17", shown)
    text = "".join(t for _, t in shown)
    seeds, rows, verdicts = ns["SEEDS"], ns["seed_rows"], ns[VERDICTS]
    n = len(seeds)
    first = {r["seed"]: r for r in rows if "first as" in r["variant"]}
    without = {r["seed"]: r for r in rows if r["variant"] == "without 'first'"}
    # every verdict is over >= 3 seeds, each seed with both constitutions, and printed as computed
    assert n >= 3 and set(first) == set(without) == set(seeds)
    assert first[seeds[0]]["judge_position_bias"] == ns["jm"]["position_bias"]  # seed 0's row is the walk-through's
    for k, (_, count, _, _, sentence) in verdicts.items():
        assert count == n and sentence in text, k
    assert f"'first' decides the most training pairs on {ns['top_first']} of {n} seeds" in text
    # Thresholds: FAST over seeds 0-2 measured (AVX-512 kernels) judge position bias 0.71-0.78 with 'first',
    # |bias| <= 0.07 without; length biases 0.81-1.00; the proxy rose on 3 of 3. Each with a margin:
    # the constitution cannot see the carry error, so the position rule decides most pairs on most seeds
    assert ns["top_first"] >= n - 1
    # the judge inherits the rules' position bias on every seed, and dropping the rule removes it
    assert all(first[s]["judge_position_bias"] > 0.5 for s in seeds), first
    _, _, beyond, median, _ = verdicts["position"]
    assert beyond and median > 0.5
    assert ns["gone_on"] >= n - 1 and all(abs(without[s]["judge_position_bias"]) < 0.25 for s in seeds), without
    gone = abs(ns["fm"]["position_bias"]) < 0.1
    # seed 0's line says what it measured
    assert (f"without it: {'gone' if gone else 'not gone'} (|bias| < 0.1)") in text
    # the length rule survives: in the judge with 'first' on every seed, and in the reward model on most
    assert all(first[s]["judge_length_bias"] > 0.5 for s in seeds)
    assert sum(first[s]["rm_length_bias"] > 0.3 for s in seeds) >= n - 1
    assert ns["rm_fixed"]["train_pairs"] < ns["rm_biased"]["train_pairs"]  # the new judge abstains on the ties
    # RL raises the proxy it optimises on most seeds
    assert verdicts["proxy"][0] >= n - 1
    assert len(ns["rows_biased"]) == len(ns["rows_fixed"]) and all(0 <= r["gold"] <= 1 for r in ns["rows_biased"])
