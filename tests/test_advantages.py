import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lecture import printed

from course_lib.formulas.advantages import (
    BASELINES,
    baseline_gradient,
    dr_grpo_advantages,
    grpo_advantages,
    rloo_advantages,
    zero_variance_groups,
    zero_variance_probability,
)

REWARDS = [1, 0, 0, 1, 0, 0, 1, 0]


def test_the_lecture_group():
    r = np.array(REWARDS, dtype=float)
    printed(r.mean(), "0.375")
    printed(r.std(), "0.4841")
    a = grpo_advantages(REWARDS)
    printed(a[0], "1.291")
    printed(a[1], "-0.775")
    assert abs(a.sum()) < 1e-12


def test_zero_variance_probability():
    printed(zero_variance_probability(0.3, 8), "0.0577")
    assert zero_variance_probability(0.3, 8) == pytest.approx(0.3**8 + 0.7**8)
    np.testing.assert_allclose(zero_variance_probability([0.0, 1.0, 0.5], 4), [1.0, 1.0, 0.125])


def test_ddof_one_scales_by_sqrt_seven_eighths():
    ratio = grpo_advantages(REWARDS, ddof=1) / grpo_advantages(REWARDS, ddof=0)
    np.testing.assert_allclose(ratio, math.sqrt(7 / 8))
    printed(ratio[0], "0.9354")


def test_rloo_vs_grpo_on_the_lecture_group():
    a = rloo_advantages(REWARDS)
    # success: 1 − 2/7; failure: 0 − 3/7
    np.testing.assert_allclose(a[[0, 1]], [1 - 2 / 7, -3 / 7])
    np.testing.assert_allclose(dr_grpo_advantages(REWARDS), np.array(REWARDS) - 0.375)


def test_exact_baseline_gradients():
    printed(baseline_gradient(0.3, 8, "none"), "0.21")
    printed(baseline_gradient(0.3, 8, "group_mean"), "0.18375")
    printed(baseline_gradient(0.3, 8, "leave_one_out"), "0.21")
    assert baseline_gradient(0.3, 8, "group_mean") == pytest.approx(7 / 8 * 0.21, abs=1e-12)


def test_zero_variance_groups_are_a_decision():
    with pytest.raises(ValueError, match="zero reward variance"):
        grpo_advantages([1, 1, 1, 1])
    out = grpo_advantages([[1, 1, 1, 1], [1, 0, 1, 0]], on_degenerate="zeros")
    np.testing.assert_array_equal(out[0], 0.0)
    np.testing.assert_allclose(out[1], [1, -1, 1, -1])
    np.testing.assert_array_equal(dr_grpo_advantages([2, 2, 2]), 0.0)


def test_batched_groups_and_tensors():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.5, 0.0, 1.0, 0.5]], requires_grad=False)
    out = grpo_advantages(r)
    assert isinstance(out, torch.Tensor) and out.shape == (2, 4) and out.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), grpo_advantages(r.numpy().tolist()), rtol=1e-6)


@settings(deadline=None)
@given(st.floats(-10, 10, allow_nan=False, allow_subnormal=False), st.integers(2, 12),
       st.sampled_from([torch.float32, torch.float64]))
def test_a_zero_variance_group_gets_exact_zeros_from_every_estimator(value, g, dtype):
    """Equal non-binary rewards (0.1 × 8: r − mean is ±6e-8 in float32 without the rule) give exact
    zeros from RLOO and Dr. GRPO too, decided by the one rule (``zero_variance_groups``)."""
    batch = torch.tensor([[value] * g, list(range(g))], dtype=dtype)
    assert zero_variance_groups(batch).tolist() == [True, False]
    for adv in (rloo_advantages(batch), dr_grpo_advantages(batch), grpo_advantages(batch, on_degenerate="zeros")):
        assert torch.count_nonzero(adv[0]) == 0 and torch.count_nonzero(adv[1]) > 0


def test_equal_rewards_of_one_tenth_were_rounding_noise():
    r = torch.full((8,), 0.1)
    assert torch.count_nonzero(r - r.mean()) > 0  # the noise the rule removes
    assert torch.count_nonzero(rloo_advantages(r)) == 0 and torch.count_nonzero(dr_grpo_advantages(r)) == 0


groups = st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=12).filter(
    lambda xs: np.std(xs) > 1e-6)


@given(groups)
def test_advantages_sum_to_zero_per_group(rewards):
    for fn in (grpo_advantages, rloo_advantages, dr_grpo_advantages):
        assert abs(float(np.sum(fn(rewards)))) < 1e-9 * max(1.0, float(np.max(np.abs(rewards))))


@given(groups)
def test_rloo_is_a_rescaled_centred_reward(rewards):
    g = len(rewards)
    np.testing.assert_allclose(rloo_advantages(rewards), g / (g - 1) * dr_grpo_advantages(rewards),
                               atol=1e-9)


@given(groups)
def test_numpy_and_torch_agree(rewards):
    np.testing.assert_allclose(grpo_advantages(np.array(rewards)),
                               grpo_advantages(torch.tensor(rewards, dtype=torch.float64)).numpy())


@settings(max_examples=10, deadline=None)
@given(st.floats(0.05, 0.95), st.integers(2, 8))
def test_simulation_matches_enumeration(p, g):
    """RLOO is unbiased, the full-group mean is biased by (G−1)/G — in simulation too."""
    true = p * (1 - p)
    for baseline, expected in (("leave_one_out", true), ("group_mean", (g - 1) / g * true)):
        exact = baseline_gradient(p, g, baseline)
        assert exact == pytest.approx(expected, abs=1e-12)
        sim = baseline_gradient(p, g, baseline, "simulate", n_groups=20_000, seed=1)
        assert abs(sim.mean - expected) < 5 * sim.stderr + 1e-12


def test_std_normalisation_changes_the_scale():
    # G=2 by hand: mixed groups have advantages ±1, each contributes 1/2, with prob 2p(1−p)
    assert baseline_gradient(0.3, 2, "group_mean_std") == pytest.approx(0.21, abs=1e-12)
    # at G=8 dividing by the group std roughly doubles the expected step: not a harmless constant
    assert baseline_gradient(0.3, 8, "group_mean_std") > 1.9 * baseline_gradient(0.3, 8, "none")


@pytest.mark.parametrize("call, match", [
    (lambda: grpo_advantages([1.0]), "G >= 2"),
    (lambda: grpo_advantages([[[1.0, 0.0]]]), "shape"),
    (lambda: grpo_advantages([1.0, float("nan")]), "rewards"),
    (lambda: grpo_advantages([1.0, 0.0], on_degenerate="eps"), "on_degenerate"),
    (lambda: grpo_advantages([1.0, 0.0], ddof=2), "ddof"),
    (lambda: rloo_advantages([3.0]), "G >= 2"),
    (lambda: zero_variance_probability(1.5, 8), "p must lie"),
    (lambda: zero_variance_probability(0.5, 1), "group_size"),
    (lambda: zero_variance_probability(0.5, 2.5), "group_size"),
    (lambda: baseline_gradient(-0.1, 8), "p"),
    (lambda: baseline_gradient(1.1, 8), "p must lie"),
    (lambda: baseline_gradient(0.3, 1), "group_size"),
    (lambda: baseline_gradient(0.3, 8, "critic"), "baseline"),
    (lambda: baseline_gradient(0.3, 8, method="guess"), "method"),
    (lambda: baseline_gradient(0.3, 30), "group_size must be <= 20"),
    (lambda: baseline_gradient(0.3, 8, method="simulate", n_groups=1), "n_groups"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_every_baseline_is_enumerable():
    for b in BASELINES:
        assert math.isfinite(baseline_gradient(0.5, 4, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("value", [0.1, 0.3, 1 / 3, 0.7, 2.2, 1e3 + 0.1])
def test_equal_non_dyadic_rewards_are_degenerate_in_both_dtypes(dtype, value):
    for g in (3, 8):
        single = torch.full((g,), value, dtype=dtype)
        assert bool(zero_variance_groups(single))
        batch = torch.stack([single, torch.arange(g, dtype=dtype) / g])
        assert zero_variance_groups(batch).tolist() == [True, False]
        with pytest.raises(ValueError, match="zero reward variance"):
            grpo_advantages(single)
        with pytest.raises(ValueError, match="zero reward variance"):
            grpo_advantages(batch)
        out = grpo_advantages(batch, on_degenerate="zeros")
        assert torch.equal(out[0], torch.zeros(g, dtype=dtype))  # no ±1 made of rounding noise
        torch.testing.assert_close(out[1], grpo_advantages(batch[1]))
    assert bool(zero_variance_groups([value] * 3))
    np.testing.assert_array_equal(grpo_advantages([value] * 8, on_degenerate="zeros"), 0.0)


def test_zero_variance_tolerance_is_stated_and_settable():
    assert not zero_variance_groups([0.0, 1e-6])  # a real difference is not degenerate
    assert zero_variance_groups([0.0, 1e-6], atol=1e-5)
    assert zero_variance_groups([0.1 + 0.2, 0.3])  # rounding of the same value is
    with pytest.raises(ValueError, match="atol"):
        zero_variance_groups([0.0, 1.0], atol=-1)


def test_trl_scale_rewards_group_is_ddof_one_plus_epsilon():
    r = np.array([[1.0, 0.0, 0.5, 0.25], [0.0, 0.0, 0.0, 0.0]])
    ours = grpo_advantages(r, ddof=1, epsilon=1e-4, on_degenerate="zeros")
    mean, std = r.mean(-1, keepdims=True), r.std(-1, ddof=1, keepdims=True)
    np.testing.assert_allclose(ours, (r - mean) / (std + 1e-4), rtol=1e-12)


def test_validate_false_is_the_same_formula():
    r = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.2, 0.2, 0.2, 0.2]])
    for fn in (dr_grpo_advantages, rloo_advantages):
        assert torch.equal(fn(r, validate=False), fn(r))
    assert torch.equal(grpo_advantages(r, on_degenerate="zeros", validate=False),
                       grpo_advantages(r, on_degenerate="zeros"))


# --- Two 2025–26 analyses, exact on the Bernoulli policy (lecture §12; notebook 06_baseline_bias_enumeration)
# ---------------

@settings(max_examples=40, deadline=None)
@given(st.floats(0.01, 0.99))
def test_grpo_with_two_answers_is_the_exact_policy_gradient(p):
    """Wu et al. 2025: with G = 2 only a mixed pair moves the policy, with advantages ±1, so each
    update is ½(∇log π(y+) − ∇log π(y−)); in expectation that is p(1 − p), the true gradient."""
    from course_lib.formulas.advantages import baseline_gradient

    assert baseline_gradient(p, 2, "group_mean_std") == pytest.approx(p * (1 - p), rel=1e-12)
    assert grpo_advantages([1.0, 0.0]).tolist() == [1.0, -1.0]


@pytest.mark.parametrize("baseline", ["group_mean", "group_mean_std"])
@pytest.mark.parametrize("g", [4, 8, 16])
def test_the_group_relative_advantage_under_rates_hard_prompts_and_over_rates_easy_ones(baseline, g):
    """Yang et al. 2026: conditioned on the group carrying signal, a correct answer's advantage is
    too small on a hard prompt and too large on an easy one."""
    from course_lib.formulas.advantages import conditional_advantage

    hard, easy = conditional_advantage(0.05, g, baseline), conditional_advantage(0.95, g, baseline)
    assert hard.estimate < hard.true
    assert easy.estimate > easy.true


def test_the_conditional_advantage_by_hand():
    """G = 2, mean baseline: a correct answer is in a mixed pair only with a wrong one, so its
    advantage is exactly 1/2 whatever p, against a true r − p."""
    from course_lib.formulas.advantages import conditional_advantage

    assert conditional_advantage(0.3, 2, "group_mean") == pytest.approx((0.5, 0.7))
    assert conditional_advantage(0.3, 2, "group_mean", outcome=0) == pytest.approx((-0.5, -0.3))
    # G = 3, p = 0.5, correct answer: the others are (1,0),(0,1) w.p. ½ → 1 − 2/3 = 1/3, or (0,0)
    # w.p. ¼ → 1 − 1/3 = 2/3; (1,1) is all-correct and carries no signal. (½·⅓ + ¼·⅔)/¾ = 4/9.
    assert conditional_advantage(0.5, 3, "group_mean").estimate == pytest.approx(4 / 9)


@pytest.mark.parametrize("kwargs, match", [
    ({"p": 0.0, "group_size": 8}, "strictly between 0 and 1"),
    ({"p": 1.0, "group_size": 8}, "strictly between 0 and 1"),
    ({"p": 0.5, "group_size": 1}, "group_size"),
    ({"p": 0.5, "group_size": 8, "baseline": "mean"}, "baseline"),
    ({"p": 0.5, "group_size": 8, "outcome": 2}, "outcome must be 0 or 1"),
])
def test_conditional_advantage_refuses_bad_input(kwargs, match):
    from course_lib.formulas.advantages import conditional_advantage

    with pytest.raises(ValueError, match=match):
        conditional_advantage(**kwargs)
