"""Write the course map into README.md and docs/*.md from ``course_lib.lesson.course_map``.

``python -m tools.course_map`` rewrites every ``<!-- map:NAME -->`` block (``course_map.BLOCKS``:
``table`` and ``assignments`` in the README, ``full`` in docs/course-map.md); ``--check`` only
compares and exits 1 when a page differs (``tests/test_course_map.py`` runs it). Notebook 00 shows
the same source through ``course_map.notebook_map()``.
"""

from __future__ import annotations

import sys

from course_lib.lesson.course_map import BLOCKS
from tools import doc_blocks


def body(name: str) -> str:
    if name not in BLOCKS:
        raise ValueError(f"a map block is named {name!r}; course_lib.lesson.course_map.BLOCKS has "
                         f"{sorted(BLOCKS)}")
    return BLOCKS[name]()


def main(argv=None) -> int:
    return doc_blocks.main(argv, kind="map", body=body, command="python -m tools.course_map",
                           description="write the course map into README.md and docs/*.md")


if __name__ == "__main__":
    sys.exit(main())
