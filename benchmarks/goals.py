"""The goals the benchmark tables judge a run against: one place, read by ``tables.py`` when it renders.

Each is a bound on one measured number; the tables state the goal beside the number and say met or not.
"""

SEEDS_WALL_RATIO = 2.2  # 4 GRPO seeds side by side, in at most this many times the wall-clock of one (2 cores)
SEEDS_SIDE_BY_SIDE = 4
TRL_CPU_STEP_RATIO = 0.5  # course_lib's GRPO CPU seconds per step ÷ TRL's, at most
ASYNC_SPEEDUP = 1.3  # optimiser steps per wall-clock second, a rollout worker one step behind ÷ synchronous, at least
CLASS_SIZE = 150  # a class graded in at most CLASS_MINUTES
CLASS_MINUTES = 6  # on 2 cores
RM_OF_NOISE_CEILING = 0.90  # the reward model's held-out pairwise accuracy ÷ the noise ceiling, at least
