"""A new trainer is one file: a toy trainer in a temporary module, touching no file of the repository, trains
through ``pipeline.run``, resumes from its checkpoint, and shows in the CLI, the passport and a recipe."""

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
from course_lib.trainers.trainer import StageResult, register, train_loop


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


@register("toy", ToyConfig, test={"steps": 2, "batch_size": 4}, passport=toy_passport)
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

    done = train_loop("toy", step, ctx.train.replace(show_progress=False), total=cfg.steps,
                      state_dict=lambda: {"optimizer": opt.state_dict()})
    return StageResult(steps=done["steps"], rl_seconds=done["seconds"])
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy trainer's module, importable from a temporary folder; unregistered afterwards."""
    (tmp_path / "toy_trainer.py").write_text(textwrap.dedent(TOY))
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__("toy_trainer")
    yield sys.modules["toy_trainer"]
    trainer.TRAINERS.pop("toy", None)
    sys.modules.pop("toy_trainer", None)


def _help(*argv) -> str:
    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        main([*argv, "--help"])
    return text.getvalue()


def test_a_toy_trainer_in_one_file_has_a_config_section_a_flag_and_a_passport(toy):
    cfg = get_config("test")
    assert (cfg.toy.steps, cfg.toy.batch_size, get_config("cpu").toy.steps) == (2, 4, 3)  # its test values, its defaults
    assert from_dict(json.loads(json.dumps(to_dict(cfg)))) == cfg
    cfg.toy.toy_knob = 0.0
    with pytest.raises(ValueError, match="toy.toy_knob must be > 0"):
        validate(cfg)
    assert "toy" in _help("train")
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
