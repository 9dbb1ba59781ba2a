import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib.formulas.policy_loss import aggregate, clipped_surrogate, kl_estimate, kl_shaped_rewards

MASK = [[1, 0, 0], [1, 1, 1]]
VALUES = [[2.0, 9.0, 9.0], [0.0, 0.0, 0.0]]  # 9.0 sits on padding and must never count


def test_lecture_aggregation_example():
    assert aggregate(VALUES, MASK, "sequence_mean") == pytest.approx(1.0)
    assert aggregate(VALUES, MASK, "token_mean") == pytest.approx(0.5)
    # Dr. GRPO: a constant denominator G·L_max, different from both
    assert aggregate(VALUES, MASK, "constant") == pytest.approx(2.0 / (2 * 3))
    assert aggregate(VALUES, MASK, "constant", max_length=8) == pytest.approx(2.0 / (2 * 8))


def test_clip_higher_interval():
    rho = np.array([0.5, 0.9, 1.0, 1.1, 1.3, 2.0])
    pos = clipped_surrogate(rho, np.ones(6), eps_low=0.2, eps_high=0.28)
    np.testing.assert_allclose(pos, [0.5, 0.9, 1.0, 1.1, 1.28, 1.28])
    neg = clipped_surrogate(rho, -np.ones(6), eps_low=0.2, eps_high=0.28)
    np.testing.assert_allclose(neg, [-0.8, -0.9, -1.0, -1.1, -1.3, -2.0])


def test_per_completion_advantages_broadcast_over_tokens():
    out = clipped_surrogate(np.ones((2, 3)), [1.5, -0.5])
    np.testing.assert_allclose(out, [[1.5] * 3, [-0.5] * 3])


@given(st.floats(0.0, 3.0), st.floats(-3, 3).filter(lambda a: abs(a) > 1e-3),
       st.floats(0.0, 0.5), st.floats(0.0, 0.5))
def test_clipping_changes_gradients_only_outside_the_interval(rho0, adv, lo, hi):
    rho = torch.tensor(rho0, dtype=torch.float64, requires_grad=True)
    clipped_surrogate(rho, torch.tensor(adv, dtype=torch.float64), lo, hi).backward()
    inside = 1 - lo < rho0 < 1 + hi
    blocked = (adv > 0 and rho0 > 1 + hi) or (adv < 0 and rho0 < 1 - lo)
    if inside or not blocked:
        assert rho.grad.item() == pytest.approx(adv)  # the unclipped term ρA
    else:
        assert rho.grad.item() == 0.0


def test_kl_estimators():
    lp, ref = np.log([0.5, 0.2]), np.log([0.4, 0.3])
    log_r = ref - lp
    np.testing.assert_allclose(kl_estimate(lp, ref, "k1"), -log_r)
    np.testing.assert_allclose(kl_estimate(lp, ref, "k2"), 0.5 * log_r**2)
    np.testing.assert_allclose(kl_estimate(lp, ref, "k3"), np.exp(log_r) - 1 - log_r)
    assert np.all(kl_estimate(lp, ref) >= 0)
    np.testing.assert_array_equal(kl_estimate(lp, lp), 0.0)


def test_k1_and_k3_are_unbiased_for_the_true_kl():
    p, q = np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.5, 0.3])
    true_kl = float((p * np.log(p / q)).sum())
    for est in ("k1", "k3"):  # the expectation under p, computed exactly over the support
        assert float((p * kl_estimate(np.log(p), np.log(q), est)).sum()) == pytest.approx(true_kl)


def test_tensors_keep_autograd():
    q = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    out = aggregate(q, torch.tensor([[1, 1], [1, 0]]), "token_mean")
    out.backward()
    np.testing.assert_allclose(q.grad.numpy(), [[1 / 3, 1 / 3], [1 / 3, 0]])


@pytest.mark.parametrize("call, match", [
    (lambda: aggregate(VALUES, MASK, "mean"), "unit"),
    (lambda: aggregate([1.0, 2.0], [1, 1]), "shape"),
    (lambda: aggregate(VALUES, [[1, 0, 0], [2, 1, 1]]), "mask"),
    (lambda: aggregate(VALUES, MASK, "constant", max_length=-1.5), "max_length"),
    (lambda: aggregate(VALUES, MASK, "constant", max_length=0), "max_length"),
    (lambda: aggregate([[float("nan")]], [[1]]), "per_token"),
    (lambda: clipped_surrogate(1.0, 1.0, eps_low=-0.1), "eps_low"),
    (lambda: kl_shaped_rewards([1.0], [[0.0]], [[0.0]], [[1]], beta=-1), "beta"),
    (lambda: kl_shaped_rewards([1.0, 2.0], [[0.0]], [[0.0]], [[1]], beta=0.1), "shape"),
    (lambda: clipped_surrogate(1.0, 1.0, eps_high=-0.1), "eps_high"),
    (lambda: clipped_surrogate(-1.0, 1.0), "ratio"),
    (lambda: clipped_surrogate([1.0, 1.0], [1.0, 1.0, 1.0]), "broadcast"),
    (lambda: kl_estimate([0.0], [0.0], "k4"), "estimator"),
    (lambda: kl_estimate([float("inf")], [0.0]), "logps"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_masked_rows_count_in_the_denominators_as_in_trl():
    # three completions; the last is masked out entirely (truncated, say): it contributes 0
    # and still counts among the rows, so Dr. GRPO's denominator stays rows * L_max
    values = [[2.0, 9.0], [1.0, 1.0], [5.0, 5.0]]
    mask = [[1, 0], [1, 1], [0, 0]]
    assert aggregate(values, mask, "sequence_mean") == pytest.approx((2.0 + 1.0 + 0.0) / 3)
    assert aggregate(values, mask, "token_mean") == pytest.approx(4.0 / 3)
    assert aggregate(values, mask, "constant", max_length=2) == pytest.approx(4.0 / (3 * 2))
    # any positive constant, also one shorter than the longest completion (peer code relies on it)
    assert aggregate(values, mask, "constant", max_length=0.5) == pytest.approx(4.0 / 1.5)
    assert aggregate(values, [[0, 0]] * 3, "token_mean") == 0.0


def test_eps_low_of_one_or_more_means_no_lower_clip():
    rho = np.array([0.01, 0.5, 1.0, 3.0])
    out = clipped_surrogate(rho, -np.ones(4), eps_low=1.0, eps_high=0.2)
    np.testing.assert_allclose(out, [-0.01, -0.5, -1.0, -3.0])  # never clipped below
    np.testing.assert_allclose(clipped_surrogate(rho, -np.ones(4), eps_low=5.0), out)


@given(st.floats(0.0, 3.0), st.floats(-3, 3), st.floats(0.0, 0.5), st.floats(0.0, 0.5))
def test_the_clipped_mask_is_where_the_gradient_vanishes(rho0, adv, lo, hi):
    rho = torch.tensor([rho0], dtype=torch.float64, requires_grad=True)
    a = torch.tensor([adv], dtype=torch.float64)
    objective, clipped = clipped_surrogate(rho, a, lo, hi, return_clipped=True)
    objective.sum().backward()
    if bool(clipped[0]):
        assert rho.grad.item() == 0.0 and adv != 0.0
    else:
        assert rho.grad.item() == pytest.approx(adv)
    np.testing.assert_array_equal(
        clipped_surrogate([rho0], [adv], lo, hi, return_clipped=True)[1], clipped.numpy()
    )


def test_validate_false_gives_the_same_numbers():
    gen = torch.Generator().manual_seed(0)
    q, rho = torch.randn(4, 5, generator=gen), torch.rand(4, 5, generator=gen) + 0.5
    m = (torch.rand(4, 5, generator=gen) > 0.3).float()
    adv = torch.randn(4, generator=gen)
    for unit in ("sequence_mean", "token_mean", "constant"):
        assert aggregate(q, m, unit, validate=False) == aggregate(q, m, unit)
    assert torch.equal(clipped_surrogate(rho, adv, validate=False), clipped_surrogate(rho, adv))
    assert torch.equal(kl_estimate(q, -q, "k3", validate=False), kl_estimate(q, -q, "k3"))


def _softmax_expected_gradients(logits, ref_logits):
    """E_{y~π}[∇_θ k(y)] for each estimator, exactly: Σ_y π(y) ∇_θ k(y) with y held fixed."""
    out = {}
    for est in ("k1", "k2", "k3"):
        theta = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
        logp = torch.log_softmax(theta, -1)
        ref = torch.log_softmax(torch.tensor(ref_logits, dtype=torch.float64), -1)
        k = kl_estimate(logp, ref, est)
        (logp.exp().detach() * k).sum().backward()  # samples are held fixed: weights detached
        out[est] = theta.grad.clone()
    return out


def test_expected_gradients_of_the_kl_estimators_in_the_loss():
    # a 5-answer softmax policy and reference; the expectation over on-policy samples is exact
    logits, ref_logits = [0.3, -1.2, 2.0, 0.0, 0.7], [1.0, 0.5, -0.5, 0.2, -1.0]
    grads = _softmax_expected_gradients(logits, ref_logits)

    def kl_grad(reverse: bool):
        theta = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
        logp = torch.log_softmax(theta, -1)
        ref = torch.log_softmax(torch.tensor(ref_logits, dtype=torch.float64), -1)
        kl = (logp.exp() * (logp - ref)).sum() if reverse else (ref.exp() * (ref - logp)).sum()
        kl.backward()
        return theta.grad

    np.testing.assert_allclose(grads["k1"], 0.0, atol=1e-12)  # no KL pressure at all
    np.testing.assert_allclose(grads["k2"], kl_grad(reverse=True), rtol=1e-10)  # ∇KL(π‖π_ref)
    np.testing.assert_allclose(grads["k3"], kl_grad(reverse=False), rtol=1e-10)  # ∇KL(π_ref‖π)
    assert not np.allclose(grads["k2"], grads["k3"])  # the two directions really differ here


def test_kl_in_the_reward_is_a_detached_sequence_penalty():
    r = torch.tensor([1.0, 0.0], dtype=torch.float64)
    lp = torch.tensor([[-0.5, -1.0, -9.0], [-2.0, -0.1, -0.1]], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([[-0.7, -0.9, 0.0], [-1.0, -0.3, -0.2]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    shaped = kl_shaped_rewards(r, lp, ref, mask, beta=0.5)
    k1 = (lp.detach() - ref) * mask
    torch.testing.assert_close(shaped, r - 0.5 * k1.sum(-1))
    assert not shaped.requires_grad  # a reward is a constant for the policy gradient
    np.testing.assert_allclose(kl_shaped_rewards([1.0, 0.0], lp.detach().numpy(), ref.numpy(),
                                                 mask.numpy(), beta=0.0), [1.0, 0.0])


# --- GSPO's sequence ratio and CISPO's capped weight ------------------------------------------------

def test_sequence_ratio_is_the_geometric_mean_of_the_real_tokens_ratios():
    from course_lib.formulas.policy_loss import sequence_ratio

    logps = torch.log(torch.tensor([[0.5, 0.2, 0.9], [0.4, 0.4, 0.4], [0.3, 0.3, 0.3]], dtype=torch.float64))
    old = torch.log(torch.tensor([[0.25, 0.8, 0.1], [0.2, 0.4, 0.4], [0.6, 0.6, 0.6]], dtype=torch.float64))
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0]])
    s = sequence_ratio(logps, old, mask)
    # row 0: ratios 2 and 1/4 on its two real tokens (the padded 9 never counts): √(2·¼) = 0.7071
    assert s.tolist() == pytest.approx([(2 * 0.25) ** 0.5, 2 ** (1 / 3), 1.0])


@given(st.lists(st.floats(-2, 2), min_size=1, max_size=6), st.floats(-3, 3))
def test_gspo_gradient_spreads_s_times_a_over_the_completions_tokens(deltas, adv):
    """Inside the clip band, ∂(s·A)/∂log π_t = s·A/|y| for every real token t."""
    from course_lib.formulas.policy_loss import sequence_ratio

    n = len(deltas)
    lp = torch.tensor([deltas], dtype=torch.float64, requires_grad=True)
    s = sequence_ratio(lp, torch.zeros(1, n, dtype=torch.float64), torch.ones(1, n))
    (s * adv).sum().backward()
    assert lp.grad[0].tolist() == pytest.approx([float(s.detach()) * adv / n] * n, rel=1e-9, abs=1e-12)


def test_cispo_keeps_a_gradient_where_the_ppo_clip_removes_it():
    from course_lib.formulas.policy_loss import cispo_objective

    lp = torch.log(torch.tensor([[0.9, 0.5, 0.2]], dtype=torch.float64)).requires_grad_()
    old = torch.log(torch.tensor([[0.3, 0.5, 0.4]], dtype=torch.float64))
    ratio = torch.exp(lp - old)  # 3, 1, 0.5
    adv = torch.tensor([1.0], dtype=torch.float64)
    objective, capped = cispo_objective(ratio, adv, lp, eps_max=2.0, return_clipped=True)
    objective.sum().backward()
    assert capped.tolist() == [[True, False, False]]
    assert lp.grad[0].tolist() == pytest.approx([2.0, 1.0, 0.5])  # min(ρ, ε_max)·A on every token
    lp.grad = None
    clipped_surrogate(torch.exp(lp - old), adv, 0.2, 0.2).sum().backward()
    assert lp.grad[0, 0] == 0.0, "PPO's clip: a token above 1 + ε with A > 0 gets no gradient"


@pytest.mark.parametrize("call, match", [
    (lambda f: f["cispo"]([[1.0]], [1.0], [[0.0]], eps_max=0), "eps_max"),
    (lambda f: f["cispo"]([[-1.0]], [1.0], [[0.0]]), "ratio must be >= 0"),
    (lambda f: f["seq"]([[0.0, 0.0]], [[0.0, 0.0, 0.0]], [[1, 1]]), "old_logps"),
    (lambda f: f["seq"]([0.0, 0.0], [0.0, 0.0], [1, 1]), r"\(N, T\) shape"),
])
def test_gspo_and_cispo_refuse_bad_input(call, match):
    from course_lib.formulas.policy_loss import cispo_objective, sequence_ratio

    with pytest.raises(ValueError, match=match):
        call({"cispo": cispo_objective, "seq": sequence_ratio})
