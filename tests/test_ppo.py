"""PPO with a learned critic: GAE against a direct sum, the clipped value loss by hand, causal
per-token values, measured memory of the extra model, and a short end-to-end run."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from course_lib.formulas.advantages import gae, whiten
from course_lib.formulas.policy_loss import clipped_value_loss
from course_lib.tinygpt.model import build_model
from course_lib.tinygpt.runtime import MetricsLog
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import PPOConfig, get_config
from course_lib.trainers.ppo import build_critic, critic_passport, persistent_bytes, token_values, train_ppo
from course_lib.trainers.trainer import TrainContext

torch.set_num_threads(1)


def gae_by_definition(r, v, mask, gamma, lam):
    """Â_t = Σ_l (γλ)^l δ_{t+l} written as the double sum, V past the last real token = 0."""
    n, t_max = r.shape
    out = torch.zeros_like(r)
    for i in range(n):
        length = int(mask[i].sum())
        vv = list(v[i, :length]) + [0.0]
        deltas = [r[i, t] + gamma * vv[t + 1] - vv[t] for t in range(length)]
        for t in range(length):
            out[i, t] = sum((gamma * lam) ** k * deltas[t + k] for k in range(length - t))
    return out


@pytest.mark.parametrize("gamma,lam", [(1.0, 0.95), (0.9, 0.5), (1.0, 1.0), (1.0, 0.0)])
def test_gae_matches_its_definition(gamma, lam):
    g = torch.Generator().manual_seed(0)
    r, v = torch.randn(4, 5, generator=g, dtype=torch.float64), torch.randn(4, 5, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 0]])
    adv, ret = gae(r, v, mask, gamma=gamma, lam=lam)
    assert torch.allclose(adv, gae_by_definition(r, v, mask, gamma, lam))
    assert torch.allclose(ret, (adv + v) * mask)
    assert bool((adv[mask == 0] == 0).all())


def test_gae_limits_by_hand():
    # one completion of 3 tokens, reward 1 at the end, values 0.2, 0.5, 0.9
    r = torch.tensor([[0.0, 0.0, 1.0]])
    v = torch.tensor([[0.2, 0.5, 0.9]])
    m = torch.ones(1, 3)
    mc, _ = gae(r, v, m, gamma=1.0, lam=1.0)  # Monte Carlo: return 1 minus V_t
    assert torch.allclose(mc, torch.tensor([[0.8, 0.5, 0.1]]))
    td, _ = gae(r, v, m, gamma=1.0, lam=0.0)  # one-step TD errors
    assert torch.allclose(td, torch.tensor([[0.3, 0.4, 0.1]]))
    with pytest.raises(ValueError, match="gamma and lam"):
        gae(r, v, m, gamma=1.0, lam=1.5)
    with pytest.raises(ValueError, match="same|share"):
        gae(r, v[:, :2], m, gamma=1.0, lam=1.0)


def test_clipped_value_loss_by_hand_and_its_gradient():
    old = torch.tensor([0.0, 0.0, 0.0])
    new = torch.tensor([0.5, 0.1, -0.5], requires_grad=True)
    ret = torch.tensor([1.0, 1.0, 1.0])
    loss, clipped = clipped_value_loss(new, old, ret, 0.2)
    # 0.5: unclipped (0.5−1)² = 0.25, clipped (0.2−1)² = 0.64 → ½·0.64, clip active, no gradient
    # 0.1: inside the interval → ½·0.81; −0.5: clipped value −0.2 is closer, unclipped 2.25 wins
    assert torch.allclose(loss, torch.tensor([0.32, 0.405, 1.125]))
    assert clipped.tolist() == [True, False, False]
    loss.sum().backward()
    assert torch.allclose(new.grad, torch.tensor([0.0, -0.9, -1.5]))
    with pytest.raises(ValueError, match="cliprange_value"):
        clipped_value_loss(new, old, ret, 0.0)


def test_whiten_uses_real_tokens_only():
    x = torch.tensor([[1.0, 2.0, 100.0], [3.0, 4.0, -7.0]])
    m = torch.tensor([[1, 1, 0], [1, 1, 0]])
    w = whiten(x, m)
    real = w[m.bool()]
    assert real.mean().abs() < 1e-6 and (real.pow(2).mean() - 1).abs() < 1e-4
    assert bool((w[~m.bool()] == 0).all())


@pytest.fixture(scope="module")
def tiny():
    cfg = get_config("test")
    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    policy = build_model(cfg.model, task.tokenizer)
    return cfg, task, policy


def test_values_are_causal_and_aligned_with_logprobs(tiny):
    cfg, task, policy = tiny
    critic = build_critic(policy, task.tokenizer)
    ids = torch.cat([task.encode_prompts([(3, 4), (3, 4)]), torch.tensor([[10, 2], [11, 2]])], 1)
    attn = torch.ones_like(ids)
    with torch.no_grad():
        v = token_values(critic, ids, attn)
    assert v.shape == (2, ids.shape[1] - 1)
    p = task.prompt_length
    # entry p-1 is the state *before* the first completion token: identical for both rows
    assert torch.allclose(v[0, : p], v[1, : p])
    assert not torch.allclose(v[0, p], v[1, p])


def test_ppo_learns_a_simple_reward_and_measures_the_critic(tiny):
    cfg, task, policy = tiny
    policy = build_model(cfg.model, task.tokenizer)
    policy.load_state_dict(tiny[2].state_dict())
    critic = build_critic(policy, task.tokenizer)

    def short(pairs, completions):  # reward: stop at once (first token <eos>)
        return (completions[:, 0] == task.tokenizer.eos_token_id).float()

    pc = PPOConfig(steps=12, batch_prompts=32, max_completion_length=4, eval_every=6, learning_rate=3e-3,
                   critic_learning_rate=3e-3, kl_coef=0.05)
    log = MetricsLog()
    res = train_ppo(policy, critic, task, pc, short, TrainContext(log=log, show_progress=False),
                    generator=torch.Generator().manual_seed(1), gold_fn=short)
    rows = log.rows
    assert all(r["gold_mean"] == r["reward_mean"] for r in rows)  # the gold opinion is taken on the very same samples
    first = sum(r["reward_mean"] for r in rows[:3]) / 3
    last = sum(r["reward_mean"] for r in rows[-3:]) / 3
    assert last > first + 0.2, (first, last)
    assert {"value_loss", "value_clip_fraction", "clip_fraction", "kl_sequence", "explained_variance",
            "accuracy"} <= set().union(*rows)
    assert "kl" not in set().union(*rows)  # GRPO's kl is k3 per token: another quantity, another name
    assert rows[-1]["kl_sequence"] is not None and rows[-1]["kl_sequence"] > 0
    mem = res["memory"]
    n = sum(p.numel() for p in critic.parameters())
    # the critic holds fp32 weights + grads + AdamW's two moments: 16 bytes per parameter (+ step counters)
    assert mem["critic"]["weights"] == 4 * n and mem["critic"]["grads"] == 4 * n
    assert 8 * n <= mem["critic"]["optimizer"] <= 8 * n + 8 * len(list(critic.parameters()))
    assert mem["reference"]["grads"] == 0 and mem["reference"]["optimizer"] == 0
    assert persistent_bytes(critic)["total"] == mem["critic"]["weights"] + mem["critic"]["grads"]
    entry = critic_passport(pc, mem)
    assert "GAE(gamma=1.0, lambda=0.95)" in entry["advantages"] and "kl_coef=0.05" in entry["kl"]
    assert f"critic {mem['critic']['total'] / 2**20:.2f} MiB" in entry["memory"]


@pytest.mark.parametrize("field,value", [("lam", 1.5), ("gamma", -0.1), ("cliprange", 1.0), ("cliprange_value", 0.0),
                                         ("num_ppo_epochs", 0), ("kl_coef", -1.0), ("batch_prompts", 0)])
def test_bad_ppo_options_are_named(field, value):
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(PPOConfig(), **{field: value})  # the config checks itself


@pytest.mark.slow
def test_cli_train_rm_then_ppo_and_grpo_against_it(tmp_path, capsys):
    from course_lib.__main__ import main

    rm_dir, ppo_dir, grpo_dir = tmp_path / "rm", tmp_path / "ppo", tmp_path / "grpo"
    assert main(["train", "rm", "--config", "test", "--out", str(rm_dir), "--no-progress", "--noise", "0.2"]) == 0
    summary = json.loads((rm_dir / "summary.json").read_text())
    rm_entry = summary["passport"]["reward_model"]
    assert set(rm_entry) == {"data", "labelling_rule", "noise", "model", "accuracy"} and "0.2" in rm_entry["noise"]
    assert summary["reward_model"]["noise"] == 0.2 and 0 < summary["reward_model"]["noise_ceiling"] <= 1
    assert main(["train", "ppo", "--config", "test", "--out", str(ppo_dir), "--no-progress",
                 "--reward", f"rm:{rm_dir}", "--kl-coef", "0.05", "--sft-checkpoint", str(rm_dir / "sft.pt")]) == 0
    summary = json.loads((ppo_dir / "summary.json").read_text())
    assert summary["passport"]["reward_model"] == rm_entry  # the reward model's entry travels with the run
    assert "GAE(gamma=1.0, lambda=0.95)" in summary["passport"]["critic"]["advantages"]
    assert summary["memory"]["critic"]["total"] > 0 and len(_lines(ppo_dir / "metrics.jsonl")) == 4
    assert main(["train", "grpo", "--config", "test", "--out", str(grpo_dir), "--no-progress",
                 "--reward", f"rm:{rm_dir}", "--steps", "2", "--sft-checkpoint", str(rm_dir / "sft.pt")]) == 0
    passport = json.loads((grpo_dir / "summary.json").read_text())["passport"]
    assert "learned reward model" in passport["reward_contract"]["source"]
    capsys.readouterr()
    assert main(["train", "ppo", "--config", "test", "--out", str(tmp_path / "bad"),
                 "--reward", f"rm:{tmp_path / 'nope'}"]) == 2
    assert "reward model directory" in capsys.readouterr().err
    assert not (tmp_path / "bad" / "sft.pt").exists()  # it failed before training anything


def _lines(path):
    return path.read_text().splitlines()


def test_no_vf_coef_because_a_weight_on_the_separate_critics_loss_cancels(tiny, monkeypatch):
    """TRL's vf_coef weights the value loss; with a separate critic under its own AdamW the weight cancels
    (Adam divides by the gradient's own scale), so the option is not offered: the critic's step is set by
    critic_learning_rate. Checked: a 10× weight changes the critic's step by under 2% of its size."""
    import dataclasses as dc

    from course_lib.trainers import ppo

    assert "vf_coef" not in {f.name for f in dc.fields(PPOConfig)}
    with pytest.raises(TypeError, match="vf_coef"):
        PPOConfig(vf_coef=1.0)
    cfg, task, policy = tiny
    pc = PPOConfig(steps=1, batch_prompts=8, max_completion_length=4)
    original = ppo.clipped_value_loss
    moves = {}
    for weight in (1.0, 10.0):
        monkeypatch.setattr(ppo, "clipped_value_loss",
                            lambda *a, w=weight: (lambda loss, c: (w * loss, c))(*original(*a)))
        torch.manual_seed(0)
        pol = build_model(cfg.model, task.tokenizer)
        pol.load_state_dict(policy.state_dict())
        critic = build_critic(pol, task.tokenizer)
        before = torch.cat([p.detach().flatten().clone() for p in critic.parameters()])
        train_ppo(pol, critic, task, pc, lambda pairs, c: (c[:, 0] == task.tokenizer.eos_token_id).float(),
                  TrainContext(show_progress=False, max_grad_norm=1e9), generator=torch.Generator().manual_seed(1))
        moves[weight] = torch.cat([p.detach().flatten() for p in critic.parameters()]) - before
    assert moves[1.0].abs().max() > 1e-5
    assert float((moves[10.0] - moves[1.0]).norm() / moves[1.0].norm()) < 0.02  # measured 0.8%; SGD: 900%
