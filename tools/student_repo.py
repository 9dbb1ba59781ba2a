"""`make student-repo DEST=dir [REPO=owner/name]`: the course as students get it, in a fresh repository.

This repository is the instructor's copy: it holds the solutions (``solutions/``), the hidden checks
(``instructor/checks/``) and the library answers the copy detector tests with
(``tests/copied_answers.py``), and their history. Students get a new repository with one commit
(no history to dig in) made of this checkout's tracked files minus:

- ``INSTRUCTOR_ONLY``: the folders and files above;
- every test file that needs them (``needs_instructor_files``: it names ``solutions``, the checks or
  the copied answers), so the students' ``make test`` passes on what they have.

The lecture notebooks, ``course_lib``, ``exercises/`` and the student side of ``instructor/`` (the
Validate button's configuration, nbgrader_config.py's plug-ins) stay. ``--repo owner/name`` points the
Colab badges and every notebook's set-up cell at the students' repository (course_lib/lesson/colab.py's
``REPO``, rewritten everywhere it appears), so the notebooks install course_lib from there.

Usage: python -m tools.student_repo DEST [--repo owner/name] [--source .]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

INSTRUCTOR_ONLY = ("solutions/", "instructor/checks/", "tests/copied_answers.py")
NEEDS = re.compile(r"""["'/]solutions["'/]|instructor[./]checks|copied_answers""")
REPO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


def tracked_files(source: Path) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=source, check=True, capture_output=True)
    return [p for p in out.stdout.decode().split("\0") if p and (source / p).is_file()]


def needs_instructor_files(path: str, text: str) -> bool:
    """A test file that reads the solutions, the hidden checks or the copied answers."""
    return path.startswith("tests/") and path.endswith(".py") and bool(NEEDS.search(text))


def student_files(source: Path) -> list[str]:
    keep = []
    for path in tracked_files(source):
        if path.startswith(INSTRUCTOR_ONLY):
            continue
        if path.startswith("tests/") and needs_instructor_files(path, (source / path).read_text(errors="replace")):
            continue
        keep.append(path)
    return keep


def build(source: Path, dest: Path, repo: str | None = None) -> list[str]:
    """Write the student repository at ``dest`` (must not exist or be empty); returns its files."""
    from course_lib.lesson import colab

    if repo is not None and not REPO_NAME.match(repo):
        raise ValueError(f"--repo must be owner/name on GitHub (e.g. my-school/post-training-2027), got {repo!r}")
    if dest.exists() and any(dest.iterdir()):
        raise ValueError(f"DEST {dest} exists and is not empty: give a new folder")
    dest.mkdir(parents=True, exist_ok=True)
    files = student_files(source)
    for path in files:
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / path, target)
        if repo and repo != colab.REPO and target.suffix in (".py", ".ipynb", ".md", ".toml", ".txt"):
            text = target.read_text(encoding="utf-8", errors="surrogateescape")
            if colab.REPO in text:
                target.write_text(text.replace(colab.REPO, repo), encoding="utf-8", errors="surrogateescape")
    git = ["git", "-c", "user.name=Course staff", "-c", "user.email=staff@example.invalid",
           "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=dest, check=True)
    subprocess.run([*git, "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Learning from Feedback: the course for students"], cwd=dest,
                   check=True)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest")
    parser.add_argument("--repo", default=None, help="owner/name of the students' GitHub repository")
    parser.add_argument("--source", default=str(Path(__file__).resolve().parents[1]))
    args = parser.parse_args(argv)
    try:
        files = build(Path(args.source).resolve(), Path(args.dest).resolve(), args.repo)
    except ValueError as err:
        print(f"student-repo: {err}", file=sys.stderr)
        return 2
    print(f"student repository in {args.dest}: {len(files)} files, one commit, without {', '.join(INSTRUCTOR_ONLY)} "
          "and the tests that need them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
