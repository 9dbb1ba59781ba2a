"""Python 3.13 (Colab's) checked statically: no import of a module that 3.12 or 3.13 removed.

This machine runs 3.11, so nothing here can execute the code on 3.13; what can be checked without
it is that no file imports a standard-library module that is gone there (PEP 594's "dead
batteries", removed in 3.13, and distutils, imp, asynchat, asyncore and smtpd, removed in 3.12),
nor a name removed from a module that stayed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

REMOVED_MODULES = {
    # 3.13, PEP 594
    "aifc", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "mailcap", "msilib", "nis", "nntplib",
    "ossaudiodev", "pipes", "sndhdr", "spwd", "sunau", "telnetlib", "uu", "xdrlib", "lib2to3",
    # 3.12
    "distutils", "imp", "asynchat", "asyncore", "smtpd",
}
REMOVED_NAMES = {  # module -> names removed from it in 3.12/3.13
    "typing": {"io", "re"},
    "locale": {"resetlocale"},
    "unittest": {"findTestCases", "makeSuite", "getTestCaseNames"},
    "configparser": {"SafeConfigParser", "readfp"},
    "tkinter": {"tix"},
}
FOLDERS = ["course_lib", "notebooks", "instructor", "tools", "benchmarks", "tests"]


def removed_in_313(source: str) -> list[str]:
    """Each import in ``source`` of a module or name that Python 3.13 no longer has."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in REMOVED_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top in REMOVED_MODULES:
                found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names if a.name in REMOVED_NAMES.get(node.module, ())]
    return found


def _sources() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def test_the_checker_finds_what_313_removed():
    code = ("import imp\nimport os.path\nfrom distutils.util import strtobool\nfrom typing import io, List\n"
            "import cgi as c\n")
    assert removed_in_313(code) == ["imp", "distutils.util", "typing.io", "cgi"]
    assert removed_in_313("import os, json\nfrom . import imp\n") == []


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_code_imports_what_python_313_removed(folder):
    sources = [p for p in _sources() if p.relative_to(ROOT).parts[0] == folder]
    assert sources, f"no Python files under {folder}/"
    bad = {str(p.relative_to(ROOT)): hits for p in sources if (hits := removed_in_313(p.read_text(encoding="utf-8")))}
    assert not bad, f"imports removed in Python 3.13 (Colab's): {bad}"
