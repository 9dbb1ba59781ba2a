"""`make bench`'s runner: one plan for every results file, and the sources digest that says which are current."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import provenance  # noqa: E402
import run_all  # noqa: E402

from tools import cpu_kernels  # noqa: E402


def test_the_plan_names_every_results_file_and_a_command_its_script_accepts():
    # a GPU, not make bench
    results = {p.stem for p in (ROOT / "benchmarks" / "results").glob("*.json")} - {"gpu_check"}
    assert results <= set(run_all.PLAN), f"results files no plan entry writes: {sorted(results - set(run_all.PLAN))}"
    for name, (argv, minutes, _) in {**run_all.PLAN,
                                     **{k: (v, 1, False) for k, v in run_all.DIAGNOSTICS.items()}}.items():
        script = ROOT / "benchmarks" / argv[0]
        assert script.is_file(), (name, argv[0])
        source = script.read_text()
        for option in (a for a in argv[1:] if a.startswith("--")):
            assert re.search(rf"add_argument\(\s*\"{option}\"", source), f"{name}: {argv[0]} has no option {option}"
        assert minutes > 0


def _results(tmp_path, monkeypatch, **files):
    monkeypatch.setattr(run_all, "RESULTS", tmp_path)
    for name, data in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(data))


def test_a_results_file_is_current_only_for_the_code_now_checked_out(tmp_path, monkeypatch):
    current = {"sources": "aaa", "class_grading": "ggg"}
    _results(tmp_path, monkeypatch, dpo={"sources": "aaa", "complete": True, "runs": []}, grpo={"runs": []},
             rlhf={"sources": "aaa+changes"}, tools={"sources": "bbb"},
             async_speed={"sources": "aaa", "complete": False},
             class_grading={"sources": "aaa", "extra_sources": "old", "complete": True},
             recipes={"sources": "aaa", "runs": [{"seed": 0}]})
    assert run_all.status("dpo", current) == "current"
    assert run_all.status("recipes", current) == "stale (not finished through run_all)"  # e.g. stopped after a seed
    run_all.mark_complete("recipes", 12.4, 3.6)
    assert run_all.status("recipes", current) == "current"
    data = json.loads((tmp_path / "recipes.json").read_text())
    assert data["runs"] == [{"seed": 0}] and (data["bench_wall_seconds"], data["bench_cpu_seconds"]) == (12, 4)
    assert run_all.status("reward_hacking", current) == "missing"
    assert run_all.status("grpo", current) == "stale (no sources digest recorded)"
    assert run_all.status("rlhf", current) == "stale (ran with uncommitted changes)"
    assert run_all.status("tools", current) == "stale (ran sources bbb, now aaa)"
    assert run_all.status("async_speed", current) == "stale (incomplete)"
    assert run_all.status("class_grading", current).startswith("stale (instructor")  # its second digest differs
    (tmp_path / "class_grading.json").write_text(json.dumps({"sources": "aaa", "extra_sources": "ggg",
                                                             "complete": True}))
    assert run_all.status("class_grading", current) == "current"


def test_make_bench_reruns_only_the_stale_and_refuses_uncommitted_code(tmp_path, monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(run_all, "run", lambda name, argv, env: ran.append((name, env.get("OMP_NUM_THREADS"))) or 0.0)
    current = {"sources": "aaa", **{n: "x" for n in provenance.EXTRA_SOURCES}}
    monkeypatch.setattr(run_all, "current_sources", lambda: current)
    _results(tmp_path, monkeypatch, **{name: {"sources": "aaa", "extra_sources": "x", "complete": True}
                                        for name in run_all.PLAN if name != "dpo"})
    assert run_all.main([]) == 0
    assert ran == [("dpo", "1")], "only the stale file re-runs, on one thread"
    assert run_all.main(["grpo", "threads"]) == 0 and [n for n, _ in ran[1:]] == ["grpo", "threads"]
    run_all.main(["--status"])
    assert f"{len(run_all.PLAN) - 1} of {len(run_all.PLAN)} current" in capsys.readouterr().out
    current["sources"] = "aaa+changes"
    with pytest.raises(SystemExit):
        run_all.main([])
    assert "uncommitted changes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_all.main(["nope"])
    assert "unknown benchmark(s) ['nope']" in capsys.readouterr().err


def test_the_sources_digest_follows_the_code_not_the_commit(tmp_path, monkeypatch):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    for path, text in (("course_lib/a.py", "A = 1\n"), ("benchmarks/tinygpt_x.py", "x\n"),
                       ("benchmarks/tables.py", "t\n"),
                       ("benchmarks/results/x.json", "{}\n"), ("README.md", "r\n"), ("docs/results.md", "d\n")):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "x", "--allow-empty")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    first = provenance.sources()
    assert re.fullmatch(r"[0-9a-f]{12}", first)
    for path in ("README.md", "docs/results.md", "benchmarks/tables.py", "benchmarks/results/x.json"):  # not code
        (tmp_path / path).write_text("changed\n")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two")
    assert provenance.sources() == first and not provenance.commit().endswith("+changes")
    (tmp_path / "course_lib/a.py").write_text("A = 2\n")
    assert provenance.sources() == first + "+changes" and provenance.commit().endswith("+changes")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "three")
    assert re.fullmatch(r"[0-9a-f]{12}", provenance.sources()) and provenance.sources() != first
    monkeypatch.setattr(provenance, "ROOT", tmp_path / "course_lib" / "nowhere")
    assert provenance.sources() == "unknown"


def test_the_kernel_pin_sets_avx2_where_the_cpu_has_it_and_a_hand_set_value_wins():
    try:
        has_avx2 = " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        has_avx2 = False
    env: dict[str, str] = {}
    assert cpu_kernels.pin(env) == ("avx2" if has_avx2 else None)
    env = {"ATEN_CPU_CAPABILITY": "default"}
    assert cpu_kernels.pin(env) == "default"


def test_the_second_kernel_set_differs_from_the_one_torch_picks(monkeypatch):
    """CI's second run of the lessons: AVX2 on a CPU with AVX-512 (torch picks AVX-512), else torch's default."""
    monkeypatch.setattr(cpu_kernels, "_flags", lambda: "flags : fpu avx2 avx512f avx512bw")
    assert cpu_kernels.other() == "avx2"
    monkeypatch.setattr(cpu_kernels, "_flags", lambda: "flags : fpu avx2")
    assert cpu_kernels.other() == "default"
    monkeypatch.setattr(cpu_kernels, "_flags", lambda: None)  # not Linux
    assert cpu_kernels.other() == "default"


def test_save_writes_the_provenance_of_the_run(tmp_path):
    """``writer.save`` (what most benchmarks call last) records commit, sources digest, torch and kernels."""
    import torch
    import writer

    path = writer.save("class_grading", ["class_grading.py", "--students", "1"], [{"seed": 0}], results=tmp_path,
                       machine="m")
    data = json.loads(path.read_text())
    assert (data["sources"] == provenance.sources()
            and data["commit"].split("+")[0] == provenance.commit().split("+")[0])
    assert data["extra_sources"] == provenance.sources(provenance.EXTRA_SOURCES["class_grading"])
    assert data["torch"] == torch.__version__ and data["cpu_kernels"] == torch.backends.cpu.get_cpu_capability()
    assert data["command"] == "class_grading.py --students 1" and data["machine"] == "m" and data["seeds"] == [0]
    assert "extra_sources" not in json.loads(writer.save("dpo", ["x"], [{"seed": 1}], results=tmp_path).read_text())
