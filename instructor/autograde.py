"""`make autograde`: grade every submission under submitted/ in a sandbox, scan it, report.

Steps, each visible in the report:
1. Sandbox check. Student code runs in bubblewrap (instructor/sandbox_kernel.py): read-only
   filesystem, the course root hidden, as `nobody` when you are root. Before grading, a probe runs
   through the same sandbox and must fail to see the course root. Without a working sandbox this
   refuses to run unless COURSE_ALLOW_UNSANDBOXED=1 (then submissions run with your rights).
2. Static scan (instructor/scan.py) of every submitted notebook: tampering patterns, deleted test
   cells, unreadable files — flagged for manual review, never silently "fixed".
3. `nbgrader autograde ASSIGNMENT --force` once for the whole batch, kernels in the sandbox, a
   per-cell timeout (Execute.timeout in nbgrader_config.py); a student whose notebook cannot be
   graded is reported and the rest of the batch is still graded.
4. No half-made scores: a student whose grading failed has any partial grades removed from the
   gradebook, so `make grades` lists them as FAILED instead of with a misleading total.
5. Report: autograde-report.md (for people) and autograde-report.json (for `make grades`), and
   seconds per notebook from nbgrader's timestamped log (autograde.log).

Usage: python -m instructor.autograde [--assignment module14] [extra nbgrader options...]
Exit status: 0 when every submission was graded, 1 when some could not be, 2 when it refused.
"""

from __future__ import annotations

import argparse
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

from instructor import sandbox_kernel
from instructor.scan import scan_submissions

KERNEL_NAME = "course-sandbox"
SYSTEM_DIRS = {"/", "/usr", "/usr/local", "/opt", "/home", "/root", "/tmp", "/var"}


def hidden_paths(root: Path) -> list[str]:
    """Paths the sandbox hides: the course root and the project that holds the virtualenv."""
    paths = [str(root.resolve())]
    if sys.prefix != sys.base_prefix:
        project = os.path.dirname(os.path.realpath(sys.prefix))
        if project not in SYSTEM_DIRS:
            paths.append(project)
    return paths


def nbgrader_env(root: Path, sandbox_tmp: str | None, kernel_dir: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    if kernel_dir:
        env["JUPYTER_PATH"] = os.pathsep.join([kernel_dir, env.get("JUPYTER_PATH", "")]).rstrip(os.pathsep)
        env["COURSE_SANDBOX_KERNEL"] = KERNEL_NAME
        env["COURSE_SANDBOX_HIDE"] = os.pathsep.join(hidden_paths(root))
        env["COURSE_SANDBOX_TMP"] = sandbox_tmp or ""
    return env


def probe_sandbox(root: Path, sandbox_tmp: str) -> tuple[bool, str]:
    """Run a tiny program through the sandbox: it must start Python and must not see the course."""
    try:
        workdir = sandbox_kernel.make_workdir(sandbox_tmp)
        probe = ("import os, sys; import ipykernel; "
                 f"print('VISIBLE' if os.path.exists({str(root / 'nbgrader_config.py')!r}) else 'HIDDEN')")
        cmd = sandbox_kernel.bwrap_command(workdir, hidden_paths(root), [sys.executable, "-c", probe])
        out = subprocess.run(cmd, env=sandbox_kernel.sandbox_env(), capture_output=True,
                             text=True, timeout=60)
    except (RuntimeError, OSError, KeyError, subprocess.SubprocessError) as err:
        return False, str(err)
    if out.returncode != 0:
        return False, (out.stderr or out.stdout).strip()[-500:]
    if "HIDDEN" not in out.stdout:
        return False, "the probe could still see the course root"
    return True, "bubblewrap, " + ("as nobody (you are root)" if os.geteuid() == 0 else "in a user namespace")


def write_kernelspec() -> str:
    kernel_dir = tempfile.mkdtemp(prefix="course-kernels-")
    spec = Path(kernel_dir) / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    launcher = str(Path(sandbox_kernel.__file__).resolve())
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, launcher, "-f", "{connection_file}"],
        "display_name": "Python 3 (autograde sandbox)",
        "language": "python",
        "interrupt_mode": "message",  # signals would stop at the sandbox boundary
    }, indent=1))
    return kernel_dir


def ensure_in_gradebook(root: Path, assignment: str, env: dict[str, str]) -> None:
    """The gradebook must know the assignment's test cells; rebuild it if gradebook.db is new."""
    from nbgrader.api import Gradebook, MissingEntry

    db = f"sqlite:///{root / 'gradebook.db'}"
    try:
        with Gradebook(db) as gb:
            if gb.find_assignment(assignment).notebooks:
                return
    except MissingEntry:
        pass
    with tempfile.TemporaryDirectory() as release:  # leave the committed exercises/ untouched
        subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force",
                        f"--CourseDirectory.release_directory={release}"],
                       cwd=root, env=env, check=True, capture_output=True)


_LINE = re.compile(r"^(\d+\.\d+) (\w+) (.*)$")
_EXCEPTION = re.compile(r"^\s*[\w.]*(Error|Exception|Interrupt|Exit)(: .*)?$")


def parse_log(text: str, students: list[str]) -> tuple[dict[str, float], dict[str, str]]:
    """Seconds per submitted notebook ("student/notebook") and the last error line per student."""
    events: list[tuple[float, str, str]] = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            events.append((float(match.group(1)), match.group(2), match.group(3)))
        elif events:  # continuation of a multi-line record (a traceback)
            stamp, level, message = events[-1]
            events[-1] = (stamp, level, message + "\n" + line)
    seconds: dict[str, float] = {}
    errors: dict[str, str] = {}
    current, started, student = None, 0.0, None
    for stamp, level, message in events:
        who = re.search(r"student with ID '([^']+)'", message)
        if who:
            student = who.group(1)
        if message.startswith("Sanitizing ") or who or "There was an error processing" in message:
            if current:
                seconds[current] = round(stamp - started, 2)
                current = None
        if message.startswith("Sanitizing "):
            path = Path(message.split(" ", 1)[1])
            current, started = f"{path.parent.parent.name}/{path.name}", stamp
        if level in ("ERROR", "CRITICAL") and student:
            for text_line in message.splitlines():
                if _EXCEPTION.match(text_line):
                    errors[student] = text_line.strip()[:300]
    if current and events:
        seconds[current] = round(events[-1][0] - started, 2)
    return seconds, {s: e for s, e in errors.items() if s in students}


def unreadable(path: Path) -> str | None:
    try:
        nbformat.validate(nbformat.read(str(path), as_version=4))
    except Exception as err:  # noqa: BLE001 - every way of being broken is reported
        return f"{path.name} is not a valid notebook ({type(err).__name__}: {str(err).splitlines()[0][:200]})"
    return None


def timeouts(nb_path: Path) -> list[str]:
    nb = nbformat.read(str(nb_path), as_version=4)
    hits = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and out.get("ename") in ("CellTimeoutError", "KeyboardInterrupt"):
                hits.append(cell.metadata.get("nbgrader", {}).get("grade_id") or "a cell")
    return hits


def collect(root: Path, assignment: str, students: list[str], graded: set[str]) -> dict[str, dict]:
    """Scores from the gradebook; partial grades of failed students are removed first."""
    from nbgrader.api import Gradebook, MissingEntry

    out: dict[str, dict] = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student in students:
            if student not in graded:
                try:
                    gb.remove_submission(assignment, student)
                except MissingEntry:
                    pass
                out[student] = {"status": "FAILED"}
                continue
            sub = gb.find_submission(assignment, student)
            out[student] = {
                "status": "graded",
                "code_score": sub.code_score, "max_code_score": sub.max_code_score,
                "score": sub.score, "max_score": sub.max_score,
                "needs_manual_grade": bool(sub.needs_manual_grade),
                "notebooks": {nb.name: {"code_score": nb.code_score, "max_code_score": nb.max_code_score,
                                        "score": nb.score, "max_score": nb.max_score}
                              for nb in sub.notebooks},
            }
    return out


def write_report(root: Path, assignment: str, results: dict, flags: dict, seconds: dict, sandbox: str) -> str:
    lines = [f"# Autograde report: {assignment}", "", f"Sandbox: {sandbox}", ""]
    lines += ["| student | status | autograded | manual grading | flags |", "|---|---|---|---|---|"]
    for student, res in results.items():
        auto = (f"{res['code_score']:g} / {res['max_code_score']:g}" if res["status"] == "graded" else "—")
        manual = "pending" if res.get("needs_manual_grade") else ("—" if res["status"] != "graded" else "done")
        lines.append(f"| {student} | {res['status']} | {auto} | {manual} | {len(flags.get(student, []))} |")
    lines += ["", "## Details", ""]
    for student, res in results.items():
        problems = res.get("problems", []) + [str(f) for f in flags.get(student, [])]
        if res["status"] == "graded" and not problems:
            continue
        lines.append(f"### {student}: {res['status']}")
        lines += [f"- {p}" for p in problems] or ["- (no details)"]
        lines.append("")
    if seconds:
        lines += ["## Seconds per notebook", ""] + [f"- {k}: {v:.2f}" for k, v in sorted(seconds.items())]
    text = "\n".join(lines) + "\n"
    (root / "autograde-report.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="module14")
    parser.add_argument("--root", default=".", help="course root (where nbgrader_config.py is)")
    args, extra = parser.parse_known_args(argv)
    # nbgrader shells out to `alembic` (from this environment) when it opens the gradebook
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    root = Path(args.root).resolve()
    submitted = root / "submitted"
    students = sorted(q.parent.name for q in submitted.glob(f"*/{args.assignment}") if q.is_dir())
    if not students:
        print(f"No submissions: expected submitted/<student_id>/{args.assignment}/*.ipynb under {root}")
        return 1

    sandbox_tmp = tempfile.mkdtemp(prefix="course-sandbox-")
    os.chmod(sandbox_tmp, 0o711)
    kernel_dir = None
    try:
        ok, how = probe_sandbox(root, sandbox_tmp)
        if ok:
            kernel_dir = write_kernelspec()
            sandbox = how
        elif os.environ.get("COURSE_ALLOW_UNSANDBOXED") == "1":
            sandbox = f"NONE (COURSE_ALLOW_UNSANDBOXED=1; the sandbox failed: {how})"
            print(f"WARNING: grading WITHOUT a sandbox: {how}", file=sys.stderr)
        else:
            print("Refusing to autograde: student code would run with your rights (it could read\n"
                  "solutions/ or change gradebook.db), and the sandbox does not work here:\n"
                  f"  {how}\nInstall bubblewrap (apt-get install bubblewrap), or run inside a container,\n"
                  "or set COURSE_ALLOW_UNSANDBOXED=1 to accept the risk.", file=sys.stderr)
            return 2
        env = nbgrader_env(root, sandbox_tmp, kernel_dir)
        ensure_in_gradebook(root, args.assignment, env)

        flags = scan_submissions(root / "solutions", submitted, args.assignment)
        expected = sorted(p.name for p in (root / "solutions" / args.assignment).glob("*.ipynb"))
        problems = {s: [] for s in students}
        for student in students:
            folder = submitted / student / args.assignment
            for nb in sorted(folder.glob("*.ipynb")):
                if nb.name not in expected:
                    problems[student].append(f"{nb.name} ignored: not one of the assignment's notebooks "
                                             f"({', '.join(expected)})")
                elif message := unreadable(nb):
                    problems[student].append(message)
            missing = [name for name in expected if not (folder / name).exists()]
            if missing:
                problems[student].append(f"not submitted (0 points): {', '.join(missing)}")

        started = time.time()
        cmd = [sys.executable, "-m", "nbgrader", "autograde", args.assignment, "--force",
               "--log-level=INFO", "--Application.log_format=%(created).3f %(levelname)s %(message)s",
               *extra]
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        (root / "autograde.log").write_text(proc.stdout + proc.stderr)
        seconds, errors = parse_log(proc.stdout + proc.stderr, students)

        graded = {s for s in students if (root / "autograded" / s / args.assignment).is_dir()}
        results = collect(root, args.assignment, students, graded)
        for student in students:
            res = results[student]
            res["problems"] = problems[student]
            if student not in graded:
                if not any("not a valid notebook" in p for p in res["problems"]):
                    res["problems"].append("nbgrader could not grade it: "
                                           + errors.get(student, "see autograde.log"))
                res["problems"].append("no score recorded (partial grades removed); fix the cause and rerun")
            else:
                for nb in sorted((root / "autograded" / student / args.assignment).glob("*.ipynb")):
                    for cell in timeouts(nb):
                        res["problems"].append(f"{nb.name} [{cell}]: stopped by the time limit")
            res["flags"] = [str(f) for f in flags.get(student, [])]
        report = write_report(root, args.assignment, results, flags, seconds, sandbox)
        (root / "autograde-report.json").write_text(json.dumps(
            {"assignment": args.assignment, "sandbox": sandbox, "seconds": seconds, "students": results},
            indent=1))
        print(report)
        print(f"autograde: {len(graded)}/{len(students)} submissions graded in {time.time() - started:.1f} s; "
              f"report in autograde-report.md, nbgrader log in autograde.log")
        for name, sec in sorted(seconds.items()):
            print(f"  autograde seconds {name}: {sec:.2f}")
        return 0 if len(graded) == len(students) else 1
    finally:
        shutil.rmtree(sandbox_tmp, ignore_errors=True)
        if kernel_dir:
            shutil.rmtree(kernel_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
