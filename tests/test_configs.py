"""Config sections validate themselves (as TRL's configs do); ``validate`` keeps the run-wide rules."""

from __future__ import annotations

import re

import pytest

from course_lib.configs import (
    DPOConfig,
    GRPOConfig,
    PPOConfig,
    RewardModelConfig,
    SFTConfig,
    get_config,
    validate,
)

BAD = [  # (section, field, bad value, the error: the field named, with what it accepts)
    (SFTConfig, "steps", -1, "sft.steps must be >= 0; got -1"),
    (SFTConfig, "batch_size", 0, "sft.batch_size must be >= 1; got 0"),
    (SFTConfig, "learning_rate", 0.0, "sft.learning_rate must be > 0; got 0.0"),
    (SFTConfig, "eval_every", 0, "sft.eval_every must be >= 1; got 0"),
    (DPOConfig, "loss_type", "kto", "dpo.loss_type must be one of ('sigmoid', 'ipo', 'simpo'); got 'kto'"),
    (DPOConfig, "beta", 0.0, "dpo.beta must be > 0; got 0.0"),
    (DPOConfig, "rpo_alpha", -0.5, "dpo.rpo_alpha must be >= 0; got -0.5"),
    (DPOConfig, "samples_per_prompt", 1, "dpo.samples_per_prompt must be >= 2; got 1"),
    (DPOConfig, "pair_prompts", 0, "dpo.pair_prompts must be >= 1; got 0"),
    (DPOConfig, "batch_size", 0, "dpo.batch_size must be >= 1; got 0"),
    (GRPOConfig, "unit", "per_prompt",
     "grpo.unit must be one of ('sequence_mean', 'token_mean', 'constant'); got 'per_prompt'"),
    (GRPOConfig, "advantage", "ppo", "grpo.advantage must be one of ('grpo', 'rloo', 'dr_grpo'); got 'ppo'"),
    (GRPOConfig, "zero_variance", "skip", "grpo.zero_variance must be one of ('keep', 'drop', 'resample'); got 'skip'"),
    (GRPOConfig, "kl_estimator", "k4", "grpo.kl_estimator must be one of ('k1', 'k2', 'k3'); got 'k4'"),
    (GRPOConfig, "kl_placement", "advantage", "grpo.kl_placement must be one of ('loss', 'reward'); got 'advantage'"),
    (GRPOConfig, "reward", "exact", "grpo.reward must be one of 'strict'"),
    (GRPOConfig, "num_generations", 1, "grpo.num_generations must be >= 2 (a group needs a baseline); got 1"),
    (GRPOConfig, "batch_prompts", 0, "grpo.batch_prompts must be >= 1; got 0"),
    (GRPOConfig, "num_iterations", 0, "grpo.num_iterations must be >= 1; got 0"),
    (GRPOConfig, "epsilon", -0.1, "grpo.epsilon must be >= 0"),
    (GRPOConfig, "beta", -1.0, "grpo.beta must be >= 0; got -1.0"),
    (GRPOConfig, "temperature", 0.0, "grpo.temperature must be > 0"),
    (GRPOConfig, "max_resample_rounds", -1, "grpo.max_resample_rounds must be >= 0; got -1"),
    (PPOConfig, "reward", "exact", "ppo.reward must be one of 'strict'"),
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


def test_validate_keeps_the_rules_that_tie_sections_together():
    """A value each section accepts alone, refused by the run: the completion length against the task."""
    run = get_config("test")  # 1-digit task: answers of up to 2 digits + <eos>
    run.dpo.max_completion_length = 2
    run.dpo.check()  # the section alone cannot know the task
    with pytest.raises(ValueError, match=re.escape("max_completion_length (2) must leave room for the longest "
                                                   "answer plus <eos> (3 tokens)")):
        validate(run)
