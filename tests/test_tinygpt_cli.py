"""Tiny GPT: the CLI end to end on the toy ``test`` config, resume equality, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from course_lib.__main__ import main
from course_lib.configs import get_config
from course_lib.pipeline import run
from course_lib.runtime import CHECKPOINT_FORMAT, load_checkpoint

TIMING = ("seconds", "per_second")


def _rows(path):
    return [
        {k: v for k, v in json.loads(line).items() if not any(t in k for t in TIMING)}
        for line in path.read_text().splitlines()
    ]


@pytest.mark.slow
def test_cli_grpo_end_to_end_with_control(tmp_path):
    out = tmp_path / "grpo"
    proc = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-m", "course_lib", "train", "grpo", "--config", "test",
         "--out", str(out), "--steps", "3", "--control", "--no-progress", "--advantage", "rloo", "--beta", "0.05"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and "warn" not in proc.stderr.lower()
    summary = json.loads((out / "summary.json").read_text())
    for key in ("sft_accuracy", "final_accuracy", "rl_seconds", "wall_seconds", "device", "passport", "control_accuracy"):
        assert key in summary
    assert 0 <= summary["final_accuracy"] <= 1 and summary["device"] == "cpu"
    assert summary["passport"]["optimisation"]["advantage"].startswith("RLOO")
    assert summary["options"]["grpo"]["beta"] == 0.05
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for key in ("reward_mean", "completion_length", "zero_variance_rate", "entropy", "kl", "clip_fraction",
                "gen_seconds", "update_seconds"):
        assert key in rows[0]
    assert rows[0]["kl"] is not None  # beta > 0 keeps a reference
    assert "accuracy" in rows[-1]
    assert (out / "dashboard.png").stat().st_size > 10_000
    assert "six choices" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["grpo", "dpo"])
def test_resume_reproduces_the_uninterrupted_run(tmp_path, kind):
    cfg = get_config("test")
    run(kind, cfg, tmp_path / "full", steps=4, show_progress=False, verbose=False)
    run(kind, get_config("test"), tmp_path / "part", steps=2, show_progress=False, verbose=False)
    run(kind, None, tmp_path / "part", steps=4, resume=True, show_progress=False, verbose=False)
    full, part = _rows(tmp_path / "full" / "metrics.jsonl"), _rows(tmp_path / "part" / "metrics.jsonl")
    assert len(full) == 4 and full == part
    a = torch.load(tmp_path / "full" / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "part" / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def _exit_code(argv) -> int:
    """main's return code, or argparse's exit code for a rejected command line."""
    try:
        return main(argv)
    except SystemExit as stop:
        return stop.code


def test_bad_options_give_clear_errors(tmp_path, capsys):
    assert _exit_code(["train", "grpo", "--config", "test", "--out", str(tmp_path), "--unit", "per_prompt"]) == 2
    assert "invalid choice: 'per_prompt'" in capsys.readouterr().err
    assert _exit_code(["train", "grpo", "--config", "nope", "--out", str(tmp_path)]) == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
    assert _exit_code(["train", "sft", "--config", "test", "--out", str(tmp_path), "--beta", "0.1"]) == 2
    assert "unrecognized arguments: --beta" in capsys.readouterr().err
    assert _exit_code(["train", "grpo", "--resume", str(tmp_path / "missing")]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    assert _exit_code(["train", "grpo", "--config", "test", "--out", str(tmp_path), "--temperature", "0"]) == 2
    assert "grpo.temperature must be > 0" in capsys.readouterr().err


def test_bad_checkpoints_give_clear_errors(tmp_path):
    junk = tmp_path / "checkpoint.pt"
    junk.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="not a readable course_lib checkpoint"):
        load_checkpoint(junk)
    torch.save({"weights": torch.zeros(2)}, junk)
    with pytest.raises(ValueError, match="format tag"):
        load_checkpoint(junk)
    torch.save({"format": CHECKPOINT_FORMAT, "kind": "dpo"}, junk)
    with pytest.raises(ValueError, match="holds a 'dpo' checkpoint"):
        load_checkpoint(junk, kind="grpo")
