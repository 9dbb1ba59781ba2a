"""Environments: an episode is the policy and an environment taking turns, scored at the end (§15–§16).

For agents, the environment is part of the training specification: its data, its tools, its
verifier and its rules. Here an environment has the shape OpenEnv and NeMo Gym use: ``reset(pair)``
returns the first observation (the prompt), then ``step(turn)`` takes the text of one policy turn
and returns ``Step(observation, reward, done, info)``. ``run_episode`` drives one episode with any
policy and builds what a trainer needs: the token ids of the whole episode and a mask of the tokens
the policy wrote. Environment tokens are context, not actions: ``episode_batch`` hands the policy mask
to a trainer as its completion mask, so log-probabilities, loss and KL are taken on the policy's tokens
only. (No trainer runs episodes yet: ``train grpo --env`` is the next step.)

The first environment, ``CalculatorEnv``, is the course's addition task with a calculator. A policy
turn is either a tool call ``[a+b]`` — the environment writes the sum back into the context — or the
final answer, digits then ``<eos>``, which the exact-answer checker scores. Example (2 digits):

    prompt     <bos>37+45=
    policy     [7+5]           a call for the ones column, where the flawed teacher forgets the carry
    env        12
    policy     82<eos>         the answer; reward 1

Rules, stated once:
- **Malformed call**: a turn that ends with ``]`` but is not exactly ``[digits+digits]`` (operands up
  to digits + 1 characters) gets the error observation ``!``, counts as a tool error and as a call.
- **Tool-call limit** (``max_tool_calls``): a call beyond it ends the episode with reward 0.
- **Token limit** (``max_tokens``, policy and environment tokens after the prompt): an episode that
  reaches it without an answer ends with reward 0 (truncated).
- **An environment that raises** ends that episode with reward 0 and the error in ``info``;
  ``run_episode`` never lets it stop a batch.
- A turn that is neither a call nor an answer (no ``]``, no ``<eos>``) can only happen at the token
  limit: it is truncated.

Simplifications, said out loud: one tool with one operation; the policy's tool syntax is three extra
characters appended to the tokenizer (``TOOL_CHARS``; ``CharTokenizer(extra_chars=TOOL_CHARS)``),
so a tool-using model has its own vocabulary and its own SFT start; rewards come only at the end.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from course_lib.task import EOS, AdditionTask

TOOL_CHARS = "[]!"  # call open, call close, tool error
CALL_CLOSE, TOOL_ERROR = "]", "!"


class Step(NamedTuple):
    observation: str  # what the environment writes into the context ("" when nothing)
    reward: float
    done: bool
    info: dict


@dataclass(frozen=True)
class EpisodeLimits:
    max_tool_calls: int = 2
    max_tokens: int = 16  # policy + environment tokens after the prompt

    def __post_init__(self):
        for name in ("max_tool_calls", "max_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "max_tool_calls" else 1):
                raise ValueError(f"{name} must be an integer >= {0 if name == 'max_tool_calls' else 1}; got {value!r}")


class CalculatorEnv:
    """The addition task with a calculator tool (see the module docstring for the rules)."""

    name = "calculator"

    def __init__(self, task: AdditionTask, limits: EpisodeLimits | None = None):
        self.task, self.limits = task, limits or EpisodeLimits()
        width = task.config.digits + 1
        self._call = re.compile(rf"\[(\d{{1,{width}}})\+(\d{{1,{width}}})\]")
        self.pair: tuple[int, int] | None = None

    def reset(self, pair: tuple[int, int]) -> str:
        self.pair, self.tool_calls, self.tool_errors = tuple(pair), 0, 0
        return self.task.prompt_text(*pair)

    def step(self, turn: str) -> Step:
        if self.pair is None:
            raise RuntimeError("step() before reset(): start an episode with reset(pair)")
        if turn.endswith(EOS):  # the final answer: the exact-answer checker decides
            answer = turn[: -len(EOS)]
            return Step("", float(answer == str(sum(self.pair))), True, self._info(answer=answer))
        if turn.endswith(CALL_CLOSE):
            self.tool_calls += 1
            if self.tool_calls > self.limits.max_tool_calls:
                return Step("", 0.0, True, self._info(stopped="tool-call limit"))
            match = self._call.fullmatch(turn)
            if match is None:
                self.tool_errors += 1
                return Step(TOOL_ERROR, 0.0, False, self._info(malformed=turn))
            return Step(str(int(match.group(1)) + int(match.group(2))), 0.0, False, self._info())
        return Step("", 0.0, True, self._info(stopped="token limit"))

    def _info(self, **extra) -> dict:
        return {"tool_calls": self.tool_calls, "tool_errors": self.tool_errors, **extra}


ENVIRONMENTS: dict[str, Callable[..., CalculatorEnv]] = {"calculator": CalculatorEnv}


def make_env(name: str, task: AdditionTask, limits: EpisodeLimits | None = None):
    """The environment called ``name`` on ``task``; an unknown name is refused with the list."""
    if name not in ENVIRONMENTS:
        raise ValueError(f"env must be one of {', '.join(map(repr, ENVIRONMENTS))}; got {name!r}")
    return ENVIRONMENTS[name](task, limits)


@dataclass
class Episode:
    ids: list[int]  # bos + prompt, then every turn and observation, in order
    policy_mask: list[int]  # 1 where the policy wrote the token, 0 for the prompt and the environment
    reward: float = 0.0
    turns: int = 0
    info: dict = field(default_factory=dict)

    @property
    def policy_tokens(self) -> int:
        return sum(self.policy_mask)


def run_episode(env, pair, policy, tokenizer, limits: EpisodeLimits | None = None) -> Episode:
    """One episode: ``policy(ids, budget) -> list[int]`` writes a turn of at most ``budget`` tokens,
    stopping after ``]`` or ``<eos>``; the environment answers until it says ``done``.

    The token limit is the environment's (``env.limits``) unless ``limits`` is given.
    """
    limits = limits or getattr(env, "limits", EpisodeLimits())
    prompt = [tokenizer.bos_token_id, *tokenizer.convert_tokens_to_ids(list(env.reset(pair)))]
    episode = Episode(ids=list(prompt), policy_mask=[0] * len(prompt))
    used = 0
    while True:
        turn_ids = list(policy(list(episode.ids), limits.max_tokens - used))[: limits.max_tokens - used]
        episode.ids += turn_ids
        episode.policy_mask += [1] * len(turn_ids)
        used += len(turn_ids)
        episode.turns += 1
        try:
            step = env.step(tokenizer.convert_tokens_to_string(tokenizer.convert_ids_to_tokens(turn_ids)))
        except Exception as err:  # noqa: BLE001 - an environment's bug ends its episode, not the batch
            episode.info = {"error": f"{type(err).__name__}: {err}"}
            return episode
        obs_ids = tokenizer.convert_tokens_to_ids(list(step.observation))[: max(limits.max_tokens - used, 0)]
        episode.ids += obs_ids
        episode.policy_mask += [0] * len(obs_ids)
        used += len(obs_ids)
        episode.reward, episode.info = step.reward, dict(step.info)
        if step.done:
            return episode
        if used >= limits.max_tokens:
            episode.info["stopped"] = "token limit"
            return episode


def episode_batch(episodes: list[Episode], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Episodes as one right-padded batch: ``input_ids``, ``attention_mask`` and ``completion_mask``.

    ``completion_mask`` is the policy mask: the trainer's log-probs, loss and KL read only those
    tokens, so environment tokens are context and nothing else. Without a tool call this is the
    batch a single-turn rollout gives.
    """
    if not episodes:
        raise ValueError("episodes must hold at least one episode")
    width = max(len(e.ids) for e in episodes)
    ids = torch.full((len(episodes), width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(episodes), width), dtype=torch.long)
    mask = torch.zeros((len(episodes), width), dtype=torch.long)
    for i, e in enumerate(episodes):
        ids[i, : len(e.ids)] = torch.tensor(e.ids)
        attention[i, : len(e.ids)] = 1
        mask[i, : len(e.ids)] = torch.tensor(e.policy_mask)
    return {"input_ids": ids, "attention_mask": attention, "completion_mask": mask}


def model_policy(model, tokenizer, *, temperature: float = 1.0, generator: torch.Generator | None = None):
    """A policy for ``run_episode`` from a causal LM: samples one turn, token by token, until ``]``,
    ``<eos>`` or the budget. One episode at a time and no KV cache: simple, not fast (the batched,
    cached version belongs to the trainer)."""
    stops = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(CALL_CLOSE)}
    never = [tokenizer.pad_token_id, tokenizer.bos_token_id]

    @torch.no_grad()
    def policy(ids: list[int], budget: int) -> list[int]:
        device = next(model.parameters()).device
        context, turn = torch.tensor([ids], device=device), []
        for _ in range(budget):
            logits = model(input_ids=context).logits[0, -1].float()
            logits[never] = -math.inf
            probs = torch.softmax(logits / temperature, dim=-1)
            token = int(torch.multinomial(probs.cpu(), 1, generator=generator))
            turn.append(token)
            if token in stops:
                break
            context = torch.cat([context, torch.tensor([[token]], device=device)], dim=1)
        return turn

    return policy
