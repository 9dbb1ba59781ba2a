"""The coding lab through the real grading pipeline: `python -m instructor.autograde --assignment lab14`.

A scratch copy of the course under test-artifacts/ gets a batch of fake students: the solution, the
untouched release, and one submission per classic bug (a sign flip, a log-prob that forgets the mask, a wrong
averaging unit: the solution with one line edited, as in tests/test_lab.py). The training checks run in the sandboxed
kernel's company, decided by instructor/lab_grading.py; the SFT baseline comes from the cache tests/test_lab.py fills.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from array_hole import LAB_CELLS, LAB_FUNCTIONS, REWRITE
from conftest import ROOT, report_line
from grading_course import stale_releases
from test_lab import FAILS, MUTANTS

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from instructor.autograde import probe_sandbox  # noqa: E402

pytestmark = pytest.mark.slow

NOTEBOOK = "lab_training_loop.ipynb"
POINTS = {"lab_test_logprobs": 3, "lab_test_dpo": 3, "lab_test_advantages": 3, "lab_test_clip": 2,
          "lab_test_aggregate": 3, "lab_test_grpo_loss": 2, "lab_train_dpo": 4, "lab_train_grpo": 4}
TRAINING = {"dpo": "lab_train_dpo", "grpo": "lab_train_grpo"}
# the three bugs the lab must catch by training (all five are checked in-process by tests/test_lab.py)
BATCH = ("sign_dpo", "no_mask_logprobs", "unit_token_as_sequence")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["COURSE_LAB_CACHE"] = str(ROOT / "test-artifacts" / "lab-cache")
    env.pop("COURSE_SANDBOX_KERNEL", None)
    return env


def _put(course: Path, student: str, nb) -> None:
    folder = course / "submitted" / student / "lab14"
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(folder / NOTEBOOK))


@pytest.fixture(scope="module")
def graded(request):
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    course = Path(tempfile.mkdtemp(prefix="lab-", dir=ROOT / "test-artifacts"))
    os.chmod(course, 0o755)
    for item in ("nbgrader_config.py", "instructor", "solutions"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, course / item)
    gen = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "lab14", "--force"], cwd=course,
                         env=_env(), capture_output=True, text=True, timeout=600)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    solution = nbformat.read(str(course / "solutions" / "lab14" / NOTEBOOK), as_version=4)
    _put(course, "alice_solution", solution)
    _put(course, "bob_release", nbformat.read(str(course / "exercises" / "lab14" / NOTEBOOK), as_version=4))
    release = nbformat.read(str(course / "exercises" / "lab14" / NOTEBOOK), as_version=4)
    for cell in release.cells:  # the array hole (tests/array_hole.py): arrays rewritten to no values
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in LAB_FUNCTIONS:
            cell.source = (REWRITE if grade_id == "lab_logprobs" else "") + LAB_FUNCTIONS[grade_id]
    _put(course, "x_array_rewrite", release)
    for name in BATCH:
        old, new = MUTANTS[name]
        nb = copy.deepcopy(solution)
        hits = [c for c in nb.cells if old in c.source]
        assert len(hits) == 1, name
        hits[0].source = hits[0].source.replace(old, new)
        _put(course, name, nb)
    env = _env()
    sandboxed, _ = probe_sandbox(course)
    if not sandboxed:
        env["COURSE_ALLOW_UNSANDBOXED"] = "1"
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "instructor.autograde", "--assignment", "lab14"], cwd=course,
                          env=env, capture_output=True, text=True, timeout=1800)
    report = json.loads((course / "grades" / "lab14" / "report.json").read_text())
    students = report["students"]
    seconds = {s: r.get("wall_seconds") for s, r in students.items()}
    report_line(request.config, f"lab pipeline: {len(students)} students in {time.time() - start:.0f} s; "
                                f"seconds per student {seconds} (a loaded machine: noisy)")
    yield {"proc": proc, "students": students, "course": course}
    shutil.rmtree(course, ignore_errors=True)


def test_committed_release_matches_a_fresh_generation(graded):
    assert not stale_releases(graded["course"], "lab14", [Path(NOTEBOOK).stem])


def _cells(record) -> dict[str, dict]:
    return {c["grade_id"]: c for c in record["verdicts"]["lab_training_loop"]}


def test_every_student_is_graded(graded):
    assert graded["proc"].returncode == 0, graded["proc"].stdout[-3000:] + graded["proc"].stderr[-3000:]
    assert "lab training check ready" in graded["proc"].stdout


def test_solution_earns_full_marks(graded):
    record = graded["students"]["alice_solution"]
    cells = _cells(record)
    assert all(c["passed"] for c in cells.values()), {g: c["reasons"] for g, c in cells.items() if not c["passed"]}
    assert record["code_score"] == record["max_code_score"] == sum(POINTS.values())


def test_release_earns_nothing(graded):
    record = graded["students"]["bob_release"]
    assert record["code_score"] == 0, _cells(record)
    assert any("NotImplementedError" in r for r in _cells(record)["lab_train_dpo"]["reasons"])


@pytest.mark.parametrize("name", BATCH)
def test_each_bug_loses_the_training_points_of_its_run(graded, name):
    cells = _cells(graded["students"][name])
    broken = TRAINING[FAILS[name]]
    assert not cells[broken]["passed"], cells[broken]
    assert any("training check" in r for r in cells[broken]["reasons"]), cells[broken]["reasons"]
    other = TRAINING["grpo" if FAILS[name] == "dpo" else "dpo"]
    assert cells[other]["passed"], cells[other]["reasons"]


def test_the_array_hole_is_closed(graded):
    """Functions that only validate their input, their arrays rewritten to no values in flight:
    the cells made of array and bad-input checks (8 points before the fix) score 0, flagged."""
    record = graded["students"]["x_array_rewrite"]
    cells = _cells(record)
    assert record["code_score"] == 0 and record["status"] == "review", cells
    assert sum(POINTS[grade_id] for grade_id in LAB_CELLS) == 8
    for grade_id in LAB_CELLS:
        assert any("malformed array" in r for r in cells[grade_id]["reasons"]), cells[grade_id]["reasons"]
    assert any("`__setattr__`" in f for f in record["flags"]), record["flags"]
