"""Where a problem's times come from, one door: the rule file's rooflines and a measured
profile, made into the problem's :class:`~hetero_solve.costs.CostModel` (docs/costs.md).

* A node's time on a device is the profile's where it has one (``Measured.times[device]``
  by ONNX node name), else the device's ``roofline`` over the node's FLOPs and bytes
  (:mod:`hetero_solve.roofline`).  A quantized unit costs the sum of its members (each ONNX
  node counted once); a folded node or a ``Constant`` costs nothing (they are no part's).
* A folded node an answer may place instead (``Problem.fold_options``) has its times ready
  (``CostModel.option_time``) for the problem that places it: the profile's or the
  roofline's, else 0 (a profile need not time a node the runtime folds, whatever other keys,
  ``memory`` say, make it an option).
* A part's fixed cost is the profile's for the device where it has one (its ``part_cost``
  and its ``switch_cost``: what a part pays after a part on another device), else the rule
  file's
  ``part_cost`` (also where the profile's device has none: an imported profiler file);
  a device's link is the profile's (what a tensor crossing a cut costs on it, measured on
  the model: docs/costs.md, "Boundary costs"), else the rule file's ``link``.
* When every link is the profile's, a tensor inside a fused group (:mod:`.fusion`) moves
  twice its bytes when a cut crosses it (``CostModel.volume``): the fusion the cut loses.

A problem has a cost model only when every node has a time on every device that may take
it; otherwise :func:`cost_model` says which device and node lack one (what a cost objective
then reports, naming the keys or ``--costs`` that would give it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..costs import CostModel, Link
from ..errors import CostError
from ..model.graph import ModelGraph
from ..problem import Problem
from ..roofline import nodes_work
from .fusion import fused_edges, volumes
from ..rules.load import Rules


@dataclass(frozen=True)
class Measured:
    """Measured times of one model (a profile, ``--costs``): per device name, ONNX node name
    -> seconds, and the fixed cost of one part in seconds.  ``source`` names where they came
    from, for messages."""

    times: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    part_cost: Mapping[str, float] = field(default_factory=dict)
    source: str = "<profile>"
    #: The execution settings the times were measured with (the profile's), or None.
    execution: Mapping[str, Any] | None = None
    #: Per device name, what a tensor crossing a cut costs each way (the profile's ``link``).
    links: Mapping[str, Link] = field(default_factory=dict)
    #: Per device name, how far one whole-model run moves, relative (half its middle half
    #: over its median): a predicted gain smaller than this is not one.
    noise: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, profile: Any) -> "Measured":
        """From a profile as :func:`hetero_solve.times.read_profile` returns it (per device
        name: ``node_seconds`` and ``part_cost``), or a ``Measured`` as it is."""
        if isinstance(profile, Measured):
            return profile
        devices = profile.devices
        return cls(times={name: dict(d.node_seconds) for name, d in devices.items()},
                   part_cost={name: float(d.part_cost) + float(getattr(d, "switch_cost",
                                                                        0.0) or 0.0)
                              for name, d in devices.items() if d.part_cost is not None},
                   links={name: Link(bandwidth=d.link.get("bandwidth"),
                                     latency=float(d.link.get("latency") or 0.0))
                          for name, d in devices.items() if getattr(d, "link", None)},
                   noise={name: d.noise() for name, d in devices.items()
                          if hasattr(d, "noise") and d.noise() > 0},
                   source=str(getattr(profile, "path", "") or "<profile>"),
                   execution=getattr(profile, "execution", None))


@dataclass(frozen=True)
class NoCosts:
    """Why a problem has no cost model: ``device`` has no time for ``node`` (``None``: no
    device has a roofline and nothing was measured)."""

    device: str | None = None
    device_index: int = -1
    node: str | None = None

    def text(self, what: str) -> str:
        """One line: ``what`` (``objective latency``) needs times, and how to give them."""
        if self.device is None:
            return (f"{what} needs times: give each device a roofline in the rule file "
                    f"(devices[].roofline: {{flops: 2TFLOPS, bandwidth: 50GB/s}}) or a measured "
                    f"profile (--costs PROFILE.json)")
        return (f"{what} needs times: device {self.device} has no time for node "
                f"{self.node!r}: give it a roofline (devices[{self.device_index}].roofline: "
                f"{{flops, bandwidth}}) or measure it (--costs PROFILE.json)")


def has_cost_source(rules: Rules, measured: Measured | None) -> bool:
    """Whether any device has a roofline or anything was measured."""
    return any(d.roofline is not None for d in rules.devices) or bool(
        measured and any(measured.times.values()))


def cost_model(mg: ModelGraph, rules: Rules, problem: Problem,
               measured: Measured | None = None) -> CostModel | NoCosts:
    """The cost model of a compiled problem (module doc), or :class:`NoCosts` saying what is
    missing.

    Parameters
    ----------
    mg : ModelGraph
        The model the problem was compiled from.
    rules : Rules
        Its rule file: each device's ``roofline``, ``part_cost`` and ``link``.
    problem : Problem
        Compiled (quantized units contracted: ``members``).
    measured : Measured, optional
        A profile's times; they win where they have a node.

    Returns
    -------
    CostModel or NoCosts
    """
    if not has_cost_source(rules, measured):
        return NoCosts()
    devices = rules.devices
    if measured is not None:
        _check_devices(measured, rules, problem)
    measured_times = [dict((measured.times.get(d.name) or {}) if measured else {})
                      for d in devices]
    work: dict[int, tuple[str, float, float]] = {}
    if any(d.roofline is not None for d in devices):   # every node sized at once
        graph_nodes = sorted({i for v in range(problem.n) for i in problem.graph_nodes(v)}
                             | {o.graph_index for o in problem.fold_options})
        work = {i: (mg.op_types[i], w.flops, w.bytes)
                for i, w in zip(graph_nodes, nodes_work(mg, graph_nodes))}

    def time_of(i: int, d: int) -> float | None:
        found = measured_times[d].get(mg.names[i])
        if found is not None:
            return float(found)
        roof = devices[d].roofline
        return None if roof is None else roof.time(*work[i])

    counted: set[int] = set()      # a DQ two units share is counted in the first
    node_time: list[list[float | None]] = []
    for v in range(problem.n):
        own = [i for i in problem.graph_nodes(v) if i not in counted]
        counted.update(own)
        row: list[float | None] = [None] * len(devices)
        for d in problem.allowed[v]:
            total = 0.0
            for i in own:
                t = time_of(i, d)
                if t is None:
                    return NoCosts(devices[d].name, d, mg.names[i])
                total += t
            row[d] = total
        node_time.append(row)
    option_time: list[list[float | None]] = []    # foldable nodes an answer may place
    for o in problem.fold_options:
        row = [None] * len(devices)
        for d in o.allowed:
            # a folded node a profile has no time for: the runtime folded it too (nothing)
            row[d] = time_of(o.graph_index, d)
            if row[d] is None:
                row[d] = 0.0
        option_time.append(row)
    part_cost = [float(measured.part_cost[d.name]) if measured and d.name in measured.part_cost
                 else d.part_cost for d in devices]
    links = [measured.links[d.name] if measured and d.name in measured.links else d.link
             for d in devices]
    # a cut through a fused group loses the fusion (times/fusion.py): priced at the per-byte
    # cost measured on the model, so only when every link is a profile's (a rule file's link
    # is a bus, which the lost fusion does not cross)
    volume = None
    if measured is not None and measured.links and all(
            d.link is None or d.name in measured.links for d in devices) and any(
            measured.links.get(d.name) is not None for d in devices):
        fused = fused_edges(problem)
        if any(fused):
            volume = volumes(problem, fused)
    return CostModel(node_time=node_time, part_cost=part_cost, links=links,
                     option_time=option_time or None, volume=volume)


def _check_devices(measured: Measured, rules: Rules, problem: Problem) -> None:
    """Measured devices must be the rule file's: none in common is an error, some not in it a
    warning (a profile may cover more devices than one rule file uses)."""
    names = [d.name for d in rules.devices]
    foreign = [d for d in measured.times if d not in names]
    if not foreign:
        return
    if len(foreign) == len(measured.times):
        raise CostError(f"{measured.source}: measures devices {', '.join(foreign)}, none of "
                        f"which is in {rules.path} (devices: {', '.join(names)})")
    problem.info.warnings.append(f"{measured.source}: devices {', '.join(foreign)} are not in "
                                 f"{rules.path}: their times are not used")


__all__ = ["Measured", "NoCosts", "cost_model", "has_cost_source"]
