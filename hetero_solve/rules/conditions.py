"""Does a device take a node?  docs/rules.md: op lists, ``when`` conditions, static shapes,
and subgraph bodies (``If``/``Loop``/``Scan`` are atomic: every op inside must be taken too).

:func:`refusal` returns ``None`` when the device takes the node, else the reason as a sentence
fragment users read in errors and in ``rules check``.
"""

from __future__ import annotations

import functools
import re
import secrets
from typing import Any, Callable

import onnx
import onnx.defs
from onnx import helper

from ..model.graph import ModelGraph, TensorType, UNKNOWN_TYPE, type_of_value_info
from ..problem import NamedReason, NonStaticShape, Reason, reason_text
from ..units import dtype_name
from .ops import is_onnx_domain, rule_op_name
from .load import DeviceRules, OpCondition, Rules
from ..model.qdq import find_units

_MISSING = object()


class SupportChecker:
    """Caches op-level answers so that 100,000 nodes cost one dict lookup each."""

    def __init__(self, rules: Rules, mg: ModelGraph):
        self.rules = rules
        self.mg = mg
        self._op_cache: dict[int, dict[str, str | None]] = {}   # device -> op -> reason
        self._node_cache: dict[tuple, tuple | None] = {}
        self._slots = _Slots()
        self._quantized: frozenset[int] | None = None

    def quantized_nodes(self) -> frozenset[int]:
        """The nodes that are the centre of a quantized unit (:mod:`..model.qdq`), found once
        when a ``quantized`` condition first asks."""
        if self._quantized is None:
            self._quantized = find_units(self.mg).quantized
        return self._quantized

    def refusal(self, d: int, i: int) -> str | None:
        """Why device ``d`` refuses main-graph node ``i`` (None = it takes it)."""
        return self.refusals(d, [i])[0]

    def refusals(self, d: int, nodes: list[int]) -> list[str | None]:
        """:meth:`refusal` of each main-graph node in ``nodes``, in one pass."""
        return [reason_text(e) for e in self.reasons(d, nodes)]

    def reasons(self, d: int, nodes: list[int]) -> list[Reason]:
        """:meth:`refusals` as records whose text is made when read
        (:data:`~hetero_solve.problem.Reason`, what :class:`~hetero_solve.problem.Refusals`
        holds): only errors and explanations read reasons, and a static-shape device can
        refuse 70,000 nodes of a large model.

        The op lists decide most nodes with one lookup per op type.  A ``when`` condition
        reads only the op, the element type and rank of each of the node's tensors and the
        attributes it names, and layers repeat a few such signatures: each signature is
        checked once, on placeholder tensor names (a refusal names a tensor by its
        position), and the answer kept with each node's own names
        (:class:`~hetero_solve.problem.NamedReason`).  A node the condition takes (or that has
        none) is then refused by a static-shape device for its first non-static tensor
        (:class:`~hetero_solve.problem.NonStaticShape`).  Nodes with subgraphs are checked
        alone."""
        dev = self.rules.devices[d]
        mg = self.mg
        ops, domains, has_sub = _rule_op_names(mg), mg.domains, mg.has_subgraph
        all_inputs, all_outputs = mg.inputs, mg.outputs
        by_op = self._op_cache.setdefault(d, {})
        nonstatic = mg.nonstatic if dev.static_shapes else ()
        when = dev.when
        cache = self._node_cache
        types = mg.types
        if not when and not nonstatic:   # the op lists alone decide, but for subgraph bodies
            for op in set(map(ops.__getitem__, nodes)).difference(by_op):
                by_op[op] = op_refusal(dev, op)
            out = list(map(by_op.__getitem__, map(ops.__getitem__, nodes)))
            for k, i in enumerate(nodes):
                if has_sub[i] and out[k] is None:
                    out[k] = self._node_alone(d, i)
            return out
        out = []
        for i in nodes:
            op = ops[i]
            reason = by_op.get(op, _MISSING)
            if reason is _MISSING:
                reason = by_op[op] = op_refusal(dev, op)
            if reason is not None:
                out.append(reason)
                continue
            if has_sub[i]:
                out.append(self._node_alone(d, i))
                continue
            inputs, outputs = all_inputs[i], all_outputs[i]
            cond = when.get(op)
            if cond is not None:
                # A when condition reads the attributes it names and each tensor's element
                # type and rank: nodes alike in those share one answer.
                attrs = None
                if cond.attributes:
                    attrs = {a.name: a for a in mg.model.graph.node[i].attribute}
                quantized = None if cond.quantized is None else i in self.quantized_nodes()
                key = (d, op, domains[i], len(inputs),
                       tuple([(types[x].elem_type, types[x].rank) if x else 0
                              for x in inputs + outputs]),
                       tuple(attrs[a].SerializeToString() if a in attrs else None
                             for a in cond.attributes) if attrs is not None else (), quantized)
                found = cache.get(key, _MISSING)
                if found is _MISSING:
                    found = cache[key] = _pieces(self._signature_refusal(d, i, attrs, quantized),
                                                 self._slots)
                if found is not None:
                    out.append(NamedReason(found, inputs, outputs))
                    continue
            if nonstatic:
                first = _first_open(inputs, outputs, nonstatic.__contains__)
                if first is not None:
                    role, k, x = first
                    out.append(NonStaticShape(role, k, x, types[x].shape, dev.name))
                    continue
            out.append(None)
        return out

    def _node_context(self, d: int, i: int):
        """Device, op, opset of the node's domain, and value-input positions (read by a
        ``when`` condition's dtype check) for :func:`node_refusal`."""
        dev, mg = self.rules.devices[d], self.mg
        op = rule_op_name(mg.op_types[i], mg.domains[i])
        opset = mg.opsets.get(mg.domains[i] or "", mg.opset)
        value_idx = self.rules.value_input_indices(op, opset) if op in dev.when else ()
        return dev, op, opset, value_idx

    def _signature_refusal(self, d: int, i: int, attrs: dict | None,
                           quantized: bool | None) -> str | None:
        """Node ``i``'s ``when`` condition checked on placeholder tensor names (see
        :meth:`reasons`)."""
        mg = self.mg
        dev, op, opset, value_idx = self._node_context(d, i)
        inputs, outputs = mg.inputs[i], mg.outputs[i]
        attributes = (lambda: attrs.values()) if attrs is not None else \
            (lambda: mg.model.graph.node[i].attribute)
        slot = self._slots.name
        slots_in = tuple(slot("i", k) if x else "" for k, x in enumerate(inputs))
        slots_out = tuple(slot("o", k) if x else "" for k, x in enumerate(outputs))
        types = {s: mg.tensor_type(x) for s, x in zip(slots_in + slots_out, inputs + outputs) if s}
        return _condition_refusal(dev, dev.when[op], op, slots_in, slots_out, attributes,
                                  types.__getitem__, opset, value_idx, mg.domains[i],
                                  bool(quantized))

    def _node_reason(self, d: int, i: int) -> str | None:
        """Node ``i``'s reason on device ``d``, checked alone (no subgraphs)."""
        mg = self.mg
        dev, op, opset, value_idx = self._node_context(d, i)
        quantized = op in dev.when and dev.when[op].quantized is not None \
            and i in self.quantized_nodes()
        return node_refusal(dev, op, mg.inputs[i], mg.outputs[i],
                            lambda: mg.model.graph.node[i].attribute, mg.tensor_type, opset,
                            value_idx, mg.domains[i], quantized)

    def _node_alone(self, d: int, i: int) -> str | None:
        """A node with subgraphs: its own tensors, then every node of its bodies."""
        reason = self._node_reason(d, i)
        return reason if reason is not None else self._body_refusal(d, i)

    def _body_refusal(self, d: int, i: int) -> str | None:
        dev = self.rules.devices[d]
        mg = self.mg
        node = mg.inferred_node(i)
        types: dict[str, TensorType] = {}
        outer = mg.tensor_type

        def lookup(name: str) -> TensorType:
            t = types.get(name)
            return t if t is not None else outer(name)

        return _graphs_refusal(dev, node, lookup, types, mg.opsets, self.rules, mg.op_types[i])


class _Slots:
    """Placeholder tensor names for cached refusals: printable (``repr()`` leaves them as
    they are) and carrying a random token, so that no device name, attribute or dimension
    name in a reason can be taken for one."""

    def __init__(self):
        token = secrets.token_hex(6)
        self.token = token
        self.pattern = re.compile(f"'\u27e8([io])(\\d+):{token}\u27e9'|\u27e8([io])(\\d+):{token}\u27e9")

    def name(self, role: str, k: int) -> str:
        return f"\u27e8{role}{k}:{self.token}\u27e9"


def _pieces(text: str | None, slots: _Slots) -> tuple | None:
    """A refusal found on placeholder tensor names, cut at its placeholders: texts and
    ``(is_input, position, quoted)`` holes (:class:`~hetero_solve.problem.NamedReason`)."""
    if text is None:
        return None
    pieces: list = []
    at = 0
    for m in slots.pattern.finditer(text):
        quoted = m.group(1) is not None
        role, k = (m.group(1), m.group(2)) if quoted else (m.group(3), m.group(4))
        pieces += [text[at:m.start()], (role == "i", int(k), quoted)]
        at = m.end()
    pieces.append(text[at:])
    return tuple(pieces)


def _rule_op_names(mg: ModelGraph) -> list[str]:
    """Each node's op as rule files name it (:func:`~hetero_solve.rules.ops.rule_op_name`:
    ``com.microsoft.FusedConv`` for a domain onnx does not know)."""
    if all(not d or is_onnx_domain(d) for d in set(mg.domains)):
        return mg.op_types
    return [rule_op_name(op, d) for op, d in zip(mg.op_types, mg.domains)]


def op_refusal(dev: DeviceRules, op: str) -> str | None:
    """The op-list part of the check (no node needed)."""
    if op in dev.unsupported:
        return f"{op} is listed in {dev.name}'s ops.unsupported"
    if dev.supported is not None and op not in dev.supported:
        return f"{op} is not in {dev.name}'s ops.supported"
    return None


def node_refusal(dev: DeviceRules, op: str, inputs: tuple[str, ...], outputs: tuple[str, ...],
                 attributes: Callable[[], Any], type_of: Callable[[str], TensorType],
                 opset: int, value_idx: tuple[int, ...], domain: str = "",
                 quantized: bool = False) -> str | None:
    """``when`` conditions and ``static_shapes`` for one node (op list already checked).
    ``attributes()`` gives the node's ``AttributeProto`` list, read only when a condition
    names attributes; ``quantized``: whether the node is the centre of a quantized unit
    (nodes inside subgraphs never are)."""
    cond = dev.when.get(op)
    if cond is not None:
        reason = _condition_refusal(dev, cond, op, inputs, outputs, attributes, type_of, opset,
                                    value_idx, domain, quantized)
        if reason:
            return reason
    if dev.static_shapes:
        first = _first_open(inputs, outputs, lambda name: not type_of(name).static)
        if first is not None:
            role, k, name = first
            return NonStaticShape(role, k, name, type_of(name).shape, dev.name).text()
    return None


def _first_open(inputs: tuple[str, ...], outputs: tuple[str, ...],
                is_open: Callable[[str], bool]) -> tuple[str, int, str] | None:
    """The first tensor of a node, inputs then outputs, whose shape is not static:
    ``(role, position, name)``, or None."""
    for role, names in (("input", inputs), ("output", outputs)):
        for k, name in enumerate(names):
            if name and is_open(name):
                return role, k, name
    return None


def _condition_refusal(dev: DeviceRules, cond: OpCondition, op: str, inputs: tuple[str, ...],
                       outputs: tuple[str, ...], attributes: Callable[[], Any],
                       type_of: Callable[[str], TensorType], opset: int,
                       value_idx: tuple[int, ...], domain: str, quantized: bool) -> str | None:
    if cond.quantized is not None and cond.quantized != quantized:
        return (f"{dev.name} takes {op} only {'in' if cond.quantized else 'outside'} a quantized "
                f"unit (DequantizeLinear -> {op} -> QuantizeLinear), and this one is "
                f"{'not ' if cond.quantized else ''}quantized (ops.when.{op}.quantized)")
    given = {a.name: a for a in attributes()} if cond.attributes else {}
    for name, wanted in cond.attributes.items():
        if name in given:
            actual = _attr_value(given[name])
        else:
            actual = _schema_default(op, name, opset, domain)
            if actual is _MISSING:
                return (f"attribute {name} is not set and has no default, but {dev.name} needs "
                        f"{name}={_show(wanted)} (ops.when.{op})")
        if not _equal(actual, wanted):
            return f"attribute {name}={_show(actual)}, {dev.name} needs {_show(wanted)} (ops.when.{op})"
    if cond.dtypes is not None and not (
            all(not x or k in value_idx or type_of(x).elem_type in cond.dtypes for k, x in enumerate(inputs))
            and all(not x or type_of(x).elem_type in cond.dtypes for x in outputs)):
        for role, name in _tensors(inputs, outputs, value_idx):
            t = type_of(name)
            if t.elem_type not in cond.dtypes:
                return (f"{role} {name!r} is {dtype_name(t.elem_type)}, {dev.name} takes "
                        f"{', '.join(cond.dtype_names)} (ops.when.{op}.dtypes)")
    limit = cond.max_rank
    if limit is not None and not all(not x or (r := type_of(x).rank) is not None and r <= limit
                                     for x in inputs + outputs):
        for role, name in _tensors(inputs, outputs, ()):
            r = type_of(name).rank
            if r is None or r > cond.max_rank:
                shown = "unknown" if r is None else str(r)
                return (f"{role} {name!r} has rank {shown}, {dev.name} takes at most "
                        f"{cond.max_rank} (ops.when.{op}.max_rank)")
    return None


def _tensors(inputs: tuple[str, ...], outputs: tuple[str, ...], skip_inputs: tuple[int, ...]):
    for k, x in enumerate(inputs):
        if x and k not in skip_inputs:
            yield f"input {k}", x
    for k, x in enumerate(outputs):
        if x:
            yield f"output {k}", x


def _graphs_refusal(dev: DeviceRules, node: onnx.NodeProto, lookup, types: dict, opsets: dict,
                    rules: Rules, outer_op: str) -> str | None:
    for a in node.attribute:
        graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else (
            list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else [])
        for g in graphs:
            for vi in list(g.input) + list(g.output) + list(g.value_info):
                types[vi.name] = type_of_value_info(vi)
            for t in g.initializer:
                types[t.name] = TensorType(t.data_type, tuple(t.dims))
            for inner in g.node:
                inner_op = rule_op_name(inner.op_type, inner.domain)
                reason = op_refusal(dev, inner_op)
                if reason is None:
                    opset = opsets.get(inner.domain or "", opsets.get("", 1))
                    reason = node_refusal(dev, inner_op, tuple(inner.input), tuple(inner.output),
                                          lambda n=inner: n.attribute, lookup, opset,
                                          rules.value_input_indices(inner.op_type, opset), inner.domain)
                if reason is None:
                    reason = _graphs_refusal(dev, inner, lookup, types, opsets, rules, inner.op_type)
                if reason is not None:
                    name = inner.name or inner.op_type
                    return f"{outer_op} body ({a.name}) node {name!r}: {reason}"
    return None


def _attr_value(attr: onnx.AttributeProto) -> Any:
    v = helper.get_attribute_value(attr)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, list):
        return [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in v]
    return v


@functools.lru_cache(maxsize=4096)
def _schema_default(op: str, name: str, opset: int, domain: str) -> Any:
    """The op schema's default for an attribute at an opset (cached: one lookup per op)."""
    try:
        schema = onnx.defs.get_schema(op, opset, domain or "")
    except Exception:
        return _MISSING
    attr = schema.attributes.get(name)
    if attr is None:
        return _MISSING
    default = attr.default_value
    if default is None or default.type == onnx.AttributeProto.UNDEFINED:
        return _MISSING
    return _attr_value(default)


def _equal(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, (list, tuple)) and isinstance(actual, (list, tuple)):
        return len(actual) == len(wanted) and all(_equal(a, w) for a, w in zip(actual, wanted))
    if isinstance(wanted, bool) or isinstance(actual, bool):
        return bool(actual) == bool(wanted) and not isinstance(actual, str)
    if isinstance(wanted, (int, float)) and isinstance(actual, (int, float)):
        return abs(float(actual) - float(wanted)) <= 1e-6 * max(1.0, abs(float(wanted)))
    return actual == wanted


def _show(v: Any) -> str:
    return repr(v) if isinstance(v, str) else str(v)


__all__ = ["SupportChecker", "op_refusal", "node_refusal", "UNKNOWN_TYPE"]
