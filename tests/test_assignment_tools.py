"""Fast checks of the instructor tools (no kernels, no nbgrader runs): the verdict mechanism
(codec, comparisons, records, the probe in an in-process IPython shell), the assignment's checks
against the solutions, the submission rebuild, the static scan, the feedback filter and the log
parser. The real pipeline runs in tests/test_assignment.py.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys

import nbformat
import numpy as np
import pytest
from conftest import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from course_lib.run.kernel_codec import decode, encode, raised  # noqa: E402
from instructor import grading  # noqa: E402
from instructor.grading import MIME, Plan, check, compare, decide  # noqa: E402
from instructor.nbgrader_hooks import FeedbackFilter, is_test_cell  # noqa: E402
from instructor.scan import scan_notebook, source_facts  # noqa: E402
from instructor.submission import rebuild  # noqa: E402

ASSIGNMENT = "module14"
ASSIGNMENTS = ("module14", "systems14")  # the graded assignments whose checks these tests hold to one standard
SOURCE = ROOT / "solutions" / ASSIGNMENT / "q1_bradley_terry.ipynb"
RELEASE = ROOT / "exercises" / ASSIGNMENT / "q1_bradley_terry.ipynb"


def _read(path):
    return nbformat.read(str(path), as_version=4)


# ------------------------------------------------------------------------------ codec and compare


@pytest.mark.parametrize("value", [
    None, True, 3, -2.5, float("nan"), float("inf"), "rules", [1, 2.0], (1, "a"), {"k": [1, 2]},
    np.array([[1.0, 2.0], [3.0, np.nan]]), np.array([1, 2]), np.array([True, False]), np.float64(0.25),
])
def test_codec_round_trip_is_plain_json(value):
    tagged = encode(value)
    text = json.dumps(tagged, allow_nan=False)  # strict JSON: what the kernel sends
    back = decode(json.loads(text))
    if isinstance(value, np.ndarray):
        assert back.shape == value.shape and np.array_equal(back, value, equal_nan=True)
    elif isinstance(value, float) and math.isnan(value):
        assert math.isnan(back)
    else:
        assert back == value


def test_codec_never_passes_a_student_object_through():
    class Liar(float):
        def __eq__(self, other):
            return True

    assert encode(Liar(1.0)) == {"t": "object", "type": "Liar"}
    assert encode(object())["t"] == "object"
    err = raised(ValueError("bad p"))
    assert err["types"][:2] == ["ValueError", "Exception"]


@pytest.mark.parametrize("got, expected, ok", [
    (0.5, 0.5 + 1e-12, True),
    (0.5, 0.5001, False),
    (np.float64(0.5), 0.5, True),
    (np.array(0.5), 0.5, True),  # a 0-d array is a number
    (True, 1.0, False),  # a bool is not a number answer
    ("0.5", 0.5, False),
    (np.array([1.0, 2.0]), np.array([1.0, 2.0]), True),
    ([1.0, 2.0], np.array([1.0, 2.0]), False),  # the task asks for a NumPy array
    (np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0]), False),
    ((np.array(0.17), 0.61), (0.17, np.array(0.61)), True),
    ("rules", "rules", True),
    ("Rules", "rules", False),
    (None, 1.0, False),
    ({"a": 1.0, "b": "x"}, {"b": "x", "a": 1.0}, True),
    ({"a": 1.0, "b": "x", "c": 0}, {"b": "x", "a": 1.0}, False),  # an extra key
    (np.zeros((2, 2)).view(type("ndarray", (np.ndarray,), {"__module__": "numpy"})), np.zeros((2, 2)), False),
    (type("list", (list,), {})([1.0]), [1.0], False),
])
def test_compare(got, expected, ok):
    c = check("x", "x")
    assert (compare(encode(got), encode(expected), c) is None) == ok


def test_compare_raises_and_unordered():
    c = check("x", "x")
    assert compare(raised(ValueError("p")), raised(ValueError("q")), c) is None
    assert "should raise ValueError" in compare(raised(TypeError("p")), raised(ValueError("q")), c)
    assert "returned a value" in compare(encode(1.0), raised(ValueError("q")), c)
    assert compare(raised(ZeroDivisionError()), encode(1.0), c) == "raised ZeroDivisionError"

    class MyError(ValueError):
        pass

    assert compare(raised(MyError()), raised(ValueError()), c) is None  # a subclass is a ValueError
    roles = check("x", "x", unordered=True)
    assert compare(encode({"policy", "reference"}), encode(["reference", "policy"]), roles) is None
    assert compare(encode(["policy"]), encode(["reference", "policy"]), roles) is not None


@pytest.mark.parametrize("got, says", [
    ({"t": "array", "shape": [2, 2], "kind": "f", "v": []}, "0 values for shape (2, 2)"),  # the array hole
    ({"t": "array", "shape": [2, 2], "kind": "f", "v": [1.0, 0.0, 0.0, 1.0, 5.0]}, "5 values for shape"),
    ({"t": "array", "shape": [4], "kind": "f", "v": ["a", 0.0, 0.0, 1.0]}, "not numbers"),
    ({"t": "array", "shape": "2x2", "kind": "f", "v": [1.0, 0.0, 0.0, 1.0]}, "malformed array"),
    ({"t": "list", "v": [{"t": "array", "shape": [2, 2], "kind": "f", "v": []}]}, "0 values"),
    ({"t": "float", "v": "0.5"}, "malformed float"),
    ({"t": "dict", "v": [[{"t": "str", "v": "a"}]]}, "malformed dict"),
])
def test_compare_rejects_data_that_contradicts_itself(got, says):
    """Shape and values must agree (else a rewritten record's empty arrays passed), at any depth."""
    problems = [compare(got, encode(expected), check("x", "x")) for expected in (np.eye(2), [np.eye(2)], {"a": 1.0})]
    assert all(problem and says in problem for problem in problems), problems


def test_compare_rejects_extra_and_repeated_dict_keys():
    c = check("x", "x")
    key = [encode("a"), encode(1.0)]
    assert compare({"t": "dict", "v": [key, key]}, encode({"a": 1.0}), c) == "repeated keys"
    assert compare(encode({"a": 1.0, "zz": 2}), encode({"a": 1.0}), c) == "unexpected key 'zz'"


def test_codec_encodes_only_exact_numpy_types():
    fake = type("ndarray", (np.ndarray,), {"__module__": "numpy", "tolist": lambda self: []})
    assert encode(np.zeros(3).view(fake)) == {"t": "object", "type": "a subclass of a NumPy type"}
    scalar = type("float64", (np.float64,), {"__module__": "numpy"})
    assert encode(scalar(0.5))["t"] == "object"
    assert encode(np.float32(0.5)) == {"t": "float", "v": 0.5} and encode(np.int8(-3)) == {"t": "int", "v": -3}
    assert encode(np.str_("x")) == {"t": "str", "v": "x"} and encode(np.bool_(True)) == {"t": "bool", "v": True}


def test_a_numpy_looking_subclass_earns_nothing_through_the_probe():
    from array_hole import BT_MATRIX, SUBCLASS

    reference = {"f": lambda s: np.zeros((len(s), len(s)))}
    c = [check("f(s)", "zeros", s=[1.0, 2.0])]
    plan = Plan("t1", c, [grading.evaluate(c[0], reference)])
    outputs = _run_probe(plan, SUBCLASS + BT_MATRIX.replace("bt_matrix", "f"))
    verdict = decide(plan, outputs)
    assert not verdict.passed and "should be a NumPy array" in verdict.reasons[0], verdict.reasons


def test_a_stored_seed_draws_the_same_hidden_inputs(monkeypatch):
    first = grading.load_checks(ASSIGNMENT, grading.new_rng(1234))
    again = grading.load_checks(ASSIGNMENT, grading.new_rng(1234))
    other = grading.load_checks(ASSIGNMENT, grading.new_rng(1235))
    dump = lambda table: json.dumps({g: [encode(c.inputs) for c in cs] for g, cs in table.items()})  # noqa: E731
    assert dump(first) == dump(again) != dump(other)
    monkeypatch.setenv(grading.SEEDS_ENV, json.dumps({"q1_bradley_terry": 1234}))
    assert grading.stored_seed("q1_bradley_terry") == 1234 and grading.stored_seed("q2_dpo_margins") is None
    monkeypatch.setenv(grading.SEEDS_ENV, json.dumps({"q1_bradley_terry": "1234"}))
    with pytest.raises(ValueError, match="must be a non-negative integer"):
        grading.stored_seed("q1_bradley_terry")
    monkeypatch.delenv(grading.SEEDS_ENV)
    assert grading.stored_seed("q1_bradley_terry") is None


def test_given_numbers_are_drawn_per_student_and_the_reference_follows_them():
    alice, again, bob = (grading.given_cells(ASSIGNMENT, s) for s in ("alice", "alice", "bob"))
    assert alice == again != bob and set(alice) == {"q1_given", "q2_given", "q4_given"}
    assert grading.given_cells(ASSIGNMENT, "") == {}
    released = next(c.source for c in _read(SOURCE).cells
                    if c.metadata.get("nbgrader", {}).get("grade_id") == "q1_given")
    assert released.startswith(grading.GIVEN_HEADER) and alice["q1_given"].startswith(grading.GIVEN_HEADER)
    assert grading.reference_namespace(SOURCE)["p_a_beats_c"] == pytest.approx(0.9)  # the released numbers
    mine: dict = {}
    exec(alice["q1_given"], mine)  # noqa: S102 - our own cell
    gap = sum(math.log(p / (1 - p)) for p in mine["chain_ac"])
    ref_alice, ref_bob = grading.reference_namespace(SOURCE, alice), grading.reference_namespace(SOURCE, bob)
    assert ref_alice["p_a_beats_c"] == pytest.approx(1 / (1 + math.exp(-gap)), abs=1e-12)
    assert all(ref_alice[k] != ref_bob[k] for k in ("p_a_beats_c", "p_a_beats_d", "tournament_loss"))


def test_q2s_answers_follow_the_students_batch_and_pairs():
    """2c's given cell: the reference recomputes every answer from the student's own batch and pairs
    (checked here by hand from the drawn numbers), and the hardest pair is never a near tie."""
    path = ROOT / "solutions" / ASSIGNMENT / "q2_dpo_margins.ipynb"
    released = grading.reference_namespace(path)
    assert released["z_pair2"] == pytest.approx(0.065) and released["hardest_pair"] == "C"
    for student in ("alice", "bob", "carol", "dave"):
        given = grading.given_cells(ASSIGNMENT, student)
        mine: dict = {"nan": float("nan")}
        exec(given["q2_given"], mine)  # noqa: S102 - our own cell
        sums = {k: np.where(np.asarray(mine[m], bool), np.nan_to_num(np.asarray(mine[k], float)), 0.0).sum(-1)
                for k, m in (("policy_chosen", "chosen_mask"), ("ref_chosen", "chosen_mask"),
                             ("policy_rejected", "rejected_mask"), ("ref_rejected", "rejected_mask"))}
        z = lambda beta, row, s=sums: beta * ((s["policy_chosen"][row] - s["ref_chosen"][row])  # noqa: E731
                                              - (s["policy_rejected"][row] - s["ref_rejected"][row]))
        slope = lambda x: 1 / (1 + math.exp(x))  # noqa: E731
        ref = grading.reference_namespace(path, given)
        assert ref["z_pair2"] == pytest.approx(z(0.1, 1), abs=1e-12)
        assert ref["z_beta05"] == pytest.approx(z(0.5, 0), abs=1e-12)
        assert ref["pull_beta05"] == pytest.approx(0.5 * slope(z(0.5, 0)), abs=1e-12)
        pulls = {name: slope(0.1 * ((pw - rw) - (pl - rl))) for name, (pw, pl, rw, rl) in mine["pairs_abc"].items()}
        top, second = sorted(pulls.values())[-1], sorted(pulls.values())[-2]
        assert ref["hardest_pair"] == max(pulls, key=pulls.get) and top - second >= 0.01
        assert ref["hardest_reason"] == 2


# ------------------------------------------------------------------------------ records and verdicts


def _plan(expected_values, visible=False) -> Plan:
    checks = [check("f(x)", f"f at point {i}", visible=visible, x=float(i)) for i in range(len(expected_values))]
    return Plan("t1", checks, [encode(v) for v in expected_values])


def _record(plan, values, nonce=None, grade_id=None):
    data = {"nonce": nonce or plan.nonce, "grade_id": grade_id or plan.grade_id,
            "results": [encode(v) for v in values]}
    return {"output_type": "display_data", "data": {MIME: data}, "metadata": {}}


def test_decide_passes_a_true_record_and_names_every_failure():
    plan = _plan([1.0, 2.0, 3.0])
    assert decide(plan, [_record(plan, [1.0, 2.0, 3.0])]).passed
    verdict = decide(plan, [_record(plan, [1.0, 2.5, 3.0])])
    assert not verdict.passed and verdict.reasons == ["hidden test: f at point 1 (wrong value)"]
    assert "2.0" not in " ".join(verdict.reasons)  # hidden: no expected value, no input
    shown = decide(_plan([1.0], visible=True), [])
    assert not shown.passed


@pytest.mark.parametrize("outputs, reason", [
    ([], "no grading record"),
    ("forged", "wrong nonce"),
    ("twice", "more than one grading record"),
    ("short", "malformed grading record"),
    ("other cell", "malformed grading record"),
    ([{"output_type": "error", "ename": "CellTimeoutError", "evalue": "", "traceback": []}], "time limit"),
    ([{"output_type": "error", "ename": "NameError", "evalue": "", "traceback": []}], "NameError"),
    ("huge", "too large"),
])
def test_missing_forged_or_malformed_records_score_zero_with_a_reason(outputs, reason):
    plan = _plan([1.0, 2.0])
    right = [1.0, 2.0]
    outputs = {
        "forged": [_record(plan, right, nonce="0" * 32)],
        "twice": [_record(plan, right), _record(plan, right)],
        "short": [_record(plan, right[:1])],
        "other cell": [_record(plan, right, grade_id="t2")],
        "huge": [_record(plan, right), {"output_type": "display_data", "metadata": {},
                                        "data": {MIME: {"nonce": "forged", "pad": "x" * 5_000_000}}}],
    }.get(outputs, outputs) if isinstance(outputs, str) else outputs
    verdict = decide(plan, outputs)
    assert not verdict.passed and reason in verdict.reasons[0], verdict.reasons
    assert decide(plan, [_record(plan, right)],
                  not_run="not run: the kernel died").reasons == ["not run: the kernel died"]


def _run_probe(plan: Plan, student_code: str) -> list:
    """The probe in a real (in-process) IPython shell after ``student_code``: its display outputs."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    main = sys.modules["__main__"]  # the shell installs its own __main__ (no __spec__): spawn would then fail
    try:
        shell = InteractiveShell.instance()
        shell.reset(new_session=False)
        shell.run_cell(student_code)
        with capture_output() as captured:
            shell.run_cell(plan.probe_source())
    finally:
        sys.modules["__main__"] = main
    return [{"output_type": "display_data", "data": out.data, "metadata": {}} for out in captured.outputs]


def test_probe_in_ipython_reports_values_and_survives_innocent_shadowing():
    reference = {"f": lambda x: 2 * x}
    c = [check("f(x)", "doubles", x=1.5), check("f(x)", "bad input", x=float("nan"))]
    plan = Plan("t1", c, [grading.evaluate(k, reference) for k in c])
    honest = ("list = [1, 2]\nfloat = 3\njson = None\nisinstance = len\n"
              "import math\ndef f(x):\n    if math.isnan(x):\n        raise ValueError('nan')\n    return 2 * x\n")
    assert plan.expected[1]["t"] == "float"  # the reference returns nan: the student must too
    verdict = decide(plan, _run_probe(plan, honest))
    assert not verdict.passed and "bad input" in verdict.reasons[0]  # raised instead of returning nan
    plan2 = Plan("t1", c[:1], [grading.evaluate(c[0], reference)])
    assert decide(plan2, _run_probe(plan2, honest)).passed
    assert not decide(plan2, _run_probe(plan2, "def f(x):\n    return 4.0\n")).passed


def test_probe_source_carries_no_expected_value():
    table = grading.load_checks(ASSIGNMENT, np.random.default_rng(0))
    reference = grading.reference_namespace(SOURCE)
    plans = grading.make_plans({"q1_test_answers": table["q1_test_answers"]}, reference)
    source = plans["q1_test_answers"].probe_source()
    for value in (reference["p_a_beats_d"], reference["tournament_loss"]):
        assert repr(value)[:8] not in source


# ------------------------------------------------------------------------------ the assignment's checks


def _test_ids(nb) -> list[str]:
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if is_test_cell(c)]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_test_cell_has_checks_that_need_an_answer(assignment):
    table = grading.load_checks(assignment, grading.new_rng())
    seen = []
    for path in sorted((ROOT / "solutions" / assignment).glob("*.ipynb")):
        nb = _read(path)
        reference = grading.reference_namespace(path)
        for grade_id in _test_ids(nb):
            seen.append(grade_id)
            expected = [grading.evaluate(c, reference) for c in table[grade_id]]
            assert all(e["t"] != "object" for e in expected), grade_id
            # a function that always raises ValueError, or returns None, earns nothing in any cell
            assert any(e["t"] != "raised" for e in expected), grade_id
            assert any(e["t"] != "none" for e in expected), grade_id
            assert any(c.visible for c in table[grade_id]) or grade_id.startswith(("q5_", "q8_test_answers")), grade_id
        assert "HIDDEN TESTS" not in path.read_text()  # hidden checks live in instructor/checks only
    assert sorted(seen) == sorted(table) and len(seen) == len(set(seen))


def test_hidden_inputs_change_from_run_to_run():
    first = grading.load_checks(ASSIGNMENT, grading.new_rng())["q1_test_probability"]
    second = grading.load_checks(ASSIGNMENT, grading.new_rng())["q1_test_probability"]
    assert [c.inputs for c in first if c.inputs] != [c.inputs for c in second if c.inputs]


def test_lecture_numbers_in_visible_tests_match_the_course_library():
    """The literals the students see are the lecture's numbers, as course_lib computes them."""
    from course_lib.formulas import advantages, budgets, preference

    assert abs(preference.win_rate_to_gap(0.9) - 2.1972) < 1e-4
    assert abs(preference.bt_probability(2 * preference.win_rate_to_gap(0.75)) - 0.9) < 1e-12  # a chain of two
    t = preference.dpo_terms(-12.0, -11.5, -13.0, -10.8, 0.1)
    assert abs(t.margin - 0.170) < 1e-9 and abs(t.loss - 0.6118) < 1e-4 and abs(t.slope - 0.4576) < 1e-4
    assert abs(preference.dpo_terms(-12.0, -11.5, -12.8, -11.65, 0.1).margin - 0.065) < 1e-9
    assert abs(advantages.zero_variance_probability(0.3, 8) - 0.0577) < 1e-4
    assert abs(advantages.baseline_gradient(0.3, 8, "group_mean") - 0.18375) < 1e-12
    assert abs(advantages.baseline_gradient(0.3, 8, "leave_one_out") - 0.21) < 1e-12
    assert abs(budgets.stage_memory_gib(8.03e9, "ppo") - 269.2) < 0.05
    gen = budgets.rollout_generation_seconds(256, 8, 4000, 209.4, 8)
    upd = budgets.update_seconds(8.03e9, 8_192_000, 990e12, 0.4, 8)
    assert abs(gen / upd - 39.2511) < 1e-4 and abs(upd / 60 - 2.076444) < 1e-6
    texts = {p.name: p.read_text() for p in (ROOT / "exercises" / ASSIGNMENT).glob("*.ipynb")}
    for literal, notebook in (("2.1972", "q1_bradley_terry.ipynb"), ("0.6118", "q2_dpo_margins.ipynb"),
                              ("0.18375", "q3_group_baselines.ipynb"), ("39.2511", "q4_budgets.ipynb")):
        assert literal in texts[notebook], (literal, notebook)
    # the reference (the solutions) agrees with the library on the same numbers
    ref = grading.reference_namespace(SOURCE)
    assert abs(ref["p_a_beats_c"] - preference.bt_probability(2 * preference.win_rate_to_gap(0.75))) < 1e-12
    q4 = grading.reference_namespace(ROOT / "solutions" / ASSIGNMENT / "q4_budgets.ipynb")
    assert abs(q4["ppo_gib"] - budgets.stage_memory_gib(8.03e9, "ppo")) < 1e-9  # full and frozen: the library's
    assert abs(q4["ratio"] - gen / upd) < 1e-9


# ------------------------------------------------------------------------------ rebuilding submissions


def _solution_json() -> dict:
    return json.loads(SOURCE.read_text())


def _ids(nb) -> list:
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]


def test_rebuild_puts_back_deleted_drops_duplicated_and_repairs_metadata():
    release = _read(RELEASE)
    data = _solution_json()
    cells = data["cells"]
    tests = [i for i, c in enumerate(cells)
             if c["metadata"].get("nbgrader", {}).get("grade_id") == "q1_test_probability"]
    cells.insert(tests[0] + 1, json.loads(json.dumps(cells[tests[0]])))  # pasted twice
    cells[:] = [c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") != "q1_test_loss"]  # deleted
    answers = next(c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") == "q1_answers")
    answers["metadata"]["nbgrader"]["points"] = "lots"  # corrupted, but the id is readable
    functions = next(c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") == "q1_functions")
    functions["metadata"]["nbgrader"] = ["garbage"]  # unreadable: the code runs as the student's own
    nb, problems = rebuild(json.dumps(data).encode(), release)
    assert _ids(nb).count("q1_test_probability") == 1 and "q1_test_loss" in _ids(nb)
    assert _ids(nb).index("q1_test_loss") == _ids(nb).index("q1_loss_function") + 1  # where the release has it
    fixed = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "q1_answers")
    assert fixed.metadata.nbgrader == next(c for c in release.cells if c.metadata.get("nbgrader", {})
                                           .get("grade_id") == "q1_answers").metadata.nbgrader
    assert "chain_win_rate(chain_ac)" in fixed.source  # the student's answer is kept
    assert any("def bt_matrix" in c.source and "nbgrader" not in c.metadata for c in nb.cells)
    text = " | ".join(problems)
    assert "second copy of cell q1_test_probability" in text and "q1_test_loss was missing" in text
    assert "answer cell q1_functions was missing: graded as empty" in text
    nbformat.validate(nb)


@pytest.mark.parametrize("raw, reason", [
    (b'{"cells": [ this is not json', "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b'{"nbformat": 4}', "no list of cells"),
    (b"[1, 2]", "no list of cells"),
])
def test_rebuild_refuses_what_is_not_a_notebook(raw, reason):
    nb, problems = rebuild(raw, _read(RELEASE))
    assert nb is None and reason in problems[0] and "0 points" in problems[0]


# ------------------------------------------------------------------------------ the scan (advice)


def _scan(tmp_path, code: str) -> list[str]:
    """Scan a copy of the Q1 release whose answer cell holds ``code``."""
    nb = _read(RELEASE)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "q1_functions":
            cell.source = code
    path = tmp_path / SOURCE.name
    nbformat.write(nb, str(path))
    return [f.reason for f in scan_notebook(path, source_facts(_read(SOURCE)))]


@pytest.mark.parametrize("code, expected", [
    ("import builtins\nbuiltins.abs = lambda x: 0", "imports `builtins`"),
    ("__builtins__.float = int", "touches `__builtins__`"),
    ("np.isclose = lambda *a, **k: True", "assigns attribute `np.isclose`"),
    ("setattr(np, 'isclose', print)", "calls `setattr()`"),
    ("float = lambda x: 0.0", "`float` (assignment)"),
    ("round = lambda x: 0", "shadows the builtin `round`"),
    ("def f():\n    pass\nf.__code__ = (lambda: 1).__code__", "uses attribute `__code__`"),
    ("get_ipython().input_transformers_post.append(lambda lines: [])", "calls `get_ipython()`"),
    ("quit._ip.ast_transformers.append(None)", "uses attribute `ast_transformers`"),
    ("import gc\n[o for o in gc.get_objects()]", "imports `gc`"),
    ("exec('x = 1')", "calls `exec()`"),
    ("class Liar:\n    def __eq__(self, other):\n        return True", "defines __eq__"),
    ("from course_lib.formulas.preference import win_rate_to_gap", "imports the course library"),
    ("from course_lib.formulas import preference\ndef bt_matrix(scores):\n"
     "    return preference.bt_probability(scores)",
     "imports the course library"),
    ("import course_lib.formulas.preference as cp", "imports the course library"),
    ("bt_probability = course_lib.formulas.preference.bt_probability", "uses the course library"),
    ("import importlib\npref = importlib.import_module('course_lib.formulas.preference')", "names the course library"),
    ("%load_ext autoreload\ndef broken(:\n", "cannot be parsed"),
    ("from ipykernel.zmqshell import ZMQDisplayPublisher as P\ntype.__setattr__(P, 'publish', print)",
     "uses attribute `__setattr__`"),
    ("from ipykernel.zmqshell import ZMQDisplayPublisher", "imports from `ipykernel.zmqshell`"),
    ("import zmq", "imports `zmq`"),
    ("import socket", "imports `socket`"),
    ("from urllib.request import urlopen", "imports from `urllib.request`"),
    ("Fake = type('ndarray', (np.ndarray,), {'__module__': 'numpy'})", "claiming a `__module__`"),
    ("Fake = type('A', (np.ndarray,), {})", "makes a class with `type(name, bases, namespace)`"),
    ("class A(np.ndarray):\n    __module__ = 'numpy'", "sets `__module__`"),
])
def test_scan_flags_tampering(tmp_path, code, expected):
    reasons = _scan(tmp_path, code)
    assert any(expected in r for r in reasons), reasons


def test_scan_accepts_honest_code(tmp_path):
    honest = (
        "import math\nimport numpy as np\n\n"
        "def bt_matrix(scores):\n    float = 3  # a local name shadows nothing outside\n"
        "    s = np.asarray(scores)\n    return 1 / (1 + np.exp(-(s[:, None] - s[None, :])))\n\n"
        "def chain_win_rate(win_rates):\n    if not all(0 < p < 1 for p in win_rates):\n"
        "        raise ValueError('p')\n"
        "    gap = sum(math.log(p / (1 - p)) for p in win_rates)\n    return 1 / (1 + math.exp(-gap))\n"
        "values = bt_matrix([0.0, 1.0, 2.0])\nprint(np.round(values, 3))\n"
    )
    assert _scan(tmp_path, honest) == []


# ------------------------------------------------------------------------------ feedback and log


def test_feedback_filter_hides_student_output_after_a_test_cell():
    nb = nbformat.v4.new_notebook()
    test = nbformat.v4.new_code_cell("assert f(1) == 1")
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t1", "points": 1}
    test.outputs = [nbformat.v4.new_output("stream", name="stdout", text="Graded: all 3 checks passed")]
    before = nbformat.v4.new_code_cell("print(1)")
    before.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1")]
    after = nbformat.v4.new_code_cell("print(CALLS)")
    after.outputs = [nbformat.v4.new_output("stream", name="stdout", text="[7.123]")]
    nb.cells = [before, test, after]
    out, _ = FeedbackFilter().preprocess(nb, {})
    assert out.cells[0].outputs[0]["text"] == "1" and "Graded" in out.cells[1].outputs[0]["text"]
    assert "7.123" not in out.cells[2].outputs[0]["text"]


def test_parse_log_times_notebooks_and_keeps_the_exception_line():
    from instructor.autograde import parse_log

    log = "\n".join([
        "100.000 INFO Creating/updating student with ID 'ann': {}",
        "100.500 INFO Sanitizing /c/staged/ann/module14/q1_bradley_terry.ipynb",
        "102.000 INFO Sanitizing /c/staged/ann/module14/q2_dpo_margins.ipynb",
        "103.250 ERROR There was an error processing assignment: /c/staged/ann/module14",
        "103.300 ERROR Traceback (most recent call last):",
        '      File "x.py", line 1, in <module>',
        "    nbclient.exceptions.DeadKernelError: Kernel died",
    ])
    seconds, error = parse_log(log)
    assert seconds == {"q1_bradley_terry.ipynb": 1.5, "q2_dpo_margins.ipynb": 1.25}
    assert error == "nbclient.exceptions.DeadKernelError: Kernel died"


# ------------------------------------------------------------------ Validate tells the truth
# Every stated contract has a visible test: an answer that breaks one fails its test cell when the
# student runs it (what Validate runs), not only the hidden checks at grading time.

NAN_BLIND_MATRIX = ("def bt_matrix(scores):\n    s = np.asarray(scores, float)\n"
                    "    if s.ndim != 1 or s.size < 2:\n        raise ValueError('s')\n"
                    "    with np.errstate(all='ignore'):\n"
                    "        return 1 / (1 + np.exp(-(s[:, None] - s[None, :])))\n")
NAIVE_CHAIN = ("def chain_win_rate(win_rates):\n    if not win_rates or not all(0 < p < 1 for p in win_rates):\n"
               "        raise ValueError('p')\n    gap = sum(math.log(p / (1 - p)) for p in win_rates)\n"
               "    return 1 / (1 + math.exp(-gap))\n")
NAIVE_LOSS = ("def pairwise_loss(scores, winners, losers):\n    s = np.asarray(scores, float)\n"
              "    w, l = np.asarray(winners, int), np.asarray(losers, int)\n"
              "    if w.shape != l.shape or w.size == 0 or np.any(w >= s.size) or np.any(l >= s.size):\n"
              "        raise ValueError('x')\n"
              "    with np.errstate(all='ignore'):\n"
              "        return float(np.mean(-np.log(1 / (1 + np.exp(-(s[w] - s[l]))))))\n")
MULTIPLIED_MASK_DPO = ("def dpo_terms(pc, pr, rc, rr, mc, mr, beta=0.1):\n    if not beta > 0:\n"
                       "        raise ValueError('beta')\n"
                       "    def seq(x, m):\n        with np.errstate(all='ignore'):\n"
                       "            return (np.asarray(x, float) * np.asarray(m, float)).sum(axis=-1)\n"
                       "    with np.errstate(all='ignore'):\n"
                       "        z = beta * ((seq(pc, mc) - seq(rc, mc)) - (seq(pr, mr) - seq(rr, mr)))\n"
                       "        return z, np.logaddexp(0, -z), np.exp(-np.logaddexp(0, z))\n")
MASK_BLIND_DPO = ("def dpo_terms(pc, pr, rc, rr, mc, mr, beta=0.1):\n    if not (math.isfinite(beta) and beta > 0):\n"
                  "        raise ValueError('beta')\n"
                  "    def seq(x, m):\n        x, m = np.asarray(x, float), np.asarray(m).astype(bool)\n"
                  "        if x.shape != m.shape or not m.any(axis=-1).all() or not np.isfinite(x[m]).all():\n"
                  "            raise ValueError('x')\n        return np.where(m, x, 0.0).sum(axis=-1)\n"
                  "    z = beta * ((seq(pc, mc) - seq(rc, mc)) - (seq(pr, mr) - seq(rr, mr)))\n"
                  "    return z, np.logaddexp(0, -z), np.exp(-np.logaddexp(0, z))\n")
NO_BETA_GRADIENTS = ("def dpo_gradients(pc, pr, rc, rr, beta=0.1):\n"
                     "    z = beta * ((np.asarray(pc, float) - rc) - (np.asarray(pr, float) - rr))\n"
                     "    slope = np.exp(-np.logaddexp(0, z))\n    return -slope, slope\n")
_GROUPS = ("    r, g = np.asarray(rewards, float), np.asarray(group_ids)\n"
           "    if r.shape != g.shape or not np.all(np.isfinite(r)):\n        raise ValueError('r')\n"
           "    adv = np.zeros_like(r)\n    for label in np.unique(g):\n        x = r[g == label]\n"
           "        if x.size < 2:\n            raise ValueError('group of one')\n")
STD_TEST_GRPO = ("def grpo_advantages(rewards, group_ids, on_zero_variance='raise'):\n" + _GROUPS
                 + "        if x.std() == 0:\n            if on_zero_variance == 'zeros':\n                continue\n"
                 "            raise ValueError('zero variance')\n"
                 "        adv[g == label] = (x - x.mean()) / x.std()\n    return adv\n")
ONE_GROUP_GRPO = ("def grpo_advantages(rewards, group_ids, on_zero_variance='raise'):\n"
                  "    r = np.asarray(rewards, float)\n"
                  "    if not np.all(np.isfinite(r)) or np.all(r == r[0]):\n        raise ValueError('r')\n"
                  "    return (r - r.mean()) / r.std()\n")
EMPTY_BLIND_AGG = ("def aggregate(token_values, unit):\n    if unit not in ('response', 'token'):\n"
                   "        raise ValueError(unit)\n"
                   "    with np.errstate(all='ignore'):\n"
                   "        if unit == 'response':\n"
                   "            return float(np.mean([np.mean(v) if len(v) else 0.0 for v in token_values]))\n"
                   "        return float(sum(map(sum, token_values)) / sum(map(len, token_values)))\n")
BINARY_ONLY_ZERO_VARIANCE = ("def zero_variance_probability(probs, G):\n    p = probs[0]\n"
                             "    return p**G + (1 - p)**G\n")
NAN_BLIND_MEMORY = ("def memory_gib(models):\n    if not models:\n        raise ValueError('x')\n"
                    "    return sum(2 * n + 14 * t for n, t in models) / 2**30\n")
ROLE_MEMORY = ("def memory_gib(models):\n    if not models:\n        raise ValueError('x')\n"
               "    return sum(16 * n if t else 2 * n for n, t in models) / 2**30\n")
NO_SCORING = ("def step_seconds(n_params, tokens, tokens_per_second, flops_per_device, mfu, devices, "
              "scorer_params=()):\n"
              "    return tokens / (tokens_per_second * devices), 0.0, 6 * n_params * tokens / (flops_per_device * "
              "mfu * devices)\n")


@pytest.mark.parametrize("notebook, grade_id, code, says", [
    ("q1_bradley_terry", "q1_test_probability", NAN_BLIND_MATRIX, "nan"),
    ("q1_bradley_terry", "q1_test_chain", NAIVE_CHAIN, ""),  # OverflowError for 60 links of 1e-6
    ("q1_bradley_terry", "q1_test_loss", NAIVE_LOSS, "1e4"),
    ("q1_bradley_terry", "q1_test_answers", "p_a_beats_d = None", "set p_a_beats_d in 1c (still None)"),
    ("q2_dpo_margins", "q2_test_pair_one", MULTIPLIED_MASK_DPO, "masked positions are ignored"),
    ("q2_dpo_margins", "q2_test_bad_input", MASK_BLIND_DPO, "mask value of 2"),
    ("q2_dpo_margins", "q2_test_gradients", NO_BETA_GRADIENTS, "−β σ(−z)"),
    ("q2_dpo_margins", "q2_test_answers", "z_pair2 = None", "set z_pair2 in 2c"),
    ("q3_group_baselines", "q3_test_grpo", STD_TEST_GRPO, "equal up to rounding"),
    ("q3_group_baselines", "q3_test_grpo", STD_TEST_GRPO.replace("x.std() == 0", "np.all(x == x[0])"),
     "equal up to rounding"),
    ("q3_group_baselines", "q3_test_grpo", ONE_GROUP_GRPO, "each group with its own mean and std"),
    ("q3_group_baselines", "q3_test_aggregation", EMPTY_BLIND_AGG, "no tokens"),
    ("q3_group_baselines", "q3_test_zero_variance", BINARY_ONLY_ZERO_VARIANCE, "three reward values"),
    ("q3_group_baselines", "q3_test_zero_variance",
     "def zero_variance_probability(probs, G):\n    return float(np.sum(np.asarray(probs) ** G))\n", "whole number"),
    ("q4_budgets", "q4_test_memory", NAN_BLIND_MEMORY, "nan"),
    ("q4_budgets", "q4_test_memory", ROLE_MEMORY, "10M trainable"),
    ("q4_budgets", "q4_test_time", NO_SCORING, "2/3 of the update"),
    ("q4_budgets", "q4_test_answers", "ratio_fast_decode = 3 * ratio", "ratio_fast_decode"),
    ("q4_budgets", "q4_test_answers", "lora_dpo_gib = memory_gib([(8.03e9, 8.03e9), (8.03e9, 0)])", "lora_dpo_gib"),
    ("q5_passport", "q5_test_loop", "del passport['roles']", "missing ['roles']"),
])
def test_visible_tests_catch_a_broken_contract(notebook, grade_id, code, says):
    """The solution passes the visible test cell; the same with one contract broken fails it, saying why."""
    nb = _read(ROOT / "solutions" / ASSIGNMENT / f"{notebook}.ipynb")
    test_source = next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    namespace: dict = {}
    for source in grading.code_cells(nb):
        exec(source, namespace)  # noqa: S102 - the instructor's solution
    exec(test_source, dict(namespace))  # noqa: S102 - passes as written
    exec(code, namespace)  # noqa: S102
    with pytest.raises(Exception) as err:  # noqa: PT011 - an assert or the broken function's own error
        exec(test_source, namespace)  # noqa: S102
    assert not isinstance(err.value, TypeError), err.value  # a hint, not a raw TypeError on None
    assert says in str(err.value), str(err.value)


def test_visible_tests_and_grader_accept_what_the_text_allows():
    """A NumPy string for hardest_pair and an int-like hardest_reason pass the visible test and the grader."""
    path = ROOT / "solutions" / ASSIGNMENT / "q2_dpo_margins.ipynb"
    nb = _read(path)
    namespace: dict = {}
    for source in grading.code_cells(nb):
        exec(source, namespace)  # noqa: S102 - the instructor's solution
    reference = grading.reference_namespace(path)
    table = {c.expr: c for c in grading.load_checks(ASSIGNMENT, grading.new_rng())["q2_test_answers"]}
    test_source = next(c.source for c in nb.cells
                       if c.metadata.get("nbgrader", {}).get("grade_id") == "q2_test_answers")
    for pair, reason in ((np.array(["A", "B", "C"])[2], np.int64(2)), ("C", 2.0)):
        exec(test_source, {**namespace, "hardest_pair": pair, "hardest_reason": reason})  # noqa: S102
        for name, value in (("hardest_pair", pair), ("hardest_reason", reason)):
            got = json.loads(json.dumps(encode(value)))
            assert compare(got, grading.evaluate(table[name], reference), table[name]) is None, (name, value)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_visible_checks_are_the_ones_the_notebooks_show(assignment):
    """Each check marked visible is what some test cell of its notebook runs (same call, same literals)."""
    def norm(text):
        return "".join(text.split()).replace('"', "'")

    table = grading.load_checks(assignment, grading.new_rng())
    for path in sorted((ROOT / "solutions" / assignment).glob("*.ipynb")):
        cells = {c.metadata["nbgrader"]["grade_id"]: norm(c.source) for c in _read(path).cells if is_test_cell(c)}
        for grade_id, source in cells.items():
            for c in table[grade_id]:
                if c.visible and not c.inputs:
                    assert norm(c.expr) in source, (grade_id, c.expr)


# ------------------------------------------------------------------ answers copied from course_lib


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_scan_flags_every_answer_that_calls_the_course_library(tmp_path, assignment):
    from copied_answers import submission

    for kind in ("calls", "copies"):
        for notebook, cells in submission(kind, assignment).items():
            source = _read(ROOT / "solutions" / assignment / f"{notebook}.ipynb")
            nb = _read(ROOT / "exercises" / assignment / f"{notebook}.ipynb")
            for cell in nb.cells:
                gid = cell.metadata.get("nbgrader", {}).get("grade_id")
                if gid in cells:
                    cell.source = cells[gid]
            path = tmp_path / f"{notebook}.ipynb"
            nbformat.write(nb, str(path))
            flags = scan_notebook(path, source_facts(source))
            flagged = {f.cell for f in flags if "course library" in f.reason}
            imports = {gid for gid, code in cells.items() if re.search(r"^(from|import) course_lib", code, re.M)}
            assert flagged == imports, (kind, notebook, [str(f) for f in flags])
            assert bool(imports) == (kind == "calls"), (kind, notebook)  # a copy never imports course_lib


def _score_outside_the_sandbox(answers: dict, assignment: str = ASSIGNMENT) -> tuple[int, int, dict]:
    """Points the answer cells earn where course_lib is importable and nothing times out."""
    from copied_answers import ANSWERED

    table = grading.load_checks(assignment, grading.new_rng())
    earned = total = checks_passed = 0
    passed = {}
    for path in sorted((ROOT / "solutions" / assignment).glob(ANSWERED[assignment])):
        nb = _read(path)
        reference = grading.reference_namespace(path)
        namespace: dict = {}
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code" or (meta.get("grade") and not meta.get("solution")):
                continue
            code = answers[path.stem][meta["grade_id"]] if meta.get("solution") else cell.source
            try:
                exec(code, namespace)  # noqa: S102 - the built submission, cell by cell as a kernel runs it
            except Exception:  # noqa: BLE001 - a failing answer cell fails, the next cells still run
                pass
        for cell in nb.cells:
            if is_test_cell(cell):
                meta = cell.metadata["nbgrader"]
                total += meta["points"]
                checks = table[meta["grade_id"]]
                got = [json.loads(json.dumps(grading.evaluate(c, namespace))) for c in checks]
                ok = [compare(g, grading.evaluate(c, reference), c) is None for g, c in zip(got, checks)]
                checks_passed += sum(ok)
                if all(ok):
                    earned += meta["points"]
                    passed[meta["grade_id"]] = meta["points"]
    return earned, total, passed, checks_passed


def test_solution_answers_rebuilt_by_the_fixture_earn_every_point():
    """Control: the builder keeps the answer cells working (the solutions' own cells give full marks)."""
    from copied_answers import ROOT as FIXTURE_ROOT

    answers = {}
    for path in sorted((FIXTURE_ROOT / "solutions" / ASSIGNMENT).glob("q[1-4]_*.ipynb")):
        answers[path.stem] = {c.metadata.nbgrader["grade_id"]: c.source for c in _read(path).cells
                              if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}
    earned, total, _, _ = _score_outside_the_sandbox(answers)
    assert earned == total == 38, (earned, total)


@pytest.mark.parametrize("kind", ["calls", "copies"])
def test_answers_from_the_course_library_earn_at_most_a_tenth_even_outside_the_sandbox(kind, request):
    """Q1–Q4 ask for what no course_lib function computes: wrapping (calls) or pasting and renaming
    (copies) the closest library function earns <= 10% of the 46 autograded points, even where
    course_lib is importable and no time limit applies (Q5, 8 points, is a reading, not a function)."""
    from copied_answers import submission

    earned, total, passed, checks = _score_outside_the_sandbox(submission(kind))
    line = (f"course_lib {kind} outside the sandbox: {earned}/46 autograded points ({passed or 'no cell'}); "
            f"{checks} single checks pass")
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        print("\n" + line)
    assert total == 38 and earned <= 0.1 * 46, line
    assert checks >= 20, line  # the library code runs and answers what it covers (the lecture's own cases)



@pytest.mark.parametrize("kind", ["calls", "copies"])
def test_systems14_answers_from_the_course_library_earn_at_most_a_tenth_even_outside_the_sandbox(kind, request):
    """systems14 asks for what no course_lib function computes in one call (ragged lists, episodes as
    segments, a judge's table, verdicts across seeds): the closest library function wrapped or pasted
    earns <= 10% of its 30 autograded points where course_lib is importable."""
    from copied_answers import submission

    earned, total, passed, checks = _score_outside_the_sandbox(submission(kind, "systems14"), "systems14")
    line = (f"systems14, course_lib {kind} outside the sandbox: {earned}/30 ({passed or 'no cell'}); {checks} checks "
            "pass")
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        print("\n" + line)
    assert total == 30 and earned <= 0.1 * total, line

# ------------------------------------------------------------------ systems14: the course's rule over seeds

SEED_VERDICTS = [("q6_stale_rollouts", "q6_test_gain", "correction_gain"),
                 ("q8_judge_audit", "q8_test_seeds", "bias_removed")]


def _range_rule(reference: dict, name: str):
    """The reference's ``name`` with its decision replaced by a range rule (the mean paired difference
    against the larger of the two tables' ranges): right in every other value it returns."""
    ref = reference[name]

    def spread(*tables):
        return max(max(t.values()) - min(t.values()) for t in tables)

    def correction_gain(corrected, uncorrected, margin):
        gains, median, _ = ref(corrected, uncorrected, margin)
        return gains, median, sum(gains) / len(gains) > spread(corrected, uncorrected)

    def bias_removed(before, after, margin, threshold=0.1):
        drops, median, _ = ref(before, after, margin, threshold)
        mean_before, mean_after = (sum(t.values()) / len(t) for t in (before, after))
        return drops, median, (abs(mean_after) < threshold
                               and abs(mean_before) - abs(mean_after) > spread(before, after))

    return {"correction_gain": correction_gain, "bias_removed": bias_removed}[name]


@pytest.mark.parametrize("notebook, grade_id, name", SEED_VERDICTS)
def test_systems14_a_range_rule_fails_every_draw_of_the_hidden_checks(notebook, grade_id, name):
    """Q6c and Q8b ask for the course's rule over seeds (course_lib.run.verdicts: one sign on every seed, |median|
    above the margin). An answer right in every value but deciding by a range rule fails the cell on every
    draw: each draw holds inputs where the two rules disagree, both ways."""
    reference = grading.reference_namespace(ROOT / "solutions" / "systems14" / f"{notebook}.ipynb")
    faked = {**reference, name: _range_rule(reference, name)}
    for seed in range(20):
        checks = grading.load_checks("systems14", grading.new_rng(seed))[grade_id]
        failed = [c.why for c in checks if compare(json.loads(json.dumps(grading.evaluate(c, faked))),
                                                   grading.evaluate(c, reference), c) is not None]
        assert len(failed) >= 2, (seed, failed)


@pytest.mark.parametrize("notebook, grade_id, name", SEED_VERDICTS)
def test_systems14_seed_verdicts_are_course_lib_verdicts_rule(notebook, grade_id, name):
    """On every input the checks draw, the reference's decision is course_lib.run.verdicts' ``beyond`` (Q8b: on
    the drops |before| − |after|, a positive median, and the median bias left under the threshold)."""
    from course_lib.run.verdicts import paired

    reference = grading.reference_namespace(ROOT / "solutions" / "systems14" / f"{notebook}.ipynb")
    ref, seen = reference[name], []

    def spy(a, b, margin, threshold=0.1):
        out = ref(a, b, margin) if name == "correction_gain" else ref(a, b, margin, threshold)
        seeds = sorted(a)
        if name == "correction_gain":
            verdict = paired([a[s] for s in seeds], [b[s] for s in seeds], name_a="a", name_b="b", margin=margin)
            decision = verdict.beyond
        else:
            verdict = paired([abs(a[s]) for s in seeds], [abs(b[s]) for s in seeds], name_a="a", name_b="b",
                             margin=margin)
            decision = verdict.beyond and verdict.median > 0 and abs(np.median([b[s] for s in seeds])) < threshold
        seen.append((out[2], decision, out[1] - verdict.median, list(out[0]) == list(verdict.differences)))
        return out

    spied = {**reference, name: spy}
    for seed in range(20):
        for c in grading.load_checks("systems14", grading.new_rng(seed))[grade_id]:
            grading.evaluate(c, spied)
    assert len(seen) >= 20 * 8 and {s[0] for s in seen} == {True, False}, len(seen)
    assert all(got == want and abs(gap) < 1e-12 and same for got, want, gap, same in seen), \
        [s for s in seen if not (s[0] == s[1] and abs(s[2]) < 1e-12 and s[3])][:3]


# ------------------------------------------------------------------------------ similarity report


def _renamed(source: str) -> str:
    """``source`` with every user name renamed, comments dropped and blank lines added."""
    import io
    import tokenize

    from instructor.similarity import KEPT_NAMES

    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            continue
        if tok.type == tokenize.NAME and tok.string not in KEPT_NAMES:
            tok = tok._replace(string="my_" + tok.string)
        out.append(tok)
    return tokenize.untokenize(out).replace("\n\n", "\n\n\n")


def test_normalised_code_ignores_names_comments_and_layout():
    from instructor.similarity import normalise

    code = "def f(x):\n    # square it\n    return x ** 2 + 1.5\n"
    assert normalise(code) == normalise(_renamed(code)) == normalise("def g( y ):\n\n  return y**2+1.5")
    assert normalise(code) != normalise("def f(x):\n    return x ** 3 + 1.5\n")  # numbers count


def test_similarity_report_flags_copies_of_the_solution_and_of_each_other(tmp_path):
    import shutil

    from instructor.similarity import compare_submissions, write_report

    for part in ("exercises", "solutions"):
        shutil.copytree(ROOT / part / ASSIGNMENT, tmp_path / part / ASSIGNMENT)
    sol = {p.stem: _read(p) for p in sorted((ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb"))}
    rel = {p.stem: _read(p) for p in sorted((ROOT / "exercises" / ASSIGNMENT).glob("*.ipynb"))}

    def put(student, name, nb):
        folder = tmp_path / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(folder / f"{name}.ipynb"))

    from copied_answers import submission as library_submission

    copied = library_submission("copies")
    for name in sol:
        put("ann_verbatim", name, sol[name])
        renamed = nbformat.from_dict(json.loads(json.dumps(sol[name])))
        for cell in renamed.cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                cell.source = _renamed(cell.source)
        put("ben_renamed", name, renamed)
        put("cat_untouched", name, rel[name])
        put("dan_untouched", name, rel[name])
        own = nbformat.from_dict(json.loads(json.dumps(rel[name])))
        for cell in own.cells:
            code = copied.get(name, {}).get(cell.metadata.get("nbgrader", {}).get("grade_id"))
            if code:
                cell.source = code
        put("eve_own_code", name, own)
    pairs = compare_submissions(tmp_path, ASSIGNMENT, threshold=0.8)
    by_q1 = {(p.first, p.second) for p in pairs if p.notebook == "q1_bradley_terry"}
    assert {("solutions", "ann_verbatim"), ("solutions", "ben_renamed"), ("ann_verbatim", "ben_renamed")} <= by_q1
    assert not [p for p in pairs if "untouched" in p.first + p.second or "eve" in p.first + p.second], pairs
    report = write_report(tmp_path, ASSIGNMENT, pairs, 0.8)
    assert "ann_verbatim ~ ben_renamed: 100%" in report and "For review only" in report
    with pytest.raises(ValueError, match="threshold must lie in"):
        compare_submissions(tmp_path, ASSIGNMENT, threshold=1.5)
    # `make similarity` is this command with the Makefile's arguments; run from the course root it
    # writes the same report there.
    import shlex
    import subprocess

    made = subprocess.run(["make", "-n", "--no-print-directory", "similarity", f"ASSIGNMENT={ASSIGNMENT}",
                           "THRESHOLD=0.8"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    command = shlex.split(made.strip().splitlines()[-1])
    assert command[1:] == ["-m", "instructor.similarity", "--assignment", ASSIGNMENT, "--threshold", "0.8"], made
    (tmp_path / "similarity-report.md").unlink()
    subprocess.run([sys.executable, *command[1:]], cwd=tmp_path, check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (tmp_path / "similarity-report.md").read_text() == report


@pytest.mark.parametrize("corrupt", [None, ("points", "ten"), ("grade_id", 3), ("schema_version", 2),
                                     ("schema_version", 4), ("surprise", True)])
def test_the_metadata_check_agrees_with_nbgraders(corrupt):
    """CheckCellMetadata (its schema's validator built once) passes and refuses what nbgrader's does,
    with the same error."""
    from nbgrader.preprocessors import CheckCellMetadata as NbgraderCheck

    from instructor.nbgrader_hooks import CheckCellMetadata

    nb = nbformat.read(ROOT / "solutions" / "module14" / "q1_bradley_terry.ipynb", as_version=4)
    if corrupt:
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))
        cell.metadata.nbgrader[corrupt[0]] = corrupt[1]
    outcomes = []
    for checker in (NbgraderCheck(), CheckCellMetadata(), CheckCellMetadata()):  # the second reuses the validator
        try:
            checker.preprocess(nbformat.from_dict(nb), {})
            outcomes.append("ok")
        except Exception as err:  # noqa: BLE001 - whatever nbgrader raises, ours must raise too
            outcomes.append(f"{type(err).__name__}: {err}")
    assert outcomes[0] == outcomes[1] == outcomes[2]
    assert (outcomes[0] == "ok") == (corrupt is None), outcomes
