"""Where the course runs: device choice and an environment report (notebook 00, the trainer).

``resolve_device("auto")`` picks CUDA when present, then Apple's MPS, else the CPU, so the
same code runs on a laptop, on Colab's GPU and on a cluster node without changes. The report
names the compute dtype the trainers will use there (``runtime.precision``: bf16 autocast on
CUDA sm_80+, fp32 on a T4 and on the CPU) and the GPU's compute capability.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata

import torch

from course_lib._validate import choice
from course_lib.tinygpt.runtime import cuda_capability, describe_precision

DEVICES = ("auto", "cpu", "cuda", "mps")


def resolve_device(name: str = "auto") -> torch.device:
    """Turn ``"auto" | "cpu" | "cuda" | "mps"`` into a ``torch.device``; errors if unavailable."""
    choice(name, "device", DEVICES)
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was requested but torch sees no CUDA GPU; use 'auto' or 'cpu'")
    if name == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError("device='mps' was requested but MPS is not available; use 'auto' or 'cpu'")
    return torch.device(name)


def on_colab() -> bool:
    return "google.colab" in sys.modules


def environment_report() -> dict[str, str]:
    """Versions and hardware, as notebook 00_start_here prints them."""
    report = {"python": platform.python_version(), "platform": platform.platform()}
    for package in ("torch", "transformers", "numpy", "matplotlib", "ipywidgets", "course_lib"):
        try:
            report[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            report[package] = "not installed"
    device = resolve_device("auto")
    report["device"] = device.type
    if device.type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(0)
        report["compute_capability"] = "{}.{}".format(*cuda_capability(device))
    report["precision"] = describe_precision(device)
    report["cpu_threads"] = str(torch.get_num_threads())
    report["colab"] = "yes" if on_colab() else "no"
    return report
