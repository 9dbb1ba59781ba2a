"""`make roster CSV=...`: the class list, from the LMS into nbgrader's gradebook.

Input: the CSV Canvas exports from its gradebook (Grades → Export), whose first columns are
``Student`` ("Last, First"), ``ID`` (Canvas's user id), ``SIS User ID``, ``SIS Login ID`` and
``Section``; an ``Email`` column is used when present (Canvas's gradebook export has none; add it or
leave it out). The row "Points Possible" and Canvas's "Student, Test" are skipped.

Each student becomes a gradebook student (nbgrader's ``Student``: id, first and last name, email,
``lms_user_id`` = Canvas's ID). The nbgrader id is the ``--id-column`` (default ``SIS Login ID``);
a row where it is empty falls back to the Canvas ID, and the import says so. The normalised roster
is kept as ``roster.csv`` (git-ignored), from which ``make grades`` writes Canvas's import file with
every roster student, graded or not. Every id names a folder (``submitted/<id>/``, ``autograded/<id>/``,
``feedback/<id>/``), so an id that is not one plain folder name inside the course (``check_id``: a
``/``, ``..``, a leading ``-`` or ``.``, a control character) is refused with the line and the reason.
The export's other column names are kept too (``roster-columns.json``): ``make grades`` writes
Canvas's import file under the export's own column for the assignment (``module14 (4321)``: the name
Canvas gave it, id included), so Canvas fills that column instead of making a new one.

Usage: python -m instructor.roster import canvas_export.csv [--id-column "SIS Login ID"]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
from pathlib import Path

from instructor.gradebook import opened

ROSTER = "roster.csv"
COLUMNS = "roster-columns.json"  # the export's columns after Canvas's own (its assignments)
CANVAS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
FIELDS = ["student_id", "first_name", "last_name", "email", "lms_user_id", *CANVAS]
SKIP = {"Points Possible", "Student, Test", "Test Student"}


def check_id(sid: str) -> str | None:
    """Why ``sid`` cannot be a student id (a folder name inside the course), or None if it can."""
    if not sid:
        return "it is empty"
    if sid in (".", "..") or "/" in sid or "\\" in sid:
        return "it would name a folder outside submitted/ (a '/', '\\', '.' or '..')"
    if sid[0] in "-.":
        return "it starts with '-' or '.' (an option, or a hidden folder)"
    if any(ord(c) < 32 or ord(c) == 127 for c in sid):
        return "it holds a control character (a tab, a newline, ...)"
    if len(sid) > 100:
        return "it is longer than 100 characters"
    return None


def parse(path: Path, id_column: str = "SIS Login ID") -> tuple[list[dict], list[str]]:
    """(roster rows with ``FIELDS``, notes) from a Canvas gradebook export."""
    with Path(path).open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in ("Student", "ID") if c not in header]
        if missing:
            raise ValueError(f"{path}: not a Canvas export, column(s) {missing} missing; expected {CANVAS}")
        if id_column not in header and id_column != "ID":
            raise ValueError(f"{path}: --id-column {id_column!r} is not a column; accepted: {header}")
        rows, notes, seen = [], [], set()
        for number, raw in enumerate(reader, start=2):
            name = (raw.get("Student") or "").strip()
            if not name or name.strip() in SKIP or not (raw.get("ID") or "").strip():
                continue
            last, _, first = (part.strip() for part in name.partition(","))
            lms = raw["ID"].strip()
            sid = (raw.get(id_column) or "").strip() or lms
            if sid == lms and id_column != "ID":
                notes.append(f"line {number} ({name}): no {id_column}; student id is the Canvas ID {lms}")
            why = check_id(sid)
            if why:
                raise ValueError(f"{path}: line {number} ({name}): student id {sid!r} refused: {why}; "
                                 "accepted: a plain folder name (letters, digits, '@', '_', '-', '.', spaces)")
            if sid in seen:
                raise ValueError(f"{path}: line {number}: student id {sid!r} appears twice")
            seen.add(sid)
            row = {"student_id": sid, "first_name": first, "last_name": last,
                   "email": (raw.get("Email") or raw.get("email") or "").strip(), "lms_user_id": lms}
            row.update({c: (raw.get(c) or "").strip() for c in CANVAS})
            rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no students found")
    return rows, notes


def other_columns(path: Path) -> list[str]:
    """The export's column names besides Canvas's own (``CANVAS``, ``Email``): its assignments."""
    with Path(path).open(newline="", encoding="utf-8-sig") as handle:
        header = next(csv.reader(handle), [])
    return [c for c in header if c not in CANVAS and c.lower() != "email"]


def canvas_column(root: Path, assignment: str) -> str:
    """The export's column for ``assignment`` (``assignment`` itself or ``assignment (id)``), else
    ``assignment``: the column Canvas's import fills."""
    try:
        columns = json.loads((Path(root) / COLUMNS).read_text())
    except (OSError, ValueError):
        return assignment
    return next((c for c in columns if c == assignment or re.fullmatch(rf"{re.escape(assignment)} \(\d+\)", c)),
                assignment)


def import_roster(root: Path, rows: list[dict], columns: list[str] | None = None) -> None:
    """Students into the gradebook (created or updated), ``roster.csv`` and the export's other
    ``columns`` (``roster-columns.json``) (both replaced)."""
    with opened(root) as gb:
        for row in rows:
            gb.update_or_create_student(row["student_id"], first_name=row["first_name"], last_name=row["last_name"],
                                        email=row["email"] or None, lms_user_id=row["lms_user_id"])
    with (Path(root) / ROSTER).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    (Path(root) / COLUMNS).write_text(json.dumps(columns or []))


def load(root: Path) -> list[dict]:
    """The imported roster ([] before ``make roster``)."""
    path = Path(root) / ROSTER
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["import"])
    parser.add_argument("csv", help="the Canvas gradebook export (CSV)")
    parser.add_argument("--root", default=".")
    parser.add_argument("--id-column", default="SIS Login ID", help="column used as the nbgrader student id")
    args = parser.parse_args(argv)
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    try:
        rows, notes = parse(Path(args.csv), args.id_column)
    except (OSError, ValueError) as err:
        print(f"roster: {err}", file=sys.stderr)
        return 2
    import_roster(Path(args.root).resolve(), rows, other_columns(Path(args.csv)))
    for note in notes:
        print(f"  {note}")
    print(f"roster: {len(rows)} students in the gradebook and {ROSTER}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
