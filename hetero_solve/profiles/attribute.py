"""From what a runtime's profiler reports to seconds per ONNX node.

A runtime does not run the ONNX nodes one by one: onnxruntime fuses a ``Conv`` and its
``Relu`` into one kernel, rewrites a QDQ unit as a ``QLinearConv``, inserts layout reorders;
OpenVINO's CPU plugin fuses activations, bias additions and fake-quantize steps into the layer
before them.  Each backend (:mod:`.onnxruntime`, :mod:`.openvino`) turns its profiler's records
into :class:`RuntimeNode` objects naming the ONNX nodes each one stands for (its *members*);
:func:`attribute` shares each record's time among its members and spreads what no ONNX node
can be named for.

- A record's time is shared among its members in proportion to :func:`node_weight` (a
  node's arithmetic, at least its output elements: a fused ``Conv`` or ``MatMul`` takes its
  kernel's time, the bias, normalisation, activation or residual ``Add`` fused after it only
  their own element-wise share).
- A convolution or matrix-product kernel (:data:`HEAVY_KERNELS`) whose members have no
  convolution or matrix product (:data:`HEAVY_OPS`: OpenVINO names a ``MatMul + Add + Mul``
  layer after the ``Mul``, and lists only it) claims the one its members are fused onto: the
  nearest upstream through ops of no arithmetic of their own, when no kernel with time has
  it (:func:`claim_fused`).  The time moved so is the profile's ``fused`` share.
- Records with no member (layout reorders, a runtime's own copies) are *unattributed*.
- ``floor``: the profiler's own cost per kernel (onnxruntime times its bookkeeping with each
  kernel: measured on a one-node model), taken off every record first (a tenth of each
  record's time is kept however large the floor: a kernel that ran took something).
- ``target``: the seconds the nodes must add up to (the measured run time of the whole model
  minus the per-part cost).  What the named kernels leave of it (the runtime's dispatch
  between kernels, and the unattributed records) is shared equally among the kernels that
  ran; when they add up to more than the target, every node is scaled down by one factor.
  Without a target, the unattributed records are spread in proportion to the node times.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..roofline import node_flops


@dataclass
class RuntimeNode:
    """One node (kernel, layer) as a runtime's profiler reports it.

    ``seconds``: its time per run (a median over runs); ``members``: the main-graph node
    indices of the ONNX nodes it stands for (empty: none could be named); ``near``: they
    are those of a neighbouring record (a layout reorder the runtime added for them)."""

    name: str
    op: str
    seconds: float
    members: list[int] = field(default_factory=list)
    near: bool = False


@dataclass
class Attribution:
    """Seconds per ONNX node and how they were found (the profile's ``attributed`` and
    ``spread``)."""

    node_seconds: dict[str, float]
    attributed: float
    spread: str
    profiled_seconds: float
    unattributed: list[RuntimeNode]
    #: Shares of the nodes' seconds: ``measured`` (kernel times given to the ONNX nodes the
    #: runtime names for them), ``fused`` (kernel times given to the convolution or matrix
    #: product they were fused onto, :func:`claim_fused`) and ``spread`` (what no kernel
    #: names: the time between kernels, unnamed kernels).
    shares: dict[str, float] = field(default_factory=dict)


#: ONNX ops that do a kernel's arithmetic: a convolution, a matrix product, attention, a
#: recurrence.  A fused kernel's time is theirs; the ops fused after them have their own share.
HEAVY_OPS = frozenset({
    "Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "FusedConv", "NhwcConv",
    "MatMul", "MatMulInteger", "QLinearMatMul", "FusedMatMul", "MatMulNBits", "Gemm",
    "FusedGemm", "QGemm", "Einsum", "Attention", "MultiHeadAttention", "GroupQueryAttention",
    "LSTM", "GRU", "RNN", "DynamicQuantizeLSTM"})
#: Runtime kernels that are such an op: OpenVINO's CPU layer types, onnxruntime's kernels.
HEAVY_KERNELS = HEAVY_OPS | frozenset({
    "Convolution", "GroupConvolution", "Deconvolution", "BinaryConvolution",
    "ConvolutionBackpropData", "FullyConnected", "FullyConnectedCompressed", "ScaledAttn",
    "NchwcConv", "QLinearFusedConv"})


def node_weight(mg, v: int) -> float:
    """How much of a fused kernel's time node ``v`` takes, relative to its partners: its
    FLOPs (:func:`hetero_solve.roofline.node_flops`), at least the elements it writes (at
    least 1): a convolution's or matrix product's arithmetic dwarfs the bias, activation or
    residual ``Add`` fused after it, which keep their own element-wise share."""
    out = sum(mg.types[x].count for x in mg.outputs[v] if x)
    try:
        flops = node_flops(mg, v)
    except Exception:   # noqa: BLE001 (a shape the estimate cannot read: elements only)
        flops = 0
    return float(max(flops, out, 1))


def claim_fused(mg, records: Sequence[RuntimeNode], depth: int = 8) -> float:
    """Give each convolution or matrix-product kernel the products its partners were fused
    onto (module doc): walking up from the inputs of its members that are no product, through
    nodes no kernel with time has, at most ``depth`` nodes, every :data:`HEAVY_OPS` node no
    kernel with time has joins its members, with the nodes on the way (OpenVINO names a
    ``MatMul + Add + Mul`` layer after the ``Mul`` and lists only it; its attention layer
    lists the ``Softmax`` and the second product, not the first).  A kernel is a convolution
    or matrix product by its type (:data:`HEAVY_KERNELS`) or by a member (OpenVINO's fused
    ``Subgraph``).  Returns the seconds of the kernels that claimed one."""
    timed: set[int] = {v for r in records if r.seconds > 0 for v in r.members}
    moved = 0.0
    for r in records:
        if r.seconds <= 0 or not r.members or (r.op not in HEAVY_KERNELS and not any(
                mg.op_types[v] in HEAVY_OPS for v in r.members)):
            continue
        own = set(r.members)
        came: dict[int, int | None] = {v: None for v in own}
        frontier = [v for v in own if mg.op_types[v] not in HEAVY_OPS]
        found: list[int] = []
        for _ in range(depth):
            nxt = []
            for v in frontier:
                for x in mg.inputs[v]:
                    u = mg.producer.get(x) if x else None
                    if u is None or u in came or u in timed:
                        continue
                    came[u] = v
                    (found if mg.op_types[u] in HEAVY_OPS else nxt).append(u)
            if not nxt:
                break
            frontier = nxt
        if not found:
            continue
        path: set[int] = set()
        for u in found:
            while u is not None and u not in own:
                path.add(u)
                u = came[u]
        r.members = sorted(own | path)
        timed.update(path)
        moved += r.seconds
    return moved


#: The share of a kernel's measured time kept however large the profiler's floor.
MIN_OWN = 0.1


def attribute(mg, records: Sequence[RuntimeNode], target: float | None = None,
              measured: str = "", floor: float = 0.0) -> Attribution:
    """Seconds per ONNX node of ``mg`` (every node, 0 where the runtime spent nothing) from
    ``records`` (module doc).  ``measured`` names the run ``target`` comes from, for the
    ``spread`` text."""
    ran = [r for r in records if r.seconds > 0]
    fused = claim_fused(mg, ran)
    named = [r for r in ran if r.members]
    unattributed = [r for r in ran if not r.members]
    profiled = sum(r.seconds for r in ran)
    done = sum(r.seconds for r in named)
    near = sum(r.seconds for r in named if r.near)
    attributed = done / profiled if profiled > 0 else 1.0
    # a kernel that ran took something: at least a tenth of its time survives the floor (a
    # warm 1 us MatMul under a 1 us floor must not come out as a node that costs nothing)
    own = {id(r): max(r.seconds - floor, r.seconds * MIN_OWN) for r in named}
    kept = sum(own.values())
    if target is not None and target > 0 and named:
        gap = target - kept
        each = gap / len(named) if gap > 0 else 0.0
        factor = 1.0 if gap > 0 else (target / kept if kept > 0 else 0.0)
    else:
        gap, each = 0.0, 0.0
        factor = (profiled - floor * len(named)) / kept if kept > 0 else 0.0
    seconds = [0.0] * len(mg.names)
    for r in named:
        members = sorted(set(r.members))
        weights = [node_weight(mg, v) for v in members]
        share = (own[id(r)] * factor + each) / sum(weights)
        for v, w in zip(members, weights):
            seconds[v] += w * share
    node_seconds = dict(zip(mg.names, seconds))
    total = sum(seconds)
    kernel_part = (kept * factor / total) if total > 0 else 0.0
    fused_part = (fused * (kept / done if done > 0 else 1.0) * factor / total) \
        if total > 0 else 0.0
    kernel_part, fused_part = min(max(kernel_part, 0.0), 1.0), min(fused_part, kernel_part)
    shares = {"measured": kernel_part - fused_part, "fused": fused_part,
              "spread": 1.0 - kernel_part} if total > 0 else {}
    worst = sorted(unattributed, key=lambda r: -r.seconds)[:3]
    names = ", ".join(f"{r.op or '?'} {r.name}" for r in worst)
    parts = [f"{1 - attributed:.1%} of the profiler's time named no ONNX node"
             + (f" ({names}{', ...' if len(unattributed) > 3 else ''})" if names else "")]
    if near > 0:
        parts.append(f"{near / profiled:.1%} (layout changes and casts the runtime added) "
                     "given to the ONNX nodes of the kernel next to them")
    if floor > 0:
        parts.append(f"the profiler's own {floor * 1e6:.2f} us per kernel taken off each")
    if fused > 0:
        parts.append(f"{fused / profiled:.1%} in convolution or matrix-product kernels "
                     "named after an op fused onto one: given to that one")
    if target is not None and target > 0 and named:
        run = f"the measured run{f' ({measured})' if measured else ''} minus the part cost"
        if gap > 0:
            parts.append(f"{gap / target:.1%} of {run} is between the kernels: shared "
                         f"equally among the {len(named)} kernels that ran")
        else:
            parts.append(f"the kernels add up to {kept / target:.1%} of {run}: every node "
                         "scaled down by one factor")
    elif unattributed:
        parts.append("the unattributed time spread in proportion to the node times")
    return Attribution(node_seconds, attributed, "; ".join(parts), profiled, unattributed,
                       shares)


def medians(runs: Iterable[dict[str, float]]) -> dict[str, float]:
    """Per key, the median of its values over ``runs`` (a key missing from a run counts 0)."""
    runs = list(runs)
    keys = dict.fromkeys(k for run in runs for k in run)
    return {k: statistics.median(run.get(k, 0.0) for run in runs) for k in keys}
