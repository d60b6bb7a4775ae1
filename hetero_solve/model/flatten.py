"""The main graph of a model as per-node lists (:class:`~.graph.GraphLists`): names, ops,
inputs (with the tensors subgraphs read from the enclosing scope), outputs, constants.  No
shapes: :mod:`.shapes` finds those."""

from __future__ import annotations

import os

import onnx

from .graph import GraphLists, TensorType, subgraph_constants, subgraph_outer_inputs

#: Ops whose attributes may hold subgraphs in the standard domains.  Nodes of other domains
#: are scanned attribute by attribute (custom ops may carry graphs too).
SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml"})


def flatten(model: onnx.ModelProto, path: str) -> GraphLists:
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
    base_constants = set(initializers)
    base_constants.update(t.values.name for t in graph.sparse_initializer)
    for i in constant_nodes:
        base_constants.update(o for o in outputs[i] if o)
    interned: dict[tuple, TensorType] = {}
    initializer_types = {}
    for name, t in initializers.items():
        key = (t.data_type, tuple(t.dims))
        found = interned.get(key)
        if found is None:
            found = interned[key] = TensorType(*key)
        initializer_types[name] = found
    return GraphLists(
        model=model, path=path, opsets=opsets, names=names,
        op_types=op_types, domains=domains, inputs=inputs, outer_inputs=outer, outputs=outputs,
        has_subgraph=has_sub, graph_inputs=graph_inputs,
        graph_outputs=[x.name for x in graph.output], initializers=initializers,
        constant_nodes=constant_nodes, producer=producer, base_constants=frozenset(base_constants),
        subgraph_constants={i: found for i, found in inner.items() if found},
        initializer_types=initializer_types,
        weights_dir=None if path.startswith("<") else os.path.dirname(os.path.abspath(path)))


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
