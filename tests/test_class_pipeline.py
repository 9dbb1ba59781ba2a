"""A class from the LMS to the LMS, end to end with nbgrader: a Canvas roster export and a Canvas
"Download Submissions" zip go in (resubmissions, LATE markers, an nbformat-3 notebook, a file that
is no notebook of the assignment, a student who submitted nothing), `make collect` (nbgrader's
zip_collect with the course's plug-ins), `make autograde` on two jobs with due dates and extensions,
two instructors' `--student` runs at once, a regrade that reuses the seeds and one that redraws
them, then `make grades`: grades.csv and Canvas's import file with every roster student.

Students submit Q1 only (the other notebooks are "not submitted"), to keep the run short. Needs
bubblewrap, like tests/test_assignment.py.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT
from grading_course import grading_env, released_course

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


pytestmark = pytest.mark.slow

ASSIGNMENT = "module14"
Q1 = "q1_bradley_terry.ipynb"
DUE = dt.datetime(2026, 3, 6, 23, 59, 0)
ROSTER = """Student,ID,SIS User ID,SIS Login ID,Section,module14 (4321)
    Points Possible,,,,,50
"Smith, Alice",101,U1,alice,A,
"Jones, Bob",102,U2,bob,A,
"Brown, Carol",103,U3,carol,B,
"Dean, Dave",104,U4,dave,B,
"Evans, Erin",105,U5,erin,B,
"Fox, Frank",106,U6,frank,B,
"Student, Test",999,,,A,
"""
DEADLINES = f"""[module14]
due = "{DUE:%Y-%m-%d %H:%M:%S} UTC"
penalty_per_day = 0.25
zero_after_days = 3

[module14.extensions]
carol = 2
"""


CHAIN = 40_000  # links: about 60 s of HTML export, past the feedback's time limit in the test (30 s)


def _env() -> dict[str, str]:
    return grading_env()


def _run(cmd: list[str], cwd: Path, timeout: int = 1800):
    return subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)


def _autograde(course: Path, *args: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "instructor.autograde", "--Execute.timeout=20", *args], course)


def _entry(archive: zipfile.ZipFile, name: str, data: bytes, when: dt.datetime) -> None:
    archive.writestr(zipfile.ZipInfo(name, date_time=when.timetuple()[:6]), data)


@pytest.fixture(scope="module")
def course():
    root = released_course("class-", ASSIGNMENT, _env())
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def collected(course):
    (course / "canvas_export.csv").write_text(ROSTER)
    imported = _run([sys.executable, "-m", "instructor.roster", "import", "canvas_export.csv"], course)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    (course / "deadlines.toml").write_text(DEADLINES)
    solution = (course / "solutions" / ASSIGNMENT / Q1).read_bytes()
    release = (course / "exercises" / ASSIGNMENT / Q1).read_bytes()
    v3 = json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": []}]}).encode()
    hour = dt.timedelta(hours=1)
    archive_dir = course / "downloaded" / ASSIGNMENT / "archive"
    archive_dir.mkdir(parents=True)
    with zipfile.ZipFile(archive_dir / "submissions.zip", "w") as archive:
        # alice: the release first, then the solution as Canvas's resubmission -1: the newest wins
        _entry(archive, f"smithalice_101_9001_{Q1}", release, DUE - 5 * hour)
        _entry(archive, "smithalice_101_9001_q1_bradley_terry-1.ipynb", solution, DUE - 2 * hour)
        # bob: late by a day and a half: two started days at 25%
        _entry(archive, f"jonesbob_LATE_102_9002_{Q1}", solution, DUE + dt.timedelta(hours=36))
        # carol: LATE for Canvas, but within her two-day extension
        _entry(archive, f"browncarol_LATE_103_9003_{Q1}", solution, DUE + dt.timedelta(hours=30))
        # dave: an nbformat-3 notebook
        _entry(archive, f"deandave_104_9004_{Q1}", v3, DUE - hour)
        # erin: a notebook that is not one of the assignment's
        _entry(archive, "evanserin_105_9005_homework.ipynb", solution, DUE - hour)
    collect = _run([sys.executable, "-m", "nbgrader", "zip_collect", ASSIGNMENT, "--force"], course)
    assert collect.returncode == 0, collect.stdout + collect.stderr
    # gina is not on the roster and her Canvas-named file was copied into submitted/ by hand
    gina = course / "submitted" / "gina" / ASSIGNMENT
    gina.mkdir(parents=True)
    (gina / f"greengina_107_9007_{Q1}").write_bytes(solution)
    # hank (not on the roster either) adds a cell of his own: one attribute chain too long to export to HTML
    nb = json.loads(solution)
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                        "source": "z = a" + ".b" * CHAIN})
    (course / "submitted" / "hank" / ASSIGNMENT).mkdir(parents=True)
    (course / "submitted" / "hank" / ASSIGNMENT / Q1).write_text(json.dumps(nb))
    return {"collect": collect, "solution": solution}


# Other work of the instructor's user on a busy server: 400 threads and 40 processes held while grading.
LOAD = """
import os, sys, threading, time
kids = []
for _ in range(40):
    pid = os.fork()
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    kids.append(pid)
stop = threading.Event()
for _ in range(400):
    threading.Thread(target=stop.wait, daemon=True).start()
print("loaded", flush=True)
sys.stdin.read()
for pid in kids:
    os.kill(pid, 9)
"""


@pytest.fixture(scope="module")
def graded(course, collected):
    load = subprocess.Popen([sys.executable, "-c", LOAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert load.stdout.readline().strip() == "loaded"
        first = _autograde(course, "--jobs", "2")
    finally:
        load.communicate("", timeout=60)
    report = json.loads((course / "grades" / ASSIGNMENT / "report.json").read_text())
    return {"auto": first, "report": report["students"]}


def _grades(course: Path) -> dict[str, dict]:
    out = _run([sys.executable, "-m", "instructor.export_grades"], course)
    assert out.returncode == 0, out.stdout + out.stderr
    return {r["student_id"]: r for r in csv.DictReader((course / "grades" / ASSIGNMENT / "grades.csv").open())}


def test_zip_collect_keeps_the_newest_resubmission_and_the_times(course, collected):
    sub = course / "submitted"
    assert sorted(p.name for p in sub.iterdir()) == ["alice", "bob", "carol", "dave", "erin", "gina", "hank"]
    assert (sub / "alice" / ASSIGNMENT / Q1).read_bytes() == collected["solution"]
    log = collected["collect"].stdout + collected["collect"].stderr
    assert "has a newer resubmission" in log and "Creating: " in log
    warnings = [line for line in log.splitlines() if "WARNING" in line]  # only erin's file is unexpected
    assert warnings == ["[ZipCollectApp | WARNING] Invalid submission notebook name 'homework.ipynb'"], warnings
    stamp = lambda s: (sub / s / ASSIGNMENT / "timestamp.txt").read_text()  # noqa: E731
    assert stamp("alice") == str(DUE - dt.timedelta(hours=2))
    assert stamp("bob") == str(DUE + dt.timedelta(hours=36))
    assert (sub / "erin" / ASSIGNMENT / "homework.ipynb").exists()


def test_everyone_is_graded_and_nothing_fails(graded):
    """Under the load above (the kernel's process cap counts the kernel alone, and a kernel that dies
    while starting is started again): every honest student earns every autograded point."""
    auto = graded["auto"]
    assert auto.returncode == 0, auto.stdout[-3000:] + auto.stderr[-3000:]
    assert "2 at a time" in auto.stdout
    log = auto.stdout + auto.stderr
    assert "SAWarning" not in log, log[-3000:]  # nbgrader 0.9 with SQLAlchemy 2: benign, silenced
    report = graded["report"]
    assert set(report) == {"alice", "bob", "carol", "dave", "erin", "gina", "hank"}
    assert all(r["status"] != "FAILED" for r in report.values()), {s: r["problems"] for s, r in report.items()}
    q1_points = 10 - 2  # Q1's autograded points (Q1d, 2 points, is graded by hand)
    for student in ("alice", "bob", "carol", "gina", "hank"):
        assert report[student]["notebooks"]["q1_bradley_terry"]["code_score"] == q1_points, report[student]["verdicts"]


def test_not_a_notebook_and_nothing_gradable_are_zero_with_reasons(graded):
    dave, erin = graded["report"]["dave"], graded["report"]["erin"]
    assert dave["status"] == erin["status"] == "review"
    assert dave["code_score"] == erin["code_score"] == 0
    assert any("nbformat 3" in p and "0 points" in p for p in dave["problems"]), dave["problems"]
    assert any("homework.ipynb ignored: not one of the assignment's notebooks" in p for p in erin["problems"])
    assert any("nothing gradable was submitted: 0 points" in p for p in erin["problems"])


def test_canvas_named_file_in_submitted_is_graded(graded):
    gina = graded["report"]["gina"]
    assert any(f"greengina_107_9007_{Q1} graded as {Q1}" in p for p in gina["problems"]), gina["problems"]


def test_late_penalties_and_extensions(graded, course):
    report = graded["report"]
    bob, carol, alice = report["bob"]["late"], report["carol"]["late"], report["alice"]["late"]
    assert bob["seconds_late"] == 36 * 3600 and bob["late_penalty"] == pytest.approx(0.5 * 8)
    assert carol["extension_days"] == 2 and carol["seconds_late"] == 0 and carol["late_penalty"] == 0
    assert alice["seconds_late"] == 0
    text = (course / "grades" / ASSIGNMENT / "report.md").read_text()
    assert "| bob | review |" in text or "| bob | manual |" in text
    assert "36.0 h late, -4" in text and "on time (extension 2 d)" in text


def test_every_graded_notebook_has_a_stored_seed(graded):
    for student in ("alice", "bob", "carol", "gina"):
        seed = graded["report"][student]["seeds"]["q1_bradley_terry"]
        assert isinstance(seed, int) and seed >= 0


def test_grades_have_every_roster_student_and_the_canvas_file(graded, course):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:  # Q1d graded by hand: 2 of 2
        gb.find_grade("q1_unit_answer", "q1_bradley_terry", ASSIGNMENT, "bob").manual_score = 2
        gb.db.commit()
    grades = _grades(course)
    assert set(grades) == {"alice", "bob", "carol", "dave", "erin", "frank", "gina", "hank"}
    assert grades["frank"]["status"] == "missing" and grades["frank"]["final"] == "0"
    bob = grades["bob"]
    # the penalty (two started days at 25%) is taken from the score after hand grading: 50% of 10
    assert bob["total"] == "10" and bob["late_penalty"] == "5" and bob["final"] == "5", bob
    assert "late: 36.0 h late" in bob["notes"]
    assert "nbformat 3" in grades["dave"]["notes"]
    with (course / "grades" / ASSIGNMENT / "canvas.csv").open() as handle:
        canvas = list(csv.DictReader(handle))
    assert [r["SIS Login ID"] for r in canvas] == ["alice", "bob", "carol", "dave", "erin", "frank"]
    column = f"{ASSIGNMENT} (4321)"  # the export's own column: Canvas fills it instead of adding one
    assert list(canvas[0]) == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", column]
    by_login = {r["SIS Login ID"]: r for r in canvas}
    assert by_login["frank"][column] == "0" and by_login["alice"]["ID"] == "101"
    assert by_login["bob"][column] == bob["final"]


def test_two_instructors_at_once_lose_no_update_and_regrades_reuse_seeds(graded, course):
    before = {s: r["seeds"] for s, r in graded["report"].items()}
    started = time.time()
    cmd = [sys.executable, "-m", "instructor.autograde", "--Execute.timeout=20", "--jobs", "1"]
    procs = [subprocess.Popen([*cmd, "--student", s], cwd=course, env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for s in ("alice", "bob")]
    outs = [p.communicate(timeout=1800)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    state = json.loads((course / ".autograde-state.json").read_text())[ASSIGNMENT]["students"]
    report = json.loads((course / "grades" / ASSIGNMENT / "report.json").read_text())["students"]
    for student in ("alice", "bob"):
        first = graded["report"][student]
        assert state[student]["graded_at"] > started > first["graded_at"]  # this run's record landed
        assert report[student]["seeds"] == before[student]  # the regrade drew the same hidden inputs
        assert report[student]["code_score"] == first["code_score"]
    assert set(report) == set(graded["report"])
    redrawn = _autograde(course, "--student", "carol", "--redraw")
    assert redrawn.returncode == 0, redrawn.stdout[-2000:]
    report = json.loads((course / "grades" / ASSIGNMENT / "report.json").read_text())["students"]
    assert report["carol"]["seeds"]["q1_bradley_terry"] != before["carol"]["q1_bradley_terry"]


def test_feedback_ends_with_every_page_when_one_notebook_stalls_the_export(graded, course):
    """`make feedback` (instructor/feedback.py): hank's page would take a minute to export; he gets a
    short page with the reason and his score, every other student their full feedback."""
    out = _run([sys.executable, "-m", "instructor.feedback", "--timeout", "30", "--jobs", "2"], course)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "1 short page(s)" in out.stdout and "hank/q1_bradley_terry: making it took more than 30 s" in out.stdout
    hank = (course / "feedback" / "hank" / ASSIGNMENT / "q1_bradley_terry.html").read_text()
    assert "could not be made: making it took more than 30 s" in hank and "8 / 8" in hank, hank
    for student in ("alice", "bob", "carol", "gina"):  # (dave and erin have no notebook graded)
        page = (course / "feedback" / student / ASSIGNMENT / "q1_bradley_terry.html").read_text()
        assert "could not be made" not in page and "bt_matrix" in page, student
