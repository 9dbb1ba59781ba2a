import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lecture import printed

from course_lib.formulas.preference import (
    bt_probability,
    dpo_terms,
    implicit_reward,
    ipo_loss,
    kto_loss,
    kto_reference_point,
    mismatched_order,
    odds_ratio_penalty,
    orpo_loss,
    reward_model_loss,
    simpo_loss,
    win_rate_to_gap,
)

finite = st.floats(-50, 50, allow_nan=False)
PAIR_I = dict(policy_chosen_logps=-12.0, policy_rejected_logps=-11.5,
              ref_chosen_logps=-13.0, ref_rejected_logps=-10.8)


# ---- the lecture's numbers (§5, §7) ----------------------------------------------------------

def test_bradley_terry_numbers():
    printed(bt_probability(1.0), "0.731")
    printed(bt_probability(2.0), "0.881")
    printed(win_rate_to_gap(0.75), "1.099")
    assert win_rate_to_gap(0.75) == pytest.approx(math.log(3))
    printed(win_rate_to_gap(0.9), "2.1972")  # Q1: log 9


def test_dpo_pair_one():
    z, loss, slope = dpo_terms(**PAIR_I, beta=0.1)
    printed(z, "0.170")
    printed(loss, "0.6118")
    printed(slope, "0.4576")


def test_dpo_pair_two():
    terms = dpo_terms(-12.0, -11.5, -12.8, -11.65, beta=0.1)
    printed(terms.margin, "0.065")
    printed(terms.slope, "0.4838")


def test_dpo_pair_one_beta_half():
    terms = dpo_terms(**PAIR_I, beta=0.5)
    printed(terms.margin, "0.85")
    printed(terms.loss, "0.356")
    printed(terms.slope, "0.299")


def test_slope_is_one_half_at_the_boundary_and_grows_when_misordered():
    assert dpo_terms(0.0, 0.0, 0.0, 0.0).slope == 0.5
    assert dpo_terms(-20.0, -10.0, -10.0, -10.0).slope > 0.5
    assert dpo_terms(-20.0, -10.0, -10.0, -10.0, beta=1.0).slope == pytest.approx(1.0, abs=1e-4)


def test_implicit_reward_and_rm_loss():
    printed(implicit_reward(-12.0, -13.0, beta=0.1), "0.100")
    assert reward_model_loss([2.0, 0.0], [1.0, 0.0]) == pytest.approx(
        (math.log1p(math.exp(-1)) + math.log(2)) / 2)
    np.testing.assert_allclose(reward_model_loss([2.0, 0.0], [1.0, 0.0], reduction="none"),
                               [math.log1p(math.exp(-1)), math.log(2)])


def test_reward_model_loss_is_dpo_loss_of_the_gap():
    # Bradley–Terry and DPO share one geometry: DPO is the RM loss on β-scaled log-ratios.
    z = dpo_terms(**PAIR_I).margin
    assert reward_model_loss(z, 0.0) == pytest.approx(dpo_terms(**PAIR_I).loss)


# ---- direct variants (§8) --------------------------------------------------------------------

def test_ipo_targets_a_finite_gap():
    beta = 0.1
    # the loss is zero exactly at h = 1/(2β) and grows on both sides (DPO keeps pushing instead)
    assert ipo_loss(0.0, -5.0, 0.0, 0.0, beta=beta) == pytest.approx(0.0)
    assert ipo_loss(0.0, -4.0, 0.0, 0.0, beta=beta) > 0
    assert ipo_loss(0.0, -6.0, 0.0, 0.0, beta=beta) > 0


def test_simpo_is_length_normalised_and_reference_free():
    # doubling both answers' length and log-prob sums leaves the mean token log-prob unchanged
    a = simpo_loss(-10.0, -12.0, 5, 6, beta=2.0, gamma=0.5)
    b = simpo_loss(-20.0, -24.0, 10, 12, beta=2.0, gamma=0.5)
    assert a == pytest.approx(b)
    expected = math.log1p(math.exp(-(2.0 * (-10 / 5 + 12 / 6) - 0.5)))
    assert a == pytest.approx(expected)


def test_orpo_adds_chosen_nll_to_an_odds_ratio_penalty():
    mw, ml = -10 / 5, -12 / 4
    log_odds = lambda m: m - math.log(1 - math.exp(m))  # noqa: E731
    penalty = math.log1p(math.exp(-(log_odds(mw) - log_odds(ml))))
    assert orpo_loss(-10.0, -12.0, 5, 4, beta=0.1) == pytest.approx(-mw + 0.1 * penalty)


def test_kto_pointwise_labels():
    out = kto_loss([-10.0, -10.0], [-11.0, -11.0], [True, False], beta=0.1)
    s = 1 / (1 + math.exp(-0.1))
    np.testing.assert_allclose(out, [1 - s, s])
    assert isinstance(out, np.ndarray)


def test_kto_reference_point_is_the_clamped_mean_of_mismatched_log_ratios():
    # (x_j, y_{j-1}): TRL's rotation of the batch's completions by one
    assert mismatched_order(4) == [3, 0, 1, 2]
    assert kto_reference_point([-3.0, -5.0, -2.0], [-4.0, -4.5, -2.5]) == pytest.approx((1.0 + -0.5 + 0.5) / 3)
    assert kto_reference_point([-5.0, -5.0], [-4.0, -4.5]) == 0.0  # mean −0.75: a KL is never negative


def test_kto_reference_point_is_detached():
    policy_kl = torch.tensor([-3.0, -1.0, -2.0], dtype=torch.float64, requires_grad=True)
    policy = torch.tensor([-2.0, -4.0], dtype=torch.float64, requires_grad=True)
    z0 = kto_reference_point(policy_kl, torch.tensor([-3.5, -1.5, -2.5], dtype=torch.float64))
    assert float(z0) == pytest.approx(0.5) and not z0.requires_grad
    loss = kto_loss(policy, torch.tensor([-2.5, -3.0], dtype=torch.float64), torch.tensor([True, False]), z0,
                    beta=0.5).mean()
    loss.backward()
    assert policy_kl.grad is None  # no gradient reaches the mismatched pairs through z0
    # the gradient is the one with z0 a constant: d/dr of (1 − σ(β(r − z0))) = −β σ'(β(r − z0))
    s = torch.sigmoid(torch.tensor([0.5 * (0.5 - 0.5), 0.5 * (0.5 - -1.0)], dtype=torch.float64))
    assert torch.allclose(policy.grad, torch.stack([-0.5 * s[0] * (1 - s[0]), 0.5 * s[1] * (1 - s[1])]) / 2)
    # and kto_loss detaches a z0 that carries a graph, whatever the caller passes
    z_graph = policy_kl.mean() + 3.0
    assert z_graph.requires_grad
    kto_loss(policy, -2.0, True, z_graph, beta=0.5).sum().backward()
    assert policy_kl.grad is None


def test_odds_ratio_penalty_is_orpo_minus_the_chosen_nll():
    mw, ml = -10 / 5, -12 / 4
    log_odds = lambda m: m - math.log(1 - math.exp(m))  # noqa: E731
    assert odds_ratio_penalty(-10.0, -12.0, 5,
                              4) == pytest.approx(math.log1p(math.exp(-(log_odds(mw) - log_odds(ml)))))
    assert orpo_loss(-10.0, -12.0, 5, 4, beta=0.3) == pytest.approx(-mw + 0.3 * odds_ratio_penalty(-10.0, -12.0, 5, 4))


# ---- properties --------------------------------------------------------------------------------

@given(finite, finite, finite, finite, st.floats(0.01, 5))
def test_dpo_loss_is_softplus_of_minus_margin_and_slope_matches_autograd(pw, pl, rw, rl, beta):
    policy = torch.tensor([pw, pl], dtype=torch.float64, requires_grad=True)
    terms = dpo_terms(policy[0], policy[1], torch.tensor(rw, dtype=torch.float64),
                      torch.tensor(rl, dtype=torch.float64), beta=beta)
    z = terms.margin.item()
    assert terms.loss.item() == pytest.approx(float(np.logaddexp(0.0, -z)), rel=1e-9, abs=1e-12)
    terms.loss.backward()
    # ∂L/∂log π_w = β · ∂L/∂z and ∂L/∂z = −slope
    assert policy.grad[0].item() == pytest.approx(-beta * terms.slope.item(), rel=1e-9, abs=1e-15)
    assert policy.grad[1].item() == pytest.approx(beta * terms.slope.item(), rel=1e-9, abs=1e-15)


@given(st.lists(finite, min_size=1, max_size=6))
def test_numpy_and_torch_inputs_agree(values):
    arr = np.array(values)
    for fn in (bt_probability,):
        np.testing.assert_allclose(fn(arr), fn(torch.tensor(arr)).numpy())
    np.testing.assert_allclose(dpo_terms(arr, 0.0, 0.5, -1.0).loss,
                               dpo_terms(torch.tensor(arr), 0.0, 0.5, -1.0).loss.numpy())


def test_output_types_follow_input_types():
    assert isinstance(bt_probability(0.3), float)
    assert isinstance(bt_probability([0.3, 1.0]), np.ndarray)
    t = torch.tensor([0.3], dtype=torch.float32)
    assert bt_probability(t).dtype == torch.float32


@pytest.mark.parametrize("z", [1e4, -1e4])
def test_large_margins_are_finite(z):
    assert math.isfinite(bt_probability(z))
    terms = dpo_terms(z, 0.0, 0.0, 0.0, beta=1.0)
    assert math.isfinite(terms.loss) and math.isfinite(terms.slope)
    assert terms.loss == pytest.approx(max(-z, 0.0), abs=1e-6)
    assert math.isfinite(reward_model_loss(z, 0.0))
    assert math.isfinite(win_rate_to_gap(bt_probability(30.0)))


# ---- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda: win_rate_to_gap(0.0), "win_rate"),
    (lambda: win_rate_to_gap(1.0), "win_rate"),
    (lambda: win_rate_to_gap([0.5, 1.2]), "win_rate"),
    (lambda: bt_probability(float("nan")), "score_gap"),
    (lambda: bt_probability("high"), "score_gap"),
    (lambda: dpo_terms(**PAIR_I, beta=0.0), "beta"),
    (lambda: dpo_terms(**PAIR_I, beta=-1), "beta"),
    (lambda: dpo_terms(**PAIR_I, beta=float("inf")), "beta"),
    (lambda: dpo_terms(float("inf"), 0, 0, 0), "policy_chosen_logps"),
    (lambda: dpo_terms([1.0, 2.0], [1.0, 2.0, 3.0], 0, 0), "broadcast"),
    (lambda: reward_model_loss(1.0, 0.0, reduction="sum"), "reduction"),
    (lambda: implicit_reward(0.0, 0.0, beta=0), "beta"),
    (lambda: ipo_loss(0, 0, 0, float("nan")), "ref_rejected_logps"),
    (lambda: ipo_loss(0, 0, 0, 0, chosen_lengths=3), "together"),
    (lambda: ipo_loss(0, 0, 0, 0, chosen_lengths=0, rejected_lengths=2), "chosen_lengths"),
    (lambda: simpo_loss(-1.0, -1.0, 0, 3), "chosen_lengths"),
    (lambda: simpo_loss(-1.0, -1.0, 3, 3, gamma=-1), "gamma"),
    (lambda: orpo_loss(0.0, -1.0, 3, 3), "< 0"),
    (lambda: kto_loss(-1.0, -1.0, 2), "desirable"),
    (lambda: kto_loss(-1.0, -1.0, True, desirable_weight=0), "desirable_weight"),
    (lambda: mismatched_order(1), "n .the batch size. must be an integer >= 2"),
    (lambda: kto_reference_point([0.0, float("nan")], [0.0, 0.0]), "policy_kl_logps"),
    (lambda: odds_ratio_penalty(-1.0, 0.0, 3, 3), "< 0"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@settings(max_examples=25)
@given(st.floats(0.001, 0.999))
def test_win_rate_round_trip(p):
    assert bt_probability(win_rate_to_gap(p)) == pytest.approx(p, rel=1e-9)


def test_ipo_length_normalised_form_is_trl_s():
    # TRL averages each completion's policy and reference log-probs over its tokens
    pw, pl, rw, rl, nw, nl, beta = -6.0, -12.0, -7.0, -10.0, 3, 4, 0.1
    h = (pw / nw - rw / nw) - (pl / nl - rl / nl)
    got = ipo_loss(pw, pl, rw, rl, beta, chosen_lengths=nw, rejected_lengths=nl)
    assert got == pytest.approx((h - 1 / (2 * beta)) ** 2, rel=1e-12)
    assert ipo_loss(pw, pl, rw, rl, beta, chosen_lengths=1, rejected_lengths=1) == pytest.approx(
        ipo_loss(pw, pl, rw, rl, beta))
