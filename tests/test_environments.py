"""Environments (course_lib.environments): the calculator episode, its rules, and the policy mask."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.environments import (
    TOOL_CHARS,
    CalculatorEnv,
    EpisodeLimits,
    make_env,
    run_episode,
)
from course_lib.task import CHARS, AdditionTask, CharTokenizer, TaskConfig

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
    from course_lib.environments import episode_batch

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

    from course_lib.configs import get_config
    from course_lib.environments import model_policy
    from course_lib.model import build_model

    torch.manual_seed(0)
    model = build_model(get_config("test").model, TOK)
    env = CalculatorEnv(TASK, EpisodeLimits(max_tool_calls=1, max_tokens=12))
    for seed in range(4):
        episode = run_episode(env, (37, 45), model_policy(model, TOK, generator=torch.Generator().manual_seed(seed)), TOK)
        assert len(episode.ids) - TASK.prompt_length <= 12 and episode.turns >= 1
        assert all(m == 0 for m in episode.policy_mask[: TASK.prompt_length])
        written = [t for t, m in zip(episode.ids, episode.policy_mask) if m]
        assert TOK.pad_token_id not in written and TOK.bos_token_id not in written
