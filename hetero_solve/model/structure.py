"""Tensors, constants and data edges of a loaded graph's placeable nodes: the lists a
:class:`~hetero_solve.problem.Problem` is built from.

Two phases, because at 100,000 nodes the per-name Python work is the cost:

1. :func:`name_refs`: every tensor name each node reads or writes, as ids of one table of
   distinct names (string hashing and dict lookups; independent of shapes and folding);
2. :func:`node_structure`: given which nodes are placed and which names are constants,
   everything else from those id arrays with numpy, per-node lists cut out by slicing.

On large models phase 1 runs while the forked shape inference does
(:func:`hetero_solve.model.load.load_model`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain

import numpy as np

from ..measures.arrays import distinct, first_occurrences
from .graph import GraphLists, ModelGraph


@dataclass
class NameRefs:
    """The tensors of ``nodes`` as ids into ``names``: node ``k``'s reads are the next
    ``read_counts[k]`` entries of ``reads`` (distinct, outer-scope reads included, no blanks),
    its outputs the next ``write_counts[k]`` of ``writes`` (no blanks)."""

    nodes: list[int]
    names: list[str]
    reads: np.ndarray
    read_counts: np.ndarray
    writes: np.ndarray
    write_counts: np.ndarray


def name_refs(mg: GraphLists, nodes: list[int]) -> NameRefs:
    has_sub = mg.has_subgraph
    inputs = mg.inputs
    reads = [inputs[i] for i in nodes]
    for k, i in enumerate(nodes):
        ins = reads[k]
        if has_sub[i] or "" in ins or len(set(ins)) < len(ins):
            reads[k] = mg.all_inputs(i)    # outer-scope reads, no blanks, no repeats
    outs = [mg.outputs[i] for i in nodes]
    flat_reads = list(chain.from_iterable(reads))
    flat_writes = [o for o in chain.from_iterable(outs) if o]
    names = list(dict.fromkeys(chain(flat_reads, flat_writes)))
    ids = dict(zip(names, range(len(names))))
    return NameRefs(
        nodes=nodes, names=names,
        reads=np.fromiter(map(ids.__getitem__, flat_reads), np.int64, len(flat_reads)),
        read_counts=np.fromiter(map(len, reads), np.int64, len(reads)),
        writes=np.fromiter(map(ids.__getitem__, flat_writes), np.int64, len(flat_writes)),
        write_counts=np.fromiter((len(os_) - os_.count("") for os_ in outs), np.int64, len(outs)))


def node_structure(refs: NameRefs, placeable: list[int], const: set[str]) -> dict:
    """Tensors (non-constant, numbered by first appearance: reads in node order, then
    outputs), constants (numbered by first appearance among reads), per-node lists, producer
    and consumers, and deduplicated data edges, for ``placeable`` (a subsequence of
    ``refs.nodes``) when ``const`` are the constant names."""
    reads, read_counts = refs.reads, refs.read_counts
    writes, write_counts = refs.writes, refs.write_counts
    if len(placeable) != len(refs.nodes):   # folded nodes dropped
        keep = np.isin(np.asarray(refs.nodes, dtype=np.int64), np.asarray(placeable, dtype=np.int64))
        reads, read_counts = reads[np.repeat(keep, read_counts)], read_counts[keep]
        writes, write_counts = writes[np.repeat(keep, write_counts)], write_counts[keep]
    names = refs.names
    is_const = np.fromiter(map(const.__contains__, names), bool, len(names))

    read_const = is_const[reads]
    const_reads = reads[read_const]
    input_reads = reads[~read_const]
    c_order = _first_appearance(const_reads)
    t_order = _first_appearance(np.concatenate([input_reads, writes]))
    local = np.empty(len(names), dtype=np.int64)
    local[c_order] = np.arange(len(c_order))
    const_ids = local[const_reads]
    local[t_order] = np.arange(len(t_order))
    input_ids, output_ids = local[input_reads], local[writes]

    read_ends = np.cumsum(read_counts)
    consts_before = np.concatenate(([0], np.cumsum(read_const, dtype=np.int64)))
    const_ends = consts_before[read_ends]
    input_ends = read_ends - const_ends

    n, T = len(read_counts), len(t_order)
    producer = np.full(T, -1, dtype=np.int64)
    producer[output_ids] = np.repeat(np.arange(n), write_counts)
    readers = np.repeat(np.arange(n), np.diff(input_ends, prepend=0))
    by_tensor = np.argsort(input_ids, kind="stable")                 # by tensor, then node
    # Data edges: (producer, reader) pairs, distinct, sorted by reader then producer.
    src = producer[input_ids]
    made = src >= 0
    pairs = distinct(readers[made] * max(n, 1) + src[made])
    edge_to, edge_from = pairs // max(n, 1), pairs % max(n, 1)
    by_producer = np.argsort(edge_from, kind="stable")               # by producer, then reader
    return {
        "tensor_names": [names[g] for g in t_order.tolist()],
        "const_names": [names[g] for g in c_order.tolist()],
        "node_consts": _cut(const_ids, const_ends),
        "node_inputs": _cut(input_ids, input_ends),
        "node_outputs": _cut(output_ids, np.cumsum(write_counts)),
        "tensor_producer": producer.tolist(),
        "tensor_consumers": _cut(readers[by_tensor], np.cumsum(np.bincount(input_ids, minlength=T))),
        "pred": _cut(edge_from, np.cumsum(np.bincount(edge_to, minlength=n))),
        "succ": _cut(edge_to[by_producer], np.cumsum(np.bincount(edge_from, minlength=n))),
    }


def _first_appearance(ids: np.ndarray) -> np.ndarray:
    """The distinct values of ``ids`` in the order they first appear."""
    return ids[first_occurrences(ids)]


def _cut(flat: np.ndarray, ends: np.ndarray) -> list[list[int]]:
    """``flat`` cut into consecutive runs ending at ``ends`` (cumulative lengths)."""
    values = flat.tolist()
    ends = ends.tolist()
    return [values[a:b] for a, b in zip([0] + ends[:-1], ends)]


def structure(mg: ModelGraph, placeable: list[int]) -> dict:
    """:func:`node_structure` of ``placeable`` with the model's constants (after folding),
    from the name ids loading computed (``mg.refs``) when it did."""
    refs = mg.refs
    if refs is None or not set(placeable) <= set(refs.nodes):
        refs = name_refs(mg, placeable)
    return node_structure(refs, placeable, mg.constant_tensors)
