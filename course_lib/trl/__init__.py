"""The bridge to Hugging Face TRL: the course's recipes as TRL's configs and trainers.

Layer rule: may import every other folder; nothing in course_lib imports it (TRL is an optional
extra, ``pip install -e .[trl]``).
"""

MAY_IMPORT = ("formulas", "tinygpt", "lesson", "trainers", "run")
