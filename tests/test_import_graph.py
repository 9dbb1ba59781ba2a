"""course_lib has no import cycle, counting imports inside functions and importlib calls."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "course_lib"


def _imports(path: Path) -> set[str]:
    """Every course_lib module ``path`` imports, wherever the import statement sits."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            names = [node.args[0].value]
        found |= {n.split(".")[1] for n in names if n.startswith("course_lib.") and n.count(".") >= 1}
    return found & {p.stem for p in PACKAGE.glob("*.py")}


def graph() -> dict[str, set[str]]:
    return {p.stem: _imports(p) - {p.stem} for p in PACKAGE.glob("*.py") if p.stem != "__init__"}


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
    assert {"pipeline", "starts", "grpo"} <= g["seeds"]  # seeds imports them inside its functions
    assert {"pipeline", "dpo", "evaluation"} <= g["trl_bridge"]


def test_course_lib_has_no_import_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, " -> ".join(cycle)
