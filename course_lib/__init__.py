"""course_lib: one home per formula for the Learning from Feedback course (Module 14).

Modules are named after the lecture's ideas. The module map, one line per module from its own
docstring, is generated into ``docs/library.md`` (``python -m tools.module_map``).
"""

__version__ = "0.1.0"
