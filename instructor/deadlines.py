"""Due dates, per-student extensions and the late penalty, applied by nbgrader's own late-penalty step.

The instructor writes them in ``deadlines.toml`` at the course root (git-ignored: it names students)::

    [module14]
    due = "2026-03-06 23:59:00 Europe/Berlin"   # any time nbgrader's parse_utc reads; stored as UTC
    penalty_per_day = 0.10                       # fraction of the score lost per started day late
    zero_after_days = 7                          # later than this: the score is 0 (omit: never)

    [module14.extensions]                        # days added to this student's due date
    s0042 = 2
    s0107 = 0.5

How it is applied: before a student is graded, ``make autograde`` writes the due date into the
gradebook (``Assignment.duedate``) and the extension into the student's submission
(``SubmittedAssignment.extension``, nbgrader's own column). nbgrader computes how late the
submission was from its ``timestamp.txt`` (written by ``make collect`` from the LMS's times) and
calls ``AssignLatePenalties``, whose plug-in (``LatePenalty`` here, set in nbgrader_config.py) gives
the penalty per notebook: ``score * min(1, penalty_per_day * started days late)``, or the whole
score after ``zero_after_days``. At autograde time ``score`` is the autograded points only (written
answers are not graded yet): the report's penalty is provisional. ``make grades`` applies the same
``penalty`` to the final score after hand grading (grades.csv's ``late_penalty`` and ``final``, and
canvas.csv), which is what "a fraction of the score" means.

Simplified: one policy per assignment (no per-question policies), days count from the extended due
date, and a submission without a timestamp is never late.
"""

from __future__ import annotations

import math
import tomllib
from datetime import timedelta
from pathlib import Path

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Unicode

FILE = "deadlines.toml"
KEYS = {"due", "penalty_per_day", "zero_after_days", "extensions"}


def load(root: Path, assignment: str) -> dict:
    """The policy of ``assignment`` from ``deadlines.toml`` ({} when the file or the section is absent)."""
    path = Path(root) / FILE
    if not path.exists():
        return {}
    with path.open("rb") as handle:
        table = tomllib.load(handle)
    policy = table.get(assignment, {})
    unknown = set(policy) - KEYS
    if unknown:
        raise ValueError(f"{path} [{assignment}]: unknown key(s) {sorted(unknown)}; accepted: {sorted(KEYS)}")
    if "due" not in policy and policy:
        raise ValueError(f"{path} [{assignment}]: 'due' is required (e.g. due = \"2026-03-06 23:59:00 UTC\")")
    rate = policy.get("penalty_per_day", 0.0)
    if not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
        raise ValueError(f"{path} [{assignment}]: penalty_per_day must be a number in [0, 1], got {rate!r}")
    for student, days in policy.get("extensions", {}).items():
        if not isinstance(days, (int, float)) or isinstance(days, bool) or days < 0:
            raise ValueError(f"{path} [{assignment}.extensions]: {student} must be a number of days >= 0, got "
                             f"{days!r}")
    return policy


def penalty(score: float, seconds_late: float, policy: dict) -> float:
    """Points lost by a notebook scoring ``score`` that came ``seconds_late`` after its (extended) due date."""
    if seconds_late <= 0 or not policy:
        return 0.0
    days = math.ceil(seconds_late / 86400)
    limit = policy.get("zero_after_days")
    if limit is not None and seconds_late > limit * 86400:
        return float(score)
    return float(score) * min(1.0, policy.get("penalty_per_day", 0.0) * days)


def apply(gradebook, assignment: str, student: str, policy: dict) -> None:
    """Write the due date and this student's extension into the gradebook (nbgrader's columns)."""
    from nbgrader.utils import parse_utc

    if not policy:
        return
    gradebook.update_or_create_assignment(assignment, duedate=parse_utc(policy["due"]))
    gradebook.update_or_create_student(student)
    gradebook.update_or_create_submission(assignment, student)
    days = policy.get("extensions", {}).get(student, 0)
    gradebook.grant_extension(assignment, student, minutes=days * 24 * 60)


class LatePenalty(LateSubmissionPlugin):
    """nbgrader's late-penalty plug-in with the policy of deadlines.toml (see the module docstring)."""

    course_root = Unicode("", help="Folder holding deadlines.toml").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float:
        assignment = getattr(self.parent, "assignment_id", "")
        lost = penalty(score, total_seconds_late, load(Path(self.course_root), assignment))
        self.log.info("late penalty for %s (%s, %.0f s late): %g of %g", student_id, assignment,
                      total_seconds_late, lost, score)
        return lost


def lateness(gradebook, assignment: str, student: str) -> dict:
    """{submitted, due, extension_days, seconds_late, penalty} of one submission, for the report."""
    sub = gradebook.find_submission(assignment, student)
    extension = sub.extension or timedelta(0)
    return {
        "submitted": sub.timestamp.isoformat(" ") if sub.timestamp else None,
        "due": sub.duedate.isoformat(" ") if sub.duedate else None,
        "extension_days": round(extension.total_seconds() / 86400, 4),
        "seconds_late": round(sub.total_seconds_late, 1),
        "late_penalty": float(sub.late_submission_penalty or 0.0),
    }
