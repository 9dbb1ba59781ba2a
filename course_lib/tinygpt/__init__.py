"""The tiny GPT's world: the task, the network, sampling, rewards, environments and run plumbing.

Layer rule: imports ``formulas`` only. Nothing here knows a trainer, a config or a run: these
are the pieces every trainer shares (the device and threads, checkpoints, the held-out
evaluation).
"""

MAY_IMPORT = ("formulas",)
