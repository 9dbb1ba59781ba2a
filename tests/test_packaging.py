"""The two install routes (pip via the Makefile, conda via environment.yml) must not drift."""

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"pytorch": "torch"}  # conda-forge spells a few packages differently


def _split(requirement: str) -> tuple[str, str]:
    name, spec = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", requirement).groups()
    return name.lower().replace("_", "-"), spec.replace(" ", "")


def test_environment_yml_lists_the_same_packages_and_ranges():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pip_deps = dict(_split(r) for r in pyproject["dependencies"] + pyproject["optional-dependencies"]["lab"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda_deps = {}
    for entry in env["dependencies"]:
        if isinstance(entry, str) and not entry.startswith(("python", "pip")):
            name, spec = _split(entry)
            conda_deps[CONDA_NAMES.get(name, name)] = spec
    assert conda_deps == pip_deps


def test_torch_is_a_range_and_transformers_is_pinned_to_a_tested_major():
    deps = dict(_split(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    assert "==" not in deps["torch"] and deps["torch"].startswith(">=")
    assert "<6" in deps["transformers"]


@pytest.mark.parametrize("command", ["make lab", "make test"])
def test_readme_gives_the_two_setup_commands(command):
    assert command in (ROOT / "README.md").read_text()


def test_ci_calls_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_every_install_route_installs_the_same_extras():
    """The optional extras (dev, lab, trl) reach CI through the Makefile and conda users through
    environment.yml; a new extra missing from either would skip its tests silently."""
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert {"dev", "lab", "trl"} <= extras
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(e["pip"] for e in env["dependencies"] if isinstance(e, dict) and "pip" in e)
    wanted = "-e .[" + ",".join(sorted(extras)) + "]"
    assert wanted in pip_section, f"environment.yml must pip-install {wanted!r}; has {pip_section}"
    make = (ROOT / "Makefile").read_text()
    assert f'-e ".[{",".join(sorted(extras))}]"' in make, "the Makefile's venv step must install every extra"


def test_trl_extra_is_pinned_and_keeps_the_torch_pin():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = dict(_split(r) for r in project["optional-dependencies"]["trl"])
    assert set(extra) == {"trl", "accelerate"} and all(v.startswith("==") for v in extra.values())
    # installing the extra must not let pip replace the CPU torch wheel: the pin rides along
    assert '-e ".[dev,lab,trl]" "$(TORCH_PIN)"' in (ROOT / "Makefile").read_text()


def test_the_library_alone_pulls_no_lab_tools():
    """``pip install course_lib`` (Colab's set-up cell, any other project) gets what course_lib imports:
    JupyterLab, nbgrader, Jupytext, nbclient and ipykernel are the lab extra's."""
    deps = {_split(r)[0] for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    assert deps == {"numpy", "torch", "transformers", "matplotlib", "ipywidgets", "tqdm"}
    imported = set()
    for path in (ROOT / "course_lib").rglob("*.py"):
        imported |= set(re.findall(r"^\s*(?:from|import) ([A-Za-z_]\w*)", path.read_text(encoding="utf-8"), re.M))
    lab = {_split(r)[0]
           for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["lab"]}
    assert not imported & {name.replace("-", "_") for name in lab}, "course_lib imports a lab-only package"
