"""Symbolic values of shape arithmetic: the dims ONNX inference leaves open behind mask code.

ONNX data propagation follows ``Shape -> Gather -> Concat -> Reshape`` with symbolic dims, but
stops at arithmetic on them (``past_sequence + sequence``), at ``Range``, ``ConstantOfShape``,
``Equal``/``Where`` (torch's ``Where(Equal(shape, -1), ones, shape)`` before an ``Expand``),
``Div`` (``rotate_half``'s ``x[..., : d // 2]``) and a ``Concat`` of symbolic dims (a KV
cache).  The runtime knows each of those sizes; :func:`symbolic_hints` computes them, so that
the next inference round (``shapes.analyse_shapes``) starts from them.

A dim is an ``int``, an :class:`Expr` (a polynomial with integer coefficients over the graph
inputs' dim names, each name a size, so ``>= 0``), or :data:`UNKNOWN`.  An expression is
written canonically (``batch*past_sequence + batch*sequence``, ``sequence - 1``): equal
expressions are equal strings, which ONNX inference then carries as a ``dim_param`` (equal
names, equal values).  Nothing is claimed that does not follow exactly: a division that does
not divide, a comparison whose sign depends on the dims, a ``Slice`` bound that may clamp,
stay unknown.

The values are small numpy arrays of such dims (``dtype=object``; at most
:data:`MAX_ELEMENTS` elements), one per shape tensor, computed node by node in graph order.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Iterable

import numpy as np
import onnx

from .graph import GraphLists, TypeTable

#: Values of at most this many elements are followed (shape tensors, scalars).
MAX_ELEMENTS = 64
#: A ``Slice`` end at or beyond this means "to the end" (exporters write INT64_MAX or INT32_MAX).
_TO_END = (1 << 31) - 1
_ATOM = re.compile(r"[A-Za-z_][A-Za-z0-9_.:]*\Z")


# -- expressions -------------------------------------------------------------------------------

class _Unknown:
    """A value nothing can be said of; every operation on it is unknown too."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"

    def _same(self, *_):
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __neg__ = _same


UNKNOWN = _Unknown()


class Expr:
    """``sum(coefficient * product of names)``: ``terms`` maps a sorted tuple of names (with
    repeats) to a nonzero coefficient; never a constant alone (that is an ``int``)."""

    __slots__ = ("terms", "_key")

    def __init__(self, terms: dict[tuple[str, ...], int]):
        self.terms = terms
        self._key = frozenset(terms.items())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expr) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"Expr({str(self)!r})"

    def __str__(self) -> str:
        parts = []
        for names in sorted(self.terms, key=lambda n: (len(n) == 0, n)):
            c = self.terms[names]
            body = "*".join(names)
            text = str(abs(c)) if not body else body if abs(c) == 1 else f"{abs(c)}*{body}"
            parts.append((c < 0, text))
        out = ("-" if parts[0][0] else "") + parts[0][1]
        for negative, text in parts[1:]:
            out += (" - " if negative else " + ") + text
        return out

    def constant(self) -> int:
        return self.terms.get((), 0)

    def __add__(self, other):
        other = _as_dim(other)
        if other is UNKNOWN:
            return UNKNOWN
        terms = dict(self.terms)
        for names, c in _terms(other).items():
            terms[names] = terms.get(names, 0) + c
        return _make(terms)

    __radd__ = __add__

    def __neg__(self):
        return _make({k: -c for k, c in self.terms.items()})

    def __sub__(self, other):
        other = _as_dim(other)
        return UNKNOWN if other is UNKNOWN else self + (-other)

    def __rsub__(self, other):
        return (-self) + other

    def __mul__(self, other):
        other = _as_dim(other)
        if other is UNKNOWN:
            return UNKNOWN
        terms: dict[tuple[str, ...], int] = {}
        for a, c in self.terms.items():
            for b, d in _terms(other).items():
                key = tuple(sorted(a + b))
                terms[key] = terms.get(key, 0) + c * d
        return _make(terms)

    __rmul__ = __mul__


def _terms(d) -> dict[tuple[str, ...], int]:
    return d.terms if isinstance(d, Expr) else {(): d} if d else {}


def _make(terms: dict[tuple[str, ...], int]):
    terms = {k: c for k, c in terms.items() if c}
    if not terms:
        return 0
    if list(terms) == [()]:
        return terms[()]
    return Expr(terms)


def _as_dim(x):
    """``x`` as a dim: an ``int`` (a whole float or a bool too), an :class:`Expr`, else
    :data:`UNKNOWN`."""
    if isinstance(x, (Expr, _Unknown)):
        return x
    if isinstance(x, (bool, np.bool_)):
        return int(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)) and math.isfinite(x) and float(x).is_integer():
        return int(x)
    return UNKNOWN


def symbol(name: str) -> Expr:
    return Expr({(name,): 1})


def parse(d) -> int | Expr | _Unknown:
    """A shape's dim as a dim: a number, an expression :class:`Expr` writes (``a*b + c -
    1``), a name; ``None``, ``?`` and inference's ``unk__N`` are unknown."""
    if isinstance(d, int):
        return d
    if not isinstance(d, str) or d in ("", "?") or d.startswith("unk__"):
        return UNKNOWN
    tokens = re.split(r" ([+-]) ", d)
    if len(tokens) == 1 and not d.startswith("-") and "*" not in d:
        return symbol(d)
    total = 0
    sign = 1
    for k, token in enumerate(tokens):
        if k % 2:
            sign = 1 if token == "+" else -1
            continue
        if k == 0 and token.startswith("-"):
            sign, token = -1, token[1:]
        term = sign
        for factor in token.split("*"):
            if factor.isdigit():
                term = term * int(factor)
            elif _ATOM.match(factor):
                term = symbol(factor) * term
            else:
                return symbol(d)   # not an expression: a name (with spaces, dashes...)
        total = total + term
    return total


def evaluate(d, dims: dict[str, int]) -> int | None:
    """The value of a dim (as a shape holds it) once the names have the values ``dims``;
    ``None`` when unknown or a name has none."""
    e = parse(d)
    if isinstance(e, int):
        return e
    if e is UNKNOWN or any(n not in dims for names in e.terms for n in names):
        return None
    return sum(c * math.prod(dims[n] for n in names) for names, c in e.terms.items())


def written(d) -> int | str | None:
    """A dim as a shape holds it: a number, an expression's canonical text, ``None``."""
    return d if isinstance(d, int) else str(d) if isinstance(d, Expr) else None


def bounds(d) -> tuple[float, float]:
    """Lower and upper bounds of a dim over every value of its names (each ``>= 0``)."""
    if isinstance(d, int):
        return d, d
    if not isinstance(d, Expr):
        return -math.inf, math.inf
    c = d.constant()
    coefs = [v for k, v in d.terms.items() if k]
    if all(v > 0 for v in coefs):
        return c, math.inf
    if all(v < 0 for v in coefs):
        return -math.inf, c
    return -math.inf, math.inf


def _sign(a, b) -> tuple[float, float]:
    a, b = _as_dim(a), _as_dim(b)
    if a is UNKNOWN or b is UNKNOWN:
        return -math.inf, math.inf
    return bounds(a - b)


def _equal(a, b):
    lo, hi = _sign(a, b)
    return True if lo == hi == 0 else False if lo > 0 or hi < 0 else UNKNOWN


def _less(a, b):
    lo, hi = _sign(a, b)
    return True if hi < 0 else False if lo >= 0 else UNKNOWN


def _less_equal(a, b):
    lo, hi = _sign(a, b)
    return True if hi <= 0 else False if lo > 0 else UNKNOWN


def _min(a, b):
    lo, hi = _sign(a, b)
    return _as_dim(a) if hi <= 0 else _as_dim(b) if lo >= 0 else UNKNOWN


def _max(a, b):
    lo, hi = _sign(a, b)
    return _as_dim(b) if hi <= 0 else _as_dim(a) if lo >= 0 else UNKNOWN


def _divide(a, b, integer: bool):
    """ONNX ``Div``: an integer one truncates (the runtime's C division)."""
    if isinstance(a, (float, np.floating)) and isinstance(b, (int, float, np.number)) and b:
        return a / b if not integer else _as_dim(int(a / b))
    a, b = _as_dim(a), _as_dim(b)
    if a is UNKNOWN or b is UNKNOWN or b == 0:
        return UNKNOWN
    if isinstance(b, Expr):
        return 1 if a == b else UNKNOWN
    if isinstance(a, int):
        if integer:
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b > 0) else -q
        return a // b if a % b == 0 else a / b
    if all(c % b == 0 for c in a.terms.values()):
        return _make({k: c // b for k, c in a.terms.items()})
    return UNKNOWN


def _not(a):
    return UNKNOWN if a is UNKNOWN or isinstance(a, Expr) else not a


def _where(c, x, y):
    return x if c is True else y if c is False else UNKNOWN if x != y else x


def _truth(a):
    """A value as a bool (``Cast`` to bool)."""
    if isinstance(a, (bool, np.bool_)):
        return bool(a)
    lo, hi = bounds(_as_dim(a))
    return True if lo > 0 or hi < 0 else False if lo == hi == 0 else UNKNOWN


_UFUNCS = {name: np.frompyfunc(f, n, 1) for name, f, n in (
    ("Equal", _equal, 2), ("Less", _less, 2), ("LessOrEqual", _less_equal, 2),
    ("Greater", lambda a, b: _less(b, a), 2), ("GreaterOrEqual", lambda a, b: _less_equal(b, a), 2),
    ("Min", _min, 2), ("Max", _max, 2), ("Not", _not, 1), ("Where", _where, 3),
    ("bool", _truth, 1))}


# -- values node by node -----------------------------------------------------------------------

_ELEMENTWISE = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}
_FLOATS = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                     onnx.TensorProto.BFLOAT16})


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute
            if a.type != onnx.AttributeProto.GRAPH}


def _ints(v: np.ndarray | None) -> list[int] | None:
    """A value's elements as plain ints, when every one is a number."""
    if v is None:
        return None
    out = [_as_dim(x) for x in v.reshape(-1)]
    return out if all(isinstance(x, int) for x in out) else None


def _small(v: np.ndarray) -> np.ndarray | None:
    return v if v.size <= MAX_ELEMENTS else None


def _broadcast(a: tuple | None, b: tuple | None) -> tuple | None:
    """Numpy broadcasting of two shapes of dims (unknown where it depends on the values)."""
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x == y and x is not UNKNOWN:
            out.append(x)
        elif isinstance(x, int) and y is UNKNOWN or x is UNKNOWN and isinstance(y, int):
            out.append(x if isinstance(x, int) else y)   # the unknown must be 1 or the number
        else:
            out.append(UNKNOWN)
    return tuple(out)


class _Pass:
    """One walk over the main graph in node order: the values of the small tensors and the
    shapes of the outputs whose size a value decides."""

    def __init__(self, graph: GraphLists, types: TypeTable, folded: set[int],
                 constant: Callable[[str], np.ndarray | None]):
        self.graph, self.types, self.folded, self.constant = graph, types, folded, constant
        self.values: dict[str, np.ndarray] = {}
        self.shapes: dict[str, tuple] = {}

    def shape(self, x: str) -> tuple | None:
        found = self.shapes.get(x)
        if found is not None:
            return found
        t = self.types[x]
        return None if t.shape is None else tuple(parse(d) for d in t.shape)

    def value(self, x: str) -> np.ndarray | None:
        if not x:
            return None
        v = self.values.get(x)
        if v is None and (x in self.graph.base_constants or self._folded(x)):
            t = self.types[x]
            if t.static and t.count <= MAX_ELEMENTS:   # never a weight
                c = self.constant(x)
                if c is not None and c.size <= MAX_ELEMENTS and c.dtype.kind in "biuf":
                    v = self.values[x] = np.asarray(c).astype(object)
        return v

    def _folded(self, x: str) -> bool:
        i = self.graph.producer.get(x)
        return i is not None and i in self.folded

    def run(self) -> dict[str, tuple]:
        g = self.graph
        nodes = g.model.graph.node
        for i, op in enumerate(g.op_types):
            if g.domains[i] not in ("", "ai.onnx") or op not in _OPS:
                continue
            try:
                _OPS[op](self, nodes[i], g.inputs[i], g.outputs[i])
            except Exception:   # a model the runtime would refuse (ranks, axes, types...):
                continue        # no claim, and loading goes on as ONNX inference left it
        return self.shapes

    def set_value(self, out: str, v: np.ndarray | None) -> None:
        if out and v is not None:
            v = np.asarray(v, dtype=object)
            if v.size <= MAX_ELEMENTS:
                self.values[out] = v

    def set_shape(self, out: str, shape: Iterable | None) -> None:
        if out and shape is not None:
            self.shapes[out] = tuple(_as_dim(d) for d in shape)

    def known(self, ins: tuple[str, ...], k: int) -> np.ndarray | None:
        return self.value(ins[k]) if len(ins) > k else None


def _op_shape(p: _Pass, node, ins, outs):
    s = p.shape(ins[0])
    if s is None:
        return
    a = _attrs(node)
    start, end = a.get("start", 0), a.get("end")
    r = len(s)
    start = max(0, min(r, start + r if start < 0 else start))
    end = r if end is None else max(0, min(r, end + r if end < 0 else end))
    out = np.empty(max(end - start, 0), dtype=object)
    out[:] = list(s[start:end])
    p.set_value(outs[0], out)


def _op_size(p: _Pass, node, ins, outs):
    s = p.shape(ins[0])
    if s is not None:
        total = 1
        for d in s:
            total = total * d
        p.set_value(outs[0], np.array(total, dtype=object))


def _op_identity(p: _Pass, node, ins, outs):
    p.set_value(outs[0], p.value(ins[0]))


def _op_cast(p: _Pass, node, ins, outs):
    v = p.value(ins[0])
    if v is None:
        return
    to = _attrs(node).get("to")
    if to == onnx.TensorProto.BOOL:
        p.set_value(outs[0], _UFUNCS["bool"](v))
    elif to in _FLOATS:
        p.set_value(outs[0], v)
    else:   # to an integer: a float truncates toward 0
        p.set_value(outs[0], np.frompyfunc(
            lambda x: _as_dim(int(x)) if isinstance(x, float) else _as_dim(x), 1, 1)(v))


def _op_gather(p: _Pass, node, ins, outs):
    v, idx = p.value(ins[0]), _ints(p.known(ins, 1))
    if v is None or idx is None:
        return
    shape = p.value(ins[1]).shape
    axis = _attrs(node).get("axis", 0)
    n = v.shape[axis]
    idx = np.array([k + n if k < 0 else k for k in idx], dtype=np.int64).reshape(shape)
    p.set_value(outs[0], np.take(v, idx, axis=axis))


def _op_concat(p: _Pass, node, ins, outs):
    axis = _attrs(node).get("axis", 0)
    values = [p.value(x) for x in ins if x]
    if values and all(v is not None for v in values):
        p.set_value(outs[0], np.concatenate([v.reshape(v.shape or (1,)) if v.ndim == 0 else v
                                             for v in values], axis=axis))
    shapes = [p.shape(x) for x in ins if x]
    if shapes and all(s is not None and len(s) == len(shapes[0]) for s in shapes):
        r = len(shapes[0])
        k = axis + r if axis < 0 else axis
        total = 0
        for s in shapes:
            total = total + s[k]
        out = list(shapes[0])
        for j in range(r):
            if j != k:
                same = [s[j] for s in shapes if s[j] is not UNKNOWN]
                out[j] = same[0] if same else UNKNOWN
        out[k] = total
        p.set_shape(outs[0], out)


def _axes(p: _Pass, node, ins, k: int) -> list[int] | None:
    if len(ins) > k and ins[k]:
        return _ints(p.value(ins[k]))
    axes = _attrs(node).get("axes")
    return list(axes) if axes is not None else None


def _op_unsqueeze(p: _Pass, node, ins, outs):
    v, axes = p.value(ins[0]), _axes(p, node, ins, 1)
    if v is None or axes is None:
        return
    r = v.ndim + len(axes)
    shape = list(v.shape)
    for a in sorted(a + r if a < 0 else a for a in axes):
        shape.insert(a, 1)
    p.set_value(outs[0], v.reshape(shape))


def _op_squeeze(p: _Pass, node, ins, outs):
    v = p.value(ins[0])
    if v is None:
        return
    axes = _axes(p, node, ins, 1)
    if axes is None:
        p.set_value(outs[0], v.reshape([d for d in v.shape if d != 1]))
        return
    drop = {a + v.ndim if a < 0 else a for a in axes}
    p.set_value(outs[0], v.reshape([d for k, d in enumerate(v.shape) if k not in drop]))


def _slice_params(p: _Pass, node, ins, rank: int):
    """``(axis, start, end, step)`` per sliced axis, or ``None`` when not all are known."""
    if len(ins) > 1:   # opset 10+: inputs
        starts, ends = p.known(ins, 1), p.known(ins, 2)
        if starts is None or ends is None:
            return None
        starts, ends = [_as_dim(x) for x in starts.reshape(-1)], [_as_dim(x) for x in ends.reshape(-1)]
        axes = _ints(p.known(ins, 3)) if len(ins) > 3 and ins[3] else list(range(len(starts)))
        steps = _ints(p.known(ins, 4)) if len(ins) > 4 and ins[4] else [1] * len(starts)
    else:
        a = _attrs(node)
        starts, ends = list(a.get("starts", [])), list(a.get("ends", []))
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    if axes is None or steps is None:
        return None
    return [(ax + rank if ax < 0 else ax, s, e, st) for ax, s, e, st in zip(axes, starts, ends, steps)]


def _sliced(d, start, end, step):
    """The length of ``range(d)[start:end:step]`` as ONNX clamps it, when it is certain."""
    if all(isinstance(x, int) for x in (d, start, end, step)):
        return len(range(d)[start:end:step])
    if step != 1 or d is UNKNOWN or start is UNKNOWN or end is UNKNOWN:
        return UNKNOWN
    if isinstance(end, int) and end >= _TO_END:
        end = d
    if isinstance(start, int) and start < 0 or isinstance(end, int) and end < 0:
        return UNKNOWN
    # Certain only when 0 <= start <= end <= d (no clamping).
    if _less_equal(0, start) is True and _less_equal(start, end) is True and _less_equal(end, d) is True:
        return end - start
    return UNKNOWN


def _op_slice(p: _Pass, node, ins, outs):
    s = p.shape(ins[0])
    if s is None:
        return
    params = _slice_params(p, node, ins, len(s))
    if params is None:
        return
    v = p.value(ins[0])
    if v is not None and v.ndim == 1 and len(params) == 1 and all(
            isinstance(x, int) for x in params[0][1:]):
        _, start, end, step = params[0]
        end = min(end, len(v)) if end >= 0 else end
        p.set_value(outs[0], v[start:end:step])
    out = list(s)
    for ax, start, end, step in params:
        out[ax] = _sliced(s[ax], start, end, step)
    p.set_shape(outs[0], out)


def _op_arith(p: _Pass, node, ins, outs):
    a, b = p.value(ins[0]), p.known(ins, 1)
    if a is None or b is None or len(ins) != 2:   # Min/Max of three or more: not followed
        return
    op = node.op_type
    if op in _ELEMENTWISE:
        p.set_value(outs[0], _ELEMENTWISE[op](a, b))
    elif op == "Div":
        elem = p.types[outs[0]].elem_type
        if not elem:   # integer or not decides the division
            return
        integer = elem not in _FLOATS
        p.set_value(outs[0], np.frompyfunc(lambda x, y: _divide(x, y, integer), 2, 1)(a, b))
    else:
        p.set_value(outs[0], _UFUNCS[op](a, b))


def _op_neg(p: _Pass, node, ins, outs):
    v = p.value(ins[0])
    if v is not None:
        p.set_value(outs[0], -v)


def _op_not(p: _Pass, node, ins, outs):
    v = p.value(ins[0])
    if v is not None:
        p.set_value(outs[0], _UFUNCS["Not"](v))


def _op_where(p: _Pass, node, ins, outs):
    c, x, y = (p.known(ins, k) for k in range(3))
    if c is not None and x is not None and y is not None:
        p.set_value(outs[0], _UFUNCS["Where"](c, x, y))
    shapes = [p.shape(z) for z in ins[:3]]
    out = _broadcast(_broadcast(shapes[0], shapes[1]), shapes[2])
    if out is not None:
        p.set_shape(outs[0], out)


def _op_constant_of_shape(p: _Pass, node, ins, outs):
    v = p.value(ins[0])
    if v is None:
        return
    dims = [_as_dim(d) for d in v.reshape(-1)]
    p.set_shape(outs[0], dims)
    if all(isinstance(d, int) for d in dims):
        fill = _attrs(node).get("value")
        x = onnx.numpy_helper.to_array(fill).reshape(-1)[0].item() if fill is not None else 0
        if math.prod(dims) <= MAX_ELEMENTS:
            p.set_value(outs[0], np.full(dims, x, dtype=object))


def _op_range(p: _Pass, node, ins, outs):
    start, limit, delta = (p.known(ins, k) for k in range(3))
    if start is None or limit is None or delta is None:
        return
    start, limit, delta = (_as_dim(x.reshape(-1)[0]) for x in (start, limit, delta))
    if all(isinstance(x, int) for x in (start, limit, delta)) and delta:
        n = max(math.ceil((limit - start) / delta), 0)
        p.set_shape(outs[0], [n])
        if n <= MAX_ELEMENTS:
            p.set_value(outs[0], np.array(list(range(start, limit, delta)), dtype=object))
        return
    if not isinstance(delta, int) or delta <= 0:
        return
    span = limit - start
    if bounds(span)[0] >= 0:
        n = _divide(span, delta, integer=True) if delta != 1 else span
        if n is not UNKNOWN:
            p.set_shape(outs[0], [n])


def _op_reshape(p: _Pass, node, ins, outs):
    target = p.known(ins, 1)
    if target is None:
        return
    dims = [_as_dim(d) for d in target.reshape(-1)]
    v = p.value(ins[0])
    if v is not None and all(isinstance(d, int) for d in dims):
        p.set_value(outs[0], v.reshape([v.shape[k] if d == 0 and not _attrs(node).get("allowzero")
                                        else d for k, d in enumerate(dims)]))
    s = p.shape(ins[0])
    if not _attrs(node).get("allowzero"):
        dims = [(s[k] if s is not None and k < len(s) else UNKNOWN) if d == 0 else d
                for k, d in enumerate(dims)]
    if sum(1 for d in dims if d == -1) == 1 and s is not None:
        total = 1
        for d in s:
            total = total * d
        rest = 1
        for d in dims:
            if d != -1:
                rest = rest * d
        k = dims.index(-1)
        dims[k] = _exact_quotient(total, rest)
    if -1 not in dims:
        p.set_shape(outs[0], dims)


def _exact_quotient(a, b):
    """``a / b`` when ``b`` divides ``a`` exactly (``b`` a number or one product of names)."""
    a, b = _as_dim(a), _as_dim(b)
    if a is UNKNOWN or b is UNKNOWN or b == 0:
        return UNKNOWN
    if isinstance(b, int):
        return _divide(a, b, integer=False) if isinstance(a, Expr) or a % b == 0 else UNKNOWN
    if len(b.terms) != 1:
        return 1 if a == b else UNKNOWN
    (names, c), = b.terms.items()
    terms = {}
    for key, d in _terms(a).items():
        rest = list(key)
        for n in names:
            if n not in rest:
                return UNKNOWN
            rest.remove(n)
        if d % c:
            return UNKNOWN
        terms[tuple(rest)] = d // c
    return _make(terms)


def _op_expand(p: _Pass, node, ins, outs):
    target = p.known(ins, 1)
    if target is None:
        return
    dims = tuple(_as_dim(d) for d in target.reshape(-1))
    out = _broadcast(p.shape(ins[0]), dims)
    p.set_shape(outs[0], out)
    v = p.value(ins[0])
    if v is not None and out is not None and all(isinstance(d, int) for d in out) \
            and math.prod(out) <= MAX_ELEMENTS:
        p.set_value(outs[0], np.broadcast_to(v, out).copy())


def _op_tile(p: _Pass, node, ins, outs):
    s, reps = p.shape(ins[0]), p.known(ins, 1)
    if s is not None and reps is not None:
        p.set_shape(outs[0], [d * _as_dim(r) for d, r in zip(s, reps.reshape(-1))])


def _op_flatten(p: _Pass, node, ins, outs):
    s = p.shape(ins[0])
    if s is None:
        return
    axis = _attrs(node).get("axis", 1)
    axis = axis + len(s) if axis < 0 else axis
    a = b = 1
    for d in s[:axis]:
        a = a * d
    for d in s[axis:]:
        b = b * d
    p.set_shape(outs[0], [a, b])


_OPS: dict[str, Callable] = {
    "Shape": _op_shape, "Size": _op_size, "Identity": _op_identity, "Cast": _op_cast,
    "Gather": _op_gather, "Concat": _op_concat, "Unsqueeze": _op_unsqueeze,
    "Squeeze": _op_squeeze, "Slice": _op_slice, "Neg": _op_neg, "Not": _op_not,
    "Where": _op_where, "ConstantOfShape": _op_constant_of_shape, "Range": _op_range,
    "Reshape": _op_reshape, "Expand": _op_expand, "Tile": _op_tile, "Flatten": _op_flatten,
    **{op: _op_arith for op in ("Add", "Sub", "Mul", "Div", "Min", "Max", "Equal", "Less",
                                "LessOrEqual", "Greater", "GreaterOrEqual")},
}


# -- hints ---------------------------------------------------------------------------------------

def symbolic_hints(graph: GraphLists, types: TypeTable, folded: set[int],
                   constant: Callable[[str], np.ndarray | None]) -> list[onnx.ValueInfoProto]:
    """The output types whose dims ONNX inference left open and the values of shape
    arithmetic fix (the module docstring): each a number or an expression of the inputs'
    dim names, never against a dim inference knows.  ``constant(name)``: a constant's
    value if known without computing it, else ``None`` (folded nodes are followed here
    like the others, so folding stays lazy)."""
    if all(types[x].static for outs in graph.outputs for x in outs if x):
        return []
    found = _Pass(graph, types, folded, constant).run()
    hints = []
    for x, shape in found.items():
        t = types[x]
        if graph.producer.get(x) in folded:   # folding gives it its shape
            continue
        if t.static or (t.shape is not None and len(t.shape) != len(shape)):
            continue
        old = t.shape if t.shape is not None else (None,) * len(shape)
        dims = [d if _named(d) else written(s) for d, s in zip(old, shape)]
        if t.shape is None or any(not _named(d) and e is not None for d, e in zip(old, dims)):
            hints.append(onnx.helper.make_tensor_value_info(
                x, t.elem_type, [d if isinstance(d, (int, str)) else None for d in dims]))
    return hints


def _named(d) -> bool:
    """A dimension with a number or a name inference can carry (``?`` is no name)."""
    return isinstance(d, int) or (isinstance(d, str) and d not in ("", "?")
                                  and not d.startswith("unk__"))
