"""A scratch course for the grading pipeline tests: the instructor's files copied under
``test-artifacts/``, the assignment released with nbgrader, the grading sandbox checked.

One home for what ``test_class_pipeline.py`` and ``test_sandbox_grading.py`` both set up.
(``test_assignment.py`` copies the course twice, to check paths from another folder, and
``test_lab_pipeline.py`` grades the lab without the sandbox: each keeps its own set-up.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from instructor.autograde import probe_sandbox  # noqa: E402

# Settings a developer's shell may carry that would change how the pipeline grades.
SCRUBBED = ("COURSE_SANDBOX_KERNEL", "COURSE_ALLOW_UNSANDBOXED", "COURSE_VERDICT_DIR", "COURSE_GRADING_SEEDS")


def grading_env(**extra: str) -> dict[str, str]:
    """This process's environment with the venv's ``bin/`` first on PATH (nbgrader runs ``alembic``),
    the grading settings above removed, and ``extra`` added."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    for var in SCRUBBED:
        env.pop(var, None)
    env.update(extra)
    return env


def released_course(prefix: str, assignment: str, env: dict[str, str]) -> Path:
    """A new course folder with ``assignment`` released; fails if the sandbox does not work here."""
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    course = Path(tempfile.mkdtemp(prefix=prefix, dir=ROOT / "test-artifacts"))
    os.chmod(course, 0o755)
    for item in ("nbgrader_config.py", "instructor", "solutions"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, course / item)
    gen = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force"], cwd=course,
                         env=env, capture_output=True, text=True, timeout=1800)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    sandboxed, why = probe_sandbox(course)
    assert sandboxed, f"the grading sandbox does not work here ({why}); install bubblewrap"
    return course


def stale_releases(course: Path, assignment: str, notebooks: list[str]) -> list[str]:
    """The committed ``exercises/<assignment>`` notebooks that differ from the release nbgrader just
    generated in ``course`` (each named with the command that regenerates it); empty when all match."""
    import json

    return [f"exercises/{assignment}/{n}.ipynb is stale: run `make assignment ASSIGNMENT={assignment}`"
            for n in notebooks
            if json.loads((ROOT / "exercises" / assignment / f"{n}.ipynb").read_text())
            != json.loads((course / "exercises" / assignment / f"{n}.ipynb").read_text())]
