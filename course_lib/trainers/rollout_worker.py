"""An asynchronous rollout worker: sampling in its own process, K optimiser steps behind (§11).

Lecture §2 and §11: RL post-training became a data-generation system in which generation
overlaps optimisation and the staleness of the sampler's weights is an explicit knob (TRL's
``AsyncGRPOConfig.max_staleness``, prime-rl's ``max_async_level``, AReaL's
``max_head_offpolicyness``, verl's one-step-off policy). Here, on two CPU cores:

- the worker is a second process (one torch thread: its own core) running
  ``rollout.collect_rollouts`` — the same sampling, reward (``rewards.grpo_reward``) and
  zero-variance policy as the synchronous trainer — and sends each batch through a bounded queue,
  tagged with the weight *version* (optimiser steps taken) that sampled it;
- the weights reach it without a file: the trainer writes each new version into a ring of K + 1
  flat float32 slots in shared memory (``share_memory_``); the worker copies one slot into its
  own model before each batch;
- batch s is sampled with version max(0, s − K): a *fixed* lag, as verl's one-step-off policy
  (K = 1). The worker waits until that version is published, so no batch can be older than K
  and the trainer never discards one (TRL's queue, whose lag varies, drops samples older than K).
  K = 0 is the synchronous trainer, step for step (the worker waits for each update, and draws
  from the same random streams);
- each batch also carries the worker's random state after it, so a checkpoint can restart the
  worker exactly where the trainer's last consumed batch left it (with the ring's versions),
  and a resumed run reproduces the uninterrupted one on a CPU.

Faults: an exception in the worker travels to the trainer as ``RolloutWorkerError`` with the
worker's traceback (``runtime.StepFailed``: the trainer saves its completed steps first); a
worker killed from outside is reported with its exit code; a worker that sends no batch for
``worker_timeout`` seconds (stopped, or hung) fails the run with that reason. The worker ignores
SIGINT (a terminal's Ctrl-C reaches the whole process group; the trainer decides when to stop);
a stop requested while the trainer waits for a batch (the first Ctrl-C) ends the wait at once
(``runtime.Interrupted``: the trainer saves its completed steps). The worker exits when the
trainer stops it or its parent process is gone.

Simplifications, said out loud:
- A fixed lag, not "at most K": prime-rl and AReaL let the lag vary with timing, which makes a
  run depend on the machine's load; a fixed lag keeps every run reproducible, and is the
  worst case of "at most K".
- The worker samples on the CPU in float32 whatever the trainer's device; one worker.
- Processes start with ``fork`` on Linux (the worker inherits the imported modules: no 10 s of
  imports per start) and ``spawn`` elsewhere (macOS and Windows, where fork is unsafe).
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
import traceback

import torch
import torch.multiprocessing as tmp

from course_lib.tinygpt.runtime import Interrupted, StepFailed, stop_requested

POLL_SECONDS = 0.2  # how often a waiting side checks that the other one is still alive


class RolloutWorkerError(StepFailed):
    """The rollout worker failed or died; the message carries its error."""


def default_start_method() -> str:
    return "fork" if sys.platform.startswith("linux") else "spawn"


def _pack(obj):
    """Tensors as NumPy arrays, so a batch crosses the pipe by value: torch's own sharing of a tensor
    through a queue asks the sending process for a file descriptor later, which fails if it died."""
    if isinstance(obj, torch.Tensor):
        return ("__tensor__", obj.detach().cpu().numpy())
    if isinstance(obj, dict):
        return {k: _pack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_pack(v) for v in obj)
    return obj


def _unpack(obj):
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], str) and obj[0] == "__tensor__":
        return torch.from_numpy(obj[1])
    if isinstance(obj, dict):
        return {k: _unpack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unpack(v) for v in obj)
    return obj


def _flat(model) -> torch.Tensor:
    return torch.nn.utils.parameters_to_vector([p.detach() for p in model.parameters()]).float().cpu()


def _worker_main(spec: dict, ring, versions, published, lock, wake, out_q, stop) -> None:
    """The worker process: wait for the version batch s needs, copy it, sample, send; repeat."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    try:
        from course_lib.tinygpt.rewards import grpo_reward
        from course_lib.tinygpt.rollout import collect_rollouts

        cfg, K, task, model = spec["grpo"], spec["grpo"].max_staleness, spec["task"], spec["model"]
        model.eval().requires_grad_(False)
        reward_fn = grpo_reward(cfg, task)  # the trainer's reward, overlong shaping included
        torch.set_rng_state(spec["torch_rng"])
        gen = torch.Generator()
        gen.set_state(spec["data_rng"])
        parent = multiprocessing.parent_process()
        s = spec["first"]
        while True:
            need = max(0, s - K)
            while not stop.is_set():
                with lock:
                    if published.value >= need:
                        break
                wake.acquire(timeout=POLL_SECONDS)  # released by each publish
                if parent is not None and not parent.is_alive():
                    return _quit(out_q)
            if stop.is_set():
                return _quit(out_q)
            slot = need % (K + 1)
            if int(versions[slot]) != need:
                raise RuntimeError(f"weight slot {slot} holds version {int(versions[slot])}, batch {s} needs {need}")
            torch.nn.utils.vector_to_parameters(ring[slot].clone(), model.parameters())
            rollout = collect_rollouts(model, task, cfg, gen, reward_fn)
            msg = {"index": s, "version": need, "rollout": rollout,
                   "rng": {"torch": torch.get_rng_state(), "data": gen.get_state()},
                   "cpu_seconds": time.process_time(), "sent": time.time()}
            while not stop.is_set():
                try:
                    out_q.put(("batch", _pack(msg)), timeout=POLL_SECONDS)
                    break
                except queue.Full:
                    if parent is not None and not parent.is_alive():
                        return _quit(out_q)
            if stop.is_set():
                return _quit(out_q)
            s += 1
    except BaseException:  # noqa: BLE001 - everything goes to the trainer, which raises it
        out_q.put(("error", traceback.format_exc()))  # flushed before the process exits: the trainer reads it


def _drain(source, inbox: queue.Queue) -> None:
    """The trainer's reader thread: move the worker's messages into ``inbox`` as they arrive. Reading one
    blocks until all of it is in, so a worker stopped halfway through writing a batch would hold whoever
    reads, deaf to Ctrl-C and to the timeout; the trainer waits on ``inbox`` instead, with a timeout."""
    try:
        while True:
            item = source.get()
            inbox.put(item)
            if item[0] in ("error", "closed"):
                return
    except BaseException:  # noqa: BLE001 - the queue closed under it, or a batch torn by a killed worker
        return


def _quit(out_q) -> None:
    """Stopped: exit without waiting for the trainer to take the batches still buffered."""
    out_q.cancel_join_thread()


class RolloutWorker:
    """The trainer's handle on the worker: start, ``publish`` weights, ``next_batch``, ``close``.

    ``task`` and ``grpo_cfg`` are the trainer's (``collect_rollouts`` runs with them in the worker,
    which gets a CPU copy of ``model``). ``model`` holds the weights of version ``first`` (the
    trainer's current step); ``sampler`` is a checkpoint's ``state()`` to resume from, else
    ``torch_rng``/``data_rng`` are the random states the synchronous trainer would sample with. A
    context manager: ``close`` always runs.
    """

    def __init__(self, model, task, grpo_cfg, *, torch_rng: torch.Tensor, data_rng: torch.Tensor, first: int = 0,
                 sampler: dict | None = None, start_method: str | None = None):
        self.K, self.timeout = grpo_cfg.max_staleness, grpo_cfg.worker_timeout
        ctx = tmp.get_context(start_method or default_start_method())
        n = sum(p.numel() for p in model.parameters())
        self.ring = torch.zeros(self.K + 1, n).share_memory_()
        self.versions = torch.full((self.K + 1,), -1, dtype=torch.long).share_memory_()
        if sampler is not None:  # a checkpoint: the versions batches first … first+K−1 still need
            self.ring.copy_(sampler["ring"])
            self.versions.copy_(sampler["versions"])
            torch_rng, data_rng = sampler["rng"]["torch"], sampler["rng"]["data"]
        self.published = ctx.Value("q", first - 1, lock=False)
        # a lock and a semaphore, not a Condition: notifying a Condition waits for each sleeper to wake, and a
        # stopped worker never does; releasing a semaphore never waits
        self.lock, self.wake = ctx.Lock(), ctx.Semaphore(0)
        self.stop = ctx.Event()
        self.queue = ctx.Queue(maxsize=max(self.K, 1))
        self.rng = {"torch": torch_rng.clone(), "data": data_rng.clone()}  # after the last consumed batch
        self.worker_cpu_seconds = 0.0
        self.publish(model, first)
        spec = {"grpo": grpo_cfg, "task": task, "model": copy.deepcopy(model).cpu().float(), "torch_rng": torch_rng,
                "data_rng": data_rng, "first": first}
        self.process = ctx.Process(target=_worker_main, name="rollout-worker", daemon=True,
                                   args=(spec, self.ring, self.versions, self.published, self.lock, self.wake,
                                         self.queue, self.stop))
        self.process.start()
        self.inbox: queue.Queue = queue.Queue()
        self.reader = threading.Thread(target=_drain, args=(self.queue, self.inbox), name="rollout-reader",
                                       daemon=True)
        self.reader.start()

    def publish(self, model, version: int) -> None:
        """Write ``model``'s weights as ``version`` into its ring slot and wake the worker."""
        slot = version % (self.K + 1)
        self.ring[slot].copy_(_flat(model))
        self.versions[slot] = version
        deadline = time.monotonic() + self.timeout
        while not self.lock.acquire(timeout=POLL_SECONDS):  # held by a worker that stopped inside it
            if stop_requested():  # Ctrl-C: this step stands; the trainer stops after it, and close() resumes
                return            # the worker to see the stop
            if time.monotonic() > deadline:
                raise RolloutWorkerError(self._silent())
        try:
            self.published.value = version
        finally:
            self.lock.release()
        self.wake.release()

    def next_batch(self, step: int) -> dict:
        """The batch of ``step``, sampled with the weights of version max(0, step − K) (the worker's fixed lag)."""
        msg = self._receive(step)
        self.rng = msg["rng"]
        self.worker_cpu_seconds = msg["cpu_seconds"]
        return msg

    def _silent(self) -> str:
        return (f"the rollout worker (pid {self.process.pid}) sent no batch for {self.timeout:g} s "
                f"(grpo.worker_timeout): it is stopped or hung (raise --worker-timeout if one batch really takes "
                f"longer)")

    def _receive(self, step: int) -> dict:
        start = time.monotonic()
        while True:
            try:
                kind, payload = self.inbox.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if stop_requested():  # Ctrl-C while waiting: the trainer stops with its completed steps
                    raise Interrupted("grpo", step) from None
                if self.process.is_alive():
                    if time.monotonic() - start > self.timeout:
                        raise RolloutWorkerError(self._silent()) from None
                    continue
                try:  # its last words may have landed just after the timeout
                    kind, payload = self.inbox.get(timeout=POLL_SECONDS)
                except queue.Empty:
                    raise RolloutWorkerError(f"the rollout worker died (exit code {self.process.exitcode}) "
                                             "without reporting an error") from None
            if kind == "error":
                raise RolloutWorkerError(f"the rollout worker failed:\n{payload}")
            return _unpack(payload)

    def state(self) -> dict:
        """What a checkpoint needs to restart the worker where the trainer stands."""
        return {"ring": self.ring.clone(), "versions": self.versions.clone(),
                "rng": {k: v.clone() for k, v in self.rng.items()}}

    def close(self) -> None:
        """Stop the worker and wait for it (terminate, then kill, if it does not exit)."""
        self.stop.set()
        if hasattr(signal, "SIGCONT") and self.process.is_alive():  # a stopped worker resumes, to see the stop
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)
        self.wake.release()  # the worker also polls the stop: a release only wakes it sooner
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=5)
        if self.process.is_alive():
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.join()
        if self.reader.is_alive():  # wake the reader thread: it ends on this message
            with contextlib.suppress(queue.Full):
                self.queue.put(("closed", None), timeout=POLL_SECONDS)
            self.reader.join(timeout=POLL_SECONDS)
        self.queue.cancel_join_thread()  # batches left in the queue are dropped, not flushed
        self.queue.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
