"""course_lib.trl.trl_bridge: course configs to TRL, with and without TRL installed.

The translation table (``course_lib.trl.trl_translate``) is tested on its own in test_trl_translate.py; the trainers,
the chat-model recipe and the two-process ``accelerate launch`` run need TRL and skip with the reason without it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT

from course_lib.trainers.configs import get_config
from course_lib.trainers.trainer import TrainContext
from course_lib.trl import trl_bridge, trl_translate

NEEDS_TRL = pytest.mark.skipif(not trl_bridge.trl_available(), reason=trl_bridge.INSTALL_HINT)


def test_importing_course_lib_and_the_bridge_never_imports_trl():
    code = "import sys, course_lib, course_lib.trl.trl_bridge; print('trl' in sys.modules, 'datasets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert out.stdout.split() == ["False", "False"]


def test_the_bridge_serves_the_translation_table():
    assert trl_bridge.translate is trl_translate.translate and trl_bridge.Bridged is trl_translate.Bridged


def test_without_trl_the_trainers_say_how_to_install(monkeypatch):
    monkeypatch.setattr(trl_bridge, "trl_available", lambda: False)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[trl\]'"):
        trl_bridge.trl_config(trl_bridge.translate(get_config("test"), "grpo"))


def test_text_checkers():
    strict, loose = trl_bridge.text_reward_function("strict"), trl_bridge.text_reward_function("loose")
    completions = [[{"role": "assistant", "content": " 65\n"}], [{"role": "assistant", "content": "6 and 5"}], "56"]
    assert strict(None, completions, a=[7] * 3, b=[58] * 3) == [1.0, 0.0, 0.0]
    assert loose(None, completions, a=[7] * 3, b=[58] * 3) == [1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="'strict' or 'loose'"):
        trl_bridge.text_reward_function("exact")


@NEEDS_TRL
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sft", "rloo"])
def test_bridged_trainers_train_the_tiny_gpt(kind, tmp_path):
    from course_lib.tinygpt.model import build_model
    from course_lib.tinygpt.task import AdditionTask

    trl_bridge.quiet()
    cfg = get_config("test")
    cfg.sft = dataclasses.replace(cfg.sft, steps=3)
    cfg.grpo = dataclasses.replace(cfg.grpo, steps=2, advantage="rloo")
    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    model = build_model(cfg.model, task.tokenizer)
    before = [p.detach().clone() for p in model.parameters()]
    trainer, _ = trl_bridge.make_trainer(kind, model, task, cfg, output_dir=str(tmp_path))
    trainer.train()
    assert trainer.state.global_step == (3 if kind == "sft" else 2)
    if kind == "sft":  # demonstrations always carry a gradient
        assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))
    else:  # a random policy earns 0 everywhere (zero advantages); the checker's reward is logged each step
        rewards = [r["rewards/strict/mean"] for r in trainer.state.log_history if "rewards/strict/mean" in r]
        assert len(rewards) == 2 and all(0.0 <= r <= 1.0 for r in rewards)


@NEEDS_TRL
@pytest.mark.slow
def test_trl_samples_steps_rollouts_with_num_iterations(tmp_path, monkeypatch):
    """End to end: with μ = 2 and 2 course steps, TRL calls the reward twice (two rollouts) in 4 optimiser steps."""
    from course_lib.tinygpt.model import build_model
    from course_lib.tinygpt.task import AdditionTask

    trl_bridge.quiet()
    calls = []
    original = trl_bridge.reward_function

    def counting(task, name):
        reward = original(task, name)

        def counted(*args, **kwargs):
            calls.append(1)
            return reward(*args, **kwargs)

        counted.__name__ = reward.__name__
        return counted

    monkeypatch.setattr(trl_bridge, "reward_function", counting)
    cfg = get_config("test")
    cfg.grpo = dataclasses.replace(cfg.grpo, steps=2, num_iterations=2, advantage="rloo")
    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    trainer, _ = trl_bridge.make_trainer("rloo", build_model(cfg.model, task.tokenizer), task, cfg,
                                         output_dir=str(tmp_path))
    trainer.train()
    assert trainer.state.global_step == 4 and len(calls) == 2


def test_checkpointing_goes_under_the_name_the_installed_transformers_knows():
    """transformers renamed gradient_checkpointing to activation_checkpointing after Colab's 5.15."""
    config = {"gradient_checkpointing": None, "activation_checkpointing": True, "seed": 0}
    assert trl_bridge.for_installed_transformers(config, {"gradient_checkpointing", "seed"}) == {
        "gradient_checkpointing": True, "seed": 0}
    assert trl_bridge.for_installed_transformers(config,
                                                 {"activation_checkpointing", "gradient_checkpointing"}) == config


@NEEDS_TRL
@pytest.mark.slow
def test_instruct_recipe_runs_on_a_tiny_random_chat_model(tmp_path):
    from course_lib.tinygpt.task import AdditionTask

    trl_bridge.quiet()
    cfg = get_config("test")
    cfg.grpo = dataclasses.replace(cfg.grpo, steps=2, batch_prompts=2, num_generations=4, max_completion_length=8)
    model, tokenizer = trl_bridge.tiny_instruct_standin()
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is 1 + 2?"}], add_generation_prompt=True,
                                           tokenize=False)
    assert prompt.endswith("<|im_start|>assistant\n")
    trainer, bridged = trl_bridge.instruct_recipe(model, tokenizer, AdditionTask(cfg.task), cfg,
                                                  output_dir=str(tmp_path))
    assert bridged.config["activation_checkpointing"] is True
    trainer.train()
    rewards = [r["reward"] for r in trainer.state.log_history if "reward" in r]
    assert len(rewards) == 2 and all(0.0 <= r <= 1.0 for r in rewards)


@NEEDS_TRL
@pytest.mark.slow
def test_accelerate_launch_two_processes_on_cpu(tmp_path):
    """The documented multi-GPU launch, run on the CPU with two processes (gloo)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
           str(ROOT / "configs/accelerate/multi_gpu.yaml"), "--num_processes", "2",
           "-m", "course_lib.trl.trl_bridge", "grpo", "--config", "test", "--steps", "2", "--out", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["num_processes"] == 2 and summary["steps"] == 2
    assert summary["per_device_train_batch_size"] * 2 == 4 * 4  # test config: B·G = 16 completions per step
    ranks = [json.loads((tmp_path / f"weights_rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0] == ranks[1], "DDP must keep both processes' weights identical"
    assert ranks[0]["after"] != ranks[0]["before"], "two optimiser steps must change the weights"


@NEEDS_TRL
@pytest.mark.slow
def test_gpu_check_script_runs_its_code_path_on_the_cpu(tmp_path):
    """benchmarks/gpu_check.py waits for a GPU; ``--device cpu --tiny`` runs every trainer, the instruct
    smoke test and writes the JSON; ``--max-seconds`` stops the stoppable trainers at a step boundary."""
    import importlib.util as util

    from course_lib.run.pipeline import KINDS

    spec = util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    gpu_check = util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    out = gpu_check.main(["--device", "cpu", "--tiny", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "gpu_check.json").read_text())
    assert saved["device"] == "cpu" and saved["precision"].startswith("fp32") and saved["peak_flops"] is None
    trainers = {r["kind"]: r for r in saved["trainers"]}
    assert list(trainers) == ["sft", "dpo", "grpo", "rm", "ppo", "kto", "orpo",
                              "judge"] and out["trainers"] == saved["trainers"]
    assert set(trainers) == set(KINDS), "gpu_check runs every pipeline trainer"
    assert all(r["steps"] >= 1 and r["train_seconds"] > 0 for r in trainers.values())
    assert trainers["grpo"]["flops"] > 0 and trainers["grpo"]["generated_tokens_per_second"] > 0
    assert trainers["rm"]["flops"] > 0 and trainers["ppo"]["flops"] > 0 and trainers["rm"]["dtype"] == "fp32"
    assert all(r["mfu"] is None for r in trainers.values())  # no peak on a CPU
    assert saved["instruct_smoke"]["steps"] == 2, saved["instruct_smoke"]
    assert saved["async_grpo"] == {"steps": 3, "device": "cpu"}, saved["async_grpo"]
    assert "skipped" in saved["notebooks"]  # --tiny: the notebook runs are their own tests


def test_gpu_check_budget_stops_a_trainer_at_a_step_boundary(tmp_path):
    """The --max-seconds guard: a trainer whose share is spent stops after its current step, with its rows."""
    import importlib.util as util

    from course_lib.tinygpt import runtime

    spec = util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    gpu_check = util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    r = gpu_check.trainer_run("sft", get_config("test"), tmp_path, device="cpu", budget=0.001, peak=None,
                              dtype="fp32")
    assert r["stopped"] and 1 <= r["steps"] < get_config("test").sft.steps and not runtime.stop_requested()
    with pytest.raises(SystemExit):
        gpu_check.main(["--device", "cpu", "--max-seconds", "0"])


@NEEDS_TRL
@pytest.mark.slow
def test_overlong_shaping_reaches_trl_as_its_own_reward_function_summed_with_the_checker(tmp_path):
    from course_lib.tinygpt.model import build_model
    from course_lib.tinygpt.task import AdditionTask

    trl_bridge.quiet()
    cfg = get_config("test")
    cfg.grpo = dataclasses.replace(cfg.grpo, steps=1, soft_punish_cache=1)
    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    trainer, _ = trl_bridge.make_trainer("grpo", build_model(cfg.model, task.tokenizer), task, cfg,
                                         output_dir=str(tmp_path))
    assert [f.__name__ for f in trainer.reward_funcs] == ["strict", "soft_overlong_punishment_reward"]
    trainer.train()
    (row,) = [r for r in trainer.state.log_history if "rewards/soft_overlong_punishment_reward/mean" in r]
    penalty, strict = row["rewards/soft_overlong_punishment_reward/mean"], row["rewards/strict/mean"]
    assert -1.0 <= penalty < 0  # a random policy rambles into the soft zone
    assert row["reward"] == pytest.approx(strict + penalty, abs=1e-6)  # summed with weight 1, as the course adds it


# ---- KTO and ORPO through TRL's trainers, on the course's own data ---------------------------------

def _answer_pairs(task, n=8):
    """DPO's pair format (dpo.build_preference_pairs), every answer ending in <eos>: a wrong answer of 1–2 digits."""
    prompts = task.sample_pairs(n, torch.Generator().manual_seed(5))
    chosen = [str(a + b) for a, b in prompts]
    rejected = [str((a + b + 1) % 10) + "1" * (i % 2) for i, (a, b) in enumerate(prompts)]
    out = {"n_pairs": n, "n_prompts": n}
    for side, answers in (("chosen", chosen), ("rejected", rejected)):
        out[f"{side}_ids"], out[f"{side}_attention"], out[f"{side}_completion"] = task.encode_pairs(prompts, answers)
    return out


def _tiny_gpt(cfg, task):
    """The tiny GPT with <pad>/<bos> out of its softmax *inside* the model (an lm_head bias of −1e9 there).

    The course removes them in ``completion_logprobs``; TRL reads the model's own logits. With the bias
    both softmaxes are the course's, so what remains to compare is data, batches, loss and optimiser.
    """
    from course_lib.tinygpt.model import NEVER_LOGIT, build_model

    torch.manual_seed(0)
    model = build_model(cfg.model, task.tokenizer)
    bias = torch.zeros(model.lm_head.out_features)
    bias[[task.tokenizer.pad_token_id, task.tokenizer.bos_token_id]] = NEVER_LOGIT
    model.lm_head.bias = torch.nn.Parameter(bias, requires_grad=False)
    return model


@NEEDS_TRL
@pytest.mark.slow
def test_kto_through_trl_trains_the_course_batches_with_the_course_losses(tmp_path):
    """KTOTrainer on ``kto.kto_answers``' rows: TRL's logged losses and z0 are the course trainer's, step by step.

    Step 1 is 0.5 for both (policy = reference); steps 2 and 3 follow one and two identical AdamW
    updates, and step 3 wraps around to the first batch (16 answers, batches of 8), as the course repeats them.
    """
    from course_lib.tinygpt.runtime import MetricsLog
    from course_lib.tinygpt.task import AdditionTask
    from course_lib.trainers.kto import kto_data_from_pairs, train_kto

    trl_bridge.quiet()
    cfg = get_config("test")
    cfg.kto = dataclasses.replace(cfg.kto, steps=3, beta=0.5, learning_rate=3e-3, eval_every=3)
    task = AdditionTask(cfg.task)
    pairs = _answer_pairs(task)
    course, log = _tiny_gpt(cfg, task), MetricsLog()
    data = kto_data_from_pairs(course, task, pairs, cfg.kto, generator=torch.Generator().manual_seed(9))
    train_kto(course, task, cfg.kto, data, TrainContext(log=log, show_progress=False, threads=None))
    trainer, bridged = trl_bridge.make_trainer("kto", _tiny_gpt(cfg, task), task, cfg, output_dir=str(tmp_path),
                                               pairs=pairs, generator=torch.Generator().manual_seed(9))
    assert bridged.trainer == "KTOTrainer" and len(trainer.train_dataset) == 16
    assert trainer.train_dataset[0]["completion"].endswith("<eos>")
    trainer.train()
    theirs = [r[k] for r in trainer.state.log_history if "loss" in r for k in ("loss", "kl")]
    ours = [r[k] for r in log.rows for k in ("loss", "kl")]
    assert len(theirs) == 6 and theirs[:2] == [0.5, 0.0]
    assert ours[3] > 0.01 and ours[5] > 0.1, ours  # z0 is active, not clamped, at steps 2 and 3
    assert theirs == pytest.approx(ours, rel=1e-5, abs=1e-7)


@NEEDS_TRL
@pytest.mark.slow
def test_orpo_through_trl_is_the_course_penalty_with_trl_nll_over_the_prompt_too(tmp_path):
    """ORPOTrainer on DPO's pairs: the first step's logged loss, on the batch TRL drew, is the course's odds-ratio
    penalty plus the NLL over prompt *and* completion tokens; the course's own loss (completion only) is lower."""
    from course_lib.tinygpt.model import completion_logprobs
    from course_lib.tinygpt.task import AdditionTask
    from course_lib.trainers.orpo import PAIR_KEYS, orpo_batch_loss

    trl_bridge.quiet()
    cfg = get_config("test")
    cfg.orpo = dataclasses.replace(cfg.orpo, steps=2)
    task = AdditionTask(cfg.task)
    pairs, model = _answer_pairs(task), _tiny_gpt(cfg, task)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    trainer, bridged = trl_bridge.make_trainer("orpo", model, task, cfg, output_dir=str(tmp_path), pairs=pairs)
    assert type(trainer.args).__module__.startswith("trl.experimental.orpo")
    drawn, original = [], trainer.get_batch_loss_metrics

    def recorded(model, batch, train_eval="train"):
        drawn.append(list(zip(batch["prompt"], batch["chosen"], batch["rejected"])))
        return original(model, batch, train_eval)

    trainer.get_batch_loss_metrics = recorded
    trainer.train()
    first = next(r for r in trainer.state.log_history if "loss" in r)
    rows = trl_bridge.preference_dataset(task, pairs)
    where = {(r["prompt"], r["chosen"], r["rejected"]): i for i, r in enumerate(rows)}
    index = torch.tensor([where[row] for row in drawn[0]])
    batch = {k: pairs[k][index] for k in PAIR_KEYS}
    model.load_state_dict(start)  # the weights of TRL's first step
    with torch.no_grad():
        loss, stats = orpo_batch_loss(model, batch, cfg.orpo, prompt_length=task.prompt_length)
        scored = batch["chosen_attention"].clone()
        scored[:, 0] = 0  # every token after <bos>: prompt and completion
        token_logps, mask = completion_logprobs(model, batch["chosen_ids"], batch["chosen_attention"], scored)
    nll_with_prompt = float(-token_logps.sum() / mask.sum())
    assert first["log_odds_ratio"] == pytest.approx(-stats["odds_ratio_penalty"], rel=1e-6)
    assert first["nll_loss"] == pytest.approx(nll_with_prompt, rel=1e-6)
    assert first["loss"] == pytest.approx(nll_with_prompt + cfg.orpo.beta * stats["odds_ratio_penalty"], rel=1e-6)
    assert float(loss) < first["loss"] - 1e-3  # the listed difference: the course's NLL leaves the prompt out
    assert "orpo NLL tokens" in [u.option for u in bridged.unmatched]
