"""`make feedback`: nbgrader's feedback pages (``generate_feedback``), one process per student, each
within a time and a memory limit, so that no student's notebook can hold up the class's feedback.

A page nbgrader cannot make in time (a 300,000-link attribute chain in one answer cell takes the HTML
export about 2 ms per link) or within the memory limit is replaced by a short page that says so and
gives the notebook's autograded score from grades/<assignment>/report.json; every other student's
pages are made as usual. The run ends with the list of short pages and their reasons.

``--jobs N`` students at once (default: the machine's cores), ``--timeout`` seconds per student
(default 120), ``--memory-mb`` of address space per student's process (default 4096), ``--student
ID`` (repeatable) for those students only. A progress bar (tqdm) counts the students.

Simplified: a student's notebooks are made by one process, so a stalling notebook turns that
student's other notebooks into short pages too (their scores are on the short page).

Usage: python -m instructor.feedback [--assignment module14] [--student ID ...] [--jobs N]
       [--timeout SECONDS] [--memory-mb MB]
"""

from __future__ import annotations

import argparse
import html
import json
import os
import resource
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from instructor.autograde import parse_log
from instructor.gradebook import report_dir


def limited(memory_mb: int):
    """preexec_fn: the address space of the feedback process and anything it starts."""
    def apply() -> None:
        size = memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
    return apply


def short_page(student: str, assignment: str, notebook: str, reason: str, score: dict | None) -> str:
    """The page a student gets when theirs could not be made."""
    got = (f"<p>Autograded score of this notebook: {score['code_score']:g} / {score['max_code_score']:g} "
           "(written answers are graded by hand).</p>" if score else "")
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(notebook)}: feedback</title>"
            f"</head><body><h1>{html.escape(assignment)} / {html.escape(notebook)}</h1>"
            f"<p>Your feedback page for this notebook could not be made: {html.escape(reason)}.</p>{got}"
            "<p>Your grade does not depend on this page. Ask your instructor for the details of your "
            f"grading (student id {html.escape(student)}).</p></body></html>\n")


def feedback_student(root: Path, assignment: str, student: str, timeout: float, memory_mb: int,
                     scores: dict) -> tuple[str, list[str]]:
    """(nbgrader's log, short pages written) for one student's feedback."""
    cmd = [sys.executable, "-m", "instructor.run_nbgrader", "generate_feedback", assignment, f"--student={student}",
           "--force", "--log-level=INFO", "--Application.log_format=%(created).3f %(levelname)s %(message)s"]
    reason = None
    try:
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=timeout,
                              preexec_fn=limited(memory_mb))  # noqa: PLW1509 - only setrlimit, before exec
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            error = parse_log(log)[1] or f"exit status {proc.returncode}"
            reason = (f"it needed more than {memory_mb} MB of memory" if "MemoryError" in log
                      else f"nbgrader failed ({error})")
    except subprocess.TimeoutExpired as err:
        log = (err.stdout or b"").decode(errors="replace") + (err.stderr or b"").decode(errors="replace")
        reason = f"making it took more than {timeout:g} s"
    written = []
    autograded = root / "autograded" / student / assignment
    out = root / "feedback" / student / assignment
    for notebook in sorted(p.stem for p in autograded.glob("*.ipynb")):
        page = out / f"{notebook}.html"
        if reason is None and page.exists():
            continue
        out.mkdir(parents=True, exist_ok=True)
        why = reason or "nbgrader wrote no page for it"
        page.write_text(short_page(student, assignment, notebook, why, scores.get(notebook)))
        written.append(f"{student}/{notebook}: {why}")
    return log, written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="module14")
    parser.add_argument("--root", default=".", help="course root (where nbgrader_config.py is)")
    parser.add_argument("--student", action="append", default=[], help="only this student (repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="students at once (default: the cores)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per student (default 120)")
    parser.add_argument("--memory-mb", type=int, default=4096, help="memory per student's process (default 4096)")
    args = parser.parse_args(argv)
    for name, value in (("--jobs", args.jobs), ("--timeout", args.timeout), ("--memory-mb", args.memory_mb)):
        if not value > 0:
            parser.error(f"{name} must be a number > 0, got {value}")
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    root = Path(args.root).resolve()
    graded = sorted(p.parent.name for p in (root / "autograded").glob(f"*/{args.assignment}") if p.is_dir())
    unknown = [s for s in args.student if s not in graded]
    if unknown or not graded:
        print(f"feedback: nothing autograded for {unknown or 'anyone'}: run make autograde first "
              f"(expected autograded/<student_id>/{args.assignment}/ under {root})", file=sys.stderr)
        return 1
    todo = args.student or graded
    report = report_dir(root, args.assignment) / "report.json"
    records = json.loads(report.read_text())["students"] if report.exists() else {}
    short, logs = [], []
    with ThreadPoolExecutor(max_workers=min(args.jobs, len(todo))) as pool:
        futures = {pool.submit(feedback_student, root, args.assignment, s, args.timeout, args.memory_mb,
                               records.get(s, {}).get("notebooks", {})): s for s in todo}
        for future in tqdm(as_completed(futures), total=len(todo), desc=f"feedback {args.assignment}",
                           unit="student"):
            log, written = future.result()
            logs.append(f"===== {futures[future]}\n{log}")
            short += written
    (report_dir(root, args.assignment) / "feedback.log").write_text("\n".join(logs))
    folder = (root / "feedback").relative_to(root)
    print(f"feedback: {len(todo)} students, pages in {folder}/<student>/{args.assignment}/; "
          f"{len(short)} short page(s) instead of feedback" + (":" if short else ""))
    for line in short:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
