"""The trainers: the one training loop, its registry, every trainer's config, one file per trainer.

Layer rule: imports ``formulas`` and ``tinygpt``; a trainer may use another trainer (KTO and
ORPO step through DPO's offline loop) but never a run: no pipeline, recipe or passport. Each
trainer's FLOP count (``utilisation``) sits beside the trainers it counts.
"""

MAY_IMPORT = ("formulas", "tinygpt")
