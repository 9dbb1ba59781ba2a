"""The learned reward model: data and labels, accuracy against the noise ceiling, calibration,
best-of-N, and save/load with clear errors for bad directories and mismatched tokenizers."""

from __future__ import annotations

import itertools
import json
import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import GPT2ForSequenceClassification

from course_lib.formulas.preference import reward_model_loss
from course_lib.tinygpt.model import build_model
from course_lib.tinygpt.rewards import resolve_reward
from course_lib.tinygpt.task import AdditionTask, CharTokenizer
from course_lib.trainers.configs import RewardModelConfig, get_config
from course_lib.trainers.reward_model import (
    best_of_n_curve,
    best_of_n_exact_kl,
    best_of_n_kl,
    build_reward_model,
    calibration,
    empirical_best_of_n_kl,
    fit_reward_model,
    load_reward,
    load_reward_model,
    over_optimisation,
    pairwise_accuracy,
    passport_fields,
    preference_data,
    sample_ids,
    save_reward_model,
)
from course_lib.trainers.sft import train_sft
from course_lib.trainers.trainer import TrainContext

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup():
    cfg = get_config("test")
    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    policy = build_model(cfg.model, task.tokenizer)
    train_sft(policy, task, cfg.sft, TrainContext(steps=150, show_progress=False), seed=0, eval_at_end=False)
    return cfg, task, policy


RM_TEST = dict(pair_prompts=64, heldout_prompts=30, samples_per_prompt=8, max_completion_length=4, temperature=1.5,
               steps=30, batch_size=16, eval_every=15)


class GoldScorer(torch.nn.Module):
    """Scores a sequence +gap when the strict checker accepts it, −gap otherwise (a perfect proxy)."""

    def __init__(self, task, gap=20.0):
        super().__init__()
        self.task, self.gap = task, gap
        self.dummy = torch.nn.Parameter(torch.zeros(()))
        self.config = SimpleNamespace(pad_token_id=task.tokenizer.pad_token_id)

    def forward(self, input_ids, attention_mask):
        p = self.task.prompt_length
        out = []
        for row in input_ids:
            pair = self.task.parse_prompt("".join(self.task.tokenizer.convert_ids_to_tokens(row[1:p].tolist())))
            out.append(self.gap if self.task.strict_reward(pair, row[p:]) else -self.gap)
        return SimpleNamespace(logits=torch.tensor(out)[:, None])


def test_reward_model_is_trls_class_with_one_label_and_starts_from_the_policy(setup):
    cfg, task, policy = setup
    rm = build_reward_model(cfg.model, task.tokenizer, policy)
    assert isinstance(rm, GPT2ForSequenceClassification) and rm.config.num_labels == 1
    for (name, a), b in zip(rm.transformer.state_dict().items(), policy.transformer.state_dict().values()):
        assert torch.equal(a, b), name


def test_labels_are_gold_then_flipped_with_the_noise_rate(setup):
    _, task, policy = setup
    cfg = RewardModelConfig(**{**RM_TEST, "noise": 0.3, "pair_prompts": 200})
    torch.manual_seed(0)
    data = preference_data(policy, task, task.sample_pairs(200, torch.Generator().manual_seed(3)), cfg,
                           generator=torch.Generator().manual_seed(4))
    p = task.prompt_length
    for i, pair in enumerate(data["pairs"]):  # gold: the strict checker prefers exactly one side
        a_ok = task.strict_reward(pair, data["a_ids"][i, p:])
        b_ok = task.strict_reward(pair, data["b_ids"][i, p:])
        assert a_ok != b_ok and bool(data["gold"][i]) == bool(a_ok)
    assert torch.equal(data["label"], data["gold"] ^ data["flipped"])
    n = data["n_pairs"]
    assert n >= 50 and abs(float(data["flipped"].float().mean()) - 0.3) < 4 * math.sqrt(0.3 * 0.7 / n)
    assert 0.2 < float(data["gold"].float().mean()) < 0.8  # the preferred answer is shown first or second at random


def test_a_perfect_proxy_sits_at_the_noise_ceiling_and_is_overconfident_by_the_flip_rate(setup):
    _, task, policy = setup
    cfg = RewardModelConfig(**{**RM_TEST, "noise": 0.2})
    torch.manual_seed(0)
    data = preference_data(policy, task, task.sample_pairs(200, torch.Generator().manual_seed(5)), cfg,
                           generator=torch.Generator().manual_seed(6))
    acc = pairwise_accuracy(GoldScorer(task), data)
    assert acc["gold_accuracy"] == 1.0
    assert acc["accuracy"] == pytest.approx(acc["ceiling"]) and acc["of_ceiling"] == pytest.approx(1.0)
    assert acc["ceiling"] == pytest.approx(1 - float(data["flipped"].float().mean()))
    cal = calibration(GoldScorer(task), data)  # predicts 0 or 1; observed win rates are 1 − noise and noise
    assert cal["ece"] == pytest.approx(float(data["flipped"].float().mean()), abs=1e-6)
    assert sum(cal["count"]) == data["n_pairs"]


def test_training_lowers_the_reward_model_loss_and_beats_chance(setup):
    _, task, policy = setup
    cfg = RewardModelConfig(**{**RM_TEST, "noise": 0.0, "steps": 60})
    res = fit_reward_model(policy, task, cfg, seed=0)
    log = res["log"]
    assert log[0]["loss"] > log[-1]["loss"]
    assert res["metrics"]["train_pairs"] > 0 and res["metrics"]["noise_ceiling"] == 1.0
    # the logged loss is the library's reward_model_loss (Bradley–Terry), checked on one batch
    assert reward_model_loss(torch.tensor([2.0]),
                             torch.tensor([0.0])).item() == pytest.approx(-math.log(1 / (1 + math.e**-2)))
    assert 0 <= res["metrics"]["ece"] <= 1
    assert {"heldout_accuracy", "heldout_of_ceiling"} <= set(log[-1])


def test_best_of_n_curve_by_hand():
    proxy = torch.tensor([[0.1, 0.9, 0.5, 0.2], [0.3, 0.2, 0.8, 0.7]])
    gold = torch.tensor([[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0]])
    rows = best_of_n_curve(proxy, gold, [1, 2, 4])
    assert rows[0]["gold"] == pytest.approx(gold.mean().item()) and rows[0]["kl"] == 0.0
    # n=2: groups (0.1,0.9)→0 (0.5,0.2)→1 | (0.3,0.2)→0 (0.8,0.7)→1
    assert rows[1]["gold"] == pytest.approx(0.5) and rows[1]["proxy"] == pytest.approx((0.9 + 0.5 + 0.3 + 0.8) / 4)
    assert rows[2]["gold"] == pytest.approx(0.5) and rows[2]["proxy"] == pytest.approx(0.85)
    assert best_of_n_kl(2) == pytest.approx(math.log(2) - 0.5)
    with pytest.raises(ValueError, match="divisor"):
        best_of_n_curve(proxy, gold, [3])
    with pytest.raises(ValueError, match="n must be a positive integer"):
        best_of_n_kl(0)


def brute_force_best_of_n_kl(probs, rewards, n):
    """Enumerate every n-tuple of draws; keep the first draw with the top reward; KL of what is kept."""
    kept = [0.0] * len(probs)
    for draw in itertools.product(range(len(probs)), repeat=n):
        top = max(rewards[i] for i in draw)
        kept[next(i for i in draw if rewards[i] == top)] += math.prod(probs[i] for i in draw)
    return sum(q * math.log(q / p) for q, p in zip(kept, probs) if q > 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 9), st.integers(0, 3)), min_size=1, max_size=5), st.integers(1, 4))
def test_exact_best_of_n_kl_matches_brute_force_enumeration(outcomes, n):
    # small rewards from {0..3}: ties between distinct outcomes are common
    weights, rewards = [w for w, _ in outcomes], [float(r) for _, r in outcomes]
    probs = [w / sum(weights) for w in weights]
    exact = best_of_n_exact_kl(probs, rewards, n)
    assert exact == pytest.approx(brute_force_best_of_n_kl(probs, rewards, n), abs=1e-9)
    assert -1e-12 <= exact <= best_of_n_kl(n) + 1e-12  # the closed form bounds it


def test_exact_best_of_n_kl_tends_to_the_closed_form_for_distinct_samples():
    for n in (2, 4, 16, 64):
        gaps = []
        for m in (100, 1_000, 100_000):  # m equally likely outcomes, all rewards distinct
            exact = best_of_n_exact_kl(torch.full((m,), 1 / m), torch.arange(m), n)
            gaps.append(best_of_n_kl(n) - exact)
        assert all(g > 0 for g in gaps) and gaps[0] > gaps[1] > gaps[2]  # below the bound, closing in
        assert gaps[-1] < 1e-2 * max(best_of_n_kl(n), 1)
    # one outcome (every answer the same): best-of-n is the base, KL 0 whatever n
    assert best_of_n_exact_kl([1.0], [0.3], 64) == 0.0
    # two outcomes, p = (1/2, 1/2), reward favours the second: best-of-2 puts 3/4 on it
    assert best_of_n_exact_kl([0.5, 0.5], [0.0, 1.0], 2) == pytest.approx(0.25 * math.log(0.5) + 0.75 * math.log(1.5))
    with pytest.raises(ValueError, match="probs must be non-negative and sum to 1"):
        best_of_n_exact_kl([0.5, 0.4], [0.0, 1.0], 2)
    with pytest.raises(ValueError, match="same length"):
        best_of_n_exact_kl([1.0], [0.0, 1.0], 2)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        best_of_n_exact_kl([1.0], [0.0], 0)


def test_empirical_best_of_n_kl_counts_repeated_samples():
    task = AdditionTask(get_config("test").task)
    vocab = task.tokenizer.get_vocab()
    # four samples of one prompt, as token ids: "12", "13", "12", "12"
    texts = ["12", "13", "12", "12"]
    comps = torch.tensor([[vocab[c] for c in t] + [task.tokenizer.eos_token_id] for t in texts])
    ids = sample_ids(task, comps, 4)
    assert ids.tolist() == [[0, 1, 0, 0]]
    proxy = torch.tensor([[0.2, 0.9, 0.2, 0.2]])
    # base (3/4 on "12", 1/4 on "13"), "13" scores higher: exact KL of that two-outcome distribution
    assert empirical_best_of_n_kl(proxy, ids, 2) == pytest.approx(best_of_n_exact_kl([0.75, 0.25], [0.2, 0.9], 2))
    rows = best_of_n_curve(proxy, torch.ones(1, 4), [1, 2, 4], ids=ids)
    assert [r["kl"] for r in rows] == pytest.approx([0.0]
                                                    + [best_of_n_exact_kl([0.75, 0.25], [0.2, 0.9], n)
                                                       for n in (2, 4)])
    assert all(r["kl"] < r["kl_bound"] for r in rows[1:])
    with pytest.raises(ValueError, match="k must divide"):
        sample_ids(task, comps, 3)


def test_over_optimisation_reads_moving_means_and_names_the_shape():
    def rows(golds):
        return [{"step": i + 1, "proxy": 0.1 * i, "gold": g, "kl": 0.01 * i * i} for i, g in enumerate(golds)]

    up_down = over_optimisation(rows([0.5, 0.5, 0.6, 0.7, 0.7, 0.6, 0.4, 0.3]), window=2)
    # moving means of 2: 0.5 0.55 0.65 0.7 0.65 0.5 0.35; peak 0.7 from steps 4–5 (reported at step 5)
    assert up_down["gold_start"] == pytest.approx(0.5) and up_down["gold_peak"] == pytest.approx(0.7)
    assert (up_down["gold_end"] == pytest.approx(0.35) and up_down["peak_step"] == 5
            and up_down["shape"] == "rises then falls")
    assert up_down["sqrt_kl_peak"] == pytest.approx(math.sqrt((0.09 + 0.16) / 2))
    assert up_down["proxy_end"] - up_down["proxy_start"] == pytest.approx(0.6)
    assert over_optimisation(rows([0.6, 0.55, 0.5, 0.4]), window=1)["shape"] == "falls"
    assert over_optimisation(rows([0.4, 0.45, 0.5, 0.6]), window=1)["shape"] == "rises"
    # moves within tol do not count
    assert over_optimisation(rows([0.5, 0.51, 0.5, 0.49]), window=1)["shape"] == "flat"
    with pytest.raises(ValueError, match="window"):
        over_optimisation(rows([0.5, 0.5]), window=3)


def test_save_load_roundtrip_and_batched_reward(setup, tmp_path):
    cfg, task, policy = setup
    rcfg = RewardModelConfig(**RM_TEST)
    torch.manual_seed(1)
    rm = build_reward_model(cfg.model, task.tokenizer, policy)
    save_reward_model(rm, task.tokenizer, tmp_path / "rm", task_config=task.config, cfg=rcfg,
                      metrics={"heldout_accuracy": 0.5})
    info = json.loads((tmp_path / "rm" / "reward_model.json").read_text())
    assert info["noise"] == rcfg.noise and "strict checker" in info["labelling_rule"]
    metrics = {"train_pairs": 10, "train_prompts": 64, "heldout_pairs": 5, "train_flipped": 0.1,
               "heldout_accuracy": 0.8,
               "of_ceiling": 0.8 / 0.9, "noise_ceiling": 0.9, "heldout_gold_accuracy": 0.85, "ece": 0.05}
    entry = passport_fields({**info, "metrics": metrics})
    assert set(entry) == {"data", "labelling_rule", "noise", "model", "accuracy"}
    assert "88.9% of the noise ceiling 90.0%" in entry["accuracy"] and str(rcfg.noise) in entry["noise"]
    reward = load_reward(tmp_path / "rm", task)
    pairs = task.sample_pairs(5, torch.Generator().manual_seed(0))
    comps = torch.tensor([[4, 5, 2, 0]] * 5)  # "12<eos><pad>" (pad 0, bos 1, eos 2, "0" 3, …)
    out = reward(pairs, comps)
    assert out.shape == (5,) and out.dtype == torch.float32
    ids = torch.cat([task.encode_prompts(pairs), comps], 1)
    with torch.no_grad():
        expected = rm(input_ids=ids, attention_mask=(ids != 0).long()).logits.squeeze(-1)
    assert torch.allclose(out, expected, atol=1e-5)
    gold = resolve_reward("strict", task)(pairs, comps)
    assert gold.tolist() == [float(a + b == 12) for a, b in pairs]


def test_bad_reward_model_directories_and_mismatched_tokenizers_are_named(setup, tmp_path):
    cfg, task, policy = setup
    with pytest.raises(ValueError, match="does not exist"):
        load_reward(tmp_path / "nope", task)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="reward_model.json is missing"):
        load_reward(tmp_path / "empty", task)
    rm = build_reward_model(cfg.model, task.tokenizer, policy)
    d = save_reward_model(rm, task.tokenizer, tmp_path / "rm", task_config=task.config, cfg=RewardModelConfig(),
                          metrics={})
    other_vocab = tmp_path / "vocab.json"
    tokens = list(CharTokenizer().get_vocab())
    tokens[3], tokens[4] = tokens[4], tokens[3]  # '0' and '1' swapped: same characters, other ids
    other_vocab.write_text(json.dumps({t: i for i, t in enumerate(tokens)}))
    with pytest.raises(ValueError, match="tokenizer mismatch"):
        load_reward_model(d, CharTokenizer(vocab_file=str(other_vocab)))
    wider = AdditionTask(get_config("cpu").task)
    with pytest.raises(ValueError, match="2-digit addition|digits=2"):
        load_reward(d, wider)
    info = json.loads((d / "reward_model.json").read_text())
    (d / "reward_model.json").write_text(json.dumps({**info, "format": "something-else"}))
    with pytest.raises(ValueError, match="format"):
        load_reward(d, task)
    (d / "reward_model.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_reward(d, task)
    (d / "reward_model.json").write_text(json.dumps(info))
    (d / "config.json").unlink()
    with pytest.raises(ValueError, match="config.json"):
        load_reward(d, task)


@pytest.mark.parametrize("field,value,match", [
    ("noise", 0.5, "noise"), ("samples_per_prompt", 1, "samples_per_prompt"), ("init", "random", "init"),
    ("steps", -1, "steps"), ("pairs_per_prompt", 0, "pairs_per_prompt"),
])
def test_bad_reward_model_options(field, value, match):
    with pytest.raises(ValueError, match=match):
        RewardModelConfig(**{field: value})  # the config checks itself


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=8), max_size=6), st.integers(1, 4))
def test_one_pairing_rule_for_dpo_the_reward_model_and_the_lab(accepted, per_prompt):
    from course_lib.trainers.dpo import select_pairs

    picked = select_pairs(accepted, per_prompt)
    for i, row in enumerate(accepted):
        mine = [(g, b) for p, g, b in picked if p == i]
        assert len(mine) == min(sum(row), len(row) - sum(row), per_prompt)
        assert all(row[g] and not row[b] for g, b in mine)
        used = [x for pair in mine for x in pair]
        assert len(used) == len(set(used))  # no sample in two pairs
