"""Run plumbing every trainer shares: threads, autocast, optimizer, metrics log, checkpoints, RNG,
progress bars and a Ctrl-C that requests a stop (``course_lib.trainer.train_loop`` honours it at a
step boundary).

Simplifications, said out loud:
- One process, one device. AdamW with a constant learning rate (the ``fused`` CPU/CUDA kernel:
  one call per step, no per-parameter Python loop and no host read of the step counter).
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
import signal
from pathlib import Path

import torch
from tqdm.auto import tqdm

CHECKPOINT_FORMAT = "course_lib-tinygpt-2"
DEFAULT_THREADS = 1


def set_threads(n: int | None = DEFAULT_THREADS) -> None:
    """Set torch's intra-op CPU threads (every trainer calls this; ``None`` leaves torch alone)."""
    if n is None:
        return
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"threads must be an integer >= 1 (or None to keep torch's setting); got {n!r}")
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


def autocast(device: torch.device):
    """bf16 autocast on CUDA; nothing elsewhere (CPU runs in float32)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def make_optimizer(model, learning_rate: float) -> torch.optim.Optimizer:
    """AdamW, no weight decay, the fused kernel where torch has one for the device."""
    device = next(model.parameters()).device
    fused = device.type in ("cpu", "cuda")
    return torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0, fused=fused or None)


def clip_gradients(model, max_norm: float) -> torch.Tensor:
    """Clip the global gradient norm (returns it as a tensor: reading it is the caller's choice)."""
    return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, foreach=True)


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


def progress(total: int, desc: str, enabled: bool = True, initial: int = 0):
    return tqdm(total=total, desc=desc, initial=initial, disable=not enabled, leave=False)


# ---- Ctrl-C at a step boundary -------------------------------------------------------------------
class Interrupted(Exception):
    """Raised by a trainer after it saved a checkpoint because a stop was requested (Ctrl-C)."""

    def __init__(self, stage: str, step: int):
        super().__init__(f"{stage} stopped at step {step}")
        self.stage, self.step = stage, step


_stop = {"requested": False}


def stop_requested() -> bool:
    return _stop["requested"]


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
