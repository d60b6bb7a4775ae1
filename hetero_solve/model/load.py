"""Load an ONNX model into a :class:`ModelGraph`: names, structure, shapes, folding.

Step by step: read (with external data), check, flatten the main graph (stable names for
unnamed and duplicate-named nodes, outer-scope reads of subgraph nodes), then shapes and folding
(:mod:`hetero_solve.model.shapes`).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import onnx

from ..errors import ModelError, one_line
from ..readers import check_regular, read_bytes, resolves_inside
from .graph import ModelGraph, subgraph_constants, subgraph_outer_inputs

#: Ops whose attributes may hold subgraphs in the standard domains.  Nodes of other domains
#: are scanned attribute by attribute (custom ops may carry graphs too).
SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml"})


#: protobuf cannot parse a message of 2 GiB or more: a larger model keeps its weights outside.
MODEL_FILE_BYTES = (2 << 30) - 1


def read_model(source: str | os.PathLike | onnx.ModelProto) -> tuple[onnx.ModelProto, str, bytes | None]:
    """The ``ModelProto``, a display path, and the file's bytes when they are the whole model
    (no external data), so the checker can reuse them.

    Only a regular file is opened (a FIFO or a device is refused before, so nothing blocks);
    external data must lie in regular files inside the model's folder, within their size.

    Raises
    ------
    ModelError
        The file is missing, not a regular file, over 2 GiB, not an ONNX model, or its
        external data is missing, outside the model's folder or too short.
    """
    if isinstance(source, onnx.ModelProto):
        return source, "<model>", None
    path = Path(source)

    def fail(reason: str) -> ModelError:
        return ModelError(path, reason)

    st = check_regular(path, fail)
    if st.st_size > MODEL_FILE_BYTES:
        raise fail(f"is {st.st_size:,} bytes: over protobuf's 2 GiB limit for one file, so not "
                   "an ONNX model (large models keep their weights as external data)")
    data = read_bytes(path, fail, limit=MODEL_FILE_BYTES)
    try:
        model = onnx.ModelProto.FromString(data)
    except Exception as e:  # protobuf decode errors
        raise fail(f"cannot read ONNX model: {one_line(e)}") from None
    # A tensor stored outside names its file under the required key "location": without
    # those bytes anywhere in the file (a C-speed search), no tensor can be external.
    external = _external_tensors(model) if b"location" in data else []
    if external:
        folder = path.parent
        for tensor in external:
            _check_external(tensor, folder, fail)
        try:
            # onnx.load's external-data pass walks every tensor of every node in Python (1 s
            # at 100,000 nodes); only models that have external data pay for it.
            onnx.load_external_data_for_model(model, str(folder))
        except Exception as e:  # files changed since checked, onnx's own refusals
            raise fail(f"cannot read ONNX model: {one_line(e)}") from None
        data = None
    return model, str(path), data


def _external_tensors(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    """Every tensor of the model whose data lives in another file: initializers (dense and
    sparse) and tensor attributes, in subgraphs and functions too."""
    external = onnx.TensorProto.EXTERNAL
    A = onnx.AttributeProto
    found: list[onnx.TensorProto] = []
    graphs = [model.graph]
    node_lists = [f.node for f in model.functions]
    while graphs or node_lists:
        if graphs:
            g = graphs.pop()
            found.extend(t for t in g.initializer if t.data_location == external)
            for sp in g.sparse_initializer:
                found.extend(t for t in (sp.values, sp.indices) if t.data_location == external)
            node_lists.append(g.node)
            continue
        for node in node_lists.pop():
            for a in node.attribute:
                kind = a.type
                if kind == A.TENSOR:
                    tensors = [a.t]
                elif kind == A.TENSORS:
                    tensors = list(a.tensors)
                elif kind == A.SPARSE_TENSOR:
                    tensors = [a.sparse_tensor.values, a.sparse_tensor.indices]
                elif kind == A.SPARSE_TENSORS:
                    tensors = [t for sp in a.sparse_tensors for t in (sp.values, sp.indices)]
                else:
                    if kind == A.GRAPH:
                        graphs.append(a.g)
                    elif kind == A.GRAPHS:
                        graphs.extend(a.graphs)
                    continue
                found.extend(t for t in tensors if t.data_location == external)
    return found


def _check_external(tensor: onnx.TensorProto, folder: Path, fail) -> None:
    """The external data of ``tensor``: a relative location inside ``folder`` naming a
    regular file, offset and length whole numbers within it."""
    info = {e.key: e.value for e in tensor.external_data}
    where = f"external data of tensor {tensor.name!r}"
    location = info.get("location", "")
    if not location or "\0" in location:
        raise fail(f"{where}: no file location")
    if os.path.isabs(location):
        raise fail(f"{where}: location {location!r} is an absolute path; it must be relative to "
                   "the model's folder")
    file = folder / location
    if not resolves_inside(file, folder):
        raise fail(f"{where}: location {location!r} points outside the model's folder")
    st = check_regular(file, lambda why: fail(f"{where}: {location}: {why}"))
    numbers = {}
    for key in ("offset", "length"):
        text = info.get(key)
        if text is None:
            continue
        if not text.isdigit():   # also refuses "-1"
            raise fail(f"{where}: {key} {text!r} is not a whole number >= 0")
        numbers[key] = int(text)
    end = numbers.get("offset", 0) + numbers.get("length", 0)
    if end > st.st_size:
        raise fail(f"{where}: {location} has {st.st_size:,} bytes, the tensor needs {end:,}")


def check_model(model: onnx.ModelProto, path: str, data: bytes | None = None) -> None:
    """``onnx.checker`` with a one-line error.  Given the file's ``data``, they are checked as
    they are (no second serialisation); models with external data are checked by path."""
    try:
        if data is not None:
            onnx.checker.check_model(data)
        elif path != "<model>" and model.ByteSize() > 2**31 - 1024:
            onnx.checker.check_model(path)
        else:
            onnx.checker.check_model(model)
    except Exception as e:
        raise ModelError(path, f"not a valid ONNX model: {one_line(e)}") from None


def flatten(model: onnx.ModelProto, path: str) -> ModelGraph:
    """Per-node lists of the main graph (no shape information yet)."""
    graph = model.graph
    nodes = list(graph.node)
    # One comprehension per field: reading protobuf fields dominates at 100,000 nodes.
    op_types = [n.op_type for n in nodes]
    domains = [n.domain for n in nodes]
    raw_names = [n.name for n in nodes]
    inputs = [tuple(n.input) for n in nodes]
    outputs = [tuple(n.output) for n in nodes]
    n = len(nodes)
    outer: list[tuple[str, ...]] = [()] * n
    has_sub = [False] * n
    producer = {o: i for i, outs in enumerate(outputs) for o in outs if o}
    constant_nodes = [i for i, op in enumerate(op_types) if op == "Constant" and domains[i] in STANDARD_DOMAINS]
    for i, op in enumerate(op_types):
        if op in SUBGRAPH_OPS or domains[i] not in STANDARD_DOMAINS:
            node = nodes[i]
            if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
                has_sub[i] = True
                outer[i] = subgraph_outer_inputs(node)
    initializers = {t.name: t for t in graph.initializer}
    graph_inputs = [x.name for x in graph.input if x.name not in initializers]
    opsets = {o.domain: o.version for o in model.opset_import}
    names = unique_names(raw_names, op_types)
    inner = {i: subgraph_constants(nodes[i], names[i]) for i, sub in enumerate(has_sub) if sub}
    return ModelGraph(
        model=model, path=path, opsets=opsets, names=names,
        subgraph_constants={i: found for i, found in inner.items() if found},
        op_types=op_types, domains=domains, inputs=inputs, outer_inputs=outer, outputs=outputs,
        has_subgraph=has_sub, graph_inputs=graph_inputs,
        graph_outputs=[x.name for x in graph.output], initializers=initializers,
        constant_nodes=constant_nodes, producer=producer)


def unique_names(raw: list[str], op_types: list[str]) -> list[str]:
    """Stable, unique node names.  A named node keeps its name the first time it appears; an
    unnamed node becomes ``<OpType>_<index>``, a repeated name ``<name>_<index>`` (with ``_``
    appended until unique).  Depends only on the model, so reruns give the same names."""
    taken = set(raw)
    seen: set[str] = set()
    names = list(raw)
    for i, name in enumerate(raw):
        if name and name not in seen:
            seen.add(name)
            continue
        candidate = f"{name or op_types[i]}_{i}"
        while candidate in taken or candidate in seen:
            candidate += "_"
        names[i] = candidate
        seen.add(candidate)
    return names


def load_model(source: str | os.PathLike | onnx.ModelProto, dims: dict[str, int] | None = None,
               *, check: bool = True, fold: bool = True, defer_check: bool = False) -> ModelGraph:
    """Load, check and analyse a model.

    ``dims`` gives values for symbolic dimensions (SPEC section 3).  With ``fold`` (default),
    nodes computable before running are folded to constants (SPEC section 1).  With
    ``defer_check``, a checker still running in a forked process (large models) is not waited
    for: the caller must call :meth:`ModelGraph.ensure_valid` before trusting the result.

    >>> mg = load_model("examples/resnet_like.onnx", dims={"batch": 1})  # doctest: +SKIP
    >>> mg.names[0], mg.tensor_type(mg.outputs[0][0]).shape                # doctest: +SKIP
    ('stem/conv', (1, 16, 32, 32))
    """
    model, path, data = read_model(source)
    return analyse_model(model, path, data, dims, check=check, fold=fold, defer_check=defer_check)


def analyse_model(model: onnx.ModelProto, path: str, data: bytes | None,
                  dims: dict[str, int] | None = None, *, check: bool = True,
                  fold: bool = True, defer_check: bool = False) -> ModelGraph:
    """Everything after reading: check, flatten, shapes and folding.  On large models the
    checker and the first shape inference run in forked processes alongside flattening
    (:mod:`.parallel`); ``defer_check``: see :func:`load_model`."""
    from .parallel import Forked, fork_pays
    from .shapes import analyse_shapes, forked_first_inference
    from .structure import compute_ahead

    dims = dict(dims or {})
    checking = inferring = None
    if fork_pays(len(model.graph.node)):
        # The checker and the first shape inference are C++ holding the GIL: run them in
        # forked processes while this one flattens the graph and computes its structure.  The
        # inference is the longest of the three: the checker yields to it (and to this
        # process) and runs on what is left.
        checking = Forked(_check_message, model, path, data, idle=True) if check else None
        inferring = Forked(forked_first_inference, model, dims)
    elif check:
        check_model(model, path, data)
    try:
        mg = flatten(model, path)
        mg.dims = dims
        if inferring is not None:
            # The inference takes longer than flattening: meanwhile, the graph's structure.
            compute_ahead(mg)
        done = inferring.result() if inferring is not None else None
        inferred = done[1] if done and done[0] == "ok" else None   # bytes: parsed when needed
        analyse_shapes(mg, fold=fold, inferred=inferred)
    except Exception:
        _raise_if_invalid(checking, model, path, data)   # an invalid model explains the failure
        raise
    if defer_check and checking is not None:
        # The checker runs at the lowest priority: on a busy machine it may not be done yet.
        mg._pending_check = functools.partial(_raise_if_invalid, checking, model, path, data)
    else:
        _raise_if_invalid(checking, model, path, data)
    return mg


def _check_message(model: onnx.ModelProto, path: str, data: bytes | None) -> str | None:
    try:
        check_model(model, path, data)
    except ModelError as e:
        return e.reason
    return None


def _raise_if_invalid(checking, model: onnx.ModelProto, path: str, data: bytes | None) -> None:
    if checking is None:
        return
    done = checking.result()
    if done is None or done[0] != "ok":   # the child died: check here
        check_model(model, path, data)
    elif done[1]:
        raise ModelError(path, done[1])
