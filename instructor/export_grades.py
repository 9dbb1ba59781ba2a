"""`make grades`: the grades of one assignment, for people and for the LMS; no student is ever left out.

Writes, in grades/<assignment>/ (next to that assignment's autograde report):

- ``grades.csv``: one row per student of the roster (``make roster``), of the gradebook, of the
  autograde report and of submitted/ — every one of them, graded or not. Columns: student_id, name,
  lms_user_id, status, one score per question notebook (autograded + manual points), autograded,
  autograded_max, total (before the late penalty), total_max, submitted, due, extension_days,
  hours_late, late_penalty, final (total - late_penalty), manual_pending, flags, problems (counts)
  and notes (every flag and problem, in words, as in the report). The late penalty is the policy
  of deadlines.toml applied to ``total``, the score after hand grading, read now (the penalty nbgrader
  stored at autograde time, and the report shows, is of the autograded points only).
- ``canvas.csv``: Canvas's gradebook import file (Grades → Import): Student, ID, SIS User ID,
  SIS Login ID, Section and one column with the final score, one row per roster student. The
  column is ``--canvas-column``, else the export's own column for the assignment as ``make roster``
  read it (``module14 (4321)``: Canvas fills that column), else the assignment's name. A FAILED student's cell is left
  empty (Canvas keeps what it has; fix and regrade first).

status: one of instructor.gradebook.STATUSES, the same names as the report and docs/instructors.md; read live
from the gradebook, so a written answer graded in the formgrader turns ``manual`` into ``ok``
without rerunning autograde. ``missing``: on the roster (or in the gradebook) with nothing in
submitted/: 0 points.

Usage: python -m instructor.export_grades [--assignment module14] [--canvas-column "module14 (4321)"]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path

from nbgrader.api import MissingEntry

from instructor import deadlines, roster
from instructor.gradebook import late_text, opened, report_dir, status_of


def rows(root: Path, assignment: str) -> tuple[list[dict], list[str]]:
    report_path = report_dir(root, assignment) / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {"students": {}}
    if report.get("assignment", assignment) != assignment:
        raise ValueError(f"{report_path} is the report of {report['assignment']!r}, not {assignment!r}")
    students = report.get("students", {})
    people = {r["student_id"]: r for r in roster.load(root)}
    policy = deadlines.load(root, assignment)
    submitted = {p.parent.name for p in (root / "submitted").glob(f"*/{assignment}") if p.is_dir()}
    out = []
    with opened(root) as gb:
        notebooks = [nb.name for nb in gb.find_assignment(assignment).notebooks]
        known = {s.id: s for s in gb.students}
        ids = sorted(set(students) | set(known) | set(people) | submitted)
        for student in ids:
            info = students.get(student, {})
            person = known.get(student)
            name = " ".join(x for x in (getattr(person, "first_name", None), getattr(person, "last_name", None)) if x)
            row = {"student_id": student, "name": name or "", "lms_user_id": getattr(person, "lms_user_id", None) or
                   people.get(student, {}).get("lms_user_id", ""),
                   "flags": len(info.get("flags", [])), "problems": len(info.get("problems", [])),
                   "notes": " | ".join([f"flag: {f}" for f in info.get("flags", [])]
                                       + [f"problem: {p}" for p in info.get("problems", [])])}
            try:
                sub = gb.find_submission(assignment, student)
            except MissingEntry:
                sub = None
            if info.get("status") == "FAILED":  # autograde ran but failed: no score, loudly
                row["status"] = "FAILED"
            elif student in submitted and not info:
                row.update(status="FAILED", notes="submitted, not autograded yet: run make autograde")
            elif sub is None or student not in submitted:
                row.update(status="missing", autograded="0", total="0", final="0", manual_pending="no",
                           notes=row["notes"] or "nothing submitted: 0 points")
            else:
                for nb in sub.notebooks:
                    row[nb.name] = f"{nb.score:g}"
                late = deadlines.lateness(gb, assignment, student)
                late["late_penalty"] = deadlines.penalty(sub.score, late["seconds_late"], policy)
                row.update({
                    "autograded": f"{sub.code_score:g}", "autograded_max": f"{sub.max_code_score:g}",
                    "total": f"{sub.score:g}", "total_max": f"{sub.max_score:g}",
                    "submitted": late["submitted"] or "", "due": late["due"] or "",
                    "extension_days": f"{late['extension_days']:g}",
                    "hours_late": f"{late['seconds_late'] / 3600:.2f}", "late_penalty": f"{late['late_penalty']:g}",
                    "final": f"{sub.score - late['late_penalty']:g}",
                    "manual_pending": "yes" if sub.needs_manual_grade else "no",
                })
                row["status"] = status_of(info.get("flags", []), info.get("problems", []),
                                          bool(sub.needs_manual_grade))
                if late["seconds_late"] > 0:
                    row["notes"] = " | ".join(x for x in (row["notes"], f"late: {late_text(late)}") if x)
            out.append(row)
    return out, notebooks


def canvas_rows(root: Path, data: list[dict], column: str) -> list[dict]:
    """Canvas's import rows: every roster student, with the final score (empty when FAILED)."""
    by_id = {r["student_id"]: r for r in data}
    out = []
    for person in roster.load(root):
        row = {c: person[c] for c in roster.CANVAS}
        graded = by_id.get(person["student_id"], {"status": "missing", "final": "0"})
        row[column] = "" if graded["status"] == "FAILED" else graded.get("final", "0")
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="module14")
    parser.add_argument("--root", default=".")
    parser.add_argument("--canvas-column", default="",
                        help="the Canvas gradebook column (default: the export's column for the assignment, "
                        "as make roster read it, else the assignment)")
    args = parser.parse_args(argv)
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    root = Path(args.root).resolve()
    try:
        data, notebooks = rows(root, args.assignment)
    except ValueError as err:
        print(f"grades: {err}", file=sys.stderr)
        return 2
    fields = ["student_id", "name", "lms_user_id", "status", *notebooks, "autograded", "autograded_max", "total",
              "total_max", "submitted", "due", "extension_days", "hours_late", "late_penalty", "final",
              "manual_pending", "flags", "problems", "notes"]
    folder = report_dir(root, args.assignment)
    with (folder / "grades.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(data)
    print(f"wrote {(folder / 'grades.csv').relative_to(root)} ({len(data)} students)")
    column = args.canvas_column or roster.canvas_column(root, args.assignment)
    canvas = canvas_rows(root, data, column)
    if canvas:
        with (folder / "canvas.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=[*roster.CANVAS, column])
            writer.writeheader()
            writer.writerows(canvas)
        print(f"wrote {(folder / 'canvas.csv').relative_to(root)} ({len(canvas)} roster students, column {column!r})")
    else:
        print("no canvas.csv: import the roster first (make roster CSV=canvas_export.csv)")
    for row in data:
        if row["status"] != "ok":
            print(f"  {row['student_id']}: {row['status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
