"""Where a trainer's reward comes from: a named checker or a learned reward model (§4, §15).

``resolve_reward(spec, task)`` turns the config's ``reward`` string into one batched callable
``reward(pairs, completions) -> FloatTensor[N]``: ``pairs`` holds the prompt ``(a, b)`` of
each of the N rows, ``completions`` the generated ids ``(N, L)``. Specs:

- ``"strict"`` the exact-answer checker (``AdditionTask.strict_reward``);
- ``"loose"``  the deliberately exploitable checker of notebook 08 (``loose_reward``);
- ``"partial"`` partial credit, the share of digit places that are right (``partial_reward``;
  notebook 07's "where the baseline matters");
- ``"rm:DIR"`` a reward model saved in ``DIR``, loaded by ``course_lib.reward_model.load_reward``.

Simplification: the checkers are plain Python on lists of token ids (one ``tolist()`` per
batch, not a tensor per token), so scoring a batch costs microseconds per completion.
"""

from __future__ import annotations

import importlib

import torch

from course_lib.task import AdditionTask

CHECKERS = ("strict", "loose", "partial")
REWARD_MODEL_PREFIX = "rm:"


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
    if spec == "strict":
        return checker_reward(task.strict_reward)
    if spec == "loose":
        return checker_reward(task.loose_reward)
    if spec == "partial":
        return checker_reward(task.partial_reward)
    try:
        reward_model = importlib.import_module("course_lib.reward_model")
    except ModuleNotFoundError as err:
        raise ValueError(
            f"reward {spec!r} needs course_lib.reward_model (a learned reward model), which is not installed "
            "in this copy of course_lib; use 'strict', 'loose' or 'partial'"
        ) from err
    return reward_model.load_reward(spec[len(REWARD_MODEL_PREFIX):], task)
