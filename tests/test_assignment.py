"""The graded assignment end to end: the real nbgrader pipeline on a batch of fake students.

One module-scoped run (in a scratch copy of the course under test-artifacts/) generates the
release, autogrades every fake submission in the sandbox with `python -m instructor.autograde`,
generates feedback and exports grades; the tests then assert per student. Cell timeout for the
run: 4 s (the infinite-loop student), passed on the command line like any nbgrader option.
"""

from __future__ import annotations

import csv
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, report_line

if str(ROOT) not in sys.path:  # the instructor/ tools live at the repository root
    sys.path.insert(0, str(ROOT))

from instructor.autograde import probe_sandbox  # noqa: E402
from instructor.nbgrader_hooks import split_hidden  # noqa: E402

ASSIGNMENT = "module14"
NOTEBOOKS = ["q1_bradley_terry", "q2_dpo_margins", "q3_group_baselines", "q4_budgets", "q5_passport"]
TIMEOUT = 4

pytestmark = pytest.mark.slow


def _say(request, line: str) -> None:
    """Print past pytest's output capture (report_line alone is captured inside a test)."""
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        report_line(request.config, line)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env.pop("COURSE_SANDBOX_KERNEL", None)
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600):
    return subprocess.run(cmd, cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=timeout)


def _test_cells(nb) -> list:
    return [c for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")]


def _read(path: Path):
    return nbformat.read(str(path), as_version=4)


def _write(nb, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


def _with_code(nb, grade_id: str, prefix: str = "", replace: str | None = None):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            cell.source = replace if replace is not None else prefix + cell.source
            return nb
    raise KeyError(grade_id)


DUMMY_Q1 = '''
import math
import numpy as np

def bt_probability(gap):
    return 0.7311

def win_rate_to_gap(p):
    return 1.0986
'''

MONKEYPATCH = '''
np.isclose = lambda *args, **kwargs: True
np.allclose = lambda *args, **kwargs: True
math.isclose = lambda *args, **kwargs: True
abs = lambda x: 0.0
round = lambda x, *args: 0.0
'''

HARDCODED_Q2 = '''
def dpo_terms(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    if beta == 0:
        raise ValueError("beta")
    if np.ndim(policy_chosen) > 0:
        return np.array([0.170, 0.065]), np.array([0.6118, 0.6612]), np.array([0.4576, 0.4838])
    if beta == 0.5:
        return 0.5, 0.4741, 0.3775
    return 0.170, 0.6118, 0.4576
'''

HARDCODED_Q2_ANSWERS = '''
z_pair2, slope_pair2 = 0.065, 0.4838
z_beta05, loss_beta05, slope_beta05 = 0.85, 0.356, 0.299
hardest_pair, hardest_reason = "A", 1
'''

BUILTINS_PATCH = '''
import builtins

class _Zero:
    def __sub__(self, other):
        return 0.0

builtins.float = lambda x=0: _Zero()
'''

ATTACK = '''
import sqlite3
_targets = {targets!r}
for _path in _targets:
    try:
        with open(_path) as _f:
            _f.read()
        print("LEAK read", _path)
    except Exception as _err:
        print("BLOCKED read", type(_err).__name__)
try:
    _con = sqlite3.connect({gradebook!r})
    _con.execute("UPDATE grade SET manual_score = 99")
    _con.commit()
    print("LEAK gradebook written")
except Exception as _err:
    print("BLOCKED gradebook", type(_err).__name__)
for _path in ({gradebook!r}, {marker!r}):
    try:
        with open(_path, "a") as _f:
            _f.write("tampered")
        print("LEAK wrote", _path)
    except Exception as _err:
        print("BLOCKED write", type(_err).__name__)
'''


def _make_submissions(course: Path, intruder: bool) -> dict[str, list[str]]:
    """Fake students; returns {student: notebooks submitted}. The intruder joins only when the
    sandbox works: without it, its attack on the gradebook would succeed and spoil the batch."""
    sol = {n: _read(course / "solutions" / ASSIGNMENT / f"{n}.ipynb") for n in NOTEBOOKS}
    rel = {n: _read(course / "exercises" / ASSIGNMENT / f"{n}.ipynb") for n in NOTEBOOKS}
    sub = course / "submitted"
    made: dict[str, list[str]] = {}

    def put(student, name, nb):
        _write(nb, sub / student / ASSIGNMENT / f"{name}.ipynb")
        made.setdefault(student, []).append(name)

    for n in NOTEBOOKS:
        put("alice_solutions", n, sol[n])
        put("bob_untouched", n, rel[n])
    for n in ("q1_bradley_terry", "q2_dpo_margins"):  # tests edited to `assert True`
        nb = _read(course / "exercises" / ASSIGNMENT / f"{n}.ipynb")
        for cell in _test_cells(nb):
            cell.source = "assert True"
        put("carol_assert_true", n, nb)
    # dummy answers + monkeypatched comparison functions
    put("dave_monkeypatch", "q1_bradley_terry",
        _with_code(_read(course / "exercises" / ASSIGNMENT / "q1_bradley_terry.ipynb"), "q1_functions",
                   replace=DUMMY_Q1 + MONKEYPATCH))
    # the numbers shown in the visible tests and the lecture, typed in: passes every visible test
    nb = _with_code(_read(course / "exercises" / ASSIGNMENT / "q2_dpo_margins.ipynb"), "q2_functions",
                    replace=HARDCODED_Q2)
    put("kim_hardcoded", "q2_dpo_margins", _with_code(nb, "q2_answers", replace=HARDCODED_Q2_ANSWERS))
    # dummy answers + a builtins patch that does fool `float(x) - expected`: must be flagged
    put("erin_builtins", "q1_bradley_terry",
        _with_code(_read(course / "exercises" / ASSIGNMENT / "q1_bradley_terry.ipynb"), "q1_functions",
                   replace=DUMMY_Q1 + BUILTINS_PATCH))
    # an infinite loop in Q1, a correct Q2
    put("frank_loop", "q1_bradley_terry",
        _with_code(_read(course / "solutions" / ASSIGNMENT / "q1_bradley_terry.ipynb"), "q1_functions",
                   prefix="while True:\n    pass\n\n"))
    put("frank_loop", "q2_dpo_margins", sol["q2_dpo_margins"])
    # an invalid-JSON notebook next to a valid one
    (sub / "grace_corrupt" / ASSIGNMENT).mkdir(parents=True)
    (sub / "grace_corrupt" / ASSIGNMENT / "q1_bradley_terry.ipynb").write_text('{"cells": [ this is not json')
    put("grace_corrupt", "q2_dpo_margins", sol["q2_dpo_margins"])
    made["grace_corrupt"].append("q1_bradley_terry")
    # correct code, every test cell deleted
    nb = _read(course / "solutions" / ASSIGNMENT / "q1_bradley_terry.ipynb")
    nb.cells = [c for c in nb.cells if c not in _test_cells(nb)]
    put("heidi_deleted_tests", "q1_bradley_terry", nb)
    if not intruder:
        return made
    # tries to read the solutions and to change the gradebook, then answers correctly
    attack = ATTACK.format(
        targets=[str(course / "solutions" / ASSIGNMENT / "q1_bradley_terry.ipynb"),
                 str(ROOT / "solutions" / ASSIGNMENT / "q1_bradley_terry.ipynb"),
                 str(course / "gradebook.db")],
        gradebook=str(course / "gradebook.db"), marker=str(course / "PWNED"))
    put("ivan_intruder", "q1_bradley_terry",
        _with_code(_read(course / "solutions" / ASSIGNMENT / "q1_bradley_terry.ipynb"), "q1_functions",
                   prefix=attack + "\n"))
    return made


@pytest.fixture(scope="module")
def graded(request):
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    course = Path(tempfile.mkdtemp(prefix="assignment-", dir=ROOT / "test-artifacts"))
    os.chmod(course, 0o755)
    for item in ("nbgrader_config.py", "instructor", "solutions"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, course / item)
    timings = {}
    start = time.time()
    gen = _run([sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"], course)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    timings["generate_assignment"] = time.time() - start
    sandbox_tmp = tempfile.mkdtemp()
    sandboxed, why = probe_sandbox(course, sandbox_tmp)
    shutil.rmtree(sandbox_tmp, ignore_errors=True)
    students = _make_submissions(course, intruder=sandboxed)
    env = _env()
    if not sandboxed:
        env["COURSE_ALLOW_UNSANDBOXED"] = "1"
    start = time.time()
    auto = _run([sys.executable, "-m", "instructor.autograde", f"--Execute.timeout={TIMEOUT}"], course, env)
    timings["autograde"] = time.time() - start
    start = time.time()
    fb = _run([sys.executable, "-m", "nbgrader", "generate_feedback", ASSIGNMENT, "--force"], course)
    timings["generate_feedback"] = time.time() - start
    grades = _run([sys.executable, "-m", "instructor.export_grades"], course)
    assert grades.returncode == 0, grades.stdout + grades.stderr
    report = json.loads((course / "autograde-report.json").read_text())
    for name, seconds in timings.items():
        _say(request, f"assignment pipeline: {name} {seconds:.1f} s")
    yield {
        "course": course, "students": students, "auto": auto, "feedback": fb, "report": report,
        "sandboxed": sandboxed, "why": why,
        "grades": {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())},
    }
    shutil.rmtree(course, ignore_errors=True)


def _student(graded, name):
    return graded["report"]["students"][name]


def _points(kind: str) -> dict[str, float]:
    """Autograded points per notebook, read from the solutions' metadata."""
    out = {}
    for n in NOTEBOOKS:
        nb = _read(ROOT / "solutions" / ASSIGNMENT / f"{n}.ipynb")
        out[n] = sum(c.metadata["nbgrader"]["points"] for c in _test_cells(nb))
    return out


def _hidden_lines(notebook: str) -> list[str]:
    """Distinctive code of the hidden tests (the failure message itself may be shown as a verdict)."""
    lines = []
    for cell in _test_cells(_read(ROOT / "solutions" / ASSIGNMENT / f"{notebook}.ipynb")):
        for line in split_hidden(cell.source)[1].splitlines():
            code = line.strip().split(', "hidden test')[0].split(", 'hidden test")[0]
            if len(code) > 20:
                lines.append(code)
    assert lines, notebook
    return lines


# ------------------------------------------------------------------------------------ release


def test_committed_release_matches_a_fresh_generation(graded):
    for n in NOTEBOOKS:
        fresh = json.loads((graded["course"] / "exercises" / ASSIGNMENT / f"{n}.ipynb").read_text())
        committed = json.loads((ROOT / "exercises" / ASSIGNMENT / f"{n}.ipynb").read_text())
        assert committed == fresh, f"exercises/{ASSIGNMENT}/{n}.ipynb is stale: run `make assignment`"


def test_release_has_no_solutions_hidden_tests_or_jupytext():
    for n in NOTEBOOKS:
        text = (ROOT / "exercises" / ASSIGNMENT / f"{n}.ipynb").read_text()
        source = (ROOT / "solutions" / ASSIGNMENT / f"{n}.ipynb").read_text()
        assert "BEGIN SOLUTION" in source and "BEGIN SOLUTION" not in text
        assert "HIDDEN TESTS" not in text
        assert "jupytext" not in text
        nb = _read(ROOT / "exercises" / ASSIGNMENT / f"{n}.ipynb")
        for cell in nb.cells:
            assert cell.cell_type == "markdown" or not cell.outputs, f"{n}: outputs in the release"
        released = "\n".join(c.source for c in nb.cells)
        for line in _hidden_lines(n):
            assert line not in released, f"{n}: a hidden test line leaked into the release: {line}"


def test_points_are_ten_per_question():
    for n in NOTEBOOKS:
        nb = _read(ROOT / "solutions" / ASSIGNMENT / f"{n}.ipynb")
        total = sum(c.metadata["nbgrader"].get("points", 0) for c in nb.cells
                    if c.metadata.get("nbgrader", {}).get("grade"))
        assert total == 10, n
        manual = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
                  and c.metadata["nbgrader"].get("solution")]
        assert [c.cell_type for c in manual] == (["markdown"] if n in ("q1_bradley_terry", "q5_passport") else [])


def test_release_fails_validate_and_solutions_pass(graded):
    course = graded["course"]
    for folder, should_pass in (("solutions", True), ("exercises", False)):
        paths = [str(course / folder / ASSIGNMENT / f"{n}.ipynb") for n in NOTEBOOKS]
        out = _run([sys.executable, "-m", "nbgrader", "validate", *paths], course)
        text = out.stdout + out.stderr
        passed = text.count("Success! Your notebook passes all the tests.")
        failed = len(re.findall(r"VALIDATION FAILED ON \d+ CELL", text)) + text.count("NotImplementedError")
        if should_pass:
            assert passed == len(NOTEBOOKS), text[-3000:]
        else:
            assert passed == 0 and failed >= len(NOTEBOOKS), text[-3000:]


# ------------------------------------------------------------------------------------ grading


def test_autograde_report_and_timing(graded, request):
    auto = graded["auto"]
    assert auto.returncode == 1, auto.stdout[-3000:] + auto.stderr[-3000:]  # grace cannot be graded
    seconds = graded["report"]["seconds"]
    for name, sec in sorted(seconds.items()):
        _say(request, f"autograde seconds {name}: {sec:.2f}")
    honest = [s for k, s in seconds.items() if not k.startswith("frank_loop/q1")]
    assert honest and max(honest) < 15, seconds  # goal on a quiet machine: <= 5 s per notebook
    if graded["sandboxed"]:
        assert graded["report"]["sandbox"].startswith("bubblewrap")


def test_solutions_earn_every_autograded_point(graded):
    res = _student(graded, "alice_solutions")
    points = _points("auto")
    assert res["status"] == "graded"
    assert res["code_score"] == res["max_code_score"] == sum(points.values()) == 46
    for n in NOTEBOOKS:
        assert res["notebooks"][n]["code_score"] == points[n], n
    assert res["flags"] == []
    assert graded["grades"]["alice_solutions"]["status"] == "manual"  # Q1/Q5 written answers pending


def test_untouched_release_earns_zero(graded):
    res = _student(graded, "bob_untouched")
    assert res["status"] == "graded" and res["max_code_score"] == 46
    assert res["code_score"] == 0
    assert res["flags"] == []


def test_tests_edited_to_assert_true_earn_zero(graded):
    res = _student(graded, "carol_assert_true")
    assert res["status"] == "graded" and res["code_score"] == 0


def test_hard_coded_visible_numbers_pass_validate_but_earn_zero(graded):
    course = graded["course"]
    path = course / "submitted" / "kim_hardcoded" / ASSIGNMENT / "q2_dpo_margins.ipynb"
    out = _run([sys.executable, "-m", "nbgrader", "validate", str(path)], course)
    assert "Success! Your notebook passes all the tests." in out.stdout, out.stdout[-2000:]
    res = _student(graded, "kim_hardcoded")
    assert res["status"] == "graded" and res["notebooks"]["q2_dpo_margins"]["code_score"] == 0
    assert res["flags"] == []  # nothing illegal about it, just wrong


def test_dummy_answers_with_monkeypatched_comparisons_earn_zero(graded):
    res = _student(graded, "dave_monkeypatch")
    assert res["status"] == "graded" and res["code_score"] == 0
    flags = " ".join(res["flags"])
    assert "np.isclose" in flags and "math.isclose" in flags and "`abs`" in flags


def test_builtins_patch_is_flagged(graded):
    res = _student(graded, "erin_builtins")
    flags = " ".join(res["flags"])
    assert "imports `builtins`" in flags and "builtins.float" in flags
    assert graded["grades"]["erin_builtins"]["status"] == "review"
    assert "erin_builtins" in (graded["course"] / "autograde-report.md").read_text()


def test_infinite_loop_is_bounded_and_costs_only_that_question(graded):
    res = _student(graded, "frank_loop")
    assert res["status"] == "graded"
    # the loop sits in the cell defining bt_probability and win_rate_to_gap: the 6 points that need
    # them are lost; reward_model_loss (its own cell, 2 points) and Q2 (10 points) still count
    assert res["notebooks"]["q1_bradley_terry"]["code_score"] == 2
    assert res["notebooks"]["q2_dpo_margins"]["code_score"] == 10
    assert any("time limit" in p for p in res["problems"]), res["problems"]
    assert any("not submitted (0 points): q3_group_baselines.ipynb" in p for p in res["problems"])
    assert graded["report"]["seconds"]["frank_loop/q1_bradley_terry.ipynb"] < 6 * TIMEOUT + 10


def test_invalid_json_is_reported_and_the_batch_is_graded(graded):
    res = _student(graded, "grace_corrupt")
    assert res["status"] == "FAILED"
    assert any("q1_bradley_terry.ipynb is not a valid notebook" in p for p in res["problems"])
    assert graded["grades"]["grace_corrupt"]["status"] == "FAILED"
    assert graded["grades"]["grace_corrupt"]["total"] == ""  # no half-made score
    graded_students = [s for s, r in graded["report"]["students"].items() if r["status"] == "graded"]
    assert len(graded_students) == len(graded["students"]) - 1


def test_deleted_test_cells_earn_nothing(graded):
    res = _student(graded, "heidi_deleted_tests")
    assert res["notebooks"]["q1_bradley_terry"]["code_score"] == 0
    assert sum("test cell deleted" in f for f in res["flags"]) == len(_test_cells(
        _read(ROOT / "solutions" / ASSIGNMENT / "q1_bradley_terry.ipynb")))


def test_sandbox_blocks_reading_solutions_and_writing_the_gradebook(graded):
    if not graded["sandboxed"]:
        pytest.skip(f"no working sandbox here ({graded['why']}); CI installs bubblewrap")
    course = graded["course"]
    nb = _read(course / "autograded" / "ivan_intruder" / ASSIGNMENT / "q1_bradley_terry.ipynb")
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "q1_functions")
    printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    assert "LEAK" not in printed, printed
    assert printed.count("BLOCKED read") == 3 and printed.count("BLOCKED write") == 2, printed
    assert "BLOCKED gradebook" in printed
    assert not (course / "PWNED").exists()
    res = _student(graded, "ivan_intruder")
    assert res["notebooks"]["q1_bradley_terry"]["code_score"] == 8  # its own honest work, nothing more
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        manual = [g.manual_score for s in gb.assignment_submissions(ASSIGNMENT) for n in s.notebooks
                  for g in n.grades if g.manual_score is not None]
    assert manual == []


def test_plain_nbgrader_autograde_refuses_to_run_student_code(graded):
    course = graded["course"]
    _write(_read(course / "solutions" / ASSIGNMENT / "q1_bradley_terry.ipynb"),
           course / "submitted" / "zed_plain" / ASSIGNMENT / "q1_bradley_terry.ipynb")
    out = _run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--student=zed_plain", "--force"], course)
    assert out.returncode != 0
    assert "refusing to run student code outside the sandbox" in out.stdout + out.stderr
    assert not (course / "autograded" / "zed_plain" / ASSIGNMENT).exists()


def test_feedback_contains_no_hidden_test(graded):
    course = graded["course"]
    assert graded["feedback"].returncode == 0, graded["feedback"].stderr[-2000:]
    pages = sorted((course / "feedback").glob(f"*/{ASSIGNMENT}/*.html"))
    assert len(pages) >= 5 + 5
    for page in pages:
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
        assert "HIDDEN TESTS" not in text
        for code in _hidden_lines(page.stem):
            assert code not in text, f"{page.relative_to(course)} shows hidden test code: {code}"
    bob = html.unescape(re.sub(r"<[^>]+>", "", (course / "feedback" / "bob_untouched" / ASSIGNMENT /
                                                "q1_bradley_terry.html").read_text()))
    assert "NotImplementedError" in bob  # feedback still says what went wrong
