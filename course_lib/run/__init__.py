"""Runs: a training run end to end, recipes, the passport, seeds, cached starts, experiments.

Layer rule: imports ``formulas``, ``tinygpt``, ``lesson`` and ``trainers``. Everything that
chains trainers into a result (and the command line in ``course_lib.__main__`` on top) lives here.
"""

MAY_IMPORT = ("formulas", "tinygpt", "lesson", "trainers")
