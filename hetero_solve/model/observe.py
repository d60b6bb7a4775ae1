"""Ranks and element types that ONNX inference cannot find, observed in onnxruntime.

An op without ONNX shape inference (a ``com.microsoft`` contrib op, say) leaves its outputs,
and what is computed from them, without a rank or an element type.  A part boundary needs
both: ``onnx.checker`` rejects a graph input or output declared without a shape.  The
runtime knows them: the model runs once on placeholder inputs (each input's dims as loading
found them, an unknown one as 1; zeros), with those tensors made graph outputs, and each
value's rank and element type is taken.  Only those: the dims seen depend on the placeholder
inputs, so they stay unknown.
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from .graph import GraphLists, TensorType, TypeTable

#: Most elements an input fed to the observing run may have.
OBSERVE_ELEMENTS = 1 << 26


def unknown_rank_tensors(graph: GraphLists, types: TypeTable, declared: dict[str, bytes],
                         folded: set[int]) -> list[str]:
    """Outputs of unfolded main-graph nodes with no rank or element type, except tensors
    declared with a non-tensor type (sequences, optionals, maps)."""
    found = []
    skip = folded.union(graph.constant_nodes)
    for i, outs in enumerate(graph.outputs):
        if i in skip:
            continue
        for o in outs:
            if not o:
                continue
            t = types[o]
            if t.rank is not None and t.elem_type:
                continue
            raw = declared.get(o)
            if raw is not None and onnx.TypeProto.FromString(raw).WhichOneof("value") \
                    not in (None, "tensor_type"):
                continue
            found.append(o)
    return found


def observed_types(graph: GraphLists, types: TypeTable, names: list[str]) -> dict[str, TensorType]:
    """Rank and element type of each tensor of ``names`` in one onnxruntime run (dims
    unknown); empty when the model does not run (an op onnxruntime lacks, an input of
    unknown type...)."""
    feeds = {}
    for x in graph.graph_inputs:
        t = types[x]
        if not t.elem_type or t.shape is None:
            return {}
        shape = [d if isinstance(d, int) else 1 for d in t.shape]
        if math.prod(shape) > OBSERVE_ELEMENTS:   # absurd dims: never allocate them
            return {}
        try:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
            feeds[x] = np.zeros(shape, dtype=dtype)
        except Exception:
            return {}
    m = onnx.ModelProto()
    m.CopyFrom(graph.model)
    declared = {o.name for o in m.graph.output}
    m.graph.output.extend(onnx.ValueInfoProto(name=x) for x in names if x not in declared)
    try:
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        if graph.weights_dir is not None:   # external data stays in its files: read there
            opts.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                          graph.weights_dir)
        sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        values = sess.run(names, feeds)
    except Exception:
        return {}
    out = {}
    for name, value in zip(names, values):
        if isinstance(value, np.ndarray):
            out[name] = TensorType(onnx.helper.np_dtype_to_tensor_dtype(value.dtype),
                                   (None,) * value.ndim)
    return out
