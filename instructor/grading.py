"""Verdicts decided where student code never runs.

Why: any assert that runs in the student's kernel can be defeated by that kernel (rebinding
``float``, an IPython transformer that turns every later cell into ``pass``, ...). So at grading time
each autograded test cell is replaced by a *probe*, and the verdict is decided here, in the
instructor's Python (nbgrader's own process):

1. An assignment's checks live in ``instructor/checks/<assignment>.py``: a function
   ``checks(rng) -> {grade_id: [Check, ...]}``. A ``Check`` is an expression over the names the
   student defines (``"bt_probability(g)"``) plus the inputs it is evaluated on (``g=...``), drawn
   from ``rng`` where they should be hidden and random: seeded afresh for every notebook graded, or
   with the seed stored from an earlier run (``stored_seed``), so a regrade draws the same inputs.
2. The expected value is the same expression evaluated here on the *instructor's* solution notebook
   (``solutions/<assignment>/<notebook>.ipynb``, its code cells run in a private namespace): one home
   for every answer, also for bad input (the reference raises ``ValueError`` -> the student must too).
3. The probe sent to the kernel holds only the expressions, the inputs and a fresh nonce. It
   evaluates the expressions in the student's namespace and publishes one record of plain data
   (course_lib/run/kernel_codec.py) as a display output of a private MIME type.
4. ``decide`` reads that record (as data: JSON numbers, strings, lists), compares it with the
   expected values using this module's comparisons, and returns the verdict. A missing, duplicated,
   forged (wrong nonce) or malformed record scores 0 with that reason.

What a student can still do: print anything, including a fake record. It earns points only if its
numbers are the right answers to inputs drawn for this grading run, i.e. if something in the notebook
computed them. The comparisons, tolerances and pass/fail never run in the student's process.

Simplification said out loud: a test cell is all-or-nothing (every check of the cell must pass for
its points), as nbgrader scores a cell; ``why`` texts of hidden checks are shown to the student, their
inputs and expected values never are.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import math
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.run import kernel_codec
from course_lib.run.kernel_codec import decode, encode, raised

MIME = "application/vnd.course.grading-record+json"
MAX_RECORD_BYTES = 4_000_000


@dataclass(frozen=True)
class Check:
    """One expression the student's namespace must evaluate like the reference's.

    ``expr`` uses the student's names and the keys of ``inputs``; ``why`` says what is checked in
    words a student may read (for hidden checks, without the inputs); ``visible`` checks are the
    ones the notebook shows, so their inputs, expected and actual values appear in feedback.
    Numbers compare with ``|got - expected| <= tol + rtol * |expected|``; ``unordered`` compares
    lists as multisets (e.g. the roles of a run).
    """

    expr: str
    why: str
    inputs: dict = field(default_factory=dict)
    visible: bool = False
    tol: float = 1e-9
    rtol: float = 1e-9
    unordered: bool = False


def check(expr: str, why: str, *, visible: bool = False, tol: float = 1e-9, rtol: float = 1e-9,
          unordered: bool = False, **inputs) -> Check:
    """Shorthand: ``check("f(x)", "f at a random point", x=rng.uniform(-1, 1))``."""
    return Check(expr, why, inputs, visible, tol, rtol, unordered)


def load_checks(assignment: str, rng) -> dict[str, list[Check]]:
    """The assignment's checks for one grading run (``instructor/checks/<assignment>.py``)."""
    module = importlib.import_module(f"instructor.checks.{assignment}")
    table = module.checks(rng)
    for grade_id, items in table.items():
        if not items or not all(isinstance(c, Check) for c in items):
            raise ValueError(f"checks for {grade_id!r} must be a non-empty list of Check")
    return table


SEEDS_ENV = "COURSE_GRADING_SEEDS"


def draw_seed() -> int:
    """A fresh seed from the OS for one notebook's grading run (inputs nobody can predict)."""
    return secrets.randbits(64)


def stored_seed(notebook: str) -> int | None:
    """The seed to reuse for ``notebook`` (a regrade), from ``$COURSE_GRADING_SEEDS``: a JSON object
    ``{notebook name: seed}``, or the path of a file holding one. None: draw a fresh one."""
    raw = os.environ.get(SEEDS_ENV, "").strip()
    if not raw:
        return None
    try:
        table = json.loads(raw if raw.startswith("{") else Path(raw).read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"${SEEDS_ENV} must be a JSON object {{notebook: seed}} or a file holding one: "
                         f"{err}") from err
    seed = table.get(notebook) if isinstance(table, dict) else None
    if seed is not None and (type(seed) is not int or seed < 0):
        raise ValueError(f"${SEEDS_ENV}[{notebook!r}] must be a non-negative integer, got {seed!r}")
    return seed


def new_rng(seed: int | None = None):
    """The generator every hidden input of one notebook's grading run is drawn from: the same
    ``seed`` (stored with the verdicts) draws the same inputs, so a regrade can reproduce them;
    None draws a fresh seed."""
    import numpy as np

    return np.random.default_rng(draw_seed() if seed is None else seed)


# ------------------------------------------------------------------------------ variants


GIVEN_HEADER = ("# Given (locked): compute your answers from these names. When graded, this cell holds\n"
                "# numbers drawn for you (your variant), and your answers must follow them.\n")


def variant_seed(assignment: str, student: str) -> int:
    """The seed of one student's variant: the same student and assignment always draw the same numbers."""
    return int.from_bytes(hashlib.sha256(f"{assignment}/{student}".encode()).digest()[:8], "big")


def given_cells(assignment: str, student: str) -> dict[str, str]:
    """``{grade_id: source}`` of the assignment's given cells for ``student``'s variant.

    An assignment's checks module may name locked cells of given numbers (``GIVEN = {grade_id:
    draw}``, ``draw(rng) -> {name: value}``); at grading time their source is replaced by the
    student's variant, in the notebook and in the reference alike, so answers computed from the
    names follow while numbers copied from someone else do not. Empty without GIVEN or a student.
    """
    given = getattr(importlib.import_module(f"instructor.checks.{assignment}"), "GIVEN", {})
    if not given or not student:
        return {}
    rng = new_rng(variant_seed(assignment, student))
    out = {}
    for grade_id in sorted(given):
        values = given[grade_id](rng)
        out[grade_id] = GIVEN_HEADER + "".join(f"{name} = {value!r}\n" for name, value in values.items())
    return out


def normalised_id(student_id) -> str:
    """A student id as typed ids are compared with the grader's: surrounding spaces and case ignored."""
    return str(student_id).strip().lower()


def _id_cells(assignment: str) -> dict[str, str]:
    """``{grade_id: variable}``: the cells where a student types their id (``STUDENT_ID_CELLS``)."""
    return getattr(importlib.import_module(f"instructor.checks.{assignment}"), "STUDENT_ID_CELLS", {})


def reference_id_cells(assignment: str, student: str) -> dict[str, str]:
    """``{grade_id: source}`` that puts ``student``'s own id into the reference's id cells.

    A report a student reads is drawn from the id they type (Q5), so the reference must read the
    report of the id being graded: the expected answers follow the submitter's id, never the typed
    one. Replaced in the reference only (the student's notebook keeps what was typed)."""
    if not student:
        return {}
    return {grade_id: f"{name} = {student!r}\n" for grade_id, name in _id_cells(assignment).items()}


def typed_id(source: str, name: str) -> str | None:
    """The string last assigned to ``name`` at the top level of ``source`` (read, never run); None
    when there is none or it is not a plain string."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
            found = value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
    return found


def id_check(assignment: str, nb, student: str) -> dict | None:
    """What the student typed in the notebook's id cell, against the id being graded: ``{"cell",
    "typed", "graded_for", "matches", "notice", "flag"}`` (``notice``: a sentence for the feedback,
    None when the ids match; ``flag``: another id was typed, so the report asks for a review), or
    None when the notebook has no id cell or no student."""
    cells = _id_cells(assignment) if student else {}
    for cell in nb.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if cell.get("cell_type") != "code" or grade_id not in cells:
            continue
        typed = typed_id(cell.source, cells[grade_id])
        matches = typed is not None and normalised_id(typed) == normalised_id(student)
        if matches:
            notice = None
        elif typed is None or not normalised_id(typed):
            notice = (f"no student id was typed in {grade_id} (a plain string is needed); the passport was graded "
                      f"against the report of your id, {student!r}")
        else:
            notice = (f"you answered the report of id {normalised_id(typed)!r}; graded against yours, "
                      f"{normalised_id(student)!r}")
        flag = not matches and typed is not None and bool(normalised_id(typed))  # someone else's id: review
        return {"cell": grade_id, "typed": typed, "graded_for": student, "matches": matches, "notice": notice,
                "flag": flag}
    return None


# ------------------------------------------------------------------------------ the reference


def code_cells(nb, given: dict[str, str] | None = None) -> list[str]:
    """Source of the cells a reference runs: every code cell except autograded test cells, with
    the cells named in ``given`` (a student's variant, ``given_cells``) replaced."""
    out = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and not (meta.get("grade") and not meta.get("solution")):
            out.append((given or {}).get(meta.get("grade_id"), cell.source))
    return out


def reference_namespace(solution_path: Path, given: dict[str, str] | None = None) -> dict:
    """Run the instructor's solution notebook (its non-test code cells, ``given`` cells replaced)
    in a private namespace."""
    import nbformat
    from IPython.core.inputtransformer2 import TransformerManager

    nb = nbformat.read(str(solution_path), as_version=4)
    namespace: dict = {"__name__": "__reference__"}
    transform = TransformerManager().transform_cell
    with contextlib.redirect_stdout(io.StringIO()):
        for source in code_cells(nb, given):
            exec(compile(transform(source), str(solution_path), "exec"), namespace)  # noqa: S102 - instructor code
    return namespace


def evaluate(c: Check, namespace: dict) -> dict:
    """Tagged value of ``c.expr`` in ``namespace`` (how the reference gets its expected values)."""
    bound = {k: decode(encode(v)) for k, v in c.inputs.items()}  # exactly what the probe will see
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return encode(eval(c.expr, namespace, bound))  # noqa: S307 - instructor code
    except Exception as err:  # noqa: BLE001 - an exception is the expected "value" of bad input
        return raised(err)


# ------------------------------------------------------------------------------ the probe


_PROBE_MAIN = '''
def _course_probe(namespace, plan):
    results = []
    for item in plan["calls"]:
        try:
            bound = {key: decode(value) for key, value in item["inputs"].items()}
            results.append(encode(eval(item["expr"], namespace, bound)))
        except KeyboardInterrupt:
            raise
        except BaseException as err:
            results.append(raised(err))
    from IPython.display import publish_display_data
    publish_display_data({plan["mime"]: {"nonce": plan["nonce"], "grade_id": plan["grade_id"],
                                         "results": results}})


_course_probe(NAMESPACE, PLAN)
'''


@dataclass
class Plan:
    """One test cell's checks for one grading run: what the kernel gets, and what stays here."""

    grade_id: str
    checks: list[Check]
    expected: list[dict]
    nonce: str = field(default_factory=lambda: secrets.token_hex(16))

    def probe_source(self) -> str:
        payload = {"grade_id": self.grade_id, "nonce": self.nonce, "mime": MIME,
                   "calls": [{"expr": c.expr, "inputs": {k: encode(v) for k, v in c.inputs.items()}}
                             for c in self.checks]}
        program = Path(kernel_codec.__file__).read_text() + _PROBE_MAIN
        return (
            "# Grading probe (made at grading time by instructor/grading.py; the verdict is decided\n"
            "# outside this notebook). The test you saw is shown here in the feedback.\n"
            "__import__('builtins').exec(\n"
            f"    {program!r},\n"
            "    {'__builtins__': __import__('builtins'), '__name__': '__course_probe__',\n"
            "     'NAMESPACE': __import__('builtins').globals(),\n"
            f"     'PLAN': __import__('json').loads({json.dumps(payload, allow_nan=False)!r})}})\n"
        )


def make_plans(table: dict[str, list[Check]], reference: dict) -> dict[str, Plan]:
    return {gid: Plan(gid, items, [evaluate(c, reference) for c in items]) for gid, items in table.items()}


# ------------------------------------------------------------------------------ comparing


def _number(tagged) -> float | None:
    """A real number from tagged data: a float, an int or a 1-element numeric array; else None."""
    tag = tagged.get("t") if isinstance(tagged, dict) else None
    if tag in ("int", "float"):
        return float(tagged["v"])
    if tag == "array" and tagged.get("kind") in ("f", "i") and len(tagged.get("v", [])) == 1:
        return float(tagged["v"][0])
    return None


def _close(got: float, exp: float, c: Check) -> bool:
    if math.isnan(exp) or math.isinf(exp):
        return got == exp or (math.isnan(exp) and math.isnan(got))
    return math.isfinite(got) and abs(got - exp) <= c.tol + c.rtol * abs(exp)


def _describe(tagged) -> str:
    tag = tagged.get("t") if isinstance(tagged, dict) else None
    if tag in ("float", "int", "bool", "str"):
        return repr(tagged["v"]) if tag != "float" else f"{float(tagged['v']):.10g}"
    if tag == "none":
        return "None"
    if tag == "array":
        values = ", ".join(f"{float(v):.6g}" for v in tagged["v"][:8])
        return f"array of shape {tuple(tagged['shape'])} [{values}{', ...' if len(tagged['v']) > 8 else ''}]"
    if tag in ("list", "tuple", "set"):
        inner = ", ".join(_describe(x) for x in tagged["v"][:8])
        return {"list": f"[{inner}]", "tuple": f"({inner})", "set": f"{{{inner}}}"}[tag]
    if tag == "dict":
        return "a dict"
    if tag == "raised":
        return f"raises {tagged['types'][0]}"
    return f"an object of type {tagged.get('type', '?')}" if tag == "object" else "nothing readable"


def _malformed(tagged) -> str | None:
    """What makes tagged data from the kernel inconsistent in itself (None when it is well formed).

    An array's values must be exactly as many as its shape says (an empty list of values for a
    shape of (3, 3) was how a submission whose arrays were rewritten in flight passed), a
    container's ``v`` must be a list and a dict's items pairs; checked all the way down."""
    if not isinstance(tagged, dict) or not isinstance(tagged.get("t"), str):
        return "unreadable result"
    tag = tagged["t"]
    scalar = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}.get(tag)
    if scalar:
        value = tagged.get("v")
        ok = type(value) in scalar or (tag == "float" and value in ("nan", "inf", "-inf"))
        return None if ok else f"malformed {tag}"
    if tag == "array":
        shape, values = tagged.get("shape"), tagged.get("v")
        if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape) \
                or not isinstance(values, list) or tagged.get("kind") not in ("f", "i", "b"):
            return "malformed array"
        if len(values) != math.prod(shape):
            return f"malformed array: {len(values)} values for shape {tuple(shape)}"
        if not all(type(v) in (int, float, bool) or v in ("nan", "inf", "-inf") for v in values):
            return "malformed array: values that are not numbers"
        return None
    if tag in ("list", "tuple", "set", "dict"):
        items = tagged.get("v")
        if not isinstance(items, list):
            return f"malformed {tag}"
        if tag == "dict":
            if not all(isinstance(kv, list) and len(kv) == 2 for kv in items):
                return "malformed dict"
            items = [x for kv in items for x in kv]
        return next(filter(None, map(_malformed, items)), None)
    return None


def compare(got, exp: dict, c: Check) -> str | None:
    """None when ``got`` (tagged data from the kernel) matches ``exp``; else what is wrong, in words
    that never contain the expected value (the caller adds details for visible checks only)."""
    problem = _malformed(got)
    if problem:
        return problem
    etag, gtag = exp["t"], got["t"]
    if etag == "raised":
        if gtag != "raised":
            return f"should raise {exp['types'][0]}, but returned a value"
        if exp["types"][0] not in got.get("types", []):
            return f"should raise {exp['types'][0]}, but raised {got['types'][0]}"
        return None
    if gtag == "raised":
        return f"raised {got['types'][0]}"
    if etag in ("float", "int") or (etag == "array" and exp["shape"] == []):
        value, expected = _number(got), _number(exp)
        if value is None or gtag == "bool":
            return f"should be a number, got {_describe(got) if gtag != 'object' else got.get('type')}"
        return None if _close(value, expected, c) else "wrong value"
    if etag == "array":
        if gtag != "array":
            return "should be a NumPy array"
        if got["shape"] != exp["shape"]:
            return f"wrong shape {tuple(got['shape'])}"
        ok = all(_close(float(g), float(e), c) for g, e in zip(got["v"], exp["v"]))
        return None if ok else "wrong values"
    if etag in ("list", "tuple", "set"):
        if gtag not in ("list", "tuple", "set") and not (gtag == "array" and etag != "set"):
            return f"should be a sequence, got {_describe(got)}"
        items = got["v"] if gtag != "array" else [{"t": "float", "v": v} for v in got["v"]]
        if len(items) != len(exp["v"]):
            return f"wrong number of items ({len(items)})"
        if c.unordered or etag == "set":
            key = lambda x: json.dumps(x, sort_keys=True)  # noqa: E731
            return None if sorted(map(key, items)) == sorted(map(key, exp["v"])) else "wrong items"
        for index, (g, e) in enumerate(zip(items, exp["v"])):
            problem = compare(g, e, c)
            if problem:
                return f"item {index}: {problem}"
        return None
    if etag == "dict":
        if gtag != "dict":
            return "should be a dict"
        gmap = {json.dumps(k, sort_keys=True): v for k, v in got["v"]}
        expected_keys = {json.dumps(k, sort_keys=True) for k, _ in exp["v"]}
        if len(gmap) != len(got["v"]):
            return "repeated keys"
        extra = [k for k, _ in got["v"] if json.dumps(k, sort_keys=True) not in expected_keys]
        if extra:
            return f"unexpected key {_describe(extra[0])}"
        for k, e in exp["v"]:
            key = json.dumps(k, sort_keys=True)
            if key not in gmap:
                return f"missing key {_describe(k)}"
            problem = compare(gmap[key], e, c)
            if problem:
                return f"key {_describe(k)}: {problem}"
        return None
    if etag == "bool":
        return None if gtag == "bool" and got["v"] == exp["v"] else "wrong answer"
    if etag in ("str", "none"):
        return None if got == exp else "wrong answer"
    return "the reference value cannot be compared (fix the check)"


# ------------------------------------------------------------------------------ deciding


@dataclass
class Verdict:
    grade_id: str
    passed: bool
    reasons: list[str]  # for the student (feedback): never a hidden input or expected value
    checks: int
    record_ok: bool = True  # False: no usable record, so no check could be compared


def _records(outputs: list) -> list:
    found = []
    for out in outputs:
        data = out.get("data") or {}
        if out.get("output_type") in ("display_data", "execute_result") and MIME in data:
            found.append(data[MIME])
    return found


def decide(plan: Plan, outputs: list, not_run: str | None = None) -> Verdict:
    """The verdict on one test cell from the outputs its probe left (data only); ``not_run`` is the
    reason the cell did not finish (the notebook was stopped), given as the cell's only reason."""
    def fail(reason: str) -> Verdict:
        return Verdict(plan.grade_id, False, [reason], len(plan.checks), record_ok=False)

    if not_run:
        return fail(not_run)
    records = _records(outputs)
    try:
        size = len(json.dumps(records, default=str))
    except (TypeError, ValueError):
        size = MAX_RECORD_BYTES + 1
    if size > MAX_RECORD_BYTES:
        return fail("no usable grading record: the cell's records are too large")
    mine = [r for r in records if isinstance(r, dict) and r.get("nonce") == plan.nonce]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if not mine:
        if records:
            return fail("no valid grading record: the only records carry a wrong nonce (forged output?)")
        if any(o.get("ename") in ("CellTimeoutError", "KeyboardInterrupt") for o in errors):
            return fail("stopped by the time limit while the tests ran")
        if errors:
            return fail(f"the tests could not run: {errors[-1].get('ename', 'an error')} was raised "
                        "(did code in the notebook change Python or IPython?)")
        return fail("no grading record: the test did not report a result "
                    "(did code in the notebook change how cells run?)")
    if len(mine) > 1:
        return fail("more than one grading record for this test (forged output?)")
    record = mine[0]
    results = record.get("results")
    if record.get("grade_id") != plan.grade_id or not isinstance(results, list) or len(results) != len(plan.checks):
        return fail("malformed grading record")
    reasons = []
    for c, got, exp in zip(plan.checks, results, plan.expected):
        problem = compare(got, exp, c)
        if problem is None:
            continue
        if c.visible:
            inputs = ", ".join(f"{k} = {_describe(encode(v))}" for k, v in c.inputs.items())
            detail = f"`{c.expr}`" + (f" with {inputs}" if inputs else "")
            if isinstance(got, dict) and got.get("t") == "raised":
                msg = str(got.get("msg", ""))[:150]
                shown = f"raised {got['types'][0]}" + (f": {msg}" if msg else "")
            else:
                shown = _describe(got) if isinstance(got, dict) else "nothing readable"
            reasons.append(f"{c.why}: {detail} should give {_describe(exp)}; got {shown} ({problem})")
        else:
            reasons.append(f"hidden test: {c.why} ({problem})")
    return Verdict(plan.grade_id, not reasons, reasons, len(plan.checks))
