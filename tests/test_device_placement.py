"""The tiny GPT goes where the notebook's ``DEVICE`` says: ``sft_start`` / ``env_start`` return
their model on the requested device from a device-independent cache, and every training notebook passes
``DEVICE`` to whatever builds, loads or encodes for its models (read from the notebooks' code).

No GPU here: the device a start is moved to is torch's ``meta`` device (a real device that holds no
data), which a forgotten move would leave on the CPU; ``tests/test_device_clash.py`` runs the trainers
under a mode that refuses what CUDA refuses."""

from __future__ import annotations

import ast
import dataclasses
import time

import pytest
import torch
from conftest import ROOT

from course_lib.run import pipeline, starts
from course_lib.trainers.configs import get_config

META = torch.device("meta")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path))
    return tmp_path / "sft_starts"


def devices(model) -> set[str]:
    return {t.device.type for t in (*model.parameters(), *model.buffers())}


def test_sft_start_returns_the_model_on_the_requested_device(cache):
    cfg = get_config("test")
    _, on_cpu, info = starts.sft_start(cfg, seed=1, steps=5, verbose=False, device="cpu")
    assert devices(on_cpu) == {"cpu"} and not info["cached"] and info["built_on"] == "cpu"
    _, moved, info2 = starts.sft_start(cfg, seed=1, steps=5, verbose=False, device=META)  # read, then moved
    assert info2["cached"] and devices(moved) == {"meta"}
    _, again, _ = starts.sft_start(cfg, seed=1, steps=5, verbose=False)  # the default is still the CPU
    assert devices(again) == {"cpu"}
    assert all(torch.equal(a, b) for a, b in zip(on_cpu.state_dict().values(), again.state_dict().values()))
    raw = torch.load(info["path"], weights_only=True)["model"]
    assert {v.device.type for v in raw.values()} == {"cpu"}


def test_a_start_that_is_not_cached_is_trained_on_the_requested_device(cache, monkeypatch):
    """The build path hands the device to ``sft_policy`` (a stand-in here: it records the device and trains on the
    CPU, as ``meta`` holds no numbers to train)."""
    asked = []
    real = pipeline.sft_policy

    def recording(cfg, ctx=None, *, device, **kwargs):
        asked.append(device)
        return real(cfg, ctx, device="cpu", **kwargs)

    monkeypatch.setattr(pipeline, "sft_policy", recording)
    _, _, info = starts.sft_start(get_config("test"), seed=2, steps=3, verbose=False, device=META)
    assert asked == [META] and info["built_on"] == "meta" and not info["cached"]


def test_env_start_goes_to_the_device_too(cache):
    cfg = get_config("test")
    env_cfg = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, env="calculator", tool_demos=5))
    _, model, info = starts.env_start(env_cfg, steps=1, verbose=False)
    assert devices(model) == {"cpu"} and info["built_on"] == "cpu"
    _, moved, info2 = starts.env_start(env_cfg, steps=1, verbose=False, device=META)
    assert info2["cached"] and devices(moved) == {"meta"}


@pytest.mark.parametrize("bad", ["gpu", "cuda:0", 0, None, "CPU"])
def test_a_bad_device_is_refused_naming_the_argument(cache, bad):
    cfg = get_config("test")
    with pytest.raises(ValueError, match=r"device must be one of \('auto', 'cpu', 'cuda', 'mps'\) or a torch.device"):
        starts.sft_start(cfg, steps=1, device=bad)
    env_cfg = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, env="calculator"))
    with pytest.raises(ValueError, match="device must be one of"):
        starts.env_start(env_cfg, steps=1, device=bad)
    assert not cache.exists() or not any(cache.iterdir())  # refused before anything was trained


# ---- the notebooks ---------------------------------------------------------------------------------------
TRAINING = ("08_tiny_gpt_dpo", "09_tiny_gpt_grpo", "10_the_kl_term", "11_reward_hacking", "12_the_rlhf_route",
            "14_rl_as_a_system", "15_environments_and_tools", "16_recipes", "17_ai_feedback", "18_graduating_to_trl")
CPU_ON_PURPOSE = {  # builds a tiny GPT but trains nothing: stays on the CPU, and says why here
    "05_from_advantages_to_an_update": "one forward of an untrained model, its numbers printed with .numpy()",
}
STARTS = {"sft_start", "env_start", "build_policy"}  # must say device=DEVICE
ENCODERS = {"encode_prompts": 1, "encode_pairs": 2}  # ids a model reads: DEVICE as the argument after these many
MODEL_CALLS = {"build_model"}  # must be moved: build_model(...).to(DEVICE)


def _name(node) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _is_device(node) -> bool:
    return isinstance(node, ast.Name) and node.id == "DEVICE"


def device_problems(source: str) -> list[str]:
    """Each call in ``source`` that builds, loads or encodes for a model without ``DEVICE``, as 'line N: call'."""
    tree = ast.parse(source)
    moved = {id(n.func.value) for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "to" and any(_is_device(a) for a in n.args)}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name, text = _name(node), ast.get_source_segment(source, node).split("\n")[0]
        keyword = {k.arg: k.value for k in node.keywords}
        if name in STARTS and not _is_device(keyword.get("device")):
            out.append(f"line {node.lineno}: {text} (pass device=DEVICE)")
        elif name in ENCODERS and not (_is_device(keyword.get("device"))
                                       or (len(node.args) > ENCODERS[name] and _is_device(node.args[ENCODERS[name]]))):
            out.append(f"line {node.lineno}: {text} (pass DEVICE)")
        elif name in MODEL_CALLS and id(node) not in moved:
            out.append(f"line {node.lineno}: {text} (move it: .to(DEVICE))")
    return out


def test_the_check_finds_a_model_left_on_the_cpu():
    bad = ("task, model, _ = sft_start(cfg, seed=0)\nm = build_model(cfg.model, tok)\n"
           "ids = task.encode_prompts(pairs)\nx, y, z = task.encode_pairs(p, a, 'cpu')\n")
    assert [p.split(":")[0] for p in device_problems(bad)] == ["line 1", "line 2", "line 3", "line 4"]
    good = ("task, model, _ = sft_start(cfg, seed=0, device=DEVICE)\nm = build_model(cfg.model, tok).to(DEVICE)\n"
            "ids = task.encode_prompts(pairs, DEVICE)\nx, y, z = task.encode_pairs(p, a, device=DEVICE)\n")
    assert device_problems(good) == []


def test_every_training_notebook_puts_its_models_on_DEVICE():
    problems, seen = {}, set()
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")):
        source = path.read_text()
        tree = ast.parse(source)
        calls = {_name(n) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        if calls & (STARTS | MODEL_CALLS):
            seen.add(path.stem)
            if path.stem in CPU_ON_PURPOSE:
                continue
            assert "DEVICE = resolve_device(" in source, f"{path.name} builds a model but has no DEVICE"
            if found := device_problems(source):
                problems[path.name] = found
    assert seen == set(TRAINING) | set(CPU_ON_PURPOSE), f"notebooks that build or load a tiny GPT: {sorted(seen)}"
    assert not problems, "\n".join(f"{name}: {p}" for name, found in problems.items() for p in found)


def test_gpu_check_runs_a_notebook_as_a_script(tmp_path):
    """``benchmarks/gpu_check.py`` runs the training notebooks' course path on the GPU this way: the source as a
    script, FAST, its device line kept; a notebook that runs past its time is killed and reported as such; several
    run at once under one deadline, and one that would start too late is skipped."""
    from importlib import util

    spec = util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    gpu_check = util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    assert set(gpu_check.NOTEBOOKS) == set(TRAINING) - {"18_graduating_to_trl"}
    assert all((gpu_check.NOTEBOOK_DIR / f"{name}.py").is_file() for name in gpu_check.NOTEBOOKS)
    fake = tmp_path / "nb" / "fake.py"
    fake.parent.mkdir()
    fake.write_text("import os\nimport torch\nprint('device: cpu · Colab: no')\n"
                    "print('fast', os.environ['COURSE_FAST'])\n"
                    "policy = torch.nn.Linear(2, 2).to('meta')\nhead = torch.nn.Linear(2, 1)\n")
    ran = gpu_check.notebook_path(fake, tmp_path / "out", timeout=120)
    assert ran["returncode"] == 0 and ran["device_line"] == "device: cpu · Colab: no" and "fast 1" in ran["tail"]
    assert ran["models"] == {"policy": "meta", "head": "cpu"}  # where the script left each model
    fake.write_text("import time\nprint('device: cpu', flush=True)\ntime.sleep(30)\n")
    killed = gpu_check.notebook_path(fake, tmp_path / "out", timeout=2)
    assert killed["returncode"] is None and killed["seconds"] < 20
    quick, slow = tmp_path / "nb" / "quick.py", tmp_path / "nb" / "slow.py"
    quick.write_text("print('device: cpu')\n")
    slow.write_text("import time\ntime.sleep(120)\n")
    gpu_check.MIN_NOTEBOOK_SECONDS = 3
    rows = gpu_check.notebooks_on_device([quick, slow, quick], tmp_path / "out", time.perf_counter() + 15, jobs=1)
    assert [r["notebook"] for r in rows] == ["quick", "slow", "quick"]
    assert rows[0]["returncode"] == 0 and rows[1]["returncode"] is None  # passed; killed at the deadline
    assert "skipped" in rows[2], rows[2]  # nothing left of the notebooks' share
    with pytest.raises(ValueError, match="jobs must be an integer >= 1"):
        gpu_check.notebooks_on_device([quick], tmp_path / "out", time.perf_counter() + 15, jobs=0)
