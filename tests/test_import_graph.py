"""No import cycle in course_lib, instructor/, benchmarks/ or tools/, nor across them, counting imports
inside functions, importlib calls and a script's bare import of a module beside it (``from tables
import save`` in benchmarks/, which puts its own folder on sys.path)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "course_lib"
FOLDERS = ("course_lib", "instructor", "benchmarks", "tools")


def _names(path: Path) -> set[str]:
    """Every dotted name ``path`` imports (``from a import b`` gives ``a`` and ``a.b``), wherever the
    import statement sits; relative imports are left out (none of the folders uses them)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.add(node.args[0].value)
    return found


def _modules(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}


def _imports(path: Path, folder: Path = PACKAGE, bare: bool = False) -> set[str]:
    """The modules of ``folder`` that ``path`` imports: ``folder.x...`` names, and with ``bare`` a plain
    ``x`` too (a script importing a module beside it)."""
    found = set()
    for name in _names(path):
        parts = name.split(".")
        if parts[0] == folder.name and len(parts) > 1:
            found.add(parts[1])
        elif bare:
            found.add(parts[0])
    return found & _modules(folder)


def graph() -> dict[str, set[str]]:
    """course_lib's modules and the course_lib modules each imports."""
    return {m: _imports(PACKAGE / f"{m}.py") - {m} for m in _modules(PACKAGE)}


def folders_graph() -> dict[str, set[str]]:
    """``folder.module`` of every module in FOLDERS and the modules it imports from any of them."""
    g = {}
    for here in FOLDERS:
        for m in _modules(ROOT / here):
            path = ROOT / here / f"{m}.py"
            g[f"{here}.{m}"] = {f"{there}.{n}" for there in FOLDERS
                                for n in _imports(path, ROOT / there, bare=there == here)} - {f"{here}.{m}"}
    return g


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(g.get(m, ())):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state and (c := visit(n)):
                return c
        state[m] = "done"
        stack.pop()
        return None

    for m in sorted(g):
        if m not in state and (c := visit(m)):
            return c
    return None


def test_the_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_imports_inside_functions():
    g = graph()
    assert {"model", "rollout", "runtime"} <= g["kl"]  # reference_kl imports them inside the function
    assert {"pipeline", "dpo", "evaluation"} <= g["trl_bridge"]


def test_the_folders_graph_sees_every_kind_of_import():
    g = folders_graph()
    assert "benchmarks.writer" in g["benchmarks.tinygpt_dpo"]  # bare, beside it: from writer import save
    assert "benchmarks.tables" in g["benchmarks.writer"]
    assert "benchmarks.provenance" in g["benchmarks.gpu_check"]  # bare, inside a function
    assert "tools.doc_blocks" in g["benchmarks.tables"]  # from tools import doc_blocks
    assert "course_lib.lab_check" in g["instructor.lab_grading"]  # across folders
    assert "instructor.gradebook" in g["instructor.roster"]
    assert "course_lib.verdicts" not in g["instructor.roster"]


def test_course_lib_has_no_import_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, " -> ".join(cycle)


def test_instructor_benchmarks_and_tools_have_no_import_cycle():
    cycle = find_cycle(folders_graph())
    assert cycle is None, " -> ".join(cycle)
