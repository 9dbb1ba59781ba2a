"""course_lib.trl.trl_translate: the course's recipes in TRL 1.16's names, tested without TRL.

The table is pure data: importing it loads neither TRL nor transformers' trainer, and every
mapping and every listed difference is asserted here, with or without TRL installed.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import warnings

import pytest
from conftest import ROOT

from course_lib.trainers.configs import get_config
from course_lib.trl.trl_translate import translate


def _cfg(**grpo):
    cfg = get_config("cpu")
    cfg.grpo = dataclasses.replace(cfg.grpo, **grpo)
    return cfg


def _unmatched(bridged) -> dict:
    return {u.option: u for u in bridged.unmatched}


def test_the_table_imports_neither_trl_nor_a_trainer():
    code = ("import sys, course_lib.trl.trl_translate; "
            "print(*(m in sys.modules for m in ('trl', 'datasets', 'transformers.trainer', "
            "'transformers.trainer_callback')))")
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


@pytest.mark.parametrize(("unit", "loss_type"),
                         [("sequence_mean", "grpo"), ("token_mean", "dapo"), ("constant", "dr_grpo")])
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
    assert "appends <eos>" in _unmatched(translate(cfg, "dpo"))["truncated answers (no <eos>)"].trl_does
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
    for bad in (0, True, 2.0):
        with pytest.raises(ValueError, match=f"num_processes must be an integer >= 1; got {bad!r}"):
            translate(_cfg(), "grpo", num_processes=bad)
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


# ---- KTO and ORPO -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["kto", "orpo"])
def test_every_kto_and_orpo_option_is_a_trl_argument_or_listed(kind):
    """Nothing falls between the two: each field of the section has a TRL name (with its value) or an Unmatched
    entry (the row's ``names``, ``register(trl=TRLRow(..., names=...))``)."""
    from course_lib.trl.trl_translate import row

    names = row(kind).names
    cfg = get_config("cpu")
    b = translate(cfg, kind)
    section = getattr(cfg, kind)
    listed = {u.option for u in b.unmatched}
    for f in dataclasses.fields(section):
        if f.name in names:
            assert b.config[names[f.name]] == getattr(section, f.name), f.name
            assert f"{kind}.{f.name}" not in listed
        else:
            assert f"{kind}.{f.name}" in listed, f"{kind}.{f.name} is neither a TRL argument nor listed"


def test_kto_maps_to_kto_trainer_with_the_course_batches():
    cfg = get_config("cpu")
    cfg.kto = dataclasses.replace(cfg.kto, beta=0.3, desirable_weight=1.5, undesirable_weight=0.5, batch_size=64)
    b = translate(cfg, "kto")
    c = b.config
    assert (b.trainer, b.config_class, c["loss_type"]) == ("KTOTrainer", "KTOConfig", "kto")
    assert (c["beta"], c["desirable_weight"], c["undesirable_weight"]) == (0.3, 1.5, 0.5)
    assert (c["per_device_train_batch_size"], c["max_steps"], c["learning_rate"]) == (64, 100, 1e-4)
    # the course's batches: one shuffle (done before TRL sees the rows), sequential, last incomplete batch dropped
    assert c["train_sampling_strategy"] == "sequential" and c["dataloader_drop_last"] is True
    assert c["precompute_ref_log_probs"] is True and c["max_length"] == 7 + 6  # 2-digit prompt + L_max
    assert "num_processes" not in _unmatched(b)
    two = translate(cfg, "kto", num_processes=2)
    assert two.config["per_device_train_batch_size"] == 32 and "z0" in _unmatched(two)["num_processes"].trl_does
    with pytest.raises(ValueError, match=r"kto.batch_size \(64\) must be divisible by num_processes \(3\)"):
        translate(cfg, "kto", num_processes=3)


def test_kto_options_without_a_trl_counterpart_are_reported_with_their_values():
    cfg = get_config("cpu")
    cfg.kto = dataclasses.replace(cfg.kto, desirable_fraction=0.25, eval_every=7)
    missing = _unmatched(translate(cfg, "kto"))
    assert (missing["kto.desirable_fraction"].value == 0.25
            and "no such option" in missing["kto.desirable_fraction"].trl_does)
    assert missing["kto.eval_every"].value == 7
    assert "appends <eos>" in missing["truncated answers (no <eos>)"].trl_does
    with pytest.raises(ValueError, match=r"kto.desirable_fraction must be a finite number in \(0, 1\]"):
        cfg.kto = dataclasses.replace(cfg.kto, desirable_fraction=0.0)


def test_orpo_maps_to_experimental_orpo_trainer_and_lists_the_nll_difference():
    cfg = get_config("cpu")
    cfg.orpo = dataclasses.replace(cfg.orpo, beta=0.25)
    b = translate(cfg, "orpo")
    assert (b.trainer, b.config_class) == ("ORPOTrainer", "ORPOConfig")
    assert (b.config["beta"], b.config["per_device_train_batch_size"], b.config["max_steps"]) == (0.25, 64, 1300)
    assert "precompute_ref_log_probs" not in b.config  # no reference model at all
    missing = _unmatched(b)
    assert "prompt" in missing["orpo NLL tokens"].trl_does and "base" in missing["orpo start"].trl_does
    assert "unclamped" in missing["orpo certain answers"].trl_does
    trl = pytest.importorskip("trl", reason="TRL is not installed: pip install -e '.[trl]'")
    with warnings.catch_warnings():  # TRL 1.16 keeps ORPO in trl.experimental and says so on import: known here
        warnings.simplefilter("ignore", UserWarning)
        from trl.experimental.orpo import ORPOConfig

    for kind, make in (("orpo", ORPOConfig), ("kto", trl.KTOConfig)):  # TRL accepts the names and values
        made = make(**{**translate(cfg, kind).config, "output_dir": "unused"})
        assert made.beta == getattr(cfg, kind).beta and made.max_steps == getattr(cfg, kind).steps


def test_the_mapping_table_names_each_2025_26_option_in_trl_116_words():
    from course_lib.trl.trl_translate import MAPPING, mapping_markdown

    text = mapping_markdown()
    assert text.count("\n") == len(MAPPING) + 2 and all(len(row) == 3 and all(row) for row in MAPPING)
    for name in ("KTOTrainer", "desirable_weight", "undesirable_weight", "trl.experimental.orpo.ORPOTrainer",
                 'importance_sampling_level="sequence"', 'loss_type="cispo"', "get_soft_overlong_punishment",
                 "AsyncGRPOConfig.max_staleness", "vllm_importance_sampling_", 'train_sampling_strategy="sequential"'):
        assert name in text, name
    assert "|" not in "".join(cell.replace("\\|", "") for row in MAPPING for cell in row)  # no cell breaks the table


def test_grpo_hands_trl_the_behaviour_correction_under_its_own_names():
    b = translate(_cfg(vllm_importance_sampling_mode="token_truncate", vllm_importance_sampling_clip_min=0.5), "grpo")
    assert b.config["vllm_importance_sampling_mode"] == "token_truncate"
    assert (b.config["vllm_importance_sampling_clip_min"], b.config["vllm_importance_sampling_clip_max"]) == (0.5, 3.0)
    assert b.config["vllm_importance_sampling_correction"] is True
