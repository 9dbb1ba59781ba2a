"""Config sections validate themselves (as TRL's configs do); ``validate`` keeps the run-wide rules."""

from __future__ import annotations

import re

import pytest

from course_lib.trainers.configs import (
    DPOConfig,
    GRPOConfig,
    PPOConfig,
    RewardModelConfig,
    SFTConfig,
    get_config,
    validate,
)

BAD = [  # (section, field, bad value, the error: the field named, with what it accepts)
    (SFTConfig, "steps", -1, "sft.steps must be an integer >= 0; got -1"),
    (SFTConfig, "batch_size", 0, "sft.batch_size must be an integer >= 1; got 0"),
    (SFTConfig, "learning_rate", 0.0, "sft.learning_rate must be a finite number > 0; got 0.0"),
    (SFTConfig, "eval_every", 0, "sft.eval_every must be an integer >= 1; got 0"),
    (DPOConfig, "loss_type", "kto", "dpo.loss_type must be one of ('sigmoid', 'ipo', 'simpo'); got 'kto'"),
    (DPOConfig, "beta", 0.0, "dpo.beta must be a finite number > 0; got 0.0"),
    (DPOConfig, "rpo_alpha", -0.5, "dpo.rpo_alpha must be a finite number >= 0; got -0.5"),
    (DPOConfig, "samples_per_prompt", 1, "dpo.samples_per_prompt must be an integer >= 2; got 1"),
    (DPOConfig, "pair_prompts", 0, "dpo.pair_prompts must be an integer >= 1; got 0"),
    (DPOConfig, "batch_size", 0, "dpo.batch_size must be an integer >= 1; got 0"),
    (GRPOConfig, "unit", "per_prompt",
     "grpo.unit must be one of ('sequence_mean', 'token_mean', 'constant'); got 'per_prompt'"),
    (GRPOConfig, "advantage", "ppo", "grpo.advantage must be one of ('grpo', 'rloo', 'dr_grpo'); got 'ppo'"),
    (GRPOConfig, "zero_variance", "skip",
     "grpo.zero_variance must be one of ('keep', 'drop', 'resample'); got 'skip'"),
    (GRPOConfig, "kl_estimator", "k4", "grpo.kl_estimator must be one of ('k1', 'k2', 'k3'); got 'k4'"),
    (GRPOConfig, "kl_placement", "advantage", "grpo.kl_placement must be one of ('loss', 'reward'); got 'advantage'"),
    (GRPOConfig, "reward", "exact", "grpo.reward must be one of 'strict'"),
    (GRPOConfig, "num_generations", 1,
     "grpo.num_generations must be an integer >= 2 (a group needs a baseline); got 1"),
    (GRPOConfig, "batch_prompts", 0, "grpo.batch_prompts must be an integer >= 1; got 0"),
    (GRPOConfig, "num_iterations", 0, "grpo.num_iterations must be an integer >= 1; got 0"),
    (GRPOConfig, "epsilon", -0.1, "grpo.epsilon must be a finite number >= 0"),
    (GRPOConfig, "beta", -1.0, "grpo.beta must be a finite number >= 0; got -1.0"),
    (GRPOConfig, "temperature", 0.0, "grpo.temperature must be a finite number > 0"),
    (GRPOConfig, "max_resample_rounds", -1, "grpo.max_resample_rounds must be an integer >= 0; got -1"),
    (PPOConfig, "reward", "exact", "ppo.reward must be one of 'strict'"),
    # every float option is finite (inf and nan are refused by name), and every error names its section
    (SFTConfig, "learning_rate", float("inf"), "sft.learning_rate must be a finite number > 0; got inf"),
    (DPOConfig, "simpo_gamma", float("nan"), "dpo.simpo_gamma must be a finite number >= 0 (SimPO's target reward "
                                             "margin); got nan"),
    (DPOConfig, "simpo_gamma", -1.0, "dpo.simpo_gamma must be a finite number >= 0"),
    (GRPOConfig, "temperature", float("inf"), "grpo.temperature must be a finite number > 0"),
    (GRPOConfig, "sampler_temperature", float("inf"), "grpo.sampler_temperature must be None (sample at "
                                                      "grpo.temperature) or a finite number > 0; got inf"),
    (GRPOConfig, "max_staleness", 10 ** 6, "grpo.max_staleness must be an integer in [0, 32]"),
    (GRPOConfig, "worker_timeout", 0.0, "grpo.worker_timeout must be a finite number > 0"),
    (GRPOConfig, "max_completion_length", 0, "grpo.max_completion_length must be an integer >= 1; got 0"),
    (RewardModelConfig, "temperature", float("inf"), "rm.temperature must be a finite number > 0; got inf"),
    (RewardModelConfig, "noise", 0.5, "rm.noise must be a finite number in [0, 0.5)"),
    (PPOConfig, "learning_rate", float("inf"), "ppo.learning_rate must be a finite number > 0; got inf"),
    (PPOConfig, "critic_learning_rate", 0.0, "ppo.critic_learning_rate must be a finite number > 0; got 0.0"),
    (PPOConfig, "cliprange_value", float("inf"), "ppo.cliprange_value must be a finite number > 0; got inf"),
    (PPOConfig, "kl_coef", float("nan"), "ppo.kl_coef must be a finite number >= 0; got nan"),
]


@pytest.mark.parametrize("section, name, value, message", BAD, ids=[f"{s.__name__}.{n}" for s, n, *_ in BAD])
def test_a_section_refuses_a_bad_value_when_built_and_when_checked(section, name, value, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        section(**{name: value})
    cfg = section()
    setattr(cfg, name, value)  # as a command-line override does, after construction
    with pytest.raises(ValueError, match=re.escape(message)):
        cfg.check()
    run = get_config("test")
    setattr(getattr(run, section.__name__.replace("Config", "").lower().replace("rewardmodel", "rm")), name, value)
    with pytest.raises(ValueError, match=re.escape(message)):
        validate(run)


def test_a_section_refuses_a_kl_estimator_that_does_not_suit_its_placement():
    with pytest.raises(ValueError, match="zero expected gradient"):
        GRPOConfig(beta=0.1, kl_estimator="k1")
    with pytest.raises(ValueError, match="only k1 is a valid per-sequence penalty"):
        GRPOConfig(beta=0.1, kl_placement="reward", kl_estimator="k3")
    assert GRPOConfig(beta=0.1, kl_placement="reward", kl_estimator="k1").beta == 0.1
    assert GRPOConfig(beta=0.0, kl_estimator="k1").kl_estimator == "k1"  # no penalty: the estimator only names the log


def test_every_named_config_builds_and_validates():
    for name in ("cpu", "gpu", "test"):
        assert validate(get_config(name)).name == name
    assert RewardModelConfig().init == "sft" and PPOConfig().num_ppo_epochs == 2


def test_a_config_as_data_is_what_a_saved_run_reads_back():
    import json

    from course_lib.trainers.configs import from_dict, to_dict

    for name in ("cpu", "gpu", "test"):
        data = to_dict(get_config(name))
        assert json.loads(json.dumps(data)) == data  # a saved run's options equal the run's own (tuples as lists)
        assert from_dict(data) == get_config(name)


def test_validate_keeps_the_rules_that_tie_sections_together():
    """A value each section accepts alone, refused by the run: the completion length against the task."""
    run = get_config("test")  # 1-digit task: answers of up to 2 digits + <eos>
    run.dpo.max_completion_length = 2
    run.dpo.check()  # the section alone cannot know the task
    with pytest.raises(ValueError, match=re.escape("dpo.max_completion_length (2) must leave room for the longest "
                                                   "answer plus <eos>: at least task.digits + 2 = 3 tokens")):
        validate(run)
    run = get_config("test")  # n_positions 32, prompts of 5 tokens: a judge's row is 5 + 2 · 14 + 1 = 34 tokens
    run.judge.max_completion_length = 14
    with pytest.raises(ValueError, match=re.escape("model.n_positions (32) is shorter than judge's input (34 tokens")):
        validate(run)  # refused before any training, not after the SFT stage
    run = get_config("test")
    run.grpo.max_completion_length = 28
    with pytest.raises(ValueError, match=re.escape("shorter than grpo's prompt + completion (33 tokens")):
        validate(run)


@pytest.mark.parametrize("overrides, message", [
    ({"task.digits": 5}, "grpo.max_completion_length (4) must leave room for the longest answer plus <eos>: at "
                         "least task.digits + 2 = 7 tokens (raise grpo.max_completion_length or lower task.digits)"),
    ({"task.tool_demos": -5}, "task.tool_demos must be an integer >= 0"),  # refused with or without task.env
    ({"model.n_layer": 0}, "model.n_layer must be an integer in [1, 48] (the tiny GPT's sizes; the gpu config is far "
                           "inside); got 0"),
    ({"model.n_embd": 10**9}, "model.n_embd must be an integer in [1, 4096] (the tiny GPT's sizes"),
    ({"model.n_head": 65}, "model.n_head must be an integer in [1, 64]"),
    ({"model.n_positions": 10**6}, "model.n_positions must be an integer in [1, 4096]"),
    ({"task.digits": 19}, "task.digits must be an integer in [1, 18] (10^digits fits in int64); got 19"),
    ({"task.n_demos": 10**7}, "task.n_demos must be an integer in [1, 1000000]"),
    ({"task.teacher_error_rate": float("nan")}, "task.teacher_error_rate must be a finite number in [0, 1]; got nan"),
    ({"max_grad_norm": float("inf")},
     "max_grad_norm must be a finite number > 0 (0 would zero every update); got inf"),
])
def test_the_run_wide_options_are_refused_by_name(overrides, message):
    run = get_config("test")
    for key, value in overrides.items():
        section, _, name = key.rpartition(".")
        setattr(getattr(run, section) if section else run, name, value)
    with pytest.raises(ValueError, match=re.escape(message)):
        validate(run)
