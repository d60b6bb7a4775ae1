"""Fused groups: what a cut between two of their nodes loses (docs/costs.md, "Boundary costs").

Runtimes run a convolution or matrix product together with the element-wise ops after it as
one kernel (onnxruntime's ``FusedConv``, OpenVINO's post-ops: ``Conv | BatchNormalization |
Add | Relu``, ``MatMul | Add``; and ``Sigmoid | Mul``, the SiLU): the tensors inside the group
never reach memory.  A **fused edge** is a tensor inside such a group:

- its producer is a *head* (:data:`HEADS`), or an element-wise *partner* (:data:`PARTNERS`)
  that is itself in a group (it reads a fused edge), or a ``Sigmoid`` whose only reader is a
  ``Mul`` that also reads the ``Sigmoid``'s input (a SiLU);
- its only reader is a partner, and it is not a graph output (a tensor two nodes read, or the
  model gives out, is written to memory anyway: nothing is fused across it).

When a cut separates a fused edge, the reader runs as a kernel of its own: it reads the tensor
and writes its output, of the same size, which the fused kernel did in registers.  So a fused
edge moves twice its bytes over the device's link: ``volume = 2 x bytes`` (once as any tensor
crossing a cut, once for the fusion lost), priced at the per-byte cost the profile measured
(:func:`fused_edges`, :func:`volumes`).
"""

from __future__ import annotations

from typing import Sequence

#: Ops whose kernel takes the element-wise ops after it.
HEADS = frozenset({"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "FusedConv",
                   "MatMul", "MatMulInteger", "QLinearMatMul", "FusedMatMul", "Gemm",
                   "FusedGemm"})
#: Element-wise ops a head's kernel runs after it (activations, bias and residual additions,
#: scalings, a normalisation folded into the weights).
PARTNERS = frozenset({"Relu", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "HardSigmoid",
                      "HardSwish", "Tanh", "Elu", "Selu", "Softplus", "Gelu", "Add", "Sub",
                      "Mul", "Div", "BatchNormalization"})
#: A fused edge moves this many times its bytes when a cut separates it.
LOST_FUSION = 2.0


def fused_edges(problem) -> list[bool]:
    """Per tensor of ``problem``, whether it is a fused edge (module doc).  Nodes are taken in
    the problem's order (topological)."""
    ops = problem.op_types
    readers = problem.tensor_consumers
    producer = problem.tensor_producer
    out = [False] * len(problem.tensor_names)
    grouped = [False] * problem.n
    for v in range(problem.n):
        if ops[v] in HEADS:
            grouped[v] = True
        if ops[v] not in PARTNERS:
            continue
        for t in problem.node_inputs[v]:
            u = producer[t]
            if u < 0 or not grouped[u] or list(readers[t]) != [v] or \
                    problem.tensor_is_output[t]:
                continue
            out[t] = grouped[v] = True
            break           # one fused input: a second one (a residual) is read from memory
        if ops[v] == "Sigmoid":
            grouped[v] = grouped[v] or _silu(problem, v)
    return out


def _silu(problem, v: int) -> bool:
    """``Sigmoid`` ``v``'s output is read only by a ``Mul`` that also reads ``v``'s input."""
    for t in problem.node_outputs[v]:
        readers = list(problem.tensor_consumers[t])
        if len(readers) != 1 or problem.op_types[readers[0]] != "Mul":
            return False
        if not set(problem.node_inputs[v]) & set(problem.node_inputs[readers[0]]):
            return False
    return bool(problem.node_outputs[v])


def volumes(problem, fused: Sequence[bool] | None = None) -> list[float]:
    """Per tensor, what a link moves when a cut crosses it: its bytes, :data:`LOST_FUSION`
    times them for a fused edge."""
    fused = fused_edges(problem) if fused is None else fused
    return [b * (LOST_FUSION if f else 1.0) for b, f in zip(problem.tensor_bytes, fused)]


__all__ = ["HEADS", "PARTNERS", "LOST_FUSION", "fused_edges", "volumes"]
