"""instructor/run_nbgrader.py: nbgrader's command line without jsonschema's iri format checks (2 CPU s per
student saved), which no schema validated while grading uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def formats(node) -> set[str]:
    """Every ``format`` a JSON schema asks for."""
    if isinstance(node, dict):
        own = {node["format"]} if isinstance(node.get("format"), str) else set()
        return own.union(*(formats(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(formats(v) for v in node))
    return set()


def test_no_schema_checked_while_grading_asks_for_a_format():
    import nbformat
    import nbgrader

    schemas = [*Path(nbformat.__file__).parent.glob("v4/*.schema.json"),
               *Path(nbgrader.__file__).parent.glob("nbgraderformat/v*.json")]
    assert len(schemas) >= 4
    assert {str(s): formats(json.loads(s.read_text())) for s in schemas} == {str(s): set() for s in schemas}


def test_the_launcher_runs_nbgrader_without_rfc3987_syntax_and_still_validates():
    probe = ("import sys, nbformat, jsonschema\n"
             "from instructor.run_nbgrader import skip_unused_imports\n"
             "import nbgrader.apps.nbgraderapp\n"
             "nb = nbformat.read(sys.argv[1], as_version=4)\n"
             "nbformat.validate(nb)\n"
             "nb.cells[0]['cell_type'] = 'not a cell type'\n"
             "try:\n    nbformat.validate(nb)\nexcept nbformat.ValidationError:\n    print('invalid caught')\n"
             "print(sys.modules.get('rfc3987_syntax', 'absent'))\n")
    solution = sorted((ROOT / "solutions" / "module14").glob("*.ipynb"))[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", "from instructor.run_nbgrader import skip_unused_imports; "
                          "skip_unused_imports(); exec(open(0).read())", str(solution)], input=probe, env=env,
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["invalid caught", "None"]  # blocked, and validation still works
    version = subprocess.run([sys.executable, "-m", "instructor.run_nbgrader", "--version"], env=env, cwd=ROOT,
                             capture_output=True, text=True)
    import nbgrader

    assert (version.returncode == 0
            and version.stdout.splitlines()[-1] == f"nbgrader version {nbgrader.__version__}"), version.stderr


def test_the_zygote_runs_nbgrader_as_a_new_process_would_from_many_threads(tmp_path):
    """Each command is a child of its own, with its own environment, directory and output; a failing
    command's status and error come back; the zygote ends when closed."""
    from concurrent.futures import ThreadPoolExecutor

    import nbgrader

    from instructor.run_nbgrader import Zygote

    zygote = Zygote(ROOT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        with ThreadPoolExecutor(4) as pool:
            runs = list(pool.map(lambda i: zygote.run(["--version"], {**env, "MARK": str(i)}, str(tmp_path),
                                                      str(tmp_path / f"out{i}.log")), range(4)))
        assert ([(code, text.splitlines()[-1]) for code, text in runs]
                == [(0, f"nbgrader version {nbgrader.__version__}")] * 4)
        code, text = zygote.run(["autograde", "no-such-assignment", "--student=nobody"], env, str(tmp_path),
                                str(tmp_path / "bad.log"))
        assert code != 0 and "no-such-assignment" in text, text
    finally:
        zygote.close()
    assert zygote._proc.returncode == 0


def test_gradebooks_of_one_database_share_an_engine_and_every_write_still_reaches_it(tmp_path, monkeypatch):
    """``share_gradebook_engines``: every Gradebook of one database URL in a process has the same
    engine (its compiled statements are kept), another URL its own, and what one Gradebook wrote is
    in the file when it closes, for another process to read."""
    import sqlite3

    import nbgrader.api as api

    sys.path.insert(0, str(ROOT))
    from instructor import run_nbgrader

    monkeypatch.setattr(api, "create_engine", api.create_engine)  # nbgrader's own again after the test
    monkeypatch.setattr(api, "get_alembic_version", lambda: "0")  # a new gradebook: no `alembic` process
    run_nbgrader.share_gradebook_engines()
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with api.Gradebook(url) as first:
        first.add_student("s1")
        engine = first.engine
    with sqlite3.connect(tmp_path / "gradebook.db") as plain:
        assert plain.execute("SELECT id FROM student").fetchall() == [("s1",)]
    with api.Gradebook(url) as second:
        assert second.engine is engine and [s.id for s in second.students] == ["s1"]
        second.add_student("s2")
    with sqlite3.connect(tmp_path / "gradebook.db") as plain:
        assert sorted(plain.execute("SELECT id FROM student").fetchall()) == [("s1",), ("s2",)]
    with api.Gradebook(f"{url}?timeout=5") as other:  # another URL: an engine of its own
        assert other.engine is not engine and len(other.students) == 2
