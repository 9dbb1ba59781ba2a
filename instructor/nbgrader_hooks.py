"""nbgrader plug-ins used by nbgrader_config.py: probes in, verdicts out, a sandbox-only Execute.

``nbgrader autograde`` runs, per notebook (see ``Autograde.autograde_preprocessors``):

- ``InjectProbes``: every autograded test cell's source is replaced by a probe for this grading run
  (instructor/grading.py): expressions and inputs only, a fresh nonce, nothing to compare against.
  Hidden inputs are drawn from the notebook's seed in ``$COURSE_GRADING_SEEDS`` (``make autograde``
  stores each notebook's seed and a regrade reuses it) or from a fresh one.
  The plans (checks and expected values, from the solution notebook) stay in this process.
- ``SandboxedExecute``: nbgrader's Execute, but only in the sandbox kernel chosen by
  ``make autograde`` (``$COURSE_SANDBOX_KERNEL``), so a plain ``nbgrader autograde`` cannot run
  submissions with the instructor's rights (``COURSE_ALLOW_UNSANDBOXED=1`` overrides). A cell past
  ``Execute.timeout`` is interrupted; if the kernel ignores the interrupt (a loop that swallows
  ``KeyboardInterrupt``), dies (``os._exit``) or the notebook uses up ``notebook_timeout``, the kernel
  is stopped and the remaining cells are marked "not run" with that reason. Each notebook gets a fresh
  kernel of its own; under ``make autograde`` (``$COURSE_NOTEBOOKS``) the next notebook's kernel is
  started while the current notebook runs, and a kernel is stopped through its launcher as soon as
  the last cell's output is in (``stop_kernel``).
- ``DecideVerdicts``: reads each probe's record as data, decides the cell here, puts the test the
  student saw back as the cell's source and a verdict as its only output (an error output when a
  check failed, so nbgrader's ``SaveAutoGrades`` writes 0 for that cell into the gradebook, else the
  cell's points). Details per cell go to ``$COURSE_VERDICT_DIR`` for ``make autograde``'s report.
  Where the notebook has a student-id cell (Q5: the report a student reads is drawn from the id they
  type), the reference reads the report of the id being graded, and a typed id that is not the
  submitter's is said under that cell (feedback) and listed as a problem (review).

Training cells (``DRIVEN`` in an assignment's checks module, e.g. the lab's): right after such a
cell's probe, ``SandboxedExecute`` lets instructor/lab_grading.py train the tiny GPT through the same
kernel, and ``DecideVerdicts`` takes that run's verdict for the cell (its probe must pass too).

``CheckCellMetadata``: nbgrader's check of the cells' nbgrader metadata (it runs twice per notebook),
with the schema's validator built once per process instead of once per cell.

``generate_feedback`` runs ``FeedbackFilter`` last: outputs of the student's own cells that ran after
a probe are not shown (a function could have stored the hidden inputs and a later cell printed them).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import tempfile
import time
from pathlib import Path
from queue import Empty

from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.session import json_unpacker
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode
from nbgrader import preprocessors as nbgrader_preprocessors
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.nbgraderformat.common import BaseMetadataValidator
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer, Unicode

from instructor import grading, lab_grading, sandbox_kernel, sandbox_limits

STATE = "course_grading"  # key in nbconvert's resources shared by the three preprocessors


MAX_MESSAGE_DEPTH = 64  # levels of nesting a message from the kernel may have (Jupyter's own: under 10)
TOO_DEEP = f"[output dropped: the kernel sent data nested more than {MAX_MESSAGE_DEPTH} levels deep]\n"


def _deeper_than(value, limit: int) -> bool:
    """Whether ``value`` (decoded JSON) nests more than ``limit`` lists and dicts deep (no recursion)."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            todo += [(child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)]
    return False


def unpack_kernel_message(data: bytes):
    """jupyter_client's JSON unpacker for one frame of a message from the sandboxed kernel, where data
    nested too deep to decode, or to write into a notebook later (a display output 50,000 levels deep),
    becomes a frame that reads as a notice whatever part of the message it was: the cell's output
    says what was dropped, and grading goes on."""
    try:
        value = json_unpacker(data)
    except RecursionError:
        value = None
    else:
        if not _deeper_than(value, MAX_MESSAGE_DEPTH):
            return value
    return {"msg_id": "", "msg_type": "stream", "name": "stderr", "text": TOO_DEEP, "data": {"text/plain": TOO_DEEP},
            "metadata": {}, "execution_count": None, "status": "error", "ename": "OutputTooDeep",
            "evalue": TOO_DEEP.strip(), "traceback": [TOO_DEEP.strip()]}


def is_test_cell(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def _label(cell, index: int) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or str(index + 1)


class InjectProbes(Preprocessor):
    """Replace each test cell by this run's probe; keep the plans here (see the module docstring)."""

    enabled = Bool(True)  # nbconvert's preprocessors are off unless enabled
    source_directory = Unicode("solutions", help="Folder of the instructor's source notebooks").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        assignment, notebook = info.get("assignment", ""), info.get("notebook", "")
        solution = Path(self.source_directory) / assignment / f"{notebook}.ipynb"
        seed = grading.stored_seed(notebook)  # a regrade reuses the seed; else a fresh one
        seed = grading.draw_seed() if seed is None else seed
        table = grading.load_checks(assignment, grading.new_rng(seed))
        wanted = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if is_test_cell(c)}
        missing = sorted(wanted - set(table))
        if missing:
            raise ValueError(f"instructor/checks/{assignment}.py has no checks for test cell(s) {missing}")
        student = info.get("student", "")
        given = grading.given_cells(assignment, student)
        ids = grading.reference_id_cells(assignment, student)  # the reference reads the submitter's report
        plans = grading.make_plans({g: table[g] for g in wanted},
                                   grading.reference_namespace(solution, {**given, **ids}))
        shown = {}
        for cell in nb.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if cell.cell_type == "code" and grade_id in given:  # this student's variant
                cell.source = given[grade_id]
            if is_test_cell(cell):
                grade_id = cell.metadata.nbgrader["grade_id"]
                shown[grade_id] = cell.source
                cell.source = plans[grade_id].probe_source()
        resources[STATE] = {"plans": plans, "shown": shown, "not_run": {}, "decided": {}, "seed": seed,
                            "given": given, "answered_for": grading.id_check(assignment, nb, student),
                            "driven": lab_grading.driven_runs(assignment)}
        return nb, resources


class PromptClient(AsyncKernelClient):
    """jupyter_client's client, ready as soon as the kernel has answered ``kernel_info`` on the shell
    channel and published on IOPub (jupyter_client's own checks), without the further 0.2 s of
    silence jupyter_client waits for on IOPub before it returns: nbclient skips every IOPub message
    that is not about its own request, so nothing is lost. Saves 0.2 s per notebook."""

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (math.inf if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                reply = None
            if reply is not None and reply["msg_type"] == "kernel_info_reply":
                try:
                    await self.iopub_channel.get_msg(timeout=0.2)  # IOPub is connected
                except Empty:
                    pass
                else:
                    self._handle_kernel_info_reply(reply)
                    return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")


class SandboxedExecute(Execute):
    """nbgrader's Execute in the sandbox kernel, with a stop for kernels that no longer answer."""

    notebook_timeout = Integer(300, help="Seconds for a whole notebook; later cells are not run").tag(config=True)
    interrupt_grace = Integer(5, help="Seconds a kernel has to stop after an interrupt").tag(config=True)
    student_timeout = Integer(900, help="Seconds for all of one student's notebooks together").tag(config=True)
    max_output_bytes = Integer(1_000_000, help="Bytes of output one cell may keep (grading records apart)"
                               ).tag(config=True)
    kernel_start_tries = Integer(4, help="Tries to start the kernel: one that dies or does not answer while "
                                 "starting (a busy machine) is started again, the reason logged").tag(config=True)
    interrupt_on_timeout = Bool(True)

    _spent: dict[str, float] = {}  # seconds each student's notebooks used so far in this process
    _spare: tuple | None = None  # (kernel manager, sockets' path): the next notebook's kernel, started ahead
    _kernels: dict[str, int] = {}  # kernels started for each student's notebooks so far in this process

    def preprocess(self, nb, resources, km=None):
        sandbox = os.environ.get("COURSE_SANDBOX_KERNEL", "")
        if sandbox:
            self.kernel_name = sandbox
        elif os.environ.get("COURSE_ALLOW_UNSANDBOXED") != "1":
            raise RuntimeError(
                "refusing to run student code outside the sandbox: use `make autograde` "
                "(instructor/autograde.py), or set COURSE_ALLOW_UNSANDBOXED=1 to accept the risk "
                "that a submission runs with your rights (it could read solutions/ or edit the gradebook)"
            )
        self._stop_reason = None
        self._student = resources.get("nbgrader", {}).get("student", "")
        start = time.monotonic()
        left = self.student_timeout - SandboxedExecute._spent.get(self._student, 0.0)
        self._budget = "student" if left < self.notebook_timeout else "notebook"
        self._deadline = start + max(0.0, min(self.notebook_timeout, left))
        self._cell_timeout = self.timeout
        self._output_bytes: dict[int, int] = {}
        resources.setdefault(STATE, {}).setdefault("not_run", {})
        self._ipc = None
        try:
            return super().preprocess(nb, resources, km=km)
        finally:
            spent = SandboxedExecute._spent.get(self._student, 0.0) + time.monotonic() - start
            SandboxedExecute._spent[self._student] = spent
            if self._ipc:  # a launcher that was killed could not remove its kernel's cgroup
                sandbox_limits.release(self._ipc)

    def create_kernel_manager(self):
        """The kernel started for this notebook while the previous one ran (``_start_spare``), if
        any; else a new kernel manager (``_new_kernel_manager``)."""
        spare, SandboxedExecute._spare = SandboxedExecute._spare, None
        self.km, self._ipc = spare or self._new_kernel_manager()
        return self.km

    def _new_kernel_manager(self) -> tuple:
        """(kernel manager, its sockets' path or None). The sandbox has no network: its kernel talks
        over Unix sockets (see sandbox_kernel.py). Its client is ``PromptClient``."""
        km = self.kernel_manager_class(kernel_name=self.kernel_name, config=self.config)
        km.client_factory = PromptClient
        km.session.unpack = unpack_kernel_message  # shared with the client nbclient makes from km
        ipc = None
        if os.environ.get("COURSE_SANDBOX_KERNEL"):
            folder = tempfile.mkdtemp(prefix="ipc-", dir=os.environ.get("COURSE_SANDBOX_TMP") or None)
            ipc = os.path.join(folder, "kernel")
            km.transport, km.ip = "ipc", ipc
        return km, ipc

    def _start_spare(self) -> None:
        """Start the kernel of this process's next notebook now, so that it boots while this notebook
        runs: a fresh sandboxed kernel of its own, exactly as ``create_kernel_manager`` would start it
        later (the next notebook's code is not in it until that notebook runs). ``$COURSE_NOTEBOOKS``
        (set by ``make autograde``) says how many of the student's notebooks this process grades;
        unset, no kernel is started ahead. One that fails to start is left to the next notebook's own
        start (and its retries)."""
        started = SandboxedExecute._kernels[self._student] = SandboxedExecute._kernels.get(self._student, 0) + 1
        if started < int(os.environ.get("COURSE_NOTEBOOKS") or 0):
            self._start_ahead(self.resources.get("metadata", {}).get("path") or None)

    def _start_ahead(self, cwd: str | None) -> None:
        """Launch a kernel (not waiting for it to answer) and keep it for the next notebook."""
        if SandboxedExecute._spare is not None:
            return
        km, ipc = self._new_kernel_manager()
        try:
            run_sync(km.start_kernel)(extra_arguments=self.extra_arguments, cwd=cwd)
        except Exception as err:  # noqa: BLE001 - the next notebook starts its kernel itself
            self.log.warning("the next notebook's kernel could not be started ahead (%s: %s)", type(err).__name__, err)
            stop_kernel(km, ipc)
            return
        SandboxedExecute._spare = (km, ipc)

    @classmethod
    def start_first(cls) -> None:
        """Start the first notebook's kernel as ``nbgrader autograde`` begins (run_nbgrader's zygote
        calls it), so that it boots while nbgrader reads the gradebook and the first notebook: only
        with ``$COURSE_NOTEBOOKS`` and the sandbox's kernel (``$COURSE_SANDBOX_KERNEL``) set."""
        name = os.environ.get("COURSE_SANDBOX_KERNEL")
        if name and int(os.environ.get("COURSE_NOTEBOOKS") or 0) > 0:
            cls(kernel_name=name)._start_ahead(None)

    @classmethod
    def discard_spare(cls) -> None:
        """Stop a kernel started ahead that no notebook used (run_nbgrader calls it as nbgrader ends)."""
        spare, cls._spare = cls._spare, None
        if spare is not None:
            stop_kernel(*spare)

    def _cleanup_kernel(self) -> None:
        """nbclient's clean-up after the last cell (every output is in by then), with ``stop_kernel``
        instead of a shutdown request and polling every 0.1 s for the kernel to exit."""
        if getattr(self, "kc", None) is not None:
            self.kc.stop_channels()
            self.kc = None
        if self.km is not None:
            stop_kernel(self.km, None)
            self.km = None

    @contextlib.contextmanager
    def setup_kernel(self, **kwargs):
        """nbclient's set-up, with the kernel started first by ``start_kernel_with_retries``."""
        self.start_kernel_with_retries(**kwargs)
        with super().setup_kernel(**kwargs):
            yield

    def start_kernel_with_retries(self, **kwargs) -> None:
        """Start the kernel and its client; a kernel that dies before it answers (a thread or process
        it cannot start on a busy machine: "Kernel died before replying to kernel_info") is stopped and
        started again after 1, 2, 4 s, each reason logged. After ``kernel_start_tries`` the error says
        it was the machine, not the submission (``make autograde`` grades the student again)."""
        for attempt in range(1, self.kernel_start_tries + 1):
            if self.km is None:
                self.km = self.create_kernel_manager()
            try:
                if not self.km.has_kernel:
                    self.start_new_kernel(**kwargs)
                self.start_new_kernel_client()
                self._start_spare()
                return
            except Exception as err:  # noqa: BLE001 - any failure to start is retried, then raised
                reason = f"{type(err).__name__}: {err}"
                self._discard_kernel()
                if attempt == self.kernel_start_tries:
                    raise RuntimeError(f"{sandbox_kernel.START_FAILED} {attempt} tries (the machine, not the "
                                       f"submission; last: {reason})") from err
                self.log.warning("the sandboxed kernel did not start (try %d of %d: %s); starting it again",
                                 attempt, self.kernel_start_tries, reason)
                time.sleep(2 ** (attempt - 1))

    def _discard_kernel(self) -> None:
        """Stop a kernel that failed to start, whatever state it is in, and forget it."""
        if self.km is not None:
            with contextlib.suppress(Exception):
                run_sync(self.km.shutdown_kernel)(now=True)
            with contextlib.suppress(Exception):
                run_sync(self.km.cleanup_resources)()
        if getattr(self, "kc", None) is not None:
            with contextlib.suppress(Exception):
                self.kc.stop_channels()
        if self._ipc:  # its launcher may have been killed before it removed the kernel's cgroup
            sandbox_limits.release(self._ipc)
        self.km, self.kc, self._ipc = None, None, None

    def _over_memory(self) -> str | None:
        """Why the kernel's cgroup stopped a process for memory (sandbox_limits), or None."""
        return sandbox_limits.memory_cap_reached(self._ipc) if getattr(self, "_ipc", None) else None

    def _budget_text(self) -> str:
        if self._budget == "student":
            return f"the student's {self.student_timeout} s for all notebooks ran out"
        return f"the notebook used up its {self.notebook_timeout} s"

    def output(self, outs, msg, display_id, cell_index):
        """Keep at most ``max_output_bytes`` of a cell's output (a notice says what was dropped);
        grading records are kept apart, two per cell at most, each within grading.MAX_RECORD_BYTES."""
        content = msg.get("content") or {}
        text = content.get("text")  # a stream: cheap to measure, and what a flood is made of
        size = len(text) if isinstance(text, str) else len(json.dumps(content, default=str))
        record = grading.MIME in (content.get("data") or {})
        key = id(outs)
        if record:
            kept = sum(1 for o in outs if grading.MIME in (o.get("data") or {}))
            if kept < 2 and size <= grading.MAX_RECORD_BYTES:
                return super().output(outs, msg, display_id, cell_index)
            return None
        used = self._output_bytes.get(key, 0)
        self._output_bytes[key] = used + size
        if used + size <= self.max_output_bytes:
            return super().output(outs, msg, display_id, cell_index)
        if used <= self.max_output_bytes:  # the first output past the cap: say so, once
            outs.append(NotebookNode(output_type="stream", name="stderr",
                                     text=f"\n[output stopped: this cell printed more than {self.max_output_bytes} "
                                          "bytes; the rest was dropped]\n"))
        return None

    def _update_display_id(self, display_id, msg):
        content = msg.get("content") or {}
        if len(json.dumps(content, default=str)) <= self.max_output_bytes:
            super()._update_display_id(display_id, msg)

    def _stop(self, reason: str) -> None:
        self._stop_reason = reason
        self.resources[STATE]["stopped"] = reason
        try:
            run_sync(self.km.shutdown_kernel)(now=True)
        except Exception:  # noqa: BLE001 - the kernel may already be gone
            pass

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        label = _label(cell, index)
        not_run = resources[STATE]["not_run"]
        if self._stop_reason is None and time.monotonic() >= self._deadline:
            self._stop(f"{self._budget_text()} before cell {label}")
        if self._stop_reason:
            not_run[index] = f"not run: {self._stop_reason}"
            cell.outputs = []
            return cell, resources
        self.timeout = max(1, min(self._cell_timeout, math.ceil(self._deadline - time.monotonic())))
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            memory = self._over_memory()
            self._stop(f"the kernel was stopped in cell {label}: {memory}" if memory else
                       f"the kernel died in cell {label} (os._exit, a crash or the memory limit)")
            not_run[index] = f"not run: {self._stop_reason}"
            return cell, resources
        except CellTimeoutError:  # nbclient gives up waiting for the interrupted cell's output
            self._stop(f"cell {label} ignored the interrupt after the time limit; the kernel was stopped")
            not_run[index] = f"stopped by the time limit ({self._stop_reason})"
            return cell, resources
        finally:
            self.timeout = self._cell_timeout
            self._stop_strays()
        memory = self._over_memory()
        if memory:  # one of its processes was stopped: the kernel's state is not to be trusted
            self._stop(f"the kernel was stopped after cell {label}: {memory}")
            not_run[index] = f"stopped: {self._stop_reason}"
            return cell, self.resources
        timed_out = any(o.get("ename") == "CellTimeoutError" for o in cell.outputs if o.output_type == "error")
        if timed_out and not self._answers_after_interrupt(cell, index):
            self._stop(f"cell {label} ignored the interrupt after the time limit; the kernel was stopped")
            not_run[index] = f"stopped by the time limit ({self._stop_reason})"
        run = resources[STATE].get("driven", {}).get(label)
        if run and not timed_out and not self._stop_reason:
            resources[STATE]["decided"][label] = lab_grading.drive(label, run, self._source_runner(index, label))
            self.nb.cells[index] = cell  # nbclient's execute_cell stored each exchange's cell at this index
        return cell, self.resources

    def _stop_strays(self) -> None:
        """Processes a cell started do not outlive it (sandbox_kernel.stop_strays)."""
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        if os.environ.get("COURSE_SANDBOX_KERNEL") and process is not None:
            sandbox_kernel.stop_strays(process.pid)

    def _source_runner(self, index: int, label: str):
        """``execute(source) -> outputs`` in this kernel, within the notebook's time (training checks)."""
        def execute(source: str) -> list:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                self._stop(f"{self._budget_text()} in the training check of {label}")
                raise TimeoutError("the notebook's time ran out")
            node = NotebookNode(cell_type="code", source=source, metadata={}, outputs=[], execution_count=None)
            self.timeout = max(1, min(self._cell_timeout, math.ceil(remaining)))
            try:
                self.execute_cell(node, index, store_history=False)
            except DeadKernelError:
                self._stop(f"the kernel died in the training check of {label}")
                raise
            except CellTimeoutError:
                self._stop(f"a step of the training check of {label} did not finish in time")
                raise
            finally:
                self.timeout = self._cell_timeout
            return list(node.outputs)

        return execute

    def _answers_after_interrupt(self, cell, index: int) -> bool:
        """After an interrupt, a kernel that runs ``pass`` within the grace period is still usable.

        nbclient stores every cell it executes at the index it is given: the timed-out ``cell`` is
        put back there, or the ping would take its place (and a timed-out test would vanish)."""
        self.timeout = self.interrupt_grace
        ping = NotebookNode(cell_type="code", source="pass", metadata={}, outputs=[], execution_count=None)
        try:
            self.execute_cell(ping, index, store_history=False)
        except (DeadKernelError, CellTimeoutError):
            return False
        finally:
            self.timeout = self._cell_timeout
            self.nb.cells[index] = cell
        return not any(o.get("ename") == "CellTimeoutError" for o in ping.outputs if o.output_type == "error")


def stop_kernel(km, ipc: str | None, wait_s: float = 5.0) -> None:
    """Stop a sandboxed kernel at once: SIGTERM to its launcher, which stops every process of the
    kernel's cgroup, records it and exits (sandbox_kernel.main; without a cgroup, bubblewrap dies with
    the launcher and the sandbox's processes with it), and is waited for without polling; a launcher
    still there after ``wait_s`` gets SIGKILL with its process group. Then the kernel manager's files
    and sockets are cleaned up, and with ``ipc`` the cgroup of a launcher that could not remove it."""
    provisioner = km.provisioner
    process = getattr(provisioner, "process", None)
    if process is not None:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                run_sync(provisioner.kill)()
                process.wait()
        run_sync(provisioner.wait)()  # reaped: the provisioner forgets it at once
    run_sync(km.cleanup_resources)()
    if ipc:
        sandbox_limits.release(ipc)


def verdict_outputs(verdict: grading.Verdict) -> list:
    if verdict.passed:
        text = f"Graded: all {verdict.checks} checks passed (visible and hidden).\n"
        return [NotebookNode(output_type="stream", name="stdout", text=text)]
    lines = [f"- {reason}" for reason in verdict.reasons]
    summary = f"{len(verdict.reasons)} of {verdict.checks} checks failed" if verdict.record_ok else verdict.reasons[0]
    return [NotebookNode(output_type="error", ename="TestFailed", evalue=summary,
                         traceback=[f"TestFailed: {summary}", *lines])]


class DecideVerdicts(Preprocessor):
    """Decide every test cell from its probe's record, outside the student's kernel."""

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        state = resources.get(STATE)
        if not state or "plans" not in state:
            raise RuntimeError("DecideVerdicts needs InjectProbes before the execute step")
        info = resources.get("nbgrader", {})
        report = []
        for index, cell in enumerate(nb.cells):
            if not is_test_cell(cell):
                continue
            grade_id = cell.metadata.nbgrader["grade_id"]
            verdict = grading.decide(state["plans"][grade_id], list(cell.get("outputs", [])),
                                     state["not_run"].get(index))
            if grade_id in state.get("driven", {}) and verdict.passed:  # a training cell: its run decides
                verdict = state["decided"].get(grade_id) or grading.Verdict(
                    grade_id, False, ["the training check did not run"], verdict.checks + 1, record_ok=False)
            cell.source = state["shown"][grade_id]
            cell.outputs = verdict_outputs(verdict)
            report.append({"grade_id": grade_id, "passed": verdict.passed, "reasons": verdict.reasons,
                           "checks": verdict.checks, "points": cell.metadata.nbgrader.get("points", 0)})
        not_run = [state["stopped"]] if state.get("stopped") else []
        answered = state.get("answered_for")
        notices = [answered["notice"]] if answered and answered["notice"] else []
        for cell in nb.cells:  # the feedback says it under the id cell
            if notices and cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == answered["cell"]:
                cell.outputs = list(cell.get("outputs", [])) + [
                    NotebookNode(output_type="stream", name="stderr", text=f"Graded: {notices[0]}.\n")]
        folder = os.environ.get("COURSE_VERDICT_DIR")
        if folder:
            path = Path(folder) / info.get("student", "unknown") / f"{info.get('notebook', 'notebook')}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"cells": report, "stopped": not_run, "seed": state["seed"],
                                        "given": state.get("given", {}),
                                        "answered_for": answered,
                                        "problems": notices if answered and answered["flag"] else []}, indent=1))
        return nb, resources


class FeedbackFilter(Preprocessor):
    """Feedback: outputs of the student's cells that ran after a probe are replaced by a notice."""

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        seen_test = False
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            if is_test_cell(cell):
                seen_test = True
            elif seen_test and cell.outputs:
                cell.outputs = [NotebookNode(output_type="stream", name="stdout",
                                             text="(output not shown in feedback: this cell ran after hidden "
                                                  "tests)\n")]
        return nb, resources


class _SchemaBuiltOnce(BaseMetadataValidator):
    """nbgrader's schema step of a cell's check, as ``jsonschema.validate`` does it but without
    checking nbgrader's own schema file against the JSON Schema meta-schema on every call (a third
    of the check's time): a cell of the expected schema version is checked by one validator per
    process; any other cell (no metadata, another version) goes to nbgrader's own step."""

    _validators: dict[int, object] = {}

    def validate_cell(self, cell) -> None:
        meta = cell.metadata.get("nbgrader")
        if meta is None or meta.get("schema_version", 0) != self.schema_version:
            super().validate_cell(cell)
            return
        validator = self._validators.get(self.schema_version)
        if validator is None:
            validator = self._validators[self.schema_version] = validator_for(self.schema)(self.schema)
        error = best_match(validator.iter_errors(meta))
        if error is not None:
            raise error


class _Validator(MetadataValidator, _SchemaBuiltOnce):
    """nbgrader's metadata validator (its checks after the schema's run unchanged), whose schema
    step is ``_SchemaBuiltOnce``'s."""


class CheckCellMetadata(nbgrader_preprocessors.CheckCellMetadata):
    """nbgrader's CheckCellMetadata (same checks, same error) with ``_Validator``."""

    def preprocess(self, nb, resources):
        try:
            _Validator().validate_nb(nb)
        except ValidationError:
            self.log.exception("Notebook failed to validate; the nbgrader metadata may be corrupted.")
            raise ValidationError("Notebook failed to validate; the nbgrader metadata may be corrupted.") from None
        return nb, resources
