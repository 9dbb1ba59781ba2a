"""The formulas: every loss, advantage, KL and budget the lectures derive, on plain tensors.

Layer rule: a formula imports no other folder of course_lib (only ``course_lib._validate``):
no model, no task, no trainer. Each function reproduces a worked example of a notebook and is the
very function the trainers call, so a formula has one home.
"""

MAY_IMPORT = ()
