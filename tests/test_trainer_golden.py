"""Every trainer reproduces its recorded numbers on the ``test`` config on a CPU.

``tests/golden/trainers_test_config.json`` holds, for each trainer (sft, dpo, grpo with the RFT
control, rm, ppo), the run summary's accuracies and step count and every logged metric except
timings, recorded from the code named in its ``recorded_from`` note. A refactor of the loops must reproduce them to the
printed digits and beyond: relative 1e-5 (not exact: the same function computed by another kernel rounds in the
7th digit). Regenerate only on purpose: ``.venv/bin/python
tests/test_trainer_golden.py --write``. The file records the torch version and CPU kernel set it was verified on
(``verified_on``): elsewhere the test is skipped, saying why (``golden`` marker, tests/conftest.py), since other
kernels round differently.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).with_name("golden") / "trainers_test_config.json"
RUNS = {  # name: (kind, run keyword arguments)
    "sft": ("sft", {}),
    "dpo": ("dpo", {}),
    "grpo+rft": ("grpo", {"control": "rft"}),
    "rm": ("rm", {}),
    "ppo": ("ppo", {}),
    "kto": ("kto", {}),  # recorded with the trainer skeleton
    "orpo": ("orpo", {}),
}
SUMMARY_KEYS = ("steps", "start_accuracy", "sft_accuracy", "final_accuracy", "final_loose_accuracy",
                "control_accuracy")


def _timing(key: str) -> bool:
    return "seconds" in key or key in ("tokens_per_second", "wall")


def _numbers(row: dict) -> dict:
    return {k: v for k, v in row.items() if not _timing(k) and not isinstance(v, (dict, list))}


def record(tmp: Path) -> dict:
    """Run every trainer on the ``test`` config (seed 0, CPU, one thread) and keep its numbers."""
    from course_lib.run.pipeline import run
    from course_lib.trainers.configs import get_config

    out = {}
    for name, (kind, kwargs) in RUNS.items():
        folder = tmp / name.replace("+", "_")
        summary = run(kind, get_config("test"), folder, device="cpu", seed=0, show_progress=False, verbose=False,
                      overwrite=True, **kwargs)
        rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        entry = {"summary": {k: summary[k] for k in SUMMARY_KEYS}, "metrics": [_numbers(r) for r in rows]}
        if "reward_model" in summary:
            entry["reward_model"] = _numbers(summary["reward_model"])
        out[name] = entry
    return out


def _same(a, b, where: str) -> None:
    if isinstance(a, dict):
        assert set(a) == set(b), f"{where}: keys {sorted(set(a) ^ set(b))} differ"
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{where}: {len(a)} rows recorded, {len(b)} now"
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, (int, float)):
        assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-7), (
            f"{where}: recorded {a!r}, now {b!r}")
    else:
        assert a == b, f"{where}: recorded {a!r}, now {b!r}"


@pytest.mark.slow
@pytest.mark.golden("tests/golden/trainers_test_config.json")
def test_every_trainer_reproduces_its_recorded_numbers(tmp_path):
    golden = json.loads(GOLDEN.read_text())
    assert set(golden["runs"]) == set(RUNS)
    # a fresh process: torch's global RNG and thread settings as a command-line run has them
    code = ("import json, sys, pathlib; sys.path.insert(0, 'tests'); import test_trainer_golden as g; "
            f"print(json.dumps(g.record(pathlib.Path({str(tmp_path)!r}))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1], env={**os.environ, "OMP_NUM_THREADS": "1"})
    now = json.loads(done.stdout.strip().splitlines()[-1])
    _same(golden["runs"], now, "runs")


def test_golden_numbers_say_where_they_were_verified_and_are_skipped_elsewhere(tmp_path):
    import torch
    from conftest import kernel_mismatch

    here = {"torch": torch.__version__, "cpu_kernels": torch.backends.cpu.get_cpu_capability()}
    assert set(json.loads(GOLDEN.read_text())["verified_on"]) == set(here)
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"verified_on": here}))
    assert kernel_mismatch(path) is None
    path.write_text(json.dumps({"verified_on": {**here, "cpu_kernels": "NEON"}}))
    why = kernel_mismatch(path)
    assert (f"verified on torch {torch.__version__} with NEON kernels" in why
            and f"with {here['cpu_kernels']} kernels" in why)
    path.write_text(json.dumps({"verified_on": {**here, "torch": "1.0"}}))
    assert "torch 1.0" in kernel_mismatch(path)
    path.write_text(json.dumps({"runs": {}}))
    assert "records no torch version" in kernel_mismatch(path)


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: tests/test_trainer_golden.py --write   (records the golden numbers from this checkout)")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        runs = record(Path(tmp))
    GOLDEN.parent.mkdir(exist_ok=True)
    import torch

    GOLDEN.write_text(json.dumps({"recorded_from": f"commit {commit}, test config, seed 0, CPU, 1 thread",
                                  "verified_on": {"torch": torch.__version__,
                                                  "cpu_kernels": torch.backends.cpu.get_cpu_capability()},
                                  "runs": runs}, indent=1) + "\n")
    print(f"wrote {GOLDEN}")
