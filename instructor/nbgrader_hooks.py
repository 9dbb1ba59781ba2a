"""nbgrader plug-ins used by nbgrader_config.py: a sandbox-only Execute and a feedback filter.

- ``SandboxedExecute`` replaces nbgrader's Execute step in ``autograde``. It runs every kernel
  under the kernelspec named in ``$COURSE_SANDBOX_KERNEL`` (set by instructor/autograde.py, i.e.
  ``make autograde``) and refuses to run student code otherwise, so a plain ``nbgrader autograde``
  cannot silently execute submissions with the instructor's rights. Setting
  ``COURSE_ALLOW_UNSANDBOXED=1`` overrides this (documented risk; see the README).
- ``HideHiddenTests`` runs last in ``generate_feedback``: it removes the hidden-test region from
  every test cell and replaces that cell's outputs with a one-line verdict, because a traceback (or a
  student's own ``print`` inside a function the hidden tests call) would quote the hidden inputs.
  For the same reason, outputs of the student's own cells that ran after a hidden test are dropped.

Simplification said out loud: a failure in the *visible* part of such a cell is shown as its
exception line only (no traceback); students see full details when they run the tests themselves.
"""

from __future__ import annotations

import os
import re

import nbformat
from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, Unicode

BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CELL_LINE = re.compile(r"Cell In\s*\[\d*\],\s*line (\d+)")


class SandboxedExecute(Execute):
    """nbgrader's Execute, but only inside the sandbox kernel chosen by ``make autograde``."""

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
        return super().preprocess(nb, resources, km=km)


def split_hidden(source: str) -> tuple[str, str, int]:
    """Return (source without hidden region, hidden region, 1-based line where it starts; 0 if none)."""
    lines = source.split("\n")
    kept, hidden, start, inside = [], [], 0, False
    for number, line in enumerate(lines, start=1):
        if BEGIN_HIDDEN in line:
            inside, start = True, number
            kept.append("# (hidden tests ran here; they are not shown)")
        elif END_HIDDEN in line:
            inside = False
        elif inside:
            hidden.append(line)
        else:
            kept.append(line)
    return "\n".join(kept), "\n".join(hidden), start


def _failing_line(traceback: list[str]) -> int:
    for frame in traceback:
        match = _CELL_LINE.search(_ANSI.sub("", frame))
        if match:
            return int(match.group(1))
    return 0


def verdict(outputs: list, hidden_source: str, hidden_start: int) -> list:
    """One-line replacement for a test cell's outputs that cannot quote hidden inputs."""
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if not errors:
        return []
    err = errors[-1]
    ename, evalue = str(err.get("ename", "Error")), str(err.get("evalue", ""))
    line = _failing_line(list(err.get("traceback", [])))
    if 0 < line < hidden_start:  # the visible part failed: its message is the student's to see
        text = f"{ename}: {evalue}" if evalue else ename
    elif evalue and evalue in hidden_source:  # one of the test's own literal messages
        text = f"{ename}: {evalue}"
    else:
        text = f"{ename} raised while the hidden tests ran (details withheld)"
    return [NotebookNode(output_type="error", ename=ename, evalue=text, traceback=[text])]


class HideHiddenTests(Preprocessor):
    """Feedback filter: no hidden-test source, no outputs that could quote hidden inputs.

    The hidden region is looked up in the instructor's source notebook (same grade_id), so it is
    found even if the delimiters are missing from the autograded copy.
    """

    enabled = Bool(True).tag(config=True)
    source_directory = Unicode("solutions", help="Folder of the instructor's source notebooks").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        path = os.path.join(self.source_directory, info.get("assignment", ""), f"{info.get('notebook', '')}.ipynb")
        self._source = {}
        if os.path.exists(path):
            for cell in nbformat.read(path, as_version=4).cells:
                grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
                if grade_id and BEGIN_HIDDEN in cell.source:
                    self._source[grade_id] = split_hidden(cell.source)
        seen_hidden = False
        for index, cell in enumerate(nb.cells):
            is_test = cell.metadata.get("nbgrader", {}).get("grade") and not cell.metadata["nbgrader"].get("solution")
            if cell.cell_type == "code" and seen_hidden and not is_test and cell.outputs:
                # a student's own cell could print what their functions recorded during hidden tests
                cell.outputs = [NotebookNode(output_type="stream", name="stdout",
                                             text="(output not shown in feedback: this cell ran after hidden tests)\n")]
            nb.cells[index], resources = self.preprocess_cell(cell, resources, index)
            seen_hidden = seen_hidden or self._had_hidden
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        self._had_hidden = False
        if cell.cell_type != "code":
            return cell, resources
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in self._source:
            visible, hidden, start = self._source[grade_id]
        elif BEGIN_HIDDEN in cell.source:
            visible, hidden, start = split_hidden(cell.source)
        else:
            return cell, resources
        cell.source = visible
        cell.outputs = verdict(cell.outputs, hidden, start)
        self._had_hidden = True
        return cell, resources
