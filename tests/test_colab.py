"""Colab readiness: one repository address, badges that match it, and the set-up cell on a fresh runtime.

The simulation builds a virtual environment (no system site-packages) holding only what Colab
preinstalls that the course uses — torch 2.13.0 (the CPU build here), numpy, matplotlib,
ipywidgets, ipykernel, tqdm, transformers — and no course_lib. To keep it fast, those
distributions are hard-linked from the project's .venv by their RECORD files (what ``pip install``
from a local wheel cache would unpack) and the result is kept in ``test-artifacts/colab-base``;
course_lib is uninstalled from it before every run. Then notebooks run on a kernel of that
environment: the first cell must install course_lib (from a wheel of this checkout, passed through
``COURSE_LIB_SOURCE`` since the repository address cannot be reached here), leave torch alone,
print the device, and the rest of the notebook must run clean.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from importlib import metadata
from pathlib import Path

import jupytext
import pytest
from conftest import ROOT, report_line
from nbclient import NotebookClient
from packaging.requirements import Requirement
from traitlets.config import Config

from course_lib import colab

COLAB_PREINSTALLED = ["torch", "numpy", "matplotlib", "ipywidgets", "ipykernel", "tqdm", "transformers"]
SIMULATED = ["00_start_here", "02_dpo_margins"]
COURSE_NOTEBOOKS = [
    "00_start_here", "01_bradley_terry", "02_dpo_margins", "04_group_baselines",
    "05_from_advantages_to_an_update", "06_baseline_bias_enumeration", "07_memory_and_rollout_budgets", "08_tiny_gpt_dpo",
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
            f"no Open in Colab badge for {path} (addresses come from course_lib.colab)"
        )
    assert f"\n[colab]: {colab.BADGE}\n" in section, "the badge image's reference is not under the map"
    addresses = set(re.findall(r"colab\.research\.google\.com/github/([^/]+/[^/]+)/", readme))
    assert addresses == {colab.REPO}, f"README points Colab at {addresses}, course_lib.colab at {colab.REPO}"


def test_setup_cell_defaults_to_the_repository_and_can_be_redirected():
    cell = colab.SETUP_CELL
    assert f'os.environ.get(\n        "{colab.SOURCE_ENV}",\n        "git+{colab.REPO_URL}.git@{colab.BRANCH}",\n    )' in cell
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
# The simulation


def _closure(names: list[str]) -> list[metadata.Distribution]:
    """The installed distributions ``names`` need, following their (non-extra) requirements."""
    seen, todo, dists = set(), list(names), []
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        dist = metadata.distribution(name)
        dists.append(dist)
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return dists


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _colab_base(folder: Path) -> Path:
    """A venv with Colab's preinstalled packages (hard links from .venv), cached by version stamp."""
    dists = _closure(COLAB_PREINSTALLED)
    stamp = "\n".join([os.path.realpath(sys.executable), sys.version,
                       *sorted(f"{d.metadata['Name']}=={d.version}" for d in dists)])
    assert not any(d.metadata["Name"] == "course_lib" for d in dists)
    if (folder / "stamp.txt").exists() and (folder / "stamp.txt").read_text() == stamp:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    here = Path(sysconfig.get_paths()["purelib"])
    there = Path(subprocess.run(
        [_python(folder), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    for dist in [*dists, metadata.distribution("pip")]:
        for file in dist.files or []:
            source = (here / file).resolve()
            if not source.is_relative_to(here) or not source.is_file():
                continue  # console scripts and other files outside site-packages
            target = there / source.relative_to(here)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except OSError:
                shutil.copy2(source, target)
    subprocess.run([_python(folder), "-m", "ipykernel", "install", "--prefix", str(folder),
                    "--name", "colab-sim", "--display-name", "Colab (simulated)"],
                   check=True, capture_output=True)
    (folder / "stamp.txt").write_text(stamp)
    return folder


def _course_lib_wheel(out: Path) -> Path:
    """A wheel of this checkout (what ``pip install git+<repository>`` would build)."""
    src = out / "src"
    shutil.copytree(ROOT / "course_lib", src / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(src)], check=True, capture_output=True)
    return next(out.glob("course_lib-*.whl"))


def _run(venv: Path, code: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([_python(venv), "-c", code], cwd=cwd, env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.mark.slow
def test_setup_cell_installs_course_lib_on_a_fresh_colab_like_runtime(artifacts_dir, tmp_path,
                                                                      monkeypatch, request):
    import time

    start = time.monotonic()
    base = _colab_base(artifacts_dir / "colab-base")
    subprocess.run([_python(base), "-m", "pip", "uninstall", "-q", "-y", "course_lib"],
                   capture_output=True)
    work = tmp_path / "run"
    work.mkdir()
    probe = "import importlib.util as u; print(u.find_spec('course_lib') is None)"
    assert _run(base, probe, work) == "True", "the simulated runtime must start without course_lib"
    torch_before = _run(base, "import torch, os; print(torch.__version__, os.path.getmtime(torch.__file__))", work)
    built = time.monotonic() - start

    wheel = _course_lib_wheel(tmp_path / "wheel")
    monkeypatch.setenv(colab.SOURCE_ENV, str(wheel))
    monkeypatch.setenv("JUPYTER_PATH", str(base / "share" / "jupyter"))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    sockets = tempfile.mkdtemp(prefix="nbk")
    try:
        for name in SIMULATED:
            nb = jupytext.read(ROOT / "notebooks" / f"{name}.py")
            assert nb.cells[0].source.strip() == colab.SETUP_CELL.strip()
            NotebookClient(
                nb, timeout=180, kernel_name="colab-sim", shutdown_kernel="immediate",
                resources={"metadata": {"path": str(work)}},
                config=Config({"KernelManager": {"transport": "ipc", "ip": f"{sockets}/{name[:2]}"}}),
            ).execute()
            for cell in nb.cells:
                for out in cell.get("outputs", []):
                    assert out.get("name") != "stderr" and out["output_type"] != "error", (
                        f"{name} on the simulated runtime shows: {out}"
                    )
            first = "".join(o.get("text", "") for o in nb.cells[0].outputs)
            assert first.strip() == "device: cpu · Colab: no", first
    finally:
        shutil.rmtree(sockets, ignore_errors=True)

    installed = _run(base, "import course_lib, os; print(os.path.dirname(course_lib.__file__))", work)
    assert Path(installed).resolve().is_relative_to(base.resolve()), "course_lib must come from the wheel"
    assert _run(base, "import torch, os; print(torch.__version__, os.path.getmtime(torch.__file__))", work) == torch_before, (
        "the set-up cell must keep the runtime's torch"
    )
    report_line(request.config, f"\nColab simulation: base runtime ready in {built:.1f} s, "
                                f"{' + '.join(SIMULATED)} ran from a fresh install in "
                                f"{time.monotonic() - start - built:.1f} s")
