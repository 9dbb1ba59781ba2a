"""The shared SFT start (``course_lib.run.starts``): the cached model is the pipeline's SFT policy, its key
changes with everything that decides its weights, two processes asking at once train it once, and
the stopwatch the notebooks print their time with (``course_lib.lesson.stopwatch``)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

import pytest
import torch
from conftest import ROOT

from course_lib.lesson.stopwatch import Stopwatch
from course_lib.run import starts
from course_lib.run.pipeline import sft_policy
from course_lib.trainers.configs import get_config
from course_lib.trainers.trainer import TrainContext


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path))
    return tmp_path / "sft_starts"


def weights_equal(a, b):
    return all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())


def test_cached_start_is_the_pipelines_sft_policy(cache, capsys):
    cfg = get_config("test")
    task, model, info = starts.sft_start(cfg, seed=3, steps=20)
    assert "training the shared SFT start" in capsys.readouterr().out
    assert not info["cached"] and info["steps"] == 20 and info["sft_seconds"] > 0
    _, expected, result = sft_policy(cfg, TrainContext(steps=20, show_progress=False), seed=3, device="cpu")
    assert weights_equal(model, expected)
    assert info["accuracy"] == result["accuracy"]
    _, again, info2 = starts.sft_start(cfg, seed=3, steps=20)
    assert "read from the cache" in capsys.readouterr().out
    assert info2["cached"] and info2["accuracy"] == info["accuracy"] and weights_equal(again, expected)
    assert [p.suffix for p in cache.iterdir() if not p.name.endswith(".lock")] == [".pt"]  # no temporary file left


def test_key_changes_with_everything_that_decides_the_weights(monkeypatch):
    cfg = get_config("test")
    key = starts.start_key(cfg, seed=0)
    assert starts.start_key(get_config("test"), seed=0) == key  # deterministic
    other_lr = dataclasses.replace(cfg, sft=dataclasses.replace(cfg.sft, learning_rate=1e-4))
    other_task = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, teacher_error_rate=0.5))
    other_model = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, n_embd=64))
    variants = [starts.start_key(cfg, seed=1), starts.start_key(cfg, seed=0, steps=cfg.sft.steps + 1),
                starts.start_key(other_lr, seed=0), starts.start_key(other_task, seed=0),
                starts.start_key(other_model, seed=0),
                starts.start_key(dataclasses.replace(cfg, max_grad_norm=0.5), seed=0)]
    assert len({key, *variants}) == 1 + len(variants)
    assert starts.start_key(cfg, seed=0, steps=cfg.sft.steps) == key  # steps=None means cfg.sft.steps
    monkeypatch.setattr(starts, "code_version", lambda: "edited source")
    assert starts.start_key(cfg, seed=0) != key  # an edit to the SFT code never reads an old start


def test_code_version_reads_the_sft_modules():
    assert {"sft", "model", "task", "pipeline"} <= set(starts.SOURCES)
    assert starts.code_version() == starts.code_version()


def test_bad_arguments_name_the_argument(cache):
    cfg = get_config("test")
    with pytest.raises(ValueError, match="steps must be an integer >= 0"):
        starts.sft_start(cfg, steps=-1)
    with pytest.raises(ValueError, match="seed must be an integer"):
        starts.sft_start(cfg, seed="0")
    with pytest.raises(ValueError, match="sft.learning_rate must be a finite number > 0"):
        starts.sft_start(dataclasses.replace(cfg, sft=dataclasses.replace(cfg.sft, learning_rate=0.0)))


def test_two_processes_at_once_train_it_once(tmp_path):
    script = ("from course_lib.trainers.configs import get_config; from course_lib.run.starts import sft_start; "
              "_, m, info = sft_start(get_config('test'), seed=5, steps=30); "
              "print('RESULT', info['cached'], sum(float(p.sum()) for p in m.parameters()))")
    env = {**os.environ, "COURSE_CACHE": str(tmp_path), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    results = [line.split()[1:] for out in outs for line in out.splitlines() if line.startswith("RESULT")]
    assert sorted(r[0] for r in results) == ["False", "True"], outs  # one trained it, the other read it
    assert results[0][1] == results[1][1]  # the same weights
    files = [p.name for p in (tmp_path / "sft_starts").iterdir() if not p.name.endswith(".lock")]
    assert len(files) == 1 and files[0].endswith(".pt"), files


def test_stopwatch_reports_wall_and_cpu_seconds():
    clock = Stopwatch("COURSE_FAST=1")
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    wall, cpu = clock.seconds()
    assert cpu >= 0.05 and wall > 0
    assert clock.report().startswith("this run (COURSE_FAST=1 budget) took ")
    with pytest.raises(ValueError, match="budget must be a non-empty name"):
        Stopwatch("")


def test_stopwatch_counts_the_cpu_of_child_processes_it_waited_for():
    """A notebook's background seeds run in child processes: their CPU is the run's cost too."""
    import subprocess
    import sys

    clock = Stopwatch("COURSE_FAST=1")
    subprocess.run([sys.executable, "-c", "import time\nend = time.process_time() + 0.3\n"
                    "while time.process_time() < end: pass"], check=True)
    assert clock.seconds()[1] >= 0.3
