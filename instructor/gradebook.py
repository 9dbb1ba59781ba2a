"""The gradebook and the report folder that autograde, ``make grades``, feedback and the roster share.

``db_url`` (where nbgrader's gradebook is), ``opened`` (the gradebook, opened and closed around a
block), ``report_dir`` (grades/<assignment>/), the one set of ``STATUSES`` and ``status_of``, and the
gradebook reads and writes of one student's grading (hand grades kept, scan flags shown in the
formgrader, a submission of zeros, the scores). A leaf: it imports nothing else from instructor/.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry

REPORTS = "grades"  # grades/<assignment>/: report.md, report.json, autograde.log, grades.csv, canvas.csv

# One set of status names: the report, grades.csv and docs/instructors.md use exactly these.
STATUSES = {
    "ok": "graded; nothing left to do",
    "manual": "graded; written answers still to grade by hand in the formgrader (total provisional)",
    "review": "graded, but look first: the scan flagged code, or grading met a problem (listed)",
    "FAILED": "could not be graded at all; no score is given (the reason is listed)",
    "missing": "on the roster, nothing submitted: 0 points (grades.csv and canvas.csv only)",
}


def status_of(flags: list, problems: list, needs_manual: bool) -> str:
    """The status of a graded student (one that could not be graded is ``FAILED``, set where it failed)."""
    if flags or problems:
        return "review"
    return "manual" if needs_manual else "ok"


def late_text(late: dict | None) -> str:
    """"on time", or how late and what it cost ("—" without a timestamp or a due date)."""
    if not late or late.get("due") is None or late.get("submitted") is None:
        return "—"
    extension = f" (extension {late['extension_days']:g} d)" if late.get("extension_days") else ""
    if late["seconds_late"] <= 0:
        return "on time" + extension
    return f"{late['seconds_late'] / 3600:.1f} h late{extension}, -{late['late_penalty']:g}"


def db_url(root: Path) -> str:
    """The gradebook; a writer waits up to two minutes for another (parallel jobs, two instructors)."""
    return f"sqlite:///{Path(root) / 'gradebook.db'}?timeout=120"


@contextlib.contextmanager
def opened(root: Path) -> Iterator[Gradebook]:
    """nbgrader's gradebook of the course at ``root``, closed when the block ends."""
    with Gradebook(db_url(root)) as gb:
        yield gb


def report_dir(root: Path, assignment: str) -> Path:
    folder = Path(root) / REPORTS / assignment
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def ensure_in_gradebook(root: Path, assignment: str, env: dict[str, str]) -> None:
    """The gradebook must know the assignment's cells; rebuild it if gradebook.db is new."""
    try:
        with opened(root) as gb:
            if gb.find_assignment(assignment).notebooks:
                return
    except MissingEntry:
        pass
    with tempfile.TemporaryDirectory() as release:  # leave the committed exercises/ untouched
        subprocess.run([sys.executable, "-m", "instructor.run_nbgrader", "generate_assignment", assignment, "--force",
                        f"--CourseDirectory.release_directory={release}"],
                       cwd=root, env=env, check=True, capture_output=True)


def in_gradebook(root: Path, assignment: str) -> set[str]:
    """Students with a submission of ``assignment`` in the gradebook (a deleted gradebook regrades all)."""
    with opened(root) as gb:
        return {sub.student.id for sub in gb.assignment_submissions(assignment)}


def hand_grades(root: Path, assignment: str, student: str) -> dict[tuple[str, str], bool]:
    """{(notebook, grade_id): needs_manual_grade} of every grade given by hand."""
    with opened(root) as gb:
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return {}
        return {(nb.name, g.name): bool(g.needs_manual_grade) for nb in sub.notebooks for g in nb.grades
                if g.manual_score is not None}


def keep_hand_grades(root: Path, assignment: str, student: str, before: dict, unchanged: set[str]) -> list[str]:
    """Undo nbgrader's "needs grading" on hand grades whose notebook did not change; report the rest."""
    notes = []
    with opened(root) as gb:
        for (notebook, grade_id), needed in before.items():
            grade = gb.find_grade(grade_id, notebook, assignment, student)
            if f"{notebook}.ipynb" in unchanged:
                grade.needs_manual_grade = needed
            else:
                notes.append(f"{notebook} [{grade_id}]: hand grade kept, but the notebook changed since: regrade it")
        gb.db.commit()
    return notes


def show_flags_in_formgrader(root: Path, assignment: str, student: str, flags: list) -> None:
    """Put each scan flag in the comment box of the answer cell it concerns (or the notebook's first
    one), where the formgrader shows it to whoever grades by hand."""
    by_notebook: dict[str, list] = {}
    for flag in flags:
        by_notebook.setdefault(Path(flag.notebook).stem, []).append(flag)
    with opened(root) as gb:
        for notebook, items in by_notebook.items():
            try:
                comments = gb.find_submission_notebook(notebook, assignment, student).comments
            except MissingEntry:
                continue
            if not comments:
                continue
            named = {c.name: c for c in comments}
            for flag in items:
                target = named.get(flag.cell, comments[0])
                note = f"Review flag (advice, not a grade): {flag}"
                target.auto_comment = f"{target.auto_comment}\n{note}" if target.auto_comment else note
        gb.db.commit()


def zero_submission(root: Path, assignment: str, student: str) -> None:
    """A student with no gradable notebook at all: a submission of zeros (nbgrader needs one notebook).
    The student is created first: one who is not on the roster yet must not stop grading."""
    with opened(root) as gb:
        gb.update_or_create_student(student)
        sub = gb.update_or_create_submission(assignment, student)
        for nb in sub.notebooks:
            for grade in nb.grades:
                grade.auto_score = 0
                grade.needs_manual_grade = False
        gb.db.commit()


def scores(root: Path, assignment: str, student: str) -> dict:
    with opened(root) as gb:
        sub = gb.find_submission(assignment, student)
        return {
            "code_score": sub.code_score, "max_code_score": sub.max_code_score,
            "score": sub.score, "max_score": sub.max_score, "needs_manual_grade": bool(sub.needs_manual_grade),
            "notebooks": {nb.name: {"code_score": nb.code_score, "max_code_score": nb.max_code_score,
                                    "score": nb.score, "max_score": nb.max_score} for nb in sub.notebooks},
        }
