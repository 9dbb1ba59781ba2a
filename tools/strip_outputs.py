"""A git clean filter: lecture notebooks reach git without outputs or run state, whatever the lab saved.

JupyterLab saves ``notebooks/*.ipynb`` with the outputs, execution counts and widget state of a
session (autosave included). With this filter, git compares and commits the notebook as
``jupytext --sync`` writes it (no outputs, as committed), so a lab session leaves ``git status``
clean and a ``git pull`` of course updates does not conflict; the student's file on disk keeps
its outputs. ``.gitattributes`` names the filter for ``notebooks/*.ipynb``; ``make lab`` registers
it in the clone's git config (``--install``), and its JupyterLab runs ``refresh_index`` after each
save. Without the registration git passes the file through unchanged.

Simplified: only the lab's own additions are removed (outputs, execution counts, the notebook's
``language_info`` and ``widgets``, a cell's ``execution``/``collapsed``/``scrolled``/``jupyter``
UI state); anything else a student changes (source, tags) stays a change. A file that is not a
notebook's JSON passes through as it is (a merge in progress, say).

``python -m tools.strip_outputs < in.ipynb > out.ipynb`` filters; ``--install`` registers it.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

FILTER = "notebook-outputs"
KEEP_METADATA = ("jupytext", "kernelspec")  # what a committed lecture notebook carries
CELL_STATE = ("execution", "collapsed", "scrolled", "jupyter", "ExecuteTime")


def without_outputs(text: str) -> str:
    """The notebook ``text`` as committed: no outputs, no counts, no session metadata."""
    try:
        nb = json.loads(text)
    except ValueError:
        return text
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return text
    nb["metadata"] = {k: v for k, v in nb.get("metadata", {}).items() if k in KEEP_METADATA}
    for cell in nb["cells"]:
        for key in CELL_STATE:
            cell.get("metadata", {}).pop(key, None)
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"  # as nbformat writes


def install(repo: Path, python: str = sys.executable) -> str:
    """Register the filter in ``repo``'s git config; returns the clean command (git runs it at the top level)."""
    command = f"{shlex.quote(python)} -m tools.strip_outputs"
    for key, value in ((f"filter.{FILTER}.clean", command), (f"filter.{FILTER}.smudge", "cat")):
        subprocess.run(["git", "-C", str(repo), "config", "--local", key, value], check=True)
    return command


def refresh_index(os_path: str, **_) -> None:
    """JupyterLab's post-save hook (the student lab's ``jupyter_server_config.py``): after a save of a
    lecture notebook whose committed form did not change, let git's index note the new file size.

    Git takes a file whose size changed for a modified one without running the filter, so after a
    session ``git status`` would list the notebook (``git diff`` empty) and ``git pull`` would refuse
    to update it. When the filtered file equals the index (``git diff --quiet``), re-adding it changes
    no content and records the file's new size; a notebook with a real change is left alone.
    """
    path = Path(os_path)
    if path.suffix != ".ipynb" or path.parent.name != "notebooks":
        return
    repo = path.parent.parent
    git = ["git", "-C", str(repo)]
    tracked = subprocess.run([*git, "ls-files", "--error-unmatch", "--", str(path)], capture_output=True)
    if tracked.returncode == 0 and subprocess.run([*git, "diff", "--quiet", "--", str(path)]).returncode == 0:
        subprocess.run([*git, "update-index", "--", str(path)], capture_output=True)


def main(argv: list[str]) -> int:
    if argv == ["--install"]:
        repo = Path(__file__).resolve().parents[1]
        if not (repo / ".git").exists():
            print(f"{repo} is not a git clone: no filter to install")
            return 0
        install(repo)
        return 0
    if argv:
        print("usage: python -m tools.strip_outputs [--install]  (filters stdin to stdout)", file=sys.stderr)
        return 2
    sys.stdout.write(without_outputs(sys.stdin.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
