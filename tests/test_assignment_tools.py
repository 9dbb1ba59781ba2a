"""Fast checks of the instructor tools (no kernels): the static scan, the feedback filter, and
the solutions/expected constants against the course library (the instructor's own cross-check).
"""

from __future__ import annotations

import sys

import nbformat
import pytest
from conftest import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from instructor.nbgrader_hooks import HideHiddenTests, split_hidden, verdict  # noqa: E402
from instructor.scan import scan_notebook, source_facts  # noqa: E402

SOURCE = ROOT / "solutions" / "module14" / "q1_bradley_terry.ipynb"


def _scan(tmp_path, code: str) -> list[str]:
    """Scan a copy of the Q1 release whose answer cell holds ``code``."""
    nb = nbformat.read(str(ROOT / "exercises" / "module14" / SOURCE.name), as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "q1_functions":
            cell.source = code
    path = tmp_path / SOURCE.name
    nbformat.write(nb, str(path))
    facts = source_facts(nbformat.read(str(SOURCE), as_version=4))
    return [f.reason for f in scan_notebook(path, facts)]


@pytest.mark.parametrize("code, expected", [
    ("import builtins\nbuiltins.abs = lambda x: 0", "imports `builtins`"),
    ("__builtins__.float = int", "touches `__builtins__`"),
    ("np.isclose = lambda *a, **k: True", "assigns attribute `np.isclose`"),
    ("import math as m\nm.isclose = print", "assigns attribute `m.isclose`"),
    ("setattr(np, 'isclose', print)", "calls `setattr()`"),
    ("float = lambda x: 0.0", "rebinds `float`"),
    ("def ValueError():\n    pass", "rebinds `ValueError`"),
    ("import numpy as math", "rebinds `math`"),
    ("round = lambda x: 0", "shadows the builtin `round`"),
    ("def f():\n    pass\nf.__code__ = (lambda: 1).__code__", "uses attribute `__code__`"),
    ("import sys\nsys._getframe(1)", "imports `sys`"),
    ("get_ipython().events.register('pre_run_cell', print)", "calls `get_ipython()`"),
    ("exec('x = 1')", "calls `exec()`"),
    ("class Liar:\n    def __eq__(self, other):\n        return True", "defines __eq__"),
    ("class F(float):\n    pass", "subclasses float"),
    ("%load_ext autoreload\ndef broken(:\n", "cannot be parsed"),
])
def test_scan_flags_tampering(tmp_path, code, expected):
    reasons = _scan(tmp_path, code)
    assert any(expected in r for r in reasons), reasons


def test_scan_accepts_honest_code(tmp_path):
    honest = (
        "import math\nimport numpy as np\n\n"
        "def bt_probability(gap):\n    float = 3  # a local name shadows nothing outside\n"
        "    return 1 / (1 + math.exp(-gap))\n\n"
        "def win_rate_to_gap(p):\n    if not 0 < p < 1:\n        raise ValueError('p')\n"
        "    return math.log(p / (1 - p))\n"
        "values = [bt_probability(g) for g in range(3)]\nprint(np.round(values, 3))\n"
    )
    assert _scan(tmp_path, honest) == []


def test_scan_reports_an_unreadable_notebook(tmp_path):
    path = tmp_path / "q1_bradley_terry.ipynb"
    path.write_text("{ not json")
    facts = source_facts(nbformat.read(str(SOURCE), as_version=4))
    (flag,) = scan_notebook(path, facts)
    assert "not a readable notebook" in flag.reason


def test_split_hidden_and_verdict():
    source = 'x = f(1)\nassert x == 1, "visible"\n### BEGIN HIDDEN TESTS\nassert f(7) == 2, "hidden test: seven"\n### END HIDDEN TESTS'
    visible, hidden, start = split_hidden(source)
    assert "f(7)" not in visible and "f(7)" in hidden and start == 3
    tb = ["\x1b[36mCell\x1b[39m \x1b[32mIn[3]\x1b[39m\x1b[32m, line 4\x1b[39m\n----> 4 assert f(7) == 2"]
    hidden_fail = [{"output_type": "error", "ename": "AssertionError", "evalue": "hidden test: seven", "traceback": tb}]
    (out,) = verdict(hidden_fail, hidden, start)
    assert out["evalue"] == "AssertionError: hidden test: seven" and "f(7)" not in "".join(out["traceback"])
    leaky = [{"output_type": "stream", "name": "stdout", "text": "called with 7"},
             {"output_type": "error", "ename": "ValueError", "evalue": "bad input 7", "traceback": tb}]
    (out,) = verdict(leaky, hidden, start)
    assert "7" not in out["evalue"] and "withheld" in out["evalue"]
    visible_fail = [{"output_type": "error", "ename": "AssertionError", "evalue": "visible",
                     "traceback": [tb[0].replace("line 4", "line 2")]}]
    assert verdict(visible_fail, hidden, start)[0]["evalue"] == "AssertionError: visible"
    assert verdict([], hidden, start) == []


def test_lecture_numbers_in_visible_tests_match_the_course_library():
    """The literals the students see are the lecture's numbers, as course_lib computes them."""
    from course_lib import advantages, budgets, preference

    assert abs(preference.win_rate_to_gap(0.9) - 2.1972) < 1e-4
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
    texts = {p.name: p.read_text() for p in (ROOT / "exercises" / "module14").glob("*.ipynb")}
    for literal, notebook in (("2.1972", "q1_bradley_terry.ipynb"), ("0.6118", "q2_dpo_margins.ipynb"),
                              ("0.18375", "q3_group_baselines.ipynb"), ("39.2511", "q4_budgets.ipynb")):
        assert literal in texts[notebook], (literal, notebook)


def test_feedback_filter_hides_hidden_tests_and_later_student_output():
    nb = nbformat.v4.new_notebook()
    test = nbformat.v4.new_code_cell('assert f(1) == 1\n### BEGIN HIDDEN TESTS\nassert f(7) == 2, "hidden test: seven"\n### END HIDDEN TESTS')
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t1", "points": 1}
    test.outputs = [nbformat.v4.new_output("stream", name="stdout", text="f called with 7")]
    before = nbformat.v4.new_code_cell("print(1)")
    before.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1")]
    after = nbformat.v4.new_code_cell("print(CALLS)")
    after.outputs = [nbformat.v4.new_output("stream", name="stdout", text="[7]")]
    nb.cells = [before, test, after]
    out, _ = HideHiddenTests(source_directory="/nonexistent").preprocess(nb, {"nbgrader": {}})
    assert out.cells[0].outputs[0]["text"] == "1"
    assert "f(7)" not in out.cells[1].source and out.cells[1].outputs == []
    assert "7" not in out.cells[2].outputs[0]["text"]


def test_parse_log_times_notebooks_and_keeps_the_exception_line():
    from instructor.autograde import parse_log

    log = "\n".join([
        "100.000 INFO Creating/updating student with ID 'ann': {}",
        "100.500 INFO Sanitizing /c/submitted/ann/module14/q1_bradley_terry.ipynb",
        "102.000 INFO Sanitizing /c/submitted/ann/module14/q2_dpo_margins.ipynb",
        "103.250 ERROR There was an error processing assignment: /c/submitted/ann/module14",
        "103.300 ERROR Traceback (most recent call last):",
        '      File "x.py", line 1, in <module>',
        "    nbclient.exceptions.DeadKernelError: Kernel died",
        "104.000 INFO Creating/updating student with ID 'ben': {}",
        "104.100 INFO Sanitizing /c/submitted/ben/module14/q1_bradley_terry.ipynb",
        "105.600 INFO Writing 10 bytes to /c/autograded/ben/module14/q1_bradley_terry.ipynb",
    ])
    seconds, errors = parse_log(log, ["ann", "ben"])
    assert seconds == {"ann/q1_bradley_terry.ipynb": 1.5, "ann/q2_dpo_margins.ipynb": 1.25,
                       "ben/q1_bradley_terry.ipynb": 1.5}
    assert errors == {"ann": "nbclient.exceptions.DeadKernelError: Kernel died"}
