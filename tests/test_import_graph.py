"""No import cycle in course_lib, instructor/, benchmarks/ or tools/, nor across them, counting imports
inside functions, importlib calls and a script's bare import of a module beside it (``from tables
import save`` in benchmarks/, which puts its own folder on sys.path); and course_lib's folders keep
their layer rules: a module imports only from its own folder, from the folders its folder's
``MAY_IMPORT`` names (in the folder's ``__init__.py``), and from ``_validate``, the floor every folder
stands on; nothing imports ``__main__``, the command line on top; and course_lib imports nothing from the
other three folders, which stand on it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "course_lib"
FOLDERS = ("course_lib", "instructor", "benchmarks", "tools")
FLOOR, ROOF = "_validate", "__main__"


def _names(path: Path) -> set[str]:
    """Every dotted name ``path`` imports (``from a import b`` gives ``a`` and ``a.b``), wherever the
    import statement sits; relative imports are left out (course_lib uses none)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif (isinstance(node, ast.Call)
              and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.add(node.args[0].value)
    return found


def _files(folder: Path = PACKAGE) -> dict[str, Path]:
    """Every module of ``folder`` by its name, its file's stem: for course_lib, wherever it sits in its
    sub-packages (names are unique across them)."""
    found = folder.rglob("*.py") if folder == PACKAGE else folder.glob("*.py")
    files = [p for p in found if p.stem != "__init__" and "__pycache__" not in p.parts]
    by_name = {p.stem: p for p in files}
    assert len(by_name) == len(files), f"two modules of {folder.name} share a name"
    return by_name


def _imports(path: Path, folder: Path = PACKAGE, bare: bool = False) -> set[str]:
    """The modules of ``folder`` that ``path`` imports: in ``folder.sub.module.attribute``, the first part
    after the folder that names one of its modules; with ``bare`` a plain ``x`` too (a script importing a
    module beside it)."""
    modules = set(_files(folder))
    found = set()
    for name in _names(path):
        parts = name.split(".")
        if parts[0] == folder.name:
            found |= {next((p for p in parts[1:] if p in modules), None)} - {None}
        elif bare:
            found.add(parts[0])
    return found & modules


def graph() -> dict[str, set[str]]:
    """course_lib's modules and the course_lib modules each imports."""
    return {m: _imports(path) - {m} for m, path in _files().items()}


def folders_graph() -> dict[str, set[str]]:
    """Every module in FOLDERS by its dotted name (``course_lib.<folder>.x``, ``instructor.y``) and the
    modules it imports from any of them."""
    files = {there: _files(ROOT / there) for there in FOLDERS}
    dotted = {(there, n): ".".join(path.relative_to(ROOT).with_suffix("").parts)
              for there in FOLDERS for n, path in files[there].items()}
    g = {}
    for here in FOLDERS:
        for m, path in files[here].items():
            g[dotted[here, m]] = {dotted[there, n] for there in FOLDERS
                                  for n in _imports(path, ROOT / there, bare=there == here)} - {dotted[here, m]}
    return g


def folders() -> dict[str, tuple[str, ...]]:
    """Each folder (sub-package) of course_lib and the folders it may import, its ``MAY_IMPORT``."""
    rules = {}
    for init in sorted(PACKAGE.glob("*/__init__.py")):
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


def test_the_folders_graph_sees_every_kind_of_import():
    g = folders_graph()
    assert "benchmarks.writer" in g["benchmarks.tinygpt_dpo"]  # bare, beside it: from writer import save
    assert "benchmarks.tables" in g["benchmarks.writer"]
    assert "benchmarks.provenance" in g["benchmarks.gpu_check"]  # bare, inside a function
    assert "tools.doc_blocks" in g["benchmarks.tables"]  # from tools import doc_blocks
    assert "course_lib.run.lab_check" in g["instructor.lab_grading"]  # across folders
    assert "instructor.gradebook" in g["instructor.roster"]
    assert "course_lib.run.verdicts" not in g["instructor.roster"]


def test_course_lib_has_no_import_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, " -> ".join(cycle)


def test_instructor_benchmarks_and_tools_have_no_import_cycle():
    cycle = find_cycle(folders_graph())
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
    folder_of = {name: "" if path.parent == PACKAGE else path.parent.name for name, path in _files().items()}
    assert layer_breaks(graph(), folder_of, rules) == []
    if rules:  # in folders, only the floor and the roof stay at the top of course_lib
        assert sorted(name for name, folder in folder_of.items() if not folder) == sorted([FLOOR, ROOF])


def test_course_lib_imports_nothing_from_the_folders_beside_it():
    """course_lib is the installed package (Colab pip-installs it alone): instructor/, benchmarks/ and tools/
    stand on it, never under it."""
    g = folders_graph()
    assert any(n.startswith("course_lib.") for m, imported in g.items() if m.startswith("tools.") for n in imported)
    upward = sorted(f"{m} -> {n}" for m, imported in g.items() if m.startswith("course_lib.")
                    for n in imported if not n.startswith("course_lib."))
    assert upward == []
