"""Plain data across the one door into a student's kernel: the grading probe's and the lab's codec.

``encode`` turns any Python value into tagged JSON (dicts, lists, strings, numbers): only values
of the exact builtin and NumPy types become data, so no method a student wrote (a subclass of
``list``, ``dict`` or ``ndarray``) runs while encoding; anything else is ``{"t": "object"}``.
``decode`` rebuilds what the other side sends (NumPy arrays, tuples, non-finite floats);
``decode_array`` rebuilds an array that came back from the student's side, refusing anything that
is not exactly one (a ValueError naming it).

Who uses it: ``instructor/grading.py`` (a question's inputs go in, the values of the checked
expressions come out) and ``course_lib.run.lab_check`` (logits go in, a loss's gradient comes out).
Both run this very file's source inside the student's kernel (in a namespace of its own whose
builtins are the real ``builtins`` module), so it must stay self-contained: the standard library,
NumPy imported lazily, no names from the rest of the course.

Tags: none, bool, int, float (``v`` is a number, or "nan" / "inf" / "-inf" so the JSON stays
strict), str, list, tuple, set (``v`` is a list), dict (``v`` is a list of [key, value] pairs),
array (``shape``, ``kind`` "f"/"i"/"b", ``v`` the flat values), raised (``types``: the exception's
class names, most specific first; ``msg``), object (``type``, nothing else).
"""

MAX_ITEMS = 100_000  # a larger value is reported as an object: no check needs more
MAX_DEPTH = 16


def _float(x):
    x = float(x)
    if x != x:
        return {"t": "float", "v": "nan"}
    if x in (float("inf"), float("-inf")):
        return {"t": "float", "v": "inf" if x > 0 else "-inf"}
    return {"t": "float", "v": x}


def encode(value, depth=0):
    """Tagged plain data for ``value`` (never raises for a well-behaved value)."""
    if depth > MAX_DEPTH:
        return {"t": "object", "type": "too deep"}
    kind = type(value)
    if value is None:
        return {"t": "none"}
    if kind is bool:
        return {"t": "bool", "v": value}
    if kind is int:
        return {"t": "int", "v": value} if abs(value) < 2**63 else _float(value)
    if kind is float:
        return _float(value)
    if kind is str:
        return {"t": "str", "v": value[:MAX_ITEMS]}
    if kind in (list, tuple, set, frozenset):
        items = list(value)
        if len(items) > MAX_ITEMS:
            return {"t": "object", "type": kind.__name__ + " (too long)"}
        tag = {list: "list", tuple: "tuple"}.get(kind, "set")
        encoded = [encode(x, depth + 1) for x in items]
        if tag == "set":
            encoded.sort(key=repr)
        return {"t": tag, "v": encoded}
    if kind is dict:
        if len(value) > MAX_ITEMS:
            return {"t": "object", "type": "dict (too long)"}
        return {"t": "dict", "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if getattr(kind, "__module__", "") == "numpy":  # never true of a class a student wrote
        import numpy

        # Exact types only: a subclass (even one whose __module__ claims "numpy") keeps methods
        # its author wrote, e.g. a reshape or tolist that yields no values.
        if kind is numpy.ndarray:
            if value.dtype.kind in "biuf" and value.size <= MAX_ITEMS:
                flat = numpy.ndarray.reshape(value, -1)
                if value.dtype.kind == "b":
                    data = [bool(x) for x in flat.tolist()]
                    return {"t": "array", "shape": list(value.shape), "kind": "b", "v": data}
                data = [_float(x)["v"] for x in flat.astype(float).tolist()]
                return {"t": "array", "shape": list(value.shape), "kind": "f" if value.dtype.kind == "f" else "i",
                        "v": data}
            return {"t": "object", "type": "ndarray of " + str(value.dtype)}
        if kind not in set(numpy.sctypeDict.values()):
            return {"t": "object", "type": "a subclass of a NumPy type"}
        if kind is numpy.str_:  # e.g. an item of an array of strings: any str is an answer
            return {"t": "str", "v": str(value)[:MAX_ITEMS]}
        if kind is numpy.bool_:
            return {"t": "bool", "v": bool(value)}
        if issubclass(kind, numpy.integer):
            return {"t": "int", "v": int(value)}
        if issubclass(kind, numpy.floating):
            return _float(value)
    return {"t": "object", "type": getattr(kind, "__name__", "?")}


def raised(err):
    """Tagged plain data for an exception the checked expression raised."""
    names = [getattr(k, "__name__", "?") for k in type(err).__mro__][:8]
    return {"t": "raised", "types": names, "msg": str(err)[:300]}


def decode(tagged):
    """The Python value behind tagged data (inputs the grader sends to the probe)."""
    tag = tagged["t"]
    if tag == "none":
        return None
    if tag in ("bool", "int", "str"):
        return tagged["v"]
    if tag == "float":
        return float(tagged["v"])
    if tag in ("list", "tuple", "set"):
        items = [decode(x) for x in tagged["v"]]
        return {"list": list, "tuple": tuple, "set": set}[tag](items)
    if tag == "dict":
        return {decode(k): decode(v) for k, v in tagged["v"]}
    if tag == "array":
        import numpy

        dtype = {"f": float, "i": numpy.int64, "b": bool}[tagged["kind"]]
        return numpy.array([float(x) if tagged["kind"] == "f" else x for x in tagged["v"]],
                           dtype=dtype).reshape(tagged["shape"])
    raise ValueError(f"cannot decode tag {tag!r}")


def decode_array(tagged, name, kind="f", shape=None):
    """The NumPy array behind an ``array`` tag from the student's side: float64 for kind "f", int64
    for "i". Anything else is refused with a ValueError naming ``name``: another tag or kind, a shape
    that is not a list of whole numbers >= 0 (or not ``shape`` when given), not one value per
    element, a value that is not a number, NaN or inf, and for kind "i" a fraction."""
    if type(tagged) is not dict or set(tagged) != {"t", "shape", "kind", "v"} or tagged["t"] != "array":
        raise ValueError(f"{name} must be an encoded array {{t: array, shape, kind, v}}")
    if tagged["kind"] != kind:
        raise ValueError(f"{name} must be of kind {kind!r}; got {tagged['kind']!r}")
    dims = tagged["shape"]
    if type(dims) is not list or not all(type(d) is int and d >= 0 for d in dims):
        raise ValueError(f"{name} has a malformed shape")
    if shape is not None and tuple(dims) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}; got {tuple(dims)}")
    values = tagged["v"]
    size = 1
    for d in dims:
        size *= d
    if type(values) is not list or len(values) != size:
        raise ValueError(f"{name}: its values do not fill shape {tuple(dims)}")
    for x in values:
        if type(x) not in (int, float):
            finite = x not in ("nan", "inf", "-inf")
            raise ValueError(f"{name} must hold {'numbers' if finite else 'finite numbers: no NaN or inf'}; "
                             f"got {type(x).__name__}")
    import numpy

    try:
        array = numpy.array(values, dtype=numpy.float64).reshape(dims)
    except OverflowError:
        raise ValueError(f"{name} must hold finite numbers: one is out of range") from None
    if not numpy.isfinite(array).all():
        raise ValueError(f"{name} must hold finite numbers: no NaN or inf")
    if kind == "f":
        return array
    if not (array == numpy.round(array)).all():
        raise ValueError(f"{name} must hold whole numbers")
    return array.astype(numpy.int64)
