"""SFT starts shared by the notebooks: trained once per machine, then read from a disk cache.

Every tiny-GPT notebook (and the KL term's β sweep) begins from an SFT policy of the same task and model.
Training it is the slowest part of a short run, and it is the same model every time: ``sft_start``
trains it once (through ``pipeline.sft_policy``, the SFT stage of every run) and saves it; later
calls load it.

The cache can never serve a stale start: a file's name is a hash of everything that decides its
weights — the task, model and SFT sections of the config, the SFT step count, the gradient-clip
norm, the seed, torch's version and CPU kernel set, and the source of every module the SFT stage runs. Change any of
them and a new start is trained. Builds are atomic (a temporary file in the cache folder, then
``os.replace``), and a lock file makes a second process that asks for the same start at the same
time wait for the first and read its file, so two notebooks or two test workers can ask at once.

``env_start`` gives a policy that can call an environment's tools (``course_lib.tinygpt.environments``)
the cheap way: the shared start of the same config without the environment, its vocabulary grown by
the tool's characters (the new rows of the tied embedding start at zero: logit 0 for the new
characters, far below a trained model's preferred token), then a short SFT on the environment's
demonstrations. It is cached the same way, keyed by the base start, the environment's task options
and the extra steps.

Devices: ``device=`` (``"cpu"``, the default, ``"auto"``, ``"cuda"``, ``"mps"`` or a ``torch.device``;
the notebooks pass their ``DEVICE``) is where the returned model lives and where a start that is not
cached yet is trained. The cache itself is device-independent: a file holds CPU tensors, and a read
maps it to the CPU, then moves the model. A start trained on a GPU (bf16 autocast) matches its key
like any other, but its weights differ in the last bits from the CPU-trained one (see below).

Where: ``$COURSE_CACHE`` if set, else ``$XDG_CACHE_HOME/learning-from-feedback`` (default
``~/.cache/learning-from-feedback``), folder ``sft_starts``.

Simplifications, said out loud: bit-identical weights are not promised across machines (a start
trained here with 1 thread and one trained elsewhere, or on a GPU, may differ in the last float bits), only that a
start matches its key; old starts are never deleted (each is ~1 MB: delete the folder to free it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

import torch

import course_lib
from course_lib._validate import number
from course_lib.tinygpt.device import DEVICES, resolve_device
from course_lib.trainers import configs
from course_lib.trainers.trainer import TrainContext

# The modules whose code decides an SFT start's weights (the key hashes their source).
SOURCES = ("configs", "evaluation", "model", "pipeline", "policy_loss", "rollout", "runtime", "sft", "starts", "task",
           "trainer")


def cache_dir() -> Path:
    """The folder that holds the starts (see the module docstring)."""
    root = os.environ.get("COURSE_CACHE")
    if root:
        return Path(root) / "sft_starts"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "learning-from-feedback" / "sft_starts"


def code_version() -> str:
    """A hash of torch's version, its CPU kernel set and the source of every module in ``SOURCES``.

    The kernel set (``torch.backends.cpu.get_cpu_capability()``: "AVX2", "AVX512", …) is part of the
    key because it changes the rounding: the same code trained the ``cpu`` config's seed-0 start to
    56.6% held-out with AVX2 kernels and to 51.2% with AVX-512 ones."""
    digest = hashlib.sha256(torch.__version__.encode())
    digest.update(torch.backends.cpu.get_cpu_capability().encode())
    for name in SOURCES:
        digest.update(_source(name))
    return digest.hexdigest()[:16]


def _source(name: str) -> bytes:
    """The source of the course_lib module called ``name``, wherever it sits in the package (its bytes
    decide the key, not its path)."""
    (path,) = Path(course_lib.__file__).resolve().parent.rglob(f"{name}.py")
    return path.read_bytes()


def start_key(cfg: configs.RunConfig, *, seed: int = 0, steps: int | None = None) -> str:
    """The cache key of the SFT start of ``cfg`` after ``steps`` (default ``cfg.sft.steps``) with ``seed``."""
    sft = dataclasses.replace(cfg.sft, steps=cfg.sft.steps if steps is None else steps)
    spec = {"task": dataclasses.asdict(cfg.task), "model": dataclasses.asdict(cfg.model),
            "sft": dataclasses.asdict(sft),
            "max_grad_norm": cfg.max_grad_norm, "seed": seed, "code": code_version()}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:20]


@contextlib.contextmanager
def _lock(path: Path):
    """An exclusive lock on ``path`` (POSIX ``flock``; elsewhere none: the atomic rename still keeps files whole)."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def resolve(device) -> torch.device:
    """``device`` as a ``torch.device``: one of ``DEVICES`` (``"auto"`` picks CUDA, then MPS, else the CPU)
    or a ``torch.device`` (taken as it is); anything else is refused naming the argument."""
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str) or device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES} or a torch.device (where the start's model goes); "
                         f"got {device!r}")
    return resolve_device(device)


def sft_start(cfg: configs.RunConfig, *, seed: int = 0, steps: int | None = None, verbose: bool = True,
              device: str | torch.device = "cpu"):
    """``(task, model, info)``: the SFT policy of ``cfg`` on ``device``, trained once and cached.

    The same model as ``pipeline.sft_policy(cfg, seed=seed, steps=steps, device=device)``.
    ``info`` holds the held-out evaluation of the start (``accuracy``, ``accuracy_carry``, …),
    ``sft_seconds`` (the training time when it was built), ``steps``, ``built_on`` (the device type
    it was trained on), ``cached`` (False when this call trained it) and ``path``.
    """
    from course_lib.run.pipeline import sft_policy
    from course_lib.tinygpt.evaluation import evaluate

    if steps is not None:
        number(steps, "steps", integer=True, low=0, why=" (SFT optimiser steps) or None for cfg.sft.steps")
    number(seed, "seed", integer=True)
    dev = resolve(device)
    configs.validate(cfg)
    n_steps = cfg.sft.steps if steps is None else steps
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{cfg.name}_s{seed}_{n_steps}steps_{start_key(cfg, seed=seed, steps=steps)}.pt"
    say = print if verbose else (lambda *a: None)

    def build():
        say(f"[course_lib] training the shared SFT start ({cfg.name!r} config, seed {seed}, {n_steps} steps); "
            f"it is saved to {folder} and later notebooks reuse it")
        t0 = time.perf_counter()
        train = TrainContext(steps=n_steps, show_progress=False, max_grad_norm=cfg.max_grad_norm)
        task, model, result = sft_policy(cfg, train, seed=seed, device=dev)
        info = {**evaluate(model, task), "sft_seconds": result["seconds"],
                "build_seconds": time.perf_counter() - t0, "steps": n_steps, "built_on": dev.type}
        say(f"[course_lib] SFT start trained in {result['seconds']:.0f} s: held-out accuracy {info['accuracy']:.1%}")
        return task, model, info

    return _cached(cfg, path, build, say, dev, seed=seed)


def _cached(cfg: configs.RunConfig, path: Path, build, say, device: torch.device, seed: int = 0):
    """``(task, model, info)`` read from ``path`` (onto the CPU, then the model to ``device``), or built by
    ``build() -> (task, model, info)`` (on ``device``) and saved as CPU tensors (atomically, under a lock:
    two notebooks starting at once train it once)."""
    from course_lib.run.pipeline import build_policy

    with _lock(path.parent / (path.name + ".lock")):
        if path.exists():
            saved = torch.load(path, map_location="cpu", weights_only=True)
            task, model = build_policy(cfg, seed=seed, device=torch.device("cpu"))
            model.load_state_dict(saved["model"])
            model.to(device).eval()
            seconds = saved["info"].get("sft_seconds")
            say(f"[course_lib] start ({cfg.name!r} config, seed {seed}) read from the cache {path}"
                + (f" (training it took {seconds:.0f} s)" if seconds is not None else ""))
            return task, model, {**saved["info"], "cached": True, "path": str(path)}
        task, model, info = build()
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        os.close(fd)
        try:
            torch.save({"model": {k: v.detach().cpu() for k, v in model.state_dict().items()}, "info": info}, tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return task, model, {**info, "cached": False, "path": str(path)}


def env_start(cfg: configs.RunConfig, *, seed: int = 0, steps: int = 200, verbose: bool = True,
              device: str | torch.device = "cpu"):
    """``(task, model, info)``: a policy for ``cfg.task.env`` on ``device``, grown from the shared start and
    taught the tool.

    The shared start of ``cfg`` without the environment (``sft_start``), its embedding grown by the
    environment's characters (new rows zero), then ``steps`` SFT steps (``cfg.sft``'s batch size and
    learning rate, batches from ``Generator().manual_seed(seed)``) on the environment task's
    demonstrations: the first ``cfg.task.tool_demos`` carry demonstrations use the tool (``cfg.task.tool_call``).
    ``info`` holds the held-out evaluation (accuracy and tool use by carry) and ``sft_seconds`` of the extra steps.
    """
    from course_lib.run.pipeline import build_policy
    from course_lib.tinygpt.evaluation import evaluate
    from course_lib.trainers.sft import train_sft

    dev = resolve(device)
    if not cfg.task.env:
        raise ValueError("env_start needs cfg.task.env (an environment's name); for a plain start use sft_start")
    number(steps, "steps", integer=True, low=0, why=" (SFT steps on the tool demonstrations)")
    configs.validate(cfg)
    defaults = {f.name: f.default for f in dataclasses.fields(cfg.task)}  # the tool options are unused without env
    base_cfg = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, env="", tool_demos=defaults["tool_demos"],
                                                                  tool_call=defaults["tool_call"]))
    spec = {"base": start_key(base_cfg, seed=seed), "env": cfg.task.env, "tool_demos": cfg.task.tool_demos,
            "tool_call": cfg.task.tool_call,
            "steps": steps, "code": code_version(),  # + the environment's demonstrations and rules:
            "environments": hashlib.sha256(_source("environments")).hexdigest()}
    key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:20]
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{cfg.name}_{cfg.task.env}{cfg.task.tool_demos}{cfg.task.tool_call}_s{seed}_{steps}steps_{key}.pt"
    say = print if verbose else (lambda *a: None)

    def build():
        _, base, _ = sft_start(base_cfg, seed=seed, verbose=verbose, device=dev)
        task, model = build_policy(cfg, seed=seed, device=dev)
        grown = model.state_dict()
        for name, value in base.state_dict().items():  # the old token ids keep their rows; new rows start at 0
            if grown[name].shape == value.shape:
                grown[name] = value
            else:
                grown[name] = torch.cat([value, torch.zeros_like(grown[name][value.shape[0]:])])
        model.load_state_dict(grown)
        say(f"[course_lib] teaching the tool: {steps} SFT steps on demonstrations with {cfg.task.tool_demos} tool "
            "calls")
        res = train_sft(model, task, cfg.sft,
                        TrainContext(steps=steps, max_grad_norm=cfg.max_grad_norm, show_progress=False, threads=None),
                        generator=torch.Generator().manual_seed(seed), eval_at_end=False)
        return task, model, {**evaluate(model, task), "sft_seconds": res["seconds"], "steps": steps,
                             "built_on": dev.type}

    return _cached(cfg, path, build, say, dev, seed=seed)
