"""The kernel's memory cap and the seccomp filter (instructor/sandbox_limits.py) through the real
grading pipeline: `python -m instructor.autograde` on three students who submit Q1 only.

- x_memory forks four children of 150 MB each, every one under the per-process limit, 600 MB
  together, over the kernel's cap (``COURSE_SANDBOX_KERNEL_MEM_MB=450`` for this run): the kernel is
  stopped after that cell and every test of Q1 scores 0 with the memory cap as the reason;
- x_ptrace calls ptrace through ctypes: the call fails with EPERM, the answers still earn their
  points (the attack is contained, as the sandbox's other limits are), and the ctypes import is
  flagged for review;
- x_deep_output sends a display output nested 50,000 levels deep (past the grader's JSON decoder):
  the output is dropped with a notice and the answers keep their points, never FAILED;
- x_deep_file submits a file whose JSON nests 200,000 levels deep: 0 points with the reason;
- x_sleeper sleeps 14 s in an answer cell (within every limit): full points, and the report lists
  the time (``--slow-after 12`` for this run);
- x_tamper edits a locked cell and forges its nbgrader checksum: the release's cell runs, full
  points, and the report lists the tampering;
- zz_after, graded after them, submits the solution and loses nothing.

tests/test_sandbox.py tests each limit without nbgrader. Needs bubblewrap, like tests/test_assignment.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT
from grading_course import grading_env, released_course
from nbgrader.utils import compute_checksum

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from instructor import sandbox_limits  # noqa: E402
from instructor.nbgrader_hooks import is_test_cell  # noqa: E402

pytestmark = pytest.mark.slow

ASSIGNMENT = "module14"
Q1 = "q1_bradley_terry"
CAP_MB = 450
MEMORY = '''
import os, time
_kids = []
for _ in range(4):
    _pid = os.fork()
    if _pid == 0:
        _block = b"x" * (150 * 2**20)
        time.sleep(5)
        os._exit(0)
    _kids.append(_pid)
time.sleep(8)
print("MEMORY", len(_kids))
'''
PTRACE = '''
import ctypes, errno
_libc = ctypes.CDLL(None, use_errno=True)
_result = _libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME
print("PTRACE", _result, errno.errorcode.get(ctypes.get_errno()))
'''
DEEP_OUTPUT = '''
_ip = get_ipython()
_deep = '{"a": ' * 50000 + '1' + '}' * 50000
_content = ('{"data": {"application/json": ' + _deep + '}, "metadata": {}, "transient": {}}').encode()
_ip.kernel.session.send(_ip.kernel.iopub_socket, "display_data", content=_content,
                        parent=_ip.kernel.get_parent("shell"))
print("DEEP sent")
'''


def _env() -> dict[str, str]:
    return grading_env(COURSE_SANDBOX_KERNEL_MEM_MB=str(CAP_MB))


def _run(cmd: list[str], cwd: Path, timeout: int = 1800):
    return subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)


def _with_cell(nb, source: str):
    """The solution with ``source`` in a cell of its own after the first answer cell."""
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("solution")) + 1
    nb.cells.insert(at, nbformat.v4.new_code_cell(source))
    return nb


@pytest.fixture(scope="module")
def graded():
    course = released_course("sandbox-grading-", ASSIGNMENT, _env())
    solution = course / "solutions" / ASSIGNMENT / f"{Q1}.ipynb"
    for student, extra in (("x_memory", MEMORY), ("x_ptrace", PTRACE), ("x_deep_output", DEEP_OUTPUT),
                           ("x_sleeper", "import time\ntime.sleep(14)"), ("x_tamper", None), ("zz_after", None)):
        nb = nbformat.read(str(solution), as_version=4)
        if student == "x_tamper":
            locked = next(c for c in nb.cells if is_test_cell(c))
            locked.source = "assert True"
            locked.metadata.nbgrader["checksum"] = compute_checksum(locked)
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(_with_cell(nb, extra) if extra else nb, str(folder / f"{Q1}.ipynb"))
    folder = course / "submitted" / "x_deep_file" / ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / f"{Q1}.ipynb").write_text('{"cells": ' + "[" * 200_000 + "]" * 200_000 + "}")
    auto = _run([sys.executable, "-m", "instructor.autograde", "--jobs", "1", "--Execute.timeout=20",
                 "--slow-after", "12"], course)
    assert auto.returncode == 0, auto.stdout[-3000:] + auto.stderr[-3000:]
    report = json.loads((course / "grades" / ASSIGNMENT / "report.json").read_text())
    yield {"course": course, "report": report, "students": report["students"]}
    shutil.rmtree(course, ignore_errors=True)


def _printed(graded, student: str, marker: str) -> str:
    nb = nbformat.read(str(graded["course"] / "autograded" / student / ASSIGNMENT / f"{Q1}.ipynb"), as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                   if o.output_type == "stream")
    assert marker in text, text[-500:]
    return text.split(marker + " ", 1)[1].splitlines()[0]


def test_the_report_says_once_which_memory_cap_and_filter_applied(graded, monkeypatch):
    monkeypatch.setenv("COURSE_SANDBOX_KERNEL_MEM_MB", str(CAP_MB))  # as the run had it
    _, memory = sandbox_limits.cgroup_support()
    _, seccomp = sandbox_limits.seccomp_program()
    assert (memory in graded["report"]["sandbox"]
            and seccomp in graded["report"]["sandbox"]), graded["report"]["sandbox"]
    text = (graded["course"] / "grades" / ASSIGNMENT / "report.md").read_text()
    assert text.count(memory) == 1 and text.count(seccomp) == 1


def test_processes_over_the_kernels_memory_cap_together_stop_it_and_score_zero(graded):
    if not sandbox_limits.cgroup_support()[0]:
        pytest.skip("cgroups cannot be used here: memory is capped per process only (the report says so)")
    res = graded["students"]["x_memory"]
    assert res["notebooks"][Q1]["code_score"] == 0, res["verdicts"]
    reasons = [r for v in res["verdicts"][Q1] for r in v["reasons"]]
    assert reasons and all(f"memory cap of {CAP_MB} MB" in r for r in reasons), reasons
    assert any("out-of-memory killer" in p for p in res["problems"]), res["problems"]
    assert res["status"] == "review"


def test_ptrace_is_refused_and_costs_nothing_else_but_is_flagged(graded):
    if sandbox_limits.seccomp_program()[0] is None:
        pytest.skip("no seccomp filter on this architecture (the report says so)")
    res = graded["students"]["x_ptrace"]
    assert _printed(graded, "x_ptrace", "PTRACE") == "-1 EPERM"
    assert res["notebooks"][Q1]["code_score"] == 8, res["verdicts"]
    assert res["status"] == "review" and any("ctypes" in f for f in res["flags"]), res["flags"]


def test_the_student_after_them_is_unaffected(graded):
    res = graded["students"]["zz_after"]
    assert res["notebooks"][Q1]["code_score"] == 8 and res["flags"] == [], res
    assert not [p for p in res["problems"] if "not submitted" not in p], res["problems"]  # Q2-Q5: not submitted


def test_crafted_nesting_scores_what_it_earns_never_failed(graded):
    deep = graded["students"]["x_deep_output"]
    assert deep["status"] != "FAILED" and deep["notebooks"][Q1]["code_score"] == 8, deep["problems"]
    assert _printed(graded, "x_deep_output", "DEEP") == "sent"
    nb = nbformat.read(str(graded["course"] / "autograded" / "x_deep_output" / ASSIGNMENT / f"{Q1}.ipynb"),
                       as_version=4)
    assert any("nested more than 64 levels deep" in str(o.get("data", "")) for c in nb.cells if c.cell_type == "code"
               for o in c.outputs)
    file = graded["students"]["x_deep_file"]
    assert file["status"] == "review" and file["code_score"] == 0, file
    assert any("nested deeper than Python reads" in p and "0 points" in p for p in file["problems"]), file["problems"]


def test_time_used_and_tampering_are_listed_and_cost_no_points(graded):
    sleeper, tamper = graded["students"]["x_sleeper"], graded["students"]["x_tamper"]
    assert sleeper["notebooks"][Q1]["code_score"] == 8 and sleeper["status"] == "review", sleeper
    assert any(p.startswith(f"{Q1}.ipynb: took ") and "more than 12 s" in p for p in sleeper["problems"]), sleeper
    assert tamper["notebooks"][Q1]["code_score"] == 8 and tamper["status"] == "review", tamper
    assert any("tampering: locked cell q1_test" in p and "release's version ran" in p for p in tamper["problems"])
    report = (graded["course"] / "grades" / ASSIGNMENT / "report.md").read_text()
    assert "### x_tamper: review" in report and "tampering" in report and "### x_sleeper: review" in report
