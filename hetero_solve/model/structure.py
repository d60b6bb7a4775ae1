"""Tensors, constants and data edges of a loaded graph's placeable nodes: the lists a
:class:`~hetero_solve.problem.Problem` is built from.

On large models they are computed ahead, while the forked shape inference runs
(:func:`hetero_solve.model.load.analyse_model`), with the constants known before inference;
:func:`structure` reuses that answer when folding changed nothing.
"""

from __future__ import annotations

from itertools import chain, compress

import numpy as np

from .graph import ModelGraph


def structure(mg: ModelGraph, placeable: list[int]) -> dict:
    """:func:`node_structure` of ``placeable`` with the model's constants (after folding)."""
    ahead = mg._structure_ahead
    mg._structure_ahead = None
    if ahead is not None and not mg.folded and ahead[0] == placeable:
        return ahead[1]
    return node_structure(mg, placeable, mg.constant_tensors)


def compute_ahead(mg: ModelGraph, constants: set[str]) -> None:
    """Compute the structure before shapes are known, as if nothing folds (the usual case for
    models without shape chains), for :func:`structure` to reuse."""
    placeable = mg.placeable()
    mg._structure_ahead = (placeable, node_structure(mg, placeable, constants))


def node_structure(mg: ModelGraph, placeable: list[int], const: set[str]) -> dict:
    """Tensors, constants and data edges.  At 100,000 nodes the per-edge Python overhead is
    the cost, so the work is done on flat lists with C-level passes (``map``, ``compress``,
    numpy), and per-node lists are cut from them by slicing."""
    has_sub = mg.has_subgraph
    inputs = mg.inputs
    reads = [inputs[i] for i in placeable]
    for v, i in enumerate(placeable):
        ins = reads[v]
        if has_sub[i] or "" in ins or len(set(ins)) < len(ins):
            reads[v] = mg.all_inputs(i)    # outer-scope reads, no blanks, no repeats
    outs = [mg.outputs[i] for i in placeable]
    flat_outs = [o for o in chain.from_iterable(outs) if o]
    out_counts = [len(os_) - os_.count("") for os_ in outs]

    flat = list(chain.from_iterable(reads))
    is_const = list(map(const.__contains__, flat))
    not_const = [not c for c in is_const]
    c_names = list(dict.fromkeys(compress(flat, is_const)))
    t_names = list(dict.fromkeys(chain(compress(flat, not_const), flat_outs)))
    cid = dict(zip(c_names, range(len(c_names))))
    tid = dict(zip(t_names, range(len(t_names))))
    const_ids = list(map(cid.__getitem__, compress(flat, is_const)))
    input_ids = list(map(tid.__getitem__, compress(flat, not_const)))
    output_ids = list(map(tid.__getitem__, flat_outs))

    # Where each node's run starts in the flat lists.
    read_ends = np.cumsum([len(r) for r in reads], dtype=np.int64)
    consts_before = np.concatenate(([0], np.cumsum(is_const, dtype=np.int64)))
    const_ends = consts_before[read_ends]
    input_ends = read_ends - const_ends
    node_consts = _cut(const_ids, const_ends)
    node_inputs = _cut(input_ids, input_ends)
    node_outputs = _cut(output_ids, np.cumsum(out_counts))

    n, T = len(placeable), len(t_names)
    producer = np.full(T, -1, dtype=np.int64)
    producer[np.asarray(output_ids, dtype=np.int64)] = np.repeat(np.arange(n), out_counts)
    readers = np.repeat(np.arange(n), np.diff(input_ends, prepend=0))
    read_tensors = np.asarray(input_ids, dtype=np.int64)
    order = np.argsort(read_tensors, kind="stable")          # by tensor, then node
    consumers = _cut(readers[order].tolist(), np.cumsum(np.bincount(read_tensors, minlength=T)))
    # Data edges: (producer, reader) pairs, distinct, sorted by reader then producer.
    src = producer[read_tensors]
    made = src >= 0
    pairs = np.unique(readers[made] * n + src[made])
    edge_to, edge_from = pairs // n, pairs % n
    pred = _cut(edge_from.tolist(), np.cumsum(np.bincount(edge_to, minlength=n)))
    order = np.argsort(edge_from, kind="stable")               # by producer, then reader
    succ = _cut(edge_to[order].tolist(), np.cumsum(np.bincount(edge_from, minlength=n)))
    return {"tensor_names": t_names, "const_names": c_names, "node_consts": node_consts,
            "node_inputs": node_inputs, "node_outputs": node_outputs,
            "tensor_producer": producer.tolist(), "tensor_consumers": consumers, "pred": pred,
            "succ": succ}


def _cut(flat: list, ends) -> list[list]:
    """``flat`` cut into consecutive runs ending at ``ends`` (cumulative lengths)."""
    ends = ends.tolist() if hasattr(ends, "tolist") else list(ends)
    return [flat[a:b] for a, b in zip([0] + ends[:-1], ends)]
