"""Static scan of submitted notebooks for code that could subvert the autograder's tests.

Grades do not depend on this scan: verdicts are decided outside the student's process
(instructor/grading.py). The scan is advice: it flags, **for manual review**, every submission whose
code cells do one of these things:

- touch ``builtins`` / ``__builtins__`` (e.g. replace ``float`` or ``abs`` for everyone);
- assign or delete attributes of an imported module (``np.isclose = ...``), or call
  ``setattr``/``delattr``;
- rewrite or introspect code and frames (``__code__``, ``__globals__``, ``sys._getframe``, ...);
- rebind a name the tests use (``float = ...``, ``def isinstance(...)``, ``import numpy as math``),
  or shadow any other builtin at the top level of a cell (``abs = lambda x: 0``);
- use ``exec``/``eval``/``compile``/``__import__``/``globals()``/``get_ipython()``, or import a
  module that can hook execution (``sys``, ``inspect``, ``ctypes``, ``IPython``, ``threading``, ...);
- define classes with comparison or conversion dunders (objects that lie to ``==`` or ``float``), make
  classes with ``type(name, bases, namespace)`` or set ``__module__`` (a class passing itself off as
  NumPy's), or call ``__setattr__``/``__delattr__`` directly (``type.__setattr__(Publisher, ...)``
  patches a class the kernel uses to send results);
- import the kernel's or the network's machinery (``ipykernel``, ``zmq``, ``socket``, ``urllib``, ...);
- use the course library: import it, use ``course_lib`` as a name (``course_lib.formulas.preference.dpo_terms``)
  or name it in a string (``importlib.import_module("course_lib.formulas.budgets")``). The assignment forbids
  it and the grading sandbox does not have it, so such an answer earns nothing; the flag tells the
  grader why (and that the written answers may be copied from the library too);
- cannot be parsed at all.

Cells that nbgrader overwrites with the instructor's version (locked cells with a known grade_id)
are not scanned: their submitted content never runs. A flag is not a verdict; it says "look here".

Usage: python -m instructor.scan SOURCE_DIR SUBMITTED_DIR [ASSIGNMENT]
"""

from __future__ import annotations

import ast
import builtins
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

SUSPICIOUS_MODULES = {
    "builtins", "__builtin__", "sys", "inspect", "ctypes", "gc", "importlib", "IPython", "unittest",
    "pytest", "signal", "atexit", "threading", "multiprocessing", "subprocess", "types", "dis",
    "ipykernel", "zmq", "jupyter_client", "traitlets", "socket", "urllib", "http", "requests",
}
SUSPICIOUS_CALLS = {"exec", "eval", "compile", "__import__", "globals", "vars", "locals",
                    "get_ipython", "setattr", "delattr", "breakpoint"}
SUSPICIOUS_ATTRS = {
    "__code__", "__globals__", "__builtins__", "__dict__", "__class__", "__bases__", "__mro__",
    "__subclasses__", "__getattribute__", "__closure__", "__defaults__", "__kwdefaults__",
    "_getframe", "f_back", "f_locals", "f_globals", "f_code", "co_consts", "modules", "settrace",
    "setprofile", "events", "input_transformers_post", "ast_transformers", "__setattr__", "__delattr__",
    "__module__",
}
BUILTIN_NAMES = set(dir(builtins)) - {"_", "__doc__", "__name__", "__package__", "__spec__", "__loader__"}
COURSE_LIB = "course_lib"
COURSE_LIB_IMPORT = "imports the course library (not allowed; it is not importable when graded)"
LYING_DUNDERS = {
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__float__", "__int__", "__index__",
    "__bool__", "__sub__", "__rsub__", "__abs__", "__contains__", "__round__", "__array__",
    "__array_ufunc__", "__array_function__", "__instancecheck__", "__hash__",
}


@dataclass
class Flag:
    notebook: str
    cell: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.notebook} [{self.cell}] line {self.line}: {self.reason}"


def _to_python(source: str) -> str:
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # pragma: no cover - IPython ships with the course environment
        return source
    return TransformerManager().transform_cell(source)


class _Names(ast.NodeVisitor):
    """Names loaded and stored in a piece of code."""

    def __init__(self):
        self.loaded: set[str] = set()
        self.stored: set[str] = set()
        self.imports: set[tuple[str, str]] = set()  # (module, bound name)

    def visit_Name(self, node):
        (self.loaded if isinstance(node.ctx, ast.Load) else self.stored).add(node.id)

    def visit_FunctionDef(self, node):
        self.stored.add(node.name)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.stored.add(node.name)
        self.generic_visit(node)

    def visit_Import(self, node):
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            self.stored.add(bound)
            self.imports.add((alias.name, bound))

    def visit_ImportFrom(self, node):
        for alias in node.names:
            bound = alias.asname or alias.name
            self.stored.add(bound)
            self.imports.add((f"{node.module}.{alias.name}", bound))

    def visit_arg(self, node):
        self.stored.add(node.arg)


def _names(source: str) -> _Names:
    visitor = _Names()
    try:
        visitor.visit(ast.parse(_to_python(source)))
    except SyntaxError:
        pass
    return visitor


@dataclass
class SourceFacts:
    """What the scan needs to know about the instructor's version of one notebook."""

    overwritten: set[str]  # grade_ids of locked cells nbgrader restores from the source
    protected: set[str]  # names the tests read that the student is not asked to define
    allowed_imports: set[tuple[str, str]]


def source_facts(source_nb) -> SourceFacts:
    overwritten, test_loaded, test_stored, defined = set(), set(), set(), set()
    allowed_imports: set[tuple[str, str]] = set()
    for cell in source_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("locked") and meta.get("grade_id"):
            overwritten.add(meta["grade_id"])
        if cell.cell_type != "code":
            continue
        names = _names(cell.source)
        allowed_imports |= names.imports
        if meta.get("grade") and not meta.get("solution"):
            test_loaded |= names.loaded
            test_stored |= names.stored
        else:
            defined |= names.stored
    protected = (test_loaded - test_stored - defined) | {m for _, m in allowed_imports}
    return SourceFacts(overwritten, protected, allowed_imports)


class _Scanner(ast.NodeVisitor):
    def __init__(self, facts: SourceFacts, modules: set[str]):
        self.facts = facts
        self.modules = modules  # names bound to modules anywhere in the notebook
        self.found: list[tuple[int, str]] = []
        self.depth = 0  # > 0 inside a function body, where a shadowed name stays local

    def flag(self, node, reason):
        self.found.append((getattr(node, "lineno", 0), reason))

    def _bind(self, node, name, how):
        if self.depth > 0 and how != "global":
            return
        if name in self.facts.protected:
            self.flag(node, f"rebinds `{name}` ({how}), a name the tests use")
        elif self.depth == 0 and name in BUILTIN_NAMES:
            self.flag(node, f"shadows the builtin `{name}` ({how})")

    def visit_Import(self, node):
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            root = alias.name.split(".")[0]
            if root in SUSPICIOUS_MODULES:
                self.flag(node, f"imports `{alias.name}`")
            if root == COURSE_LIB:
                self.flag(node, COURSE_LIB_IMPORT)
            if (alias.name, bound) not in self.facts.allowed_imports:
                self._bind(node, bound, f"import {alias.name}")

    def visit_ImportFrom(self, node):
        root = (node.module or "").split(".")[0]
        if root in SUSPICIOUS_MODULES:
            self.flag(node, f"imports from `{node.module}`")
        if root == COURSE_LIB:
            self.flag(node, COURSE_LIB_IMPORT)
        for alias in node.names:
            bound = alias.asname or alias.name
            if (f"{node.module}.{alias.name}", bound) not in self.facts.allowed_imports:
                self._bind(node, bound, f"from {node.module} import")

    def visit_Name(self, node):
        if node.id in ("__builtins__", "__builtin__"):
            self.flag(node, f"touches `{node.id}`")
        if node.id == COURSE_LIB and isinstance(node.ctx, ast.Load):
            self.flag(node, "uses the course library (`course_lib`; not allowed, not importable when graded)")
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._bind(node, node.id, "assignment")

    def visit_FunctionDef(self, node):
        self._bind(node, node.name, "def")  # parameters are local: shadowing them is harmless
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self._bind(node, node.name, "class")
        for item in node.body:
            targets = item.targets if isinstance(item, ast.Assign) else [getattr(item, "target", None)]
            if any(isinstance(t, ast.Name) and t.id == "__module__" for t in targets):
                self.flag(item, f"class `{node.name}` sets `__module__` (passes itself off as another module's)")
        dunders = sorted(
            item.name for item in node.body
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in LYING_DUNDERS
        )
        if dunders:
            self.flag(node, f"class `{node.name}` defines {', '.join(dunders)} (objects that can lie to comparisons)")
        if node.bases:
            self.flag(node, f"class `{node.name}` subclasses {', '.join(ast.unparse(b) for b in node.bases)}")
        self.generic_visit(node)

    def visit_Global(self, node):
        for name in node.names:
            self._bind(node, name, "global")

    def _target_root(self, target):
        while isinstance(target, (ast.Attribute, ast.Subscript)):
            target = target.value
        return target.id if isinstance(target, ast.Name) else None

    def _check_targets(self, node, targets):
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute):
                    root = self._target_root(sub)
                    if root in self.modules:
                        self.flag(node, f"assigns attribute `{ast.unparse(sub)}` of imported module `{root}`")
                        break

    def visit_Assign(self, node):
        self._check_targets(node, node.targets)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._check_targets(node, [node.target])
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._check_targets(node, [node.target])
        self.generic_visit(node)

    def visit_Delete(self, node):
        self._check_targets(node, node.targets)
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if node.attr in SUSPICIOUS_ATTRS:
            self.flag(node, f"uses attribute `{node.attr}`")
        self.generic_visit(node)

    def visit_Constant(self, node):
        if isinstance(node.value, str) and node.value.split(".")[0] == COURSE_LIB:
            self.flag(node, f"names the course library in a string ({node.value!r})")

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id in SUSPICIOUS_CALLS:
            self.flag(node, f"calls `{node.func.id}()`")
        if isinstance(node.func, ast.Name) and node.func.id == "type" and len(node.args) == 3:
            namespace = node.args[2]
            keys = [k.value for k in getattr(namespace, "keys", []) if isinstance(k, ast.Constant)]
            claim = " claiming a `__module__`" if "__module__" in keys else ""
            self.flag(node, f"makes a class with `type(name, bases, namespace)`{claim}")
        self.generic_visit(node)


def scan_notebook(path: Path, facts: SourceFacts) -> list[Flag]:
    """Flags for one submitted notebook (an unreadable notebook is itself a flag)."""
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as err:  # noqa: BLE001 - any failure to read is reported, never raised
        return [Flag(path.name, "-", 0, f"not a readable notebook: {type(err).__name__}: {err}")]
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader") if isinstance(cell.get("metadata"), dict) else None
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        if isinstance(grade_id, str) and grade_id in facts.overwritten:
            continue
        cells.append((grade_id if isinstance(grade_id, str) else f"cell {index + 1}", str(cell.get("source", ""))))
    modules = {bound for _, bound in facts.allowed_imports}
    parsed = []
    flags = []
    for label, source in cells:
        try:
            tree = ast.parse(_to_python(source))
        except SyntaxError as err:
            flags.append(Flag(path.name, label, err.lineno or 0, "cannot be parsed (syntax error)"))
            continue
        parsed.append((label, tree))
        names = _Names()
        names.visit(tree)
        modules |= {bound for _, bound in names.imports}
    for label, tree in parsed:
        scanner = _Scanner(facts, modules)
        scanner.visit(tree)
        flags += [Flag(path.name, label, line, reason) for line, reason in scanner.found]
    return flags


def scan_submissions(source_dir: Path, submitted_dir: Path, assignment: str,
                     only: set[str] | None = None) -> dict[str, list[Flag]]:
    """{student_id: flags} for every student folder under ``submitted_dir`` (or those in ``only``)."""
    sources = {p.name: nbformat.read(str(p), as_version=4)
               for p in sorted((source_dir / assignment).glob("*.ipynb"))}
    facts = {name: source_facts(nb) for name, nb in sources.items()}
    report: dict[str, list[Flag]] = {}
    for student in sorted(p for p in submitted_dir.iterdir() if p.is_dir()):
        if only is not None and student.name not in only:
            continue
        flags: list[Flag] = []
        for name in sources:
            path = student / assignment / name
            if not path.exists():
                continue
            try:
                flags += scan_notebook(path, facts[name])
            except Exception as err:  # noqa: BLE001 - a scan must never stop grading
                flags.append(Flag(name, "-", 0, f"could not be scanned ({type(err).__name__}: {err})"))
        report[student.name] = flags
    return report


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    found = scan_submissions(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "module14")
    for student, flags in found.items():
        print(f"{student}: {'OK' if not flags else f'{len(flags)} flag(s)'}")
        for flag in flags:
            print(f"  - {flag}")
