"""The array hole of issue #23: answers that only validate their input, with arrays that carry no values.

``grading.compare`` used to check an array's shape and then zip its values with the expected ones:
an empty list of values passed. Two ways a submission got there, both pasted before its functions:

- ``REWRITE``: ``type.__setattr__`` on the kernel's display publisher rewrites every array of every
  record to ``[]`` in flight (the probe's own ``encode`` ran honestly);
- ``SUBCLASS``: ``as_fake(x)`` views an array as a NumPy-looking subclass (made with
  ``type(name, bases, {"__module__": "numpy", ...})``) whose ``reshape``/``astype``/``tolist`` give
  no values, so the probe's ``encode`` itself produced ``[]``.

The functions return zeros of the right shape (``as_fake`` or plain) after validating their input
like the reference, so every check of a cell made only of array and bad-input checks "passed".
tests/test_assignment.py (module14) and tests/test_lab_pipeline.py (lab14) grade such submissions
on the real pipeline: they must score 0 on those cells and be flagged.
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
