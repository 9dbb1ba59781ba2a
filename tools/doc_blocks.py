"""Generated blocks in the project's markdown pages: README.md and every ``docs/*.md``.

A block is the text between a ``<!-- KIND:NAME -->`` line and its ``<!-- /KIND:NAME -->``, wherever
it stands in those pages; a generator gives the body for each name: ``benchmarks/tables.py`` the
``bench`` blocks (from the benchmarks' JSON), ``tools/course_map.py`` the ``map`` blocks (from
``course_lib.lesson.course_map``). ``main`` rewrites every page's blocks of one kind, or with ``--check``
only compares and exits 1 naming the stale pages (the tests run it).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pages(root: Path = ROOT) -> list[Path]:
    """The pages that may hold generated blocks: README.md, then docs/*.md in name order."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def pattern(kind: str) -> re.Pattern:
    start, end = rf"<!-- {kind}:(?P<name>[a-z0-9_-]+) -->\n", rf"<!-- /{kind}:(?P=name) -->"
    return re.compile(rf"({start})(?P<body>.*?)({end})", re.S)


def render(text: str, kind: str, body: Callable[[str], str]) -> str:
    """``text`` with the body of every ``kind`` block replaced by ``body(name)``."""
    return pattern(kind).sub(lambda m: m.group(1) + body(m.group("name")) + m.group(4), text)


def main(argv, *, kind: str, body: Callable[[str], str], command: str, description: str) -> int:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a page's blocks differ from what they render")
    parser.add_argument("--root", default=str(ROOT),
                        help="the checkout whose README.md and docs/*.md to render")
    args = parser.parse_args(argv)
    stale, count = [], 0
    for path in pages(Path(args.root)):
        text = path.read_text(encoding="utf-8")
        count += len(pattern(kind).findall(text))
        new = render(text, kind, body)
        if new != text:
            stale.append(str(path))
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if count == 0:
        print(f"no <!-- {kind}:NAME --> block in README.md or docs/*.md under {args.root}",
              file=sys.stderr)
        return 1
    if args.check:
        if stale:
            print(f"stale {kind} blocks in {', '.join(stale)}: run {command}", file=sys.stderr)
            return 1
        return 0
    print(f"{count} {kind} block(s); rewrote {', '.join(stale) or 'no page (all current)'}")
    return 0
