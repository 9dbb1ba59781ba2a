"""The graded assignment end to end: the real nbgrader pipeline on a class of honest and adversarial
fake students.

One module-scoped run (in a scratch copy of the course under test-artifacts/) generates the release,
autogrades every submission with `python -m instructor.autograde` (sandboxed: bubblewrap is required,
as in CI; without it these tests fail and say so), generates feedback and exports grades; the tests
then assert per student. Attackers submit Q1 only and no answers: whatever they do, they must earn 0.
Cell timeout for the run: 10 s (the loops), passed on the command line like any nbgrader option.
"""

from __future__ import annotations

import copy
import csv
import html
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from array_hole import BT_MATRIX, REWRITE, SUBCLASS
from conftest import ROOT, report_line
from copied_answers import submission as library_submission
from grading_course import stale_releases

if str(ROOT) not in sys.path:  # the instructor/ tools live at the repository root
    sys.path.insert(0, str(ROOT))

from instructor.autograde import probe_sandbox  # noqa: E402
from instructor.gradebook import STATUSES  # noqa: E402
from instructor.nbgrader_hooks import is_test_cell  # noqa: E402

ASSIGNMENT = "module14"
NOTEBOOKS = ["q1_bradley_terry", "q2_dpo_margins", "q3_group_baselines", "q4_budgets", "q5_passport"]
Q1 = "q1_bradley_terry"
TIMEOUT = 10

pytestmark = pytest.mark.slow


def _say(request, line: str) -> None:
    """Print past pytest's output capture (report_line alone is captured inside a test)."""
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        report_line(request.config, line)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    for var in ("COURSE_SANDBOX_KERNEL", "COURSE_ALLOW_UNSANDBOXED", "COURSE_VERDICT_DIR"):
        env.pop(var, None)
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 1200):
    return subprocess.run(cmd, cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=timeout)


def _read(path: Path):
    return nbformat.read(str(path), as_version=4)


def _write(nb, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


def _with_code(nb, grade_id: str, prefix: str = "", replace: str | None = None):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            cell.source = replace if replace is not None else prefix + cell.source
            return nb
    raise KeyError(grade_id)


ID_CELL = "q5_student_id"  # Q5's report is drawn from the id typed in this cell


def _own_id(nb, student: str):
    """Q5 as an honest student hands it in: their own id typed where the solution leaves it empty (the
    solution's passport follows the typed id; the release's stub is left for who typed nothing). A copy:
    the same solution notebook goes to several students."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == ID_CELL and 'student_id = ""' in cell.source:
            cell.source = f"student_id = {student!r}\n"
    return nb


# Answer-less Q1: a table of the visible tests' inputs and outputs (passes nbgrader validate), and the
# visible answer typed in; the written answer is filled in so validate has nothing to say.
DUMMY_Q1 = '''
def bt_matrix(scores):
    s = tuple(float(x) for x in scores)
    if len(s) < 2 or any(x != x for x in s):
        raise ValueError("scores")
    table = {(0.0, 1.0, 3.0): [[0.5, 0.2689414213699951, 0.04742587317756678],
                               [0.7310585786300049, 0.5, 0.11920292202211755],
                               [0.9525741268224334, 0.8807970779778823, 0.5]],
             (0.0, 1e4, -1e4): [[0.5, 0.0, 1.0], [1.0, 0.5, 1.0], [0.0, 0.0, 0.5]]}
    return np.array(table.get(s, np.full((len(s), len(s)), 0.5)))

def chain_win_rate(win_rates):
    if not all(0 < p < 1 for p in win_rates):
        raise ValueError("p")
    return {(0.75, 0.75): 0.9, (0.6,): 0.6, (0.75, 0.25): 0.5}.get(tuple(win_rates), 0.0)
'''
DUMMY_LOSS = '''
def pairwise_loss(scores, winners, losers):
    if len(winners) != len(losers) or not len(winners) or max([*winners, *losers]) >= len(scores):
        raise ValueError("comparisons")
    table = {((0.0, 0.0), (0,), (1,)): 0.6931471805599453, ((2.0, 1.0, 0.0), (0, 1), (1, 2)): 0.31326168751822286,
             ((2.0, 1.0, 0.0), (2,), (0,)): 2.1269280110429727, ((0.0, 1e4), (0,), (1,)): 1e4,
             ((0.0, 1e4), (1,), (0,)): 0.0}
    return table.get((tuple(scores), tuple(winners), tuple(losers)), 0.5)
'''
DUMMY_ANSWERS = "p_a_beats_c, p_a_beats_d, tournament_loss = 0.9, 0.9, 0.5\n"


SHADOWING = {
    # rebinding names a comparison in the kernel would use
    "shadow_assign": "float = lambda *a: 0.0\ntype = lambda *a: dict\nabs = lambda x: 0.0\nround = lambda *a: 0.0\n",
    "shadow_def": ("def float(*a):\n    return 0.0\n\ndef abs(x):\n    return 0.0\n\n"
                   "class type:\n    def __new__(cls, *a):\n        return dict\n"),
    "shadow_globals": "globals()['float'] = lambda *a: 0.0\n"
                      "globals().update(abs=lambda x: 0.0, type=lambda *a: dict)\n",
    "shadow_loop": "for _name in ('float', 'abs', 'type', 'isinstance', 'len'):\n"
                   "    globals()[_name] = lambda *a, **k: 0.0\n",
    "star_import": ("import sys\nopen('helper_mod.py', 'w').write('float = lambda *a: 0.0\\nabs = lambda x: 0.0\\n"
                    "isinstance = lambda *a: True\\n__all__ = [\"float\", \"abs\", \"isinstance\"]\\n')\n"
                    "sys.path.insert(0, '.')\nfrom helper_mod import *\n"),
    "builtins_patch": ("import builtins\nbuiltins.float = lambda *a: 0.0\nbuiltins.isinstance = lambda *a: True\n"
                       "import numpy as np\nnp.isclose = lambda *a, **k: True\n"),
}

# IPython transformers that turn every later cell into `pass`, reached four ways, and one that forges
# the record; one per notebook of student x_transformers (Q1 with constant answers, Q2-Q5 the release)
TRANSFORMERS = {
    "transformer_get_ipython": "get_ipython().input_transformers_post.append(lambda lines: ['pass\\n'])\n",
    "transformer_quit_ip": ("import ast\nclass _Blank(ast.NodeTransformer):\n    def visit_Module(self, node):\n"
                            "        node.body = [ast.Pass()]\n        return node\n"
                            "quit._ip.ast_transformers.append(_Blank())\n"),
    "transformer_instance": ("from IPython.core.interactiveshell import InteractiveShell\n"
                             "InteractiveShell.instance().input_transformers_cleanup.insert(0, lambda lines: "
                             "['pass\\n'])\n"),
    "transformer_gc": ("import gc\nfrom IPython.core.interactiveshell import InteractiveShell as _S\n"
                       "_shell = next(o for o in gc.get_objects() if isinstance(o, _S))\n"
                       "_shell.input_transformers_post.append(lambda lines: ['pass\\n'])\n"),
    # a transformer that forges the grading record: right nonce, the visible numbers, guesses elsewhere
    "forged_record": '''
import json, re
from IPython.display import publish_display_data
def _forge(lines):
    src = "".join(lines)
    m = re.search(r"loads\\((.*)\\)\\}\\)", src)
    if not m:
        return lines
    plan = json.loads(eval(m.group(1)))
    results = [{"t": "float", "v": 0.7310585786300049} for _ in plan["calls"]]
    record = {"nonce": plan["nonce"], "grade_id": plan["grade_id"], "results": results}
    return ["from IPython.display import publish_display_data\\n",
            f"publish_display_data({{{plan['mime']!r}: {record!r}}})\\n"]
get_ipython().input_transformers_post.append(_forge)
''',
}

SPY = '''
SEEN = []
import math
def bt_matrix(scores):
    SEEN.append(scores)
    return 0.5
def chain_win_rate(win_rates):
    SEEN.append(win_rates)
    raise ValueError("p")
'''

SEARCH = '''
import json, os, time
_found = {{"solutions": [], "hidden": [], "gradebook": [], "config": [], "read": [], "files": 0, "done": False}}
_stop = time.monotonic() + {budget}
def _has(path, marker):
    try:
        with open(path, "rb") as f:
            return marker in f.read()
    except OSError:
        return False
for _dir, _subdirs, _files in os.walk("/"):
    if time.monotonic() > _stop:
        break
    _found["files"] += len(_files)
    if _dir.startswith(("/proc", "/dev", "/sys")):
        _subdirs[:] = []
        continue
    if "solutions" in _subdirs and os.path.isdir(os.path.join(_dir, "solutions", "module14")):
        _found["solutions"].append(_dir)
    for _name in _files:
        _path = os.path.join(_dir, _name)
        if _name == "gradebook.db" and _has(_path, b"module14"):
            _found["gradebook"].append(_path)
        if _name in ("nbgrader_config.py", "module14.py") and _has(_path, b"module14"):
            _found["config"].append(_path)
        if _name.endswith(".ipynb") and _has(_path, b"q1_test_probability"):
            _found["hidden"].append(_path)
else:
    _found["done"] = True
for _path in {targets!r}:
    try:
        open(_path, "rb").read()
        _found["read"].append(_path)
    except OSError:
        pass
print("SEARCH", json.dumps(_found))
'''

# The sandbox's limits, one attack per notebook of student x_sandbox, each in a cell of
# its own next to the solution's answers: contained, and every graded cell still earns its points.
SANDBOX_ATTACKS = {
    # its own network namespace: the host's port is neither listed nor reachable; its port is its own
    "q1_bradley_terry": '''
import json, socket
_tcp = open("/proc/net/tcp").read()
_net = {"host_port_listed": ":%04X " % HOST_PORT in _tcp, "reached_host": True}
try:
    socket.create_connection(("127.0.0.1", HOST_PORT), timeout=3).close()
except OSError as err:
    _net["reached_host"] = False
_server = socket.socket()
_server.bind(("0.0.0.0", 0))
_server.listen()
_net["own_port"] = _server.getsockname()[1]
print("NET", json.dumps(_net))
''',
    # a size-limited tmpfs: files of 60 MB (under the 64 MB file limit) until the disk is full; left there
    "q2_dpo_margins": '''
import errno
_written, _error = 0, None
try:
    for _i in range(100):
        with open(f"fill{_i}.bin", "wb") as _f:
            for _ in range(60):
                _f.write(b"x" * 2**20)
                _written += 2**20
except OSError as err:
    _error = errno.errorcode.get(err.errno)
print("DISK", _written, _error)
''',
    # 100 MB of stdout: the cell keeps at most SandboxedExecute.max_output_bytes
    "q3_group_baselines": '''
for _ in range(100):
    print("x" * (2**20 - 1))
''',
    # a fork bomb whose children sleep: the process cap stops it
    "q4_budgets": '''
import os, time
_children = 0
try:
    while _children < 10_000:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        _children += 1
except OSError as err:
    print("FORK", _children, type(err).__name__)
''',
}
# a function that never returns on one input of its hidden tests (a chain of 60 links): that test
# cell is stopped by the time limit, the others (and the answers it computes) pass
SLOW_CHAIN = """
_chain = chain_win_rate
def chain_win_rate(win_rates):
    while len(win_rates) == 60:
        pass
    return _chain(win_rates)
"""


def _make_submissions(course: Path, elsewhere: Path, host_port: int) -> dict[str, list[str]]:
    """Fake students; returns {student: notebooks submitted}."""
    sol = {n: _read(course / "solutions" / ASSIGNMENT / f"{n}.ipynb") for n in NOTEBOOKS}
    rel = {n: course / "exercises" / ASSIGNMENT / f"{n}.ipynb" for n in NOTEBOOKS}
    sub = course / "submitted"
    made: dict[str, list[str]] = {}

    def put(student, name, nb):
        _write(_own_id(nb, student), sub / student / ASSIGNMENT / f"{name}.ipynb")
        made.setdefault(student, []).append(name)

    def dummy_q1(prefix: str):
        nb = _with_code(_read(rel[Q1]), "q1_functions", replace=prefix + DUMMY_Q1)
        nb = _with_code(nb, "q1_loss_function", replace=DUMMY_LOSS)
        nb = _with_code(nb, "q1_unit_answer", replace="Only differences of scores matter.")
        return _with_code(nb, "q1_answers", replace=DUMMY_ANSWERS)

    # honest, graded after a submission that duplicates, deletes, renames and corrupts cells
    for n in NOTEBOOKS:
        put("alice_solutions", n, sol[n])
        put("bob_untouched", n, _read(rel[n]))
    for n in NOTEBOOKS:
        data = json.loads((course / "solutions" / ASSIGNMENT / f"{n}.ipynb").read_text())
        cells = data["cells"]
        tests = [i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get("grade")
                 and not c["metadata"]["nbgrader"].get("solution") and c["cell_type"] == "code"]
        if n == Q1:  # a test cell pasted twice (JupyterLab keeps its metadata)
            cells.insert(tests[0] + 1, json.loads(json.dumps(cells[tests[0]])))
        elif n == "q2_dpo_margins":  # a test cell deleted
            del cells[tests[0]]
        elif n == "q3_group_baselines":  # a test cell renamed
            cells[tests[0]]["metadata"]["nbgrader"]["grade_id"] = "my_tests"
        elif n == "q4_budgets":  # corrupted metadata
            cells[tests[0]]["metadata"]["nbgrader"] = "corrupted"
            cells[tests[1]]["metadata"]["nbgrader"]["schema_version"] = "x"
        for cell in cells if n == "q5_passport" else []:  # Q5: the student's own id typed in (see _own_id)
            if cell["metadata"].get("nbgrader", {}).get("grade_id") == ID_CELL:
                cell["source"] = 'student_id = "a0_messy_cells"\n'
        path = sub / "a0_messy_cells" / ASSIGNMENT / f"{n}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
        made.setdefault("a0_messy_cells", []).append(n)
    for n in ("q1_bradley_terry", "q2_dpo_margins"):  # tests edited to `assert True`
        nb = _read(rel[n])
        for cell in nb.cells:
            if is_test_cell(cell):
                cell.source = "assert True"
        put("carol_assert_true", n, nb)
    # the numbers shown in the visible tests typed in: passes nbgrader validate, earns nothing
    put("kim_visible_numbers", Q1, dummy_q1(""))
    put("x_shadowing", Q1, dummy_q1("".join(code for name, code in SHADOWING.items() if name != "star_import")))
    put("x_star_import", Q1, dummy_q1(SHADOWING["star_import"]))
    first_answer = {"q2_dpo_margins": "q2_functions", "q3_group_baselines": "q3_functions",
                    "q4_budgets": "q4_functions", "q5_passport": "q5_passport"}
    for notebook, code in zip(NOTEBOOKS, TRANSFORMERS.values()):
        nb = dummy_q1(code) if notebook == Q1 else _with_code(_read(rel[notebook]), first_answer[notebook],
                                                              prefix=code)
        put("x_transformers", notebook, nb)
    # answers that call course_lib (the sandbox cannot import it), or paste its source renamed
    for student, kind in (("x_course_lib", "calls"), ("x_copied_course_lib", "copies")):
        for notebook, cells in library_submission(kind).items():
            nb = _read(rel[notebook])
            for grade_id, code in cells.items():
                nb = _with_code(nb, grade_id, replace=code)
            put(student, notebook, nb)
    # a function that stores the hidden inputs, printed by a later cell: never in the feedback
    nb = _with_code(_read(rel[Q1]), "q1_functions", replace=SPY)
    put("x_spy", Q1, _with_code(nb, "q1_answers",
                                replace="print('SPIED', SEEN)\np_a_beats_c = p_a_beats_d = tournament_loss = 0.0"))
    # searches the whole filesystem (and two known places) for solutions, hidden tests, the gradebook
    targets = [str(ROOT / "solutions" / ASSIGNMENT / f"{Q1}.ipynb"),
               str(elsewhere / "solutions" / ASSIGNMENT / f"{Q1}.ipynb"),
               str(course / "gradebook.db"), str(ROOT / "instructor" / "checks" / "module14.py")]
    put("x_search", Q1, dummy_q1(SEARCH.format(targets=targets, budget=TIMEOUT - 4)))
    # robustness, one student: an interruptible loop (Q1), os._exit (Q2), a loop that swallows
    # interrupts (Q3), a notebook that is not JSON (Q4), and a correct Q5
    solution = lambda n: _read(course / "solutions" / ASSIGNMENT / f"{n}.ipynb")  # noqa: E731
    put("frank_robustness", Q1, _with_code(solution(Q1), "q1_functions", prefix="while True:\n    pass\n\n"))
    put("frank_robustness", "q2_dpo_margins", _with_code(solution("q2_dpo_margins"), "q2_answers",
                                                         prefix="import os\nos._exit(3)\n"))
    put("frank_robustness", "q3_group_baselines", _with_code(solution("q3_group_baselines"), "q3_aggregation", prefix=(
        "import time\nwhile True:\n    try:\n        time.sleep(0.2)\n    except KeyboardInterrupt:\n        pass\n")))
    (sub / "frank_robustness" / ASSIGNMENT / "q4_budgets.ipynb").write_text('{"cells": [ this is not json')
    made["frank_robustness"].append("q4_budgets")
    put("frank_robustness", "q5_passport", sol["q5_passport"])
    # the array hole (tests/array_hole.py): Q1 whose bt_matrix only validates its input
    put("x_array_rewrite", Q1, _with_code(_read(rel[Q1]), "q1_functions", replace=REWRITE + BT_MATRIX))
    put("x_array_subclass", Q1, _with_code(_read(rel[Q1]), "q1_functions", replace=SUBCLASS + BT_MATRIX))
    # the answers of 1c typed in as the released numbers give them (a friend's numbers): not this student's
    friend = "p_a_beats_c = 0.9\np_a_beats_d = 0.9333333333333333\ntournament_loss = 0.963785453080035\n"
    put("x_friends_numbers", Q1, _with_code(solution(Q1), "q1_answers", replace=friend))
    # a test cell stopped by the time limit
    put("x_slow_test", Q1, _with_code(solution(Q1), "q1_functions", replace=next(
        c.source for c in sol[Q1].cells if c.metadata.get("nbgrader", {}).get("grade_id") == "q1_functions")
        + SLOW_CHAIN))
    # the sandbox's limits, then an honest student graded after them
    for n in NOTEBOOKS:
        nb = solution(n)
        if n in SANDBOX_ATTACKS:
            at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("solution")) + 1
            nb.cells.insert(at, nbformat.v4.new_code_cell(
                SANDBOX_ATTACKS[n].replace("HOST_PORT", str(host_port))))
        put("x_sandbox", n, nb)
        put("zz_after_the_attacks", n, sol[n])
    return made


@pytest.fixture(scope="module")
def graded(request):
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    course = Path(tempfile.mkdtemp(prefix="assignment-", dir=ROOT / "test-artifacts"))
    elsewhere = Path(tempfile.mkdtemp(prefix="course-copy-", dir="/var/tmp"))  # another copy on the machine
    os.chmod(course, 0o755)
    for item in ("nbgrader_config.py", "instructor", "solutions"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, course / item)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, elsewhere / item)
    os.chmod(elsewhere, 0o755)
    timings = {}
    start = time.time()
    gen = _run([sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"], course)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    timings["generate_assignment"] = time.time() - start
    sandboxed, why = probe_sandbox(course)
    assert sandboxed, (f"the grading sandbox does not work here ({why}); install bubblewrap (apt-get install "
                       "bubblewrap)")
    host = socket.socket()  # a port on the host that x_sandbox tries to see and reach
    host.bind(("127.0.0.1", 0))
    host.listen()
    students = _make_submissions(course, elsewhere, host.getsockname()[1])
    start = time.time()
    # one student at a time: the 10 s cell limit is sized for that on a loaded machine (a copied library
    # cell timed out with two jobs); parallel grading runs in tests/test_class_pipeline.py (20 s limit)
    auto = _run([sys.executable, "-m", "instructor.autograde", "--jobs", "1", f"--Execute.timeout={TIMEOUT}",
                 "--SandboxedExecute.interrupt_grace=3"], course)
    timings["autograde"] = time.time() - start
    host.close()
    start = time.time()
    fb = _run([sys.executable, "-m", "nbgrader", "generate_feedback", ASSIGNMENT, "--force"], course)
    timings["generate_feedback"] = time.time() - start
    grades = _run([sys.executable, "-m", "instructor.export_grades"], course)
    assert grades.returncode == 0, grades.stdout + grades.stderr
    report = json.loads((course / "grades" / ASSIGNMENT / "report.json").read_text())
    for name, seconds in timings.items():
        _say(request, f"assignment pipeline: {name} {seconds:.1f} s ({len(students)} students)")
    yield {
        "course": course, "elsewhere": elsewhere, "students": students, "auto": auto, "feedback": fb, "report": report,
        "grades": {r["student_id"]: r for r in csv.DictReader((course / "grades" / ASSIGNMENT / "grades.csv").open())},
    }
    shutil.rmtree(course, ignore_errors=True)
    shutil.rmtree(elsewhere, ignore_errors=True)


def _student(graded, name):
    return graded["report"]["students"][name]


def _failed(res, notebook: str) -> dict[str, list[str]]:
    return {v["grade_id"]: v["reasons"] for v in res["verdicts"].get(notebook, []) if not v["passed"]}


# ------------------------------------------------------------------------------------ release


def test_committed_release_matches_a_fresh_generation(graded):
    assert not stale_releases(graded["course"], ASSIGNMENT, NOTEBOOKS)


def test_release_has_no_solutions_or_jupytext():
    for n in NOTEBOOKS:
        text = (ROOT / "exercises" / ASSIGNMENT / f"{n}.ipynb").read_text()
        source = (ROOT / "solutions" / ASSIGNMENT / f"{n}.ipynb").read_text()
        assert "BEGIN SOLUTION" in source and "BEGIN SOLUTION" not in text
        assert "jupytext" not in text
        for cell in _read(ROOT / "exercises" / ASSIGNMENT / f"{n}.ipynb").cells:
            assert cell.cell_type == "markdown" or not cell.outputs, f"{n}: outputs in the release"


def test_points_are_ten_per_question():
    for n in NOTEBOOKS:
        nb = _read(ROOT / "solutions" / ASSIGNMENT / f"{n}.ipynb")
        total = sum(c.metadata["nbgrader"].get("points", 0) for c in nb.cells
                    if c.metadata.get("nbgrader", {}).get("grade"))
        assert total == 10, n


def test_release_fails_validate_and_solutions_pass(graded):
    course = graded["course"]
    for folder, should_pass in (("solutions", True), ("exercises", False)):
        paths = [str(course / folder / ASSIGNMENT / f"{n}.ipynb") for n in NOTEBOOKS]
        out = _run([sys.executable, "-m", "nbgrader", "validate", *paths], course)
        text = out.stdout + out.stderr
        passed = text.count("Success! Your notebook passes all the tests.")
        assert passed == (len(NOTEBOOKS) if should_pass else 0), text[-3000:]


# ------------------------------------------------------------------------------------ honest students


def test_autograde_report_progress_and_timing(graded, request):
    auto = graded["auto"]
    assert auto.returncode == 0, auto.stdout[-3000:] + auto.stderr[-3000:]
    students = graded["students"]
    numbers = []  # one line per student, numbered in the order they finish (parallel jobs)
    for student in sorted(students):
        match = re.search(rf"^\[(\d+)/{len(students)}\] {student}: ", auto.stdout, re.M)
        assert match, student
        numbers.append(int(match.group(1)))
    assert sorted(numbers) == list(range(1, len(students) + 1))
    seconds = [sec for name, res in graded["report"]["students"].items() if not name.startswith(("frank", "x_search"))
               for sec in res["seconds"].values()]
    seconds.sort()
    median = seconds[len(seconds) // 2]
    _say(request, f"autograde seconds per notebook: median {median:.2f}, max {seconds[-1]:.2f} (n={len(seconds)}, "
                  "loaded machine)")
    assert graded["report"]["sandbox"].startswith("bubblewrap")


def test_solutions_earn_every_autograded_point(graded):
    for name in ("alice_solutions", "a0_messy_cells"):
        res = _student(graded, name)
        assert res["code_score"] == res["max_code_score"] == 46, (name, res["verdicts"])
    alice = _student(graded, "alice_solutions")
    assert alice["status"] == "manual" and alice["flags"] == [] and alice["problems"] == []
    assert graded["grades"]["alice_solutions"]["status"] == "manual"  # Q1d/Q5b written answers pending


def test_messy_cells_are_repaired_and_reported(graded):
    res = _student(graded, "a0_messy_cells")
    text = " | ".join(res["problems"])
    assert "second copy of cell q1_test_probability" in text
    assert "q2_test_pair_one was missing: put back" in text
    assert "cell id 'my_tests' is not in the assignment" in text and "q3_test_grpo was missing" in text
    assert "broken nbgrader metadata" in text
    assert res["status"] == "review"


def test_untouched_release_earns_zero_and_feedback_says_why(graded):
    res = _student(graded, "bob_untouched")
    assert res["status"] == "review" and res["max_code_score"] == 46 and res["code_score"] == 0
    unanswered = [p.split(".ipynb")[0] for p in res["problems"] if "nothing answered" in p]
    assert unanswered == NOTEBOOKS, res["problems"]  # (Q5's id typed in is not an answer)
    page = graded["course"] / "feedback" / "bob_untouched" / ASSIGNMENT / f"{Q1}.html"
    text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
    assert "raised NotImplementedError" in text and "checks failed" in text


def test_a_failing_submission_never_sinks_the_batch(graded):
    report = graded["report"]["students"]
    assert set(report) == set(graded["students"])
    assert all(r["status"] != "FAILED" for r in report.values()), {s: r["problems"] for s, r in report.items()
                                                                  if r["status"] == "FAILED"}


def test_loops_a_dead_kernel_and_a_broken_file_cost_only_what_they_touch(graded):
    frank = _student(graded, "frank_robustness")
    scores = {n: frank["notebooks"][n]["code_score"] for n in NOTEBOOKS}
    # Q1: the loop sits in the cell defining bt_matrix and chain_win_rate: the 6 points needing
    # them are lost, pairwise_loss (its own cell, 2 points) still counts. Q2: os._exit in the
    # answers cell costs its 3 points. Q3: the swallowed interrupt costs the last cell (1 point).
    # Q4 is not JSON. Q5 is correct.
    assert scores == {Q1: 2, "q2_dpo_margins": 7, "q3_group_baselines": 9, "q4_budgets": 0, "q5_passport": 8}
    problems = " | ".join(frank["problems"])
    assert "q4_budgets.ipynb is not a notebook (not JSON" in problems
    assert "kernel died in cell q2_answers" in problems
    assert "cell q3_aggregation ignored the interrupt" in problems
    assert "not run" in _failed(frank, "q2_dpo_margins")["q2_test_answers"][0]
    assert "not run" in _failed(frank, "q3_group_baselines")["q3_test_aggregation"][0]
    assert "time limit" in " ".join(_failed(frank, Q1)["q1_test_probability"]) or \
        "raised" in " ".join(_failed(frank, Q1)["q1_test_probability"])


def test_incremental_grading_keeps_hand_grades(graded):
    from nbgrader.api import Gradebook

    course = graded["course"]
    db = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(db) as gb:
        grade = gb.find_grade("q1_unit_answer", Q1, ASSIGNMENT, "alice_solutions")
        grade.manual_score = 2
        grade.needs_manual_grade = False
        comment = gb.find_comment("q1_unit_answer", Q1, ASSIGNMENT, "alice_solutions")
        comment.manual_comment = "Clear and right."
        gb.db.commit()
    _write(_read(course / "solutions" / ASSIGNMENT / "q2_dpo_margins.ipynb"),
           course / "submitted" / "zoe_late" / ASSIGNMENT / "q2_dpo_margins.ipynb")
    late = _run([sys.executable, "-m", "instructor.autograde"], course)
    assert late.returncode == 0, late.stdout[-2000:] + late.stderr[-2000:]
    assert f"1 of {len(graded['students']) + 1} students to grade" in late.stdout
    assert re.search(r"^\[1/1\] zoe_late: review, 10/46 autograded", late.stdout, re.M), late.stdout[-2000:]
    again = _run([sys.executable, "-m", "instructor.autograde", "--student", "alice_solutions"], course)
    assert again.returncode == 0 and "[1/1] alice_solutions" in again.stdout
    with Gradebook(db) as gb:
        grade = gb.find_grade("q1_unit_answer", Q1, ASSIGNMENT, "alice_solutions")
        assert grade.manual_score == 2 and not grade.needs_manual_grade
        assert gb.find_comment("q1_unit_answer", Q1, ASSIGNMENT,
                               "alice_solutions").manual_comment == "Clear and right."
        assert gb.find_submission(ASSIGNMENT, "bob_untouched").code_score == 0  # untouched by the reruns


def test_statuses_are_one_set_across_report_grades_and_the_instructors_guide(graded):
    guide = (ROOT / "docs" / "instructors.md").read_text()
    assert set(graded["report"]["statuses"]) == set(STATUSES) == {"ok", "manual", "review", "FAILED", "missing"}
    for name in STATUSES:
        assert f"`{name}`" in guide
    assert {r["status"] for r in graded["grades"].values()} <= set(STATUSES)
    assert {r["status"] for r in graded["report"]["students"].values()} <= set(STATUSES)


# ------------------------------------------------------------------------------------ attacks


def test_visible_numbers_pass_validate_but_earn_zero(graded):
    course = graded["course"]
    path = course / "submitted" / "kim_visible_numbers" / ASSIGNMENT / f"{Q1}.ipynb"
    out = _run([sys.executable, "-m", "nbgrader", "validate", str(path)], course)
    assert "Success! Your notebook passes all the tests." in out.stdout, out.stdout[-2000:]
    assert _student(graded, "kim_visible_numbers")["code_score"] == 0


@pytest.mark.parametrize("attack", ["carol_assert_true", "x_shadowing", "x_star_import", "x_transformers",
                                    "x_spy", "x_search"])
def test_no_answer_no_points(graded, attack):
    res = _student(graded, attack)
    assert res["status"] != "FAILED" and res["code_score"] == 0, res["verdicts"]


def test_rewritten_and_forged_test_cells_score_zero_with_a_reason(graded):
    res = _student(graded, "x_transformers")
    for notebook, attack in zip(NOTEBOOKS, TRANSFORMERS):
        failed = _failed(res, notebook)
        tests = [c.metadata.nbgrader["grade_id"]
                 for c in _read(ROOT / "solutions" / ASSIGNMENT / f"{notebook}.ipynb").cells
                 if is_test_cell(c)]
        assert set(failed) == set(tests), (attack, failed)
        reason = "hidden test" if attack == "forged_record" else "no grading record"
        assert all(reason in " ".join(reasons) for reasons in failed.values()), (attack, failed)


def test_answers_that_call_the_course_library_earn_nothing_and_are_flagged(graded):
    """Wrapping the closest course_lib function earns nothing even where it can be imported
    (tests/test_assignment_tools.py); graded, the sandbox cannot import it, and the report names the use."""
    res = _student(graded, "x_course_lib")
    assert res["status"] == "review" and res["code_score"] <= 0.1 * res["max_code_score"], res["verdicts"]
    assert res["max_code_score"] == 46
    library_flags = [f for f in res["flags"] if "course library" in f]
    uses = sum(bool(re.search(r"^(from|import) course_lib", code, re.M))
               for cells in library_submission("calls").values() for code in cells.values())
    assert uses >= 4 and len(library_flags) >= uses, res["flags"]
    report = (graded["course"] / "grades" / ASSIGNMENT / "report.md").read_text()
    assert "x_course_lib" in report and "imports the course library" in report


def test_answers_that_copy_the_course_library_earn_at_most_a_tenth(graded, request):
    """The library's own source pasted and renamed (nothing names course_lib, the sandbox runs it):
    the questions ask for what it does not compute, so it earns <= 10% of the autograded points."""
    res = _student(graded, "x_copied_course_lib")
    assert res["status"] != "FAILED" and res["max_code_score"] == 46
    _say(request, f"copied course_lib source: {res['code_score']}/{res['max_code_score']} autograded points")
    assert res["code_score"] <= 0.1 * res["max_code_score"], res["verdicts"]
    reasons = " ".join(r for verdicts in res["verdicts"].values() for v in verdicts for r in v["reasons"])
    assert "time limit" not in reasons and "no grading record" not in reasons, reasons[:3000]  # it ran, and failed
    assert not [f for f in res["flags"] if "course library" in f], res["flags"]


def test_tampering_is_flagged_for_review(graded):
    for student in ("x_shadowing", "x_star_import", "x_transformers"):
        assert _student(graded, student)["flags"], student
        assert graded["grades"][student]["status"] == "review"
    carol = _student(graded, "carol_assert_true")  # test cells edited to `assert True`: the release's ran
    assert carol["status"] == "review" and sum("tampering: locked cell" in p for p in carol["problems"]) >= 4


def test_the_array_hole_is_closed(graded):
    """Arrays rewritten to no values in flight, or a NumPy-looking subclass encoding as nothing:
    bt_matrix's cell (array and bad-input checks only) scores 0, and the scan says why."""
    for student, flag in (("x_array_rewrite", "`__setattr__`"), ("x_array_subclass", "claiming a `__module__`")):
        res = _student(graded, student)
        assert res["code_score"] == 0 and res["status"] == "review", res["verdicts"]
        reasons = " ".join(_failed(res, Q1)["q1_test_probability"])
        assert (("malformed array" in reasons) if student == "x_array_rewrite"
                else ("should be a NumPy array" in reasons))
        assert any(flag in f for f in res["flags"]), res["flags"]
    assert any("imports from `ipykernel.zmqshell`" in f for f in _student(graded, "x_array_rewrite")["flags"])


def test_numbers_copied_from_a_friend_miss_this_students_variant(graded):
    """1c's given cell holds each student's own numbers when graded: alice's computed answers
    follow hers (46/46 above), numbers typed in from the released cell earn nothing."""
    from instructor.grading import given_cells

    res = _student(graded, "x_friends_numbers")
    assert (res["notebooks"][Q1]["code_score"] == 8 - 2
            and set(_failed(res, Q1)) == {"q1_test_answers"}), res["verdicts"]
    for student in ("x_friends_numbers", "alice_solutions"):
        nb = _read(graded["course"] / "autograded" / student / ASSIGNMENT / f"{Q1}.ipynb")
        shown = next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "q1_given")
        assert shown == given_cells(ASSIGNMENT, student)["q1_given"]  # recorded, and the same on a regrade


def test_a_timed_out_test_cell_scores_zero_and_asks_no_hand_grade(graded):
    from nbgrader.api import Gradebook

    res = _student(graded, "x_slow_test")
    assert res["notebooks"][Q1]["code_score"] == 8 - 2, res["verdicts"]  # only the chain's 2 points are lost
    assert _failed(res, Q1) == {"q1_test_chain": ["stopped by the time limit while the tests ran"]}
    with Gradebook(f"sqlite:///{graded['course'] / 'gradebook.db'}") as gb:
        grade = gb.find_grade("q1_test_chain", Q1, ASSIGNMENT, "x_slow_test")
        assert grade.auto_score == 0 and not grade.needs_manual_grade
    page = graded["course"] / "feedback" / "x_slow_test" / ASSIGNMENT / f"{Q1}.html"
    text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
    assert "stopped by the time limit" in text and "chain_win_rate([0.75, 0.75])" in text


def _printed(graded, student: str, notebook: str, marker: str) -> str:
    nb = _read(graded["course"] / "autograded" / student / ASSIGNMENT / f"{notebook}.ipynb")
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                   if o.output_type == "stream")
    assert marker in text, f"{notebook}: {text[-500:]}"
    return text.split(marker + " ", 1)[1].splitlines()[0]


def test_sandbox_limits_contain_each_attack_and_cost_nothing_else(graded):
    res = _student(graded, "x_sandbox")
    assert res["code_score"] == res["max_code_score"] == 46, res["verdicts"]
    net = json.loads(_printed(graded, "x_sandbox", Q1, "NET"))
    assert net["host_port_listed"] is False and net["reached_host"] is False and net["own_port"] > 0
    written, error = _printed(graded, "x_sandbox", "q2_dpo_margins", "DISK").split()
    assert error == "ENOSPC" and 100 * 2**20 <= int(written) <= 200 * 2**20  # the tmpfs's 200 MB
    children, error = _printed(graded, "x_sandbox", "q4_budgets", "FORK").split()
    assert error == "BlockingIOError" and 0 < int(children) < 64
    flood = graded["course"] / "autograded" / "x_sandbox" / ASSIGNMENT / "q3_group_baselines.ipynb"
    assert flood.stat().st_size < 3_000_000 and "output stopped" in flood.read_text()
    after = _student(graded, "zz_after_the_attacks")
    assert after["code_score"] == 46 and after["status"] in ("ok", "manual"), after


def _search_result(printed: str) -> dict:
    return json.loads(printed.split("SEARCH ", 1)[1].splitlines()[0])


def test_sandbox_hides_the_course_from_a_submission(graded):
    """The submission read known places and walked what it could in its cell's time limit."""
    nb = _read(graded["course"] / "autograded" / "x_search" / ASSIGNMENT / f"{Q1}.ipynb")
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "q1_functions")
    printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    assert "SEARCH" in printed, cell.outputs
    found = _search_result(printed)
    assert not any(v for k, v in found.items() if k not in ("done", "files")), found


def test_sandbox_walk_of_the_whole_filesystem_finds_no_course(graded, tmp_path):
    """The same sandbox as the kernel's (``sandbox_kernel.run``: bubblewrap, limits, seccomp filter), with a
    longer wall-clock limit: every file it can see, checked."""
    from instructor import sandbox_kernel

    course, elsewhere = graded["course"], graded["elsewhere"]
    code = SEARCH.format(targets=[str(course / "solutions" / ASSIGNMENT / f"{Q1}.ipynb"),
                                  str(elsewhere / "solutions" / ASSIGNMENT / f"{Q1}.ipynb"),
                                  str(course / "gradebook.db")], budget=10_000)
    out = sandbox_kernel.run([sys.executable, "-c", code], timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    found = _search_result(out.stdout)
    assert found["done"] and found["files"] > 1000, found  # it did look at the Python environment
    assert not any(v for k, v in found.items() if k not in ("done", "files")), found
    # and outside the sandbox, the same walk does find the copies (the test can fail)
    bare = subprocess.run([sys.executable, "-c", code.replace('os.walk("/")', f'os.walk({str(elsewhere)!r})')],
                          capture_output=True, text=True, timeout=300)
    assert _search_result(bare.stdout)["solutions"] == [str(elsewhere)]


def test_feedback_never_shows_hidden_inputs_or_probes(graded):
    course = graded["course"]
    assert graded["feedback"].returncode == 0, graded["feedback"].stderr[-2000:]
    pages = sorted((course / "feedback").glob(f"*/{ASSIGNMENT}/*.html"))
    assert len(pages) >= 2 * len(NOTEBOOKS)
    for page in pages:
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
        assert "Grading probe" not in text and "_course_probe(" not in text, page  # no probe source
    spied = _read(course / "autograded" / "x_spy" / ASSIGNMENT / f"{Q1}.ipynb")
    printed = "".join(o.get("text", "") for c in spied.cells if c.cell_type == "code" for o in c.outputs
                      if o.output_type == "stream")
    values = re.findall(r"-?\d+\.\d{6,}", printed.split("SPIED", 1)[1])
    assert values, printed  # the spy did capture hidden inputs in the kernel ...
    feedback = (course / "feedback" / "x_spy" / ASSIGNMENT / f"{Q1}.html").read_text()
    assert not any(v in feedback for v in values)  # ... and none reaches the student


# ------------------------------------------------------------------------------------ lab set-ups


def _serve(config: str, tmp: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = _env()
    env["JUPYTER_CONFIG_DIR"] = str(ROOT / "instructor" / "lab_config" / config)
    env["JUPYTER_RUNTIME_DIR"] = str(tmp / "runtime")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(tmp / "workspaces")
    log = open(tmp / f"{config}.log", "w")
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ServerApp.token=t",
           "--ServerApp.ip=127.0.0.1", f"--notebook-dir={ROOT}", *(["--allow-root"] if os.geteuid() == 0 else [])]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{base}/api/status?token=t", timeout=2)
            return proc, base
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise AssertionError((tmp / f"{config}.log").read_text()[-2000:])


def _get(url: str) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": "token t"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""


@pytest.mark.parametrize("config, instructor_tools", [("student", False), ("formgrader", True)])
def test_students_lab_has_no_instructor_tools_and_formgrader_logs_no_critical(tmp_path, config, instructor_tools):
    proc, base = _serve(config, tmp_path)
    try:
        status, page = _get(f"{base}/lab")
        assert status == 200
        data = json.loads(re.search(r'id="jupyter-config-data"[^>]*>(.*?)</script>', page, re.S).group(1))
        listed = data.get("disabledExtensions", [])  # a list in the page, a dict in page_config.json
        disabled = {k for k, v in listed.items() if v} if isinstance(listed, dict) else set(listed)
        for plugin in ("formgrader", "create-assignment"):
            assert (f"@jupyter/nbgrader:{plugin}" in disabled) != instructor_tools, disabled
        assert "@jupyter/nbgrader:validate-assignment" not in disabled
        status, page = _get(f"{base}/formgrader")
        assert (status == 200 and "formgrader" in page.lower()) == instructor_tools, status
    finally:  # the shutdown API: a SIGTERM is logged as CRITICAL ("received signal 15")
        urllib.request.urlopen(urllib.request.Request(f"{base}/api/shutdown", method="POST",
                                                      headers={"Authorization": "token t"}), timeout=60)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
    log = (tmp_path / f"{config}.log").read_text()
    assert "CRITICAL" not in log and "Unwritable directory" not in log, log[-3000:]
