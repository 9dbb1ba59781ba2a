"""Per-assignment checks for instructor/grading.py: one module per assignment, named after it.

A module defines ``checks(rng) -> {grade_id: [Check, ...]}`` with one entry per autograded test cell
of the assignment's notebooks (``grade_id``s are unique across the assignment). Expected values
come from the solution notebooks; the module only says *what* to evaluate and on which inputs.
See instructor/README.md.
"""
