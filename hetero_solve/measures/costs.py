"""The cost terms of docs/costs.md, defined once: ``latency`` and ``throughput`` (time per sample).

Both read the problem's cost model (:class:`hetero_solve.costs.CostModel`: node times per
device, a fixed cost per part, each device's link to host memory) and a partition given as
``part_of`` (node -> part), ``part_device`` and, for throughput, ``part_instance``.

* :func:`latency`: one inference, parts run one after another: every node's time on its
  device + every part's fixed cost + every transfer.  A tensor read by parts other than its
  producer's is written once over the producer's link, and read once per such part over that
  part's link (the counting of docs/problem.md: once per consuming part other than the producer's).
* :func:`instance_loads` and :func:`time_per_sample`: a pipeline over device instances: each
  instance's load is its nodes' times + its parts' fixed costs + its transfers out (each
  tensor it makes that another instance reads, once) and in (each tensor it reads that
  another instance makes, once); time per sample is the largest load.  This is Tarnawski et
  al.'s accelerator load (NeurIPS 2020) when the CPU has no link.
* :func:`latency_by_part`: where the latency goes, part by part; :func:`critical_chain`: the
  longest chain of part times through the parts' dependency graph.

>>> from hetero_solve.costs import CostModel, Link
>>> from hetero_solve.problem import make_problem
>>> p = make_problem(3, [(0, 1), (1, 2)], [[0, 1], [0, 1], [1]], tensor_bytes=10)
>>> p.costs = CostModel(node_time=[[1.0, 3.0], [1.0, 3.0], [None, 2.0]],
...                     part_cost=[0.5, 0.0], links=[Link(bandwidth=10.0), None])
>>> latency(p, [0, 0, 1], [0, 1])          # 1 + 1 + 2, part cost 0.5, t1 out 1.0
5.5
>>> instance_loads(p, [0, 0, 1], [0, 1], [0, 0])
{(0, 0): 3.5, (1, 0): 2.0}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from .definitions import crossings, quotient_edges
from .order import part_order

if TYPE_CHECKING:
    from ..costs import CostModel
    from ..problem import Problem


def _costs(problem: "Problem") -> "CostModel":
    costs = getattr(problem, "costs", None)
    if costs is None:
        raise ValueError("the latency and throughput terms need a cost model (Problem.costs)")
    return costs


def latency(problem: "Problem", part_of: Sequence[int], part_device: Sequence[int]) -> float:
    """One inference with parts run one after another (module doc).

    Parameters
    ----------
    problem : Problem
        With ``costs`` set.
    part_of : list of int
        Node -> part.
    part_device : list of int
        Part -> device.

    Returns
    -------
    float
        In the cost model's time unit.
    """
    c = _costs(problem)
    total = sum(c.time(v, part_device[p]) for v, p in enumerate(part_of))
    total += sum(c.part_cost[part_device[p]] for p in set(part_of))
    tb = problem.tensor_bytes
    for t, home, readers in crossings(problem, part_of):
        total += c.tensor_time(part_device[home], t, tb)
        total += sum(c.tensor_time(part_device[q], t, tb) for q in readers)
    return total


def latency_by_part(problem: "Problem", part_of: Sequence[int],
                    part_device: Sequence[int]) -> list[dict[str, float]]:
    """Where :func:`latency` goes, part by part: ``compute`` (its nodes' times), ``fixed``
    (its part cost) and ``transfer`` (tensors it writes out for other parts and reads in from
    them, over its device's link).  The three add up, over the parts, to :func:`latency`.

    >>> from hetero_solve.costs import CostModel, Link
    >>> from hetero_solve.problem import make_problem
    >>> p = make_problem(3, [(0, 1), (1, 2)], [[0, 1], [0, 1], [1]], tensor_bytes=10)
    >>> p.costs = CostModel(node_time=[[1.0, 3.0], [1.0, 3.0], [None, 2.0]],
    ...                     part_cost=[0.5, 0.0], links=[Link(bandwidth=10.0), None])
    >>> latency_by_part(p, [0, 0, 1], [0, 1])
    [{'compute': 2.0, 'fixed': 0.5, 'transfer': 1.0}, {'compute': 2.0, 'fixed': 0.0, 'transfer': 0.0}]
    """
    c = _costs(problem)
    out = [{"compute": 0.0, "fixed": c.part_cost[d], "transfer": 0.0} for d in part_device]
    for v, p in enumerate(part_of):
        out[p]["compute"] += c.time(v, part_device[p])
    tb = problem.tensor_bytes
    for t, home, readers in crossings(problem, part_of):
        out[home]["transfer"] += c.tensor_time(part_device[home], t, tb)
        for q in readers:
            out[q]["transfer"] += c.tensor_time(part_device[q], t, tb)
    return out


def instance_loads(problem: "Problem", part_of: Sequence[int], part_device: Sequence[int],
                   part_instance: Sequence[int]) -> dict[tuple[int, int], float]:
    """Each used device instance's load per sample (module doc).

    Returns
    -------
    dict of (device, instance) to float
        Only instances holding a part, in the order of their first part.
    """
    c = _costs(problem)
    inst = [(part_device[p], part_instance[p]) for p in range(len(part_device))]
    load: dict[tuple[int, int], float] = {}
    for p in sorted(set(part_of)):
        load[inst[p]] = load.get(inst[p], 0.0) + c.part_cost[part_device[p]]
    for v, p in enumerate(part_of):
        load[inst[p]] += c.time(v, part_device[p])
    tb = problem.tensor_bytes
    for t, home, readers in crossings(problem, part_of, inst.__getitem__):
        load[home] += c.tensor_time(home[0], t, tb)
        for g in readers:
            load[g] += c.tensor_time(g[0], t, tb)
    return load


def time_per_sample(problem: "Problem", part_of: Sequence[int], part_device: Sequence[int],
                    part_instance: Sequence[int]) -> float:
    """Throughput's term: the largest instance load (0 without nodes)."""
    return max(instance_loads(problem, part_of, part_device, part_instance).values(), default=0.0)


def critical_chain(problem: "Problem", part_of: Sequence[int],
                   part_device: Sequence[int]) -> tuple[list[int], float]:
    """The parts of the longest chain of part times (:func:`latency_by_part`'s compute, fixed
    cost and transfers) through the parts' dependency graph, in order, and its time.

    Parts that no chain connects could run at the same time on different devices; the chain
    is then a lower bound on one inference (``run`` runs parts one after another: the latency
    is every part's time added up).

    >>> from hetero_solve.costs import CostModel
    >>> from hetero_solve.problem import make_problem
    >>> p = make_problem(3, [(0, 2), (1, 2)], [[0], [0], [0]])
    >>> p.costs = CostModel(node_time=[[1.0], [3.0], [2.0]], part_cost=[0.0], links=[None])
    >>> critical_chain(p, [0, 1, 2], [0, 0, 0])
    ([1, 2], 5.0)
    """
    k = len(part_device)
    if not k:
        return [], 0.0
    times = [sum(row.values()) for row in latency_by_part(problem, part_of, part_device)]
    edges = quotient_edges(problem, part_of)
    after: list[list[int]] = [[] for _ in range(k)]
    for a, b in sorted(edges):
        after[a].append(b)
    best = list(times)
    came = [-1] * k
    for q in part_order(problem, part_of, k, edges=edges) or range(k):
        for r in after[q]:
            if best[q] + times[r] > best[r]:
                best[r], came[r] = best[q] + times[r], q
    end = max(range(k), key=lambda q: (best[q], -q))
    chain = [end]
    while came[chain[-1]] >= 0:
        chain.append(came[chain[-1]])
    return chain[::-1], best[end]
