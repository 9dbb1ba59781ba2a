"""``python -m instructor.run_nbgrader ARGS``: nbgrader's command line (``python -m nbgrader ARGS``)
without an import it never uses, which costs 2 CPU seconds per process.

jsonschema (which nbformat, nbgrader and jupyter_server import) loads ``rfc3987_syntax`` when it is
installed, only to check the ``iri`` and ``iri-reference`` formats, and that package compiles about
40 lark grammars at import. No schema validated while grading uses those formats (the notebook
format's and nbgrader's cell metadata schemas have no ``format`` at all), so nothing nbgrader checks
changes; ``make autograde`` starts one nbgrader process per student, so this is paid per student.
"""

from __future__ import annotations

import sys

UNUSED = ("rfc3987_syntax",)


def skip_unused_imports() -> None:
    """Make ``import rfc3987_syntax`` fail (jsonschema then leaves out the ``iri`` format checks).
    Has no effect where jsonschema was already imported."""
    if "jsonschema" not in sys.modules:
        for name in UNUSED:
            sys.modules.setdefault(name, None)


def main() -> None:
    skip_unused_imports()
    from nbgrader.apps.nbgraderapp import main as nbgrader_main

    sys.argv[0] = "nbgrader"
    nbgrader_main()


if __name__ == "__main__":
    main()
