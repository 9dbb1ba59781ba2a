"""The array hole: answers that only validate their input, with arrays that carry no values.

``grading.compare`` used to check an array's shape and then zip its values with the expected ones:
an empty list of values passed. Two ways a submission got there, both pasted before its functions:

- ``REWRITE``: ``type.__setattr__`` on the kernel's display publisher rewrites every array of every
  record to ``[]`` in flight (the probe's own ``encode`` ran honestly);
- ``SUBCLASS``: ``as_fake(x)`` views an array as a NumPy-looking subclass (made with
  ``type(name, bases, {"__module__": "numpy", ...})``) whose ``reshape``/``astype``/``tolist`` give
  no values, so the probe's ``encode`` itself produced ``[]``.

The functions return zeros of the right shape (``as_fake`` or plain) after validating their input
like the reference, so every check of a cell made only of array and bad-input checks "passed".
tests/test_assignment.py (module14, both ways) and tests/test_lab_pipeline.py (lab14, the rewrite)
grade such submissions on the real pipeline: they must score 0 on those cells and be flagged. In
lab14 a subclass cannot get that far: its checks pass results through torch (``torch.as_tensor``,
gradients), which turns any array back into a plain one.
"""

REWRITE = '''
from ipykernel.zmqshell import ZMQDisplayPublisher as _Publisher
_publish = _Publisher.publish
def _no_values(x):
    if isinstance(x, dict):
        return {k: ([] if k == "v" and x.get("t") == "array" else _no_values(v)) for k, v in x.items()}
    return [_no_values(v) for v in x] if isinstance(x, list) else x
def _rewriting_publish(self, *args, **kwargs):
    if "data" in kwargs:
        kwargs["data"] = _no_values(kwargs["data"])
    else:
        args = (_no_values(args[0]), *args[1:])
    return _publish(self, *args, **kwargs)
type.__setattr__(_Publisher, "publish", _rewriting_publish)
def as_fake(x):
    return x
'''

SUBCLASS = '''
import numpy as _np
_Fake = type("ndarray", (_np.ndarray,), {"__module__": "numpy", "reshape": lambda self, *a, **k: self,
                                         "astype": lambda self, *a, **k: self, "tolist": lambda self: []})
def as_fake(x):
    return _np.asarray(x).view(_Fake)
'''

# module14 Q1: bt_matrix validates like the reference and returns zeros of shape (n, n)
BT_MATRIX = '''
import numpy as np
def bt_matrix(scores):
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1 or len(s) < 2 or not np.all(np.isfinite(s)):
        raise ValueError("scores must be a 1-D list of at least two finite numbers")
    return as_fake(np.zeros((len(s), len(s))))
'''

# lab14: the three functions whose cells check arrays and bad input only, validating like the
# solution and returning zeros of the right shapes (connected to the input, so gradients exist)
LAB_FUNCTIONS = {
    "lab_logprobs": '''
import torch
def completion_logprobs(logits, input_ids, completion_mask):
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3 or not logits.is_floating_point():
        raise ValueError("logits")
    if tuple(input_ids.shape) != tuple(logits.shape[:2]) or tuple(completion_mask.shape) != tuple(input_ids.shape):
        raise ValueError("shapes")
    if not bool(((completion_mask == 0) | (completion_mask == 1)).all()) or bool((completion_mask[:, 0] != 0).any()):
        raise ValueError("mask")
    return logits[:, 1:, 0] * 0, completion_mask[:, 1:].float() * 0
''',
    "lab_advantages": '''
def group_advantages(rewards, group_size, scale="group"):
    if scale not in ("group", "none") or isinstance(group_size, bool) or int(group_size) != group_size \\
            or group_size < 2:
        raise ValueError("arguments")
    r = torch.as_tensor(rewards, dtype=torch.float64)
    if r.ndim != 1 or r.numel() % int(group_size) or not bool(torch.isfinite(r).all()):
        raise ValueError("rewards")
    return torch.zeros(r.numel())
''',
    "lab_clip_aggregate": '''
def clipped_objective(ratio, advantages, epsilon_low, epsilon_high):
    if not 0 <= epsilon_low < 1 or not epsilon_high >= 0:
        raise ValueError("epsilons")
    if ratio.ndim != 2 or tuple(advantages.shape) != (ratio.shape[0],):
        raise ValueError("shapes")
    return ratio * 0
''',
}
LAB_CELLS = ("lab_test_logprobs", "lab_test_advantages", "lab_test_clip")  # what they used to pass
