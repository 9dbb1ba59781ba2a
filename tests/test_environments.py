"""Environments (course_lib.tinygpt.environments): the calculator episode, its rules, and the policy mask."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.tinygpt.environments import TOOL_CHARS, CalculatorEnv, EpisodeLimits, make_env, run_episode
from course_lib.tinygpt.task import CHARS, AdditionTask, CharTokenizer, TaskConfig

TOK = CharTokenizer(extra_chars=TOOL_CHARS)
TASK = AdditionTask(TaskConfig(digits=2, n_demos=10, n_heldout=10), tokenizer=TOK)


def scripted(*turns):
    """A policy that writes the given turns in order (text, '<eos>' for end of sequence)."""
    queue = list(turns)

    def policy(ids, budget):
        return TOK.convert_tokens_to_ids(TOK.tokenize(queue.pop(0)) if queue else [])

    return policy


def text(ids):
    return TOK.convert_tokens_to_string(TOK.convert_ids_to_tokens(ids))


def policy_text(episode):
    return text([t for t, m in zip(episode.ids, episode.policy_mask) if m])


def test_the_worked_example_a_call_for_the_ones_column_then_the_answer():
    env = CalculatorEnv(TASK)
    episode = run_episode(env, (37, 45), scripted("[7+5]", "82<eos>"), TOK)
    assert text(episode.ids) == "<bos>37+45=[7+5]1282<eos>"
    assert policy_text(episode) == "[7+5]82<eos>", "the mask covers exactly what the policy wrote"
    assert episode.reward == 1.0 and episode.turns == 2
    assert episode.info["tool_calls"] == 1 and episode.info["tool_errors"] == 0


def test_without_a_tool_call_an_episode_is_the_single_turn_rollout():
    env = CalculatorEnv(TASK)
    episode = run_episode(env, (37, 45), scripted("82<eos>"), TOK)
    ids, _, completion = TASK.encode_pairs([(37, 45)], ["82"])
    n = len(episode.ids)
    assert episode.ids == ids[0, :n].tolist() and episode.policy_mask == completion[0, :n].tolist()
    assert episode.reward == float(TASK.strict_reward((37, 45), ids[0, TASK.prompt_length:].tolist()))


def test_a_malformed_call_gets_the_error_observation_and_is_counted():
    episode = run_episode(CalculatorEnv(TASK), (37, 45), scripted("[7+]", "82<eos>"), TOK)
    assert text(episode.ids) == "<bos>37+45=[7+]!82<eos>"
    assert episode.info["tool_errors"] == 1 and episode.reward == 1.0


def test_a_policy_that_calls_forever_is_cut_at_the_call_limit():
    env = CalculatorEnv(TASK, EpisodeLimits(max_tool_calls=2, max_tokens=64))
    episode = run_episode(env, (37, 45), scripted(*["[1+1]"] * 10), TOK)
    assert episode.info["stopped"] == "tool-call limit" and episode.reward == 0.0
    assert episode.info["tool_calls"] == 3 and episode.turns == 3


def test_a_policy_that_never_answers_is_cut_at_the_token_limit():
    env = CalculatorEnv(TASK, EpisodeLimits(max_tool_calls=2, max_tokens=6))
    episode = run_episode(env, (37, 45), scripted("1234567890"), TOK)
    assert episode.policy_tokens == 6 and episode.reward == 0.0 and episode.info["stopped"] == "token limit"
    long_calls = run_episode(env, (37, 45), scripted("[7+5]", "[9+9]", "8"), TOK)
    assert len(long_calls.ids) - TASK.prompt_length == 6 and long_calls.info["stopped"] == "token limit"


def test_an_environment_that_raises_ends_its_episode_with_reward_zero():
    class Broken(CalculatorEnv):
        def step(self, turn):
            raise KeyError("the tool's server is down")

    episode = run_episode(Broken(TASK), (37, 45), scripted("[7+5]"), TOK)
    assert episode.reward == 0.0 and "KeyError" in episode.info["error"]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 99), st.integers(0, 99),
       st.lists(st.tuples(st.integers(0, 9999), st.integers(0, 9999)), max_size=3), st.booleans())
def test_the_mask_is_exactly_the_policys_tokens(a, b, calls, right):
    turns = [f"[{x}+{y}]" for x, y in calls] + [f"{a + b if right else a + b + 1}<eos>"]
    env = CalculatorEnv(TASK, EpisodeLimits(max_tool_calls=3, max_tokens=64))
    episode = run_episode(env, (a, b), scripted(*turns), TOK)
    assert policy_text(episode) == "".join(turns)
    env_text = text([t for t, m in zip(episode.ids[TASK.prompt_length:], episode.policy_mask[TASK.prompt_length:])
                     if not m])
    assert env_text == "".join(str(x + y) if max(x, y) < 1000 else "!" for x, y in calls)
    assert episode.reward == float(right)


def test_extra_characters_keep_every_other_id():
    plain = CharTokenizer()
    assert {t: TOK.get_vocab()[t] for t in plain.get_vocab()} == plain.get_vocab()
    assert TOK.vocab_size == plain.vocab_size + len(TOOL_CHARS)
    with pytest.raises(ValueError, match="outside"):
        plain.tokenize("[1+1]")
    with pytest.raises(ValueError, match="extra_chars must be new"):
        CharTokenizer(extra_chars="+")
    assert CHARS not in TOOL_CHARS


@pytest.mark.parametrize("call, match", [
    (lambda: make_env("browser", TASK), "env must be one of 'calculator'"),
    (lambda: EpisodeLimits(max_tool_calls=-1), "max_tool_calls must be an integer >= 0"),
    (lambda: EpisodeLimits(max_tokens=0), "max_tokens must be an integer >= 1"),
    (lambda: CalculatorEnv(TASK).step("[1+1]"), "before reset"),
])
def test_bad_input_is_refused_with_what_is_accepted(call, match):
    with pytest.raises((ValueError, RuntimeError), match=match):
        call()


def test_episodes_batch_with_the_policy_mask_as_the_completion_mask():
    from course_lib.tinygpt.environments import episode_batch

    env = CalculatorEnv(TASK)
    with_tool = run_episode(env, (37, 45), scripted("[7+5]", "82<eos>"), TOK)
    plain = run_episode(env, (37, 45), scripted("82<eos>"), TOK)
    batch = episode_batch([with_tool, plain], TOK.pad_token_id)
    assert batch["input_ids"].shape == (2, len(with_tool.ids))
    assert batch["completion_mask"][0].tolist() == with_tool.policy_mask
    ids, attention, completion = TASK.encode_pairs([(37, 45)], ["82"])
    n = len(plain.ids)
    assert batch["input_ids"][1, :n].tolist() == ids[0, :n].tolist()
    assert batch["completion_mask"][1].tolist()[:n] == completion[0, :n].tolist()
    assert batch["attention_mask"][1].sum() == n and batch["completion_mask"][1, n:].sum() == 0
    with pytest.raises(ValueError, match="at least one episode"):
        episode_batch([], TOK.pad_token_id)


def test_a_model_plays_an_episode_within_the_limits():
    import torch

    from course_lib.tinygpt.environments import model_policy
    from course_lib.tinygpt.model import build_model
    from course_lib.trainers.configs import get_config

    torch.manual_seed(0)
    model = build_model(get_config("test").model, TOK)
    env = CalculatorEnv(TASK, EpisodeLimits(max_tool_calls=1, max_tokens=12))
    for seed in range(4):
        episode = run_episode(env, (37, 45), model_policy(model, TOK, generator=torch.Generator().manual_seed(seed)),
                              TOK)
        assert len(episode.ids) - TASK.prompt_length <= 12 and episode.turns >= 1
        assert all(m == 0 for m in episode.policy_mask[: TASK.prompt_length])
        written = [t for t, m in zip(episode.ids, episode.policy_mask) if m]
        assert TOK.pad_token_id not in written and TOK.bos_token_id not in written


# ---- the environment in the trainers: the batched driver, the task, GRPO, evaluation -----------------
import dataclasses  # noqa: E402

import torch  # noqa: E402

from course_lib.tinygpt.environments import (  # noqa: E402
    ENVIRONMENTS,
    EnvTask,
    EpisodeDriver,
    episode_batch,
    episode_stats,
    model_policy,
)
from course_lib.tinygpt.evaluation import evaluate  # noqa: E402
from course_lib.tinygpt.model import build_model  # noqa: E402
from course_lib.tinygpt.rollout import generate  # noqa: E402
from course_lib.trainers.configs import get_config  # noqa: E402
from course_lib.trainers.sft import train_sft  # noqa: E402
from course_lib.trainers.trainer import TrainContext  # noqa: E402

TEST = get_config("test")
ENV_TASK_CONFIG = dataclasses.replace(TEST.task, env="calculator", tool_demos=10)


@pytest.fixture(scope="module")
def tool_sft():
    """The test config's SFT policy on the calculator task (tool demonstrations included): ~2 s."""
    task = EnvTask(ENV_TASK_CONFIG)
    torch.manual_seed(0)
    model = build_model(TEST.model, task.tokenizer)
    train_sft(model, task, dataclasses.replace(TEST.sft, steps=150), TrainContext(show_progress=False, threads=None),
              generator=torch.Generator().manual_seed(0), eval_at_end=False)
    return task, model.eval()


def test_tool_demonstrations_call_for_the_ones_column_and_mask_the_tools_answer():
    task, plain = EnvTask(ENV_TASK_CONFIG), AdditionTask(TEST.task)
    ids, attn, cmask = task.demonstrations()
    carry = [i for i, p in enumerate(task.demo_pairs) if task.ones_carry(*p)]
    assert task.tool_demo_index == carry[:10] and len(carry) > 10
    i = task.tool_demo_index[0]
    a, b = task.demo_pairs[i]
    n = int(attn[i].sum())
    assert text(ids[i, :n].tolist()) == f"<bos>{a}+{b}=[{a % 10}+{b % 10}]{a % 10 + b % 10}{a + b}<eos>"
    assert policy_text(type("E", (), {"ids": ids[i, :n].tolist(), "policy_mask": cmask[i, :n].tolist()})) == \
        f"[{a % 10}+{b % 10}]{a + b}<eos>", "the tool's answer is context, not a target"
    p_ids, _, p_mask = plain.demonstrations()
    others = [j for j in range(len(task.demo_pairs)) if j not in set(task.tool_demo_index)]
    width = p_ids.shape[1]
    assert torch.equal(ids[others, :width], p_ids[others]) and torch.equal(cmask[others, :width], p_mask[others])
    assert p_ids.max() < CharTokenizer().vocab_size, "ids of the plain task are unchanged"


def test_the_batched_sampler_plays_the_same_episodes_as_run_episode(tool_sft):
    task, model = tool_sft
    pairs = task.heldout_pairs
    roll = generate(model, task.encode_prompts(pairs), task.tokenizer, max_completion_length=task.episode_length,
                    greedy=True, episodes=task.episodes(pairs))
    policy = model_policy(model, task.tokenizer, greedy=True)
    calls = 0
    for row, pair in enumerate(pairs):
        one = run_episode(task.make_env(), pair, policy, task.tokenizer)
        n = len(one.ids)
        assert roll.input_ids[row, :n].tolist() == one.ids
        assert roll.completion_mask[row, :n].tolist() == one.policy_mask
        assert roll.attention_mask[row].sum() == n and roll.completion_mask[row, n:].sum() == 0
        got = roll.episodes[row]
        assert (got["reward"], got["tool_calls"], got["turns"]) == (one.reward, one.info.get("tool_calls", 0),
                                                                    one.turns)
        calls += got["tool_calls"] > 0
    assert calls > 0, "the SFT policy calls the tool on some held-out prompts (else this test shows little)"


def test_evaluation_runs_episodes_and_reports_tool_use_by_carry(tool_sft):
    task, model = tool_sft
    out = evaluate(model, task)
    roll = generate(model, task.encode_prompts(task.heldout_pairs), task.tokenizer,
                    max_completion_length=task.episode_length, greedy=True, episodes=task.episodes(task.heldout_pairs))
    rewards = [e["reward"] for e in roll.episodes]
    assert out["accuracy"] == sum(rewards) / len(rewards)
    carry = [e for e in roll.episodes if e["carry"]]
    assert out["tool_use_carry"] == sum(e["tool_calls"] > 0 for e in carry) / len(carry)
    assert out["accuracy_carry"] == sum(e["reward"] for e in carry) / len(carry)


def test_the_driver_writes_observations_and_counts_an_environment_that_raises():
    class Broken(CalculatorEnv):
        def step(self, turn):
            if turn.endswith("]"):
                raise KeyError("the tool's server is down")
            return super().step(turn)

    pairs = [(37, 45), (37, 45)]
    driver = EpisodeDriver([CalculatorEnv(TASK), Broken(TASK)], pairs, TOK, TASK)
    finished = torch.zeros(2, dtype=torch.bool)
    written = [[], []]
    for char in ["[", "7", "+", "5", "]", "0", "0", "8", "2", "<eos>"]:  # what the sampler draws for both rows
        nxt, forced, ended = driver.step(torch.tensor([TOK.convert_tokens_to_ids(char)] * 2), finished)
        for r in range(2):
            if not finished[r]:
                written[r].append((text([int(nxt[r])]), bool(forced[r])))
        finished |= ended
    assert [c for c, _ in written[0]] == list("[7+5]12") + ["8", "2", "<eos>"]
    assert [f for _, f in written[0]] == [False] * 5 + [True, True] + [False] * 3, "the tool's answer is forced"
    assert [c for c, _ in written[1]] == list("[7+5]"), "the raising environment ends its episode"
    episodes = driver.finish(~finished)
    assert episodes[0]["reward"] == 1.0 and episodes[0]["tool_calls"] == 1 and episodes[0]["tokens"] == 10
    assert episodes[1] == {**episodes[1], "reward": 0.0, "env_error": True, "truncated": False}
    assert episode_stats(episodes)["env_errors"] == 1


def test_episode_stats_on_hand_made_episodes():
    def ep(reward, calls, errors, carry, turns=1, tokens=4):
        return {"reward": reward, "tool_calls": calls, "tool_errors": errors, "turns": turns, "tokens": tokens,
                "carry": carry, "env_error": False, "truncated": False}

    stats = episode_stats([ep(1.0, 1, 0, True, 2, 10), ep(0.0, 2, 1, True, 3, 14), ep(1.0, 0, 0, False),
                           ep(0.0, 0, 0, False)])
    assert stats == {"tool_call_rate": 0.5, "tool_call_rate_carry": 1.0, "tool_call_rate_no_carry": 0.0,
                     "tool_error_rate": 1 / 3, "turns_per_episode": 1.75,
                     "tokens_per_episode": 8.0, "reward_with_tool": 0.5, "reward_without_tool": 0.5,
                     "reward_carry": 0.5, "reward_no_carry": 0.5, "reward_carry_with_tool": 0.5,
                     "reward_carry_without_tool": None, "episodes_carry_with_tool": 2,
                     "episodes_carry_without_tool": 0, "env_errors": 0}
    assert episode_stats([ep(1.0, 0, 0, False)])["tool_error_rate"] is None



def test_process_advantages_credit_each_turn_with_what_it_and_the_later_turns_earned():
    from course_lib.formulas.advantages import grpo_advantages
    from course_lib.tinygpt.environments import process_advantages

    assert process_advantages([[0, 1], [1], [0, 0, 1]]) == [[0.0, 1.0], [1.0], [-1.0, 0.0, 1.0]]
    assert process_advantages([[0.5, 0.5], [0.5]]) == [[0.0, 0.0], [0.0]]  # no relative signal
    # one turn per episode: the per-step advantages are GRPO's advantages of the episodes' rewards
    rewards = [1.0, 0.0, 0.0, 1.0, 0.5]
    single = [row[0] for row in process_advantages([[r] for r in rewards])]
    assert single == pytest.approx(grpo_advantages(rewards).tolist(), abs=1e-12)
    # a step reward earned late reaches every earlier turn of its episode, never another episode's
    late = process_advantages([[0.0, 0.0], [0.0, 1.0]])
    root3 = 3**0.5
    assert late == [pytest.approx([-2 / root3, -1 / root3], abs=1e-12), pytest.approx([2 / root3, root3], abs=1e-12)]


@pytest.mark.parametrize("bad, match", [([[1.0]], "at least 2"), ([[1.0], []], r"step_rewards\[1\]"),
                                        ([[1.0], [float("nan")]], "finite"), ([[1.0], [True]], "finite"),
                                        ("01", "list")])
def test_process_advantages_refuse_bad_input(bad, match):
    from course_lib.tinygpt.environments import process_advantages

    with pytest.raises(ValueError, match=match):
        process_advantages(bad)

def _logit_grads(model, task, cfg, batch):
    """policy_step on ``batch``; the gradient of the loss with respect to the scored logits."""
    from course_lib.tinygpt.runtime import make_optimizer
    from course_lib.trainers.grpo import policy_step

    seen = []

    def keep(_module, _inputs, output):
        output.retain_grad()
        seen.append(output)

    hook = model.lm_head.register_forward_hook(keep)
    ref = build_model(TEST.model, task.tokenizer)
    ref.load_state_dict(model.state_dict())
    try:
        policy_step(model, ref.eval(), make_optimizer(model, 0.0), batch, cfg, prompt_length=task.prompt_length,
                    max_grad_norm=1.0)
    finally:
        hook.remove()
    return seen[-1].grad  # (N, L - prompt_length, vocab): position j predicts token prompt_length + j


@pytest.mark.parametrize("mask_env_tokens", [True, False])
def test_environment_tokens_get_no_loss_and_no_kl(tool_sft, mask_env_tokens):
    import copy

    from course_lib.trainers.grpo import episode_tokens

    task, sft_model = tool_sft
    model = copy.deepcopy(sft_model)
    cfg = dataclasses.replace(TEST.grpo, num_generations=2, beta=0.1, share_prompt=False)
    env = CalculatorEnv(task, EpisodeLimits(max_tokens=task.episode_length))
    with_tool = run_episode(env, (7, 5), scripted("[7+5]", "12<eos>"), task.tokenizer)
    plain = run_episode(env, (7, 5), scripted("13<eos>"), task.tokenizer)
    batch = episode_batch([with_tool, plain], task.tokenizer.pad_token_id)
    batch.update(rewards=torch.tensor([[1.0, 0.0]]), truncated=torch.tensor([False, False]))
    if not mask_env_tokens:
        batch["completion_mask"] = episode_tokens(batch, task.prompt_length)
    grads = _logit_grads(model, task, cfg, batch)
    env_targets = [j for j in range(grads.shape[1]) if batch["attention_mask"][0, task.prompt_length + j]
                   and not with_tool.policy_mask[task.prompt_length + j]]
    assert text([with_tool.ids[task.prompt_length + j] for j in env_targets]) == "12"
    env_grad = grads[0, env_targets].abs().sum()
    assert grads[0].abs().sum() > 0
    if mask_env_tokens:
        assert env_grad == 0, "the logits that predict the tool's answer get no gradient: no log-prob, loss or KL"
    else:
        assert env_grad > 0, "the ablation puts the tool's answer into the loss"


def test_grpo_with_an_environment_that_is_never_called_is_todays_grpo(monkeypatch):
    """Trainer level: same metrics, same weights, when the environment has no tool to call."""
    from course_lib.tinygpt.runtime import MetricsLog
    from course_lib.trainers.grpo import train_grpo

    class AnswerOnly(CalculatorEnv):
        extra_chars, stops = "", ()

    monkeypatch.setitem(ENVIRONMENTS, "answer-only", AnswerOnly)
    tasks = {"none": AdditionTask(TEST.task),
             "env": EnvTask(dataclasses.replace(TEST.task, env="answer-only", tool_demos=0),
                            EpisodeLimits(max_tokens=TEST.grpo.max_completion_length))}
    logs, weights = {}, {}
    for name, task in tasks.items():
        torch.manual_seed(0)
        model = build_model(TEST.model, task.tokenizer)
        train_sft(model, task, TEST.sft, TrainContext(show_progress=False, threads=None),
                  generator=torch.Generator().manual_seed(0), eval_at_end=False)
        torch.manual_seed(1)
        logs[name] = MetricsLog()
        train_grpo(model, task, TEST.grpo, TrainContext(log=logs[name], show_progress=False, threads=None),
                   generator=torch.Generator().manual_seed(1))
        weights[name] = model.state_dict()
    timing = ("seconds", "per_second")
    for plain, env in zip(logs["none"].rows, logs["env"].rows, strict=True):
        assert {k: v for k, v in plain.items() if not any(t in k for t in timing)} == \
            {k: v for k, v in env.items() if k in plain and not any(t in k for t in timing)}
        assert env["tool_call_rate"] == 0.0
    assert any(r["reward_mean"] > 0 for r in logs["none"].rows), "the runs learn something (else equality is cheap)"
    assert all(torch.equal(weights["none"][k], weights["env"][k]) for k in weights["none"])


def test_an_unknown_env_is_refused_with_the_list(tmp_path, capsys):
    from course_lib.__main__ import main
    from course_lib.run.pipeline import run

    with pytest.raises(SystemExit):
        main(["train", "grpo", "--config", "test", "--env", "browser", "--out", str(tmp_path)])
    assert "invalid choice: 'browser' (choose from '', 'calculator')" in capsys.readouterr().err
    cfg = get_config("test")
    cfg.task.env = "browser"
    with pytest.raises(ValueError, match="env must be one of 'calculator'"):
        run("grpo", cfg, tmp_path / "a", show_progress=False, verbose=False)
    cfg.task.env = "calculator"
    with pytest.raises(ValueError, match="runs with sft and grpo"):
        run("dpo", cfg, tmp_path / "b", show_progress=False, verbose=False)
    with pytest.raises(ValueError, match="runs with sft and grpo.*GAE over the policy's tokens only"):
        run("ppo", cfg, tmp_path / "b", show_progress=False, verbose=False)  # refused with its reason
    cfg.grpo.reward = "loose"
    with pytest.raises(ValueError, match="grpo.reward must be 'strict'"):
        run("grpo", cfg, tmp_path / "c", show_progress=False, verbose=False)


def test_train_grpo_with_the_calculator_end_to_end(tmp_path):
    import json

    from course_lib.run.pipeline import run

    cfg = get_config("test")
    cfg.task.env, cfg.task.tool_demos = "calculator", 10
    summary = run("grpo", cfg, tmp_path, steps=2, show_progress=False, verbose=False)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for key in ("tool_call_rate", "turns_per_episode", "tokens_per_episode", "reward_carry", "env_errors"):
        assert key in rows[0]
    assert rows[0]["tokens_per_episode"] >= rows[0]["completion_length"], "episode tokens count the environment's too"
    assert 0 <= summary["final_tool_use_carry"] <= 1 and summary["sft_accuracy_carry"] is not None
    assert summary["passport"]["environment"]["name"] == "calculator"
    assert summary["options"]["task"]["env"] == "calculator"


def test_env_start_grows_the_shared_start_and_caches_it(tmp_path, monkeypatch):
    """``starts.env_start``: the plain start's weights on the old ids, zero rows for the tool's characters
    (steps=0), read back from the cache the second time; a config without an environment is refused."""
    import dataclasses

    from course_lib.run.starts import env_start, sft_start

    monkeypatch.setenv("COURSE_CACHE", str(tmp_path))
    cfg = get_config("test")
    with pytest.raises(ValueError, match="env_start needs cfg.task.env"):
        env_start(cfg, verbose=False)
    env_cfg = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, env="calculator", tool_demos=5))
    task, model, info = env_start(env_cfg, steps=0, verbose=False)
    _, base, _ = sft_start(cfg, verbose=False)
    old = base.transformer.wte.weight
    grown = model.transformer.wte.weight
    assert grown.shape[0] == old.shape[0] + len(TOOL_CHARS) and len(task.tokenizer) == grown.shape[0]
    assert torch.equal(grown[: old.shape[0]], old) and not grown[old.shape[0]:].any()
    assert not info["cached"] and {"accuracy", "tool_use_carry", "tool_use_no_carry"} <= set(info)
    _, again, info2 = env_start(env_cfg, steps=0, verbose=False)
    assert info2["cached"] and all(torch.equal(a, b)
                                   for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    _, taught, info3 = env_start(env_cfg, steps=3, verbose=False)  # another key: trained, not read
    assert not info3["cached"] and not torch.equal(taught.transformer.wte.weight, grown)


def test_tool_demonstrations_can_ask_for_the_whole_sum_and_a_bad_call_is_refused(capsys):
    from course_lib.__main__ import main
    from course_lib.trainers.configs import validate

    assert CalculatorEnv.demonstration((37, 45), "sum") == [("[37+45]", True), ("82", False), ("82", True)]
    assert CalculatorEnv.demonstration((37, 45)) == [("[7+5]", True), ("12", False), ("82", True)]
    assert CalculatorEnv.demonstration((6, 45), "sum", width=2)[0] == ("[06+45]", True)  # operands as in the prompt
    config = TaskConfig(digits=2, n_demos=60, n_heldout=10, env="calculator", tool_demos=5, tool_call="sum")
    task = EnvTask(config)
    ids, attn, cmask = task.demonstrations()
    i = task.tool_demo_index[0]
    a, b = task.demo_pairs[i]
    n = int(attn[i].sum())
    assert text(ids[i, :n].tolist()) == f"<bos>{a:02d}+{b:02d}=[{a:02d}+{b:02d}]{a + b}{a + b}<eos>"
    assert policy_text(type("E", (), {"ids": ids[i, :n].tolist(), "policy_mask": cmask[i, :n].tolist()})) == \
        f"[{a:02d}+{b:02d}]{a + b}<eos>", "the tool's answer is context, not a target"
    env = task.make_env()
    env.reset((37, 45))
    assert env.step("[37+45]").observation == "82"  # the environment answers a whole-sum call
    for bad in ("tens", "", None):
        with pytest.raises(ValueError, match=r"task.tool_call must be one of 'ones', 'sum' .*got"):
            EnvTask(dataclasses.replace(config, tool_call=bad))
    cfg = get_config("test")
    cfg.task.env, cfg.task.tool_call = "calculator", "tens"
    with pytest.raises(ValueError, match="task.tool_call must be one of 'ones', 'sum'"):
        validate(cfg)
    with pytest.raises(SystemExit):
        main(["train", "grpo", "--config", "test", "--env", "calculator", "--tool-call", "tens",
              "--out", "/nonexistent"])
    assert "invalid choice: 'tens' (choose from 'ones', 'sum')" in capsys.readouterr().err


def test_the_tool_answer_probe_is_each_pairs_own_teacher_forced_log_prob(tool_sft):
    from course_lib.tinygpt.environments import tool_answer_probe

    task, model = tool_sft
    pairs = [(7, 5), (3, 4), (9, 9), (1, 0)]  # the tool's answers have 2 and 1 digits: rows of two lengths
    lp, own = tool_answer_probe(model, task, pairs)
    by_hand = []
    for a, b in pairs:
        prompt = [task.tokenizer.bos_token_id, *task.tokenizer.convert_tokens_to_ids(list(f"{a}+{b}=[{a}+{b}]"))]
        answer = task.tokenizer.convert_tokens_to_ids(list(str(a + b)))
        with torch.no_grad():
            logp = model(input_ids=torch.tensor([prompt + answer])).logits[0].float().log_softmax(-1)
        steps = [(len(prompt) + k - 1, t) for k, t in enumerate(answer)]
        by_hand.append((float(sum(logp[p, t] for p, t in steps)), all(int(logp[p].argmax()) == t for p, t in steps)))
    assert lp == pytest.approx(sum(x for x, _ in by_hand) / 4, abs=1e-5)
    assert own == sum(y for _, y in by_hand) / 4
    with pytest.raises(ValueError, match="pairs must hold at least one"):
        tool_answer_probe(model, task, [])
