"""course_lib has no import cycle, counting imports inside functions and importlib calls, and its
folders keep their layer rules: a module imports only from its own folder, from the folders its
folder's ``MAY_IMPORT`` names (in the folder's ``__init__.py``), and from ``_validate``, the floor
every folder stands on; nothing imports ``__main__``, the command line on top."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "course_lib"
FLOOR, ROOF = "_validate", "__main__"


def _files(package: Path = PACKAGE) -> dict[str, Path]:
    """Every course_lib module by its name (its file's stem; names are unique across folders)."""
    files = [p for p in package.rglob("*.py") if p.stem != "__init__" and "__pycache__" not in p.parts]
    by_name = {p.stem: p for p in files}
    assert len(by_name) == len(files), "two course_lib modules share a name"
    return by_name


def _imports(path: Path, names: set[str]) -> set[str]:
    """Every course_lib module ``path`` imports, wherever the import statement sits."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        dotted = []
        if isinstance(node, ast.Import):
            dotted = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            dotted = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            dotted = [node.args[0].value]
        for name in dotted:
            parts = name.split(".")
            if parts[0] == "course_lib":  # course_lib.<folder>.<module>.<attribute>: the first part that is a module
                found |= {next((p for p in parts[1:] if p in names), None)} - {None}
    return found


def graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    files = _files(package)
    return {name: _imports(path, set(files)) - {name} for name, path in files.items()}


def folders(package: Path = PACKAGE) -> dict[str, tuple[str, ...]]:
    """Each folder (sub-package) of course_lib and the folders it may import, its ``MAY_IMPORT``."""
    rules = {}
    for init in sorted(package.glob("*/__init__.py")):
        assigned = [node.value for node in ast.parse(init.read_text()).body if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "MAY_IMPORT" for t in node.targets)]
        assert assigned, f"{init} states no MAY_IMPORT: the folders its modules may import"
        rules[init.parent.name] = tuple(ast.literal_eval(assigned[0]))
    return rules


def layer_breaks(g: dict[str, set[str]], folder_of: dict[str, str], rules: dict[str, tuple[str, ...]]) -> list[str]:
    """Every import that breaks the layer rules, as ``"a (folder) -> b (folder)"``."""
    breaks = []
    for module, imported in sorted(g.items()):
        here = folder_of[module]
        for other in sorted(imported):
            there = folder_of[other]
            allowed = (other == FLOOR or (module == ROOF and other != ROOF) or there == here
                       or there in rules.get(here, ()))
            if module == FLOOR or not allowed:
                breaks.append(f"{module} ({here or 'course_lib'}) -> {other} ({there or 'course_lib'})")
    return breaks


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


def test_the_layer_check_finds_planted_upward_imports():
    rules = {"formulas": (), "tinygpt": ("formulas",)}
    folder_of = {"loss": "formulas", "model": "tinygpt", FLOOR: "", ROOF: ""}
    fine = {"loss": {FLOOR}, "model": {"loss", FLOOR}, ROOF: {"model"}, FLOOR: set()}
    assert layer_breaks(fine, folder_of, rules) == []
    upward = {**fine, "loss": {"model"}, FLOOR: {"loss"}, "model": {ROOF}}
    assert layer_breaks(upward, folder_of, rules) == ["_validate (course_lib) -> loss (formulas)",
                                                      "loss (formulas) -> model (tinygpt)",
                                                      "model (tinygpt) -> __main__ (course_lib)"]


def test_course_lib_folders_keep_their_layer_rules():
    rules = folders()
    assert find_cycle({f: set(allowed) for f, allowed in rules.items()}) is None, "the folders' rules form a circle"
    assert all(set(allowed) <= set(rules) for allowed in rules.values()), rules
    files = _files()
    folder_of = {name: "" if path.parent == PACKAGE else path.parent.name for name, path in files.items()}
    assert layer_breaks(graph(), folder_of, rules) == []
    if rules:  # in folders, only the floor and the roof stay at the top of course_lib
        assert sorted(name for name, folder in folder_of.items() if not folder) == sorted([FLOOR, ROOF])
