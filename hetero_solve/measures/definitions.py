"""docs/problem.md, defined once: what a partition costs and where its parts meet.

A partition is given as ``part_of`` (node -> part id) and, where devices matter,
``part_device`` (part -> device index).  Each function here is the readable definition; when
the problem carries numpy arrays (``problem.arrays``, large compiled problems) the same
measure is computed by :class:`~.arrays.ProblemArrays`, which the tests hold to these loops.

* :func:`part_memory`: memory of one part (docs/problem.md): the distinct constants it reads,
  plus its input tensors (read inside, made outside or a graph input), plus its output tensors
  (made inside, read outside or a graph output).  Tensors made and read inside cost nothing.
* :func:`part_memories`: every part's memory and the transfer, in one pass.
* :func:`transfer_bytes` (docs/problem.md): each produced tensor once per consuming part other than
  its producer's; graph inputs and constants do not count.
* :func:`fallback_count` (docs/problem.md): nodes not on their preferred device.
* :func:`quotient_edges` (docs/problem.md, condition 3): part pairs joined by a data edge.
* :func:`crossings`: each produced tensor that leaves its part, with its producer's part and
  the other parts reading it: the one walk every transfer-priced measure builds on (latency,
  throughput, the heuristics' link times, the pictures' edge labels).
* :func:`part_boundaries`: the input and output tensor names of each part (the tensors
  :func:`part_memory` counts; the sub-models' inputs and outputs).

>>> from hetero_solve.problem import make_problem
>>> p = make_problem(3, [(0, 1), (1, 2)], [[0], [0], [1]], tensor_bytes=[10, 20, 30],
...                  const_bytes=[5, 0, 0])
>>> part_memory(p, [0, 1])        # constant 5 + t1 read by node 2 outside (t0 is internal)
25
>>> part_memories(p, [0, 0, 1], 2), transfer_bytes(p, [0, 0, 1])
(([25, 50], 20), 20)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence, TypeVar

if TYPE_CHECKING:
    from ..problem import Problem

K = TypeVar("K")


def part_memory(problem: "Problem", nodes: Iterable[int], member: Sequence[int] | None = None,
                part: int | None = None) -> int:
    """docs/problem.md: distinct constants + input tensors + output tensors of one part.

    Parameters
    ----------
    problem : Problem
    nodes : iterable of int
        The part's nodes.
    member, part : optional
        Part membership of every node (``member[v] == part``); without them ``nodes`` alone
        is the part.

    Returns
    -------
    int
        Bytes.
    """
    nodes = list(nodes)
    if member is None:
        inside = set(nodes)
        is_in = inside.__contains__
    else:
        is_in = lambda v: member[v] == part  # noqa: E731
    consts: set[int] = set()
    tensors_in: set[int] = set()
    tensors_out: set[int] = set()
    prod = problem.tensor_producer
    for v in nodes:
        consts.update(problem.node_consts[v])
        for t in problem.node_inputs[v]:
            p = prod[t]
            if p < 0 or not is_in(p):
                tensors_in.add(t)
        for t in problem.node_outputs[v]:
            if problem.tensor_is_output[t] or any(not is_in(c) for c in problem.tensor_consumers[t]):
                tensors_out.add(t)
    tb = problem.tensor_bytes
    return (sum(problem.const_bytes[c] for c in consts) + sum(tb[t] for t in tensors_in)
            + sum(tb[t] for t in tensors_out))


def part_memories(problem: "Problem", part_of: Sequence[int], num_parts: int) -> tuple[list[int], int]:
    """Memory of every part and the transfer, in one O(V + E) pass (the same definitions as
    :func:`part_memory` and :func:`transfer_bytes`).

    Returns
    -------
    (list of int, int)
        Bytes per part (``num_parts`` entries), and the transfer in bytes.
    """
    if problem.arrays is not None:
        return problem.arrays.part_memories(part_of, num_parts)
    mem = [0] * num_parts
    cb = problem.const_bytes
    seen_const: set[tuple[int, int]] = set()
    for v, consts in enumerate(problem.node_consts):
        if consts:
            p = part_of[v]
            for c in consts:
                key = (p, c)
                if key not in seen_const:
                    seen_const.add(key)
                    mem[p] += cb[c]
    transfer = 0
    tb = problem.tensor_bytes
    is_out = problem.tensor_is_output
    consumers = problem.tensor_consumers
    for t, u in enumerate(problem.tensor_producer):
        b = tb[t]
        cons = consumers[t]
        if u < 0:
            if len(cons) == 1:
                mem[part_of[cons[0]]] += b
            else:
                for q in {part_of[c] for c in cons}:
                    mem[q] += b
            continue
        home = part_of[u]
        if len(cons) == 1:
            q = part_of[cons[0]]
            if q != home:
                mem[q] += b
                mem[home] += b
                transfer += b
            elif is_out[t]:
                mem[home] += b
            continue
        others = {part_of[c] for c in cons}
        others.discard(home)
        if others or is_out[t]:
            mem[home] += b
        for q in others:
            mem[q] += b
        transfer += b * len(others)
    return mem, transfer


def open_figures(problem: "Problem", part_of: Sequence[int], num_parts: int,
                 open_names: Iterable[str]) -> tuple[list[int], int]:
    """Which figures count a tensor or constant of unknown size (``open_names``; docs/problem.md
    counts an unknown dimension as 1, so such a figure is a lower bound): the parts whose
    memory holds one, and how many crossings of one the transfer counts.  The same
    definitions as :func:`part_memories`, on one byte per open tensor and none otherwise."""
    import dataclasses
    names = set(open_names)
    if not names:
        return [], 0
    marks = dataclasses.replace(
        problem, arrays=None,
        tensor_bytes=[1 if x in names else 0 for x in problem.tensor_names],
        const_bytes=[1 if x in names else 0 for x in problem.const_names])
    held, crossings = part_memories(marks, part_of, num_parts)
    return [k for k, n in enumerate(held) if n], crossings


def crossings(problem: "Problem", part_of: Sequence[int], where: Callable[[int], K] | None = None
              ) -> Iterator[tuple[int, K, list[K]]]:
    """Each produced tensor read outside its producer's place, as ``(tensor, home, readers)``:
    ``home`` the producer's place, ``readers`` the other places reading it, sorted.  A place
    is a part, or ``where(part)`` (a part's device instance, say).  Tensors in increasing
    order; graph inputs and constants never cross (nothing makes them)."""
    consumers = problem.tensor_consumers
    for t, u in enumerate(problem.tensor_producer):
        if u < 0:
            continue
        cons = consumers[t]
        if where is None:
            home = part_of[u]
            if len(cons) == 1:      # most tensors: no set needed
                q = part_of[cons[0]]
                if q != home:
                    yield t, home, [q]
                continue
            readers = {part_of[r] for r in cons}
        else:
            home = where(part_of[u])
            readers = {where(part_of[r]) for r in cons}
        readers.discard(home)
        if readers:
            yield t, home, sorted(readers)


def transfer_bytes(problem: "Problem", part_of: Sequence[int]) -> int:
    """docs/problem.md: each produced tensor counts once per consuming part other than its
    producer's; graph inputs and constants do not count."""
    if problem.arrays is not None:
        return problem.arrays.transfer(part_of)
    tb = problem.tensor_bytes
    return sum(tb[t] * len(readers) for t, _, readers in crossings(problem, part_of))


def fallback_count(problem: "Problem", part_of: Sequence[int], part_device: Sequence[int]) -> int:
    """docs/problem.md: nodes not on their preferred device (``allowed[v][0]``)."""
    if problem.arrays is not None:
        return problem.arrays.fallback(part_of, part_device, problem.allowed)
    return sum(1 for v, p in enumerate(part_of) if part_device[p] != problem.allowed[v][0])


def off_preferred(problem: "Problem", part_of: Sequence[int], part_device: Sequence[int]) -> list[int]:
    """The nodes :func:`fallback_count` counts, in increasing order."""
    if problem.arrays is not None:
        return problem.arrays.off_preferred(part_of, part_device, problem.allowed)
    return [v for v, p in enumerate(part_of) if part_device[p] != problem.allowed[v][0]]


def quotient_edges(problem: "Problem", part_of: Sequence[int]) -> set[tuple[int, int]]:
    """Edges ``P -> Q`` between different parts: a node of ``P`` makes a tensor a node of
    ``Q`` reads (docs/problem.md, condition 3)."""
    if problem.arrays is not None:
        return problem.arrays.quotient_edges(part_of)
    edges = set()
    for u, succ in enumerate(problem.succ):
        pu = part_of[u]
        for v in succ:
            pv = part_of[v]
            if pu != pv:
                edges.add((pu, pv))
    return edges


def boundary_tensors(problem: "Problem", part_of: Sequence[int], nodes: Iterable[int] | None = None
                     ) -> Iterator[tuple[int, bool, int]]:
    """The tensors a part holds at its edge, as ``(part, is_input, tensor)``, for the parts of
    ``nodes`` (default: all), in node order, then position: an input of a part that reads it
    and does not make it (once per part), an output of the part that makes it when it is a
    graph output or another part reads it."""
    prod = problem.tensor_producer
    is_out, consumers = problem.tensor_is_output, problem.tensor_consumers
    node_inputs, node_outputs = problem.node_inputs, problem.node_outputs
    seen: set[tuple[int, int]] = set()
    for v in range(len(part_of)) if nodes is None else nodes:
        p = part_of[v]
        for t in node_inputs[v]:
            u = prod[t]
            if (u < 0 or part_of[u] != p) and (t, p) not in seen:
                seen.add((t, p))
                yield p, True, t
        for t in node_outputs[v]:
            cons = consumers[t]
            if is_out[t] or (part_of[cons[0]] != p if len(cons) == 1 else
                             any(part_of[c] != p for c in cons)):
                yield p, False, t


def part_boundaries(problem: "Problem", part_of: Sequence[int], nodes: Iterable[int] | None = None
                    ) -> dict[int, tuple[list[str], list[str]]]:
    """Input and output tensor names of every part the ``nodes`` (default: all) belong to, in
    one pass (:func:`boundary_tensors`).  Names come in node order, then position; a tensor
    read by several nodes of a part is listed once; a part of ``nodes`` with no boundary
    gets two empty lists."""
    if nodes is None and problem.arrays is not None:
        return problem.arrays.boundaries(part_of)
    nodes = range(len(part_of)) if nodes is None else list(nodes)
    out: dict[int, tuple[list[str], list[str]]] = {part_of[v]: ([], []) for v in nodes}
    names = problem.tensor_names
    for p, is_input, t in boundary_tensors(problem, part_of, nodes):
        out[p][0 if is_input else 1].append(names[t])
    return out
