"""XLA-style clustering by edge contraction, checked by GraphCycles (seed 002).

Source: "Clustering DAG nodes for accelerators" (an essay on TensorFlow/XLA auto-clustering):
TensorFlow builds a ``GraphCycles`` copy of the graph and asks it to ``ContractEdge`` u -> v;
the contraction is refused when it would close a cycle.  Every placement constraint is reduced
to one construct, "nodes i and j must not share a cluster":

- an edge between nodes of different devices (the seed's unsupported node X0 and its
  neighbours) is never offered for contraction;
- a value-dependent input u -> v (the seed's A4 -> B0, Reshape's ``shape``) on a device that
  enforces them gets a dummy node x with u -> x -> v; the edges to and from x are never
  contracted, so contracting u -> v would close the cycle {u, v} -> x -> {u, v} and is refused.

``GraphCycles`` keeps a topological order under edge insertions with the Pearce-Kelly dynamic
algorithm (Pearce & Kelly, "A dynamic topological sort algorithm for directed acyclic graphs",
JEA 2006), as TensorFlow's ``graphcycles.cc`` does: an insertion that respects the order costs
O(1), otherwise only the nodes whose rank lies between the two ends are searched and
reordered.  ``contract_edge(a, b)`` removes a -> b, refuses when b is still reachable from a,
and otherwise merges the node with fewer edges into the other.

Interpretations:

- *Several devices*: XLA clusters only the accelerator's nodes and leaves the others
  unclustered; a partitioner must give every node a part, so every device's nodes are
  clustered the same way (an unclustered node would be a part of its own).  Each node is on
  its preferred device (the priority policy) and clusters never mix devices.
- *Contraction order*: the data edges u -> v are offered in topological order of u, then of v
  (graph order), in passes repeated until one contracts nothing, so the result is *maximal*
  (no two adjacent clusters of one device can be merged), as XLA's contraction loop is.  The
  seed states that the clustering depends on this order and guarantees validity only.
- Memory limits and device instances are not part of the source: they are ignored
  (everything on instance 0) and the validator reports overflows.

Acyclic by construction (GraphCycles refuses any contraction that closes a cycle), and value
inputs are honoured by the dummy nodes.

Example (seed 002's graph0 shape: A4 makes the value input of B0, so they stay apart):

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(3, [(0, 1)], [[0], [0], [0]], value_edges=[(1, 2)],
...                  names=["A0", "A4", "B0"])
>>> sol = graphcycles(p)
>>> sorted([p.names[v] for v in nodes] for nodes in sol.parts())
[['A0', 'A4'], ['B0']]
"""

from __future__ import annotations

from ...problem import Problem
from ...solution import Solution
from ._common import preferred_devices, solution_from_clusters, topological_order

NAME = "graphcycles"


class GraphCycles:
    """A DAG under edge insertion and contraction, with a Pearce-Kelly topological order.

    ``rank[v]`` is a topological numbering: every edge x -> y has ``rank[x] < rank[y]``."""

    def __init__(self, n: int):
        self.rank = list(range(n))
        self.out: list[set[int]] = [set() for _ in range(n)]
        self.inn: list[set[int]] = [set() for _ in range(n)]
        self.alive = [True] * n

    def insert_edge(self, x: int, y: int) -> bool:
        """Add x -> y; False (and no change) when it would close a cycle."""
        if x == y:
            return False
        if y in self.out[x]:
            return True
        self.out[x].add(y)
        self.inn[y].add(x)
        rank = self.rank
        if rank[x] < rank[y]:
            return True             # already consistent with the order: O(1)
        # Pearce-Kelly: search forward from y and backward from x inside the rank window.
        upper, lower = rank[x], rank[y]
        forward = self._search(y, self.out, lambda r: r <= upper, stop=x)
        if forward is None:
            self.out[x].discard(y)
            self.inn[y].discard(x)
            return False
        backward = self._search(x, self.inn, lambda r: r >= lower, stop=None)
        assert backward is not None
        self._reorder(forward, backward)
        return True

    def remove_edge(self, x: int, y: int) -> None:
        self.out[x].discard(y)
        self.inn[y].discard(x)

    def is_reachable(self, x: int, y: int) -> bool:
        """Is there a path x -> ... -> y (x itself counts)?  Only ranks up to y's are searched."""
        if x == y:
            return True
        bound = self.rank[y]
        if self.rank[x] > bound:
            return False
        return self._search(x, self.out, lambda r: r <= bound, stop=y) is None

    def contract_edge(self, a: int, b: int) -> int | None:
        """Merge b into a (or a into b) along the edge a -> b; None when another path a ~> b
        exists (the merge would close a cycle).  Returns the surviving node."""
        if b not in self.out[a]:
            raise ValueError(f"no edge {a} -> {b}")
        self.remove_edge(a, b)
        if self.is_reachable(a, b):
            self.insert_edge(a, b)
            return None
        if len(self.inn[b]) + len(self.out[b]) > len(self.inn[a]) + len(self.out[a]):
            a, b = b, a             # keep the node with more edges: fewer to move
        outs, ins = self.out[b], self.inn[b]
        self.out[b], self.inn[b] = set(), set()
        for y in outs:
            self.inn[y].discard(b)
        for y in ins:
            self.out[y].discard(b)
        self.alive[b] = False
        for y in outs:
            ok = self.insert_edge(a, y)
            assert ok, "contraction closed a cycle"
        for y in ins:
            ok = self.insert_edge(y, a)
            assert ok, "contraction closed a cycle"
        return a

    def _search(self, start: int, adj: list[set[int]], inside, stop: int | None) -> list[int] | None:
        """Nodes reached from ``start`` whose rank satisfies ``inside``; None if ``stop`` is
        reached (a cycle, or reachability)."""
        rank = self.rank
        seen = {start}
        stack = [start]
        out = []
        while stack:
            v = stack.pop()
            out.append(v)
            for w in adj[v]:
                if w == stop:
                    return None
                if w not in seen and inside(rank[w]):
                    seen.add(w)
                    stack.append(w)
        return out

    def _reorder(self, forward: list[int], backward: list[int]) -> None:
        """Give the backward set (ancestors of x) the lowest of the freed ranks, then the
        forward set (descendants of y), each keeping its relative order."""
        rank = self.rank
        backward.sort(key=rank.__getitem__)
        forward.sort(key=rank.__getitem__)
        slots = sorted(rank[v] for v in backward + forward)
        for v, r in zip(backward + forward, slots):
            rank[v] = r


def graphcycles(problem: Problem) -> Solution:
    """Maximal same-device clusters by edge contraction (seed 002)."""
    n = problem.n
    dev = preferred_devices(problem)
    enforce = [d.enforce_values for d in problem.devices]
    order = topological_order(problem)
    forbidden = [(u, v) for v in range(n) for u in problem.value_pred[v]
                 if dev[u] == dev[v] and enforce[dev[v]]]
    gc = GraphCycles(n + len(forbidden))
    # Ranks start as a topological order of the data graph, so inserting its edges is O(1);
    # the dummy nodes start after every node and are moved by Pearce-Kelly.
    for i, v in enumerate(order):
        gc.rank[v] = i
    for u in order:
        for v in problem.succ[u]:
            gc.insert_edge(u, v)
    for i, (u, v) in enumerate(forbidden):
        x = n + i
        if not (gc.insert_edge(u, x) and gc.insert_edge(x, v)):
            raise AssertionError("a dummy node closed a cycle")
    cluster = list(range(n))          # node -> GraphCycles node holding it
    members: dict[int, list[int]] = {v: [v] for v in range(n)}
    pos = {v: i for i, v in enumerate(order)}
    edges = [(u, v) for u in order for v in sorted(problem.succ[u], key=pos.__getitem__)
             if dev[u] == dev[v]]
    contractions = refused = passes = 0
    changed = True
    while changed:
        changed = False
        passes += 1
        for u, v in edges:
            a, b = cluster[u], cluster[v]
            if a == b:
                continue
            keep = gc.contract_edge(a, b)
            if keep is None:
                refused += 1
                continue
            gone = b if keep == a else a
            for w in members[gone]:
                cluster[w] = keep
            members[keep].extend(members.pop(gone))
            contractions += 1
            changed = True
    clusters = [sorted(m) for m in members.values()]
    return solution_from_clusters(problem, clusters, [dev[m[0]] for m in clusters], NAME,
                                  stats={"contractions": contractions, "refused": refused,
                                         "passes": passes, "dummy_nodes": len(forbidden)})
