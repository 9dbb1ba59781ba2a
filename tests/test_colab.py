"""Colab readiness: one repository address, badges that match it, and the course on Colab's versions.

The simulation is ``tools/colab_check.py`` (``make colab-check``): a virtual environment with Colab's
package versions (``tools/colab_versions.txt``: transformers 5.15, ipywidgets 7.7, ...), this
machine's torch, and no course_lib, kept in ``test-artifacts/colab-runtime``. Here it runs
``colab_check.FLOOR`` (00, 01, 05, 09 at ``COURSE_FAST=1``): each first cell must install course_lib
(from a wheel of this checkout, passed through ``COURSE_LIB_SOURCE`` since the repository address
cannot be reached here), leave torch alone, print the device, and the rest must run clean; and the
tiny GPT's KV-cached generation must agree with uncached generation on Colab's transformers. Notebook 09
reads the SFT starts from the session's cache (``shared_sft_start``, as a student's second run reads its
own): training them is the lesson tests' work, and a start's key does not depend on transformers' version.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT, report_line
from packaging.requirements import Requirement

from course_lib.lesson import colab
from tools import colab_check

COURSE_NOTEBOOKS = [
    "00_start_here", "01_bradley_terry", "02_dpo_margins", "04_group_baselines",
    "05_from_advantages_to_an_update", "06_baseline_bias_enumeration", "07_memory_and_rollout_budgets",
    "08_tiny_gpt_dpo",
    "09_tiny_gpt_grpo", "11_reward_hacking",
    "12_the_rlhf_route", "14_rl_as_a_system", "16_recipes",
]


def test_readme_links_every_notebook_with_an_open_in_colab_badge():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("<!-- course-map -->")[1].split("<!-- /course-map -->")[0]
    present = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    for stem in sorted(present | set(COURSE_NOTEBOOKS)):
        path = colab.notebook_path(stem)
        assert f"]({path})" in section, f"the course map does not link {path}"
        assert f"[![Open in Colab][colab]]({colab.colab_url(path)})" in section, (
            f"no Open in Colab badge for {path} (addresses come from course_lib.lesson.colab)"
        )
    assert f"\n[colab]: {colab.BADGE}\n" in section, "the badge image's reference is not under the map"
    addresses = set(re.findall(r"colab\.research\.google\.com/github/([^/]+/[^/]+)/", readme))
    assert addresses == {colab.REPO}, f"README points Colab at {addresses}, course_lib.lesson.colab at {colab.REPO}"


def test_setup_cell_defaults_to_the_repository_and_can_be_redirected():
    cell = colab.SETUP_CELL
    assert (f'os.environ.get(\n        "{colab.SOURCE_ENV}",\n        "git+{colab.REPO_URL}.git@{colab.BRANCH}",\n'
            '    )' in cell)
    assert "--no-deps" in cell and "torch" not in cell.split("import sys")[1].split("from course_lib")[0]
    compile(cell, "<setup cell>", "exec")


def test_setup_cell_lines_fit_a_notebook_code_cell():
    """A code cell in JupyterLab or Colab shows about 90 characters before a line runs off the edge."""
    long = [line for line in colab.SETUP_CELL.splitlines() if len(line) > 88]
    assert not long, f"set-up cell lines longer than 88 characters: {long}"


def test_write_setup_cells_rewrites_only_the_tagged_cell(tmp_path):
    nb = tmp_path / "x.py"
    nb.write_text(f'# %% [markdown]\n# title\n\n{colab.SETUP_MARKER}\nprint("old")\n\n# %%\nx = 1\n')
    assert colab.write_setup_cells([nb]) == [str(nb)]
    text = nb.read_text()
    assert 'print("old")' not in text and colab.SETUP_CELL in text and text.endswith("# %%\nx = 1\n")
    assert colab.write_setup_cells([nb]) == []  # idempotent
    (tmp_path / "y.py").write_text("# %%\nx = 1\n")
    with pytest.raises(ValueError, match="colab-setup"):
        colab.write_setup_cells([tmp_path / "y.py"])


# ---------------------------------------------------------------------------------------------
# Colab's versions


def _declared() -> dict[str, Requirement]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {colab_check._key(r.name): r for r in map(Requirement, deps)}


def test_declared_ranges_admit_colabs_versions():
    """What pyproject.toml declares is what make colab-check tests: every library dependency Colab
    ships is in the versions file, at a version the declared range admits."""
    colab_versions = colab_check.pinned()
    for name, req in _declared().items():
        if name == "torch":
            continue  # this machine's torch stands in for Colab's (tools/colab_versions.txt says why)
        assert name in colab_versions, f"{name} is a dependency but not in {colab_check.VERSIONS.name}"
        assert req.specifier.contains(colab_versions[name]), (
            f"pyproject.toml declares {req}, Colab ships {name}=={colab_versions[name]}")


def test_setup_cell_installs_what_pyproject_declares():
    for extra in colab.RUNTIME_EXTRAS:
        req = Requirement(extra)
        assert str(_declared()[colab_check._key(req.name)].specifier) == str(req.specifier), extra


def test_versions_file_is_dated_and_strict(tmp_path):
    header = colab_check.VERSIONS.read_text(encoding="utf-8").split("\n", 2)[:2]
    assert "runtime of 20" in header[0] and "pip-freeze" in header[0], "say which Colab runtime, and when"
    bad = tmp_path / "v.txt"
    bad.write_text("# x\ntransformers>=5\n")
    with pytest.raises(ValueError, match=r"v.txt:2: expected name==version"):
        colab_check.pinned(bad)


def test_colab_check_rejects_an_unknown_notebook(capsys):
    with pytest.raises(SystemExit):
        colab_check.main(["--notebooks", "99_nope"])
    assert "--notebooks: no notebooks/99_nope.py" in capsys.readouterr().err


KV_PROBE = """
import torch, transformers
from course_lib.tinygpt.model import ModelConfig, build_model, completion_logprobs, KV_CACHE_NAME
from course_lib.tinygpt.rollout import generate
from course_lib.tinygpt.task import AdditionTask
torch.manual_seed(0)
task = AdditionTask()
model = build_model(ModelConfig(n_layer=1, n_embd=16, n_head=2), task.tokenizer)
prompts = task.encode_prompts(task.heldout_pairs[:2])
kw = dict(max_completion_length=5, num_generations=3, greedy=True)
a = generate(model, prompts, task.tokenizer, **kw)
b = generate(model, prompts, task.tokenizer, use_cache=False, **kw)
assert torch.equal(a.completions, b.completions)
args = (model, a.input_ids, a.attention_mask, a.completion_mask)
grouped, _ = completion_logprobs(*args, start=task.prompt_length, group_size=3)  # the shared-prompt cache
single, _ = completion_logprobs(*args, start=task.prompt_length)
assert torch.allclose(grouped, single, atol=1e-5)
print(transformers.__version__, KV_CACHE_NAME)
"""


@pytest.mark.slow
def test_kv_cache_works_on_colabs_transformers(artifacts_dir):
    """transformers 5.24 renamed the KV cache (``past_key_values`` -> ``cache``); Colab has 5.15."""
    runtime = colab_check.build_runtime(artifacts_dir / "colab-runtime")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([colab_check.python_of(runtime), "-c", KV_PROBE], env=env, cwd=artifacts_dir,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [colab_check.pinned()["transformers"], "past_key_values"]


@pytest.mark.slow
def test_floor_notebooks_run_on_colabs_versions_from_the_setup_cell(artifacts_dir, tmp_path, request,
                                                                   shared_sft_start):
    import time

    start = time.monotonic()
    runtime = colab_check.build_runtime(artifacts_dir / "colab-runtime")
    work = tmp_path / "run"
    work.mkdir()
    torch_probe = "import torch, os; print(torch.__version__, os.path.getmtime(torch.__file__))"
    torch_before = colab_check.runtime_python(runtime, torch_probe, work)
    built = time.monotonic() - start
    wheel = colab_check.course_wheel(tmp_path / "wheel")
    colab_check.uninstall_course_lib(runtime)
    colab_versions = colab_check.installed(runtime)
    seconds = {}
    for name in colab_check.FLOOR:
        colab_check.uninstall_course_lib(runtime)
        probe = "import importlib.util as u; print(u.find_spec('course_lib') is None)"
        assert colab_check.runtime_python(runtime, probe, work) == "True", "each run starts without course_lib"
        nb, seconds[name], found = colab_check.run_notebook(runtime, name, work, wheel)
        assert not found, f"{name} on Colab's versions: {found}"
        first = "".join(o.get("text", "") for o in nb.cells[0].outputs)
        assert first.strip() == "device: cpu · Colab: no", first
    installed = colab_check.runtime_python(
        runtime, "import course_lib, os; print(os.path.dirname(course_lib.__file__))", work)
    assert Path(installed).resolve().is_relative_to(runtime.resolve()), "course_lib must come from the wheel"
    assert colab_check.runtime_python(runtime, torch_probe, work) == torch_before, (
        "the set-up cell must keep the runtime's torch")
    colab_check.uninstall_course_lib(runtime)
    assert colab_check.installed(runtime) == colab_versions, "the set-up cell must keep Colab's packages as they are"
    report_line(request.config, f"\nColab's versions: runtime ready in {built:.1f} s; "
                                + ", ".join(f"{n} {s:.0f} s" for n, s in seconds.items()))


def test_update_replaces_only_the_rerun_rows():
    row = {"passed": True, "seconds": 1.0, "problems": [], "installed": [], "commit": "a"}
    old = {"versions_sha256": "v", "date": "d0",
           "notebooks": [{**row, "notebook": "00"}, {**row, "notebook": "18", "passed": False}],
           "passed": 1, "failed": 1}
    new = {"versions_sha256": "v", "date": "d1", "notebooks": [{**row, "notebook": "18", "commit": "b"}]}
    merged = colab_check.update(old, new)
    assert [(r["notebook"], r["passed"], r["commit"]) for r in merged["notebooks"]] == [("00", True, "a"),
                                                                                        ("18", True, "b")]
    assert (merged["passed"], merged["failed"], merged["date"]) == (2, 0, "d1")
    with pytest.raises(ValueError, match="other Colab versions"):
        colab_check.update(old, {**new, "versions_sha256": "w"})
