"""From what a runtime's profiler reports to seconds per ONNX node.

A runtime does not run the ONNX nodes one by one: onnxruntime fuses a ``Conv`` and its
``Relu`` into one kernel, rewrites a QDQ unit as a ``QLinearConv``, inserts layout reorders;
OpenVINO's CPU plugin fuses activations, bias additions and fake-quantize steps into the layer
before them.  Each backend (:mod:`.onnxruntime`, :mod:`.openvino`) turns its profiler's records
into :class:`RuntimeNode` objects naming the ONNX nodes each one stands for (its *members*);
:func:`attribute` shares each record's time among its members and spreads what no ONNX node
can be named for.

- A record's time is shared among its members in proportion to :func:`node_weight` (the
  elements a node reads and writes: a fused ``Conv`` takes most of a ``Conv + Relu`` kernel).
- Records with no member (layout reorders, a runtime's own copies) are *unattributed*.
- ``floor``: the profiler's own cost per kernel (onnxruntime times its bookkeeping with each
  kernel: measured on a one-node model), taken off every record first.
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


def node_weight(mg, v: int) -> float:
    """How much of a fused kernel's time node ``v`` takes, relative to its partners: the
    elements of every tensor it reads and writes (at least 1)."""
    total = 0
    for x in (*mg.inputs[v], *mg.outputs[v]):
        if x:
            total += mg.types[x].count
    return float(max(total, 1))


def attribute(mg, records: Sequence[RuntimeNode], target: float | None = None,
              measured: str = "", floor: float = 0.0) -> Attribution:
    """Seconds per ONNX node of ``mg`` (every node, 0 where the runtime spent nothing) from
    ``records`` (module doc).  ``measured`` names the run ``target`` comes from, for the
    ``spread`` text."""
    ran = [r for r in records if r.seconds > 0]
    named = [r for r in ran if r.members]
    unattributed = [r for r in ran if not r.members]
    profiled = sum(r.seconds for r in ran)
    done = sum(r.seconds for r in named)
    near = sum(r.seconds for r in named if r.near)
    attributed = done / profiled if profiled > 0 else 1.0
    own = {id(r): max(r.seconds - floor, 0.0) for r in named}
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
    worst = sorted(unattributed, key=lambda r: -r.seconds)[:3]
    names = ", ".join(f"{r.op or '?'} {r.name}" for r in worst)
    parts = [f"{1 - attributed:.1%} of the profiler's time named no ONNX node"
             + (f" ({names}{', ...' if len(unattributed) > 3 else ''})" if names else "")]
    if near > 0:
        parts.append(f"{near / profiled:.1%} (layout changes and casts the runtime added) "
                     "given to the ONNX nodes of the kernel next to them")
    if floor > 0:
        parts.append(f"the profiler's own {floor * 1e6:.2f} us per kernel taken off each")
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
    return Attribution(node_seconds, attributed, "; ".join(parts), profiled, unattributed)


def medians(runs: Iterable[dict[str, float]]) -> dict[str, float]:
    """Per key, the median of its values over ``runs`` (a key missing from a run counts 0)."""
    runs = list(runs)
    keys = dict.fromkeys(k for run in runs for k in run)
    return {k: statistics.median(run.get(k, 0.0) for run in runs) for k in keys}
