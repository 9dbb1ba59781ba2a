"""The one trainer loop: stop on the first request, checkpoint, resume — for every registered trainer."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest

from course_lib.tinygpt import runtime
from course_lib.tinygpt.runtime import Interrupted, MetricsLog, load_checkpoint, request_stop
from course_lib.trainers import grpo, ppo, rft, trainer
from course_lib.trainers.trainer import TrainContext, train_loop

sys.path.insert(0, str(Path(__file__).parent))
import test_trainer_golden as golden  # noqa: E402


@pytest.fixture(autouse=True)
def no_stop_left_over():
    runtime._stop["requested"] = False
    yield
    runtime._stop["requested"] = False


def counting_loop(total, *, state=None, stop_at=None, log=None, saved=None, eval_every=2):
    calls = []

    def step_fn(step):
        calls.append(step)
        if stop_at is not None and step + 1 == stop_at:
            request_stop()  # as the first Ctrl-C does, during the step
        return {"value": 10 * (step + 1)}

    keep = (lambda step, st, seconds: saved.append((step, st))) if saved is not None else None
    ctx = TrainContext(state=state, log=log, checkpoint=keep, checkpoint_every=3, show_progress=False)
    out = train_loop("count", step_fn, ctx, total=total, state_dict=lambda: {"calls": list(calls)},
                     eval_fn=lambda: {"evaluated": True}, eval_every=eval_every, seconds_key="elapsed")
    return out, calls


def test_the_loop_logs_evaluates_and_checkpoints_on_schedule():
    log, saved = MetricsLog(), []
    out, calls = counting_loop(5, log=log, saved=saved)
    assert out["steps"] == 5 and calls == [0, 1, 2, 3, 4]
    assert [r["step"] for r in log.rows] == [1, 2, 3, 4, 5] and [r["value"] for r in log.rows] == [10, 20, 30, 40, 50]
    assert [r["step"] for r in log.rows if r.get("evaluated")] == [2, 4, 5]  # every 2 steps and the last
    assert [step for step, _ in saved] == [3, 5]  # every 3 steps and the last
    assert all(r["elapsed"] >= 0 for r in log.rows)


def test_the_first_stop_request_checkpoints_and_stops_at_the_step_boundary_then_resumes():
    log, saved = MetricsLog(), []
    with pytest.raises(Interrupted) as stop:
        counting_loop(6, log=log, saved=saved, stop_at=2)
    assert (stop.value.stage, stop.value.step) == ("count", 2)
    assert saved == [(2, {"calls": [0, 1]})] and len(log.rows) == 2
    runtime._stop["requested"] = False
    out, calls = counting_loop(6, state={"step": 2, "seconds": 0.5}, log=log, saved=saved)
    assert out["steps"] == 6 and calls == [2, 3, 4, 5] and out["seconds"] >= 0.5
    assert [r["value"] for r in log.rows] == [10, 20, 30, 40, 50, 60]


def test_every_trainer_is_registered_with_one_interface():
    import course_lib.run.pipeline as pipeline

    assert set(pipeline.KINDS) == {"sft", "dpo", "grpo", "rm", "ppo", "kto", "orpo", "judge"} == set(trainer.TRAINERS)
    assert all(callable(entry.stage) for entry in trainer.TRAINERS.values())


def test_the_counted_flops_seconds_are_each_trainers_own(monkeypatch, tmp_path):
    """``StageResult.flop_seconds``: the MFU divides SFT's FLOPs by its SFT seconds and the reward model's by its
    training seconds (not sampling and labelling its pairs); a trainer that says nothing, by its rl_seconds."""
    import course_lib.run.pipeline as pipeline
    from course_lib.trainers.configs import get_config

    seen = []
    monkeypatch.setattr(pipeline, "mfu_entry", lambda kind, cfg, rows, seconds, *a, **k: seen.append((kind, seconds)))
    kw = {"threads": 1, "show_progress": False, "verbose": False}
    cfg = get_config("test")
    cfg.sft.steps = 2
    sft = pipeline.run("sft", cfg, tmp_path / "sft", **kw)
    rm = pipeline.run("rm", cfg, tmp_path / "rm", steps=2, **kw)
    dpo = pipeline.run("dpo", cfg, tmp_path / "dpo", steps=1, **kw)
    assert seen == [("sft", sft["sft_seconds"]), ("rm", rm["reward_model"]["train_seconds"]),
                    ("dpo", dpo["rl_seconds"])]
    assert rm["reward_model"]["train_seconds"] < rm["rl_seconds"]  # its pairs' sampling is not counted



PLUMBING = ("log", "state", "checkpoint", "checkpoint_every", "max_grad_norm", "steps", "show_progress", "threads")


def test_every_trainer_takes_its_plumbing_as_one_train_context():
    import inspect

    from course_lib.trainers import dpo, judge, kto, orpo, reward_model, sft

    fns = (sft.train_sft, dpo.train_dpo, kto.train_kto, orpo.train_orpo, grpo.train_grpo, ppo.train_ppo, rft.train_rft,
           reward_model.train_reward_model, reward_model.fit_reward_model, judge.train_judge, judge.fit_judge,
           train_loop,
           trainer.train_offline)
    for fn in fns:
        params = inspect.signature(fn).parameters
        assert params["ctx"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, fn.__name__
        assert not set(PLUMBING) & set(params), fn.__name__  # one way to call a trainer
    assert tuple(f.name for f in dataclasses.fields(TrainContext)) == PLUMBING


@pytest.mark.parametrize("field, value, accepted", [
    ("steps", -1, "None (the config's steps) or an integer >= 0"), ("steps", 2.5, "integer"),
    ("checkpoint_every", 0, "an integer >= 1"), ("max_grad_norm", 0.0, "a finite number > 0"),
    ("max_grad_norm", float("nan"), "a finite number > 0"), ("threads", 0, "an integer in [1, "),
])
def test_a_bad_train_context_value_is_refused_naming_the_field(field, value, accepted):
    with pytest.raises(ValueError, match=rf"^{field} must be .*{re.escape(accepted)}"):
        TrainContext(**{field: value})
    with pytest.raises(ValueError, match=rf"^{field} must be"):
        TrainContext().replace(**{field: value})
    assert TrainContext(steps=0, threads=None).steps == 0


STOPS = [("sft", "sft", "sft"), ("dpo", "dpo", "dpo"), ("grpo+rft", "grpo", "grpo"), ("grpo+rft", "grpo", "rft"),
         ("rm", "rm", "rm"), ("ppo", "ppo", "ppo"), ("kto", "kto", "kto"), ("orpo", "orpo", "orpo")]


@pytest.mark.slow
@pytest.mark.golden("tests/golden/trainers_test_config.json")
@pytest.mark.parametrize("run_name, kind, stop_in", STOPS)
def test_every_trainer_stops_on_the_first_request_and_resumes_to_the_same_numbers(tmp_path, monkeypatch, run_name,
                                                                                  kind,
                                                                                  stop_in):
    """The first stop request (Ctrl-C) after step 1 of ``stop_in`` saves a checkpoint and stops; ``resume``
    then finishes the run with exactly the numbers of the uninterrupted one (the recorded golden run)."""
    from course_lib.run.pipeline import run
    from course_lib.trainers.configs import get_config

    real_step = trainer.train_loop

    def stopping_loop(name, step_fn, ctx, **kwargs):
        def step_then_stop(step):
            row = step_fn(step)
            if name == stop_in and step == 0:
                request_stop()
            return row

        return real_step(name, step_then_stop, ctx, **kwargs)

    for module in (trainer, grpo, rft, ppo):  # sft, dpo, kto, orpo, rm: trainer.train_offline
        monkeypatch.setattr(module, "train_loop", stopping_loop)
    kwargs = golden.RUNS[run_name][1]
    with pytest.raises(Interrupted) as stop:
        run(kind, get_config("test"), tmp_path, device="cpu", seed=0, show_progress=False, verbose=False, **kwargs)
    assert (stop.value.stage, stop.value.step) == (stop_in, 1)
    state = load_checkpoint(tmp_path / "checkpoint.pt", kind=kind)
    if stop_in != "rft":  # the control keeps no checkpoint: a resumed run runs it again from its start
        assert (state["stage"], state["step"]) == (stop_in, 1)
    runtime._stop["requested"] = False
    for module in (trainer, grpo, rft, ppo):  # sft, dpo, kto, orpo, rm: trainer.train_offline
        monkeypatch.setattr(module, "train_loop", real_step)
    summary = run(kind, None, tmp_path, device="cpu", show_progress=False, verbose=False, resume=True)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    recorded = json.loads(golden.GOLDEN.read_text())["runs"][run_name]
    now = {"summary": {k: summary[k] for k in golden.SUMMARY_KEYS}, "metrics": [golden._numbers(r) for r in rows]}
    if "reward_model" in recorded:
        now["reward_model"] = golden._numbers(summary["reward_model"])
    golden._same(recorded, now, run_name)
