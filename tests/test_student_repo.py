"""`make student-repo`: a fresh repository (one commit) without the solutions, the hidden checks, the
copied answers and the tests that need them, whose own test suite collects cleanly and whose fast
tests pass; its Colab links and set-up cells point at the students' repository.

Running the student repository's whole suite here would take an hour on this machine; this runs its
collection (every test file imports and every test is found), the quick tests (not marked ``slow``) of
``FAST_FILES`` (the Colab links and set-up cells, the packaging, the advantages: the library working from
the students' copy), and the wheel its set-up cells install. The slow tests of those files (a Colab-like
runtime built and four notebooks run on it) are the instructor copy's ``tests/test_colab.py`` again: the
students' course_lib and notebooks differ from it only by the repository address, checked here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile

import pytest
from conftest import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from course_lib.lesson import colab  # noqa: E402
from tools import student_repo  # noqa: E402

pytestmark = pytest.mark.slow
NEW_REPO = "my-school/post-training-2027"
FAST_FILES = ["tests/test_colab.py", "tests/test_packaging.py", "tests/test_advantages.py"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    dest = tmp_path_factory.mktemp("students") / "course"
    files = student_repo.build(ROOT, dest, NEW_REPO)
    return dest, files


def test_no_instructor_file_and_one_commit(built):
    dest, files = built
    assert not (dest / "solutions").exists() and not (dest / "instructor" / "checks").exists()
    assert not (dest / "tests" / "copied_answers.py").exists()
    for name in ("test_assignment.py", "test_assignment_tools.py", "test_lab.py", "test_lab_pipeline.py",
                 "test_systems14.py"):
        assert not (dest / "tests" / name).exists(), name
    assert (dest / "exercises" / "module14" / "q1_bradley_terry.ipynb").exists()
    assert (dest / "exercises" / "systems14" / "q6_stale_rollouts.ipynb").exists()  # the systems assignment, released
    assert (dest / "course_lib" / "lesson" / "colab.py").exists() and (dest / "Makefile").exists()
    log = subprocess.run(["git", "log", "--oneline"], cwd=dest, capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == 1
    status = subprocess.run(["git", "status", "--porcelain"], cwd=dest, capture_output=True, text=True, check=True)
    assert status.stdout == ""
    for path in dest.rglob("*"):  # nothing left that holds an answer
        if path.is_file() and ".git" not in path.parts and path.suffix in (".py", ".ipynb"):
            assert "### BEGIN SOLUTION" not in path.read_text(errors="replace"), path


def test_every_remaining_test_runs_without_instructor_files(built):
    dest, files = built
    for path in files:
        if path.startswith("tests/") and path.endswith(".py"):
            assert not student_repo.needs_instructor_files(path, (dest / path).read_text()), path


def test_colab_links_and_set_up_cells_point_at_the_students_repository(built):
    dest, _ = built
    assert f'REPO = "{NEW_REPO}"' in (dest / "course_lib" / "lesson" / "colab.py").read_text()
    assert f"colab.research.google.com/github/{NEW_REPO}/" in (dest / "README.md").read_text()
    assert f"git+https://github.com/{NEW_REPO}.git" in (dest / "notebooks" / "00_start_here.ipynb").read_text()
    assert colab.REPO not in (dest / "README.md").read_text()
    assert not [p for p in (dest / "docs").glob("*.md") if colab.REPO in p.read_text()]
    # the README's map, rewritten to the new address, is still what the students' course_map renders
    check = _in_student_repo(dest, "-m", "tools.course_map", "--check", timeout=120)
    assert check.returncode == 0, check.stderr


def test_its_course_lib_builds_the_wheel_its_set_up_cells_install(built, tmp_path):
    """What ``pip install git+<students' repository>`` builds (the Colab set-up cell), from the students' copy."""
    dest, _ = built
    made = _in_student_repo(dest, "-c", "import sys, pathlib; from tools import colab_check; "
                                        "print(colab_check.course_wheel(pathlib.Path(sys.argv[1])))", str(tmp_path),
                            timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    with zipfile.ZipFile(made.stdout.strip()) as wheel:
        assert f'REPO = "{NEW_REPO}"' in wheel.read("course_lib/lesson/colab.py").decode()
        assert "course_lib/tinygpt/model.py" in wheel.namelist()


def _in_student_repo(dest, *args, timeout=900):
    env = {**os.environ, "PYTHONPATH": str(dest), "OMP_NUM_THREADS": "1"}  # its own course_lib first
    return subprocess.run([sys.executable, *args], cwd=dest, env=env, capture_output=True, text=True, timeout=timeout)


def test_its_tests_collect_and_its_fast_tests_pass(built):
    dest, _ = built
    collected = _in_student_repo(dest, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    assert "error" not in collected.stdout.lower().split("\n")[-2], collected.stdout[-1000:]
    ran = _in_student_repo(dest, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *FAST_FILES,
                           "-m", "not slow")
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert re.search(r"\b\d{2,} passed\b", ran.stdout), ran.stdout[-1000:]  # the quick tests ran, not none
    lint = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ruff"), "check", "."], cwd=dest,
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout[-2000:]


def test_bad_destination_and_repository_name_are_refused(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ValueError, match="exists and is not empty"):
        student_repo.build(ROOT, tmp_path / "full")
    with pytest.raises(ValueError, match="--repo must be owner/name"):
        student_repo.build(ROOT, tmp_path / "new", "not a repo")
