"""Tensors, constants and data edges of a loaded graph's placeable nodes: the lists a
:class:`~hetero_solve.problem.Problem` is built from.

Two phases, because at 100,000 nodes the per-name Python work is the cost:

1. :func:`name_refs`: every tensor name each node reads or writes, as ids of one table of
   distinct names (string hashing and dict lookups; independent of shapes and folding);
2. :func:`node_structure`: given which nodes are placed and which names are constants,
   everything else from those id arrays with numpy, per-node lists cut out by slicing.

On large models phase 1 (and phase 2 as if nothing folds) runs while the forked shape
inference does (:func:`hetero_solve.model.load.analyse_model`): :func:`structure` then reuses
the whole answer when nothing folded, and phase 1 when folding removed nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain

import numpy as np

from ..measures.arrays import distinct, first_occurrences
from .graph import ModelGraph


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


def name_refs(mg: ModelGraph, nodes: list[int]) -> NameRefs:
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
        # The same pairs flat, for :class:`hetero_solve.measures.ProblemArrays`.
        "flat": {"read_tensor": input_ids, "read_node": readers, "write_tensor": output_ids,
                 "write_node": np.repeat(np.arange(n), write_counts),
                 "const_node": np.repeat(np.arange(n), np.diff(const_ends, prepend=0)),
                 "const_id": const_ids, "edge_from": edge_from, "edge_to": edge_to},
    }


def _first_appearance(ids: np.ndarray) -> np.ndarray:
    """The distinct values of ``ids`` in the order they first appear."""
    return ids[first_occurrences(ids)]


def _cut(flat: np.ndarray, ends: np.ndarray) -> list[list[int]]:
    """``flat`` cut into consecutive runs ending at ``ends`` (cumulative lengths)."""
    values = flat.tolist()
    ends = ends.tolist()
    return [values[a:b] for a, b in zip([0] + ends[:-1], ends)]


@dataclass
class FoldPrediction:
    """What folding will most likely leave, worked out while shapes are inferred (see
    :func:`compute_ahead`); it stands once :func:`.fold.prediction_holds` accepts ``folded``."""

    folded: list[int]                        # the nodes predicted to fold
    rest: list[int]                          # the placeable nodes left
    structure: dict                          # node_structure of ``rest``
    constants: set[str]                      # the constant tensors after folding ``folded``
    folded_readers: list[tuple[int, list[str]]]   # unfolded nodes reading folded outputs: which


def structure(mg: ModelGraph, placeable: list[int]) -> dict:
    """:func:`node_structure` of ``placeable`` with the model's constants (after folding),
    from what :func:`compute_ahead` prepared when it ran."""
    ahead, mg._structure_ahead = mg._structure_ahead, None
    predicted, mg._fold_prediction = mg._fold_prediction, None
    if predicted is not None and predicted.folded == mg.folded and predicted.rest == placeable:
        return predicted.structure      # folding went as predicted: the constants are the same too
    if ahead is not None:
        refs, unfolded = ahead
        if unfolded is not None and not mg.folded and refs.nodes == placeable:
            return unfolded
        if set(placeable) <= set(refs.nodes):
            return node_structure(refs, placeable, mg.constant_tensors)
    return node_structure(name_refs(mg, placeable), placeable, mg.constant_tensors)


def compute_ahead(mg: ModelGraph) -> None:
    """Before shapes are known: the name ids of every non-``Constant`` node, the model
    graph's shape-independent caches, and the structure as folding will most likely leave it
    (the constants known before folding, and the predicted folded outputs).

    When every graph input's shape is static once ``dims`` are given, every shape most likely
    is, and the foldable nodes are predicted as if it were (``mg._fold_prediction``, a
    :class:`FoldPrediction`, checked against the real shapes by
    :func:`.fold.prediction_holds`).  Otherwise nothing is predicted to fold."""
    from .fold import constants_before_folding, find_foldable, folded_outputs, folded_readers
    mg.raw_initializer_bytes()
    mg.initializer_types()
    mg.tensors_needing_a_type()
    nodes = mg.placeable()
    refs = name_refs(mg, nodes)
    constants = constants_before_folding(mg)
    folded = find_foldable(mg, assume_static=True) if _inputs_static(mg) else []
    if folded:
        dropped = set(folded)
        rest = [i for i in nodes if i not in dropped]
        folded_out = folded_outputs(mg, folded)
        constants.update(folded_out)
        mg._fold_prediction = FoldPrediction(folded, rest, node_structure(refs, rest, constants),
                                             constants, folded_readers(mg, dropped, folded_out))
        mg._structure_ahead = (refs, None)
    else:
        mg._structure_ahead = (refs, node_structure(refs, nodes, constants))


def _inputs_static(mg: ModelGraph) -> bool:
    """Does every declared graph input have a static shape once ``mg.dims`` are given?"""
    for vi in mg.model.graph.input:
        t = vi.type
        if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            return False
        for d in t.tensor_type.shape.dim:
            if not (d.HasField("dim_value") or (d.HasField("dim_param") and d.dim_param in mg.dims)):
                return False
    return True
