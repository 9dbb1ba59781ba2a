"""Input handling shared by the numerical core, and the one rule for every numeric option.

``number`` is the rule every config check uses (``configs``, the judge's, the episode limits, the
behaviour correction's bounds, ``--threads``): a float option is a finite number, an integer
option an integer, each within its bounds, and the error names the option and the values it
accepts ("grpo.beta must be a finite number >= 0; got inf").

Every public formula accepts Python floats, lists, NumPy arrays or torch tensors.
Rule for outputs: tensor in -> tensor out (dtype, device and autograd graph kept, so the
trainer can differentiate through the same function); anything else in -> a Python float
for a scalar result, a NumPy float64 array otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import torch


def to_tensor(x, name: str) -> tuple[torch.Tensor, bool]:
    """Return ``(tensor, came_as_tensor)``; non-tensors become float64 tensors."""
    if isinstance(x, torch.Tensor):
        t = x if x.is_floating_point() else x.double()
        return t, True
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a number or an array of numbers, got {x!r}") from err
    return torch.from_numpy(arr.copy()), False


def check_finite(t: torch.Tensor, name: str) -> None:
    if not bool(torch.isfinite(t.detach()).all()):
        raise ValueError(f"{name} must contain only finite values (no NaN or inf)")


def finite_tensor(x, name: str) -> tuple[torch.Tensor, bool]:
    t, was_tensor = to_tensor(x, name)
    check_finite(t, name)
    return t, was_tensor


def broadcast(named: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    try:
        return list(torch.broadcast_tensors(*named.values()))
    except RuntimeError as err:
        shapes = ", ".join(f"{k}{tuple(v.shape)}" for k, v in named.items())
        raise ValueError(f"shapes do not broadcast together: {shapes}") from err


def output(t: torch.Tensor, as_tensor: bool):
    """Convert a result back to the caller's world (see module docstring)."""
    if as_tensor:
        return t
    arr = t.detach().cpu().double().numpy()
    return float(arr) if arr.ndim == 0 else arr


def positive_scalar(value, name: str, *, allow_zero: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a finite number, got {value!r}") from err
    ok = math.isfinite(v) and (v >= 0 if allow_zero else v > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
    return v


def choice(value, name: str, accepted: Iterable[str]) -> str:
    accepted = tuple(accepted)
    if value not in accepted:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, accepted))}; got {value!r}")
    return value


def accepted(*, integer: bool = False, low=None, high=None, low_open: bool = False, high_open: bool = False,
             none: str | None = None) -> str:
    """The accepted values of a numeric option, in words: "a finite number in (0, 1]", "an integer >= 2", …"""
    text = "an integer" if integer else "a finite number"
    if low is not None and high is not None:
        text += f" in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    elif low is not None:
        text += f" {'>' if low_open else '>='} {low}"
    elif high is not None:
        text += f" {'<' if high_open else '<='} {high}"
    return f"None ({none}) or {text}" if none else text


def number(value, name: str, *, integer: bool = False, low=None, high=None, low_open: bool = False,
           high_open: bool = False, none: str | None = None, why: str = ""):
    """The one rule for a numeric option: ``value`` itself, or ValueError naming ``name`` and the accepted values.

    A float option takes any finite int or float (never a bool, NaN or ±inf); ``integer=True`` only
    integers. ``low``/``high`` bound it (``*_open``: the bound itself is refused); ``none`` says what
    None means where None is accepted; ``why`` follows the accepted values in the message.
    """
    if value is None and none:
        return value
    if isinstance(value, bool):
        ok = False
    elif integer:
        ok = isinstance(value, (int, np.integer))
    else:
        ok = isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        rule = accepted(integer=integer, low=low, high=high, low_open=low_open, high_open=high_open, none=none)
        raise ValueError(f"{name} must be {rule}{why}; got {value!r}")
    return value


def integer(value, name: str, *, minimum: int) -> int:
    return int(number(value, name, integer=True, low=minimum))


def tensors(**named) -> tuple[list[torch.Tensor], bool]:
    """Validate and broadcast; non-tensors follow the first tensor's dtype and device."""
    out, first = {}, None
    for name, value in named.items():
        t, was_tensor = finite_tensor(value, name)
        out[name] = t
        if was_tensor and first is None:
            first = t
    if first is not None:
        out = {k: v.to(dtype=first.dtype, device=first.device) for k, v in out.items()}
    return broadcast(out), first is not None
