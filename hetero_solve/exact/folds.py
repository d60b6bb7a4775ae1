"""Optional folds: which foldable nodes to place instead (SPEC section 1: they *may* be folded).

Compile folds every foldable node and lists in ``Problem.fold_options`` the ones whose folding
can cost memory (:class:`~hetero_solve.problem.FoldOption`).  :func:`unfold` is the problem
with some of them placed: each becomes a node that reads its constant inputs, and each of its
outputs becomes a tensor (same bytes) read by the nodes that read the constant before.  So a
solution of the unfolded problem is a partition of the model with those nodes in parts, and
everything downstream (validator, measures, export) reads it like any other problem.

Which to place (:func:`candidates`): folding an option ``f`` turns its outputs into constants
that every part reading them holds; placing ``f`` puts its constant inputs in ``f``'s part
instead.  That can only save memory when ``f`` and a reader can share a part and ``f``'s
inputs cost less there than its outputs: its inputs are constants some placed node on a
memory-limited device reads too (a tied embedding: ``Transpose(W)`` next to the ``Gather``
that reads ``W``), or they are smaller than its outputs (``Expand``, ``Tile``, a widening
``Cast``).  :func:`hetero_solve.exact.refine` solves both problems, as compiled and with the
candidates placed, and keeps the better answer; ``stats["unfolded"]`` names the placed ones.

>>> from hetero_solve.problem import Device, FoldOption, make_problem
>>> p = make_problem(2, [(0, 1)], [[0, 1]] * 2, [Device("NPU", memory=100), "CPU"],
...                  const_bytes=[40, 0])                      # node 0 reads W (40 bytes)
>>> p.const_names.append("WT"); p.const_bytes.append(40); p.node_consts[1].append(1)
>>> p.fold_options = [FoldOption(7, "transpose", "Transpose", (0, 1), (0,), (1,))]
>>> q = unfold(p, [0])
>>> q.n, q.names[2], q.node_consts[2], q.node_consts[1], q.succ[2]
(3, 'transpose', [0], [], [1])
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from ..problem import Problem


def closure(problem: Problem, chosen: Iterable[int]) -> list[int]:
    """``chosen`` options and every option they require, sorted."""
    out: set[int] = set()
    stack = list(chosen)
    while stack:
        k = stack.pop()
        if k in out:
            continue
        out.add(k)
        stack.extend(problem.fold_options[k].requires)
    return sorted(out)


def unfold(problem: Problem, chosen: Iterable[int]) -> Problem:
    """The problem with the options ``chosen`` (and those they require) placed (module doc).
    New nodes come after the problem's; ``meta["folded"]`` loses them, ``meta["unfolded"]``
    lists their graph indices, and ``fold_options`` is empty (the choice is made)."""
    ks = closure(problem, chosen)
    if not ks:
        return problem
    opts = [problem.fold_options[k] for k in ks]
    n0 = problem.n
    node_of = {k: n0 + j for j, k in enumerate(ks)}
    made = {c: node_of[k] for k, o in zip(ks, opts) for c in o.outputs}   # const -> new node
    names, op_types = list(problem.names), list(problem.op_types)
    allowed, pinned = list(problem.allowed), list(problem.pinned)
    graph_index = list(problem.graph_index)
    succ = [list(s) for s in problem.succ]
    pred = [list(s) for s in problem.pred]
    value_pred = [list(s) for s in problem.value_pred]
    node_consts = [list(c) for c in problem.node_consts]
    node_inputs = [list(t) for t in problem.node_inputs]
    node_outputs = [list(t) for t in problem.node_outputs]
    t_names, t_bytes = list(problem.tensor_names), list(problem.tensor_bytes)
    t_prod = list(problem.tensor_producer)
    t_cons = [list(c) for c in problem.tensor_consumers]
    t_out = list(problem.tensor_is_output)
    for k, o in zip(ks, opts):
        names.append(o.name)
        op_types.append(o.op_type)
        allowed.append(tuple(o.allowed))
        pinned.append(-1)
        graph_index.append(o.graph_index)
        for lst in (succ, pred, value_pred, node_inputs, node_outputs):
            lst.append([])
        node_consts.append([c for c in o.const_inputs if c not in made])
    tensor_of: dict[int, int] = {}
    for c, v in made.items():       # each output constant becomes a tensor made by v
        tensor_of[c] = len(t_names)
        t_names.append(problem.const_names[c])
        t_bytes.append(problem.const_bytes[c])
        t_prod.append(v)
        t_cons.append([])
        t_out.append(False)
        node_outputs[v].append(tensor_of[c])
    value_of = {}
    for k, o in zip(ks, opts):
        for r in o.value_readers:
            value_of.setdefault(node_of[k], set()).add(r)
    for r in range(len(names)):
        keep = []
        for c in node_consts[r]:
            v = made.get(c)
            if v is None or v == r:
                keep.append(c)
                continue
            t = tensor_of[c]
            if t not in node_inputs[r]:
                node_inputs[r].append(t)
                t_cons[t].append(r)
            if r not in succ[v]:
                succ[v].append(r)
                pred[r].append(v)
            if r in value_of.get(v, ()) and v not in value_pred[r]:
                value_pred[r].append(v)
        node_consts[r] = keep
    # constant inputs of new nodes that are outputs of other new nodes
    for k, o in zip(ks, opts):
        r = node_of[k]
        for c in o.const_inputs:
            v = made.get(c)
            if v is None:
                continue
            t = tensor_of[c]
            if t not in node_inputs[r]:
                node_inputs[r].append(t)
                t_cons[t].append(r)
            if r not in succ[v]:
                succ[v].append(r)
                pred[r].append(v)
    placed = {o.graph_index for o in opts}
    meta = dict(problem.meta)
    meta["folded"] = [g for g in problem.meta.get("folded", []) if g not in placed]
    meta["unfolded"] = sorted(placed)
    return dataclasses.replace(
        problem, names=names, op_types=op_types, allowed=allowed, succ=succ, pred=pred,
        value_pred=value_pred, tensor_names=t_names, tensor_bytes=t_bytes,
        tensor_producer=t_prod, tensor_consumers=t_cons, tensor_is_output=t_out,
        node_inputs=node_inputs, node_outputs=node_outputs, node_consts=node_consts,
        pinned=pinned, graph_index=graph_index, meta=meta, arrays=None, fold_options=[])


def candidates(problem: Problem, memory_devices: Iterable[int]) -> list[int]:
    """Options whose placing can save memory (module doc), closed under ``requires``."""
    mem = set(memory_devices)
    if not mem or not problem.fold_options:
        return []
    read_on_mem: set[int] = set()
    for v in range(problem.n):
        if mem.intersection(problem.allowed[v]):
            read_on_mem.update(problem.node_consts[v])
    cb = problem.const_bytes
    out = []
    for k, o in enumerate(problem.fold_options):
        if not mem.intersection(o.allowed):
            continue
        inputs = sum(cb[c] for c in o.const_inputs)
        outputs = sum(cb[c] for c in o.outputs)
        if read_on_mem.intersection(o.const_inputs) or inputs < outputs:
            out.append(k)
    out = closure(problem, out)
    # an option that requires one no device takes cannot be placed
    return [k for k in out if all(problem.fold_options[j].allowed
                                  for j in closure(problem, [k]))]
