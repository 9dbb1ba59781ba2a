"""Where a trainer's reward comes from: a named checker or a learned reward model (§4, §15).

``resolve_reward(spec, task)`` turns the config's ``reward`` string into one batched callable
``reward(pairs, completions) -> FloatTensor[N]``: ``pairs`` holds the prompt ``(a, b)`` of
each of the N rows, ``completions`` the generated ids ``(N, L)``. Specs:

- ``"strict"`` the exact-answer checker (``AdditionTask.strict_reward``);
- ``"loose"``  the deliberately exploitable checker of notebook 11_reward_hacking (``loose_reward``);
- ``"partial"`` partial credit, the share of digit places that are right (``partial_reward``;
  notebook 09_tiny_gpt_grpo's "where the baseline matters");
- ``"rm:DIR"`` a reward model saved in ``DIR``, loaded by ``course_lib.trainers.reward_model.load_reward``
  (which registers itself as the ``rm:`` source: this module never imports it).

Simplification: the checkers are plain Python on lists of token ids (one ``tolist()`` per
batch, not a tensor per token), so scoring a batch costs microseconds per completion.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from course_lib._validate import number
from course_lib.tinygpt.task import AdditionTask


class Checker(NamedTuple):
    """A named rule-based reward: the ``AdditionTask`` method that scores one completion, and its words."""

    method: str
    description: str  # what the passport says the reward is
    binary: bool  # 1 or 0 (False: values in between, partial credit)
    parse: str | None = "parse_answer"  # the task method that reads the answer it checks; None: reads any text


# The one home of the checker names: validation, the CLI's help and the passport read this table.
CHECKERS = {
    "strict": Checker("strict_reward", "deterministic rule: exact answer digits followed by <eos> "
                                       "(course_lib.tinygpt.task.AdditionTask.strict_reward)", True),
    "loose": Checker("loose_reward", "deterministic rule, deliberately loose: answer digits in order anywhere in "
                                     "the output (loose_reward)", True, parse=None),
    "partial": Checker("partial_reward", "deterministic rule, partial credit: the share of digit places that are "
                                         "right, 0 when truncated (partial_reward)", False),
}
REWARD_MODEL_PREFIX = "rm:"
SOURCES: dict = {}  # prefix -> loader(path, task) -> batched reward; filled by register_source


def register_source(prefix: str, loader) -> None:
    """A reward source registers itself (``course_lib.trainers.reward_model`` registers ``rm:``): no import back."""
    SOURCES[prefix] = loader


SPEC_HELP = " | ".join(CHECKERS) + f" | {REWARD_MODEL_PREFIX}DIR (a saved reward model)"


def check_reward_spec(spec) -> str:
    """Raise ValueError unless ``spec`` names a checker or ``rm:DIR``; return it."""
    if isinstance(spec, str) and (spec in CHECKERS or (spec.startswith(REWARD_MODEL_PREFIX) and len(spec) > 3)):
        return spec
    raise ValueError(f"reward must be one of {', '.join(map(repr, CHECKERS))} or 'rm:DIR' (a saved reward model); got "
                     f"{spec!r}")


class Scored(NamedTuple):
    """What a batched reward says about N completions: rewards, and what a dashboard counts beside them."""

    rewards: torch.Tensor  # (N,) float
    verifier_failed: torch.Tensor | None = None  # (N,) bool: the checker raised or could not parse; None: no checker
    overlong_penalty: torch.Tensor | None = None  # (N,) the shaping added to the rewards; None: no shaping


class CheckerReward:
    """A per-completion checker ``checker(pair, ids) -> float``, batched, that also reports verifier failures.

    Calling it gives the rewards (N,). ``score`` also says, per completion, whether the verifier
    *failed*: the checker raised (the completion then scores 0 and the run goes on, as a
    production verifier's timeout or crash must not stop training), or ``parse(ids)`` returned
    None — the completion holds no answer the checker can read (for the addition task: no
    ``<eos>``, or not digits). A wrong answer that parses is not a failure: it is a verdict.
    """

    def __init__(self, checker, parse=None):
        self.checker, self.parse = checker, parse

    def score(self, pairs, completions: torch.Tensor) -> Scored:
        rows = completions.tolist()
        if len(pairs) != len(rows):
            raise ValueError(f"pairs has {len(pairs)} prompts but completions has {len(rows)} rows")
        rewards, failed = [], []
        for p, c in zip(pairs, rows):
            try:
                value, bad = float(self.checker(p, c)), self.parse is not None and self.parse(c) is None
            except Exception:  # noqa: BLE001 - any checker error is a verifier failure, counted, not fatal
                value, bad = 0.0, True
            rewards.append(value)
            failed.append(bad)
        return Scored(torch.tensor(rewards, dtype=torch.float32), torch.tensor(failed, dtype=torch.bool))

    def __call__(self, pairs, completions: torch.Tensor) -> torch.Tensor:
        return self.score(pairs, completions).rewards


def checker_reward(checker, parse=None) -> CheckerReward:
    """Batch a per-completion checker ``checker(pair, ids) -> float`` (``parse``: see ``CheckerReward``)."""
    return CheckerReward(checker, parse)


def score(reward_fn, pairs, completions: torch.Tensor) -> Scored:
    """``reward_fn.score`` when it has one (checkers, shaped rewards), else its rewards alone (a reward model)."""
    if hasattr(reward_fn, "score"):
        return reward_fn.score(pairs, completions)
    return Scored(torch.as_tensor(reward_fn(pairs, completions), dtype=torch.float32))


class OverlongShaped:
    """A batched reward plus DAPO's soft overlong penalty (``overlong_penalty``) on each completion's length.

    The length is TRL's: the completion's tokens up to and including its first ``<eos>``, all of
    them when it has none (a truncated completion is ``max_completion_len`` long and gets −1).
    TRL adds ``get_soft_overlong_punishment(max_completion_len, soft_punish_cache)`` to the reward
    functions, summed with weight 1: the same sum.
    """

    def __init__(self, reward_fn, *, eos_token_id: int, max_completion_len: int, soft_punish_cache: int):
        overlong_penalty([0], max_completion_len, soft_punish_cache)  # validates both by name
        self.reward_fn, self.eos = reward_fn, eos_token_id
        self.max_completion_len, self.soft_punish_cache = max_completion_len, soft_punish_cache

    def score(self, pairs, completions: torch.Tensor) -> Scored:
        base = score(self.reward_fn, pairs, completions)
        is_eos = completions == self.eos
        before_eos = (is_eos.long().cumsum(-1) - is_eos.long()) == 0  # up to and including the first <eos>
        penalty = overlong_penalty(before_eos.sum(-1).cpu(), self.max_completion_len, self.soft_punish_cache)
        return Scored(base.rewards + penalty, base.verifier_failed, penalty)

    def __call__(self, pairs, completions: torch.Tensor) -> torch.Tensor:
        return self.score(pairs, completions).rewards


def resolve_reward(spec: str, task: AdditionTask):
    """The batched reward callable named by ``spec`` (see the module docstring)."""
    check_reward_spec(spec)
    if spec in CHECKERS:
        parse = CHECKERS[spec].parse
        return checker_reward(getattr(task, CHECKERS[spec].method), getattr(task, parse) if parse else None)
    if REWARD_MODEL_PREFIX not in SOURCES:
        raise ValueError(f"reward {spec!r} needs the learned reward-model source, which registers itself when "
                         "course_lib.trainers.reward_model is imported")
    return SOURCES[REWARD_MODEL_PREFIX](spec[len(REWARD_MODEL_PREFIX):], task)


def grpo_reward(cfg, task: AdditionTask):
    """The reward a GRPO run uses, in the trainer and in its rollout worker alike: the reward
    ``cfg.reward`` names, plus DAPO's overlong shaping when ``cfg.soft_punish_cache > 0``
    (``cfg``: a ``configs.GRPOConfig``)."""
    reward_fn = resolve_reward(cfg.reward, task)
    if cfg.soft_punish_cache == 0:
        return reward_fn
    return OverlongShaped(reward_fn, eos_token_id=task.tokenizer.eos_token_id,
                          max_completion_len=cfg.max_completion_length, soft_punish_cache=cfg.soft_punish_cache)


def reward_source(spec: str) -> str:
    """What the reward named by ``spec`` is, in the passport's words."""
    check_reward_spec(spec)
    if spec in CHECKERS:
        return CHECKERS[spec].description
    return f"learned reward model loaded from {spec[len(REWARD_MODEL_PREFIX):]} (course_lib.trainers.reward_model)"


def reward_granularity(spec: str) -> str:
    """How often and on what scale the reward is given (the passport's reward contract)."""
    check_reward_spec(spec)
    if spec in CHECKERS:
        return "once per completion (" + ("binary" if CHECKERS[spec].binary else "partial credit in [0, 1]") + ")"
    return "once per completion (a learned real-valued score)"


def overlong_penalty(lengths, max_length: int, cache: int) -> torch.Tensor:
    """DAPO's overlong reward shaping (its fourth mechanism): a soft penalty near the length cap.

    Yu et al. 2025, eq. 13 (TRL: ``trl.rewards.get_soft_overlong_punishment``). Added to the task's
    reward, for a completion of |y| tokens, with L = ``max_length`` and C = ``cache``:

        0                      if |y| <= L − C
        (L − C − |y|) / C      if L − C < |y| <= L   (falls linearly from 0 to −1)
        −1                     if |y| > L

    A truncated answer is cut at the cap with no chance of being right; without shaping it is
    scored like any wrong answer, which punishes the reasoning it did reach. The linear ramp tells
    the policy that length itself costs, before the cliff. ``lengths`` counts each completion's
    real tokens (its mask's sum), shape (N,).
    """
    number(max_length, "max_length", integer=True, low=1, why=" (the length cap L)")
    number(cache, "cache", integer=True, low=0, high=max_length, why=" (the soft zone C, at most max_length)")
    n = torch.as_tensor(lengths, dtype=torch.float32)
    if n.ndim != 1 or not bool((n >= 0).all()):
        raise ValueError(f"lengths must be a 1-d sequence of token counts >= 0; got shape {tuple(n.shape)}")
    start = max_length - cache
    ramp = (start - n) / max(cache, 1)
    return torch.where(n <= start, torch.zeros_like(n), torch.where(n <= max_length, ramp, -torch.ones_like(n)))
