"""Environments: policy and environment take turns in an episode, scored at its end (§15–§16).

For agents, the environment is part of the training specification: its data, its tools, its
verifier and its rules. Here an environment has the shape OpenEnv and NeMo Gym use: ``reset(pair)``
returns the first observation (the prompt), then ``step(turn)`` takes the text of one policy turn
and returns ``Step(observation, reward, done, info)``. ``run_episode`` drives one episode with any
policy and builds what a trainer needs: the token ids of the whole episode and a mask of the tokens
the policy wrote. Environment tokens are context, not actions: ``episode_batch`` hands the policy mask
to a trainer as its completion mask, so log-probabilities, loss and KL are taken on the policy's tokens
only. The trainers run episodes in a batch: ``EpisodeDriver`` plays the same rules inside the KV-cached
sampler (``rollout.generate(episodes=…)``), one environment per row. ``EnvTask`` is the addition task
that owns an environment (``TaskConfig.env``, CLI ``--env calculator``): the tokenizer with the tool's
characters, SFT demonstrations that use the tool, episodes for GRPO's rollouts and for evaluation.

The first environment, ``CalculatorEnv``, is the course's addition task with a calculator. A policy
turn is either a tool call ``[a+b]`` — the environment writes the sum back into the context — or the
final answer, digits then ``<eos>``, which the exact-answer checker scores. Example (2 digits):

    prompt     <bos>37+45=
    policy     [7+5]           a call for the ones column, where the flawed teacher forgets the carry
    env        12
    policy     82<eos>         the answer; reward 1

The teacher's demonstrations ask for the ones column (``task.tool_call="ones"``) or for the whole sum
(``"sum"``: ``[37+45]``, the tool writes ``82``, the policy copies it); the environment answers either.

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

Mapping to TRL 1.16 (experimental there): ``GRPOTrainer(environment_factory=…)`` builds one environment
per rollout, whose ``reset`` may return text for the prompt and whose methods are the tools; the tool
results are masked out of the loss (``tool_mask``) and count in ``max_completion_length``; the number of
tool turns is ``GRPOConfig.max_tool_calling_iterations``; an environment with ``get_reward`` owns the
reward. Here: ``EnvTask.make_env``, ``EpisodeDriver``'s policy mask, ``EpisodeLimits`` and the
environment's verifier, in the same roles, with the tool syntax in characters instead of a chat template.

Simplifications, said out loud: one tool with one operation; the policy's tool syntax is three extra
characters appended to the tokenizer (``TOOL_CHARS``; ``CharTokenizer(extra_chars=TOOL_CHARS)``),
so a tool-using model has its own vocabulary and its own SFT start; the environment rewards only the
end of an episode. ``process_advantages`` shows the alternative on given numbers: a reward per policy
turn (a *per-step* or process reward) and the advantages it gives, which the trainers do not use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from course_lib._validate import number
from course_lib.formulas.advantages import grpo_advantages
from course_lib.tinygpt.task import EOS, AdditionTask, CharTokenizer, TaskConfig

TOOL_CHARS = "[]!"  # call open, call close, tool error
TOOL_CALLS = ("ones", "sum")  # what a tool demonstration asks the calculator: the ones column, or the whole sum
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
        number(self.max_tool_calls, "max_tool_calls", integer=True, low=0)
        number(self.max_tokens, "max_tokens", integer=True, low=1)


class CalculatorEnv:
    """The addition task with a calculator tool (see the module docstring for the rules)."""

    name = "calculator"
    extra_chars = TOOL_CHARS  # the tokenizer's extra characters for this environment's syntax
    stops = (CALL_CLOSE,)  # besides <eos>, the characters that end a policy turn

    @staticmethod
    def demonstration(pair: tuple[int, int], call: str = "ones", width: int = 1) -> list[tuple[str, bool]]:
        """The teacher with a calculator: it asks for the ones column (``call="ones"``) or the whole
        sum (``"sum"``, operands written as in the prompt: zero-padded to ``width`` digits), then
        writes the right sum.

        ``[(text, written_by_policy), …]``: for 37+45, ``[("[7+5]", True), ("12", False), ("82", True)]``;
        with ``"sum"`` ``[("[37+45]", True), ("82", False), ("82", True)]``, and ``[06+45]`` for 06+45.
        """
        check_tool_call(call)
        a, b = pair
        if call == "ones":
            return [(f"[{a % 10}+{b % 10}]", True), (str(a % 10 + b % 10), False), (str(a + b), True)]
        return [(f"[{a:0{width}d}+{b:0{width}d}]", True), (str(a + b), False), (str(a + b), True)]

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


def check_env_name(name: str) -> None:
    """Refuse an unknown environment with the list of known ones ("" is no environment)."""
    if name not in ENVIRONMENTS:
        raise ValueError(f"env must be one of {', '.join(map(repr, ENVIRONMENTS))} (or '' for none); got {name!r}")


def check_tool_call(call) -> None:
    """Refuse a tool-demonstration call other than ``TOOL_CALLS`` (``task.tool_call``), naming the accepted ones."""
    if call not in TOOL_CALLS:
        raise ValueError(f"task.tool_call must be one of {', '.join(map(repr, TOOL_CALLS))} (what a tool "
                         f"demonstration asks the calculator: the ones column or the whole sum); got {call!r}")


def make_env(name: str, task: AdditionTask, limits: EpisodeLimits | None = None):
    """The environment called ``name`` on ``task``; an unknown name is refused with the list."""
    check_env_name(name)
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


def model_policy(model, tokenizer, *, temperature: float = 1.0, generator: torch.Generator | None = None,
                 greedy: bool = False):
    """A policy for ``run_episode`` from a causal LM: samples one turn (``greedy``: the most likely
    token), token by token, until ``]``, ``<eos>`` or the budget. One episode at a time and no KV
    cache: simple, not fast (the trainer's batched, cached sampler is ``rollout.generate`` with an
    ``EpisodeDriver``)."""
    stops = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(CALL_CLOSE)}
    never = [tokenizer.pad_token_id, tokenizer.bos_token_id]

    @torch.no_grad()
    def policy(ids: list[int], budget: int) -> list[int]:
        device = next(model.parameters()).device
        context, turn = torch.tensor([ids], device=device), []
        for _ in range(budget):
            logits = model(input_ids=context).logits[0, -1].float()
            logits[never] = -math.inf
            if greedy:
                token = int(logits.argmax())
            else:
                probs = torch.softmax(logits / temperature, dim=-1)
                token = int(torch.multinomial(probs.cpu(), 1, generator=generator))
            turn.append(token)
            if token in stops:
                break
            context = torch.cat([context, torch.tensor([[token]], device=device)], dim=1)
        return turn

    return policy


# ---- episodes in a batched sampler, and the task that owns an environment ------------------------------
class EpisodeDriver:
    """One environment per row of a batched sampler (``rollout.generate(episodes=driver)``).

    The sampler draws a token for every row; ``step`` keeps it when the policy is writing and
    replaces it with the next token of an environment observation otherwise. The rules are
    ``run_episode``'s, batched: a turn ends at ``<eos>`` or a stop character and goes to
    ``env.step``; the observation is written next, token by token; an episode the environment
    ends, or that raises, stops its row; the sampler's length is the token limit. ``finish``
    returns each row's episode. Host reads every token: fine on a CPU, a cost on an accelerator.
    """

    def __init__(self, envs: list, pairs: list, tokenizer, task: AdditionTask):
        self.envs, self.pairs, self.tok = envs, pairs, tokenizer
        for env, pair in zip(envs, pairs):
            env.reset(pair)
        n = len(envs)
        self.stops = {tokenizer.eos_token_id, *tokenizer.convert_tokens_to_ids(list(getattr(envs[0], "stops", ())))}
        self.turn = [[] for _ in range(n)]
        self.queue = [[] for _ in range(n)]
        self.reward, self.turns, self.tokens = [0.0] * n, [0] * n, [0] * n
        self.info = [{} for _ in range(n)]
        self.env_error = [False] * n
        self.carry = [task.ones_carry(*p) for p in pairs]

    def step(self, nxt: torch.Tensor, finished: torch.Tensor):
        ids, done_before = nxt.tolist(), finished.tolist()
        forced, ended = [False] * len(ids), [False] * len(ids)
        for i, token in enumerate(ids):
            if done_before[i]:
                continue
            self.tokens[i] += 1
            if self.queue[i]:  # the environment is writing
                ids[i], forced[i] = self.queue[i].pop(0), True
                continue
            self.turn[i].append(token)
            if token in self.stops:
                ended[i] = self._env_step(i)
        device = nxt.device
        return (torch.tensor(ids, device=device), torch.tensor(forced, device=device),
                torch.tensor(ended, device=device))

    def _env_step(self, i: int) -> bool:
        text = self.tok.convert_tokens_to_string(self.tok.convert_ids_to_tokens(self.turn[i]))
        self.turn[i], self.turns[i] = [], self.turns[i] + 1
        try:
            step = self.envs[i].step(text)
        except Exception as err:  # noqa: BLE001 - an environment's bug ends its episode, not the batch
            self.reward[i], self.env_error[i] = 0.0, True
            self.info[i] = {**self.info[i], "error": f"{type(err).__name__}: {err}"}
            return True
        self.reward[i], self.info[i] = step.reward, dict(step.info)
        self.queue[i] = self.tok.convert_tokens_to_ids(list(step.observation))
        return bool(step.done)

    def finish(self, truncated: torch.Tensor) -> list[dict]:
        """Each row's episode: reward, tool calls and errors, turns, tokens after the prompt, carry, and
        ``verifier_failed`` as ``rewards.CheckerReward`` counts it: no answer the verifier can read
        (truncated, ended without an answer, not digits) or an environment that raised."""
        out = []
        for i, cut in enumerate(truncated.tolist()):
            turns = self.turns[i] + bool(self.turn[i])  # a turn cut by the token limit counts
            reward = 0.0 if cut else self.reward[i]
            answer = self.info[i].get("answer")  # the final turn's text, when the episode reached one
            unreadable = cut or self.env_error[i] or answer is None or not (answer.isdigit() and answer.isascii())
            out.append({"reward": reward, "verifier_failed": unreadable,
                        "tool_calls": self.info[i].get("tool_calls", 0),
                        "tool_errors": self.info[i].get("tool_errors", 0), "turns": turns, "tokens": self.tokens[i],
                        "carry": self.carry[i], "env_error": self.env_error[i], "truncated": bool(cut)})
        return out


def episode_stats(episodes: list[dict]) -> dict:
    """What the dashboard shows about a batch of episodes (§15–§16).

    ``tool_call_rate`` share of episodes with a call; ``tool_call_rate_carry`` / ``_no_carry`` the same on
    carry / no-carry prompts (None when no such episode); ``tool_error_rate`` malformed calls per
    call (None without calls); ``turns_per_episode``, ``tokens_per_episode`` (policy and
    environment tokens after the prompt); ``reward_with_tool`` / ``reward_without_tool`` (None
    when no such episode); ``reward_carry`` / ``reward_no_carry`` (ones column carries or not);
    ``reward_carry_with_tool`` / ``_without_tool``: on carry prompts, by tool use (does the call pay?), from
    ``episodes_carry_with_tool`` / ``_without_tool`` episodes;
    ``env_errors``: episodes ended by an environment that raised.
    """
    def mean(xs):
        return sum(xs) / len(xs) if xs else None

    calls = sum(e["tool_calls"] for e in episodes)
    return {
        "tool_call_rate": mean([float(e["tool_calls"] > 0) for e in episodes]),
        "tool_call_rate_carry": mean([float(e["tool_calls"] > 0) for e in episodes if e["carry"]]),
        "tool_call_rate_no_carry": mean([float(e["tool_calls"] > 0) for e in episodes if not e["carry"]]),
        "tool_error_rate": sum(e["tool_errors"] for e in episodes) / calls if calls else None,
        "turns_per_episode": mean([e["turns"] for e in episodes]),
        "tokens_per_episode": mean([e["tokens"] for e in episodes]),
        "reward_with_tool": mean([e["reward"] for e in episodes if e["tool_calls"] > 0]),
        "reward_without_tool": mean([e["reward"] for e in episodes if e["tool_calls"] == 0]),
        "reward_carry": mean([e["reward"] for e in episodes if e["carry"]]),
        "reward_no_carry": mean([e["reward"] for e in episodes if not e["carry"]]),
        "reward_carry_with_tool": mean([e["reward"] for e in episodes if e["carry"] and e["tool_calls"] > 0]),
        "reward_carry_without_tool": mean([e["reward"] for e in episodes if e["carry"] and e["tool_calls"] == 0]),
        "episodes_carry_with_tool": sum(e["carry"] and e["tool_calls"] > 0 for e in episodes),
        "episodes_carry_without_tool": sum(e["carry"] and e["tool_calls"] == 0 for e in episodes),
        "env_errors": sum(e["env_error"] for e in episodes),
    }


def process_advantages(step_rewards) -> list[list[float]]:
    """Per-step (process) advantages for one group of episodes, one per policy turn (DeepSeekMath's
    process supervision, §15).

    ``step_rewards[i]`` holds one reward per policy turn of episode i (a ragged list: episodes have
    different numbers of turns). Every step reward of the group is normalised by the mean and the
    population std of *all* the group's step rewards, r̃ = (r − mean) / std, and the advantage of
    turn j is the sum of the normalised rewards from turn j to the episode's end: a turn is credited
    with what it and the later turns earned, not with the earlier ones. A group whose step rewards
    are all equal carries no relative signal: every advantage is 0 (the rule of ``grpo_advantages``,
    which does the normalising). Example: ``[[0, 1], [1], [0, 0, 1]]`` → ``[[0, 1], [1], [−1, 0, 1]]``.
    """
    if not isinstance(step_rewards, (list, tuple)) or len(step_rewards) < 2:
        raise ValueError("step_rewards must be a list of at least 2 episodes' lists of step rewards; got "
                         f"{step_rewards!r}")
    rows = []
    for i, row in enumerate(step_rewards):
        if not isinstance(row, (list, tuple)) or not row:
            raise ValueError(f"step_rewards[{i}] must be a non-empty list of rewards (one per policy turn); got "
                             f"{row!r}")
        rows.append([float(number(r, f"step_rewards[{i}][{j}]")) for j, r in enumerate(row)])
    flat = grpo_advantages(torch.tensor([r for row in rows for r in row], dtype=torch.float64), on_degenerate="zeros")
    out, start = [], 0
    for row in rows:
        normalised = flat[start:start + len(row)].tolist()
        start += len(row)
        out.append([sum(normalised[j:]) for j in range(len(row))])
    return out


@torch.no_grad()
def tool_answer_probe(model, task, pairs) -> tuple[float, float]:
    """What a policy predicts where the environment writes: teacher-forced on ``prompt``, the call
    ``task.config.tool_call`` asks for, then the tool's answer (``[7+5]`` then ``12`` for 37+45).

    Returns the summed log-prob the policy gives the tool's answer (mean over ``pairs``) and the
    share of pairs where greedy decoding would write that answer itself. Masked, the policy is never
    trained on these tokens; with ``mask_env_tokens=False`` it is (the masking ablation).
    """
    if not pairs:
        raise ValueError("pairs must hold at least one (a, b) prompt")
    tok = task.tokenizer
    rows, spans = [], []
    for pair in pairs:
        (call, _), (answer, _), _ = task.demonstration(pair)
        rows.append([tok.bos_token_id, *tok.convert_tokens_to_ids(list(task.prompt_text(*pair) + call + answer))])
        spans.append(len(answer))
    device = next(model.parameters()).device
    ids = torch.full((len(rows), max(map(len, rows))), tok.pad_token_id, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    logp = model(input_ids=ids.to(device)).logits.float().log_softmax(-1).cpu()  # causal: right padding is unseen
    total, own = 0.0, 0
    for i, (r, n) in enumerate(zip(rows, spans)):
        positions = range(len(r) - n, len(r))  # the tool's answer, predicted from the token before each
        total += float(sum(logp[i, t - 1, r[t]] for t in positions))
        own += all(int(logp[i, t - 1].argmax()) == r[t] for t in positions)
    return total / len(rows), own / len(rows)


class EnvTask(AdditionTask):
    """The addition task that owns an environment: its tokenizer, demonstrations and episodes.

    ``TaskConfig.env`` names the environment; the tokenizer gains its characters; the first
    ``TaskConfig.tool_demos`` demonstrations whose ones column carries (where the flawed teacher
    errs) are rewritten by the teacher with a calculator (``demonstration``; ``TaskConfig.tool_call``
    says what it asks the tool: the ones column or the whole sum): a call, the tool's answer (not
    trained on: environment tokens are masked in SFT too), then the right sum.
    Every other demonstration, the held-out set and the training prompts are the plain task's.
    ``episodes(pairs, G)`` gives the sampler its driver; ``episode_length`` is the token limit.
    ``env_cls`` replaces the registered class with a variant of it (same tool syntax; a notebook's
    deliberately loose verifier, for instance).
    """

    def __init__(self, config: TaskConfig, limits: EpisodeLimits | None = None, env_cls=None):
        check_env_name(config.env)
        env_cls = env_cls or ENVIRONMENTS[config.env]
        number(config.tool_demos, "task.tool_demos", integer=True, low=0)
        check_tool_call(config.tool_call)
        super().__init__(config, tokenizer=CharTokenizer(extra_chars=env_cls.extra_chars))
        self.env_cls, self.limits = env_cls, limits or EpisodeLimits()
        self.episode_length = self.limits.max_tokens
        carry = [i for i, p in enumerate(self.demo_pairs) if self.ones_carry(*p)]
        self.tool_demo_index = carry[: config.tool_demos]

    def make_env(self):
        return self.env_cls(self, self.limits)

    def demonstration(self, pair):
        """The tool-using demonstration of ``pair`` for this task (its ``tool_call``, operands as in its prompts)."""
        return self.env_cls.demonstration(pair, self.config.tool_call, width=self.config.digits)

    def episodes(self, pairs, num_generations: int = 1) -> EpisodeDriver:
        rows = [p for p in pairs for _ in range(num_generations)]
        return EpisodeDriver([self.make_env() for _ in rows], rows, self.tokenizer, self)

    def demonstrations(self, device=None):
        """SFT data with the tool demonstrations: ``(input_ids, attention_mask, completion_mask)``,
        right-padded; the completion mask is 0 on the tool's answers."""
        tok, tool = self.tokenizer, set(self.tool_demo_index)
        rows = []
        for i, (pair, answer) in enumerate(zip(self.demo_pairs, self.demo_answers)):
            segments = self.demonstration(pair) if i in tool else [(answer, True)]
            ids = [tok.bos_token_id, *tok.convert_tokens_to_ids(list(self.prompt_text(*pair)))]
            mask = [0] * len(ids)
            for text, by_policy in [*segments, (EOS, True)]:
                chunk = [tok.eos_token_id] if text == EOS else tok.convert_tokens_to_ids(list(text))
                ids, mask = ids + chunk, mask + [int(by_policy)] * len(chunk)
            rows.append((ids, mask))
        width = max(len(r) for r, _ in rows)
        out_ids = torch.full((len(rows), width), tok.pad_token_id, dtype=torch.long)
        out_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (ids, mask) in enumerate(rows):
            out_ids[i, : len(ids)], out_mask[i, : len(mask)] = torch.tensor(ids), torch.tensor(mask)
        attention = (out_ids != tok.pad_token_id).long()
        return out_ids.to(device), attention.to(device), out_mask.to(device)


def make_task(config: TaskConfig, limits: EpisodeLimits | None = None) -> AdditionTask:
    """The task of a run: ``EnvTask`` when ``config.env`` names an environment, else the plain task."""
    return EnvTask(config, limits) if config.env else AdditionTask(config)
