"""course_lib.formulas.kl: the regularised optima, both KL directions, and the estimators' expected gradients.

Every identity is checked against an independent computation (autograd of the exact KL, the
stationarity condition, random competitors), on random categorical examples from hypothesis.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.formulas.kl import (
    categorical_kl,
    expected_kl_gradient,
    forward_kl_regularised_optimum,
    kl_regularised_optimum,
    regularised_objective,
)
from course_lib.formulas.policy_loss import kl_estimate

REF = np.array([0.20, 0.10, 0.45, 0.15, 0.10])
REWARD = np.array([1.0, 0.8, -0.5, -0.2, 0.0])

logit_vectors = st.lists(st.floats(-3, 3), min_size=3, max_size=6)


def _softmax(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


def test_categorical_kl_matches_the_definition_and_is_not_symmetric():
    p, q = np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.5, 0.3])
    assert categorical_kl(p, q) == pytest.approx(float((p * np.log(p / q)).sum()), rel=1e-14)
    assert categorical_kl(q, p) != pytest.approx(categorical_kl(p, q))
    assert categorical_kl(p, p) == 0.0
    # 0·log 0 = 0 on p's side; mass of p where q has none is infinitely costly
    assert categorical_kl([0.5, 0.5, 0.0], [0.25, 0.25, 0.5]) == pytest.approx(math.log(2))
    assert categorical_kl([0.25, 0.25, 0.5], [0.5, 0.5, 0.0]) == math.inf
    batch = categorical_kl(np.stack([p, q]), q)
    assert batch.shape == (2,) and batch[1] == 0.0


@pytest.mark.parametrize("beta", [0.05, 0.5, 5.0])
def test_the_optimum_beats_every_competitor_and_its_value_is_beta_log_z(beta):
    opt = kl_regularised_optimum(REF, REWARD, beta)
    best = regularised_objective(opt.probs, REF, REWARD, beta)
    assert best == pytest.approx(beta * opt.log_partition, rel=1e-12)
    rng = np.random.default_rng(0)
    competitors = np.vstack([
        rng.dirichlet(np.ones(5), size=2000),
        _softmax_rows(np.log(opt.probs) + rng.normal(scale=0.05, size=(2000, 5))),
    ])
    assert (regularised_objective(competitors, REF, REWARD, beta) < best).all()
    # DPO's starting identity: r = β log(π*/π_ref) + β log Z, exactly
    np.testing.assert_allclose(beta * np.log(opt.probs / REF) + beta * opt.log_partition, REWARD, atol=1e-12)


def _softmax_rows(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_beta_limits_and_zero_reference_mass():
    assert kl_regularised_optimum(REF, REWARD, 1e3).probs == pytest.approx(REF, abs=2e-3)
    assert kl_regularised_optimum(REF, REWARD, 1e-3).probs[0] == pytest.approx(1.0, abs=1e-12)
    # an answer the reference never gives keeps probability 0 whatever its reward
    opt = kl_regularised_optimum([0.5, 0.5, 0.0], [0.0, 0.0, 100.0], 0.1)
    assert opt.probs[2] == 0.0 and opt.probs[:2] == pytest.approx([0.5, 0.5])


@settings(max_examples=40, deadline=None)
@given(logit_vectors, st.floats(0.05, 5.0), st.integers(0, 2**31 - 1))
def test_forward_optimum_is_stationary_and_optimal(ref_logits, beta, seed):
    ref = _softmax(ref_logits)
    reward = np.random.default_rng(seed).normal(size=ref.size)
    pi = forward_kl_regularised_optimum(ref, reward, beta)
    assert pi.sum() == pytest.approx(1.0, abs=1e-12) and (pi > 0).all()
    lam = reward + beta * ref / pi  # stationarity: the same Lagrange multiplier for every answer
    assert np.ptp(lam) < 1e-7 * max(1.0, abs(lam).max())
    best = regularised_objective(pi, ref, reward, beta, direction="forward")
    others = _softmax_rows(np.log(pi) + np.random.default_rng(seed).normal(scale=0.1, size=(200, ref.size)))
    assert (regularised_objective(others, ref, reward, beta, direction="forward") <= best + 1e-12).all()


def _true_kl_gradients(logits, ref):
    theta = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    ref_t = torch.tensor(ref, dtype=torch.float64)
    (rev,) = torch.autograd.grad(categorical_kl(torch.softmax(theta, -1), ref_t), theta)
    (fwd,) = torch.autograd.grad(categorical_kl(ref_t, torch.softmax(theta, -1)), theta)
    return rev.numpy(), fwd.numpy()


@settings(max_examples=60, deadline=None)
@given(logit_vectors, st.integers(0, 2**31 - 1))
def test_expected_gradients_of_the_three_estimators(logits, seed):
    """In the loss: E∇k1 = 0, E∇k2 = ∇KL(π‖π_ref), E∇k3 = ∇KL(π_ref‖π). In the reward: k1 gives ∇KL(π‖π_ref)."""
    ref = _softmax(np.random.default_rng(seed).normal(size=len(logits)))
    rev, fwd = _true_kl_gradients(logits, ref)
    g = {(e, p): expected_kl_gradient(logits, np.log(ref), e, p) for e in ("k1", "k2", "k3")
         for p in ("loss", "reward")}
    np.testing.assert_allclose(g["k1", "loss"], 0.0, atol=1e-12)
    np.testing.assert_allclose(g["k2", "loss"], rev, atol=1e-10)
    np.testing.assert_allclose(g["k3", "loss"], fwd, atol=1e-10)
    np.testing.assert_allclose(g["k1", "reward"], rev, atol=1e-10)
    # product rule: loss part + reward part = the full gradient of E_π[k]; for the unbiased k1
    # and k3 that is ∇KL(π‖π_ref)
    for est in ("k1", "k2", "k3"):
        theta = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
        logp = torch.log_softmax(theta, -1)
        (full,) = torch.autograd.grad((logp.exp() * kl_estimate(logp, torch.tensor(np.log(ref)), est)).sum(), theta)
        np.testing.assert_allclose(g[est, "loss"] + g[est, "reward"], full.numpy(), atol=1e-10)
    np.testing.assert_allclose(g["k3", "loss"] + g["k3", "reward"], rev, atol=1e-10)


def test_expected_gradient_keeps_tensor_kind():
    out = expected_kl_gradient(torch.zeros(3, dtype=torch.float32), torch.log(torch.tensor([0.5, 0.3, 0.2])), "k2")
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and not out.requires_grad


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: categorical_kl([0.5, 0.6], [0.5, 0.5]), "p must sum to 1"),
        (lambda: categorical_kl([0.5, 0.5], [1.5, -0.5]), "q must be non-negative"),
        (lambda: categorical_kl([1.0], [1.0]), "at least 2 answers"),
        (lambda: kl_regularised_optimum(REF, REWARD, 0.0), "beta must be finite and > 0"),
        (lambda: kl_regularised_optimum(REF, [1.0, np.nan, 0, 0, 0], 1.0), "rewards must contain only finite"),
        (lambda: forward_kl_regularised_optimum(np.stack([REF, REF]), REWARD, 1.0), "one probability vector"),
        (lambda: regularised_objective(REF, REF, REWARD, 1.0, direction="both"), "direction must be one of"),
        (lambda: expected_kl_gradient([0.0, 1.0], [-1.0, -0.5], "k4"), "estimator must be one of"),
        (lambda: expected_kl_gradient([0.0, 1.0], [-1.0, -0.5], "k1", "advantage"), "placement must be one of"),
        (lambda: expected_kl_gradient([[0.0, 1.0]], [-1.0, -0.5], "k1"), "logits must be a vector"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_reference_kl_on_the_tiny_gpt():
    from course_lib.tinygpt.evaluation import reference_kl
    from course_lib.tinygpt.model import build_model
    from course_lib.tinygpt.task import AdditionTask
    from course_lib.trainers.configs import get_config

    cfg = get_config("test")
    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    model = build_model(cfg.model, task.tokenizer)
    other = build_model(cfg.model, task.tokenizer)  # another random init, with much sharper outputs
    with torch.no_grad():
        other.lm_head.weight.mul_(20)
    state = torch.random.get_rng_state()
    same = reference_kl(model, model, task, samples_per_prompt=2)
    assert torch.equal(torch.random.get_rng_state(), state), "measuring must not consume training's RNG"
    assert same == {"kl": 0.0, "kl_se": 0.0, "n": 2 * len(task.heldout_pairs)}
    far = reference_kl(model, other, task, samples_per_prompt=2)
    assert far["kl"] > 5 * far["kl_se"] > 0
    assert reference_kl(model, other, task, samples_per_prompt=2) == far  # seeded: reproducible
    assert reference_kl(model, other, task, samples_per_prompt=2, seed=1) != far
    by_k3 = reference_kl(model, other, task, samples_per_prompt=2, estimator="k3")
    assert abs(by_k3["kl"] - far["kl"]) < 5 * (by_k3["kl_se"] + far["kl_se"])  # both unbiased
    with pytest.raises(ValueError, match="estimator must be one of 'k1', 'k3'"):
        reference_kl(model, other, task, estimator="k2")
    with pytest.raises(ValueError, match="samples_per_prompt must be an integer >= 1"):
        reference_kl(model, other, task, samples_per_prompt=0)



def _policy_at_distance(ref: np.ndarray, direction: np.ndarray, kl: float) -> np.ndarray:
    """Logits log π_ref + t·direction with KL(π‖π_ref) = ``kl`` (bisection on t)."""
    lo, hi = 0.0, 100.0
    for _ in range(200):
        t = (lo + hi) / 2
        lg = np.log(ref) + t * direction
        p = _softmax(lg)
        lo, hi = (t, hi) if float((p * np.log(p / ref)).sum()) < kl else (lo, t)
    return np.log(ref) + lo * direction


@pytest.mark.parametrize("distance", [0.05, 2.0])
def test_k2_and_k3_in_the_reward_can_train_away_from_the_reference(distance):
    """The reason config validation refuses k2/k3 in the reward: on this categorical policy the exact
    score-function gradient of k2/k3-in-the-reward points against ∇KL(π‖π_ref); k1's is ∇KL itself."""
    rng = np.random.default_rng(2)
    ref = _softmax(rng.normal(size=6))
    logits = _policy_at_distance(ref, rng.normal(size=6), distance)
    rev, _ = _true_kl_gradients(logits, ref)

    def cos(est):
        g = expected_kl_gradient(logits, np.log(ref), est, "reward")
        return float(g @ rev / np.linalg.norm(g) / np.linalg.norm(rev))

    assert cos("k1") == pytest.approx(1.0)
    assert cos("k2") < -0.5 and cos("k3") < -0.5
