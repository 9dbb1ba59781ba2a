"""Input handling shared by the numerical core.

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


def integer(value, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


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
