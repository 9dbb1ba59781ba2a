"""The class-scale instructor tools without an nbgrader run: Canvas file names, the roster, late
penalties, the state lock, the stored grading seeds and inputs sized for slow correct answers.
The whole workflow on a fake class (zip in, Canvas import file out) is tests/test_class_pipeline.py.
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import os
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from instructor import deadlines, grading, roster  # noqa: E402
from instructor.autograde import book_of, load_state, locked_state  # noqa: E402
from instructor.checks import module14  # noqa: E402
from instructor.collect import parse_canvas_name, release_name  # noqa: E402
from instructor.submission import stage  # noqa: E402

RELEASE = ROOT / "exercises" / "module14"
EXPECTED = {p.name for p in RELEASE.glob("*.ipynb")}


# ------------------------------------------------------------------------------ Canvas file names


@pytest.mark.parametrize("name, info", [
    ("smithjohn_12345_678901_q1_bradley_terry.ipynb",
     {"lms_id": "12345", "late": False, "submission_id": "678901", "file_id": "q1_bradley_terry.ipynb", "attempt": 0}),
    ("smithjohn_LATE_12345_678901_q1_bradley_terry-2.ipynb",
     {"lms_id": "12345", "late": True, "submission_id": "678901", "file_id": "q1_bradley_terry.ipynb", "attempt": 2}),
    ("obrienmary_7_8_q2_dpo_margins (1).ipynb",
     {"lms_id": "7", "late": False, "submission_id": "8", "file_id": "q2_dpo_margins.ipynb", "attempt": 1}),
    ("q1_bradley_terry.ipynb", None),
    ("smithjohn_abc_678901_q1_bradley_terry.ipynb", None),
])
def test_canvas_names_are_read(name, info):
    assert parse_canvas_name(name) == info


def test_release_name_maps_canvas_names_and_nothing_else():
    assert release_name("q1_bradley_terry.ipynb", EXPECTED) == "q1_bradley_terry.ipynb"
    assert release_name("smithjohn_LATE_1_2_q3_group_baselines-4.ipynb", EXPECTED) == "q3_group_baselines.ipynb"
    assert release_name("smithjohn_1_2_homework.ipynb", EXPECTED) is None
    assert release_name("notes.ipynb", EXPECTED) is None


def _release(name: str):
    return nbformat.read(str(RELEASE / name), as_version=4)


def test_stage_grades_canvas_named_files_newest_resubmission_first(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    old, new = _release("q1_bradley_terry.ipynb"), _release("q1_bradley_terry.ipynb")
    new.cells[0].source = "NEWEST"
    nbformat.write(old, str(sub / "smithjohn_1_2_q1_bradley_terry-1.ipynb"))
    nbformat.write(new, str(sub / "smithjohn_1_2_q1_bradley_terry-3.ipynb"))
    nbformat.write(old, str(sub / "smithjohn_1_2_q1_bradley_terry.ipynb"))
    _, problems = stage(sub, RELEASE, tmp_path / "staged")
    staged = sorted(p.name for p in (tmp_path / "staged").glob("*.ipynb"))
    assert staged == ["q1_bradley_terry.ipynb"]
    assert any("smithjohn_1_2_q1_bradley_terry-3.ipynb graded as q1_bradley_terry.ipynb" in p for p in problems)
    assert sum("is a newer copy of q1_bradley_terry.ipynb" in p for p in problems) == 2, problems


def test_an_nbformat_3_notebook_is_zero_points_not_a_notebook(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "q1_bradley_terry.ipynb").write_text(json.dumps(
        {"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": []}]}))
    _, problems = stage(sub, RELEASE, tmp_path / "staged")
    assert not list((tmp_path / "staged").glob("*.ipynb"))
    assert any("q1_bradley_terry.ipynb is not a notebook this course grades (nbformat 3" in p and "0 points" in p
               for p in problems), problems


# ------------------------------------------------------------------------------ roster


CANVAS_EXPORT = """Student,ID,SIS User ID,SIS Login ID,Section,module14 (4321)
    Points Possible,,,,,50
"Smith, John",12345,U001,jsmith,Section A,
"O'Brien, Mary",12346,U002,,Section B,
"Student, Test",99999,,,Section A,
"""


def test_roster_reads_a_canvas_export(tmp_path):
    path = tmp_path / "export.csv"
    path.write_text(CANVAS_EXPORT)
    rows, notes = roster.parse(path)
    assert [(r["student_id"], r["first_name"], r["last_name"], r["lms_user_id"]) for r in rows] == [
        ("jsmith", "John", "Smith", "12345"), ("12346", "Mary", "O'Brien", "12346")]
    assert notes == ["line 4 (O'Brien, Mary): no SIS Login ID; student id is the Canvas ID 12346"]
    assert rows[0]["Section"] == "Section A" and rows[0]["SIS User ID"] == "U001"


@pytest.mark.parametrize("text, id_column, message", [
    ("Name,Email\nJohn,j@x\n", "SIS Login ID", "not a Canvas export"),
    (CANVAS_EXPORT, "Login", "--id-column 'Login' is not a column"),
    ('Student,ID,SIS Login ID\n"A, B",1,same\n"C, D",2,same\n', "SIS Login ID", "appears twice"),
    ("Student,ID\n", "ID", "no students found"),
    ('Student,ID,SIS Login ID\n"A, B",1,../../escaped_id\n', "SIS Login ID", "'../../escaped_id' refused: it would"),
    ('Student,ID,SIS Login ID\n"A, B",1,..\n', "SIS Login ID", "'..' refused"),
    ('Student,ID,SIS Login ID\n"A, B",1,-rf\n', "SIS Login ID", "'-rf' refused: it starts with '-'"),
    ('Student,ID,SIS Login ID\n"A, B",1,"a\tb"\n', "SIS Login ID", "control character"),
])
def test_roster_refuses_bad_input(tmp_path, text, id_column, message):
    path = tmp_path / "export.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        roster.parse(path, id_column)


def test_make_roster_refuses_an_id_outside_the_course_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "export.csv"
    path.write_text('Student,ID,SIS Login ID\n"A, B",1,../../escaped_id\n"C, D",2,O\'Brien Ann\n')
    assert roster.main(["import", str(path), "--root", str(tmp_path)]) == 2
    assert "line 2 (A, B): student id '../../escaped_id' refused" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.csv"]  # no gradebook, no roster.csv
    path.write_text('Student,ID,SIS Login ID\n"C, D",2,O\'Brien Ann\n')
    assert roster.parse(path)[0][0]["student_id"] == "O'Brien Ann"  # spaces and quotes: make quotes STUDENT


def test_roster_import_fills_the_gradebook(tmp_path, monkeypatch):
    from nbgrader.api import Gradebook

    # a new gradebook runs `alembic` from this environment, as `make roster` does
    monkeypatch.setenv("PATH", os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))

    path = tmp_path / "export.csv"
    path.write_text(CANVAS_EXPORT)
    rows, _ = roster.parse(path)
    roster.import_roster(tmp_path, rows)
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        john = gb.find_student("jsmith")
        assert (john.first_name, john.last_name, john.lms_user_id) == ("John", "Smith", "12345")
        assert {s.id for s in gb.students} == {"jsmith", "12346"}
    assert [r["student_id"] for r in roster.load(tmp_path)] == ["jsmith", "12346"]
    assert list(csv.DictReader((tmp_path / roster.ROSTER).open()))[1]["Section"] == "Section B"


# ------------------------------------------------------------------------------ late penalty


POLICY = {"due": "2026-03-06 23:59:00 UTC", "penalty_per_day": 0.1, "zero_after_days": 5}


@settings(max_examples=200, deadline=None)
@given(score=st.floats(0, 50), late=st.floats(0, 20 * 86400), more=st.floats(0, 5 * 86400))
def test_penalty_is_bounded_and_grows_with_lateness(score, late, more):
    lost = deadlines.penalty(score, late, POLICY)
    assert 0 <= lost <= score
    assert deadlines.penalty(score, late + more, POLICY) >= lost
    if late == 0:
        assert lost == 0


def test_penalty_counts_started_days_and_zero_after_the_limit():
    assert deadlines.penalty(40, 1, POLICY) == pytest.approx(4.0)  # one second late: one started day
    assert deadlines.penalty(40, 86400 + 1, POLICY) == pytest.approx(8.0)
    assert deadlines.penalty(40, 5 * 86400 + 1, POLICY) == 40  # past zero_after_days
    assert deadlines.penalty(40, 86400, {}) == 0  # no policy, no penalty


@pytest.mark.parametrize("text, message", [
    ('[module14]\ndue = "2026-03-06"\nfine = 1\n', "unknown key"),
    ("[module14]\npenalty_per_day = 0.1\n", "'due' is required"),
    ('[module14]\ndue = "2026-03-06"\npenalty_per_day = 2\n', "penalty_per_day must be a number in"),
    ('[module14]\ndue = "2026-03-06"\n[module14.extensions]\ns1 = -1\n', "s1 must be a number of days"),
])
def test_deadlines_refuse_bad_input(tmp_path, text, message):
    (tmp_path / deadlines.FILE).write_text(text)
    with pytest.raises(ValueError, match=message):
        deadlines.load(tmp_path, "module14")


# ------------------------------------------------------------------------------ state under a lock


def _add_students(root: str, prefix: str, n: int) -> None:
    from pathlib import Path

    for i in range(n):
        with locked_state(Path(root)) as state:
            book_of(state, "module14")["students"][f"{prefix}{i}"] = {"status": "ok"}


def test_two_writers_at_once_lose_no_update(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_add_students, args=(str(tmp_path), prefix, 40)) for prefix in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    students = load_state(tmp_path)["module14"]["students"]
    assert len(students) == 80


# ------------------------------------------------------------------------------ seeds and input sizes


def test_a_stored_seed_draws_the_same_hidden_inputs():
    def inputs(seed):
        table = grading.load_checks("module14", grading.new_rng(seed))
        return json.dumps({g: [repr(sorted(c.inputs.items())) for c in cs] for g, cs in table.items()})

    seed = grading.draw_seed()
    assert inputs(seed) == inputs(seed)
    assert inputs(seed) != inputs(seed + 1)


def test_random_inputs_keep_an_enumeration_within_budget():
    """A correct answer that enumerates every outcome (len(q) ** G) must never meet the time limit."""
    for seed in range(300):
        cells = module14.checks(np.random.default_rng(seed))["q3_test_zero_variance"]
        for c in cells:
            q = c.inputs.get("q", [c.inputs["p"], 0] if "p" in c.inputs else None)
            if q is None:
                continue
            g = c.inputs.get("G", 8)
            assert len(q) ** int(g) <= module14.ENUMERATION_BUDGET, (seed, c.expr, len(q), g)


# ------------------------------------------------------------------------------ Makefile and git


@pytest.mark.parametrize("target, expected", [
    (["formgrader", "PORT=8890"], ["--ServerApp.port=8890", "--ServerApp.open_browser=False"]),
    (["autograde", "JOBS=3", "REDRAW=1", "STUDENT=s1"], ["--jobs '3'", "--student 's1'", "--redraw"]),
    (["autograde", "STUDENT=x;touch /tmp/P;y"], ["--student 'x;touch /tmp/P;y'"]),  # one word, nothing run
    (["autograde", "STUDENT=O'Brien Ann"], ["--student 'O'\\''Brien Ann'"]),
    (["autograde"], ["instructor.autograde --assignment 'module14'"]),  # --jobs: autograde's default, the cores
    (["collect", "ASSIGNMENT=lab14"], ["nbgrader zip_collect 'lab14' --force"]),
    (["autograde", "ASSIGNMENT=x;touch /tmp/P;y"], ["--assignment 'x;touch /tmp/P;y'"]),
    (["assignment", "ASSIGNMENT=lab 14"], ["nbgrader generate_assignment 'lab 14' --force"]),
    (["feedback", "ASSIGNMENT=it's"], ["--assignment 'it'\\''s'"]),
    (["similarity", "ASSIGNMENT=a;b"], ["--assignment 'a;b'"]),
    (["roster", "CSV=export.csv"], ["instructor.roster import \"export.csv\""]),
    (["grades", "CANVAS_COLUMN=module14 (4321)"], ["instructor.export_grades --assignment 'module14'",
                                                   "--canvas-column \"module14 (4321)\""]),
    (["student-repo", "DEST=/tmp/x", "STUDENT_REPO=a/b"], ["tools.student_repo \"/tmp/x\" --repo \"a/b\""]),
])
def test_make_targets_pass_their_options(target, expected):
    import subprocess

    out = subprocess.run(["make", "-n", "-W", "pyproject.toml", "-o", ".venv/.installed", *target], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for flag in expected:
        assert flag in out.stdout, (flag, out.stdout)


def test_make_autograde_runs_no_command_a_student_id_holds(tmp_path):
    """A real `make autograde` (its venv step and the system-package check aside) with an id that is a
    shell command: the id reaches autograde as one argument, and the command never runs."""
    import subprocess

    marker = tmp_path / "P"
    student = f"x;touch {marker};y"
    out = subprocess.run(["make", "--no-print-directory", "autograde", f"STUDENT={student}", "MAKE=true",
                          f"PY={sys.executable}", f"BIN={Path(sys.executable).parent}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and not marker.exists(), out.stdout + out.stderr
    assert f"No submissions for [{student!r}]" in out.stderr, out.stderr


@pytest.mark.parametrize("target, message", [(["roster"], "CSV="), (["student-repo"], "DEST=")])
def test_make_targets_refuse_a_missing_argument(target, message):
    import subprocess

    out = subprocess.run(["make", "-n", "-o", ".venv/.installed", *target], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode != 0 and message in out.stderr


def test_instructor_state_is_git_ignored():
    import subprocess

    paths = ["downloaded/module14/archive/s.zip", "grades/module14/grades.csv", "roster.csv", "roster-columns.json",
             "deadlines.toml",
             ".autograde.lock"]
    out = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.split() == paths


def test_autograde_refuses_a_bad_jobs_count(capsys):
    from instructor import autograde

    with pytest.raises(SystemExit) as stop:
        autograde.main(["--jobs", "0"])
    assert stop.value.code == 2 and "--jobs must be a whole number >= 1, got 0" in capsys.readouterr().err
