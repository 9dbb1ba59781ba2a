"""Grading a class: `make autograde` on N fake students of module14, serial and with JOBS in parallel.

Each fake student submits all five notebooks: three in four hand in the solutions (Q5 with their own
id typed in, so each answers their own run report), one in four the release (every answer a stub).
The class is graded in a scratch copy of the course, once per jobs setting, each time from an empty
gradebook (the same submissions), in the sandbox like a real run.
Writes benchmarks/results/class_grading.json: per setting the wall time, seconds per student and the
speed-up over the first setting, with the machine's load, so a reader can judge the numbers.

Goal: a class of 150 in <= 6 min on 2 cores, measured by the defaults (150 students, ``--jobs 2``
then ``--jobs 3``: one job more than the cores, to see whether idle cores were waiting) on an idle
machine; on a shared, loaded machine a smaller class (``--students 12 --jobs 1 2``) gives the
per-student time and the speed-up. The results file records each setting's jobs, seconds per
student and the commit.

    python benchmarks/class_grading.py [--students 150] [--jobs 2 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from writer import record_start, save  # noqa: E402

ASSIGNMENT = "module14"


def make_course(scratch: Path, students: int) -> Path:
    course = scratch / "course"
    course.mkdir()
    for item in ("nbgrader_config.py", "instructor", "solutions"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, course / item)
    env = {**os.environ, "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])}
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"], cwd=course,
                   env=env, check=True, capture_output=True)
    for i in range(students):
        source = "exercises" if i % 4 == 1 else "solutions"
        dest = course / "submitted" / f"student{i:03d}" / ASSIGNMENT
        dest.mkdir(parents=True)
        for nb in sorted((course / source / ASSIGNMENT).glob("*.ipynb")):
            text = nb.read_text()
            if source == "solutions" and nb.stem == "q5_passport":  # Q5's report is drawn from the id typed in
                text = text.replace('student_id = \\"\\"', f'student_id = \\"student{i:03d}\\"', 1)
                assert f"student{i:03d}" in text, "the Q5 solution no longer leaves student_id empty"
            (dest / nb.name).write_text(text)
    return course


def grade(course: Path, jobs: int) -> dict:
    for item in ("gradebook.db", ".autograde-state.json", "autograded", "grades"):
        path = course / item
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    env = {**os.environ, "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])}
    load_before = os.getloadavg()[0]
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "instructor.autograde", "--jobs", str(jobs)], cwd=course, env=env,
                          capture_output=True, text=True)
    seconds = time.time() - start
    report = json.loads((course / "grades" / ASSIGNMENT / "report.json").read_text())["students"]
    statuses = sorted({r["status"] for r in report.values()})
    if proc.returncode != 0:
        raise RuntimeError(f"autograde failed with --jobs {jobs}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return {"jobs": jobs, "seconds": round(seconds, 1), "seconds_per_student": round(seconds / len(report), 2),
            "students": len(report), "statuses": statuses, "load_before": round(load_before, 2),
            "load_after": round(os.getloadavg()[0], 2),
            "student_seconds_median": sorted(r["wall_seconds"] for r in report.values())[len(report) // 2]}


def main(argv: list[str] | None = None) -> int:
    record_start()  # the commit and sources digest of the code that runs: the code now
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=150)
    parser.add_argument("--jobs", type=int, nargs="+", default=[2, 3])
    args = parser.parse_args(argv)
    if args.students < 1 or any(j < 1 for j in args.jobs):
        parser.error("--students and --jobs must be whole numbers >= 1")
    scratch = Path(tempfile.mkdtemp(prefix="class-bench-", dir="/var/tmp"))
    os.chmod(scratch, 0o755)
    try:
        course = make_course(scratch, args.students)
        runs = []
        for jobs in args.jobs:
            run = grade(course, jobs)
            run["seed"] = 0  # the class is the same in every setting
            run["speedup"] = round(runs[0]["seconds"] / run["seconds"], 2) if runs else 1.0
            runs.append(run)
            print(f"{args.students} students, --jobs {jobs}: {run['seconds']:.0f} s "
                  f"({run['seconds_per_student']:.1f} s per student, {run['speedup']:.2f}x vs --jobs "
                  f"{runs[0]['jobs']}; load {run['load_before']} -> {run['load_after']})", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.students >= 150:
        print(f"measured: {args.students} students at --jobs {runs[-1]['jobs']} took {runs[-1]['seconds'] / 60:.1f} "
              "min")
    else:
        goal = 150 * runs[-1]["seconds_per_student"] / 60
        print(f"extrapolated, not measured: 150 students at --jobs {runs[-1]['jobs']} would take about {goal:.0f} min")
    path = save("class_grading", [Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])], runs,
                machine=f"{os.cpu_count()} cores, shared", class_size=args.students, assignment=ASSIGNMENT)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
