"""One ONNX model per part (the README, "Use").

Built directly from the part's node list rather than with ``onnx.utils.Extractor``: the
extractor selects nodes by walking back from the outputs, which would pull folded shape chains
(and, through them, other parts' nodes) into a part, and it costs O(graph) per part.  Here a
part is exactly its nodes plus copies of the constants it reads (initializers, ``Constant``
nodes, folded values), with inputs and outputs typed from shape inference.
"""

from __future__ import annotations

from itertools import chain
from typing import Iterable

import onnx
from onnx import helper, numpy_helper

from ..model.graph import ModelGraph
from ..measures import part_boundaries
from ..problem import Problem
from ..solution import Solution


def part_boundary(problem: Problem, sol: Solution, p: int, nodes: list[int]) -> tuple[list[str], list[str]]:
    """Input and output tensor names of part ``p`` (docs/problem.md's definitions)."""
    return part_boundaries(problem, sol.part_of, nodes).get(p, ([], []))


def constants_as_held(mg: ModelGraph, names: list[str]) -> tuple[
        list[onnx.NodeProto], list[onnx.TensorProto], list[onnx.SparseTensorProto]]:
    """Constant tensors as the original model holds them, to copy into another model: its
    ``Constant`` nodes, initializers and sparse initializers; a folded value becomes an
    initializer."""
    graph_nodes = mg.model.graph.node
    sparse_by_name = {t.values.name: t for t in mg.model.graph.sparse_initializer}
    nodes: list[onnx.NodeProto] = []
    initializers: list[onnx.TensorProto] = []
    sparse: list[onnx.SparseTensorProto] = []
    for name in names:
        if name in mg.initializers:
            initializers.append(mg.initializers[name])
        elif name in sparse_by_name:
            sparse.append(sparse_by_name[name])
        else:
            i = mg.producer.get(name)
            if i is not None and mg.op_types[i] == "Constant":
                nodes.append(graph_nodes[i])
            else:
                initializers.append(numpy_helper.from_array(mg.constant_value(name), name))
    return nodes, initializers, sparse


def build_part_model(mg: ModelGraph, problem: Problem, sol: Solution, p: int, nodes: list[int],
                     inputs: list[str], outputs: list[str]) -> onnx.ModelProto:
    """The sub-model of part ``p``; ``nodes`` are problem node ids."""
    graph_nodes = mg.model.graph.node
    const_names: list[str] = []
    seen: set[int] = set()
    outer = mg.constant_tensors
    for v in nodes:
        for c in problem.node_consts[v]:
            # Constants held inside a node's subgraphs travel with the node itself.
            if c not in seen and problem.const_names[c] in outer:
                seen.add(c)
                const_names.append(problem.const_names[c])
    constant_nodes, initializers, sparse = constants_as_held(mg, const_names)
    order = sorted({g for v in nodes for g in problem.graph_nodes(v)})
    body = [graph_nodes[g] for g in order]
    device = problem.devices[sol.part_device[p]].name
    if not outputs:
        # Every result of this part is a dead end (read by nothing, not a graph output), so
        # docs/problem.md gives it no outputs; a model without outputs cannot run.
        # (A result read only by folded nodes is no dead end, but nothing here reads it.)
        outputs = unread_outputs(mg, order) or [x for g in order for x in mg.outputs[g] if x]
    graph = helper.make_graph(
        constant_nodes + body, f"{mg.model.graph.name or 'model'}_part{p}_{device}",
        [value_info(mg, x) for x in inputs], [value_info(mg, x) for x in outputs],
        initializer=initializers, sparse_initializer=sparse)
    model = helper.make_model(graph, opset_imports=list(mg.model.opset_import),
                              producer_name="hetero-solve",
                              doc_string=f"part {p} of {mg.path} on {device}")
    model.ir_version = mg.model.ir_version
    if mg.model.functions:
        model.functions.extend(mg.model.functions)
    return model


def unread_outputs(mg: ModelGraph, graph_nodes: Iterable[int]) -> list[str]:
    """The outputs of the nodes ``graph_nodes`` (indices into ``graph.node``) that no node
    reads (in the main graph or from a subgraph) and that are not graph outputs.

    They are the outputs of the model of a part that has no outputs by docs/problem.md (its
    nodes are dead ends: the original model computes and discards them too).  The manifest
    keeps the outputs docs/problem.md defines, and a part's ``memory`` does not count them."""
    read = set(mg.graph_outputs)
    read.update(chain.from_iterable(mg.inputs))
    read.update(chain.from_iterable(mg.outer_inputs))
    return [x for g in graph_nodes for x in mg.outputs[g] if x and x not in read]


DIRECT_FILE = "direct_outputs.onnx"


#: The device name's share of a part file name: file names stay far below the 255 bytes
#: file systems allow, whatever the rule file calls its devices.
DEVICE_CHARS_IN_FILE_NAMES = 64


def part_file(p: int, device: str) -> str:
    """The file name of part ``p``'s model: ``part<p>_<device>.onnx``, the device name reduced
    to ASCII letters, digits, ``-`` and ``_`` and cut at :data:`DEVICE_CHARS_IN_FILE_NAMES`
    characters (the part id keeps names unique)."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in device)
    return f"part{p}_{safe[:DEVICE_CHARS_IN_FILE_NAMES]}.onnx"


def direct_outputs(mg: ModelGraph) -> tuple[list[str], list[str]]:
    """Graph outputs that no part makes, and the graph inputs among them: initializers and
    ``Constant`` outputs (folding never removes a node that makes a graph output), and graph
    inputs passed straight through."""
    inputs = set(mg.graph_inputs)
    names = [x for x in dict.fromkeys(mg.graph_outputs) if x in mg.constant_tensors or x in inputs]
    return names, [x for x in names if x in inputs]


def unused_inputs(mg: ModelGraph) -> list[str]:
    """Graph inputs that no node reads, folded and ``Constant`` nodes included (a folded
    ``Shape`` reads its input: its size was fixed when solving)."""
    unread = set(mg.graph_inputs).difference(mg.graph_outputs)
    # Stop as soon as every input is seen read: usually within the first few nodes.
    for x in chain(chain.from_iterable(mg.inputs), chain.from_iterable(mg.outer_inputs)):
        if x in unread:
            unread.discard(x)
            if not unread:
                return []
    return [x for x in mg.graph_inputs if x in unread]


def build_direct_model(mg: ModelGraph, names: list[str], inputs: list[str]) -> onnx.ModelProto:
    """A model whose outputs are the graph outputs ``names`` that no part makes, each as the
    original holds it: an initializer (dense or sparse) is an initializer of this model and
    an output at once, a ``Constant`` output keeps its node, and a graph input is passed
    through as it is (its own output; ONNX and onnxruntime allow both).  Run before the parts,
    it completes the original outputs.  Initializers stay initializers so that big ones go
    to external data like any part's."""
    nodes, initializers, sparse = constants_as_held(mg, [x for x in names if x not in inputs])
    graph = helper.make_graph(nodes, f"{mg.model.graph.name or 'model'}_direct_outputs",
                              [value_info(mg, x) for x in inputs],
                              [value_info(mg, x) for x in names],
                              initializer=initializers, sparse_initializer=sparse)
    model = helper.make_model(graph, opset_imports=list(mg.model.opset_import),
                              producer_name="hetero-solve",
                              doc_string=f"graph outputs of {mg.path} that no part makes")
    model.ir_version = mg.model.ir_version
    return model


def value_info(mg: ModelGraph, name: str) -> onnx.ValueInfoProto:
    """The inferred type of a tensor (sequence and optional types kept as they are)."""
    src = mg.value_info_proto(name)
    if isinstance(src, onnx.ValueInfoProto) and src.type.WhichOneof("value") is not None:
        vi = onnx.ValueInfoProto()
        vi.CopyFrom(src)
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            for d in vi.type.tensor_type.shape.dim:   # inference's invented names mean nothing
                if d.HasField("dim_param") and d.dim_param.startswith("unk__"):
                    d.ClearField("dim_param")
        return vi
    t = mg.tensor_type(name)
    shape = None if t.shape is None else [d if isinstance(d, (int, str)) else None for d in t.shape]
    return helper.make_tensor_value_info(name, t.elem_type, shape)
