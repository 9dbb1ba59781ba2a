"""Asynchronous GRPO (course_lib.trainers.rollout_worker): equality at K = 0, versions, faults, resume, records.

Every test runs the ``test`` config for a few steps from one shared SFT policy, and every test
ends with no child process left behind (an autouse fixture checks it).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import multiprocessing
import os
import signal

import psutil
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.__main__ import main
from course_lib.run.passport import passport
from course_lib.run.pipeline import rl_generator, run, sft_policy
from course_lib.tinygpt import rewards
from course_lib.tinygpt.rollout import next_length_cap
from course_lib.tinygpt.runtime import Interrupted, MetricsLog, stop_on_interrupt
from course_lib.trainers.configs import get_config, validate
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.rollout_worker import RolloutWorkerError
from course_lib.trainers.trainer import TrainContext

TIMING = ("seconds", "per_second")


@pytest.fixture(autouse=True)
def no_process_left_behind():
    # Processes the worker already had (JupyterLab and Chromium, session fixtures of the notebook
    # tests on the same xdist worker) are not this test's.
    before = set(psutil.Process().children(recursive=True))
    yield
    assert multiprocessing.active_children() == []
    assert [p for p in psutil.Process().children(recursive=True) if p not in before] == []


@pytest.fixture(scope="module")
def sft():
    cfg = get_config("test")
    task, model, _ = sft_policy(cfg, TrainContext(show_progress=False), seed=0, device="cpu")
    return cfg, task, {k: v.clone() for k, v in model.state_dict().items()}


def _grpo(sft, *, steps=4, log=None, saved=None, state=None, worker=None, start=None, **options):
    """GRPO from the SFT policy, seeded as the pipeline seeds it; returns (rows, model, result).

    Each checkpoint is appended to ``saved`` as (step, trainer_state, seconds, model weights).
    """
    from course_lib.tinygpt.model import build_model

    cfg, task, weights = sft
    g = dataclasses.replace(cfg.grpo, steps=steps, **options)
    model = build_model(cfg.model, task.tokenizer)
    model.load_state_dict(start if start is not None else weights)
    log = log if log is not None else MetricsLog()
    saved = saved if saved is not None else []

    def keep(step, trainer_state, seconds):
        saved.append((step, copy.deepcopy(trainer_state), seconds,
                      {k: v.clone() for k, v in model.state_dict().items()}))

    res = train_grpo(model, task, g,
                     TrainContext(log=log, state=state, checkpoint=keep, checkpoint_every=2, show_progress=False),
                     generator=rl_generator(0), reference_state=weights, worker=worker)
    return log.rows, model, res


def _plain(rows):
    return [{k: v for k, v in r.items() if not any(t in k for t in TIMING)} for r in rows]


def test_k0_in_the_worker_is_the_synchronous_trainer_step_for_step(sft):
    sync_rows, sync_model, sync_res = _grpo(sft)
    async_rows, async_model, async_res = _grpo(sft, worker=True)
    assert sync_res["loop"]["loop"].startswith("synchronous") and async_res["loop"]["loop"].startswith("asynchronous")
    assert any(r["loss"] != 0 for r in sync_rows), "the run must learn something for the comparison to mean anything"
    for a, b in zip(_plain(sync_rows), _plain(async_rows), strict=True):
        assert {k: b[k] for k in a} == a  # every synchronous number, exactly
        assert b["staleness"] == 0 and b["sampler_version"] == a["step"] - 1
    a, b = sync_model.state_dict(), async_model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("reward", ["strict", "partial"])
def test_every_reward_option_means_the_same_in_the_worker(sft, reward):
    # the reward a GRPO run uses (checker + DAPO's overlong shaping) is built in one place for both loops
    sync_rows, _, _ = _grpo(sft, steps=2, reward=reward, soft_punish_cache=1)
    async_rows, _, _ = _grpo(sft, steps=2, reward=reward, soft_punish_cache=1, worker=True)
    assert all(r["overlong_penalty"] is not None for r in sync_rows)
    assert [{k: b.get(k) for k in a}
            for a, b in zip(_plain(sync_rows), _plain(async_rows), strict=True)] == _plain(sync_rows)
    stale_rows, _, _ = _grpo(sft, steps=2, reward=reward, soft_punish_cache=1, max_staleness=1)
    assert all(r.get("overlong_penalty") is not None for r in stale_rows)


def test_versions_staleness_and_the_mismatch_are_recorded(sft):
    rows, _, res = _grpo(sft, steps=5, max_staleness=2)
    assert [r["sampler_version"] for r in rows] == [0, 0, 0, 1, 2]  # batch s: the weights of step max(0, s − K)
    assert [r["staleness"] for r in rows] == [0, 1, 2, 2, 2]
    assert res["loop"]["staleness_per_step"] == [0, 1, 2, 2, 2]
    assert res["loop"]["worker_cpu_seconds"] > 0
    learned = [r for r in rows if r["skipped"] == 0 and r["mismatch_kl"] is not None]
    fresh = [r["mismatch_kl"] for r in learned if r["sampler_version"] == r["step"] - 1]
    stale = [r["mismatch_kl"] for r in learned if r["step"] >= 3]  # weights that at least one update moved
    assert fresh and max(fresh) < 1e-9  # the same weights: only float rounding between cache and full forward
    assert stale and max(stale) > 1e-7  # older weights: a real mismatch
    # ESS is a float32 ratio of sums: with near-equal weights it can round above 1 by a few ulps, by how much
    # depends on the CPU kernels' summation order (AVX-512 and AVX2 differ), so the bound allows float32 rounding
    assert all(0 < r["is_ess"] <= 1 + 1e-5 and 0 <= r["is_clipped_fraction"] <= 1 for r in learned)


def _exploding_reward(monkeypatch, at_call: int):
    """A reward source that raises in the worker at its ``at_call``-th batch (the worker is forked: it inherits
    this)."""
    def loader(path, task):
        calls = {"n": 0}
        strict = rewards.resolve_reward("strict", task)

        class Exploding:  # the strict checker (its verifier-failure counts too) until the at_call-th batch
            def score(self, pairs, completions):
                calls["n"] += 1
                if calls["n"] == at_call:
                    raise RuntimeError("reward exploded in the worker")
                return strict.score(pairs, completions)

            def __call__(self, pairs, completions):
                return self.score(pairs, completions).rewards

        return Exploding()

    monkeypatch.setitem(rewards.SOURCES, rewards.REWARD_MODEL_PREFIX, loader)


def test_a_failing_worker_stops_the_trainer_with_its_error_and_a_checkpoint_that_resumes(sft, monkeypatch):
    full_rows, full_model, _ = _grpo(sft, max_staleness=1)
    _exploding_reward(monkeypatch, at_call=3)  # batches 0 and 1 arrive, batch 2 fails
    log, saved = MetricsLog(), []
    with pytest.raises(RolloutWorkerError, match="reward exploded in the worker") as err:
        _grpo(sft, max_staleness=1, reward="rm:boom", log=log, saved=saved)
    assert "Traceback" in str(err.value)  # the worker's own traceback
    assert [r["step"] for r in log.rows] == [1, 2]
    step, trainer_state, seconds, weights = saved[-1]
    assert step == 2 and "sampler" in trainer_state  # the completed steps, and where the worker must restart
    monkeypatch.undo()
    rows, model, _ = _grpo(sft, max_staleness=1, log=MetricsLog(rows=log.rows), start=weights,
                           state={"step": step, "seconds": seconds, **trainer_state})
    assert _plain(rows) == _plain(full_rows)  # the resumed run is the uninterrupted one
    a, b = full_model.state_dict(), model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def _worker_pid():
    (child,) = multiprocessing.active_children()
    return child.pid


class _Hook(MetricsLog):
    """A metrics log that runs ``action`` when the row of ``at_step`` is appended (inside the loop)."""

    def __init__(self, at_step, action):
        super().__init__()
        self.at_step, self.action = at_step, action

    def append(self, row):
        super().append(row)
        if row["step"] == self.at_step:
            self.action()


def test_ctrl_c_stops_both_processes_after_a_checkpoint(sft):
    def ctrl_c():  # a terminal sends SIGINT to the whole process group: here, to both processes
        os.kill(_worker_pid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)

    saved = []
    with stop_on_interrupt(), pytest.raises(Interrupted, match="grpo stopped at step 1"):
        _grpo(sft, max_staleness=1, log=_Hook(1, ctrl_c), saved=saved)
    assert [s[0] for s in saved] == [1] and "sampler" in saved[0][1]


def test_a_killed_worker_is_reported_with_its_exit_code(sft):
    log, saved = _Hook(1, lambda: os.kill(_worker_pid(), signal.SIGKILL)), []
    with pytest.raises(RolloutWorkerError, match=r"died \(exit code -9\)"):
        _grpo(sft, max_staleness=1, log=log, saved=saved)
    assert saved[-1][0] == len(log.rows)  # the checkpoint holds exactly the completed steps


def test_a_stopped_worker_fails_the_run_after_the_timeout_with_a_checkpoint(sft):
    log, saved = _Hook(1, lambda: os.kill(_worker_pid(), signal.SIGSTOP)), []
    with pytest.raises(RolloutWorkerError, match=r"sent no batch for 1\.5 s \(grpo.worker_timeout\)"):
        _grpo(sft, max_staleness=1, worker_timeout=1.5, log=log, saved=saved)
    assert len(log.rows) < 4 and saved[-1][0] == len(log.rows)  # the checkpoint holds exactly the completed steps


def test_the_first_ctrl_c_stops_a_run_waiting_on_a_stopped_worker_with_a_checkpoint(sft):
    import threading

    def stop_worker_then_ctrl_c():  # the trainer will wait on the stopped worker when the Ctrl-C comes
        os.kill(_worker_pid(), signal.SIGSTOP)
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()

    log, saved = _Hook(1, stop_worker_then_ctrl_c), []
    with stop_on_interrupt(), pytest.raises(Interrupted, match=r"grpo stopped at step \d"):
        _grpo(sft, max_staleness=1, log=log, saved=saved)
    assert len(log.rows) < 4 and saved[-1][0] == len(log.rows) and "sampler" in saved[-1][1]


@pytest.mark.slow
def test_train_grpo_with_a_stopped_worker_ends_on_the_first_ctrl_c_with_a_checkpoint(tmp_path):
    import subprocess
    import sys
    import time

    from course_lib.tinygpt.runtime import load_checkpoint

    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "course_lib", "train", "grpo", "--config", "test",
                             "--out", str(out), "--max-staleness", "1", "--steps", "400", "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, metrics = time.time() + 120, out / "metrics.jsonl"
        while proc.poll() is None and time.time() < deadline and not (metrics.is_file() and metrics.read_text()):
            time.sleep(0.05)  # the GRPO stage has logged a step: its worker runs
        (worker,) = psutil.Process(proc.pid).children()
        worker.suspend()  # SIGSTOP: the trainer soon waits on it
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)  # one Ctrl-C
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        for p in [*psutil.Process(proc.pid).children(), psutil.Process(proc.pid)] if proc.poll() is None else []:
            p.kill()
        proc.wait()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and f"--resume {out}" in stdout
    state = load_checkpoint(out / "checkpoint.pt", kind="grpo")
    rows = (out / "metrics.jsonl").read_text().splitlines()
    assert state["stage"] == "grpo" and state["step"] == len(rows) < 400 and "sampler" in state
    assert not worker.is_running()


@pytest.mark.parametrize("value", [-1, 1.5, True, "1"])
def test_max_staleness_must_be_an_integer_at_least_zero(value):
    cfg = get_config("test")
    cfg.grpo.max_staleness = value
    with pytest.raises(ValueError, match=r"grpo.max_staleness must be an integer in \[0, 32\]"):
        validate(cfg)


def test_cli_refuses_a_non_integer_staleness_by_name(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "grpo", "--config", "test", "--out", str(tmp_path), "--max-staleness", "1.5"])
    assert "--max-staleness: invalid int value: '1.5'" in capsys.readouterr().err
    (tmp_path / "metrics.jsonl").write_text("")  # a run already there: the bad option is still what is reported
    assert main(["train", "grpo", "--config", "test", "--out", str(tmp_path), "--max-staleness", "-2",
                 "--no-progress"]) == 2
    assert "grpo.max_staleness must be an integer in [0, 32]" in capsys.readouterr().err


@pytest.mark.slow
def test_pipeline_records_the_loop_and_resumes_an_async_run_exactly(tmp_path):
    cfg = get_config("test")
    cfg.grpo.max_staleness = 1
    cfg.grpo.vllm_importance_sampling_mode = "token_truncate"
    full = run("grpo", copy.deepcopy(cfg), tmp_path / "full", steps=4, show_progress=False, verbose=False)
    assert full["loop"]["max_staleness"] == 1 and full["loop"]["staleness_per_step"] == [0, 1, 1, 1]
    systems = full["passport"]["systems"]
    assert systems["placement"].startswith("two processes") and systems["loop"].startswith("asynchronous")
    assert "token_truncate" in systems["staleness"]
    passport = json.loads((tmp_path / "full" / "passport.json").read_text())
    assert passport["systems"] == systems
    run("grpo", copy.deepcopy(cfg), tmp_path / "part", steps=2, sft_checkpoint=str(tmp_path / "full" / "sft.pt"),
        show_progress=False, verbose=False)
    part = run("grpo", None, tmp_path / "part", steps=4, resume=True, show_progress=False, verbose=False)
    rows = [json.loads(line) for line in (tmp_path / "part" / "metrics.jsonl").read_text().splitlines()]
    ref = [json.loads(line) for line in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    assert _plain(rows) == _plain(ref) and part["final_accuracy"] == full["final_accuracy"]
    assert [r["staleness"] for r in rows] == [0, 1, 1, 1]


def test_the_trl_bridge_names_what_trl_does_instead_of_a_fixed_lag():
    from course_lib.trl import trl_bridge

    cfg = get_config("test")
    assert "grpo.max_staleness" not in [u.option for u in trl_bridge.translate(cfg, "grpo").unmatched]
    cfg.grpo.max_staleness = 2
    (entry,) = [u for u in trl_bridge.translate(cfg, "grpo").unmatched if u.option == "grpo.max_staleness"]
    assert entry.value == 2 and "AsyncGRPOConfig.max_staleness" in entry.trl_does


def test_the_dashboard_draws_staleness_mismatch_and_weights_from_async_rows():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_lib.run.dashboard import LABELS, dashboard

    rows = [{"step": s, "staleness": min(s - 1, 2), "mismatch_kl": 1e-4 * s, "is_ess": 1 - 0.01 * s,
             "is_clipped_fraction": 0.01 * s, "gen_seconds": 0.1, "update_seconds": 0.2, "wait_seconds": 0.01}
            for s in range(1, 6)]
    fig = dashboard(rows)
    panels = {ax.get_title(): {ln.get_label() for ln in ax.get_lines()} for ax in fig.axes if ax.get_title()}
    assert panels["rollout staleness (async)"] == {LABELS["staleness"]}
    assert panels["sampler vs trainer mismatch"] == {LABELS["mismatch_kl"]}
    assert panels["behaviour importance weights"] == {LABELS["is_ess"], LABELS["is_clipped_fraction"]}
    assert LABELS["wait_seconds"] in panels["time per step"]
    plt.close(fig)


def test_cli_sets_the_correction_and_none_removes_a_bound():
    from course_lib.__main__ import apply_overrides, build_parser

    args = vars(build_parser().parse_args(
        ["train", "grpo", "--config", "test", "--max-staleness", "2", "--vllm-importance-sampling-mode", "token_mask",
         "--vllm-importance-sampling-clip-min", "0.5", "--vllm-importance-sampling-clip-max", "none"]))
    cfg = validate(apply_overrides(get_config("test"), {k: v for k, v in args.items() if "." in k and v is not None}))
    g = cfg.grpo
    assert (g.max_staleness, g.vllm_importance_sampling_mode) == (2, "token_mask")
    assert (g.vllm_importance_sampling_clip_min, g.vllm_importance_sampling_clip_max) == (0.5, None)


# --- a deliberately mismatched sampler and the adaptive completion length ---

def test_a_mismatched_sampler_is_measured_and_corrected_at_k0(sft):
    plain, _, _ = _grpo(sft, steps=3)
    hot, _, res = _grpo(sft, steps=3, sampler_temperature=2.0)
    raw, _, _ = _grpo(sft, steps=3, sampler_temperature=2.0, vllm_importance_sampling_correction=False)
    same, _, _ = _grpo(sft, steps=3, sampler_temperature=1.0)  # equal to the trainer's temperature: no mismatch
    assert _plain(same) == _plain(plain) and "mismatch_kl" not in plain[0]
    assert "staleness" not in hot[0] and res["loop"]["loop"].startswith("synchronous")  # K = 0, one process
    learned = [r for r in hot if r["skipped"] == 0 and r["mismatch_kl"] is not None]
    assert learned and min(r["mismatch_kl"] for r in learned) > 0.05  # temperature 2 vs 1: a large KL at K = 0
    assert all(0 < r["is_ess"] < 1 for r in learned)
    i = hot.index(learned[0])  # the first step with a gradient: until then both runs drew the same samples
    assert hot[i]["reward_mean"] == raw[i]["reward_mean"] and hot[i]["loss"] != raw[i]["loss"]  # reweighted
    assert "mismatch_kl" in raw[i] and raw[i]["mismatch_kl"] == hot[i]["mismatch_kl"]  # measured, not applied
    assert res["loop"]["sampler"].startswith("deliberately mismatched: samples at temperature 2.0")
    cfg = get_config("test")
    cfg.grpo.sampler_temperature = 2.0
    assert "temperature 2.0" in passport(cfg, "grpo")["systems"]["sampler"]


@pytest.mark.parametrize(("field", "value", "match"), [
    ("sampler_temperature", 0.0, r"grpo.sampler_temperature must be None .* or a finite number > 0"),
    ("sampler_temperature", "hot", r"grpo.sampler_temperature must be None"),
    ("adaptive_length_quantile", 0.0,
     r"grpo.adaptive_length_quantile must be None \(off\) or a finite number in \(0, 1\]"),
    ("adaptive_length_quantile", 1.5, r"grpo.adaptive_length_quantile must be None"),
    ("adaptive_length_margin", -1, r"grpo.adaptive_length_margin must be an integer >= 0"),
    ("adaptive_length_margin", 1.5, r"grpo.adaptive_length_margin must be an integer >= 0"),
])
def test_the_new_knobs_are_refused_by_name(field, value, match):
    cfg = get_config("test")
    setattr(cfg.grpo, field, value)
    with pytest.raises(ValueError, match=match):
        validate(cfg)


def test_the_adaptive_length_needs_the_synchronous_loop():
    with pytest.raises(ValueError, match=r"adaptive_length_quantile needs the synchronous loop .*max_staleness=1"):
        dataclasses.replace(get_config("test").grpo, adaptive_length_quantile=0.9, max_staleness=1)


def test_next_length_cap_on_hand_made_lengths():
    # quantile 0.5 of [3, 3, 4, 6] is 3.5 -> 4, + 1
    assert next_length_cap([3, 3, 4, 6], quantile=0.5, margin=1, floor=4, ceiling=6) == 5
    assert next_length_cap([2, 2, 2], quantile=0.9, margin=0, floor=4, ceiling=6) == 4  # never below the right answer
    assert next_length_cap([6, 6, 6], quantile=1.0, margin=2, floor=4, ceiling=6) == 6  # never above L_max
    assert next_length_cap([], quantile=0.9, margin=1, floor=4, ceiling=6) == 6
    with pytest.raises(ValueError, match=r"floor \(7\) must be <= ceiling \(6\)"):
        next_length_cap([3], quantile=0.9, margin=1, floor=7, ceiling=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=40), st.floats(0.01, 1.0), st.integers(0, 4),
       st.integers(1, 12), st.integers(0, 8))
def test_next_length_cap_never_cuts_a_right_answer(lengths, q, margin, floor, extra):
    ceiling = floor + extra
    cap = next_length_cap(lengths, quantile=q, margin=margin, floor=floor, ceiling=ceiling)
    assert floor <= cap <= ceiling  # every right answer (at most floor tokens with <eos>) fits
    if q == 1.0:
        assert cap >= min(max(lengths), ceiling)  # q = 1: no sampled length is cut


def test_adaptive_length_off_is_todays_trainer_and_on_logs_its_cap(sft):
    cfg, task, _ = sft
    L = cfg.grpo.max_completion_length
    plain, _, _ = _grpo(sft, steps=3)
    wide, _, _ = _grpo(sft, steps=3, adaptive_length_quantile=1.0, adaptive_length_margin=L)  # the cap is always L_max
    assert "length_cap" not in plain[0]
    assert [r["length_cap"] for r in wide] == [L] * 3
    assert [{k: v for k, v in r.items() if k != "length_cap"} for r in _plain(wide)] == _plain(plain)
    saved = []
    tight, _, res = _grpo(sft, steps=3, saved=saved, adaptive_length_quantile=0.5, adaptive_length_margin=0)
    caps = [r["length_cap"] for r in tight]
    assert caps[0] == L and all(task.answer_length <= c <= L for c in caps)
    assert res["loop"]["length_caps"]["min"] == min(caps)
    step, trainer_state, seconds, weights = saved[0]  # after step 2: the cap step 3 must use
    assert step == 2 and trainer_state["length_cap"] == caps[2]
    trainer_state["length_cap"] = L - 1  # a resumed run generates with the checkpoint's cap, not L_max
    resumed, _, _ = _grpo(sft, steps=3, start=weights, state={"step": step, "seconds": seconds, **trainer_state},
                          adaptive_length_quantile=0.5, adaptive_length_margin=0)
    assert [r["length_cap"] for r in resumed] == [L - 1]


def test_the_trl_bridge_says_trl_has_neither_new_knob():
    from course_lib.trl import trl_bridge

    cfg = get_config("test")
    options = [u.option for u in trl_bridge.translate(cfg, "grpo").unmatched]
    assert "grpo.sampler_temperature" not in options and "grpo.adaptive_length_quantile" not in options
    cfg.grpo.sampler_temperature, cfg.grpo.adaptive_length_quantile = 2.0, 0.9
    found = {u.option: u for u in trl_bridge.translate(cfg, "grpo").unmatched}
    assert "deliberate fault" in found["grpo.sampler_temperature"].trl_does
    assert "max_completion_length=" in found["grpo.adaptive_length_quantile"].trl_does


def test_the_benchmark_writes_what_the_readme_table_renders(tmp_path, monkeypatch):
    """benchmarks/tinygpt_async.py on the test config: settings interleaved per seed, the JSON the sweep table
    reads."""
    from conftest import ROOT

    monkeypatch.setenv("COURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import tables
    import tinygpt_async

    out = tmp_path / "async.json"
    tinygpt_async.main(["--config", "test", "--steps", "3", "--seeds", "0", "--staleness", "1", "--without-correction",
                        "--eval-every", "2", "--out", str(out)])
    data = json.loads(out.read_text())
    assert data["complete"] and data["planned_runs"] == 3 and data["steps"] == 3 and data["config"] == "test"
    assert [(r["max_staleness"], r["correction"]) for r in data["runs"]] == [(0, True), (1, True), (1, False)]
    for r in data["runs"]:
        assert [step for step, _ in r["accuracy_curve"]] == [2, 3] and r["accuracy_curve"][-1][1] == r["accuracy"]
        assert r["cpu_seconds"] > 0 and r["sft_accuracy"] == data["runs"][0]["sft_accuracy"]
        assert (r["mismatch_kl"] is None) == (r["max_staleness"] == 0)
    text = tables.async_sweep(tmp_path)
    assert "| 1 | off |" in text and "**The machine was shared**" in text and "Incomplete" not in text
