"""``rules check``: a rule file explained, alone or against a model (OpenVINO's QueryNetwork).

:func:`summary` describes a validated rule file (devices, memory, op lists, conditions, pins).
:func:`query` answers, for a model, what QueryNetwork answers for each device (which nodes it
takes) and what it does not say: which nodes each device refuses and the condition that refused
them, the pins applied, each node's preferred device (first device in priority order that takes
it and that its pins allow) and the value inputs that forbid a node to share a part with its
producer.  Both return plain data; :func:`format_summary` and :func:`format_query` render it.

>>> from hetero_solve.rules import load_rules
>>> from hetero_solve.model import load_model
>>> r = query(load_rules("rules/npu-static.yaml"), load_model("examples/seed000.onnx"))  # doctest: +SKIP
>>> r.nodes[3].preferred, r.nodes[3].refusals["NPU"]                                    # doctest: +SKIP
('CPU', "Erf is not in NPU's ops.supported")
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ..model.graph import ModelGraph
from ..roofline import nodes_work
from ..units import format_bytes, format_seconds
from .conditions import SupportChecker
from .load import DeviceRules, OpCondition, Rules

EXAMPLES_PER_REASON = 3
# Tensor names in refusal reasons: replaced by '…' so that one condition is one line per op.
_QUOTED = re.compile(r"\b((?:input|output) \d+) '[^']*'")


@dataclass
class NodeReport:
    """One main-graph node: where it may go and why not elsewhere."""
    index: int                          # position in the model's graph.node
    name: str
    op_type: str
    status: str                         # "placed" | "folded" | "constant"
    preferred: str | None = None        # None: no device takes it (or not placed)
    allowed: list[str] = field(default_factory=list)      # devices that take it, priority order
    refusals: dict[str, str] = field(default_factory=dict)  # device -> reason
    pinned_to: str | None = None
    pinned_by: str | None = None        # key path of the pin, e.g. affinity["/head/*"]


@dataclass
class Refusal:
    """Nodes of one op type a device refuses for one reason (tensor names in the reason are
    shown as '…': the per-node reasons are in :attr:`NodeReport.refusals`)."""
    op_type: str
    reason: str
    nodes: list[str]


@dataclass
class DeviceReport:
    name: str
    takes: dict[str, int]               # op type -> nodes it takes (before priority and pins)
    preferred: int                      # nodes for which it is the preferred device
    refuses: list[Refusal]
    memory: int | None
    instances: int
    value_inputs: str
    #: Seconds its roofline predicts for the nodes it takes, one part's fixed cost included
    #: (``None`` without a roofline); ``predicted_all``: whether it takes every node to place.
    predicted: float | None = None
    predicted_all: bool = False


@dataclass
class ValueBinding:
    """A value input computed inside the model: on devices that enforce value inputs, the
    consumer cannot share a part with the producer."""
    node: str
    op_type: str
    input_index: int
    tensor: str
    producer: str
    devices: list[str]                  # devices that enforce it (where the split happens)


@dataclass
class QueryReport:
    rules: str
    model: str
    opset: int
    dims: dict[str, int]
    devices: list[DeviceReport]
    nodes: list[NodeReport]
    pins: list[dict[str, Any]]          # {key, device, nodes}
    value_bindings: list[ValueBinding]
    warnings: list[str]

    @property
    def homeless(self) -> list[NodeReport]:
        """Placed nodes no device takes (a solve would fail on them)."""
        return [n for n in self.nodes if n.status == "placed" and not n.allowed]

    @property
    def pin_conflicts(self) -> list[NodeReport]:
        """Nodes pinned to a device that refuses them (a solve would fail on them)."""
        return [n for n in self.nodes if n.pinned_to and n.allowed and n.preferred is None]

    @property
    def ok(self) -> bool:
        """True when every node to place has a device: a solve can succeed."""
        return not self.homeless and not self.pin_conflicts

    def affinity(self) -> dict[str, str]:
        """Node name -> preferred device: OpenVINO's QueryNetwork map for HETERO."""
        return {n.name: n.preferred for n in self.nodes if n.preferred is not None}

    def as_dict(self) -> dict:
        d = asdict(self)
        d["homeless"] = [n.name for n in self.homeless]
        d["pin_conflicts"] = [n.name for n in self.pin_conflicts]
        d["affinity"] = self.affinity()
        return d


# -- without a model -------------------------------------------------------------------------

def summary(rules: Rules) -> dict:
    """A validated rule file as plain data: what ``rules check RULES`` prints."""
    return {
        "rules": rules.path,
        "description": rules.description,
        "devices": [_device_summary(d) for d in rules.devices],
        "value_inputs": {"ops": len(rules.value_inputs), "notes": len(rules.value_input_notes)},
        "affinity": [{"key": p.key, "pattern": p.pattern, "device": p.device, "glob": p.is_glob}
                     for p in rules.affinity],
        "dims": dict(rules.dims),
        "objective": rules.objective.describe(),
    }


def _device_summary(d: DeviceRules) -> dict:
    out = {
        "name": d.name, "description": d.description, "memory": d.memory,
        "instances": d.instances, "value_inputs": "enforce" if d.enforce_values else "ignore",
        "supported": "all" if d.supported is None else sorted(d.supported),
        "unsupported": sorted(d.unsupported),
        "when": {op: _condition_text(c) for op, c in sorted(d.when.items())},
        "static_shapes": d.static_shapes, "runtime": dict(d.runtime),
    }
    if d.roofline is not None or d.part_cost or d.link is not None:   # cost keys, when given
        out["costs"] = {
            "roofline": None if d.roofline is None else {
                "flops": d.roofline.flops, "bandwidth": d.roofline.bandwidth,
                "efficiency": dict(d.roofline.efficiency)},
            "part_cost": d.part_cost,
            "link": None if d.link is None else {"bandwidth": d.link.bandwidth,
                                                 "latency": d.link.latency}}
    return out


def _costs_text(c: dict) -> str:
    """One line: a device's roofline, part cost and link."""
    parts = []
    roof = c["roofline"]
    if roof is not None:
        eff = ", ".join(f"{op} {x:g}" for op, x in roof["efficiency"].items())
        parts.append(f"roofline {roof['flops'] / 1e9:g} GFLOPS, {roof['bandwidth'] / 1e9:g} GB/s"
                     + (f" (efficiency {eff})" if eff else ""))
    parts.append(f"part cost {format_seconds(c['part_cost'])}")
    link = c["link"]
    parts.append("no link (computes in host memory)" if link is None else
                 f"link {link['bandwidth'] / 1e9:g} GB/s + {format_seconds(link['latency'])}"
                 " per tensor")
    return "; ".join(parts)


def _condition_text(c: OpCondition) -> str:
    parts = [f"{k}={v}" for k, v in c.attributes.items()]
    if c.dtypes is not None:
        parts.append("dtypes " + "|".join(c.dtype_names))
    if c.max_rank is not None:
        parts.append(f"rank <= {c.max_rank}")
    if c.quantized is not None:
        parts.append("quantized" if c.quantized else "not quantized")
    return ", ".join(parts) or "(no condition)"


# -- with a model ----------------------------------------------------------------------------

def query(rules: Rules, mg: ModelGraph) -> QueryReport:
    """Per device and per node: who takes what, who refuses what and why (never raises for a
    node no device takes: :attr:`QueryReport.homeless` lists them).

    Raises :class:`~hetero_solve.errors.RuleError` for a pin by exact name that matches no
    node (the rule file does not fit the model), like :func:`~hetero_solve.compile_problem`."""
    from ..compile import resolve_pins

    checker = SupportChecker(rules, mg)
    devices = rules.devices
    placeable = mg.placeable()
    warnings = list(mg.warnings)
    pins, pin_keys = resolve_pins(rules, mg, placeable, warnings)
    pin_of = {g: (pins[v], pin_keys[v]) for v, g in enumerate(placeable)}
    folded, constant = set(mg.folded), set(mg.constant_nodes)

    nodes: list[NodeReport] = []
    takes: list[dict[str, int]] = [{} for _ in devices]
    preferred_count = [0] * len(devices)
    refused: list[dict[tuple[str, str], tuple[str, list[str]]]] = [{} for _ in devices]
    for i, name in enumerate(mg.names):
        op = mg.op_types[i]
        if i in constant or i in folded:
            nodes.append(NodeReport(i, name, op, "constant" if i in constant else "folded"))
            continue
        report = NodeReport(i, name, op, "placed")
        for d, dev in enumerate(devices):
            reason = checker.refusal(d, i)
            if reason is None:
                report.allowed.append(dev.name)
                takes[d][op] = takes[d].get(op, 0) + 1
            else:
                report.refusals[dev.name] = reason
                key = (op, _QUOTED.sub(r"\1 '…'", reason))
                refused[d].setdefault(key, (key[1], []))[1].append(name)
        pin, pin_key = pin_of[i]
        if pin >= 0:
            report.pinned_to, report.pinned_by = devices[pin].name, pin_key
            if devices[pin].name in report.allowed:
                report.preferred = devices[pin].name
        elif report.allowed:
            report.preferred = report.allowed[0]
        if report.preferred is not None:
            preferred_count[rules.device_index(report.preferred)] += 1
        nodes.append(report)

    predicted = _predicted(rules, mg, nodes)
    device_reports = []
    for d, dev in enumerate(devices):
        by_reason = [Refusal(op, reason, names) for (op, _), (reason, names) in refused[d].items()]
        by_reason.sort(key=lambda r: (-len(r.nodes), r.op_type))
        device_reports.append(DeviceReport(
            name=dev.name, takes=dict(sorted(takes[d].items(), key=lambda x: (-x[1], x[0]))),
            preferred=preferred_count[d], refuses=by_reason, memory=dev.memory,
            instances=dev.instances, value_inputs="enforce" if dev.enforce_values else "ignore",
            predicted=predicted[d], predicted_all=not by_reason))

    pin_rows = []
    for p in rules.affinity:
        hit = [mg.names[g] for v, g in enumerate(placeable) if pin_keys[v] == p.key]
        pin_rows.append({"key": p.key, "device": p.device, "nodes": hit})

    return QueryReport(
        rules=rules.path, model=mg.path, opset=mg.opset, dims=dict(mg.dims),
        devices=device_reports, nodes=nodes, pins=pin_rows,
        value_bindings=_value_bindings(rules, mg, set(placeable)), warnings=warnings)


def _predicted(rules: Rules, mg: ModelGraph, nodes: list[NodeReport]) -> list[float | None]:
    """Per device, its roofline's time for the placed nodes it takes plus one part's fixed
    cost (docs/costs.md); ``None`` for a device without a roofline."""
    if all(d.roofline is None for d in rules.devices):
        return [None] * len(rules.devices)
    placed = [n.index for n in nodes if n.status == "placed"]
    work = dict(zip(placed, nodes_work(mg, placed)))
    out: list[float | None] = []
    for dev in rules.devices:
        roof = dev.roofline
        if roof is None:
            out.append(None)
            continue
        out.append(dev.part_cost + sum(
            roof.time(n.op_type, work[n.index].flops, work[n.index].bytes)
            for n in nodes if n.status == "placed" and dev.name in n.allowed))
    return out


def _value_bindings(rules: Rules, mg: ModelGraph, placeable: set[int]) -> list[ValueBinding]:
    enforcing = [d.name for d in rules.devices if d.enforce_values]
    if not enforcing:
        return []
    out = []
    for i in sorted(placeable):
        opset = mg.opsets.get(mg.domains[i] or "", mg.opset)
        for k in rules.value_input_indices(mg.op_types[i], opset):
            inputs = mg.inputs[i]
            if k >= len(inputs) or not inputs[k] or mg.is_constant(inputs[k]):
                continue
            u = mg.producer.get(inputs[k], -1)
            if u in placeable:
                out.append(ValueBinding(mg.names[i], mg.op_types[i], k, inputs[k], mg.names[u],
                                        enforcing))
    return out


# -- text ------------------------------------------------------------------------------------

def _device_line(name: str, memory: int | None, instances: int, value_inputs: str,
                 static: bool | None = None) -> str:
    mem = "unlimited memory" if memory is None else f"memory {format_bytes(memory)}"
    inst = f"{instances} instance" + ("s" if instances != 1 else "")
    extra = ", static shapes" if static else ""
    return f"{name} ({mem} per instance, {inst}, value inputs {value_inputs}{extra})"


def format_summary(s: dict) -> str:
    """The text ``rules check RULES`` prints."""
    lines = [f"{s['rules']}: valid, {len(s['devices'])} device(s) in priority order"
             + (f" - {s['description']}" if s["description"] else "")]
    for d in s["devices"]:
        lines.append("  " + _device_line(d["name"], d["memory"], d["instances"],
                                         d["value_inputs"], d["static_shapes"]))
        sup = d["supported"]
        lines.append("    supported: " + (sup if sup == "all" else f"{len(sup)} op(s): "
                                          + ", ".join(sup)))
        if d["unsupported"]:
            lines.append("    unsupported: " + ", ".join(d["unsupported"]))
        for op, text in d["when"].items():
            lines.append(f"    when {op}: {text}")
        if d["runtime"]:
            lines.append("    runtime: " + ", ".join(f"{k}: {v}" for k, v in d["runtime"].items()))
        if "costs" in d:
            lines.append("    costs: " + _costs_text(d["costs"]))
    vi = s["value_inputs"]
    lines.append(f"  value inputs: {vi['ops']} op(s) in the catalog ({vi['notes']} note(s))")
    if s["affinity"]:
        lines.append("  pins:")
        for p in s["affinity"]:
            lines.append(f"    {p['key']} -> {p['device']}" + (" (glob)" if p["glob"] else ""))
    else:
        lines.append("  pins: none")
    if s["dims"]:
        lines.append("  dims: " + ", ".join(f"{k}={v}" for k, v in s["dims"].items()))
    lines.append(f"  objective: {s['objective']}")
    return "\n".join(lines)


def format_query(r: QueryReport, *, nodes: bool = True) -> str:
    """The text ``rules check RULES MODEL`` prints."""
    placed = [n for n in r.nodes if n.status == "placed"]
    n_folded = sum(1 for n in r.nodes if n.status == "folded")
    n_const = sum(1 for n in r.nodes if n.status == "constant")
    dims = ", ".join(f"{k}={v}" for k, v in r.dims.items()) or "none"
    lines = [f"{r.model} under {r.rules}",
             f"  {len(r.nodes)} node(s): {len(placed)} to place, {n_folded} folded, "
             f"{n_const} Constant; opset {r.opset}; dims {dims}"]
    for d in r.devices:
        lines.append("")
        lines.append(_device_line(d.name, d.memory, d.instances, d.value_inputs))
        taken = sum(d.takes.values())
        if d.takes:
            ops = ", ".join(f"{op}×{c}" if c > 1 else op for op, c in d.takes.items())
            lines.append(f"  takes {taken} node(s), preferred device of {d.preferred}: {ops}")
        else:
            lines.append("  takes no node")
        if d.predicted is not None:
            what = "the whole model" if d.predicted_all else \
                f"the {sum(d.takes.values())} node(s) it takes"
            lines.append(f"  predicted: {format_seconds(d.predicted)} for {what} (roofline, "
                         f"one part)")
        if d.refuses:
            lines.append(f"  refuses {sum(len(x.nodes) for x in d.refuses)} node(s):")
            for x in d.refuses:
                shown = ", ".join(x.nodes[:EXAMPLES_PER_REASON])
                more = f" and {len(x.nodes) - EXAMPLES_PER_REASON} more" \
                    if len(x.nodes) > EXAMPLES_PER_REASON else ""
                lines.append(f"    {x.op_type}×{len(x.nodes)}: {x.reason} [{shown}{more}]")
    lines.append("")
    if r.pins:
        lines.append("pins:")
        for p in r.pins:
            hit = ", ".join(p["nodes"][:5]) + (f" and {len(p['nodes']) - 5} more"
                                                if len(p["nodes"]) > 5 else "")
            lines.append(f"  {p['key']} -> {p['device']}: {len(p['nodes'])} node(s)"
                         + (f" [{hit}]" if hit else ""))
    else:
        lines.append("pins: none")
    if r.value_bindings:
        lines.append(f"value inputs computed in the model ({len(r.value_bindings)}): on "
                     + ", ".join(r.value_bindings[0].devices)
                     + " the consumer cannot share a part with the producer")
        for b in r.value_bindings:
            lines.append(f"  {b.node} ({b.op_type}) input {b.input_index} {b.tensor!r} <- {b.producer}")
    for n in r.homeless:
        why = "; ".join(f"{dev}: {reason}" for dev, reason in n.refusals.items())
        lines.append(f"NO DEVICE takes {n.name} ({n.op_type}): {why}")
    for n in r.pin_conflicts:
        lines.append(f"PIN CONFLICT: {n.name} ({n.op_type}) is pinned to {n.pinned_to} by "
                     f"{n.pinned_by}, which refuses it: {n.refusals.get(n.pinned_to)}")
    for w in r.warnings:
        lines.append(f"warning: {w}")
    if nodes:
        lines.append("")
        lines.append("preferred device per node (QueryNetwork):")
        width = max((len(n.name) for n in r.nodes), default=0)
        opw = max((len(n.op_type) for n in r.nodes), default=0)
        for n in r.nodes:
            if n.status != "placed":
                where = f"- ({n.status}: belongs to no part)"
            elif n.preferred is None:
                where = "- (no device)"
            else:
                where = n.preferred
                if n.pinned_to:
                    where += f" (pinned by {n.pinned_by})"
                else:
                    ahead = []
                    for d in r.devices:
                        if d.name == n.preferred:
                            break
                        ahead.append(f"{d.name}: {n.refusals.get(d.name, 'refused')}")
                    if ahead:
                        where += f" ({'; '.join(ahead)})"
            lines.append(f"  {n.name:<{width}}  {n.op_type:<{opw}}  {where}")
    return "\n".join(lines)


__all__ = ["query", "summary", "format_query", "format_summary", "QueryReport", "NodeReport",
           "DeviceReport", "Refusal", "ValueBinding"]
