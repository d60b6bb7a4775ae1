"""Importer for the device-placement instances of Tarnawski et al. (NeurIPS 2020): an operator
graph with per-node CPU and accelerator times, into a :class:`~hetero_solve.problem.Problem`
in abstract form (no ONNX model behind it).

Their JSON (msr-fiddle/dnn-partitioning): ``maxSizePerFPGA`` (bytes per accelerator),
``maxFPGAs`` (accelerators), ``maxCPUs`` (CPU cores); ``nodes`` with ``id``,
``supportedOnFpga``, ``cpuLatency``, ``fpgaLatency``, ``size`` (memory the node takes on an
accelerator), ``colorClass`` (nodes sharing one must be on the same device), optional ``name``
and ``isBackwardNode``; ``edges`` with ``sourceId``, ``destId``, ``cost`` (time to move the
source's output between an accelerator and CPU memory, the same for every edge leaving a node).
"FPGA" means any accelerator.

Their model, reproduced exactly (docs/instances.md has the paper's definitions):

* devices ``FPGA`` (first: preferred; ``maxFPGAs`` instances of ``maxSizePerFPGA`` bytes) and
  ``CPU`` (``maxCPUs`` instances, no limit);
* a node's memory is its ``size`` alone (a constant only it reads; tensors are 0 bytes), so an
  accelerator holds the sum of its nodes' sizes, as their knapsack;
* each node with successors makes one tensor read by its successors; crossing costs are times:
  the cost model's ``volume`` of that tensor is the node's ``cost`` and the accelerator's link
  has bandwidth 1, the CPU none, so an accelerator's load counts ``cost`` once per node whose
  output crosses its boundary in or out (:mod:`hetero_solve.measures.costs`), and a CPU core
  pays nothing;
* colour classes become colocation groups (one device instance);
* **training graphs** (some node ``isBackwardNode``) under the throughput objective are
  pipelines (:func:`stage_order`): the *forward* edges order the stages, and a backward node
  runs on the stage of its colour class's forward nodes, whatever its own edges (the backward
  pass goes through the stages in reverse).  The problem's ``succ``/``pred`` are then this
  order, not every edge; the tensors keep every edge (every edge costs what it costs).  With
  contiguous stages, as their DP: a colour class with backward nodes only is ordered by its
  backward edges mirrored (their artificial forward node), and colour classes that must then
  share a stage (a cycle among classes) are one colocation group.  Under the latency
  objective (one training step, parts one after another) every edge orders the parts.

Times keep the instance's own unit (their files do not name it).  Nodes are numbered in a
topological order of the problem's edges (smallest ``id`` first among the ready ones);
``graph_index`` keeps the ``id``.
"""

from __future__ import annotations

import os
from typing import Any

from ..costs import CostModel, Link
from ..errors import HeteroSolveError
from ..measures.order import topological_order
from ..problem import Device, Objective, Problem, ProblemInfo
from ..readers import read_json

#: Top-level keys that tell this format from others (``filekind``).
SIGNATURE = ("maxSizePerFPGA", "maxFPGAs", "maxCPUs")


class InstanceError(HeteroSolveError):
    """An instance file is invalid: names the file, the key and the reason."""

    def __init__(self, path: object, key: str, reason: str):
        self.path, self.key, self.reason = str(path), key, reason
        super().__init__(f"{self.path}: {key}: {reason}" if key else f"{self.path}: {reason}")


def load_instance(path: str | os.PathLike, objective: Objective | None = None, *,
                  contiguous: bool = False) -> Problem:
    """Read an instance file into a problem with a cost model.

    Parameters
    ----------
    path : path-like
        A JSON file in the format of the module doc.
    objective : Objective, optional
        Default: ``throughput`` (time per sample).
    contiguous : bool
        Pipeline stages: at most one part per device instance (their DP's model).

    Returns
    -------
    Problem

    Raises
    ------
    InstanceError
        A missing or mistyped key, an unknown node id, a cycle, two costs for one node.
    """
    data = read_json(path, lambda reason: InstanceError(path, "", reason))
    return instance_problem(data, path, objective or Objective(order=("throughput",)),
                            contiguous=contiguous)


def _number(path, key: str, value: Any, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise InstanceError(path, key, f"must be a number >= {minimum:g}, not {value!r}")
    return float(value)


def _nodes(data: dict, path) -> tuple[list[dict], dict[int, int]]:
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise InstanceError(path, "nodes", "must be a non-empty list")
    index: dict[int, int] = {}
    for k, node in enumerate(nodes):
        where = f"nodes[{k}]"
        if not isinstance(node, dict):
            raise InstanceError(path, where, "must be an object")
        for key in ("id", "supportedOnFpga", "cpuLatency", "fpgaLatency"):
            if key not in node:
                raise InstanceError(path, f"{where}.{key}", "missing")
        if not isinstance(node["id"], int) or node["id"] in index:
            raise InstanceError(path, f"{where}.id", f"must be a distinct integer, not {node['id']!r}")
        index[node["id"]] = k
    return nodes, index


def _edges(data: dict, path, index: dict[int, int]) -> tuple[list[tuple[int, int]], dict[int, float]]:
    edges, cost = [], {}
    for k, e in enumerate(data.get("edges", [])):
        where = f"edges[{k}]"
        if not isinstance(e, dict):
            raise InstanceError(path, where, "must be an object")
        s, t = e.get("sourceId"), e.get("destId")
        for key, x in (("sourceId", s), ("destId", t)):
            if x not in index:
                raise InstanceError(path, f"{where}.{key}", f"names no node: {x!r}")
        c = _number(path, f"{where}.cost", e.get("cost"))
        if s in cost and abs(cost[s] - c) > 1e-6:
            raise InstanceError(path, f"{where}.cost", f"node {s} has two outgoing costs "
                                                       f"({cost[s]:g} and {c:g})")
        cost.setdefault(s, c)
        if s == t:
            raise InstanceError(path, where, f"a loop on node {s}")
        edges.append((index[s], index[t]))
    return edges, cost


def _topological(n: int, edges: list[tuple[int, int]], ids: list[int], path) -> list[int]:
    """Kahn's order of the instance's nodes, ties to the smallest id (the file's own numbering,
    not its order): nodes are renumbered by id for :func:`topological_order` and mapped back."""
    by_rank = sorted(range(n), key=ids.__getitem__)
    rank = [0] * n
    for r, v in enumerate(by_rank):
        rank[v] = r
    succ: list[set[int]] = [set() for _ in range(n)]
    pred: list[set[int]] = [set() for _ in range(n)]
    for u, v in edges:
        succ[rank[u]].add(rank[v])
        pred[rank[v]].add(rank[u])
    try:
        order = topological_order(succ, pred, smallest_first=True)
    except ValueError:
        raise InstanceError(path, "edges", "the graph has a cycle") from None
    return [by_rank[r] for r in order]


def stage_order(edges: list[tuple[int, int]], backward: list[bool], classes: list[object],
                contiguous: bool, ids: list[int], path) -> tuple[list[tuple[int, int]],
                                                                  list[list[int]]]:
    """A training graph read as a pipeline (module doc; docs/instances.md): the edges that
    order the stages, and the colocation groups.

    Parameters
    ----------
    edges : list of (int, int)
        Every edge, by position in the file's node list.
    backward : list of bool
        Per node, ``isBackwardNode``.
    classes : list
        Per node, its colour class (a node without one is a class of its own).
    contiguous : bool
        One stage per device instance (their DP's model): orphaned backward classes are
        ordered by their mirrored backward edges, and classes on a cycle are fused.
    ids, path
        For messages.

    Returns
    -------
    order : list of (int, int)
        The forward edges, and with ``contiguous`` the mirrored edges (between one node of
        each fused group, so the order stays acyclic node by node).
    groups : list of list of int
        The colocation groups: colour classes, fused where they must share a stage.

    Raises
    ------
    InstanceError
        An edge from a backward node to a forward node (a backward node runs after its
        forward stage, as their DP requires).
    """
    for u, v in edges:
        if backward[u] and not backward[v]:
            raise InstanceError(path, "edges", f"an edge from backward node {ids[u]} to forward "
                                               f"node {ids[v]}: a training graph's backward "
                                               f"nodes come after its forward nodes")
    members: dict[object, list[int]] = {}
    for v, c in enumerate(classes):
        members.setdefault(c, []).append(v)
    order = [(u, v) for u, v in edges if not backward[u] and not backward[v]]
    if not contiguous:
        return order, [g for g in members.values() if len(g) > 1]
    forward_classes = {classes[v] for v in range(len(classes)) if not backward[v]}
    # the class graph: forward edges, and each backward edge that touches a class without
    # forward nodes mirrored (their DP's artificial forward node, createArtificialForwardNodes)
    import networkx as nx
    g = nx.DiGraph()
    g.add_nodes_from(members)
    g.add_edges_from((classes[u], classes[v]) for u, v in order if classes[u] != classes[v])
    mirrored = [(classes[v], classes[u]) for u, v in edges
                if backward[u] and backward[v] and classes[u] != classes[v]
                and (classes[u] not in forward_classes or classes[v] not in forward_classes)]
    g.add_edges_from(mirrored)
    # classes on a cycle share one stage (fuseStronglyConnectedComponentsInForward)
    cond = nx.condensation(g)
    fused = cond.graph["mapping"]
    groups: dict[int, list[int]] = {}
    for c, ms in members.items():
        groups.setdefault(fused[c], []).extend(ms)

    def anchor(group: list[int]) -> int:
        """The node that carries a group's mirrored edges: a forward one if it has one."""
        return min(group, key=lambda v: (backward[v], ids[v]))

    anchors = {k: anchor(ms) for k, ms in groups.items()}
    order += sorted({(anchors[fused[a]], anchors[fused[b]]) for a, b in mirrored
                     if fused[a] != fused[b]})
    return order, [sorted(ms) for ms in groups.values() if len(ms) > 1]


def instance_problem(data: Any, path: object, objective: Objective, *,
                     contiguous: bool = False) -> Problem:
    """:func:`load_instance` on parsed JSON (``path`` names it in errors)."""
    if not isinstance(data, dict):
        raise InstanceError(path, "", "must be a JSON object")
    for key in SIGNATURE:
        if key not in data:
            raise InstanceError(path, key, "missing")
    cap = _number(path, "maxSizePerFPGA", data["maxSizePerFPGA"])
    fpgas = int(_number(path, "maxFPGAs", data["maxFPGAs"]))
    cpus = int(_number(path, "maxCPUs", data["maxCPUs"], 1))
    raw, index = _nodes(data, path)
    edges, cost = _edges(data, path, index)
    ids = [node["id"] for node in raw]
    _topological(len(raw), edges, ids, path)          # the file's graph is a DAG
    backward = [bool(node.get("isBackwardNode", False)) for node in raw]
    classes = [node.get("colorClass", ("own", k)) for k, node in enumerate(raw)]
    if any(backward) and "latency" not in objective.terms():
        order_edges, groups = stage_order(edges, backward, classes, contiguous, ids, path)
    else:
        members: dict[object, list[int]] = {}
        for k, c in enumerate(classes):
            members.setdefault(c, []).append(k)
        order_edges, groups = edges, [g for g in members.values() if len(g) > 1]
    order = _topological(len(raw), order_edges, ids, path)
    new = {old: k for k, old in enumerate(order)}
    nodes = [raw[old] for old in order]
    return _build(nodes, sorted({(new[u], new[v]) for u, v in edges}),
                  sorted({(new[u], new[v]) for u, v in order_edges}),
                  sorted(sorted(new[v] for v in g) for g in groups), cost, cap, fpgas, cpus,
                  objective, contiguous, path)


def _build(nodes, edges, order_edges, groups, cost, cap, fpgas, cpus, objective, contiguous,
           path) -> Problem:
    n = len(nodes)
    FPGA, CPU = 0, 1
    devices = [Device("FPGA", memory=int(cap), instances=max(fpgas, 1)), Device("CPU", instances=cpus)]
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for u, v in order_edges:
        succ[u].append(v)
        pred[v].append(u)
    readers: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        readers[u].append(v)
    allowed, times = [], []
    for node in nodes:
        on_fpga = bool(node["supportedOnFpga"]) and fpgas > 0
        allowed.append((FPGA, CPU) if on_fpga else (CPU,))
        times.append([_number(path, f"node {node['id']}.fpgaLatency", node["fpgaLatency"])
                      if on_fpga else None,
                      _number(path, f"node {node['id']}.cpuLatency", node["cpuLatency"])])
    makers = [v for v in range(n) if readers[v]]
    tensor_of = {v: t for t, v in enumerate(makers)}
    node_inputs: list[list[int]] = [[] for _ in range(n)]
    for u in makers:
        for v in readers[u]:
            node_inputs[v].append(tensor_of[u])
    sizes = [int(_number(path, f"node {node['id']}.size", node.get("size", 0))) for node in nodes]
    consts = [v for v in range(n) if sizes[v]]
    const_of = {v: w for w, v in enumerate(consts)}
    costs = CostModel(node_time=times, part_cost=[0.0, 0.0], links=[Link(bandwidth=1.0), None],
                      volume=[cost.get(nodes[v]["id"], 0.0) for v in makers],
                      contiguous=contiguous, unit="")
    return Problem(
        devices=devices, names=[str(node.get("name", node["id"])) for node in nodes],
        op_types=["Op"] * n, allowed=allowed, succ=succ, pred=pred,
        value_pred=[[] for _ in range(n)],
        tensor_names=[f"out{nodes[v]['id']}" for v in makers], tensor_bytes=[0] * len(makers),
        tensor_producer=makers, tensor_consumers=[list(readers[v]) for v in makers],
        tensor_is_output=[False] * len(makers),
        node_inputs=[sorted(ts) for ts in node_inputs],
        node_outputs=[[tensor_of[v]] if v in tensor_of else [] for v in range(n)],
        const_names=[f"size{nodes[v]['id']}" for v in consts],
        const_bytes=[sizes[v] for v in consts],
        node_consts=[[const_of[v]] if v in const_of else [] for v in range(n)],
        objective=objective, pinned=[-1] * n, graph_index=[node["id"] for node in nodes],
        info=ProblemInfo(format="tarnawski2020"), costs=costs, colocation=groups)
