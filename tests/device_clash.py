"""A CPU stand-in for a GPU's device rules: ``with DeviceClash() as clash: ...`` raises ``Clash`` where the
code inside would mix a device tensor with a host tensor on a real accelerator.

On a CPU every tensor is on the same device, so a forgotten ``.to(device)`` never fails here and fails
at once on CUDA ("Expected all tensors to be on the same device"). This mode (a ``TorchFunctionMode``:
it sees every call of torch's Python API, with the arguments as the code wrote them) pretends the
device the code was given is a second device. Every tensor it sees made gets a tag:

- **device**: made by ``.to(d)`` / ``.cuda()`` / a factory with ``device=d`` where ``d`` is a
  ``torch.device`` (what ``resolve_device``, ``next(model.parameters()).device`` and the notebooks'
  ``DEVICE`` are), or computed from a device tensor; so a model moved with ``.to(DEVICE)`` holds
  device parameters (``nn.Parameter`` keeps its data's tag, ``.grad`` / ``.data`` their tensor's);
- **host**: made by a factory without a device (``torch.tensor(list)``, ``torch.zeros(n)``,
  ``torch.randint(..., generator=cpu_generator)``, ``encode_pairs`` …), by ``.cpu()``, by
  ``"cpu"`` or ``torch.device("cpu")`` written in code run inside the mode, or a host tensor's
  ``.device`` (these read ``cpu:0`` inside the mode, so copies keep them), or computed from host
  tensors only (so ``DEVICE`` is made outside the mode, as a notebook's first cell makes it);
- untagged (a wildcard, never reported): tensors made before the mode or by torch's C++ internals.

It raises where CUDA would: an op whose inputs hold a device tensor and a host tensor of one or more
dimensions (a 0-dim host tensor is allowed, as CUDA allows CPU scalars), e.g. a device model called
on host ids, ``torch.cat`` / ``torch.where`` / arithmetic across the two, indexing a host tensor with
a device index, ``.numpy()`` of a device tensor. Allowed as on CUDA: ``copy_`` / ``load_state_dict``
across devices, ``.to`` either way, indexing a device tensor with a host index.

``python tests/device_clash.py notebooks/08_tiny_gpt_dpo.py`` runs a notebook's source (``COURSE_FAST=1``)
under it, hand-made cells included (``run_notebook``; minutes, so not part of the suite).

What it does not cover, said out loud: code that runs only when ``device.type == "cuda"`` (pinned
copies, memory statistics, the decode loop's stop-check cadence: the device here is still a CPU),
generator/device mismatches (``torch.randint(..., generator=cpu_gen, device=cuda)``), dtype rules of
autocast, values written into a device tensor by ``x[index] = host_values``, and another process
(the asynchronous rollout worker).
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakTensorKeyDictionary

DEVICE, HOST = "device", "host"
HOST_DEVICE = torch.device("cpu", 0)  # what .device of a host tensor reads as here ('cpu:0'; the device is 'cpu')
# transfers, plumbing: no same-device rule
MOVES = {"to", "cuda", "cpu", "mps", "copy_", "__deepcopy__", "__get__", "__set__", "set_", "pin_memory",
         "share_memory_", "__setitem__", "_has_compatible_shallow_copy_type"}


class Clash(RuntimeError):
    """A device tensor and a host tensor met in one op (CUDA would refuse it)."""


def _tensors(args, kwargs) -> list:
    return [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]



class DeviceClash(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.tags = WeakTensorKeyDictionary()
        self.checked = 0  # ops whose inputs were compared (a run that checked nothing proves nothing)

    def tag(self, t):
        return self.tags.get(t) if isinstance(t, torch.Tensor) else None

    def target(self, value):
        """The tag a device argument gives: ``"cpu"`` (a string) or a host tensor's ``.device`` is the host; any
        other ``torch.device`` (``DEVICE``, a device tensor's ``.device``) or device name is the device."""
        if isinstance(value, str):
            return HOST if value.split(":")[0] == "cpu" else DEVICE
        if isinstance(value, torch.device):
            return HOST if value == HOST_DEVICE else DEVICE
        return None

    def __enter__(self):
        original = self._new = torch.nn.Parameter.__new__
        mode = self

        def parameter_new(cls, data=None, requires_grad=True):  # a Parameter keeps its data's tag
            p = original(cls, data, requires_grad)
            if isinstance(data, torch.Tensor) and mode.tag(data) is not None:
                mode.tags[p] = mode.tag(data)
            return p

        torch.nn.Parameter.__new__ = staticmethod(parameter_new)
        return super().__enter__()

    def __exit__(self, *exc):
        torch.nn.Parameter.__new__ = staticmethod(self._new)
        return super().__exit__(*exc)

    def _check(self, name, func, args, kwargs):
        tensors = _tensors(args, kwargs)
        # CUDA: "can't convert cuda tensor to numpy"
        if name in ("numpy", "__array__") and self.tag(args[0]) == DEVICE:
            raise Clash(f"{name}() of a device tensor {tuple(args[0].shape)}: move it with .cpu() first")
        if name == "__getitem__":  # a device tensor takes host indices; a host tensor no device index
            if self.tag(args[0]) == HOST and any(self.tag(t) == DEVICE for t in tensors[1:]):
                raise Clash(f"indexing a host tensor {tuple(args[0].shape)} with a device tensor")
            return
        device = [t for t in tensors if self.tag(t) == DEVICE]
        host = [t for t in tensors if self.tag(t) == HOST and t.dim() > 0]
        if device or host:
            self.checked += 1
        if device and host:
            raise Clash(f"{getattr(func, '__qualname__', name)} mixes a device tensor {tuple(device[0].shape)} with a "
                        f"host tensor {tuple(host[0].shape)} (CUDA: 'Expected all tensors to be on the same device')")

    def _out_tag(self, name, args, kwargs):
        tensors_in = _tensors(args, kwargs)
        if name == "cpu":
            return HOST
        if name in ("cuda", "mps"):
            return DEVICE
        if name == "to":
            targets = [v for v in (*args[1:], kwargs.get("device"), kwargs.get("other")) if v is not None]
            moved = [self.target(v) for v in targets if self.target(v) is not None]
            others = [self.tag(v) for v in targets if isinstance(v, torch.Tensor)]
            return moved[0] if moved else others[0] if others else self.tag(args[0])
        if name in ("copy_", "__setitem__", "set_"):
            return self.tag(args[0])
        if kwargs.get("device") is not None:
            return self.target(kwargs["device"])
        seen = [self.tag(t) for t in tensors_in]
        return DEVICE if DEVICE in seen else HOST if HOST in seen or not tensors_in else None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name not in MOVES:
            self._check(name, func, args, kwargs)
        out = func(*args, **kwargs)
        if func is torch.device:  # torch.device("cpu") written in the code (to_device's "cpu" default): the host
            return HOST_DEVICE if args and self.target(args[0]) == HOST else out
        if isinstance(out, torch.device):  # a host tensor's .device says so, and survives torch.device(d) copies
            return HOST_DEVICE if args and self.tag(args[0]) == HOST else out
        if name == "__set__" and len(args) == 2 and self.tag(args[1]) is not None:  # p.data = moved (Module.to)
            self.tags[args[0]] = self.tag(args[1])
            return out
        tag = self._out_tag(name, args, kwargs)
        if name in ("to", "cpu", "cuda", "mps") and out is args[0] and tag != self.tag(out):
            out = out.view_as(out)  # a real move makes a new tensor; here the same storage, under a new name
        if tag is not None:
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    self.tags[t] = tag
        return out


def run_notebook(source: str) -> int:
    """Run a notebook's Jupytext source (``COURSE_FAST=1``, figures to Agg) under the mode, its ``DEVICE`` the
    accelerator's stand-in: every hand-made cell is checked too. Returns the ops compared."""
    import os
    import runpy
    from pathlib import Path

    import course_lib.tinygpt.device

    os.environ.setdefault("COURSE_FAST", "1")
    os.environ.setdefault("MPLBACKEND", "Agg")
    device = torch.device("cpu")  # made here, outside the mode: the device the notebook is given
    course_lib.tinygpt.device.resolve_device = lambda name="auto": device
    path = Path(source).resolve()
    os.chdir(path.parent)
    with DeviceClash() as clash:
        runpy.run_path(str(path), run_name="__main__")
    return clash.checked


if __name__ == "__main__":  # python tests/device_clash.py notebooks/08_tiny_gpt_dpo.py
    import sys

    print(f"no device clash; {run_notebook(sys.argv[1])} ops compared")
