"""Where a trainer's reward comes from: a named checker or a learned reward model (§4, §15).

``resolve_reward(spec, task)`` turns the config's ``reward`` string into one batched callable
``reward(pairs, completions) -> FloatTensor[N]``: ``pairs`` holds the prompt ``(a, b)`` of
each of the N rows, ``completions`` the generated ids ``(N, L)``. Specs:

- ``"strict"`` the exact-answer checker (``AdditionTask.strict_reward``);
- ``"loose"``  the deliberately exploitable checker of notebook 08 (``loose_reward``);
- ``"partial"`` partial credit, the share of digit places that are right (``partial_reward``;
  notebook 07's "where the baseline matters");
- ``"rm:DIR"`` a reward model saved in ``DIR``, loaded by ``course_lib.reward_model.load_reward``
  (which registers itself as the ``rm:`` source: this module never imports it).

Simplification: the checkers are plain Python on lists of token ids (one ``tolist()`` per
batch, not a tensor per token), so scoring a batch costs microseconds per completion.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from course_lib.task import AdditionTask


class Checker(NamedTuple):
    """A named rule-based reward: the ``AdditionTask`` method that scores one completion, and its words."""

    method: str
    description: str  # what the passport says the reward is
    binary: bool  # 1 or 0 (False: values in between, partial credit)


# The one home of the checker names: validation, the CLI's help and the passport read this table.
CHECKERS = {
    "strict": Checker("strict_reward", "deterministic rule: exact answer digits followed by <eos> "
                                       "(course_lib.task.strict_reward)", True),
    "loose": Checker("loose_reward", "deterministic rule, deliberately loose: answer digits in order anywhere in "
                                     "the output (loose_reward)", True),
    "partial": Checker("partial_reward", "deterministic rule, partial credit: the share of digit places that are "
                                         "right, 0 when truncated (partial_reward)", False),
}
REWARD_MODEL_PREFIX = "rm:"
SOURCES: dict = {}  # prefix -> loader(path, task) -> batched reward; filled by register_source


def register_source(prefix: str, loader) -> None:
    """A reward source registers itself (``course_lib.reward_model`` registers ``rm:``): no import back."""
    SOURCES[prefix] = loader


SPEC_HELP = " | ".join(CHECKERS) + f" | {REWARD_MODEL_PREFIX}DIR (a saved reward model)"


def check_reward_spec(spec) -> str:
    """Raise ValueError unless ``spec`` names a checker or ``rm:DIR``; return it."""
    if isinstance(spec, str) and (spec in CHECKERS or (spec.startswith(REWARD_MODEL_PREFIX) and len(spec) > 3)):
        return spec
    raise ValueError(f"reward must be one of {', '.join(map(repr, CHECKERS))} or 'rm:DIR' (a saved reward model); got {spec!r}")


def checker_reward(checker):
    """Batch a per-completion checker ``checker(pair, ids) -> float``."""
    def reward(pairs, completions: torch.Tensor) -> torch.Tensor:
        rows = completions.tolist()
        if len(pairs) != len(rows):
            raise ValueError(f"pairs has {len(pairs)} prompts but completions has {len(rows)} rows")
        return torch.tensor([checker(p, c) for p, c in zip(pairs, rows)], dtype=torch.float32)

    return reward


def resolve_reward(spec: str, task: AdditionTask):
    """The batched reward callable named by ``spec`` (see the module docstring)."""
    check_reward_spec(spec)
    if spec in CHECKERS:
        return checker_reward(getattr(task, CHECKERS[spec].method))
    if REWARD_MODEL_PREFIX not in SOURCES:
        raise ValueError(f"reward {spec!r} needs the learned reward-model source, which registers itself when "
                         "course_lib.reward_model is imported")
    return SOURCES[REWARD_MODEL_PREFIX](spec[len(REWARD_MODEL_PREFIX):], task)


def reward_source(spec: str) -> str:
    """What the reward named by ``spec`` is, in the passport's words."""
    check_reward_spec(spec)
    if spec in CHECKERS:
        return CHECKERS[spec].description
    return f"learned reward model loaded from {spec[len(REWARD_MODEL_PREFIX):]} (course_lib.reward_model)"


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
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be an integer >= 1 (the length cap L); got {max_length!r}")
    if isinstance(cache, bool) or not isinstance(cache, int) or not 0 <= cache <= max_length:
        raise ValueError(f"cache must be an integer in [0, max_length={max_length}] (the soft zone C); got {cache!r}")
    n = torch.as_tensor(lengths, dtype=torch.float32)
    if n.ndim != 1 or not bool((n >= 0).all()):
        raise ValueError(f"lengths must be a 1-d sequence of token counts >= 0; got shape {tuple(n.shape)}")
    start = max_length - cache
    ramp = (start - n) / max(cache, 1)
    return torch.where(n <= start, torch.zeros_like(n), torch.where(n <= max_length, ramp, -torch.ones_like(n)))
