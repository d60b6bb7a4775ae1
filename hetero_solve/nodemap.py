"""One record of how a transform turned one problem into another, and the one function that
carries every per-node field across it.

Four transforms make a problem out of another: quantized units contracted into one node
(:func:`hetero_solve.contract.contract`), optional folds placed
(:func:`hetero_solve.exact.folds.unfold`), colocation groups merged for contiguous stages
(:func:`hetero_solve.exact.colocate.contract_groups`) and chains contracted before the
search over device sequences (:func:`hetero_solve.exact.reductions.contract_chains`).  Each
builds the new graph and tensors its own way and returns a :class:`NodeMap` (new node -> the
old nodes it stands for, and back); :func:`remap` then derives every per-node field of the
new problem from the old one by the same rules, and checks them (:func:`check_remap`):

- a new node is named, typed and indexed in ``graph.node`` by its first old node (its
  anchor); it stands for every ONNX node its old nodes stood for (``members``);
- it may use the devices all its old nodes may use (in the anchor's priority order; a
  transform may narrow them further, ``within``); a device that refuses it says which old
  node it refuses and why; a pin of any old node applies;
- value edges map to the new nodes; one made and read inside a new node keeps it off devices
  that enforce value inputs (the value would be made in the part that reads it);
- its time on a device (``Problem.costs``) is the sum of its old nodes' times: a quantized
  unit costs the sum of its members; a node the transform adds from nothing (a placed fold
  option) costs what the transform says (the option's times, ``CostModel.option_time``), else
  nothing; a tensor keeps its volume;
- colocation groups map to the new nodes (a group inside one new node is gone: it holds);
- the fold options' value readers map to the new nodes.

>>> from hetero_solve.problem import make_problem
>>> m = NodeMap.of_groups(3, [[0, 1], [2]])
>>> m.sources, m.targets, m.expand([5, 7])
(((0, 1), (2,)), ((0,), (0,), (1,)), [5, 5, 7])
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

from .costs import CostModel
from .problem import Problem, Reason, Refusals


class RemapError(AssertionError):
    """A transform's new problem does not carry a per-node field as :func:`remap` defines."""


@dataclass(frozen=True)
class NodeMap:
    """How the nodes of a new problem stand for those of an old one.

    Parameters
    ----------
    sources : tuple of tuple of int
        Per new node, the old nodes it stands for, anchor first (empty: added from nothing).
    old_n : int
        The old problem's node count.
    tensors : tuple of (int or None) or None
        Per new tensor, the old tensor it is (``None``: new); ``None``: no tensor kept its id
        (the new problem's tensors are its own).
    label : str
        What a new node of several old ones is, for messages ("quantized unit").
    """

    sources: tuple[tuple[int, ...], ...]
    old_n: int
    tensors: tuple[int | None, ...] | None = None
    label: str = "unit"

    @classmethod
    def of_groups(cls, old_n: int, groups: Sequence[Sequence[int]], **kw) -> NodeMap:
        """A map from the old nodes of each new node (anchor first)."""
        return cls(tuple(tuple(g) for g in groups), old_n, **kw)

    @classmethod
    def extended(cls, old_n: int, added: int, **kw) -> NodeMap:
        """Every old node kept as it is, ``added`` new nodes after them."""
        return cls(tuple((v,) for v in range(old_n)) + ((),) * added, old_n, **kw)

    @property
    def n(self) -> int:
        """The new problem's node count."""
        return len(self.sources)

    @cached_property
    def targets(self) -> tuple[tuple[int, ...], ...]:
        """Per old node, the new nodes standing for it (several: a node copied into each unit
        that reads it, as a shared ``DequantizeLinear``)."""
        out: list[list[int]] = [[] for _ in range(self.old_n)]
        for u, vs in enumerate(self.sources):
            for v in vs:
                out[v].append(u)
        return tuple(tuple(t) for t in out)

    def expand(self, new_part_of: Sequence[int]) -> list[int]:
        """An old node's part from a part per new node (a copied node: its first copy's)."""
        return [new_part_of[t[0]] for t in self.targets]

    def restrict(self, old_part_of: Sequence[int]) -> list[int] | None:
        """A new node's part from a part per old node (``None`` when the old nodes of a new
        node are in different parts, or a new node stands for none)."""
        out = []
        for vs in self.sources:
            if not vs or any(old_part_of[v] != old_part_of[vs[0]] for v in vs):
                return None
            out.append(old_part_of[vs[0]])
        return out


def _node_fields(old: Problem, nmap: NodeMap, added: dict,
                 within: Sequence[tuple[int, ...]] | None) -> tuple:
    """Per new node: name, op, graph index, pin, devices, members (:func:`remap`), and per
    device the reason each new node may not use it."""
    S = nmap.sources
    D = len(old.devices)
    names, ops, gi, pinned, allowed = [], [], [], [], []
    members: dict[int, tuple[int, ...]] = {}
    rows: list[list[Reason]] = [[None] * nmap.n for _ in range(D)]
    entry = getattr(old.refusals, "entry", None)

    def why(v: int, d: int) -> Reason:
        return entry(v, d) if entry else old.why_not(v, d)

    for u, vs in enumerate(S):
        if not vs:
            a = added[u]
            names.append(a["name"])
            ops.append(a["op_type"])
            gi.append(a["graph_index"])
            pinned.append(-1)
            allowed.append(tuple(a["allowed"]))
            continue
        a = vs[0]
        names.append(old.names[a])
        ops.append(old.op_types[a])
        gi.append(old.graph_index[a] if old.graph_index else u)
        pinned.append(next((old.pinned[w] for w in vs if old.pinned[w] >= 0), -1)
                      if old.pinned else -1)
        if len(vs) > 1 or a in old.members:
            members[u] = tuple(sorted({g for w in vs for g in old.graph_nodes(w)}))
        ok = tuple(d for d in old.allowed[a]
                   if all(d in old.allowed[w] for w in vs[1:])
                   and (within is None or all(d in within[w] for w in vs)))
        allowed.append(ok)
        for d in range(D):
            if d in ok:
                continue
            if d not in old.allowed[a]:
                rows[d][u] = why(a, d)
                continue
            w = next((w for w in vs if d not in old.allowed[w]), None)
            rows[d][u] = (f"{old.op_types[w]} {old.names[w]!r} of its {nmap.label}: "
                          f"{old.why_not(w, d)}" if w is not None else
                          "outside the device sets searched")
    return names, ops, gi, pinned, allowed, members, rows


def _value_edges(old: Problem, new: Problem, nmap: NodeMap, allowed: list, rows: list,
                 added: dict) -> list[list[int]]:
    """The new nodes' value edges; a value made and read inside one new node takes it off
    the devices that enforce value inputs (``allowed`` and ``rows`` updated)."""
    S, T = nmap.sources, nmap.targets
    value_pred = []
    for u, vs in enumerate(S):
        inside = set(vs)
        out = dict.fromkeys(y for w in vs for x in old.value_pred[w]
                            for y in ([u] if x in inside else T[x]))
        if u in out:             # a value made inside the new node, read inside it
            del out[u]
            keep = tuple(d for d in allowed[u] if not old.devices[d].enforce_values)
            for d in allowed[u]:
                if d not in keep:
                    rows[d][u] = (f"a value-dependent input is made inside its {nmap.label}, "
                                  f"and {old.devices[d].name} enforces value inputs")
            allowed[u] = keep
        value_pred.append(list(out))
    if added:     # value edges from the nodes the transform added are its own
        for u in range(nmap.n):
            value_pred[u] += [x for x in new.value_pred[u]
                              if (not S[u] or not S[x]) and x not in value_pred[u]]
    return value_pred


def remap(old: Problem, new: Problem, nmap: NodeMap, *,
          within: Sequence[tuple[int, ...]] | None = None,
          added: dict | None = None) -> Problem:
    """``new`` (a transform's graph, tensors and constants) with every per-node field derived
    from ``old`` through ``nmap`` (module doc), checked by :func:`check_remap`.

    Parameters
    ----------
    old, new : Problem
        Before and after the transform; ``new`` gives the structure (edges, tensors,
        constants, devices) and, for nodes added from nothing, their fields (``added``) and
        value edges (its ``value_pred``, read only then).
    nmap : NodeMap
    within : sequence of tuple of int, optional
        Per old node, the devices the new problem may use at most (chain contraction: the
        device sets of the solutions searched).
    added : dict, optional
        Per added node (new id), ``{"name", "op_type", "allowed", "graph_index"}`` and
        optionally ``"time"`` (per device, as ``CostModel.node_time`` rows).
    """
    if nmap.n != new.n:
        raise RemapError(f"the map has {nmap.n} new node(s), the new problem {new.n}")
    T = nmap.targets
    added = added or {}
    names, ops, gi, pinned, allowed, members, rows = _node_fields(old, nmap, added, within)
    value_pred = _value_edges(old, new, nmap, allowed, rows, added)
    out = dataclasses.replace(
        new, names=names, op_types=ops, graph_index=gi, pinned=pinned, allowed=allowed,
        refusals=Refusals(rows), members=members, value_pred=value_pred,
        costs=_costs(old, new, nmap, allowed, added), colocation=_colocation(old, nmap),
        fold_options=[dataclasses.replace(o, value_readers=tuple(sorted(
            {u for r in o.value_readers for u in T[r]}))) for o in new.fold_options]
        if new.fold_options is old.fold_options else new.fold_options)
    check_remap(old, out, nmap)
    return out


def _costs(old: Problem, new: Problem, nmap: NodeMap, allowed,
           added: dict | None = None) -> CostModel | None:
    """Node times summed over each new node's old nodes (module doc; an added node: its
    ``added`` ``"time"`` per device, else nothing), tensor volumes kept, the fold options'
    times kept while the options are (``option_time``)."""
    c = old.costs
    if c is None:
        return None
    rows = []
    for u, vs in enumerate(nmap.sources):
        given = (added or {}).get(u, {}).get("time") if not vs else None
        rows.append([(sum(c.node_time[w][d] for w in vs) if vs else
                      (given[d] if given is not None and given[d] is not None else 0.0))
                     if d in allowed[u] else None for d in range(len(old.devices))])
    volume = c.volume
    if volume is not None:
        src = nmap.tensors or (None,) * len(new.tensor_bytes)
        volume = [volume[t] if t is not None else float(new.tensor_bytes[k])
                  for k, t in enumerate(src)]
    options = c.option_time if new.fold_options is old.fold_options else None
    return dataclasses.replace(c, node_time=rows, volume=volume, option_time=options)


def _colocation(old: Problem, nmap: NodeMap) -> list[list[int]]:
    """Each colocation group on the new nodes (one inside a single new node holds: gone)."""
    out = []
    for g in old.colocation:
        mapped = list(dict.fromkeys(u for v in g for u in nmap.targets[v]))
        if len(mapped) > 1:
            out.append(mapped)
    return out


def check_remap(old: Problem, new: Problem, nmap: NodeMap) -> None:
    """The postcondition of :func:`remap`: every old node is accounted for, every per-node
    field has one entry per new node, and what the module doc defines holds (devices, pins,
    members, node times, colocation).

    Raises
    ------
    RemapError
        Naming the field and the node.
    """
    n = nmap.n
    if nmap.old_n != old.n:
        raise RemapError(f"the map is of {nmap.old_n} old node(s), the old problem has {old.n}")
    lost = [v for v, t in enumerate(nmap.targets) if not t]
    if lost:
        raise RemapError(f"old node(s) {lost[:5]} map to no new node")
    for name in ("names", "op_types", "allowed", "succ", "pred", "value_pred", "node_inputs",
                 "node_outputs", "node_consts", "pinned", "graph_index"):
        if len(getattr(new, name)) != n:
            raise RemapError(f"{name} has {len(getattr(new, name))} entries, not {n}")
    for u, vs in enumerate(nmap.sources):
        for w in vs:
            if not set(new.allowed[u]) <= set(old.allowed[w]):
                raise RemapError(f"allowed: new node {u} may use a device old node {w} may not")
            if old.pinned and old.pinned[w] >= 0 and new.pinned[u] < 0:
                raise RemapError(f"pinned: old node {w}'s pin is lost on new node {u}")
            if old.graph_index and not set(old.graph_nodes(w)) <= set(new.graph_nodes(u)):
                raise RemapError(f"members: new node {u} lost old node {w}'s ONNX nodes")
    if (old.costs is None) != (new.costs is None):
        raise RemapError("costs: kept on one problem only")
    if old.costs is not None:
        rows = new.costs.node_time
        if len(rows) != n:
            raise RemapError(f"node times: {len(rows)} rows, not {n}")
        for u, vs in enumerate(nmap.sources):
            for d in new.allowed[u]:
                if not vs:          # an added node's time is the transform's
                    continue
                want = sum(old.costs.node_time[w][d] for w in vs)
                got = rows[u][d]
                if got is None or not math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12):
                    raise RemapError(f"node times: new node {u} on device {d} takes {got}, "
                                     f"its old nodes {want}")
        if new.costs.volume is not None and len(new.costs.volume) != len(new.tensor_bytes):
            raise RemapError("costs: a volume per tensor is missing")
    group_of = {}
    for k, g in enumerate(new.colocation):
        for u in g:
            group_of[u] = k
    for g in old.colocation:
        where = {u for v in g for u in nmap.targets[v]}
        if len(where) > 1 and len({group_of.get(u, -1 - u) for u in where}) > 1:
            raise RemapError(f"colocation: old group {list(g)[:5]} is split on the new problem")
