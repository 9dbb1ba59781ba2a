"""course_lib.trl_bridge: course configs to TRL, with and without TRL installed.

The translation is pure data and is tested everywhere; the trainers, the chat-model recipe and
the two-process ``accelerate launch`` run need TRL and skip with the reason without it.
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

from course_lib import trl_bridge
from course_lib.configs import get_config

NEEDS_TRL = pytest.mark.skipif(not trl_bridge.trl_available(), reason=trl_bridge.INSTALL_HINT)


def _cfg(**grpo):
    cfg = get_config("cpu")
    cfg.grpo = dataclasses.replace(cfg.grpo, **grpo)
    return cfg


def _unmatched(bridged) -> dict:
    return {u.option: u for u in bridged.unmatched}


def test_importing_course_lib_and_the_bridge_never_imports_trl():
    code = "import sys, course_lib, course_lib.trl_bridge; print('trl' in sys.modules, 'datasets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert out.stdout.split() == ["False", "False"]


def test_grpo_recipe_maps_to_trl_names_and_flags_the_std_difference():
    b = trl_bridge.translate(_cfg(), "grpo")
    c = b.config
    assert (b.trainer, b.config_class) == ("GRPOTrainer", "GRPOConfig")
    assert c["per_device_train_batch_size"] == 32 * 8 and c["num_generations"] == 8
    assert c["steps_per_generation"] == 1 and c["gradient_accumulation_steps"] == 1
    assert (c["scale_rewards"], c["loss_type"], c["beta"], c["num_iterations"]) == ("group", "dapo", 0.0, 1)
    assert (c["epsilon"], c["epsilon_high"], c["max_completion_length"], c["learning_rate"]) == (0.2, 0.2, 6, 3e-4)
    assert c["bf16"] is False and c["activation_checkpointing"] is False and c["use_cpu"] is True
    assert "ddof=1" in _unmatched(b)["grpo.advantage"].trl_does


@pytest.mark.parametrize(("unit", "loss_type"), [("sequence_mean", "grpo"), ("token_mean", "dapo"), ("constant", "dr_grpo")])
def test_units_and_dr_grpo_map_exactly(unit, loss_type):
    b = trl_bridge.translate(_cfg(unit=unit, advantage="dr_grpo"), "grpo")
    assert b.config["loss_type"] == loss_type and b.config["scale_rewards"] == "none"
    assert "grpo.advantage" not in _unmatched(b) and "grpo.unit" not in _unmatched(b)


@pytest.mark.parametrize(("grpo", "want"), [
    (dict(importance_sampling_level="sequence", unit="sequence_mean"), ("grpo", "sequence")),  # GSPO's setup in TRL
    (dict(loss_type="cispo", epsilon_high=5.0), ("cispo", "token")),
    (dict(), ("dapo", "token")),
])
def test_gspo_and_cispo_map_to_trl_loss_type_and_importance_sampling_level(grpo, want):
    b = trl_bridge.translate(_cfg(**grpo), "grpo")
    assert (b.config["loss_type"], b.config["importance_sampling_level"]) == want
    assert b.config["epsilon_high"] == grpo.get("epsilon_high", 0.2)
    assert not {"grpo.loss_type", "grpo.importance_sampling_level"} & set(_unmatched(b))
    trl = pytest.importorskip("trl", reason="TRL is not installed: pip install -e '.[trl]'")
    made = trl.GRPOConfig(**{**b.config, "output_dir": "unused"})  # TRL accepts the names and values
    assert (made.loss_type, made.importance_sampling_level) == want


def test_overlong_shaping_is_trl_reward_function_and_listed_as_such():
    b = trl_bridge.translate(_cfg(soft_punish_cache=2), "grpo")
    does = _unmatched(b)["grpo.soft_punish_cache"].trl_does
    assert "get_soft_overlong_punishment(max_completion_len=6, soft_punish_cache=2)" in does
    assert "soft_punish_cache" not in b.config and "grpo.soft_punish_cache" not in _unmatched(trl_bridge.translate(
        _cfg(), "grpo"))
    rloo = trl_bridge.translate(_cfg(advantage="rloo", loss_type="cispo", epsilon_high=5.0), "rloo")
    assert "no CISPO" in _unmatched(rloo)["grpo.loss_type / importance_sampling_level"].trl_does


def test_options_without_a_trl_equivalent_are_listed():
    b = trl_bridge.translate(_cfg(zero_variance="resample", beta=0.04, kl_estimator="k2", mask_truncated=True), "grpo")
    missing = _unmatched(b)
    assert "DAPO" not in missing["grpo.zero_variance"].trl_does and "resampl" in missing["grpo.zero_variance"].trl_does
    assert "k3" in missing["grpo.kl_estimator"].trl_does
    in_reward = trl_bridge.translate(_cfg(beta=0.04, kl_placement="reward", kl_estimator="k1"), "grpo")
    assert "loss only" in _unmatched(in_reward)["grpo.kl_placement"].trl_does
    assert b.config["mask_truncated_completions"] is True and b.config["use_bias_correction_kl"] is False
    assert "no exact TRL equivalent (" in b.report()


def test_rloo_goes_to_rloo_trainer_with_its_differences():
    b = trl_bridge.translate(_cfg(advantage="rloo", beta=0.05), "rloo")
    assert b.trainer == "RLOOTrainer" and b.config["normalize_advantages"] is False
    assert {"grpo.unit", "grpo.kl_placement / kl_estimator"} <= set(_unmatched(b))
    same_kl = trl_bridge.translate(_cfg(advantage="rloo", beta=0.05, kl_placement="reward", kl_estimator="k1"), "rloo")
    assert "grpo.kl_placement / kl_estimator" not in _unmatched(same_kl)
    with pytest.raises(ValueError, match="RLOOTrainer"):
        trl_bridge.translate(_cfg(advantage="rloo"), "grpo")
    with pytest.raises(ValueError, match="needs grpo.advantage='rloo'"):
        trl_bridge.translate(_cfg(advantage="grpo"), "rloo")


def test_dpo_family():
    cfg = get_config("cpu")
    plain = trl_bridge.translate(cfg, "dpo").config
    assert plain["loss_type"] == ["sigmoid"] and plain["precompute_ref_log_probs"] is True
    cfg.dpo = dataclasses.replace(cfg.dpo, rpo_alpha=1.0)
    rpo = trl_bridge.translate(cfg, "dpo").config
    assert (rpo["loss_type"], rpo["loss_weights"]) == (["sigmoid", "sft"], [1.0, 1.0])
    cfg.dpo = dataclasses.replace(cfg.dpo, loss_type="ipo", rpo_alpha=0.0)
    assert "averages" in _unmatched(trl_bridge.translate(cfg, "dpo"))["dpo.loss_type"].trl_does
    cfg.dpo = dataclasses.replace(cfg.dpo, loss_type="simpo", simpo_gamma=0.3)
    simpo = trl_bridge.translate(cfg, "dpo")
    assert simpo.trainer == "CPOTrainer" and simpo.config["cpo_alpha"] == 0.0 and simpo.config["simpo_gamma"] == 0.3


def test_sft_is_completion_only_token_mean():
    b = trl_bridge.translate(get_config("cpu"), "sft")
    assert b.config["completion_only_loss"] is True and b.config["per_device_train_batch_size"] == 64


def test_processes_split_the_batch_and_bad_input_is_refused():
    assert trl_bridge.translate(_cfg(), "grpo", num_processes=4).config["per_device_train_batch_size"] == 64
    with pytest.raises(ValueError, match="divisible by num_processes"):
        trl_bridge.translate(_cfg(), "grpo", num_processes=3)
    with pytest.raises(ValueError, match="num_processes must be a positive integer"):
        trl_bridge.translate(_cfg(), "grpo", num_processes=0)
    with pytest.raises(ValueError, match="kind must be one of"):
        trl_bridge.translate(_cfg(), "ppo")
    with pytest.raises(ValueError, match="grpo.epsilon"):
        trl_bridge.translate(_cfg(epsilon=-0.1), "grpo")
    with pytest.raises(ValueError, match="'strict' or 'loose'"):
        trl_bridge.text_reward_function("exact")


def test_without_trl_the_trainers_say_how_to_install(monkeypatch):
    monkeypatch.setattr(trl_bridge, "trl_available", lambda: False)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[trl\]'"):
        trl_bridge.trl_config(trl_bridge.translate(get_config("test"), "grpo"))


def test_text_checkers():
    strict, loose = trl_bridge.text_reward_function("strict"), trl_bridge.text_reward_function("loose")
    completions = [[{"role": "assistant", "content": " 65\n"}], [{"role": "assistant", "content": "6 and 5"}], "56"]
    assert strict(None, completions, a=[7] * 3, b=[58] * 3) == [1.0, 0.0, 0.0]
    assert loose(None, completions, a=[7] * 3, b=[58] * 3) == [1.0, 1.0, 0.0]


@NEEDS_TRL
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sft", "rloo"])
def test_bridged_trainers_train_the_tiny_gpt(kind, tmp_path):
    from course_lib.model import build_model
    from course_lib.task import AdditionTask

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
def test_overlong_shaping_reaches_trl_as_its_own_reward_function_summed_with_the_checker(tmp_path):
    from course_lib.model import build_model
    from course_lib.task import AdditionTask

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


def test_num_iterations_gives_trl_the_same_number_of_rollouts():
    """TRL samples anew every steps_per_generation · num_iterations optimiser steps: max_steps = steps · μ."""
    for mu in (1, 3):
        b = trl_bridge.translate(_cfg(steps=5, num_iterations=mu), "grpo")
        assert b.config["num_iterations"] == mu and b.config["steps_per_generation"] == 1
        assert b.config["max_steps"] == 5 * mu
        assert b.config["max_steps"] // (b.config["steps_per_generation"] * b.config["num_iterations"]) == 5


@NEEDS_TRL
@pytest.mark.slow
def test_trl_samples_steps_rollouts_with_num_iterations(tmp_path, monkeypatch):
    """End to end: with μ = 2 and 2 course steps, TRL calls the reward twice (two rollouts) in 4 optimiser steps."""
    from course_lib.model import build_model
    from course_lib.task import AdditionTask

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


@NEEDS_TRL
@pytest.mark.slow
def test_instruct_recipe_runs_on_a_tiny_random_chat_model(tmp_path):
    from course_lib.task import AdditionTask

    trl_bridge.quiet()
    cfg = get_config("test")
    cfg.grpo = dataclasses.replace(cfg.grpo, steps=2, batch_prompts=2, num_generations=4, max_completion_length=8)
    model, tokenizer = trl_bridge.tiny_instruct_standin()
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is 1 + 2?"}], add_generation_prompt=True, tokenize=False)
    assert prompt.endswith("<|im_start|>assistant\n")
    trainer, bridged = trl_bridge.instruct_recipe(model, tokenizer, AdditionTask(cfg.task), cfg, output_dir=str(tmp_path))
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
           "-m", "course_lib.trl_bridge", "grpo", "--config", "test", "--steps", "2", "--out", str(tmp_path)]
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

    spec = util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    gpu_check = util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    out = gpu_check.main(["--device", "cpu", "--tiny", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "gpu_check.json").read_text())
    assert saved["device"] == "cpu" and saved["precision"].startswith("fp32") and saved["peak_flops"] is None
    trainers = {r["kind"]: r for r in saved["trainers"]}
    assert list(trainers) == ["sft", "dpo", "grpo", "rm", "ppo"] and out["trainers"] == saved["trainers"]
    assert all(r["steps"] >= 1 and r["train_seconds"] > 0 for r in trainers.values())
    assert trainers["grpo"]["flops"] > 0 and trainers["grpo"]["generated_tokens_per_second"] > 0
    assert trainers["rm"]["flops"] is None and all(r["mfu"] is None for r in trainers.values())  # no peak on a CPU
    assert saved["instruct_smoke"]["steps"] == 2, saved["instruct_smoke"]


def test_gpu_check_budget_stops_a_trainer_at_a_step_boundary(tmp_path):
    """The --max-seconds guard: a trainer whose share is spent stops after its current step, with its rows."""
    import importlib.util as util

    from course_lib import runtime

    spec = util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    gpu_check = util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    r = gpu_check.trainer_run("sft", get_config("test"), tmp_path, device="cpu", budget=0.001, peak=None)
    assert r["stopped"] and 1 <= r["steps"] < get_config("test").sft.steps and not runtime.stop_requested()
    with pytest.raises(SystemExit):
        gpu_check.main(["--device", "cpu", "--max-seconds", "0"])
