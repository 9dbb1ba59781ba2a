"""The RFT control, the partial-credit checker, and two claims notebook 09_tiny_gpt_grpo teaches about GRPO runs:
clip-higher alone does nothing at μ = 1, and AdamW cancels a constant advantage factor (RLOO vs
Dr. GRPO) but not GRPO's per-group std. Toy budgets on the ``test`` config (seconds, CPU)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from course_lib.formulas.advantages import rft_weights
from course_lib.tinygpt.model import build_model
from course_lib.tinygpt.rewards import resolve_reward
from course_lib.tinygpt.runtime import MetricsLog
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import get_config
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.rft import rft_loss, train_rft
from course_lib.trainers.sft import sft_loss, train_sft
from course_lib.trainers.trainer import TrainContext


@pytest.fixture(scope="module")
def setup():
    cfg = get_config("test")
    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    model = build_model(cfg.model, task.tokenizer)
    train_sft(model, task, cfg.sft, TrainContext(show_progress=False), seed=0, eval_at_end=False)
    return cfg, task, {k: v.clone() for k, v in model.state_dict().items()}


def ids(task, text, eos=True):
    tok = task.tokenizer
    return tok.convert_tokens_to_ids(list(text)) + ([tok.eos_token_id] if eos else [])


def test_partial_credit_counts_digit_places():
    task = AdditionTask(get_config("test").task)
    pair = (7, 58)  # 65
    assert task.partial_reward(pair, ids(task, "65")) == 1.0
    assert task.partial_reward(pair, ids(task, "55")) == 0.5  # the flawed teacher's answer: half right
    assert task.partial_reward(pair, ids(task, "165")) == pytest.approx(2 / 3)  # an extra digit costs credit
    assert task.partial_reward(pair, ids(task, "5")) == 0.5
    assert task.partial_reward(pair, ids(task, "65", eos=False)) == 0.0  # truncated
    assert task.partial_reward(pair, ids(task, "")) == 0.0
    batched = resolve_reward("partial", task)
    assert batched([pair, pair], torch.tensor([ids(task, "55"), ids(task, "65")])).tolist() == [0.5, 1.0]
    with pytest.raises(ValueError, match="partial"):
        resolve_reward("fuzzy", task)


def test_rft_weights_filter_and_reward():
    r = torch.tensor([1.0, 0.0, 0.5, 1.0])
    assert rft_weights(r).tolist() == [1.0, 0.0, 0.0, 1.0]
    assert rft_weights(r, threshold=0.5).tolist() == [1.0, 0.0, 1.0, 1.0]
    assert rft_weights(r, weighting="reward").tolist() == [1.0, 0.0, 0.5, 1.0]
    with pytest.raises(ValueError, match="weighting"):
        rft_weights(r, weighting="softmax")
    with pytest.raises(ValueError, match=">= 0"):
        rft_weights(torch.tensor([-1.0, 1.0]), weighting="reward")


def test_rft_loss_with_0_1_weights_is_sft_on_the_kept_rows(setup):
    cfg, task, weights = setup
    model = build_model(cfg.model, task.tokenizer)
    model.load_state_dict(weights)
    d_ids, d_attn, d_cmask = task.demonstrations()
    batch = {"input_ids": d_ids[:6], "attention_mask": d_attn[:6], "completion_mask": d_cmask[:6]}
    w = torch.tensor([1.0, 0, 1, 1, 0, 1])
    keep = w > 0
    with torch.no_grad():
        expected = sft_loss(model, d_ids[:6][keep], d_attn[:6][keep], d_cmask[:6][keep])
    with torch.no_grad():
        assert float(rft_loss(model, batch, w)) == pytest.approx(float(expected), rel=1e-6)
        # weights of 2 on every row give the same (normalised) loss
        assert float(rft_loss(model, batch, 2 * w)) == pytest.approx(float(expected), rel=1e-6)


def test_train_rft_runs_logs_and_refuses_mu_2(setup):
    cfg, task, weights = setup
    model = build_model(cfg.model, task.tokenizer)
    model.load_state_dict(weights)
    log = MetricsLog()
    out = train_rft(model, task, cfg.grpo, TrainContext(log=log, steps=3, show_progress=False),
                    generator=torch.Generator().manual_seed(1))
    assert out["steps"] == 3 and len(log.rows) == 3
    for row in log.rows:
        assert 0 <= row["kept_fraction"] <= 1 and row["skipped"] in (0, 1)
        assert row["kept_fraction"] == 0 or row["reward_mean"] > 0  # something kept only if something was approved
    assert "accuracy" in log.rows[-1]
    with pytest.raises(ValueError, match="num_iterations"):
        train_rft(model, task, dataclasses.replace(cfg.grpo, num_iterations=2),
                  TrainContext(steps=1, show_progress=False), generator=torch.Generator())


def _grpo(setup, steps=3, max_grad_norm=1.0, **overrides):
    cfg, task, weights = setup
    model = build_model(cfg.model, task.tokenizer)
    model.load_state_dict(weights)
    log = MetricsLog()
    torch.manual_seed(0)
    gcfg = dataclasses.replace(cfg.grpo, eval_every=10**6, **overrides)
    train_grpo(model, task, gcfg, TrainContext(log=log, steps=steps, max_grad_norm=max_grad_norm, show_progress=False),
               generator=torch.Generator().manual_seed(1), eval_fn=lambda m: {"accuracy": 0.0})
    return torch.cat([p.detach().flatten() for p in model.parameters()]), [r["reward_mean"] for r in log.rows]


def test_clip_higher_alone_changes_nothing_at_mu_1(setup):
    base, r_base = _grpo(setup)
    high, r_high = _grpo(setup, epsilon_high=0.28)
    assert r_base == r_high and torch.equal(base, high)


def test_adamw_cancels_a_constant_advantage_factor_on_the_tiny_gpt(setup):
    """RLOO = G/(G−1) × Dr. GRPO advantages, same unit, no clipping: the same samples at every step.

    Parameters agree up to Adam's ε (weights whose gradient is near 1e-8 feel the factor)."""
    cfg, _, _ = setup
    rloo, r_rloo = _grpo(setup, steps=4, max_grad_norm=1e9, advantage="rloo", unit="sequence_mean")
    dr, r_dr = _grpo(setup, steps=4, max_grad_norm=1e9, advantage="dr_grpo", unit="sequence_mean")
    assert r_rloo == r_dr
    assert float((rloo - dr).abs().max()) < 0.1 * cfg.grpo.learning_rate


def _adamw_step(advantages: torch.Tensor) -> torch.Tensor:
    """One AdamW step of the surrogate −mean(A_i · log π(y_i)) on a fixed toy log-linear policy."""
    torch.manual_seed(0)
    features = torch.randn(advantages.numel(), 5)
    theta = torch.zeros(5, requires_grad=True)
    opt = torch.optim.AdamW([theta], lr=1e-2, weight_decay=0.0)
    logp = torch.nn.functional.logsigmoid(features @ theta)
    (-(advantages.flatten() * logp).mean()).backward()
    opt.step()
    return theta.detach().clone()


def test_adamw_cancels_a_constant_factor_but_not_per_group_std():
    from course_lib.formulas.advantages import dr_grpo_advantages, grpo_advantages, rloo_advantages

    rewards = torch.tensor([[1.0, 0, 0, 0, 0, 0, 0, 0], [1.0, 1, 1, 1, 0, 0, 0, 0]])  # std 0.33 and 0.5
    step = {name: _adamw_step(fn(rewards)) for name, fn in
            (("rloo", rloo_advantages), ("dr_grpo", dr_grpo_advantages), ("grpo", grpo_advantages))}
    assert torch.allclose(step["rloo"], step["dr_grpo"], rtol=1e-5, atol=1e-9)
    assert not torch.allclose(step["grpo"], step["dr_grpo"], rtol=1e-2)
    # under SGD the same constant factor is a larger step: exactly G/(G − 1) = 8/7
    sgd = {}
    for name, fn in (("rloo", rloo_advantages), ("dr_grpo", dr_grpo_advantages)):
        torch.manual_seed(0)
        features = torch.randn(16, 5)
        theta = torch.zeros(5, requires_grad=True)
        (-(fn(rewards).flatten() * torch.nn.functional.logsigmoid(features @ theta)).mean()).backward()
        sgd[name] = theta.grad.clone()
    assert torch.allclose(sgd["rloo"], 8 / 7 * sgd["dr_grpo"], rtol=1e-5)


def test_cli_rft_control_end_to_end(tmp_path):
    import json

    from course_lib.__main__ import main
    from course_lib.run.pipeline import run

    out = tmp_path / "grpo"
    code = main(["train", "grpo", "--config", "test", "--out", str(out), "--steps", "2", "--control", "rft",
                 "--no-progress"])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["control"] == "rft" and 0 <= summary["control_accuracy"] <= 1
    with pytest.raises(ValueError, match="GRPO's control"):
        run("dpo", get_config("test"), tmp_path / "dpo", steps=1, control="rft", show_progress=False, verbose=False)
    with pytest.raises(ValueError, match="control must be one of"):
        run("grpo", get_config("test"), tmp_path / "x", steps=1, control="more", show_progress=False, verbose=False)
