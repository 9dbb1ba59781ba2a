"""course_lib.trl_translate: the course's recipes in TRL 1.16's names, tested without TRL.

The table is pure data: importing it loads neither TRL nor transformers' trainer, and every
mapping and every listed difference is asserted here, with or without TRL installed.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest
from conftest import ROOT

from course_lib.configs import get_config
from course_lib.trl_translate import translate


def _cfg(**grpo):
    cfg = get_config("cpu")
    cfg.grpo = dataclasses.replace(cfg.grpo, **grpo)
    return cfg


def _unmatched(bridged) -> dict:
    return {u.option: u for u in bridged.unmatched}


def test_the_table_imports_neither_trl_nor_a_trainer():
    code = ("import sys, course_lib.trl_translate; "
            "print(*(m in sys.modules for m in ('trl', 'datasets', 'transformers.trainer', 'transformers.trainer_callback')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert out.stdout.split() == ["False"] * 4


def test_grpo_recipe_maps_to_trl_names_and_flags_the_std_difference():
    b = translate(_cfg(), "grpo")
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
    b = translate(_cfg(unit=unit, advantage="dr_grpo"), "grpo")
    assert b.config["loss_type"] == loss_type and b.config["scale_rewards"] == "none"
    assert "grpo.advantage" not in _unmatched(b) and "grpo.unit" not in _unmatched(b)


def test_options_without_a_trl_equivalent_are_listed():
    b = translate(_cfg(zero_variance="resample", beta=0.04, kl_estimator="k2", mask_truncated=True), "grpo")
    missing = _unmatched(b)
    assert "DAPO" not in missing["grpo.zero_variance"].trl_does and "resampl" in missing["grpo.zero_variance"].trl_does
    assert "k3" in missing["grpo.kl_estimator"].trl_does
    in_reward = translate(_cfg(beta=0.04, kl_placement="reward", kl_estimator="k1"), "grpo")
    assert "loss only" in _unmatched(in_reward)["grpo.kl_placement"].trl_does
    assert b.config["mask_truncated_completions"] is True and b.config["use_bias_correction_kl"] is False
    assert "no exact TRL equivalent (" in b.report()


def test_rloo_goes_to_rloo_trainer_with_its_differences():
    b = translate(_cfg(advantage="rloo", beta=0.05), "rloo")
    assert b.trainer == "RLOOTrainer" and b.config["normalize_advantages"] is False
    assert {"grpo.unit", "grpo.kl_placement / kl_estimator"} <= set(_unmatched(b))
    same_kl = translate(_cfg(advantage="rloo", beta=0.05, kl_placement="reward", kl_estimator="k1"), "rloo")
    assert "grpo.kl_placement / kl_estimator" not in _unmatched(same_kl)
    with pytest.raises(ValueError, match="RLOOTrainer"):
        translate(_cfg(advantage="rloo"), "grpo")
    with pytest.raises(ValueError, match="needs grpo.advantage='rloo'"):
        translate(_cfg(advantage="grpo"), "rloo")


def test_dpo_family():
    cfg = get_config("cpu")
    plain = translate(cfg, "dpo").config
    assert plain["loss_type"] == ["sigmoid"] and plain["precompute_ref_log_probs"] is True
    cfg.dpo = dataclasses.replace(cfg.dpo, rpo_alpha=1.0)
    rpo = translate(cfg, "dpo").config
    assert (rpo["loss_type"], rpo["loss_weights"]) == (["sigmoid", "sft"], [1.0, 1.0])
    cfg.dpo = dataclasses.replace(cfg.dpo, loss_type="ipo", rpo_alpha=0.0)
    assert "averages" in _unmatched(translate(cfg, "dpo"))["dpo.loss_type"].trl_does
    cfg.dpo = dataclasses.replace(cfg.dpo, loss_type="simpo", simpo_gamma=0.3)
    simpo = translate(cfg, "dpo")
    assert simpo.trainer == "CPOTrainer" and simpo.config["cpo_alpha"] == 0.0 and simpo.config["simpo_gamma"] == 0.3


def test_sft_is_completion_only_token_mean():
    b = translate(get_config("cpu"), "sft")
    assert b.config["completion_only_loss"] is True and b.config["per_device_train_batch_size"] == 64


def test_processes_split_the_batch_and_bad_input_is_refused():
    assert translate(_cfg(), "grpo", num_processes=4).config["per_device_train_batch_size"] == 64
    with pytest.raises(ValueError, match="divisible by num_processes"):
        translate(_cfg(), "grpo", num_processes=3)
    with pytest.raises(ValueError, match="num_processes must be a positive integer"):
        translate(_cfg(), "grpo", num_processes=0)
    with pytest.raises(ValueError, match="kind must be one of"):
        translate(_cfg(), "ppo")
    with pytest.raises(ValueError, match="grpo.epsilon"):
        translate(_cfg(epsilon=-0.1), "grpo")


def test_num_iterations_gives_trl_the_same_number_of_rollouts():
    """TRL samples anew every steps_per_generation · num_iterations optimiser steps: max_steps = steps · μ."""
    for mu in (1, 3):
        b = translate(_cfg(steps=5, num_iterations=mu), "grpo")
        assert b.config["num_iterations"] == mu and b.config["steps_per_generation"] == 1
        assert b.config["max_steps"] == 5 * mu
        assert b.config["max_steps"] // (b.config["steps_per_generation"] * b.config["num_iterations"]) == 5


@pytest.mark.parametrize(("grpo", "want"), [
    (dict(importance_sampling_level="sequence", unit="sequence_mean"), ("grpo", "sequence")),  # GSPO's setup in TRL
    (dict(loss_type="cispo", epsilon_high=5.0), ("cispo", "token")),
    (dict(), ("dapo", "token")),
])
def test_gspo_and_cispo_map_to_trl_loss_type_and_importance_sampling_level(grpo, want):
    b = translate(_cfg(**grpo), "grpo")
    assert (b.config["loss_type"], b.config["importance_sampling_level"]) == want
    assert b.config["epsilon_high"] == grpo.get("epsilon_high", 0.2)
    assert not {"grpo.loss_type", "grpo.importance_sampling_level"} & set(_unmatched(b))
    trl = pytest.importorskip("trl", reason="TRL is not installed: pip install -e '.[trl]'")
    made = trl.GRPOConfig(**{**b.config, "output_dir": "unused"})  # TRL accepts the names and values
    assert (made.loss_type, made.importance_sampling_level) == want


def test_overlong_shaping_is_trl_reward_function_and_listed_as_such():
    b = translate(_cfg(soft_punish_cache=2), "grpo")
    does = _unmatched(b)["grpo.soft_punish_cache"].trl_does
    assert "get_soft_overlong_punishment(max_completion_len=6, soft_punish_cache=2)" in does
    assert "soft_punish_cache" not in b.config and "grpo.soft_punish_cache" not in _unmatched(translate(
        _cfg(), "grpo"))
    rloo = translate(_cfg(advantage="rloo", loss_type="cispo", epsilon_high=5.0), "rloo")
    assert "no CISPO" in _unmatched(rloo)["grpo.loss_type / importance_sampling_level"].trl_does
