"""Training checks at grading time: the tiny GPT trained through a student's kernel, judged here.

An assignment's checks module may name *driven* test cells (``DRIVEN = {grade_id: run}``, see
instructor/checks/lab14.py). While ``SandboxedExecute`` grades such a notebook, right after the
driven cell's probe has run, ``drive`` trains the tiny GPT with ``course_lib.run.lab_check``: the model,
the data, sampling, rewards and held-out evaluation live in this process (nbgrader's), and each step
sends one request to the student's kernel as a cell of plain data (a JSON literal) and reads one
answer back as a display record carrying a fresh nonce (the same private MIME type as the probes).
The kernel only evaluates the student's functions; what comes back is checked, compared with the
configured objective and the run is decided here (``course_lib/run/lab_check.py`` explains the verdict).

The SFT baseline and the DPO pairs are prepared once per course in ``.lab-cache/`` (or
``$COURSE_LAB_CACHE``) by ``warm`` before the batch, so no student's time budget pays for them.
"""

from __future__ import annotations

import importlib
import json
import os
import secrets
import time
from pathlib import Path

from instructor import grading

ADAPTER_NAME = "_course_lab_call"


def driven_runs(assignment: str) -> dict[str, str]:
    """``{grade_id: run}`` for the assignment's training cells (empty for most assignments)."""
    try:
        module = importlib.import_module(f"instructor.checks.{assignment}")
    except ModuleNotFoundError:
        return {}
    return dict(getattr(module, "DRIVEN", {}))


def cache_dir(root: Path | str = ".") -> Path:
    return Path(os.environ.get("COURSE_LAB_CACHE") or Path(root) / ".lab-cache")


def warm(root: Path, assignment: str) -> str | None:
    """Prepare the SFT baseline and pairs for an assignment with driven cells; a line for the log."""
    if not driven_runs(assignment):
        return None
    from course_lib.run import lab_check

    start = time.time()
    setup = lab_check.prepare(lab_check.LabConfig(), cache_dir(root))
    return (f"lab training check ready in {time.time() - start:.1f} s: SFT baseline "
            f"{setup.baseline_accuracy:.1%} held-out accuracy, {setup.pairs['n_pairs']} DPO pairs")


def _define_adapter() -> str:
    from course_lib.run.lab_check import KERNEL_ADAPTER

    # Defined in the student's namespace (its functions are looked up there by name) under a name
    # of our own; a student who rebinds it only changes the answers, which are then checked here.
    return KERNEL_ADAPTER.replace("def _lab_call(", f"def {ADAPTER_NAME}(") + "\n"


def _request_source(request: dict, nonce: str) -> str:
    return (
        "from IPython.display import publish_display_data as _course_publish\n"
        f"_course_publish({{{grading.MIME!r}: {{'nonce': {nonce!r}, 'answer': "
        f"{ADAPTER_NAME}({json.dumps(request)!r})}}}})\n"
    )


def _answer(outputs: list, nonce: str) -> dict:
    records = [r for r in grading._records(outputs) if isinstance(r, dict) and r.get("nonce") == nonce]
    if len(records) != 1:
        errors = [o for o in outputs if o.get("output_type") == "error"]
        if errors:
            err = errors[-1]
            return {"error": f"{err.get('ename', 'Error')}: {str(err.get('evalue', ''))[:300]}"}
        return {"error": "no answer came back from the notebook (did code in it change how cells run?)"}
    text = records[0].get("answer")
    if not isinstance(text, str) or len(text) > grading.MAX_RECORD_BYTES:
        return {"error": "the answer was not JSON text"}
    try:
        answer = json.loads(text)
    except ValueError:
        return {"error": "the answer was not JSON text"}
    return answer if isinstance(answer, dict) else {"error": "the answer was not a JSON object"}


def drive(grade_id: str, run: str, execute, root: Path | str = ".") -> grading.Verdict:
    """Train the tiny GPT with the functions in the kernel behind ``execute``; decide the run here.

    ``execute(source) -> outputs`` runs one cell of source in the student's kernel (raising when the
    kernel died or the time ran out) and returns the cell's outputs.
    """
    from course_lib.run import lab_check

    def fail(reason: str) -> grading.Verdict:
        return grading.Verdict(grade_id, False, [f"training check ({run}): {reason}"], 1)

    try:
        execute(_define_adapter())
    except Exception as err:  # noqa: BLE001 - a dead kernel or the time limit: this cell fails
        return fail(f"could not start: {type(err).__name__}")

    def remote(op: str, payload: dict) -> dict:
        nonce = secrets.token_hex(16)
        return _answer(execute(_request_source({"op": op, "payload": payload}, nonce)), nonce)

    setup = lab_check.prepare(lab_check.LabConfig(), cache_dir(root))
    try:
        verdict = lab_check.RUNS[run](remote, setup)
    except Exception as err:  # noqa: BLE001 - the kernel died or the notebook's time ran out mid-run
        return fail(f"stopped: {type(err).__name__}: {str(err)[:200]}")
    if not verdict["passed"]:
        return fail(verdict["reason"])
    return grading.Verdict(grade_id, True, [], 1)
