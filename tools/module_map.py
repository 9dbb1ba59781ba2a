"""Write the map of ``course_lib`` into docs/library.md from the modules' own docstrings.

A module's entry is the first line of its docstring, its one-line summary; a sub-package's entry is
its ``__init__.py``'s, and its modules follow it. So the map is the code's own description and cannot
drift from it. ``python -m tools.module_map`` rewrites every ``<!-- modules:course_lib -->`` block;
``--check`` only compares and exits 1 when a page differs (``tests/test_module_map.py`` runs it).
Docstrings are read with ``ast``, nothing is imported. A module without a one-line summary (no
docstring, an empty first line, a first sentence wrapped onto a second line, or a first line over
the project's line length) stops the map with an error naming the module.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

from tools import doc_blocks

PACKAGE = doc_blocks.ROOT / "course_lib"
# the project's line length (ruff's, in pyproject.toml): the summary fits on the docstring's first line with its quotes
LINE = tomllib.loads((doc_blocks.ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["line-length"]


def summary(path: Path) -> str:
    """The first line of ``path``'s module docstring, checked to be a one-line summary."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    lines = (doc or "").splitlines()
    where = f"{path}: the module docstring must start with a one-line summary"
    if not lines or not lines[0].strip():
        raise ValueError(f"{where}; it has none")
    if len(lines) > 1 and lines[1].strip():
        raise ValueError(f"{where} followed by a blank line; its first sentence runs onto a second "
                         f"line: {lines[0]!r}")
    if len(lines[0]) + 3 > LINE:
        raise ValueError(f"{where} of at most {LINE - 3} characters; it has {len(lines[0])}: "
                         f"{lines[0]!r}")
    return lines[0].strip()


def modules(package: Path = PACKAGE, name: str = "course_lib") -> list[tuple[str, str, bool]]:
    """``(dotted name, summary, is_package)`` for the package and every module in it, then each
    sub-package followed by its modules, in name order."""
    rows = [(name, summary(package / "__init__.py"), True)]
    for path in sorted(package.glob("*.py")):
        if path.stem != "__init__":
            rows.append((f"{name}.{path.stem}", summary(path), False))
    for sub in sorted(p for p in package.iterdir() if (p / "__init__.py").is_file()):
        rows += modules(sub, f"{name}.{sub.name}")
    return rows


def table(package: Path = PACKAGE) -> str:
    rows = ["| module | what it does (the first line of its docstring) |", "|---|---|"]
    for name, text, is_package in modules(package):
        text = text.replace("|", "\\|")
        rows.append(f"| **`{name}`** | **{text}** |" if is_package else f"| `{name}` | {text} |")
    return "\n".join(rows) + "\n"


def body(name: str) -> str:
    if name != "course_lib":
        raise ValueError(f"a modules block is named {name!r}; the one package mapped is 'course_lib'")
    return table()


def main(argv=None) -> int:
    return doc_blocks.main(argv, kind="modules", body=body, command="python -m tools.module_map",
                           description="write course_lib's module map into docs/library.md")


if __name__ == "__main__":
    sys.exit(main())
