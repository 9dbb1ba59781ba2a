"""`make grades`: one CSV row per student, from the gradebook and the last autograde report.

Columns: student_id, status, one score per question notebook (autograded + manual points),
autograded, autograded_max, total, total_max, manual_pending, flags, problems (counts; the
details are in autograde-report.md).

status: one of instructor.autograde.STATUSES (ok, manual, review, FAILED), the same names and
meanings as in autograde-report.md and the README; read live from the gradebook, so a written answer
graded in the formgrader turns ``manual`` into ``ok`` without rerunning autograde.

Usage: python -m instructor.export_grades [--assignment module14] [--out grades.csv]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path


def rows(root: Path, assignment: str) -> tuple[list[dict], list[str]]:
    from nbgrader.api import Gradebook, MissingEntry

    from instructor.autograde import status_of

    report_path = root / "autograde-report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {"students": {}}
    students = report.get("students", {})
    out = []
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        notebooks = [nb.name for nb in gb.find_assignment(assignment).notebooks]
        ids = sorted(set(students) | {s.id for s in gb.students})
        for student in ids:
            info = students.get(student, {})
            row = {"student_id": student, "flags": len(info.get("flags", [])),
                   "problems": len(info.get("problems", []))}
            if info.get("status") == "FAILED":  # autograde ran but failed: no score, loudly
                row["status"] = "FAILED"
                out.append(row)
                continue
            try:
                sub = gb.find_submission(assignment, student)
            except MissingEntry:
                continue
            for nb in sub.notebooks:
                row[nb.name] = f"{nb.score:g}"
            row.update({
                "autograded": f"{sub.code_score:g}", "autograded_max": f"{sub.max_code_score:g}",
                "total": f"{sub.score:g}", "total_max": f"{sub.max_score:g}",
                "manual_pending": "yes" if sub.needs_manual_grade else "no",
            })
            row["status"] = status_of(False, info.get("flags", []), info.get("problems", []),
                                      bool(sub.needs_manual_grade))
            out.append(row)
    return out, notebooks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="module14")
    parser.add_argument("--root", default=".")
    parser.add_argument("--out", default="grades.csv")
    args = parser.parse_args(argv)
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    root = Path(args.root).resolve()
    data, notebooks = rows(root, args.assignment)
    fields = ["student_id", "status", *notebooks, "autograded", "autograded_max", "total", "total_max",
              "manual_pending", "flags", "problems"]
    out = Path(args.out) if Path(args.out).is_absolute() else root / args.out
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(data)
    print(f"wrote {out} ({len(data)} students)")
    for row in data:
        if row["status"] != "ok":
            print(f"  {row['student_id']}: {row['status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
