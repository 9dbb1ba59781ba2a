"""Run plumbing every trainer shares: threads, autocast, optimizer, metrics, checkpoints, Ctrl-C.

Also the RNG state and progress bars; a Ctrl-C requests a stop (``course_lib.trainers.trainer.train_loop``
honours it at a step boundary).

Simplifications, said out loud:
- One process, one device. AdamW with a constant learning rate (the ``fused`` CPU/CUDA kernel:
  one call per step, no per-parameter Python loop and no host read of the step counter).
- Precision by device (``precision``): bf16 autocast on CUDA devices of compute capability 8.0 or
  newer (A100, L4, H100, H200); float32 below that (Colab's T4 is sm_75: no bf16 tensor cores,
  ``torch.cuda.is_bf16_supported()`` still says True because bf16 is emulated, slowly) and on
  CPU/MPS. fp16 would need a GradScaler in every course loop, and the scaler reads the host
  every step (its inf check); the tiny GPT is launch-bound, so fp32 costs it little. The TRL
  bridge, whose trainers bring their own GradScaler, takes fp16 there (``trl_precision``).
- Roles (``full_precision``): the policy paths autocast; the reward model's scores and the lab
  checks run in float32 with TF32 matmuls off, even inside a policy's autocast.
- Threads: the tiny GPT's matrices are small (96 wide on the cpu config) and the trainers run
  torch with ``DEFAULT_THREADS`` = 1 intra-op thread. ``benchmarks/tinygpt_threads.py`` measures
  the choice; on the course's 2-core machine shared with other jobs, 2 threads made an SFT step
  ~18× and a GRPO step ~10× slower than 1 thread (oversubscribed cores wait for each other).
  Not measured on an idle machine; pass ``threads=`` (``--threads``) to choose otherwise.
- Checkpoints are written atomically (a temporary file, then ``os.replace``); resume restores the
  model, optimizer, step counter, elapsed seconds, torch's RNG and the trainer's data generator,
  so a resumed CPU run reproduces the uninterrupted one exactly.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sys
from pathlib import Path

import torch
from tqdm.auto import tqdm
from tqdm.notebook import tqdm as notebook_tqdm

from course_lib._validate import number

CHECKPOINT_FORMAT = "course_lib-tinygpt-2"
DEFAULT_THREADS = 1


def check_threads(n: int | None) -> int | None:
    """``n`` itself if it is None or an integer in [1, this machine's cores], else ValueError saying why."""
    return number(n, "threads", integer=True, low=1, high=os.cpu_count() or None, none="keep torch's setting",
                  why=" (the cores of this machine: more threads than cores only wait for each other)")


def set_threads(n: int | None = DEFAULT_THREADS) -> None:
    """Set torch's intra-op CPU threads (every trainer calls this; ``None`` leaves torch alone)."""
    if check_threads(n) is None:
        return
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


BF16_MIN_CAPABILITY = (8, 0)  # Ampere: the first bf16 tensor cores


def cuda_capability(device: torch.device | str) -> tuple[int, int] | None:
    """``(major, minor)`` of a CUDA device (sm_75 → (7, 5)); None for any other device."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    return tuple(torch.cuda.get_device_capability(device))


def precision(device: torch.device | str) -> str:
    """The course trainers' compute dtype on ``device``: ``"bf16"`` (autocast) on CUDA sm_80+, else ``"fp32"``."""
    capability = cuda_capability(device)
    return "bf16" if capability is not None and capability >= BF16_MIN_CAPABILITY else "fp32"


def trl_precision(device: torch.device | str) -> str:
    """TRL's mixed precision on ``device``: ``"bf16"`` on sm_80+, ``"fp16"`` (TRL's GradScaler) on older CUDA,
    else ``"fp32"``."""
    if cuda_capability(device) is None:
        return "fp32"
    return "bf16" if precision(device) == "bf16" else "fp16"


def describe_precision(device: torch.device | str) -> str:
    """One line for the environment check and the passport: dtype, and why."""
    capability = cuda_capability(device)
    if capability is None:
        return f"fp32 ({torch.device(device).type}: no autocast)"
    sm = f"sm_{capability[0]}{capability[1]}"
    if precision(device) == "bf16":
        return f"bf16 autocast ({sm} has bf16 tensor cores); reward model and lab checks fp32, TF32 off"
    return (f"fp32 ({sm} has no bf16 tensor cores: bf16 would be emulated); the TRL bridge uses fp16 with a "
            "GradScaler")


def autocast(device: torch.device):
    """bf16 autocast where ``precision(device)`` is bf16 (CUDA sm_80+); nothing elsewhere (float32)."""
    if precision(device) == "bf16":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


@contextlib.contextmanager
def full_precision(device: torch.device | str):
    """float32 with TF32 off, even inside an autocast: for the reward model's scores and the lab checks.

    TF32 matmuls keep 10 mantissa bits; a reward that ranks two close completions, or a check that
    compares two implementations to 1e-5, must not depend on whether a caller enabled them.
    """
    device = torch.device(device)
    if device.type != "cuda":
        with torch.autocast(device.type, enabled=False) if device.type == "cpu" else contextlib.nullcontext():
            yield
        return
    backends = (torch.backends.cuda.matmul, torch.backends.cudnn)
    new_api = hasattr(torch.backends.cuda.matmul, "fp32_precision")  # torch >= 2.9; mixing the two APIs errors
    name, off = ("fp32_precision", "ieee") if new_api else ("allow_tf32", False)
    saved = [getattr(b, name) for b in backends]
    for b in backends:
        setattr(b, name, off)
    try:
        with torch.autocast("cuda", enabled=False):
            yield
    finally:
        for b, value in zip(backends, saved):
            setattr(b, name, value)

def to_device(data, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Host data (a Python list or a CPU tensor) onto ``device`` without a synchronisation.

    ``torch.tensor(data, device="cuda")`` copies from pageable memory and then waits for the stream
    (a host synchronisation each time). Here the data is staged in pinned memory and copied with
    ``non_blocking=True``: the copy is queued behind the work already launched. On the CPU it is
    just ``torch.as_tensor``. The one door the trainers' hot loops use for host-to-device data.
    """
    device = torch.device(device)
    tensor = torch.as_tensor(data, dtype=dtype)
    if device.type == "cuda":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def read_metrics(values: dict) -> dict:
    """A step's logged numbers on the host in one transfer: every tensor in ``values`` becomes a float
    (one synchronisation per step instead of one per number); other values pass through."""
    keys = [k for k, v in values.items() if isinstance(v, torch.Tensor)]
    if not keys:
        return dict(values)
    device = values[keys[0]].device  # a CPU checker's number joins the device's (a copy, not a sync)
    read = torch.stack([values[k].detach().float().reshape(()).to(device) for k in keys]).tolist()
    return {**values, **dict(zip(keys, read, strict=True))}


def make_optimizer(model, learning_rate: float) -> torch.optim.Optimizer:
    """AdamW, no weight decay, the fused kernel where torch has one for the device."""
    device = next(model.parameters()).device
    fused = device.type in ("cpu", "cuda")
    return torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0, fused=fused or None)


def clip_gradients(model, max_norm: float) -> torch.Tensor:
    """Clip the global gradient norm (returns it as a tensor: reading it is the caller's choice)."""
    return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, foreach=True)


def optimizer_step(loss: torch.Tensor, max_grad_norm: float, *pairs, zero_gradient: bool = False) -> None:
    """One update of every ``(model, optimizer)`` pair: clear the gradients, backpropagate ``loss`` (when it has
    a graph), clip each model's gradient norm, step. ``zero_gradient=True``: a step with an all-zero gradient
    instead (nothing to learn from, yet the optimiser's moments and weight decay move as in any step)."""
    for model, opt in pairs:
        opt.zero_grad(set_to_none=True)
        if zero_gradient:
            for p in model.parameters():
                p.grad = torch.zeros_like(p) if p.requires_grad else None
    if loss.requires_grad and not zero_gradient:
        loss.backward()
    for model, _ in pairs:
        clip_gradients(model, max_grad_norm)
    for _, opt in pairs:
        opt.step()


class MetricsLog:
    """Per-step metrics in memory and in a JSON-lines file (one object per line)."""

    def __init__(self, path: str | os.PathLike | None = None, rows: list[dict] | None = None):
        self.path = Path(path) if path else None
        self.rows = list(rows or [])
        if self.path:  # rewrite what the checkpoint knows, dropping rows logged after it
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "w", encoding="utf-8") as fh:
                for row in self.rows:
                    fh.write(json.dumps(row) + "\n")

    def append(self, row: dict) -> None:
        self.rows.append(row)
        if self.path:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")


def save_checkpoint(path, state: dict) -> None:
    """Write atomically: a temporary file in the same folder, then ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"format": CHECKPOINT_FORMAT, **state}, tmp)
    os.replace(tmp, path)


def load_checkpoint(path, *, kind: str | None = None) -> dict:
    """Load a checkpoint written by ``save_checkpoint``; clear errors for anything else."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure means "not ours"
        raise ValueError(f"{path} is not a readable course_lib checkpoint ({type(err).__name__}: {err})") from err
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a course_lib tiny-GPT checkpoint (format tag missing or wrong)")
    if kind is not None and state.get("kind") != kind:
        raise ValueError(f"{path} holds a {state.get('kind')!r} checkpoint, but {kind!r} was asked for")
    return state


def rng_state(data_gen: torch.Generator) -> dict:
    state = {"torch": torch.get_rng_state(), "data": data_gen.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict, data_gen: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    data_gen.set_state(state["data"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class _NotebookBar(notebook_tqdm):
    """Jupyter's widget bar, shown under a display id: when it closes, the output is replaced by the
    bar's final text, so a saved or executed notebook shows where it ended (100%, the time taken),
    not the "0%" text recorded when the widget was first displayed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, display=False, **kwargs)
        self._handle = None
        if not self.disable:
            from IPython.display import display

            self._handle = display(self.container, display_id=True)
            self.displayed = True

    def close(self):
        if self.disable:
            return
        super().close()
        if self._handle is not None:
            self._handle.update({"text/plain": self.container.__repr__(pretty=True)}, raw=True)
            self._handle = None


def progress(total: int, desc: str, enabled: bool = True, initial: int = 0):
    """A progress bar: text in a terminal; in Jupyter a widget that leaves its final text behind."""
    bar = _NotebookBar if issubclass(tqdm, notebook_tqdm) else tqdm
    return bar(total=total, desc=desc, initial=initial, disable=not enabled, leave=False)


# ---- Ctrl-C at a step boundary -------------------------------------------------------------------
def resume_command(kind: str, out) -> str:
    """The command that continues the run in ``out``, ready to paste (``kind``: a trainer or ``recipe``).

    The Python is this process's: relative to the working folder when inside it (``.venv/bin/python``).
    """
    python = Path(sys.executable)
    with contextlib.suppress(ValueError):
        python = python.relative_to(Path.cwd())
    return f"{shlex.quote(str(python))} -m course_lib train {kind} --resume {shlex.quote(str(out))}"


class Interrupted(Exception):
    """Raised by a trainer after it saved a checkpoint because a stop was requested (Ctrl-C)."""

    def __init__(self, stage: str, step: int):
        super().__init__(f"{stage} stopped at step {step}")
        self.stage, self.step = stage, step


class StepFailed(RuntimeError):
    """A step could not start for a reason outside the trainer's own state (its rollout worker
    failed): ``train_loop`` saves the completed steps (a resumable checkpoint), then re-raises."""


_stop = {"requested": False}


def stop_requested() -> bool:
    return _stop["requested"]


def clear_stop() -> None:
    """Forget a stop request (a script that stopped one trainer and starts the next)."""
    _stop["requested"] = False


def request_stop() -> None:
    """Ask the running trainer to checkpoint and stop after its current step."""
    _stop["requested"] = True


@contextlib.contextmanager
def stop_on_interrupt():
    """Turn the first Ctrl-C into ``request_stop()`` (a second one interrupts at once)."""
    def handler(signum, frame):
        if _stop["requested"]:
            raise KeyboardInterrupt
        request_stop()

    _stop["requested"] = False
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _stop["requested"] = False
