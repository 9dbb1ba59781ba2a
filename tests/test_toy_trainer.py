"""A new trainer is one file: a toy trainer in a temporary module, touching no file of the repository, trains
through ``pipeline.run``, resumes from its checkpoint, and shows in the CLI, the passport, a recipe and the TRL
bridge."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import textwrap

import pytest

from course_lib.__main__ import main
from course_lib.run.passport import passport
from course_lib.run.pipeline import run
from course_lib.run.recipes import run_recipe
from course_lib.trainers import trainer
from course_lib.trainers.configs import from_dict, get_config, to_dict, validate

TOY = '''
"""A toy trainer: SFT's loss at its own learning rate, through the one loop."""
from dataclasses import dataclass

import torch

from course_lib.tinygpt.runtime import make_optimizer
from course_lib.trainers.sft import sft_loss
from course_lib.trainers.trainer import (StageResult, TRLRecipe, TRLRow, Unmatched, register, register_stage,
                                        train_loop)


@dataclass
class ToyConfig:
    steps: int = 3
    batch_size: int = 8
    learning_rate: float = 1e-3
    toy_knob: float = 0.5
    eval_every: int = 1

    def check(self):
        if not self.toy_knob > 0:
            raise ValueError(f"toy.toy_knob must be > 0; got {self.toy_knob!r}")


def toy_passport(cfg, info):
    return {"optimisation": {"algorithm": f"toy, knob={cfg.toy.toy_knob}"}}


def toy_trl(cfg, num_processes):
    unmatched = [Unmatched("toy.toy_knob", cfg.toy.toy_knob, "SFTTrainer has no loss scale")]
    return TRLRecipe("SFTTrainer", "SFTConfig", {"per_device_train_batch_size": cfg.toy.batch_size}, unmatched)


def toy_numbers(rows):
    return {"toy_loss_last": rows[-1]["loss"] if rows else None}


@register("toy", ToyConfig, test={"steps": 2, "batch_size": 4}, passport=toy_passport,
          trl=TRLRow(toy_trl, data="demonstrations"), controls=("sft", "toyctl"), recipe_numbers=toy_numbers)
def toy_stage(ctx):
    cfg, model, task = ctx.cfg.toy, ctx.model, ctx.task
    ids, attn, cmask = task.demonstrations(next(model.parameters()).device)
    opt = make_optimizer(model, cfg.learning_rate)
    if ctx.train.state is not None:
        opt.load_state_dict(ctx.train.state["optimizer"])

    def step(i):
        idx = torch.randint(0, ids.shape[0], (cfg.batch_size,), generator=ctx.generator)
        loss = cfg.toy_knob * sft_loss(model, ids[idx], attn[idx], cmask[idx], prompt_length=task.prompt_length)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return {"loss": loss.item()}

    total = cfg.steps if ctx.train.steps is None else ctx.train.steps
    done = train_loop("toy", step, ctx.train.replace(show_progress=False), total=total,
                      state_dict=lambda: {"optimizer": opt.state_dict()})
    return StageResult(steps=done["steps"], rl_seconds=done["seconds"])


CONTROL_CALLS = []


@register_stage("toyctl", "toy", passport=toy_passport, control=True)
def toy_control(ctx):
    CONTROL_CALLS.append((ctx.train.steps, ctx.sft is not None))
    return toy_stage(ctx)
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy trainer's module, importable from a temporary folder; unregistered afterwards."""
    (tmp_path / "toy_trainer.py").write_text(textwrap.dedent(TOY))
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__("toy_trainer")
    yield sys.modules["toy_trainer"]
    trainer.TRAINERS.pop("toy", None)
    trainer.STAGES.pop("toyctl", None)
    sys.modules.pop("toy_trainer", None)


def _help(*argv) -> str:
    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        main([*argv, "--help"])
    return text.getvalue()


def test_a_toy_trainer_in_one_file_has_a_config_section_a_flag_and_a_passport(toy):
    cfg = get_config("test")
    # its test values, its defaults
    assert (cfg.toy.steps, cfg.toy.batch_size, get_config("cpu").toy.steps) == (2, 4, 3)
    assert from_dict(json.loads(json.dumps(to_dict(cfg)))) == cfg
    cfg.toy.toy_knob = 0.0
    with pytest.raises(ValueError, match="toy.toy_knob must be > 0"):
        validate(cfg)
    assert "A toy trainer: SFT's loss at its own learning rate" in " ".join(_help("train").split())  # its docstring
    assert "An SFT stage runs first" in " ".join(_help("train", "toy").split())
    assert "--toy-knob" in _help("train", "toy") and "default: 0.5" in _help("train", "toy")
    pp = passport(get_config("test"), "toy")
    assert pp["kind"] == "toy" and pp["optimisation"] == {"algorithm": "toy, knob=0.5"} and "systems" in pp


def test_a_toy_trainer_trains_resumes_and_runs_as_a_recipe_stage(toy, tmp_path):
    out = tmp_path / "run"
    kw = {"threads": 1, "show_progress": False, "verbose": False}
    assert main(["train", "toy", "--config", "test", "--steps", "1", "--toy-knob", "0.25", "--out", str(out),
                 "--sft-steps", "2", "--no-progress", "--threads", "1"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kind"] == "toy" and summary["steps"] == 1 and summary["options"]["toy"]["toy_knob"] == 0.25
    assert json.loads((out / "passport.json").read_text())["optimisation"] == {"algorithm": "toy, knob=0.25"}
    resumed = run("toy", None, out, steps=2, resume=True, **kw)  # from the checkpoint at step 1
    assert resumed["steps"] == 2
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    recipe = run_recipe("toy:steps=2", get_config("test"), tmp_path / "recipe", kl_samples=1, **kw)
    assert recipe["stopped"] is None and [(s["kind"], s["steps"]) for s in recipe["finished"]] == [("toy", 2)]
    stage = json.loads((tmp_path / "recipe" / "stage_1_toy" / "passport.json").read_text())
    assert stage["optimisation"] == {"algorithm": "toy, knob=0.5"}
    assert recipe["finished"][0]["toy_loss_last"] > 0  # register(recipe_numbers=) in the stage's entry


def test_a_stage_registered_as_a_control_runs_as_the_toy_trainers_control(toy, tmp_path):
    summary = run("toy", get_config("test"), tmp_path / "run", steps=1, control="toyctl", threads=1,
                  show_progress=False, verbose=False)
    assert toy.CONTROL_CALLS == [(1, True)]  # the trainer's steps, from the SFT policy
    assert summary["control"] == "toyctl" and 0 <= summary["control_accuracy"] <= 1
    with pytest.raises(ValueError, match=r"control='toyctl' is TOY's control"):
        run("dpo", get_config("test"), tmp_path / "dpo", control="toyctl", verbose=False)


def test_a_toy_trainer_with_a_trl_row_is_translated_and_built_by_the_bridge(toy, tmp_path):
    from course_lib.trl import trl_translate

    cfg = get_config("test")
    assert "toy" in trl_translate.kinds()
    bridged = trl_translate.translate(cfg, "toy")
    assert (bridged.trainer, bridged.config_class, bridged.module) == ("SFTTrainer", "SFTConfig", "trl")
    assert bridged.config["max_steps"] == 2 and bridged.config["per_device_train_batch_size"] == 4  # its section
    assert bridged.config["learning_rate"] == 1e-3 and bridged.config["use_cpu"] is True  # the shared options
    assert [u.option for u in bridged.unmatched] == ["toy.toy_knob"]
    trl_bridge = pytest.importorskip("course_lib.trl.trl_bridge")
    pytest.importorskip("trl")
    from course_lib.run.pipeline import build_policy

    task, model = build_policy(cfg, device="cpu")
    built, _ = trl_bridge.make_trainer("toy", model, task, cfg, output_dir=str(tmp_path))
    assert type(built).__name__ == "SFTTrainer" and len(built.train_dataset) == cfg.task.n_demos


def test_a_bad_trl_row_is_refused_by_name():
    with pytest.raises(ValueError, match=r"data must be one of \('demonstrations', 'pairs', 'answers', 'prompts'\)"):
        trainer.TRLRow(lambda cfg, n: None, data="tokens")
    with pytest.raises(ValueError, match="data='answers' needs prepare"):
        trainer.TRLRow(lambda cfg, n: None, data="answers")
    with pytest.raises(ValueError, match="trl must be a TRLRow, a dict of them or a str saying why none; got 42"):
        trainer.register("bad", object, passport=lambda cfg, info: {}, trl=42)
    assert "bad" not in trainer.TRAINERS


def test_a_trainer_without_a_passport_is_refused_when_registered_not_after_training():
    with pytest.raises(ValueError, match=r"passport must be a function passport\(cfg, info\) .*; got None"):
        trainer.register("bad", object)
    assert "bad" not in trainer.TRAINERS


def test_a_trainer_that_trains_no_policy_offers_no_control(capsys):
    from course_lib.__main__ import main

    assert trainer.entry("rm").controls == () and trainer.entry("judge").controls == ()
    assert trainer.entry("dpo").controls == ("sft",) and trainer.entry("grpo").controls == ("sft", "rft")
    with pytest.raises(SystemExit) as stop:
        main(["train", "rm", "--control"])
    assert stop.value.code == 2 and "unrecognized arguments: --control" in capsys.readouterr().err


def test_a_trainer_without_a_trl_row_says_why_and_is_refused_by_the_bridge():
    from course_lib.trl.trl_translate import kinds, translate

    assert trainer.entry("ppo").trl.startswith("no TRL row: TRL 1.16 ships no PPO trainer")
    assert "ppo" not in kinds() and "rm" not in kinds()
    with pytest.raises(ValueError, match=r"kind must be one of \('sft', 'dpo', 'grpo', 'rloo', 'kto', 'orpo'\)"):
        translate(get_config("test"), "ppo")


def test_a_toy_trainer_trains_from_each_seeds_start_and_runs_seed_by_seed(toy, tmp_path, monkeypatch):
    """``seeds.train_seeds`` (from each seed's cached SFT start) and ``seeds.run_seeds`` (a whole run per seed) take
    the toy by the registry, and train it the same way: the same per-step losses and final accuracy per seed."""
    from course_lib.run.seeds import run_seeds, train_seeds

    monkeypatch.setenv("COURSE_CACHE", str(tmp_path / "cache"))
    cfg = get_config("test")
    cfg.sft.steps = 4
    got = train_seeds("toy", cfg, [0, 1], processes=1)
    assert [(r["seed"], r["steps"], len(r["rows"])) for r in got] == [(0, 2, 2), (1, 2, 2)]
    report = run_seeds("toy", cfg, tmp_path / "seeds", [0, 1], device="cpu", processes=1)
    assert report["kind"] == "toy" and report["stopped"] == {}
    assert report["verdicts"][0].startswith("TOY − its SFT start")
    for r, run_summary in zip(got, report["runs"]):
        rows = [json.loads(line) for line in (tmp_path / "seeds" / f"seed-{r['seed']}" / "metrics.jsonl").open()]
        assert [x["loss"] for x in r["rows"]] == [x["loss"] for x in rows]
        assert (r["start"]["accuracy"], r["final"]["accuracy"]) == (run_summary["start_accuracy"],
                                                                    run_summary["final_accuracy"])
    assert got[0]["rows"] != got[1]["rows"]  # two seeds, two runs
