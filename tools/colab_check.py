"""``make colab-check``: every lecture notebook on Colab's package versions, at the quick budget.

The runtime is a virtual environment (no system site-packages) that holds, at Colab's versions,
the packages listed in ``tools/colab_versions.txt`` (installed from PyPI with ``--no-deps``, so
that nothing resolves to a newer release), and this machine's torch (hard-linked from the running
environment by its RECORD file). It holds no course_lib: each notebook's first cell, the Colab
set-up cell, installs it from a wheel of this checkout (``COURSE_LIB_SOURCE``), as on Colab.
Each notebook then runs in a fresh kernel of that runtime, at ``COURSE_FAST=1``, in an empty
folder (Colab has no checkout beside the notebook); an error or anything written to stderr fails it.

Simplified, said out loud: Python is this machine's (3.11, not Colab's 3.13; ``tests/test_py313.py``
checks the code statically) and so is torch (the Makefile's 2.13.0 CPU build, not Colab's 2.11.0);
the front end is nbclient, not Colab's (widgets are created in the kernel by Colab's ipywidgets 7,
not drawn).

``python -m tools.colab_check`` runs every notebook and writes ``tools/colab_check.json``;
``--notebooks 00_start_here 09_tiny_gpt_grpo`` runs some (``tests/test_colab.py`` runs ``FLOOR``), and with
``--update`` replaces only their rows in the results (each row records the commit it ran at).
The runtime is kept in ``test-artifacts/colab-runtime`` and rebuilt when the versions file changes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ROOT / "tools" / "colab_versions.txt"
RUNTIME = ROOT / "test-artifacts" / "colab-runtime"
RESULTS = ROOT / "tools" / "colab_check.json"  # beside the versions it checked (not a make bench result)
KERNEL = "colab-check"
# What CI runs on every push (tests/test_colab.py): the set-up cell, widgets, and the two ways the
# tiny GPT generates (05: a DPO-style batch; 09: GRPO's KV-cached rollouts).
FLOOR = ["00_start_here", "01_bradley_terry", "05_from_advantages_to_an_update", "09_tiny_gpt_grpo"]
LINKED = ["torch", "pip"]  # from the running environment, with their requirements not in VERSIONS
# Requirements left unmet on purpose: the classic notebook is Colab's front end (the browser side).
UNMET = {"widgetsnbextension 3.6.10 requires notebook, which is not installed."}


def pinned(path: Path = VERSIONS) -> dict[str, str]:
    """``{name: version}`` from a versions file (``name==version`` lines, ``#`` comments)."""
    out = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not name.strip() or not version.strip():
            raise ValueError(f"{path}:{number}: expected name==version, got {raw!r}")
        out[_key(name)] = version.strip()
    return out


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def _closure(names: list[str], skip: set[str]) -> list[metadata.Distribution]:
    """The installed distributions ``names`` need (non-extra requirements), less those in ``skip``."""
    from packaging.requirements import Requirement

    seen, todo, dists = set(skip), list(names), []
    while todo:
        name = _key(todo.pop())
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


def python_of(runtime: Path) -> Path:
    return runtime / "bin" / "python"


def build_runtime(folder: Path = RUNTIME, versions: Path = VERSIONS) -> Path:
    """The Colab-like venv in ``folder`` (reused while the versions file and torch are unchanged)."""
    wanted = pinned(versions)
    linked = _closure(LINKED, skip=set(wanted))
    stamp = "\n".join([os.path.realpath(sys.executable), sys.version, versions.read_text(encoding="utf-8"),
                       *sorted(f"{d.metadata['Name']}=={d.version}" for d in linked)])
    if (folder / "stamp.txt").exists() and (folder / "stamp.txt").read_text() == stamp:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    here = Path(sysconfig.get_paths()["purelib"])
    there = Path(subprocess.run(
        [python_of(folder), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    for dist in linked:
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
    pip = [python_of(folder), "-m", "pip"]
    subprocess.run([*pip, "install", "-q", "--no-deps", "-r", str(versions)], check=True,
                   env={**os.environ, "PIP_ROOT_USER_ACTION": "ignore"})
    check = subprocess.run([*pip, "check"], capture_output=True, text=True).stdout.splitlines()
    broken = [line for line in check if line not in UNMET and "No broken requirements" not in line]
    if broken:
        raise RuntimeError(f"{versions} leaves requirements unmet (add them at Colab's versions):\n"
                           + "\n".join(broken))
    subprocess.run([python_of(folder), "-m", "ipykernel", "install", "--prefix", str(folder),
                    "--name", KERNEL, "--display-name", "Colab's versions"], check=True, capture_output=True)
    (folder / "stamp.txt").write_text(stamp)
    return folder


def course_wheel(out: Path) -> Path:
    """A wheel of this checkout (what the set-up cell's ``pip install git+<repository>`` builds)."""
    src = out / "src"
    shutil.copytree(ROOT / "course_lib", src / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(src)], check=True, capture_output=True)
    return next(out.glob("course_lib-*.whl"))


def _bare_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the runtime's own packages only


def runtime_python(runtime: Path, code: str, cwd: Path) -> str:
    """Run ``code`` with the runtime's Python (no PYTHONPATH) and return what it printed."""
    return subprocess.run([python_of(runtime), "-c", code], cwd=cwd, env=_bare_env(), check=True,
                          capture_output=True, text=True).stdout.strip()


def uninstall_course_lib(runtime: Path) -> None:
    """A fresh Colab runtime has no course_lib: remove the one the last notebook's set-up cell installed."""
    subprocess.run([python_of(runtime), "-m", "pip", "uninstall", "-q", "-y", "course_lib"],
                   env=_bare_env(), capture_output=True)


def installed(runtime: Path) -> set[str]:
    """``name==version`` of every distribution in the runtime but course_lib."""
    out = subprocess.run([python_of(runtime), "-m", "pip", "list", "--format=freeze"], env=_bare_env(),
                         check=True, capture_output=True, text=True).stdout.split()
    return {line for line in out if not line.lower().startswith(("course_lib==", "course-lib=="))}


def problems(nb) -> list[str]:
    """What a run shows that a student should not see: errors and anything written to stderr."""
    found = []
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out["output_type"] == "error":
                found.append(f"cell {index}: {out['ename']}: {out['evalue']}")
            elif out.get("name") == "stderr":
                found.append(f"cell {index}: stderr: {out['text'].strip()[:300]}")
    return found


def run_notebook(runtime: Path, name: str, work: Path, wheel: Path, timeout: int = 900):
    """Execute ``notebooks/<name>.py`` on the runtime's kernel at ``COURSE_FAST=1``; (notebook, seconds, problems)."""
    import jupytext
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = jupytext.read(ROOT / "notebooks" / f"{name}.py")
    # pip inside the notebook (the set-up cell, notebook 18's TRL) reads no pip config: this machine's
    # (local package folders) is not Colab's, and its warnings would read as the notebook's.
    env = {**_bare_env(), "COURSE_LIB_SOURCE": str(wheel), "COURSE_FAST": "1", "PIP_CONFIG_FILE": os.devnull}
    sockets = tempfile.mkdtemp(prefix="nbk")
    start = time.perf_counter()
    failure = []
    try:
        km = KernelManager(  # the runtime's kernel only; IPC sockets in a private folder
            kernel_name=KERNEL, transport="ipc", ip=f"{sockets}/{name[:2]}",
            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(runtime / "share" / "jupyter" / "kernels")]),
        )
        client = NotebookClient(nb, km=km, timeout=timeout, kernel_name=KERNEL, shutdown_kernel="immediate",
                                resources={"metadata": {"path": str(work)}})
        client.execute(env=env)  # the kernel's environment
    except CellExecutionError as error:
        failure = [str(error).strip().splitlines()[-1]]
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    return nb, time.perf_counter() - start, failure or problems(nb)


def commit() -> str:
    """The checkout's commit (12 hex digits), ``+dirty`` when course_lib, notebooks/ or tools/ differ from it."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    if head.returncode:
        return "unknown"
    dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--", "course_lib", "notebooks",
                            "tools"])
    return head.stdout.strip() + ("+dirty" if dirty.returncode else "")


def notebook_names() -> list[str]:
    return sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def check(names: list[str], runtime: Path = RUNTIME, versions: Path = VERSIONS, log=print) -> dict:
    """Run ``names`` on the Colab runtime (built if needed); the results as written to the JSON."""
    start = time.perf_counter()
    runtime = build_runtime(runtime, versions)
    built = time.perf_counter() - start
    rows, code = [], commit()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = course_wheel(Path(tmp) / "wheel")
        for name in names:
            uninstall_course_lib(runtime)
            before = installed(runtime)
            work = Path(tmp) / name
            work.mkdir()
            log(f"colab-check: {name} ...", flush=True)
            _, seconds, found = run_notebook(runtime, name, work, wheel)
            # what the notebook's own cells installed (18: TRL, as on Colab); the next build starts afresh
            added = sorted(installed(runtime) - before)
            if added:
                (runtime / "stamp.txt").unlink(missing_ok=True)
            rows.append({"notebook": name, "passed": not found, "seconds": round(seconds, 1), "problems": found,
                         "installed": added, "commit": code})
            log(f"colab-check: {name} {'passed' if not found else 'FAILED'} in {seconds:.0f} s", flush=True)
            for line in found:
                log(f"    {line}", flush=True)
    versions_text = versions.read_text(encoding="utf-8")
    probe = "import sys, torch; print(sys.version.split()[0], torch.__version__)"
    python, torch = runtime_python(runtime, probe, ROOT).split()
    return {
        "benchmark": "colab_check",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "versions_file": str(versions.relative_to(ROOT)),
        "versions_sha256": hashlib.sha256(versions_text.encode()).hexdigest()[:12],
        "colab_versions": pinned(versions),
        "python": python, "torch": torch, "machine": platform.machine(),
        "budget": "COURSE_FAST=1",
        "runtime_build_seconds": round(built, 1),
        "notebooks": rows,
        "passed": sum(r["passed"] for r in rows), "failed": sum(not r["passed"] for r in rows),
    }


def update(old: dict, new: dict) -> dict:
    """``old``'s results with ``new``'s rows in place of the same notebooks' (``--update``: rerun some)."""
    if old["versions_sha256"] != new["versions_sha256"]:
        raise ValueError("--update: the results were measured on other Colab versions; run every notebook")
    fresh = {r["notebook"]: r for r in new["notebooks"]}
    rows = [fresh.pop(r["notebook"], r) for r in old["notebooks"]] + list(fresh.values())
    return {**old, "date": new["date"], "notebooks": rows,
            "passed": sum(r["passed"] for r in rows), "failed": sum(not r["passed"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebooks", nargs="+", metavar="NAME",
                        help="notebook names (default: every lecture notebook)")
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help=f"results JSON (default: {RESULTS.relative_to(ROOT)})")
    parser.add_argument("--update", action="store_true",
                        help="replace only these notebooks' rows in --out (each row records its commit)")
    args = parser.parse_args(argv)
    names = args.notebooks or notebook_names()
    unknown = sorted(set(names) - set(notebook_names()))
    if unknown:
        parser.error(f"--notebooks: no notebooks/{unknown[0]}.py (known: {', '.join(notebook_names())})")
    result = check(names)
    if args.update and args.out.exists():
        result = update(json.loads(args.out.read_text(encoding="utf-8")), result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"colab-check: {result['passed']} passed, {result['failed']} failed -> {args.out}")
    return 0 if not result["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
