import pytest
from lecture import printed

from course_lib.formulas.budgets import rollout_generation_seconds, rollout_tokens, stage_memory_gib, update_seconds

N = 8.03e9


def test_memory_model():
    printed(stage_memory_gib(N, ["train"]), "119.7")
    printed(stage_memory_gib(N, ["frozen_bf16"]), "14.96")
    ppo = stage_memory_gib(N, ["train", "train", "frozen_bf16", "frozen_bf16"])
    dpo = stage_memory_gib(N, ["train", "frozen_bf16"])
    printed(ppo, "269.2")
    printed(dpo, "134.6")
    printed(ppo / dpo, "2.00")
    assert stage_memory_gib(N, "ppo") == ppo and stage_memory_gib(N, "dpo") == dpo
    printed(100 * stage_memory_gib(N, ["train"]) / ppo, "44")  # the critic's share, ≈44%
    assert stage_memory_gib(N, "dpo_cached_ref") == stage_memory_gib(N, "sft")


def test_rollout_versus_update():
    tokens = rollout_tokens(256, 8, 4000)
    assert tokens == 8_192_000
    gen = rollout_generation_seconds(256, 8, 4000, 209.4, 8)
    printed(gen, "4890.2")
    printed(gen / 60, "81.5")
    upd = update_seconds(N, tokens, 990e12, 0.4, 8)
    printed(upd / 60, "2.076444")
    printed(gen / 60, "81.502706")
    printed(gen / upd, "39.2511")


def test_what_if_scales_linearly():
    base = rollout_generation_seconds(256, 8, 4000, 209.4, 8)
    assert rollout_generation_seconds(256, 8, 2000, 209.4, 8) == pytest.approx(base / 2)
    assert update_seconds(2 * N, 1e6, 990e12, 0.4, 8) == pytest.approx(2 * update_seconds(N, 1e6, 990e12, 0.4, 8))


@pytest.mark.parametrize("call, match", [
    (lambda: stage_memory_gib(-1, ["train"]), "n_params"),
    (lambda: stage_memory_gib(float("nan"), ["train"]), "n_params"),
    (lambda: stage_memory_gib(N, ["train", "fp8"]), "stack entry"),
    (lambda: stage_memory_gib(N, "grpo"), "stack"),
    (lambda: stage_memory_gib(N, []), "stack"),
    (lambda: rollout_generation_seconds(256, 8, 4000, 0.0, 8), "tokens_per_second_per_device"),
    (lambda: rollout_generation_seconds(-256, 8, 4000, 209.4, 8), "prompts"),
    (lambda: rollout_generation_seconds(256, 8, 4000, 209.4, 0), "devices"),
    (lambda: update_seconds(N, 1e6, 990e12, 1.5, 8), "mfu"),
    (lambda: update_seconds(N, 1e6, 990e12, 0.0, 8), "mfu"),
    (lambda: update_seconds(N, 1e6, float("inf"), 0.4, 8), "flops_per_device"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
