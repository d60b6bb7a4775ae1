"""OpenVINO HETERO subgraph selection, as its design overview describes it (seed 000).

Source: OpenVINO Hetero plugin design overview, "Subgraphs selection" and "Subgraphs self
reference detection" (the hetero plugin's design document in the openvinotoolkit/openvino
repository).

Affinity is the priority fallback policy (seed 001): every node on its preferred device.  Then,
for each plugin (device) in priority order, rounds are run over that plugin's nodes that are
not yet in a selected subgraph:

1. select a *root*: a node of this affinity not in a subgraph constructed earlier in the round;
2. select a node adjacent to the subgraph and not on the *rejected* list (none: the subgraph
   is complete);
3./4. if it has the same affinity, add it, else put it on the rejected list;
5. check the *global condition*: no node on the rejected list lies on a path between two nodes
   of the subgraph (path sets from the transitive closure);
6. while it fails, remove the last node added and put it on the rejected list (roll back);
7. go to 2.

When no root is left, the largest subgraph of the round is selected (ties: the one built
first) and the round is repeated on the remaining nodes of that plugin.  Every subgraph is one
part on its plugin.

Interpretations (the seed leaves these open; each is needed to reproduce its worked trace):

- *Adjacent node order* (step 2): the subgraph's nodes are scanned from the most recently
  added back to the root; for each, successors then predecessors in graph order; the first
  node that is neither in the subgraph nor rejected is taken.  This depth-first order is the
  one that reproduces the seed's trace (it tries 5 before 4 in the first round, 2 before 4 in
  the second).  Roots are taken in graph order.
- *Nodes already in a selected subgraph* (from this or an earlier plugin) can never be added,
  so they count as rejected in the global condition (a path from the subgraph through them
  and back would be a cycle between the two subgraphs); they are never tried as candidates.
- *Path sets*: the pairwise test "a rejected node lies on a path src -> w -> dst between two
  subgraph nodes" equals "a rejected node is reachable from some subgraph node and reaches
  some subgraph node" (take src and dst as those two nodes), so the check intersects the union
  of the members' descendant sets with the union of their ancestor sets: the same answer as
  the cached pairwise path sets, without the pairs.  The closure is held as Python integers
  used as bitsets: O(N^2) bits.
- Value-dependent inputs, memory limits and device instances are not part of the source: it
  ignores them (everything on instance 0), and the study's validator reports the violations.
- The source checks "indirect self-references" of one subgraph only; cycles through two or
  more subgraphs are not excluded and are reported by the validator.

Above ``max_nodes`` placeable nodes (default :data:`MAX_NODES`, 10,000) the baseline raises
:class:`BaselineSkipped`: the closure is O(N^2) bits (12 MB at 10,000 nodes, 1.2 GB at
100,000), and every round regrows every subgraph of the remaining nodes, so time grows with
nodes x parts (measured here: 4,000 nodes and 1,923 parts in 34 s; 6,000 nodes and 835 parts
in 16 s).

Example (the seed's 7-node graph, node 4 unsupported by the first plugin):

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(7, [(0, 1), (1, 2), (1, 3), (2, 4), (3, 4), (4, 5), (5, 6)],
...                  [[0, 1], [0, 1], [0, 1], [1], [0, 1], [0, 1], [0, 1]],
...                  names=["1", "2", "3", "4", "5", "6", "7"])
>>> sol = openvino(p)
>>> sorted((p.devices[sol.part_device[k]].name, [p.names[v] for v in nodes])
...        for k, nodes in enumerate(sol.parts()))
[('ACC', ['1', '2']), ('ACC', ['3', '5', '6', '7']), ('CPU', ['4'])]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...problem import Problem
from ...solution import Solution
from ._common import BaselineSkipped, preferred_devices, solution_from_clusters, topological_order

NAME = "openvino"
MAX_NODES = 10_000


@dataclass
class Step:
    """One line of the seed's worked trace.

    ``action``: ``roots`` (the possible roots), ``root``, ``merge``, ``failed`` (a node of
    another affinity was rejected), ``rollback``, ``end`` (no node left to try), ``subgraphs``
    (those of the round), ``select`` (the largest), ``remaining`` (nodes for the next round).
    ``check`` is the global condition after the step: ``ok``, ``possible`` (a self-reference
    may come through ``through``, not known yet: ok) or ``reject`` (a rejected node in
    ``through`` lies between two subgraph nodes)."""

    action: str
    device: str
    node: str | None = None
    subgraph: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    check: str = ""
    through: list[str] = field(default_factory=list)
    groups: list[list[str]] = field(default_factory=list)

    def __str__(self) -> str:
        if self.action in ("roots", "remaining"):
            return f"[{self.device}] {self.action}: {self.subgraph}"
        if self.action == "subgraphs":
            return f"[{self.device}] subgraphs: {self.groups}"
        if self.action == "select":
            return f"[{self.device}] select {self.subgraph}"
        via = f" through {self.through}" if self.through else ""
        node = f" [{self.node}]" if self.node is not None else ""
        return (f"[{self.device}] {self.action}{node}: subgraph {self.subgraph}, rejected "
                f"{self.rejected}, global condition {self.check}{via}")


def openvino(problem: Problem, *, max_nodes: int = MAX_NODES,
             trace: list[Step] | None = None) -> Solution:
    """Seed 000's subgraph selection; ``trace`` (a list) receives every step."""
    n = problem.n
    if n > max_nodes:
        raise BaselineSkipped(
            f"skipped: too large ({n} nodes > {max_nodes}; the transitive closure is O(N^2) bits "
            f"and every round regrows every subgraph)")
    names = problem.names
    affinity = preferred_devices(problem)
    reach, coreach = _closure(problem)

    def show(mask_or_nodes) -> list[str]:
        nodes = _members(mask_or_nodes) if isinstance(mask_or_nodes, int) else sorted(mask_or_nodes)
        return [names[v] for v in nodes]

    log = trace.append if trace is not None else None

    clusters: list[list[int]] = []
    cluster_device: list[int] = []
    fixed = 0                       # nodes in selected subgraphs: can never be added again
    for d, device in enumerate(problem.devices):
        remaining = [v for v in range(n) if affinity[v] == d]
        while remaining:
            subgraphs: list[list[int]] = []
            covered = 0
            for root in remaining:
                if covered >> root & 1:
                    continue
                if log is not None:
                    log(Step("roots", device.name,
                             subgraph=[names[v] for v in remaining if not covered >> v & 1]))
                sub = _grow(problem, root, d, affinity, fixed, reach, coreach, device.name,
                            show, log)
                subgraphs.append(sub)
                for v in sub:
                    covered |= 1 << v
            best = max(subgraphs, key=len)      # max() keeps the first of equal sizes
            if log is not None:
                log(Step("roots", device.name, subgraph=[]))
                log(Step("subgraphs", device.name, groups=[show(s) for s in subgraphs]))
                log(Step("select", device.name, subgraph=show(best)))
            clusters.append(sorted(best))
            cluster_device.append(d)
            chosen = set(best)
            for v in best:
                fixed |= 1 << v
            remaining = [v for v in remaining if v not in chosen]
            if remaining and log is not None:
                log(Step("remaining", device.name, subgraph=[names[v] for v in remaining]))
    return solution_from_clusters(problem, clusters, cluster_device, NAME,
                                  stats={"rounds": len(clusters)})


def _grow(problem: Problem, root: int, d: int, affinity: list[int], fixed: int,
          reach: list[int], coreach: list[int], device: str, show, log) -> list[int]:
    """Steps 1-7 from one root; returns the subgraph (nodes in the order they were added)."""
    sub = [root]
    in_sub = 1 << root
    rejected: list[int] = []
    rejected_mask = 0

    def check() -> tuple[str, int]:
        down = up = 0
        for v in sub:
            down |= reach[v]
            up |= coreach[v]
        between = down & up & ~in_sub           # nodes on a path between two members
        bad = between & (rejected_mask | fixed)
        if bad:
            return "reject", bad
        if between:
            return "possible", between
        return "ok", 0

    def step(action: str, node: int | None, status: tuple[str, int]) -> None:
        if log is None:
            return              # no trace asked for: building the steps costs more than the search
        log(Step(action, device, None if node is None else problem.names[node], show(sub),
                 show(rejected), status[0], show(status[1]) if status[1] else []))

    step("root", root, check())
    while True:
        cand = _next_adjacent(problem, sub, in_sub | rejected_mask | fixed)
        if cand < 0:
            step("end", None, check())
            return sub
        if affinity[cand] == d:
            sub.append(cand)
            in_sub |= 1 << cand
            action = "merge"
        else:
            rejected.append(cand)
            rejected_mask |= 1 << cand
            action = "failed"
        status = check()
        step(action, cand, status)
        while status[0] == "reject":
            last = sub.pop()                  # never the root: one node alone always passes
            in_sub &= ~(1 << last)
            rejected.append(last)
            rejected_mask |= 1 << last
            status = check()
            step("rollback", last, status)


def _next_adjacent(problem: Problem, sub: list[int], excluded: int) -> int:
    """Step 2's order: most recently added member first, its successors then predecessors."""
    for v in reversed(sub):
        for w in problem.succ[v]:
            if not excluded >> w & 1:
                return w
        for w in problem.pred[v]:
            if not excluded >> w & 1:
                return w
    return -1


def _closure(problem: Problem) -> tuple[list[int], list[int]]:
    """Descendants and ancestors of every node (itself included), as integer bitsets."""
    order = topological_order(problem)
    reach = [0] * problem.n
    coreach = [0] * problem.n
    for v in reversed(order):
        m = 1 << v
        for w in problem.succ[v]:
            m |= reach[w]
        reach[v] = m
    for v in order:
        m = 1 << v
        for u in problem.pred[v]:
            m |= coreach[u]
        coreach[v] = m
    return reach, coreach


def _members(mask: int) -> list[int]:
    out = []
    v = 0
    while mask:
        if mask & 1:
            out.append(v)
        mask >>= 1
        v += 1
    return out
