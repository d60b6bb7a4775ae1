"""The measures of :mod:`.definitions` as numpy passes, for large problems.

Evaluating a partition of a 100,000-node model (its transfer, fallback, part memories,
quotient edges and part boundaries) and validating it walk every tensor and edge; in Python
that is 15-90 ms a walk, and the pipeline takes several (the heuristic compares two passes,
the validator and the manifest read the answer).  Here the problem's lists are turned once
into flat pair arrays ("node v reads tensor t", "u -> v", ...) and each walk becomes a
gather, a compare and a sort over those pairs: a few milliseconds.

The definitions stay :mod:`.definitions`' (docs/problem.md) and the validator's; they
call in here when the problem carries arrays (``Problem.arrays``, which
:func:`problem_arrays` builds: compile does it for problems of at least :data:`MIN_NODES`
nodes; below that size the Python loops are faster than building arrays).  The tests hold
both paths to the same answers.  The arrays describe the problem's graph, tensors and
constants: a problem with arrays must not have those lists changed afterwards (its devices,
``allowed`` lists and objective may be replaced).
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from .problem import Problem

MIN_NODES = 2000
_INT64_LIMIT = 2 ** 62     # with margin: sums of byte counts stay exact in int64


class ProblemArrays:
    """Flat int64 views of a problem's tensors, constants, edges and preferred devices.
    ``flat`` are the pairs as compile's structure step already has them (the pairs
    :func:`flat_pairs` would read: reads and writes in the same order, constants and edges
    possibly in another); without it they are read from the problem's lists."""

    def __init__(self, problem: "Problem", flat: dict[str, np.ndarray] | None = None):
        n = problem.n
        self.n = n
        flat = flat or flat_pairs(problem)
        self.tensor_bytes = np.array(problem.tensor_bytes, dtype=np.int64)
        # The producer of each tensor as an index into part_of extended by one slot: a graph
        # input's producer (-1) reads that slot, which holds -1, a part no node is in.
        self.producer = np.array(problem.tensor_producer, dtype=np.int64)
        self.produced = self.producer >= 0
        self.is_output = np.array(problem.tensor_is_output, dtype=bool)
        # "Node v reads tensor t" pairs in node order, then input position (the boundaries
        # list names in that order); "node v writes tensor t" pairs likewise.
        self.read_tensor = flat["read_tensor"]
        self.read_node = flat["read_node"]
        self.write_tensor = flat["write_tensor"]
        self.write_node = flat["write_node"]
        self.tensor_names = problem.tensor_names
        self.read_producer = self.producer[self.read_tensor]
        self.const_node = flat["const_node"]        # "node v reads constant c" pairs
        self.const_id = flat["const_id"]
        self.const_bytes = np.array(problem.const_bytes, dtype=np.int64)
        self.n_consts = len(problem.const_bytes)
        self.edge_from = flat["edge_from"]          # data edges u -> v
        self.edge_to = flat["edge_to"]
        # Preferred devices, for the ``allowed`` list they were read from (a problem copied
        # with other ``allowed`` lists shares these arrays: see :meth:`_preferred`).
        self._allowed = problem.allowed
        self.preferred = preferred_array(problem.allowed)
        # Value-input edges u -> v (u makes a value-dependent input of v; value_pred[v] holds u).
        self.value_to, self.value_from = _pairs(problem.value_pred)

    def _parts(self, part_of: Sequence[int]) -> np.ndarray:
        """``part_of`` with one extra slot holding -1 (see ``producer``)."""
        out = np.empty(self.n + 1, dtype=np.int64)
        out[:self.n] = part_of
        out[self.n] = -1
        return out

    def _foreign_reads(self, parts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Distinct ``(tensor, part)`` pairs where a part reads a tensor it does not make."""
        reader_part = parts[self.read_node]
        foreign = reader_part != parts[self.read_producer]
        stride = int(parts.max()) + 2
        keys = distinct(self.read_tensor[foreign] * stride + reader_part[foreign])
        return keys // stride, keys % stride

    def transfer(self, part_of: Sequence[int]) -> int:
        """:func:`.definitions.transfer_bytes`."""
        tensor, _ = self._foreign_reads(self._parts(part_of))
        tensor = tensor[self.produced[tensor]]
        return int(self.tensor_bytes[tensor].sum())

    def part_memories(self, part_of: Sequence[int], num_parts: int) -> tuple[list[int], int]:
        """:func:`.definitions.part_memories`."""
        parts = self._parts(part_of)
        mem = np.zeros(num_parts, dtype=np.int64)
        tb = self.tensor_bytes
        # Inputs: each part reading a tensor made elsewhere (or a graph input) holds it.
        tensor, part = self._foreign_reads(parts)
        np.add.at(mem, part, tb[tensor])
        made = tensor[self.produced[tensor]]
        transfer = int(tb[made].sum())
        # Outputs: the maker holds a tensor that another part reads or the graph outputs.
        made_here = np.flatnonzero(self._leaving(made))
        np.add.at(mem, parts[self.producer[made_here]], tb[made_here])
        # Constants: once per part that reads them.
        if len(self.const_id):
            keys = distinct(parts[self.const_node] * self.n_consts + self.const_id)
            np.add.at(mem, keys // self.n_consts, self.const_bytes[keys % self.n_consts])
        return mem.tolist(), transfer

    def _leaving(self, read_elsewhere: np.ndarray) -> np.ndarray:
        """Per tensor: does it leave the part that makes it?  (a graph output, or
        ``read_elsewhere`` lists it: read by a part other than its maker's)."""
        leaves = self.is_output & self.produced
        leaves[read_elsewhere] = True
        return leaves

    def boundaries(self, part_of: Sequence[int]) -> dict[int, tuple[list[str], list[str]]]:
        """:func:`.definitions.part_boundaries` of every part."""
        parts = self._parts(part_of)
        reader_part = parts[self.read_node]
        foreign = np.flatnonzero(reader_part != parts[self.read_producer])
        # A tensor two nodes of a part read is one input of the part, listed at its first read.
        k = int(parts.max()) + 1
        stride = k + 1
        foreign = foreign[first_occurrences(self.read_tensor[foreign] * stride + reader_part[foreign])]
        ins_tensor, ins_part = self.read_tensor[foreign], reader_part[foreign]
        made_elsewhere = ins_tensor[self.produced[ins_tensor]]
        leaving = self._leaving(made_elsewhere)[self.write_tensor]
        outs_tensor = self.write_tensor[leaving]
        outs_part = parts[self.write_node[leaving]]
        names = self.tensor_names
        ins = _group(ins_tensor, ins_part, k, names)
        outs = _group(outs_tensor, outs_part, k, names)
        present = np.flatnonzero(np.bincount(parts[:self.n], minlength=k)).tolist()
        return {q: (ins[q], outs[q]) for q in present}

    def _preferred(self, allowed: Sequence[Sequence[int]]) -> np.ndarray:
        return self.preferred if allowed is self._allowed else preferred_array(allowed)

    def _off_preferred(self, part_of: Sequence[int], part_device: Sequence[int],
                       allowed: Sequence[Sequence[int]]) -> np.ndarray:
        node_device = np.asarray(part_device, dtype=np.int64)[np.asarray(part_of, dtype=np.int64)]
        return node_device != self._preferred(allowed)

    def fallback(self, part_of: Sequence[int], part_device: Sequence[int],
                 allowed: Sequence[Sequence[int]]) -> int:
        """:func:`.definitions.fallback_count` of the partition's node devices."""
        return int(np.count_nonzero(self._off_preferred(part_of, part_device, allowed)))

    def off_preferred(self, part_of: Sequence[int], part_device: Sequence[int],
                      allowed: Sequence[Sequence[int]]) -> list[int]:
        """The nodes not on their preferred device: the only ones whose device the validator
        must look up (the preferred device takes its node)."""
        return np.flatnonzero(self._off_preferred(part_of, part_device, allowed)).tolist()

    def edges_ascend(self) -> bool:
        """Does every edge go from a smaller node id to a larger one (the node ids are then
        a topological order)?"""
        return bool(np.all(self.edge_from < self.edge_to))

    def any_backward_edge(self, part_of: Sequence[int]) -> bool:
        """Does an edge go from a part to a part with a smaller id?"""
        parts = np.asarray(part_of, dtype=np.int64)
        return bool(np.any(parts[self.edge_from] > parts[self.edge_to]))

    def any_value_inside(self, part_of: Sequence[int], enforcing_part: Sequence[bool]) -> bool:
        """Does a value-input edge stay inside a part whose device enforces value inputs?"""
        parts = np.asarray(part_of, dtype=np.int64)
        a, b = parts[self.value_from], parts[self.value_to]
        return bool(np.any((a == b) & np.asarray(enforcing_part, dtype=bool)[b]))

    def quotient_edges(self, part_of: Sequence[int]) -> set[tuple[int, int]]:
        """:func:`.definitions.quotient_edges`."""
        parts = np.asarray(part_of, dtype=np.int64)
        a, b = parts[self.edge_from], parts[self.edge_to]
        cut = a != b
        stride = int(parts.max()) + 1 if len(parts) else 1
        keys = distinct(a[cut] * stride + b[cut])
        return set(zip((keys // stride).tolist(), (keys % stride).tolist()))


def _group(tensors: np.ndarray, parts: np.ndarray, k: int, names: Sequence[str]) -> list[list[str]]:
    """The names of ``tensors`` by part (``k`` lists), in their order within each part."""
    order = np.argsort(parts, kind="stable")
    flat = [names[t] for t in tensors[order].tolist()]
    ends = np.cumsum(np.bincount(parts, minlength=k)).tolist()
    return [flat[a:b] for a, b in zip([0] + ends[:-1], ends)]


def first_occurrences(keys: np.ndarray) -> np.ndarray:
    """The positions where each distinct value of ``keys`` first occurs, in increasing order."""
    order = np.argsort(keys, kind="stable")     # equal keys keep their order: first one first
    ranked = keys[order]
    first = np.ones(len(keys), dtype=bool)
    first[1:] = ranked[1:] != ranked[:-1]
    return np.sort(order[first])


def distinct(keys: np.ndarray) -> np.ndarray:
    """The distinct values of an int array, sorted: ``np.unique(keys)``, which takes 30-50
    times as long on 130,000 int64 keys with numpy 2.4 (50-80 ms against 2 ms for a sort)."""
    keys = np.sort(keys)
    if len(keys) > 1:
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    return keys


def _pairs(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``(i, x)`` for every ``x`` in ``lists[i]``, as two arrays, in list order."""
    count = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    owner = np.repeat(np.arange(len(lists), dtype=np.int64), count)
    return owner, np.fromiter(chain.from_iterable(lists), dtype=np.int64, count=int(count.sum()))


def preferred_array(allowed: Sequence[Sequence[int]]) -> np.ndarray:
    """Each node's preferred device (-1 for a node no device takes: never a part's device)."""
    try:
        return np.fromiter(map(itemgetter(0), allowed), dtype=np.int64, count=len(allowed))
    except IndexError:
        return np.array([a[0] if a else -1 for a in allowed], dtype=np.int64)


def flat_pairs(problem: "Problem") -> dict[str, np.ndarray]:
    """The pairs :class:`ProblemArrays` needs, read from the problem's lists."""
    read_node, read_tensor = _pairs(problem.node_inputs)
    write_node, write_tensor = _pairs(problem.node_outputs)
    const_node, const_id = _pairs(problem.node_consts)
    edge_from, edge_to = _pairs(problem.succ)
    return {"read_tensor": read_tensor, "read_node": read_node, "write_tensor": write_tensor,
            "write_node": write_node, "const_node": const_node,
            "const_id": const_id, "edge_from": edge_from, "edge_to": edge_to}


def problem_arrays(problem: "Problem", flat: dict[str, np.ndarray] | None = None, *,
                   min_nodes: int | None = None) -> ProblemArrays | None:
    """The arrays for ``problem`` (to keep as ``problem.arrays``), or None when the Python
    loops should run: fewer than ``min_nodes`` nodes (default :data:`MIN_NODES`), or byte
    counts so large that int64 sums could overflow.  ``flat``: the pairs, when the caller
    already has them (compile does)."""
    if problem.n < (MIN_NODES if min_nodes is None else min_nodes):
        return None
    most_reads = max(map(len, problem.tensor_consumers), default=0)
    bound = (sum(problem.tensor_bytes) + sum(problem.const_bytes)) * max(1, most_reads)
    if bound >= _INT64_LIMIT:
        return None
    return ProblemArrays(problem, flat)
