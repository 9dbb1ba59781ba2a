"""Tiny GPT: the CLI end to end on the toy ``test`` config, resume equality, clear errors."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest
import torch

from course_lib.__main__ import main
from course_lib.run.pipeline import run
from course_lib.tinygpt.runtime import CHECKPOINT_FORMAT, load_checkpoint
from course_lib.trainers.configs import get_config

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
    for key in ("sft_accuracy", "final_accuracy", "rl_seconds", "wall_seconds", "device", "passport",
                "control_accuracy"):
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
def test_cli_runs_a_list_of_seeds_side_by_side_each_as_it_runs_alone(tmp_path):
    out = tmp_path / "seeds"
    proc = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-m", "course_lib", "train", "grpo", "--config", "test",
         "--out", str(out), "--steps", "3", "--seed", "0", "1", "--control", "rft"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and "2 at a time" in proc.stdout
    report = json.loads((out / "seeds.json").read_text())
    assert report["seeds"] == [0, 1] and report["stopped"] == {}
    for seed, r in zip((0, 1), report["runs"]):
        summary = json.loads((out / f"seed-{seed}" / "summary.json").read_text())
        assert summary["seed"] == r["seed"] == seed and summary["cpu_threads"] == 1
        assert r["final_accuracy"] == summary["final_accuracy"]
        assert f"seed {seed}: held-out accuracy {r['sft_accuracy']:.3f} -> {r['final_accuracy']:.3f}" in proc.stdout
    # a verdict per comparison, from the two seeds' numbers, and no judgement on two seeds
    assert len(report["verdicts"]) == 2 and all(v in proc.stdout for v in report["verdicts"])
    assert report["verdicts"][1].startswith("GRPO − RFT control: ")
    assert all("too few seeds to judge (2; a verdict needs 3)" in v for v in report["verdicts"])
    alone = run("grpo", get_config("test"), tmp_path / "alone", seed=1, steps=3, control="rft", show_progress=False,
                verbose=False)
    assert _rows(out / "seed-1" / "metrics.jsonl") == _rows(tmp_path / "alone" / "metrics.jsonl")
    assert alone["control_accuracy"] == report["runs"][1]["control_accuracy"]


@pytest.mark.parametrize("seeds, message", [
    (["-1"], "argument --seed: a seed is an integer >= 0, several are distinct ones separated by spaces"),
    (["1.5"], "argument --seed: a seed is an integer >= 0"),
    (["0", "x"], "argument --seed: a seed is an integer >= 0"),
    (["0", "2", "0"], "error: --seed must list distinct seeds (a repeated seed is the same run"),
    (["0", "1", "--threads", "2"], "error: --threads applies to one seed's run"),
    (["0", "1", "--max-staleness", "1"], "error: run_seeds runs synchronous GRPO (one process per seed)"),
])
def test_bad_seed_lists_are_refused_by_name(seeds, message, tmp_path, capsys):
    assert _exit_code(["train", "grpo", "--config", "test", "--out", str(tmp_path / "run"), "--seed", *seeds]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_seed_list_checks_every_folder_before_any_seed_trains(tmp_path, capsys):
    (tmp_path / "seed-1").mkdir()
    (tmp_path / "seed-1" / "summary.json").write_text("{}")
    assert _exit_code(["train", "grpo", "--config", "test", "--out", str(tmp_path), "--seed", "0", "1"]) == 2
    assert "seed-1 already holds a run" in capsys.readouterr().err
    assert not (tmp_path / "seed-0" / "summary.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["grpo", "dpo", "kto", "orpo"])
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
    assert "grpo.temperature must be a finite number > 0" in capsys.readouterr().err


def _numeric_options():
    """``(kind, flag, name, type)`` of every numeric option of every ``train`` command (the parser's own list)."""
    from course_lib.__main__ import build_parser

    train = build_parser()._subparsers._group_actions[0].choices["train"]
    for kind, sub in train._subparsers._group_actions[0].choices.items():
        for action in sub._actions:
            if action.option_strings and action.type is not None and action.choices is None:
                yield kind, action.option_strings[0], action.dest.removeprefix("run."), action.type.__name__


NUMERIC = list(_numeric_options())
SEEDS = ("seed", "task.seed")  # a task seed takes any integer; --seed has its own test (bad seed lists)


@pytest.fixture(scope="module")
def parser():
    from course_lib.__main__ import build_parser

    return build_parser()


@pytest.mark.parametrize("kind, flag, name, kind_of_value", NUMERIC, ids=[f"{k}{f}" for k, f, *_ in NUMERIC])
def test_every_numeric_option_refuses_what_it_cannot_mean_by_name(kind, flag, name, kind_of_value, parser, tmp_path,
                                                                   capsys, monkeypatch):
    """inf, -inf and nan for a float, an absurd negative for a count: refused before any training, naming the
    option."""
    from course_lib import __main__ as cli
    from course_lib.run import pipeline, recipes

    def trained(*args, **kwargs):
        raise AssertionError(f"{flag} reached training")

    monkeypatch.setattr(cli, "build_parser", lambda: parser)  # one parser for all (building one takes 0.1 s)
    monkeypatch.setattr(pipeline, "build_policy", trained)
    monkeypatch.setattr(recipes, "run_stage", trained)
    if name in SEEDS:
        pytest.skip("a task seed takes any integer; --seed: test_bad_seed_lists_are_refused_by_name")
    head = ["train", kind, *(["r1"] if kind == "recipe" else []), "--config", "test", "--out", str(tmp_path / "run")]
    for value in (["inf", "-inf", "nan"] if kind_of_value != "int" else ["-1000000000"]):
        assert _exit_code([*head, f"{flag}={value}"]) == 2, (flag, value)
        err = capsys.readouterr().err
        assert err.startswith(f"error: {name} must be ") and "Traceback" not in err, (flag, value, err)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv, message", [
    (["--max-staleness", "1000000"], "grpo.max_staleness must be an integer in [0, 32]"),
    (["--threads", "100000"], "threads must be None (keep torch's setting) or an integer in [1, "),
    (["--tool-demos", "-5"], "task.tool_demos must be an integer >= 0"),
    (["--digits", "100"], "task.digits must be an integer in [1, 18] (10^digits fits in int64); got 100"),
    (["--digits", "5"], "grpo.max_completion_length (4) must leave room for the longest answer plus <eos>: at least "
                        "task.digits + 2 = 7 tokens"),
    (["--n-embd", "1000000000"], "model.n_embd must be an integer in [1, 4096] (the tiny GPT's sizes"),
    (["--max-completion-length", "0"], "grpo.max_completion_length must be an integer >= 1; got 0"),
    (["--learning-rate", "1e309"], "grpo.learning_rate must be a finite number > 0; got inf"),
])
def test_the_reviewed_bad_inputs_are_refused_by_name(argv, message, tmp_path, capsys):
    assert _exit_code(["train", "grpo", "--config", "test", "--out", str(tmp_path / "run"), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


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


@pytest.mark.slow
def test_one_sft_loop_and_sft_checkpoints_that_resume(tmp_path):
    """`train sft --seed 0` is the SFT stage of `train grpo --seed 0`; its checkpoint starts a GRPO run,
    which resumes and matches the run that trained its own SFT."""
    run("sft", get_config("test"), tmp_path / "sft", show_progress=False, verbose=False)
    run("grpo", get_config("test"), tmp_path / "full", steps=4, show_progress=False, verbose=False)
    own = torch.load(tmp_path / "full" / "sft.pt", weights_only=True)["model"]
    alone = torch.load(tmp_path / "sft" / "sft.pt", weights_only=True)["model"]
    assert all(torch.equal(own[k], alone[k]) for k in own)
    part = tmp_path / "from_ckpt"
    run("grpo", get_config("test"), part, steps=2, sft_checkpoint=str(tmp_path / "sft" / "checkpoint.pt"),
        show_progress=False, verbose=False)
    summary = run("grpo", None, part, steps=4, resume=True, show_progress=False, verbose=False)
    assert summary["sft_checkpoint"] == str(tmp_path / "sft" / "checkpoint.pt")
    assert _rows(part / "metrics.jsonl") == _rows(tmp_path / "full" / "metrics.jsonl")
    other = get_config("test")
    other.task.n_demos = 50
    with pytest.raises(ValueError, match="another task: n_demos=40"):
        run("grpo", other, tmp_path / "mismatch", sft_checkpoint=str(tmp_path / "sft" / "sft.pt"),
            show_progress=False, verbose=False)


@pytest.mark.slow
def test_out_is_not_overwritten_and_resume_says_where_it_is(tmp_path, capsys):
    out = tmp_path / "run"
    run("grpo", get_config("test"), out, steps=2, control=True, show_progress=False, verbose=False)
    first = json.loads((out / "summary.json").read_text())
    assert first["control_accuracy"] is not None and first["cpu_threads"] == 1
    with pytest.raises(ValueError, match="already holds a run"):
        run("grpo", get_config("test"), out, steps=2, show_progress=False, verbose=False)
    again = run("grpo", None, out, resume=True, show_progress=False)  # a finished run, no --control
    assert "resuming" in capsys.readouterr().out and again["control_accuracy"] == first["control_accuracy"]
    with pytest.raises(ValueError, match="steps is the total"):
        run("grpo", None, out, steps=1, resume=True, show_progress=False, verbose=False)
    (out / "stale.txt").write_text("not ours")
    run("grpo", get_config("test"), out, steps=1, overwrite=True, show_progress=False, verbose=False)
    assert len(_rows(out / "metrics.jsonl")) == 1 and (out / "stale.txt").exists()


def test_flags_are_per_section_strict_and_documented(capsys):
    from course_lib.__main__ import apply_overrides, build_parser

    parser = build_parser()
    args = vars(parser.parse_args(["train", "grpo", "--sft-batch-size", "8", "--sft-learning-rate", "0.01",
                                   "--sft-steps", "5", "--mask-truncated", "--beta", "0.1"]))
    cfg = apply_overrides(get_config("cpu"), {k: v for k, v in args.items() if "." in k and v is not None})
    assert (cfg.sft.batch_size, cfg.sft.learning_rate, cfg.sft.steps) == (8, 0.01, 5)
    assert cfg.grpo.mask_truncated is True and cfg.grpo.beta == 0.1 and cfg.dpo.beta == 1.0
    for bad in (["--batch-size", "8"], ["--mask-truncated", "flase"], ["--kl-placement", "both"]):
        assert _exit_code(["train", "grpo", *bad]) == 2
    capsys.readouterr()
    assert _exit_code(["train", "grpo", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for shown in ("{loss,reward}", "{grpo,rloo,dr_grpo}", "default: cpu 32 | gpu 128 | test 4",
                  "TOTAL optimizer steps",
                  "--no-mask-truncated", "--sft-learning-rate", "--env {'',calculator}", "none; default: ''"):
        assert shown in text
    assert "{," not in text and "default: ;" not in text  # an empty choice or default is shown as ''


@pytest.mark.slow
def test_ctrl_c_leaves_a_resumable_run_without_a_traceback(tmp_path):
    import signal
    import time

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "course_lib", "train", "dpo", "--config", "test", "--out", str(out)]
    proc = subprocess.Popen([*cmd, "--steps", "400"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (out / "checkpoint.pt").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and f"-m course_lib train dpo --resume {out}" in stdout  # the whole command
    state = load_checkpoint(out / "checkpoint.pt", kind="dpo")
    assert state["stage"] in ("sft", "dpo")
    done = subprocess.run([sys.executable, "-m", "course_lib", "train", "dpo", "--resume", str(out), "--steps", "4",
                           "--no-progress"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stdout and json.loads((out / "summary.json").read_text())["steps"] == 4


@pytest.mark.slow
def test_progress_bars_cover_sft_and_pair_sampling(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "course_lib", "train", "dpo", "--config", "test", "--out",
                           str(tmp_path / "dpo"), "--steps", "2"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "sft:" in proc.stderr and "dpo pairs:" in proc.stderr and "dpo:" in proc.stderr


def test_the_readme_and_docs_run_the_cli_in_the_course_environment_with_flags_it_has():
    from conftest import ROOT

    from course_lib.__main__ import build_parser

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    examples = {str(p.relative_to(ROOT)): [ln for ln in p.read_text().splitlines() if "-m course_lib train" in ln]
                for p in pages}
    assert len(examples["README.md"]) == 3 and len(examples["docs/tiny-gpt.md"]) > 10, examples
    parser = build_parser()
    for line in (ln for found in examples.values() for ln in found):
        command = shlex.split(line.split("  #")[0])
        assert command[:3] == [".venv/bin/python", "-m", "course_lib"], line
        if "--help" not in command:
            parser.parse_args(command[3:])  # an unknown trainer or flag exits 2


def test_kto_and_orpo_options_are_validated(tmp_path, capsys):
    out = str(tmp_path)
    assert _exit_code(["train", "kto", "--config", "test", "--out", out, "--desirable-fraction", "0"]) == 2
    assert "kto.desirable_fraction must be a finite number in (0, 1]" in capsys.readouterr().err
    assert _exit_code(["train", "kto", "--config", "test", "--out", out, "--batch-size", "1"]) == 2
    assert "kto.batch_size must be an integer >= 2" in capsys.readouterr().err
    assert _exit_code(["train", "orpo", "--config", "test", "--out", out, "--beta", "0"]) == 2
    assert "orpo.beta must be a finite number > 0" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_resume_hint_is_the_whole_command_and_wall_seconds_span_both_processes(tmp_path, capsys, monkeypatch):
    """A stopped run prints the command to type; summary.json's wall_seconds counts the first process too."""
    import shlex

    from course_lib.tinygpt import runtime

    out = tmp_path / "a run"
    run("grpo", get_config("test"), out, steps=1, show_progress=False, verbose=False)
    first = load_checkpoint(out / "checkpoint.pt")["wall_seconds"]
    assert first > 0
    resumed = run("grpo", None, out, steps=2, resume=True, show_progress=False, verbose=False)
    assert resumed["wall_seconds"] > first
    with pytest.raises(ValueError, match="already holds a run") as refused:
        run("grpo", get_config("test"), out, steps=1, show_progress=False, verbose=False)
    command = str(refused.value).split("continue it: ", 1)[1]
    assert shlex.split(command)[1:] == ["-m", "course_lib", "train", "grpo", "--resume", str(out)]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runtime.sys, "executable", str(tmp_path / ".venv" / "bin" / "python"))
    assert runtime.resume_command("recipe", "runs/r") == ".venv/bin/python -m course_lib train recipe --resume runs/r"
