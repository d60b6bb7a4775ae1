"""Rule files from the runtime itself: ``hetero-solve rules from-openvino DEVICE`` and
``rules from-onnxruntime PROVIDER`` (docs/runtimes.md).

For every op type of ONNX's default domain at one opset, and every element type its schema
allows among :data:`DTYPES`, a *probe*: a model of that one node, built from the op's schema
in ``onnx.defs`` (required inputs as graph inputs, the type constraint of the first input bound
to the element type, required attributes given plain values).  A probe ONNX itself rejects
(strict shape inference) is tried again with other input ranks; an op no probe of which ONNX
accepts is *not probed* (listed in the file's header, left out of ``supported``).  ``Loop``,
``Scan``, ``If`` and the sequence and optional ops have hand-built probes (a body graph; a
chain from a tensor through the op back to a tensor).  Each valid probe is then put to the
runtime:

- OpenVINO: ``core.read_model`` then ``core.query_model(model, DEVICE)``; the op is taken when
  every op OpenVINO made of the node is in the answer (a probe OpenVINO cannot read is
  refused);
- onnxruntime: an ``InferenceSession`` with ``[PROVIDER, CPUExecutionProvider]`` and graph
  optimisations off; the op is taken when onnxruntime's graph assignment info
  (``session.record_ep_graph_assignment_info``) puts the node on PROVIDER (for the CPU
  provider on an onnxruntime without that report: when the session can be created).

For onnxruntime, ops not probed (other domains: ``com.microsoft.*``, ``ai.onnx.ml``) are
taken when its kernel registry has them for the provider (:func:`onnxruntime_registry`).

The rule file lists every op with a taken probe in ``supported`` and, where some element
type the schema allows was refused, ``when: {Op: {dtypes: [...]}}`` with the element types of
every input and output of the taken probes (a rule file's ``dtypes`` holds for every tensor of
the node, so an index type such as int64 is listed with the data types).  Shapes are not
probed: probes have symbolic dims, so what a device refuses only for some shapes is not seen.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import onnx
import onnx.defs
from onnx import TensorProto, helper, numpy_helper

from ..errors import HeteroSolveError
from .ops import check_op_name, rule_op_name

#: Element types probed (rule-file names), and ONNX's type strings for them.
DTYPES = ("float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool")
TYPE_STR = {"float32": "tensor(float)", "float16": "tensor(float16)",
            "float64": "tensor(double)", "int64": "tensor(int64)", "int32": "tensor(int32)",
            "int8": "tensor(int8)", "uint8": "tensor(uint8)", "bool": "tensor(bool)"}
_ELEM = {v: k for k, v in TYPE_STR.items()}
_ELEM_TYPE = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16,
              "float64": TensorProto.DOUBLE, "int64": TensorProto.INT64,
              "int32": TensorProto.INT32, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8,
              "bool": TensorProto.BOOL}
#: Probe forms tried in order until the runtime takes one: the first input's rank, and the
#: other inputs' shape (see :func:`build_probe`).
#: Static forms (all dims 1) come last: a device may refuse what it cannot check on symbolic
#: dims (OpenVINO's Squeeze of a dim it does not know is 1).
FORMS = ((4, "vector", False), (4, "same", False), (2, "vector", False), (2, "same", False),
         (1, "vector", False), (3, "same", False), (0, "scalar", False),
         (4, "vector", True), (4, "same", True), (1, "vector", True), (3, "same", True))
#: The opset probes are built at (ONNX's newest is capped: runtimes lag behind it).
DEFAULT_OPSET = 17
#: Ops not probed: a value, which every runtime takes (listed as supported all the same).
SKIP = frozenset({"Constant"})


class ProbeError(HeteroSolveError):
    """The runtime or device asked for is not there (``str(e)`` is one line)."""


@dataclass(frozen=True)
class Probe:
    """One probe model: op, element type, and the element types of all its tensors."""
    op: str
    dtype: str
    model: onnx.ModelProto
    tensor_dtypes: frozenset[str]


@dataclass
class RuntimeOps:
    """What a runtime said of every op type: the element types taken, those refused, and the
    ops no probe could be built for."""
    runtime: str
    device: str
    opset: int
    taken: dict[str, set[str]] = field(default_factory=dict)       # op -> probed dtypes taken
    refused: dict[str, set[str]] = field(default_factory=dict)     # op -> probed dtypes refused
    tensor_dtypes: dict[str, set[str]] = field(default_factory=dict)
    not_probed: list[str] = field(default_factory=list)
    #: ops not probed but taken because the runtime's kernel registry has them for the device
    registered: list[str] = field(default_factory=list)

    def take_registered(self, registry: set[str], every_op: bool) -> None:
        """Take the ops no probe was built for that ``registry`` (the rule names of the ops
        the runtime has kernels for on the device) holds, and, when ``every_op`` was asked
        for, every other op of it not probed (other domains: ``com.microsoft.*``)."""
        extra = registry - set(self.taken) - set(self.refused) - SKIP if every_op else set()
        hits = (set(self.not_probed) | extra) & registry
        self.registered = sorted(hits)
        self.not_probed = [op for op in self.not_probed if op not in hits]

    def ops_section(self) -> dict:
        """The ``ops`` mapping of a rule file's device (``Constant`` always: every runtime
        takes a value; it matters inside ``If``/``Loop`` bodies, where it is not folded)."""
        supported = sorted({*self.taken, *self.registered, "Constant"})
        when = {}
        for op in sorted(self.taken):
            if self.refused.get(op):
                when[op] = {"dtypes": [d for d in DTYPES if d in self.tensor_dtypes[op]]}
        return {"supported": supported, **({"when": when} if when else {})}


# -- probes -----------------------------------------------------------------------------------

def op_schemas(opset: int, ops: Iterable[str] | None = None) -> list[onnx.defs.OpSchema]:
    """The default domain's op schemas as of ``opset`` (deprecated ones left out), by name."""
    wanted = set(ops) if ops is not None else None
    names = sorted({s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == ""})
    found = []
    for name in names:
        if (wanted is not None and name not in wanted) or name in SKIP:
            continue
        try:
            schema = onnx.defs.get_schema(name, opset, "")
        except onnx.defs.SchemaError:
            continue
        if not schema.deprecated:
            found.append(schema)
    return found


def _binding(schema: onnx.defs.OpSchema, dtype: str) -> dict[str, str] | None:
    """Type parameter -> type string, with the first type parameter of the inputs (else of the
    outputs) set to ``dtype``; ``None`` when the schema does not allow it there (an op whose
    tensors all have fixed types is probed on those only)."""
    allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    formals = list(schema.inputs) + list(schema.outputs)
    want = TYPE_STR[dtype]
    # the first parameter with a choice (Where's condition B is always bool: T decides)
    params = sorted((f.type_str for f in formals if f.type_str in allowed),
                    key=lambda t: len(allowed[t]) == 1)
    if params:
        if want not in allowed[params[0]]:
            return None
        bound = {params[0]: want}
    elif want in {f.type_str for f in formals}:
        bound = {}
    else:
        return None
    for param, types in allowed.items():
        if param in bound:
            continue
        tensors = [t for t in types if t in _ELEM]
        for choice in (want, TYPE_STR["int64"], TYPE_STR["float32"], *tensors):
            if choice in tensors:
                bound[param] = choice
                break
    return bound


#: Attributes a runtime needs although the schema makes them optional, and optional inputs a
#: probe must give (by position; "" skips one), so that the kernel can be created.
ATTRIBUTES = {"LSTM": {"hidden_size": 1}, "GRU": {"hidden_size": 1}, "RNN": {"hidden_size": 1},
              "BitShift": {"direction": "LEFT"}}
OPTIONAL_INPUTS = {"Resize": 3}   # X, roi (skipped), scales
#: Shapes of constant inputs that must be just so (by input position, from the probe's rank).
CONSTANT_SHAPES = {"Pad": {1: lambda r: [2 * r]}, "OneHot": {1: lambda r: [], 2: lambda r: [2]},
                   # W and R of one direction, hidden size 1, input size 1 (gates x hidden)
                   **{op: {1: (lambda r, g=g: [1, g, 1]), 2: (lambda r, g=g: [1, g, 1])}
                      for op, g in (("LSTM", 4), ("GRU", 3), ("RNN", 1))}}


def _type_of(type_str: str, bound: dict[str, str]) -> str | None:
    resolved = bound.get(type_str, type_str)
    return _ELEM.get(resolved)


def _attribute(attr, rank: int | None):
    """A plain value for a required attribute (None: cannot make one)."""
    kinds = onnx.defs.OpSchema.AttrType
    width = max((rank or 4) - 2, 1)
    values = {kinds.INT: 1, kinds.FLOAT: 1.0, kinds.STRING: "", kinds.INTS: [1] * width,
              kinds.FLOATS: [1.0], kinds.STRINGS: [""]}
    return values.get(attr.type)


def build_probe(schema: onnx.defs.OpSchema, dtype: str, opset: int, rank: int,
                others: str = "vector", static: bool = False) -> Probe | None:
    """The one-node model probing ``schema`` on ``dtype``, or None when the schema cannot take
    it (type, required attribute without a plain value).

    The first input is a graph input of ``rank`` symbolic dims (and the second of a variadic
    first input, as ``Concat``'s); the other inputs are constants of ones, as weights, shapes
    and axes are in real models (OpenVINO's CPU plugin takes a ``Conv`` only with constant
    weights): ``others="vector"`` makes them 1-D of one element, ``"same"`` of ``rank`` dims
    of 1, ``"scalar"`` scalars (:data:`CONSTANT_SHAPES` fixes some ops' own).  ``static``:
    the graph inputs' dims are 1, not symbolic."""
    if schema.name == "If":
        return _if_probe(dtype, opset)
    if schema.name in COMPOSITE:
        return COMPOSITE[schema.name](dtype, opset)
    bound = _binding(schema, dtype)
    if bound is None:
        return None
    inputs, inits, names, tensors = [], [], [], set()
    for k, formal in enumerate(schema.inputs):
        if formal.option == onnx.defs.OpSchema.FormalParameterOption.Optional:
            if k >= OPTIONAL_INPUTS.get(schema.name, 0):
                break
            if 0 < k < OPTIONAL_INPUTS[schema.name] - 1:
                names.append("")
                continue
        elem = _type_of(formal.type_str, bound)
        if elem is None:
            return None
        count = 2 if formal.option == onnx.defs.OpSchema.FormalParameterOption.Variadic else 1
        for j in range(count):
            name = f"x{k}_{j}"
            if k == 0:
                shape = [1 if static else f"d{i}" for i in range(rank)]
                inputs.append(helper.make_tensor_value_info(name, _ELEM_TYPE[elem], shape))
            else:
                dims = {"vector": [1], "same": [1] * rank, "scalar": []}[others]
                dims = CONSTANT_SHAPES.get(schema.name, {}).get(k, lambda r: dims)(rank)
                inits.append(numpy_helper.from_array(
                    np.ones(dims, dtype=helper.tensor_dtype_to_np_dtype(_ELEM_TYPE[elem])), name))
            names.append(name)
            tensors.add(elem)
    outputs = []
    for k, formal in enumerate(schema.outputs):
        if formal.option == onnx.defs.OpSchema.FormalParameterOption.Optional and k > 0:
            break
        if _type_of(formal.type_str, bound) is None:
            return None
        # typed by inference below (an attribute may decide it: QuantizeLinear's zero point)
        outputs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.UNDEFINED, None))
    attrs = dict(ATTRIBUTES.get(schema.name, {}))
    for name, attr in schema.attributes.items():
        if attr.required and name not in attrs:
            value = _attribute(attr, rank)
            if value is None:
                return None
            attrs[name] = value
    node = helper.make_node(schema.name, names, [o.name for o in outputs],
                            name=f"probe_{schema.name}", **attrs)
    return _checked(schema.name, dtype, node, inputs, outputs, opset, tensors, inits)


def _if_probe(dtype: str, opset: int) -> Probe | None:
    """``If`` on a bool input, each branch an ``Identity`` of an outer tensor of ``dtype``."""
    elem = _ELEM_TYPE[dtype]
    branches = [helper.make_graph([helper.make_node("Identity", ["x"], [f"b{k}"])], f"b{k}", [],
                                  [helper.make_tensor_value_info(f"b{k}", elem, None)])
                for k in range(2)]
    node = helper.make_node("If", ["c"], ["y0"], name="probe_If", then_branch=branches[0],
                            else_branch=branches[1])
    inputs = [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
              helper.make_tensor_value_info("x", elem, ["d0"])]
    outputs = [helper.make_tensor_value_info("y0", elem, None)]
    return _checked("If", dtype, node, inputs, outputs, opset, {"bool", dtype})


def _loop_probe(dtype: str, opset: int) -> Probe | None:
    """``Loop`` of two iterations carrying an input of ``dtype`` through an ``Identity``
    body."""
    elem = _ELEM_TYPE[dtype]
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Identity", ["v_in"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", elem, None)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", elem, None)])
    node = helper.make_node("Loop", ["m", "c", "x"], ["y0"], name="probe_Loop", body=body)
    inits = [numpy_helper.from_array(np.array(2, dtype=np.int64), "m"),
             numpy_helper.from_array(np.array(True), "c")]
    return _checked("Loop", dtype, node, [_input("x", elem, 1)],
                    [helper.make_tensor_value_info("y0", elem, None)], opset,
                    {"int64", "bool", dtype}, inits)


def _scan_probe(dtype: str, opset: int) -> Probe | None:
    """``Scan`` over the first axis of an input of ``dtype``, an ``Identity`` body."""
    elem = _ELEM_TYPE[dtype]
    body = helper.make_graph([helper.make_node("Identity", ["s_in"], ["s_out"])], "body",
                             [helper.make_tensor_value_info("s_in", elem, None)],
                             [helper.make_tensor_value_info("s_out", elem, None)])
    node = helper.make_node("Scan", ["x"], ["y0"], name="probe_Scan", body=body,
                            num_scan_inputs=1)
    return _checked("Scan", dtype, node, [_input("x", elem, 2)],
                    [helper.make_tensor_value_info("y0", elem, None)], opset, {dtype})


#: Sequence and optional ops, probed as a short chain from a tensor to a tensor around the op
#: (``SequenceConstruct`` makes the sequence, ``SequenceAt`` reads one back): node specs
#: ``(op, inputs, outputs, attributes)``; ``x`` is the graph input, ``k0``/``k1`` int64
#: scalars 0 and 1, ``y0`` the output.
_CHAINS = {
    "SequenceConstruct": [("SequenceConstruct", ["x", "x"], ["s"], {}),
                          ("SequenceAt", ["s", "k0"], ["y0"], {})],
    "SequenceLength": [("SequenceConstruct", ["x"], ["s"], {}),
                       ("SequenceLength", ["s"], ["y0"], {})],
    "SequenceEmpty": [("SequenceEmpty", [], ["e"], {"dtype": None}),
                      ("SequenceInsert", ["e", "x"], ["s"], {}),
                      ("SequenceAt", ["s", "k0"], ["y0"], {})],
    "SequenceInsert": [("SequenceConstruct", ["x"], ["s"], {}),
                       ("SequenceInsert", ["s", "x"], ["t"], {}),
                       ("SequenceAt", ["t", "k1"], ["y0"], {})],
    "SequenceErase": [("SequenceConstruct", ["x", "x"], ["s"], {}),
                      ("SequenceErase", ["s"], ["t"], {}),
                      ("SequenceAt", ["t", "k0"], ["y0"], {})],
    "SplitToSequence": [("SplitToSequence", ["x"], ["s"], {"axis": 0}),
                        ("ConcatFromSequence", ["s"], ["y0"], {"axis": 0})],
    "ConcatFromSequence": [("SequenceConstruct", ["x", "x"], ["s"], {}),
                           ("ConcatFromSequence", ["s"], ["y0"], {"axis": 0})],
    "Optional": [("Optional", ["x"], ["o"], {}),
                 ("OptionalGetElement", ["o"], ["y0"], {})],
    "OptionalHasElement": [("Optional", ["x"], ["o"], {}),
                           ("OptionalHasElement", ["o"], ["y0"], {})],
}
_CHAINS["SequenceAt"] = _CHAINS["SequenceConstruct"]
_CHAINS["OptionalGetElement"] = _CHAINS["Optional"]


def _chain_probe(op: str, dtype: str, opset: int) -> Probe | None:
    """The probe of a sequence or optional op: its chain of :data:`_CHAINS` (every node of
    it must be taken, so an op is taken only with the ops around it)."""
    elem = _ELEM_TYPE[dtype]
    nodes = [helper.make_node(kind, ins, outs, name=f"probe_{op}_{n}",
                              **{k: (elem if v is None else v) for k, v in attrs.items()})
             for n, (kind, ins, outs, attrs) in enumerate(_CHAINS[op])]
    inits = [numpy_helper.from_array(np.array(k, dtype=np.int64), f"k{k}") for k in (0, 1)]
    used = {i for node in nodes for i in node.input}
    return _checked(op, dtype, nodes, [_input("x", elem, 2)],
                    [helper.make_tensor_value_info("y0", TensorProto.UNDEFINED, None)], opset,
                    {dtype, "int64"}, [t for t in inits if t.name in used])


def _input(name: str, elem: int, rank: int):
    return helper.make_tensor_value_info(name, elem, [f"d{i}" for i in range(rank)])


#: Ops with a hand-built probe (a body graph, or sequence values in between).
COMPOSITE: dict[str, Callable[[str, int], Probe | None]] = {
    "Loop": _loop_probe, "Scan": _scan_probe,
    **{op: (lambda dtype, opset, op=op: _chain_probe(op, dtype, opset)) for op in _CHAINS}}


def _checked(op, dtype, node, inputs, outputs, opset, tensors, inits=()) -> Probe | None:
    """The probe when ONNX's strict shape inference accepts it (it checks types, attributes
    and ranks; the checker would insist on shapes, which probes leave open), its outputs
    typed as inference types them."""
    nodes = node if isinstance(node, list) else [node]
    graph = helper.make_graph(nodes, f"probe_{op}", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except Exception:   # noqa: BLE001 (ONNX rejects this probe: try another rank)
        return None
    types = {vi.name: vi.type for vi in inferred.graph.value_info}
    types.update({vi.name: vi.type for vi in inferred.graph.output})
    names = {v: k for k, v in _ELEM_TYPE.items()}
    tensors = set(tensors)
    for out in model.graph.output:
        found = types.get(out.name)
        if found is not None and found.tensor_type.elem_type:
            out.type.tensor_type.elem_type = found.tensor_type.elem_type
        tensors.add(names.get(out.type.tensor_type.elem_type, "float32"))
    return Probe(op, dtype, model, frozenset(tensors))


def probes(schema: onnx.defs.OpSchema, dtype: str, opset: int) -> Iterator[Probe]:
    """Probes of ``schema`` on ``dtype`` ONNX accepts, one per form of :data:`FORMS`."""
    for rank, others, static in FORMS:
        probe = build_probe(schema, dtype, opset, rank, others, static)
        if probe is not None:
            yield probe
        if schema.name == "If" or schema.name in COMPOSITE:
            return


def ask_runtime(runtime: str, device: str, takes: Callable[[list[onnx.ModelProto]], list[bool]],
                *, opset: int = DEFAULT_OPSET, ops: Iterable[str] | None = None,
                dtypes: Sequence[str] = DTYPES) -> RuntimeOps:
    """Put the probes to ``takes`` (for a list of probe models: does the runtime put each
    one's node on the device?), in rounds: every (op, element type) not yet taken offers its
    next form, until one is taken or none is left."""
    found = RuntimeOps(runtime, device, opset)
    pending = []
    schemas = op_schemas(opset, ops)
    # asked for but not of the default domain at this opset (com.microsoft.*, ai.onnx.ml)
    found.not_probed = sorted(set(ops or ()) - {s.name for s in schemas} - SKIP)
    for schema in schemas:
        offers = [(dtype, probes(schema, dtype, opset)) for dtype in dtypes]
        pending.extend((schema.name, dtype, it) for dtype, it in offers)
        found.not_probed.append(schema.name)
    tried: set[tuple[str, str]] = set()
    while pending:
        batch = [(op, dtype, it, next(it, None)) for op, dtype, it in pending]
        live = [(op, dtype, it, probe) for op, dtype, it, probe in batch if probe is not None]
        for op, dtype, _, probe in batch:
            if probe is None and (op, dtype) in tried:   # every form refused
                found.refused.setdefault(op, set()).add(dtype)
        verdicts = takes([probe.model for *_, probe in live]) if live else []
        pending = []
        for (op, dtype, it, probe), taken in zip(live, verdicts):
            tried.add((op, dtype))
            if taken:
                found.taken.setdefault(op, set()).add(dtype)
                found.tensor_dtypes.setdefault(op, set()).update(probe.tensor_dtypes)
            else:
                pending.append((op, dtype, it))
    probed = {op for op, _ in tried}
    found.not_probed = sorted(op for op in found.not_probed if op not in probed)
    return found


# -- the runtimes -----------------------------------------------------------------------------

def openvino_taker(device: str) -> Callable[[list[onnx.ModelProto]], list[bool]]:
    """``takes(models)`` for OpenVINO's ``device``: a probe is taken when every op OpenVINO
    made of its node is in ``core.query_model``'s answer for the device.  Probes are read as
    one model (reading is most of the time); when OpenVINO cannot read it, the batch is
    halved until the probes it cannot read are alone, and those are refused."""
    try:
        import openvino as ov
    except ImportError:
        raise ProbeError("OpenVINO is not installed: pip install 'hetero-solve[openvino]'") \
            from None
    core = ov.Core()
    base = device.split(".")[0]
    if device not in core.available_devices and base not in core.available_devices:
        raise ProbeError(f"OpenVINO has no device {device!r} here (it has "
                         f"{', '.join(core.available_devices) or 'none'})")
    def takes(models: list[onnx.ModelProto]) -> list[bool]:
        fd, path = tempfile.mkstemp(prefix="hetero-solve-probe-", suffix=".onnx")
        os.close(fd)
        try:
            onnx.save(_merged(models), path)
            ov_model = core.read_model(path)
            answer = core.query_model(ov_model, device)
        except Exception:   # noqa: BLE001 (OpenVINO cannot read one of them)
            if len(models) == 1:
                return [False]
            half = len(models) // 2
            return takes(models[:half]) + takes(models[half:])
        finally:
            os.unlink(path)
        ok = [True] * len(models)
        for name, probe in _ov_probe_of(ov_model).items():
            if answer.get(name) != device:
                ok[probe] = False
        return ok
    return takes


def _merged(models: list[onnx.ModelProto]) -> onnx.ModelProto:
    """The probes side by side in one model, probe ``i``'s names prefixed ``p<i>_``."""
    from onnx import compose
    if len(models) == 1:
        return compose.add_prefix(models[0], "p0_")
    parts = [compose.add_prefix(m, f"p{i}_").graph for i, m in enumerate(models)]
    graph = helper.make_graph([n for g in parts for n in g.node], "probes",
                              [x for g in parts for x in g.input],
                              [x for g in parts for x in g.output],
                              initializer=[t for g in parts for t in g.initializer])
    merged = helper.make_model(graph, opset_imports=list(models[0].opset_import))
    merged.ir_version = models[0].ir_version
    return merged


def _ov_probe_of(ov_model) -> dict[str, int]:
    """OpenVINO op (friendly name) -> the probe it was made from: by the ``p<i>_`` name of an
    output, else (ops a node expands into) by its first consumer's probe."""
    ops = list(ov_model.get_ordered_ops())
    found: dict[str, int] = {}
    for op in reversed(ops):
        if op.get_type_name() in ("Parameter", "Result", "Constant"):
            continue
        names = [n for out in op.outputs() for n in out.get_names()]
        probe = next((int(n[1:n.index("_")]) for n in names
                      if n.startswith("p") and n[1:n.find("_")].isdigit()), None)
        if probe is None:
            consumers = [t.get_node().get_friendly_name()
                         for out in op.outputs() for t in out.get_target_inputs()]
            probe = next((found[c] for c in consumers if c in found), None)
        if probe is not None:
            found[op.get_friendly_name()] = probe
    return found


def onnxruntime_taker(provider: str) -> Callable[[list[onnx.ModelProto]], list[bool]]:
    """``takes(models)`` for onnxruntime's ``provider``: each probe's node assigned to it
    (one session per probe: a session fails whole when one node has no kernel)."""
    import onnxruntime as ort
    if provider not in ort.get_available_providers():
        raise ProbeError(f"onnxruntime {ort.__version__} has no {provider} here (it has "
                         f"{', '.join(ort.get_available_providers())})")
    reports = hasattr(ort.InferenceSession, "get_provider_graph_assignment_info")
    if not reports and provider != "CPUExecutionProvider":
        raise ProbeError(f"onnxruntime {ort.__version__} does not report where nodes go "
                         "(get_provider_graph_assignment_info): only CPUExecutionProvider can "
                         "be probed with it")
    ort.set_default_logger_severity(4)
    providers = list(dict.fromkeys([provider, "CPUExecutionProvider"]))

    def takes(model: onnx.ModelProto) -> bool:
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        if reports:
            opts.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        try:
            session = ort.InferenceSession(model.SerializeToString(), opts, providers=providers)
        except Exception:   # noqa: BLE001 (no kernel for it anywhere)
            return False
        if not reports:
            return True
        # onnxruntime inlines a function op it has no kernel for (HardSwish, CastLike...):
        # taken when every node it made of the probe is on the provider
        placed = [sub.ep_name for sub in session.get_provider_graph_assignment_info()
                  for _ in sub.get_nodes()]
        return bool(placed) and all(ep == provider for ep in placed)
    return lambda models: [takes(m) for m in models]


#: Domains whose kernels :func:`onnxruntime_registry` reads (onnxruntime's internal layout
#: domains, such as ``com.microsoft.nchwc``, only appear in graphs it optimised itself).
REGISTRY_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "com.microsoft")


def onnxruntime_registry(provider: str, opset: int) -> set[str]:
    """The rule names of the ops onnxruntime has a kernel for on ``provider``
    (``get_all_opkernel_def``): default-domain ops with a kernel at ``opset``, and every op
    of ``ai.onnx.ml`` and ``com.microsoft`` it has a kernel for at any version.  Empty when
    this onnxruntime cannot list its kernels."""
    try:
        from onnxruntime.capi import onnxruntime_pybind11_state as state
        kernels = state.get_all_opkernel_def()
    except Exception:   # noqa: BLE001 (an onnxruntime without the listing)
        return set()
    found = set()
    for kernel in kernels:
        if kernel.provider != provider or kernel.domain not in REGISTRY_DOMAINS:
            continue
        low, high = kernel.version_range
        if kernel.domain in ("", "ai.onnx") and not low <= opset <= high:
            continue
        found.add(rule_op_name(kernel.op_name, kernel.domain))
    # onnxruntime keeps kernels of ops the installed onnx has dropped (Affine, Crop...)
    return {name for name in found if check_op_name(name) is None}


def rule_file(found: RuntimeOps, name: str, *, fallback: str | None = None,
              value_inputs: str = "ignore", runtime: dict | None = None) -> dict:
    """A rule file (as data) with ``found``'s device named ``name`` and, when ``fallback``
    is given, a device of that name taking every op after it."""
    device = {"name": name,
              "description": f"{found.device} as {found.runtime} reports it (opset "
                             f"{found.opset} probes)",
              "value_inputs": value_inputs, "ops": found.ops_section()}
    if runtime:
        device["runtime"] = runtime
    devices = [device]
    if fallback:
        devices.append({"name": fallback, "description": "Fallback: takes every op.",
                        "value_inputs": "ignore", "ops": {"supported": "all"}})
    return {"version": 1, "include": ["onnx-value-inputs"], "devices": devices}


def yaml_text(rules: dict, found: RuntimeOps, command: str) -> str:
    """The rule file as YAML, with a header saying where it came from and what was not
    probed."""
    import yaml
    head = [f"# Generated by: {command}",
            f"# {found.runtime}, device {found.device}: {len(found.taken)} op type(s) taken, "
            f"{len(found.refused) - len(set(found.refused) & set(found.taken))} refused on "
            "every element type probed.",
            "# Probes: one node per op type and element type, symbolic shapes (shape limits "
            "are not seen)."]
    if found.registered:
        head.append(f"# Not probed, taken because {found.runtime}'s kernel registry has them "
                    f"for {found.device} (element types not checked): "
                    + ", ".join(found.registered))
    if found.not_probed:
        head.append("# Not probed (no probe model could be built), left out: "
                    + ", ".join(found.not_probed))
        head.append("# A model using them needs a fallback device (--fallback CPU) or these "
                    "ops added to supported by hand.")
    wrapped = []
    for line in head:
        while len(line) > 100:
            cut = line.rfind(" ", 0, 100)
            wrapped.append(line[:cut])
            line = "#  " + line[cut:]
        wrapped.append(line)
    body = yaml.safe_dump(rules, sort_keys=False, default_flow_style=None, width=100)
    return "\n".join(wrapped) + "\n" + body


__all__ = ["DTYPES", "Probe", "ProbeError", "RuntimeOps", "ask_runtime", "build_probe",
           "onnxruntime_registry", "onnxruntime_taker", "op_schemas", "openvino_taker", "probes", "rule_file",
           "yaml_text"]
