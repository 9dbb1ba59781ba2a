"""The systems assignment ``systems14`` (Q6–Q8) end to end: the real nbgrader pipeline on a small class.

One module-scoped run (a scratch course under test-artifacts/, tests/grading_course.py) releases the
assignment, autogrades every fake student with `python -m instructor.autograde` (sandboxed, as for
module14), regrades one of them, and the tests assert per student. The attacks are module14's
(tests/test_assignment.py: shadowed builtins, a star import, patched NumPy, every IPython transformer,
a forged record, test cells edited or deleted; tests/array_hole.py: records rewritten in flight), the
library-only submissions of tests/copied_answers.py, and two of this assignment's own: NumPy, torch and
pytest's comparisons patched, and the solution's functions returning lying objects (whose ``__eq__``,
``__float__``, ``__len__``, ``__iter__`` or ``__getitem__`` lie) and lying answers (in Q7 the true
results, every container of every record emptied in flight). Aimed at this assignment's cells,
whatever they do, they earn nothing (the library-only ones at most 10%).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from array_hole import REWRITE, SUBCLASS
from conftest import ROOT
from copied_answers import submission as library_submission
from grading_course import grading_env, released_course, stale_releases
from test_assignment import SHADOWING, TRANSFORMERS

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from instructor import grading  # noqa: E402
from instructor.nbgrader_hooks import is_test_cell  # noqa: E402

pytestmark = pytest.mark.slow

ASSIGNMENT = "systems14"
NOTEBOOKS = ["q6_stale_rollouts", "q7_episodes", "q8_judge_audit"]
ANSWER_CELLS = {"q6_stale_rollouts": "q6_answers", "q7_episodes": "q7_answers", "q8_judge_audit": "q8_answers"}
FIRST_FUNCTIONS = {"q6_stale_rollouts": "q6_versions_function", "q7_episodes": "q7_functions",
                   "q8_judge_audit": "q8_functions"}
TIMEOUT = 20

# every comparison helper a test could lean on, patched to say "equal" (NumPy, torch, pytest, math)
PATCHED_LIBS = """
import math, numpy, pytest, torch
class _Same:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = object.__hash__
numpy.isclose = numpy.allclose = numpy.array_equal = lambda *a, **k: True
numpy.testing.assert_allclose = numpy.testing.assert_array_equal = lambda *a, **k: None
torch.allclose = torch.equal = torch.isclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
pytest.approx = lambda *a, **k: _Same()
math.isclose = lambda *a, **k: True
"""

# `__import__` shadowed, the one name the probe looks up in the notebook's globals: the probe's own exec is
# hijacked, and what it publishes instead is a record with the right nonce and guessed results
HIJACK = """
import builtins as _builtins
class _Hijack:
    def __getattr__(self, name):
        return getattr(_builtins, name)
    def exec(self, program, namespace):
        from IPython.display import publish_display_data
        plan = namespace["PLAN"]
        publish_display_data({plan["mime"]: {"nonce": plan["nonce"], "grade_id": plan["grade_id"],
                                             "results": [{"t": "float", "v": 0.5} for _ in plan["calls"]]}})
def __import__(name, *args, **kwargs):
    return _Hijack() if name == "builtins" else _builtins.__import__(name, *args, **kwargs)
"""

# Objects that lie to whoever looks at them (every comparison says equal, float() and len() give what
# a check might want, iteration and indexing give made-up items), as subclasses of the answer types, a
# NumPy scalar subclass registered among NumPy's types, and tests/array_hole.py's NumPy-looking array.
LIARS = SUBCLASS + """
import itertools
class _Lie:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __lt__(self, other):
        return False
    __gt__ = __le__ = __ge__ = __lt__
    __hash__ = object.__hash__
    def __float__(self):
        return 0.5
    def __int__(self):
        return 1
    __index__ = __int__
    def __bool__(self):
        return True
    def __len__(self):
        return 3
    def __iter__(self):
        return iter([0.5, 0.5, 0.5])
    def __getitem__(self, key):
        return 0.5
    def __contains__(self, key):
        return True
    def __abs__(self):
        return 0.0
    def __sub__(self, other):
        return 0.0
    __rsub__ = __add__ = __radd__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = __sub__
    def keys(self):
        return ["a", "b"]
    def items(self):
        return iter([])
    def __repr__(self):
        return "0.5"
class _LieList(_Lie, list): pass
class _LieTuple(_Lie, tuple): pass
class _LieDict(_Lie, dict): pass
class _LieFloat(_Lie, float): pass
class _LieInt(_Lie, int): pass
class _LieStr(_Lie, str): pass
class _LieScalar(_np.float64):
    __module__ = "numpy"
    def __float__(self):
        return 0.5
    def __eq__(self, other):
        return True
    __hash__ = _np.float64.__hash__
_np.sctypeDict["lie"] = _LieScalar
_LIARS = itertools.cycle([_Lie(), _LieList([0.5]), _LieTuple((0.5,)), _LieDict(a=0.5), _LieFloat(0.5), _LieInt(1),
                          _LieStr("yes"), _LieScalar(0.5), as_fake(_np.zeros(3))])
_depth, _HONEST = [0], False
def _lying(f):
    def lie(*args, **kwargs):
        _depth[0] += 1
        try:
            out = f(*args, **kwargs)  # bad input still raises, as the reference does
        finally:
            _depth[0] -= 1
        return out if _depth[0] or _HONEST else next(_LIARS)  # the truth only to one of these functions
    lie._lies = True
    return lie
"""
# tests/array_hole.py's rewrite in flight, widened to this assignment's answers: every list, tuple, set,
# dict and array of every record loses its items (an empty answer must not match a full one)
EMPTIED = REWRITE.replace('x.get("t") == "array"', 'x.get("t") in ("array", "list", "tuple", "set", "dict")')
assert EMPTIED != REWRITE
# appended to every cell that defines functions: each one now lies (after validating its input)
LIE_WRAP = """
for _name, _f in list(globals().items()):
    if callable(_f) and getattr(_f, "__module__", None) == __name__ and not _name.startswith("_") \\
            and not isinstance(_f, type) and not getattr(_f, "_lies", False):
        globals()[_name] = _lying(_f)
"""
AUTOGRADED = 30  # 10 per notebook; Q6's systems passport (3) is graded by hand


def _read(path: Path):
    return nbformat.read(str(path), as_version=4)


def _cell(nb, grade_id: str):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _released_answers(notebook: str) -> str:
    """The answer cell with the numbers the released given cell gives, typed in (a friend's numbers)."""
    reference = grading.reference_namespace(ROOT / "solutions" / ASSIGNMENT / f"{notebook}.ipynb")
    names = [line.split("=")[0].strip() for line in _cell(_read(ROOT / "solutions" / ASSIGNMENT / f"{notebook}.ipynb"),
                                                                 ANSWER_CELLS[notebook]).source.splitlines()
             if line and line[0].isalpha() and "=" in line and not line.startswith(("def ", "###"))]
    out = []
    for name in dict.fromkeys(n for part in names for n in part.split(", ")):
        out.append(f"{name} = {reference[name]!r}")
    return "\n".join(out) + "\n"


def _make_submissions(course: Path) -> list[str]:
    sol = {n: _read(course / "solutions" / ASSIGNMENT / f"{n}.ipynb") for n in NOTEBOOKS}
    rel = {n: _read(course / "exercises" / ASSIGNMENT / f"{n}.ipynb") for n in NOTEBOOKS}
    made = set()

    def put(student, name, nb):
        path = course / "submitted" / student / ASSIGNMENT / f"{name}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(path))
        made.add(student)

    for n in NOTEBOOKS:
        put("alice_solutions", n, sol[n])
        put("bob_untouched", n, rel[n])
        # tests edited to `assert True` (Q6), and (another student) deleted (Q7), around the release's answers
        edited, deleted = copy.deepcopy(rel[n]), copy.deepcopy(rel[n])
        for cell in edited.cells:
            if is_test_cell(cell):
                cell.source = "assert True"
        deleted.cells = [c for c in deleted.cells if not is_test_cell(c)]
        if n != "q8_judge_audit":  # two notebooks each are enough to show it (and cheaper to grade)
            put("carol_assert_true" if n == "q6_stale_rollouts" else "x_deleted_tests", n,
                edited if n == "q6_stale_rollouts" else deleted)
        # the solution's functions, the answers typed in from the released numbers (a friend's)
        friend = copy.deepcopy(sol[n])
        _cell(friend, ANSWER_CELLS[n]).source = _released_answers(n)
        put("x_friends_numbers", n, friend)
    # tampering: shadowed builtins and a patched NumPy (Q6), a transformer that blanks every later cell
    # (Q7), one that forges the grading record (Q8), each ahead of the release's answers
    attacks = {"q6_stale_rollouts": "".join(code for name, code in SHADOWING.items() if name != "star_import"),
               "q7_episodes": TRANSFORMERS["transformer_get_ipython"], "q8_judge_audit": TRANSFORMERS["forged_record"]}
    for n, code in attacks.items():
        nb = copy.deepcopy(rel[n])
        cell = _cell(nb, FIRST_FUNCTIONS[n])
        cell.source = code + cell.source
        put("x_tampering", n, nb)
    # the library called (the sandbox cannot import it) or pasted and renamed (Q6 only: pasting imports torch in
    # the kernel, which is slow; tests/test_assignment_tools.py scores all three outside the sandbox)
    for student, kind in (("x_course_lib", "calls"), ("x_copied_course_lib", "copies")):
        for notebook, cells in library_submission(kind, ASSIGNMENT).items():
            if kind == "copies" and notebook != "q6_stale_rollouts":
                continue
            nb = copy.deepcopy(rel[notebook])
            for grade_id, code in cells.items():
                _cell(nb, grade_id).source = code
            put(student, notebook, nb)
    # NumPy, torch and pytest's comparisons patched (Q6), a star import that shadows builtins and the probe
    # hijacked through `__import__` (Q7), every array rewritten in flight and the comparisons patched (Q8),
    # each ahead of the release's answers
    patched = {"q6_stale_rollouts": PATCHED_LIBS, "q7_episodes": SHADOWING["star_import"] + HIJACK,
               "q8_judge_audit": REWRITE + PATCHED_LIBS}
    # module14's other three transformers that blank every later cell, one per notebook
    transformers = {"q6_stale_rollouts": "transformer_quit_ip", "q7_episodes": "transformer_instance",
                    "q8_judge_audit": "transformer_gc"}
    for n in NOTEBOOKS:
        for student, code in (("x_patched_libs", patched[n]), ("x_transformers", TRANSFORMERS[transformers[n]])):
            nb = copy.deepcopy(rel[n])
            cell = _cell(nb, FIRST_FUNCTIONS[n])
            cell.source = code + cell.source
            put(student, n, nb)
    # the solution's functions, each validating its input and then returning a lying object; lying answers;
    # in Q7 the functions' true results, but every container of every record emptied in flight
    answers = {gid: [c.expr for c in checks]
               for gid, checks in grading.load_checks(ASSIGNMENT, grading.new_rng(0)).items()
               if gid.endswith("_test_answers")}
    for n in NOTEBOOKS:
        nb = copy.deepcopy(sol[n])
        prefix = LIARS + (EMPTIED.replace("def as_fake", "def _as_fake") + "_HONEST = True\n"
                          if n == "q7_episodes" else "")
        _cell(nb, FIRST_FUNCTIONS[n]).source = prefix + _cell(nb, FIRST_FUNCTIONS[n]).source
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                cell.source += "\n" + LIE_WRAP
        names = answers[ANSWER_CELLS[n].replace("_answers", "_test_answers")]
        _cell(nb, ANSWER_CELLS[n]).source = "".join(f"{name} = next(_LIARS)\n" for name in names)
        put("x_lying", n, nb)
    return sorted(made)


def _autograde(course: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "instructor.autograde", "--assignment", ASSIGNMENT, "--jobs", "2",
                           f"--Execute.timeout={TIMEOUT}", *extra], cwd=course, env=grading_env(),
                          capture_output=True, text=True, timeout=1800)


def _report(course: Path) -> dict:
    return json.loads((course / "grades" / ASSIGNMENT / "report.json").read_text())


@pytest.fixture(scope="module")
def graded():
    course = released_course("systems14-", ASSIGNMENT, grading_env())
    students = _make_submissions(course)
    first = _autograde(course)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    report = _report(course)
    regrade = _autograde(course, "--student", "x_friends_numbers", "--all")
    assert regrade.returncode == 0, regrade.stdout[-3000:] + regrade.stderr[-3000:]
    yield {"course": course, "students": students, "report": report, "regraded": _report(course)}
    import shutil

    shutil.rmtree(course, ignore_errors=True)


def _student(graded, name: str) -> dict:
    return graded["report"]["students"][name]


def test_committed_release_matches_a_fresh_generation(graded):
    assert not stale_releases(graded["course"], ASSIGNMENT, NOTEBOOKS)


def test_points_are_ten_per_question_and_the_passport_is_graded_by_hand():
    manual = []
    for n in NOTEBOOKS:
        cells = [c for c in _read(ROOT / "solutions" / ASSIGNMENT / f"{n}.ipynb").cells
                 if c.metadata.get("nbgrader", {}).get("grade")]
        assert sum(c.metadata.nbgrader["points"] for c in cells if is_test_cell(c)) == 10, n
        manual += [c.metadata.nbgrader["grade_id"] for c in cells if c.cell_type == "markdown"]
    assert manual == ["q6_systems_passport"]


def test_solutions_earn_every_autograded_point(graded):
    alice = _student(graded, "alice_solutions")
    assert alice["code_score"] == alice["max_code_score"] == AUTOGRADED, alice["verdicts"]
    assert alice["status"] == "manual" and alice["flags"] == [] and alice["problems"] == []


@pytest.mark.parametrize("student", ["bob_untouched", "carol_assert_true", "x_deleted_tests", "x_tampering",
                                     "x_patched_libs", "x_transformers", "x_lying"])
def test_no_answer_no_points(graded, student):
    res = _student(graded, student)
    assert res["status"] != "FAILED" and res["code_score"] == 0, res["verdicts"]
    assert sum(len(v) for v in res["verdicts"].values()) >= 5, res["verdicts"]  # graded, not skipped


def test_tampering_is_flagged_and_each_attack_is_named(graded):
    res = _student(graded, "x_tampering")
    assert res["flags"] and res["status"] == "review", res
    reasons = {n: " ".join(r for v in res["verdicts"][n] for r in v["reasons"]) for n in NOTEBOOKS}
    assert "no grading record" in reasons["q7_episodes"]  # every later cell blanked
    assert "hidden test" in reasons["q8_judge_audit"]  # the forged record's guesses are wrong


def test_a_hijacked_probe_publishes_guesses_that_earn_nothing(graded):
    """The hijacked probe's records carry the right nonce, so they are read: every check is compared (the
    expected values never reach the kernel) and the guesses fail."""
    verdicts = _student(graded, "x_patched_libs")["verdicts"]["q7_episodes"]
    assert len(verdicts) == 6, verdicts
    for v in verdicts:
        assert not v["passed"] and any(r.startswith("hidden test") or " should give " in r for r in v["reasons"]), v


def test_every_transformer_blanks_the_probes_and_earns_nothing(graded):
    res = _student(graded, "x_transformers")
    assert res["flags"] and res["status"] == "review", res
    for n in NOTEBOOKS:
        assert res["verdicts"][n] and all(not v["passed"] and "no grading record" in v["reasons"][0]
                                          for v in res["verdicts"][n]), (n, res["verdicts"][n])


@pytest.mark.parametrize("student", ["x_patched_libs", "x_transformers", "x_lying"])
def test_each_attack_ran_in_the_sandbox(graded, student):
    """The attacking cell itself ran without an error in the sandboxed kernel (torch and pytest were
    imported and patched, the transformers installed, the liars made): the zeros above are the grader's."""
    for n in NOTEBOOKS:
        nb = _read(graded["course"] / "autograded" / student / ASSIGNMENT / f"{n}.ipynb")
        outputs = _cell(nb, FIRST_FUNCTIONS[n]).outputs
        assert not [o for o in outputs if o.output_type == "error"], (n, outputs)


def test_lying_objects_are_read_as_data_and_every_cell_fails(graded):
    """The probe ran (a record for every cell) and read each lie for what it is: not a number, list or
    dict of the answer's type, so no test cell that checks a value passes (every cell here does)."""
    res = _student(graded, "x_lying")
    cells = {c.metadata.nbgrader["grade_id"] for n in NOTEBOOKS
             for c in _read(ROOT / "solutions" / ASSIGNMENT / f"{n}.ipynb").cells if is_test_cell(c)}
    verdicts = {v["grade_id"]: v for n in NOTEBOOKS for v in res["verdicts"][n]}
    assert set(verdicts) == cells, verdicts
    for v in verdicts.values():
        assert not v["passed"] and any(r.startswith("hidden test") or " should give " in r for r in v["reasons"]), v
    assert res["code_score"] == 0
    emptied = " ".join(r for v in res["verdicts"]["q7_episodes"] for r in v["reasons"])
    assert "wrong number of items" in emptied, emptied  # Q7's true results, emptied in flight


def test_answers_from_the_course_library_earn_at_most_a_tenth(graded):
    calls, copies = _student(graded, "x_course_lib"), _student(graded, "x_copied_course_lib")
    for res in (calls, copies):
        assert res["status"] != "FAILED" and res["code_score"] <= 0.1 * AUTOGRADED, res["verdicts"]
    assert calls["max_code_score"] == AUTOGRADED
    assert any("course library" in f for f in calls["flags"]), calls["flags"]


def test_numbers_copied_from_a_friend_miss_this_students_variant_and_a_regrade_reproduces(graded):
    """The answers typed in from the released numbers lose exactly the three answer cells (2 points each):
    the grader put this student's own numbers into the given cells. A regrade reuses the stored seeds and
    draws the same variant, so it gives the same verdicts."""
    res = _student(graded, "x_friends_numbers")
    failed = {v["grade_id"] for n in NOTEBOOKS for v in res["verdicts"][n] if not v["passed"]}
    assert failed == {"q6_test_answers", "q7_test_answers", "q8_test_answers"}, res["verdicts"]
    assert res["code_score"] == AUTOGRADED - 6
    again = graded["regraded"]["students"]["x_friends_numbers"]
    assert again["seeds"] == res["seeds"] and again["verdicts"] == res["verdicts"]
    nb = _read(graded["course"] / "autograded" / "x_friends_numbers" / ASSIGNMENT / "q7_episodes.ipynb")
    assert _cell(nb, "q7_given").source == grading.given_cells(ASSIGNMENT, "x_friends_numbers")["q7_given"]


def _rounded_uniform_collision(low: float, high: float, decimals: int) -> float:
    """Exactly P(X = Y) for X, Y independent, each round(U(low, high), decimals)."""
    step = 10.0**-decimals
    total = 0.0
    for k in range(round(low / step), round(high / step) + 1):
        width = min(high, (k + 0.5) * step) - max(low, (k - 0.5) * step)
        total += (max(width, 0.0) / (high - low)) ** 2
    return total


def test_two_students_share_a_variant_with_probability_below_one_percent():
    """The given cells are drawn per student (instructor/checks/systems14.py, GIVEN). Two random students
    share a notebook's whole cell with at most the probability of sharing a few of its independent
    draws, computed exactly here: Q6 the lag (5 values), the run length (8) and clip_max (4); Q7 the
    group's prompt a+b (80 × 80 pairs) and its size (3); Q8 the bias after the change on the first three
    seeds (each round(U(-0.08, 0.12), 3)). Answers follow the whole cell: 8 students' answers all differ."""
    q6 = 1 / 5 * 1 / 8 * 1 / 4
    q7 = 1 / 80**2 * 1 / 3
    q8 = _rounded_uniform_collision(-0.08, 0.12, 3) ** 3
    for p in (q6, q7, q8):
        assert p < 0.01, (q6, q7, q8)
    answers = {"q6_stale_rollouts": ("versions", "token_weights", "sequence_weights", "stats", "hot_kl", "gains",
                                     "median_gain", "beyond_spread"),
               "q7_episodes": ("strict", "loose", "exploits", "rates", "adv_outcome", "adv_steps", "sign_changes"),
               "q8_judge_audit": ("audit", "removed")}
    for notebook, names in answers.items():
        seen = set()
        for i in range(8):
            reference = grading.reference_namespace(ROOT / "solutions" / ASSIGNMENT / f"{notebook}.ipynb",
                                                    grading.given_cells(ASSIGNMENT, f"student{i}"))
            seen.add(repr([reference[name] for name in names]))
        assert len(seen) == 8, notebook
