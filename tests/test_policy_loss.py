import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib.policy_loss import aggregate, clipped_surrogate, kl_estimate

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
    (lambda: aggregate(VALUES, [[1, 0, 0], [0, 0, 0]]), "no tokens"),
    (lambda: aggregate(VALUES, [[1, 0, 0], [2, 1, 1]]), "mask"),
    (lambda: aggregate(VALUES, MASK, "constant", max_length=2), "max_length"),
    (lambda: aggregate(VALUES, MASK, "constant", max_length=0), "max_length"),
    (lambda: aggregate([[float("nan")]], [[1]]), "per_token"),
    (lambda: clipped_surrogate(1.0, 1.0, eps_low=1.0), "eps_low"),
    (lambda: clipped_surrogate(1.0, 1.0, eps_high=-0.1), "eps_high"),
    (lambda: clipped_surrogate(-1.0, 1.0), "ratio"),
    (lambda: clipped_surrogate([1.0, 1.0], [1.0, 1.0, 1.0]), "broadcast"),
    (lambda: kl_estimate([0.0], [0.0], "k4"), "estimator"),
    (lambda: kl_estimate([float("inf")], [0.0]), "logps"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
