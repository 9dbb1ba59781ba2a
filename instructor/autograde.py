"""`make autograde`: grade the submissions under submitted/ in a sandbox, one student at a time.

Steps, each visible in the report:
1. Sandbox check. Student code runs in bubblewrap (instructor/sandbox_kernel.py), which shows the
   kernel only the Python environment and system libraries. Before grading, a probe runs through
   the same sandbox (with its seccomp filter) and must see nothing but that allow-list; the report's
   `Sandbox:` line says whether a cgroup caps each kernel's memory (else: per process only, and why)
   and which seccomp filter applies (instructor/sandbox_limits.py). Without a working sandbox this refuses
   to run unless COURSE_ALLOW_UNSANDBOXED=1 (then submissions run with your rights).
2. Which students: new ones and those whose submission (or the assignment's checks, release or
   solutions) changed since they were last graded; ``--student ID`` (``make autograde STUDENT=ID``)
   grades exactly those; ``--all`` everyone.
3. Per student: every notebook is rebuilt around the release's cells (instructor/submission.py),
   scanned (instructor/scan.py, advice for review), and graded by its own ``nbgrader autograde
   --student ID`` process (started as instructor/run_nbgrader.py, which skips an import it never
   uses): probes in, kernel in the sandbox, verdicts decided outside it
   (instructor/grading.py), scores written to the gradebook by nbgrader. Whatever one submission
   does, it affects only its own process. ``--jobs N`` (``make autograde JOBS=N``, default: the
   machine's cores) grades N students at once; a progress bar (tqdm, on stderr) and one line per
   student as each finishes. Each student's nbgrader is forked from one process that imported
   nbgrader once (``run_nbgrader.Zygote``), not started afresh (1.2 CPU s per student saved), and
   each notebook's fresh kernel is started while the one before runs (``$COURSE_NOTEBOOKS``).
   Due dates, extensions and the late penalty come from deadlines.toml (instructor/deadlines.py).
   A student with nothing gradable (no notebook, only files that are not notebooks) gets 0 points
   with the reasons, not FAILED.
   Seeds: each notebook's hidden inputs are drawn from a seed stored in the state and the report;
   a regrade reuses it (the same hidden inputs), ``--redraw`` (``REDRAW=1``) draws new ones.
4. Hand grades survive: a grade given by hand stays "graded" when the student's notebook did not
   change since (nbgrader alone would mark it "needs grading" again); when it did change, the report
   says so.
5. Report, one per assignment: grades/<assignment>/report.md (for people) and report.json (for
   `make grades`), with a status per student (``STATUSES``), the reasons behind every test that
   scored 0, lateness and penalties, and the seeds. Listed as problems (status ``review``) too:
   locked cells a student edited (tampering; the release's cells ran), a notebook with nothing
   answered, and a notebook that took longer than ``--slow-after`` seconds (default 60; 600 for lab14,
   which trains) to grade.
6. Two instructors grading at once lose nothing: the state file and the report are updated under an
   exclusive lock (fcntl), each student's record merged into what is on disk at that moment.

Usage: python -m instructor.autograde [--assignment module14] [--student ID ...] [--all] [--jobs N] [--redraw]
       [--slow-after SECONDS] [nbgrader options]
Exit status: 0 when every submission graded now was graded, 1 when some could not be, 2 when it refused.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from instructor import deadlines, lab_grading, sandbox_kernel, sandbox_limits
from instructor.gradebook import (
    STATUSES,
    ensure_in_gradebook,
    hand_grades,
    in_gradebook,
    keep_hand_grades,
    late_text,
    opened,
    report_dir,
    scores,
    show_flags_in_formgrader,
    status_of,
    zero_submission,
)
from instructor.run_nbgrader import Zygote, quiet_known_warnings, share_gradebook_engines, skip_unused_imports
from instructor.scan import scan_submissions
from instructor.submission import file_hashes, stage

KERNEL_NAME = "course-sandbox"
STATE_FILE = ".autograde-state.json"
LOCK_FILE = ".autograde.lock"
MACHINE_TRIES = 3  # nbgrader runs for a student whose kernels could not be started (each after its own retries)


# ------------------------------------------------------------------------------ sandbox


def probe_sandbox(root: Path) -> tuple[bool, str]:
    """Run Python through the sandbox: it must start, and see only the allow-list."""
    try:
        allowed = sorted({Path(p).parts[1] for p in sandbox_kernel.allowed_paths()} | {"dev", "proc", "tmp"})
        probe = ("import os, json, ipykernel; "
                 f"print(json.dumps([os.path.exists({str(root / 'nbgrader_config.py')!r}), sorted(os.listdir('/'))]))")
        out = sandbox_kernel.run([sys.executable, "-c", probe], timeout=120)  # with the seccomp filter
    except (RuntimeError, OSError, KeyError, subprocess.SubprocessError) as err:
        return False, str(err)
    if out.returncode != 0:
        return False, (out.stderr or out.stdout).strip()[-500:]
    try:
        sees_course, top = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return False, f"the probe printed no result: {out.stdout[-200:]}"
    if sees_course or not set(top) <= set(allowed):
        return False, f"the sandbox shows more than the allow-list: {top}"
    who = ("under a user id of its own, no network (you are root)" if os.geteuid() == 0
           else "in a user namespace, no network")
    _, memory = sandbox_limits.cgroup_support()
    _, seccomp = sandbox_limits.seccomp_program()
    return True, f"bubblewrap {who}; {memory}; {seccomp}; the kernel sees only /{', /'.join(top)}"


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


def nbgrader_env(sandbox_tmp: str | None, kernel_dir: str | None, verdicts: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["COURSE_VERDICT_DIR"] = verdicts
    if kernel_dir:
        env["JUPYTER_PATH"] = os.pathsep.join([kernel_dir, env.get("JUPYTER_PATH", "")]).rstrip(os.pathsep)
        env["COURSE_SANDBOX_KERNEL"] = KERNEL_NAME
        env["COURSE_SANDBOX_TMP"] = sandbox_tmp or ""
    return env


# ------------------------------------------------------------------------------ log and state


_LINE = re.compile(r"^(\d+\.\d+) (\w+) (.*)$")
_EXCEPTION = re.compile(r"^\s*[\w.]*(Error|Exception|Interrupt|Exit)(: .*)?$")


def parse_log(text: str) -> tuple[dict[str, float], str | None]:
    """Seconds per notebook (file name) and the last exception line of one nbgrader run."""
    events: list[tuple[float, str, str]] = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            events.append((float(match.group(1)), match.group(2), match.group(3)))
        elif events:  # continuation of a multi-line record (a traceback)
            stamp, level, message = events[-1]
            events[-1] = (stamp, level, message + "\n" + line)
    seconds: dict[str, float] = {}
    error = None
    current, started = None, 0.0
    for stamp, level, message in events:
        if message.startswith("Sanitizing ") or "There was an error processing" in message:
            if current:
                seconds[current] = round(stamp - started, 2)
                current = None
        if message.startswith("Sanitizing "):
            current, started = Path(message.split(" ", 1)[1]).name, stamp
        if level in ("ERROR", "CRITICAL"):
            for text_line in message.splitlines():
                if _EXCEPTION.match(text_line):
                    error = text_line.strip()[:300]
    if current and events:
        seconds[current] = round(events[-1][0] - started, 2)
    return seconds, error


def code_fingerprint(root: Path, assignment: str) -> str:
    """Changes here regrade everyone: the checks, the grader, the release and the solutions."""
    digest = hashlib.sha256()
    files = [root / "instructor" / "checks" / f"{assignment}.py", *sorted((root / "instructor").glob("*.py")),
             root / "nbgrader_config.py", *sorted((root / "solutions" / assignment).glob("*.ipynb")),
             *sorted((root / "exercises" / assignment).glob("*.ipynb"))]
    for path in files:
        if path.exists():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def load_state(root: Path) -> dict:
    try:
        return json.loads((root / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}


def save_state(root: Path, state: dict) -> None:
    tmp = root / f"{STATE_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(state))  # rewritten after every student: json's fast encoder (no indent)
    tmp.replace(root / STATE_FILE)


@contextlib.contextmanager
def locked_state(root: Path):
    """The state as on disk now, held under an exclusive lock and saved on exit: every writer (a
    parallel job, a second instructor's run) merges into the latest state instead of overwriting it."""
    with open(root / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            state = load_state(root)
            yield state
            save_state(root, state)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def book_of(state: dict, assignment: str) -> dict:
    return state.setdefault(assignment, {"code": "", "students": {}})


# ------------------------------------------------------------------------------ one student


# Seconds after which a notebook's grading is listed as slow: the question notebooks take a few
# seconds; the lab's notebook trains the tiny GPT twice with the student's functions.
SLOW_AFTER_DEFAULT = 60.0
SLOW_AFTER = {"lab14": 600.0}


def slow_notebooks(seconds: dict[str, float], slow_after: float) -> list[str]:
    """A problem for each notebook that took longer than ``slow_after`` seconds to grade (its cells
    may sleep or spin within every limit: the instructor should know where a class's time went)."""
    return [f"{name}: took {sec:.0f} s to grade (more than {slow_after:g} s; the limits are "
            "Execute.timeout per cell, SandboxedExecute.notebook_timeout per notebook)"
            for name, sec in sorted(seconds.items()) if sec > slow_after]


def grade_student(root: Path, assignment: str, student: str, env: dict[str, str], extra: list[str],
                  previous: dict, facts_flags: list, verdict_dir: Path, redraw: bool = False,
                  slow_after: float = 60.0, zygote: Zygote | None = None) -> dict:
    started = time.time()
    policy = deadlines.load(root, assignment)
    seeds = {} if redraw else dict(previous.get("seeds", {}))
    env = {**env, "COURSE_GRADING_SEEDS": json.dumps(seeds)}
    with tempfile.TemporaryDirectory(prefix="staged-") as staged_root:
        staged = Path(staged_root) / student / assignment
        hashes, problems = stage(root / "submitted" / student / assignment,
                                 root / "exercises" / assignment, staged)
        unchanged = {name for name, sha in hashes.items() if previous.get("hashes", {}).get(name) == sha}
        before = hand_grades(root, assignment, student)
        record = {"hashes": hashes, "problems": problems, "flags": [str(f) for f in facts_flags]}
        with opened(root) as gb:
            deadlines.apply(gb, assignment, student, policy)
        if not any(staged.glob("*.ipynb")):
            zero_submission(root, assignment, student)
            record["problems"].append("nothing gradable was submitted: 0 points (the reasons are listed above)")
            failed, log, seconds = False, "", {}
        else:
            args = ["autograde", assignment, f"--student={student}", "--force",
                    f"--CourseDirectory.submitted_directory={staged_root}",
                    "--log-level=INFO", "--Application.log_format=%(created).3f %(levelname)s %(message)s", *extra]
            env["COURSE_NOTEBOOKS"] = str(len(list(staged.glob("*.ipynb"))))  # kernels started ahead
            if zygote is not None:  # forked from a process with nbgrader imported (instructor/run_nbgrader.py)
                returncode, log = zygote.run(args, env, str(root), str(Path(staged_root) / "nbgrader.log"))
            else:
                proc = subprocess.run([sys.executable, "-m", "instructor.run_nbgrader", *args], cwd=root, env=env,
                                      capture_output=True, text=True)
                returncode, log = proc.returncode, proc.stdout + proc.stderr
            seconds, error = parse_log(log)
            record["problems"] += slow_notebooks(seconds, slow_after)
            failed = returncode != 0 or not (root / "autograded" / student / assignment).is_dir()
            if failed:
                record["problems"].append("nbgrader could not grade it: "
                                          + (error or f"exit status {returncode}; see autograde.log"))
    record["log"] = log[-20000:]
    record["seconds"] = seconds
    record["verdicts"] = {}
    record["seeds"] = seeds
    for path in sorted((verdict_dir / student).glob("*.json")):
        data = json.loads(path.read_text())
        record["verdicts"][path.stem] = data["cells"]
        if data.get("seed") is not None:
            record["seeds"][path.stem] = data["seed"]
        record["problems"] += [f"{path.stem}.ipynb: {reason}" for reason in data["stopped"] + data.get("problems", [])]
    if failed:
        record["status"] = "FAILED"
    else:
        record["problems"] += keep_hand_grades(root, assignment, student, before, unchanged)
        show_flags_in_formgrader(root, assignment, student, facts_flags)
        record.update(scores(root, assignment, student))
        with opened(root) as gb:
            record["late"] = deadlines.lateness(gb, assignment, student)
        record["status"] = status_of(record["flags"], record["problems"], record["needs_manual_grade"])
    record["wall_seconds"] = round(time.time() - started, 2)
    record["graded_at"] = round(time.time(), 3)
    return record


# ------------------------------------------------------------------------------ report


def write_report(root: Path, assignment: str, students: dict, sandbox: str) -> str:
    """grades/<assignment>/report.md and report.json, from every student's record."""
    lines = [f"# Autograde report: {assignment}", "", f"Sandbox: {sandbox}", "",
             "Statuses: " + "; ".join(f"`{k}` {v}" for k, v in STATUSES.items()), "",
             "| student | status | autograded | manual grading | late | flags | problems |",
             "|---|---|---|---|---|---|---|"]
    for student, res in sorted(students.items()):
        graded = res["status"] != "FAILED"
        auto = f"{res['code_score']:g} / {res['max_code_score']:g}" if graded else "—"
        manual = ("pending" if res.get("needs_manual_grade") else "done") if graded else "—"
        lines.append(f"| {student} | {res['status']} | {auto} | {manual} | {late_text(res.get('late'))} | "
                     f"{len(res['flags'])} | {len(res['problems'])} |")
    lines += ["", "## Details", ""]
    for student, res in sorted(students.items()):
        failed_tests = [f"{nb} [{v['grade_id']}] 0 / {v['points']:g}: " + "; ".join(v["reasons"][:3])
                        + (f"; and {len(v['reasons']) - 3} more" if len(v["reasons"]) > 3 else "")
                        for nb, cells in res.get("verdicts", {}).items() for v in cells if not v["passed"]]
        if not (res["problems"] or res["flags"] or failed_tests):
            continue
        lines.append(f"### {student}: {res['status']}")
        lines += [f"- problem: {p}" for p in res["problems"]]
        lines += [f"- flag (advice): {f}" for f in res["flags"]]
        lines += [f"- test: {t}" for t in failed_tests]
        lines.append("")
    seeds = sorted((f"{s}/{nb}", seed) for s, r in students.items() for nb, seed in r.get("seeds", {}).items())
    if seeds:
        lines += ["## Seeds of the hidden inputs (a regrade reuses them; REDRAW=1 draws new ones)", ""]
        lines += [f"- {k}: {v}" for k, v in seeds] + [""]
    timed = sorted((f"{s}/{nb}", sec) for s, r in students.items() for nb, sec in r.get("seconds", {}).items())
    if timed:
        lines += ["## Seconds per notebook", ""] + [f"- {k}: {v:.2f}" for k, v in timed]
    text = "\n".join(lines) + "\n"
    folder = report_dir(root, assignment)
    (folder / "report.md").write_text(text)
    (folder / "report.json").write_text(json.dumps(
        {"assignment": assignment, "sandbox": sandbox, "statuses": STATUSES, "students": students}, indent=1))
    return text


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The options (checked) and the rest, passed on to nbgrader."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="module14")
    parser.add_argument("--root", default=".", help="course root (where nbgrader_config.py is)")
    parser.add_argument("--student", action="append", default=[], help="grade only this student (repeatable)")
    parser.add_argument("--all", action="store_true", help="regrade every student, changed or not")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="students graded at once (default: the machine's cores)")
    parser.add_argument("--redraw", action="store_true", help="draw new hidden inputs instead of reusing the seeds")
    parser.add_argument("--slow-after", type=float, default=None,
                        help="list a notebook that took longer than this many seconds to grade "
                             f"(default {SLOW_AFTER_DEFAULT:g}; {SLOW_AFTER} where a notebook trains)")
    args, extra = parser.parse_known_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be a whole number >= 1, got {args.jobs}")
    if args.slow_after is None:
        args.slow_after = SLOW_AFTER.get(args.assignment, SLOW_AFTER_DEFAULT)
    if not args.slow_after > 0:
        parser.error(f"--slow-after must be a number of seconds > 0, got {args.slow_after}")
    return args, extra


def sandbox_or_refusal(root: Path) -> tuple[str | None, str | None, str]:
    """(kernel_dir, sandbox line for the report, refusal): a kernelspec when the sandbox works; else none,
    and a refusal unless COURSE_ALLOW_UNSANDBOXED=1."""
    ok, how = probe_sandbox(root)
    if ok:
        return write_kernelspec(), how, ""
    if os.environ.get("COURSE_ALLOW_UNSANDBOXED") == "1":
        print(f"WARNING: grading WITHOUT a sandbox: {how}", file=sys.stderr)
        return None, f"NONE (COURSE_ALLOW_UNSANDBOXED=1; the sandbox failed: {how})", ""
    return None, None, ("Refusing to autograde: student code would run with your rights (it could read\n"
                        "solutions/ or change gradebook.db), and the sandbox does not work here:\n"
                        f"  {how}\nInstall bubblewrap (apt-get install bubblewrap), or run inside a container,\n"
                        "or set COURSE_ALLOW_UNSANDBOXED=1 to accept the risk.")


def students_to_grade(root: Path, args: argparse.Namespace, book: dict, code: str, everyone: list[str]) -> list[str]:
    """``--student``'s, or everyone (``--all``, or the checks changed), or those new, changed, FAILED
    or missing from the gradebook."""
    if args.student:
        return args.student
    if args.all or book["code"] != code:
        return everyone
    known = in_gradebook(root, args.assignment)
    records = book["students"]
    return [s for s in everyone if s not in records or records[s]["status"] == "FAILED" or s not in known
            or records[s].get("hashes") != file_hashes(root / "submitted" / s / args.assignment)]


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(argv)
    skip_unused_imports()  # before the first nbgrader import (instructor/run_nbgrader.py)
    quiet_known_warnings()
    share_gradebook_engines()
    # nbgrader shells out to `alembic` (from this environment) when it opens the gradebook
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    root = Path(args.root).resolve()
    submitted = root / "submitted"
    everyone = sorted(q.parent.name for q in submitted.glob(f"*/{args.assignment}") if q.is_dir())
    unknown = [s for s in args.student if s not in everyone]
    if unknown or not everyone:
        print(f"No submissions for {unknown or 'anyone'}: expected submitted/<student_id>/{args.assignment}/*.ipynb "
              f"under {root}", file=sys.stderr)
        return 1
    try:
        deadlines.load(root, args.assignment)
    except ValueError as err:
        print(f"autograde: {err}", file=sys.stderr)
        return 2

    sandbox_tmp = tempfile.mkdtemp(prefix="course-sandbox-")
    os.chmod(sandbox_tmp, 0o711)
    verdict_dir = Path(tempfile.mkdtemp(prefix="course-verdicts-"))
    kernel_dir = None
    try:
        kernel_dir, sandbox, refusal = sandbox_or_refusal(root)
        if refusal:
            print(refusal, file=sys.stderr)
            return 2
        env = nbgrader_env(sandbox_tmp, kernel_dir, str(verdict_dir))
        ensure_in_gradebook(root, args.assignment, env)
        ready = lab_grading.warm(root, args.assignment)  # training checks: SFT baseline once, cached
        if ready:
            print(ready, flush=True)

        with locked_state(root) as state:
            book = book_of(state, args.assignment)
        code = code_fingerprint(root, args.assignment)
        records = book["students"]
        todo = students_to_grade(root, args, book, code, everyone)
        flags = scan_submissions(root / "solutions", submitted, args.assignment, only=set(todo))
        jobs = max(1, min(args.jobs, len(todo)))
        print(f"autograde {args.assignment}: {len(todo)} of {len(everyone)} students to grade "
              f"({len(everyone) - len(todo)} unchanged since last time), {jobs} at a time; sandbox: {sandbox}",
              flush=True)
        started = time.time()
        log_parts = []

        def one(student: str) -> dict:
            try:
                for attempt in range(1, MACHINE_TRIES + 1):
                    res = grade_student(root, args.assignment, student, env, extra, records.get(student, {}),
                                        flags.get(student, []), verdict_dir, redraw=args.redraw,
                                        slow_after=args.slow_after, zygote=zygote)
                    if res["status"] != "FAILED" or sandbox_kernel.START_FAILED not in res["log"]:
                        return res
                    if attempt < MACHINE_TRIES:  # the machine could not start a kernel: not the student's doing
                        tqdm.write(f"{student}: no kernel could be started (busy machine); grading again "
                                   f"({attempt + 1} of {MACHINE_TRIES})", file=sys.stdout)
                        time.sleep(10 * attempt)
                return res
            except Exception as err:  # noqa: BLE001 - one student never stops the batch
                return {"status": "FAILED", "problems": [f"grading stopped: {type(err).__name__}: {err}"],
                        "flags": [str(f) for f in flags.get(student, [])], "log": "", "seconds": {},
                        "verdicts": {}, "hashes": {}, "seeds": records.get(student, {}).get("seeds", {}),
                        "wall_seconds": 0.0}

        zygote = Zygote(root)
        progress = tqdm(total=len(todo), desc=f"autograde {args.assignment}", unit="student")
        with ThreadPoolExecutor(max_workers=jobs) as pool, contextlib.closing(zygote), progress:
            futures = {pool.submit(one, student): student for student in todo}
            for number, future in enumerate(as_completed(futures), start=1):
                student, res = futures[future], future.result()
                log_parts.append(f"===== {student}\n{res.pop('log')}")
                with locked_state(root) as state:  # merged into what is on disk now
                    book_of(state, args.assignment)["students"][student] = res
                score = (f"{res['code_score']:g}/{res['max_code_score']:g} autograded"
                         if res["status"] != "FAILED" else "no score")
                progress.write(f"[{number}/{len(todo)}] {student}: {res['status']}, {score}, {len(res['flags'])} "
                               f"flags, {len(res['problems'])} problems ({res['wall_seconds']:.1f} s)",
                               file=sys.stdout)
                progress.update()
        with locked_state(root) as state:
            book = book_of(state, args.assignment)
            if not args.student:
                book["code"] = code
            records = book["students"]
            for student in list(records):
                if student not in everyone:
                    del records[student]
            with (report_dir(root, args.assignment) / "autograde.log").open("a") as log:  # every run's, in turn
                log.write(f"##### run of {time.strftime('%Y-%m-%d %H:%M:%S')}\n" + "\n".join(log_parts) + "\n")
            report = write_report(root, args.assignment, records, sandbox)
        print(report)
        failed = [s for s in todo if records[s]["status"] == "FAILED"]
        folder = report_dir(root, args.assignment).relative_to(root)
        print(f"autograde: {len(todo) - len(failed)}/{len(todo)} graded in {time.time() - started:.1f} s "
              f"({jobs} at a time); report in {folder}/report.md, nbgrader log in {folder}/autograde.log")
        return 1 if failed else 0
    finally:
        shutil.rmtree(sandbox_tmp, ignore_errors=True)
        shutil.rmtree(verdict_dir, ignore_errors=True)
        if kernel_dir:
            shutil.rmtree(kernel_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
