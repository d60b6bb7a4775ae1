"""Optional folds: which foldable nodes to place instead (docs/exact.md, "Optional folds").

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
>>> q, _ = unfold(p, [0])
>>> q.n, q.names[2], q.node_consts[2], q.node_consts[1], q.succ[2]
(3, 'transpose', [0], [], [1])
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from ..budget import Budget
from ..errors import InfeasibleError
from ..fitting.bounds import kept_packing, memory_bounds
from ..fitting.devices import device_sets
from ..fitting.floors import binding_devices
from ..measures import problem_arrays
from ..nodemap import NodeMap, remap
from ..problem import Problem
from ..solution import Solution, evaluate, normalize, objective_key
from .bounds import lower_bounds
from .explain import with_folds


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


def unfold(problem: Problem, chosen: Iterable[int]) -> tuple[Problem, NodeMap]:
    """The problem with the options ``chosen`` (and those they require) placed (module doc),
    and its :class:`~hetero_solve.nodemap.NodeMap` (every node kept, the placed options added
    after them: folded, they cost nothing, and so they cost nothing placed).
    ``info.folded`` loses them, ``info.unfolded`` lists their graph indices, and
    ``fold_options`` is empty (the choice is made)."""
    ks = closure(problem, chosen)
    if not ks:
        return problem, NodeMap.extended(problem.n, 0)
    opts = [problem.fold_options[k] for k in ks]
    n0 = problem.n
    node_of = {k: n0 + j for j, k in enumerate(ks)}
    made = {c: node_of[k] for k, o in zip(ks, opts) for c in o.outputs}   # const -> new node
    names = list(problem.names)
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
    value_of: dict[int, set[int]] = {}     # new node -> nodes reading it as a value input
    for k, o in zip(ks, opts):
        value_of[node_of[k]] = set(o.value_readers) | {node_of[j] for j in o.value_requires
                                                        if j in node_of}
    for r in range(len(names)):
        keep = []
        for c in node_consts[r]:
            v = made.get(c)
            if v is None or v == r:
                keep.append(c)
                continue
            _wire(r, tensor_of[c], v, succ, pred, value_pred, node_inputs, t_cons,
                  value_of[v])
        node_consts[r] = keep
    # constant inputs of new nodes that are outputs of other new nodes
    for k, o in zip(ks, opts):
        r = node_of[k]
        for c in o.const_inputs:
            v = made.get(c)
            if v is None:
                continue
            _wire(r, tensor_of[c], v, succ, pred, value_pred, node_inputs, t_cons,
                  value_of[v])
    placed = {o.graph_index for o in opts}
    info = dataclasses.replace(problem.info, unfolded=sorted(placed),
                               folded=[g for g in problem.info.folded if g not in placed])
    nmap = NodeMap.extended(n0, len(ks), label="placed fold",
                            tensors=tuple(range(len(problem.tensor_names)))
                            + (None,) * (len(t_names) - len(problem.tensor_names)))
    structure = dataclasses.replace(
        problem, names=names, succ=succ, pred=pred,
        value_pred=value_pred, tensor_names=t_names, tensor_bytes=t_bytes,
        tensor_producer=t_prod, tensor_consumers=t_cons, tensor_is_output=t_out,
        node_inputs=node_inputs, node_outputs=node_outputs, node_consts=node_consts,
        info=info, arrays=None, fold_options=[])
    times = problem.costs.option_time if problem.costs is not None else None
    added = {node_of[k]: {"name": o.name, "op_type": o.op_type, "allowed": o.allowed,
                          "graph_index": o.graph_index,
                          "time": times[k] if times is not None else None}
             for k, o in zip(ks, opts)}
    return remap(problem, structure, nmap, added=added), nmap


def _wire(r: int, t: int, v: int, succ, pred, value_pred, node_inputs, t_cons,
          value_readers) -> None:
    """Node ``r`` reads tensor ``t`` made by the placed option's node ``v``: the input, the
    edge, and a value edge when ``r`` reads it as a value input."""
    if t not in node_inputs[r]:
        node_inputs[r].append(t)
        t_cons[t].append(r)
    if r not in succ[v]:
        succ[v].append(r)
        pred[r].append(v)
    if r in value_readers and v not in value_pred[r]:
        value_pred[r].append(v)


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


def named(problem: Problem, names: Iterable[str]) -> list[int]:
    """The options (indices into ``fold_options``) whose node is among ``names``: a map that
    puts a foldable node in a part places it (``partition.json``'s ``unfolded``)."""
    wanted = set(names)
    return [k for k, o in enumerate(problem.fold_options) if o.name in wanted]


def unplaced_requirements(problem: Problem, chosen: Iterable[int]) -> list[tuple[int, int]]:
    """``(option, reader)`` pairs where ``chosen`` places an option but not a foldable reader
    of its outputs: the reader's input would no longer be constant, so it must be placed too
    (:func:`closure`).  Empty when ``chosen`` is closed."""
    ks = set(chosen)
    return [(k, j) for k in sorted(ks) for j in problem.fold_options[k].requires if j not in ks]


def relaxed(problem: Problem) -> Problem:
    """A problem every fold choice's answers bound from above (module doc, *Bounds over every
    fold choice*): ``problem`` with each option's output constants replaced, in the nodes
    that read them, by the cheaper of what placing or folding the option costs there.

    A part holding a reader of an output ``c`` of an option ``f`` holds, under any fold
    choice, the constant or tensor ``c``, or ``f`` with its inputs.  So ``c`` is read as

    * itself, when ``f``'s inputs are plain constants (no option makes them) that nothing else
      reads and at least as large as ``f``'s outputs;
    * what its readers are charged for ``f``'s inputs (the inputs themselves when plain),
      when ``c`` is at least as large as all of that (``Transpose(W)`` beside the ``Gather``
      reading ``W``);
    * the output or the shared input (``Shape(W)`` with ``W`` also read by a node): when ``f``
      has one plain input ``W``, no other option reads ``W`` or ``c``, and ``c`` is smaller,
      ``W`` is split into ``W^`` (as large as ``c``) and the rest: ``W``'s readers read both,
      ``c``'s readers ``W^``.  A part holding a reader of ``c`` holds ``c`` (folded, or as a
      tensor from ``f``'s part) or ``W`` (``f`` with it), so at least ``W^``; one that also
      reads ``W`` holds ``W`` whole, ``W^`` and the rest;
    * otherwise a constant of its own (``c~``, one per option) as large as the least of
      ``f``'s outputs and of what ``f``'s inputs cost that nothing else reads (each a plain
      constant's bytes, or the same least for an option's single output); nothing when that
      is zero.

    Options are folded, so there are no new nodes and no value edges from them.  Restricted
    to this problem's nodes, an answer under any fold choice is an answer here, with no more
    memory per part, parts, fallback or transfer (:func:`restrict`): a bound proven here
    holds over every fold choice."""
    opts = problem.fold_options
    if not opts:
        return problem
    out_of = {c: k for k, o in enumerate(opts) for c in o.outputs}
    cb = list(problem.const_bytes)
    names = list(problem.const_names)
    readers = _readers(problem, out_of)
    least = _least(opts, out_of, cb, readers)
    repl: dict[int, tuple[int, ...]] = {}
    option_reads: dict[int, int] = {}
    for o in opts:
        for x in o.const_inputs:
            option_reads[x] = option_reads.get(x, 0) + 1
    for k, o in enumerate(opts):       # graph order: an option's inputs are replaced first
        plain = all(c not in out_of for c in o.const_inputs)
        inputs = sum(cb[c] for c in o.const_inputs)
        own = plain and all(readers[c] == 1 for c in o.const_inputs) \
            and inputs >= sum(cb[c] for c in o.outputs)
        # what a part holding f holds for its inputs, as other readers of them are charged
        held = tuple(dict.fromkeys(y for x in o.const_inputs for y in repl.get(x, (x,))))
        own_id = None
        for c in o.outputs:
            if own:
                repl[c] = (c,)
            elif cb[c] >= sum(cb[y] for y in held):
                repl[c] = held
            elif _shared_input(o, c, out_of, option_reads, readers, cb, repl):
                w = o.const_inputs[0]
                part = len(names)              # W^: as large as c, read with W and with c
                names.append(problem.const_names[w] + "^")
                cb.append(cb[c])
                cb[w] -= cb[c]
                repl[w] = (part, w)
                repl[c] = (part,)
            elif min(min(cb[x] for x in o.outputs), least[k]) > 0:
                if own_id is None:
                    own_id = len(names)
                    names.append(problem.const_names[o.outputs[0]] + "~")
                    cb.append(min(min(cb[x] for x in o.outputs), least[k]))
                repl[c] = (own_id,)
            else:
                repl[c] = ()
    node_consts = []
    for consts in problem.node_consts:
        if any(c in repl for c in consts):
            consts = list(dict.fromkeys(x for c in consts for x in repl.get(c, (c,))))
        node_consts.append(consts)
    out = dataclasses.replace(problem, node_consts=node_consts, const_names=names,
                              const_bytes=cb, arrays=None, fold_options=[])
    if problem.arrays is not None:
        out.arrays = problem_arrays(out)
    return out


def _shared_input(o, c: int, out_of: dict[int, int], option_reads: dict[int, int],
                  readers: dict[int, int], cb: list[int], repl: dict) -> bool:
    """Does :func:`relaxed`'s "output or shared input" case apply to option ``o``'s single
    output ``c``: one plain input ``W``, read by ``o`` alone among the options and by some
    node, not split yet, larger than ``c``; ``c`` read by no option?"""
    if len(o.outputs) != 1 or len(o.const_inputs) != 1:
        return False
    w = o.const_inputs[0]
    return (w not in out_of and option_reads.get(w, 0) == 1 and readers.get(w, 0) > 1
            and w not in repl and option_reads.get(c, 0) == 0 and 0 < cb[c] < cb[w])


def _readers(problem: Problem, out_of: dict[int, int]) -> dict[int, int]:
    """Constant -> how many options and nodes read it (options' inputs and outputs only)."""
    readers: dict[int, int] = {}
    for o in problem.fold_options:
        for c in o.const_inputs:
            readers[c] = readers.get(c, 0) + 1
    for consts in problem.node_consts:
        for c in consts:
            if c in readers or c in out_of:
                readers[c] = readers.get(c, 0) + 1
    return readers


def _least(opts, out_of: dict[int, int], cb: list[int], readers: dict[int, int]) -> list[int]:
    """Per option: what its inputs cost that nothing else reads (each a plain constant's
    bytes, or the same least for an option's single output)."""
    least: list[int] = []
    for o in opts:                      # compile lists options in graph order
        total = 0
        for x in o.const_inputs:
            if readers[x] != 1:
                continue
            k = out_of.get(x)
            if k is None:
                total += cb[x]
            elif len(opts[k].outputs) == 1:
                total += min(cb[x], least[k])
        least.append(total)
    return least


def restrict(problem: Problem, answered: Problem, sol: Solution) -> Solution:
    """``sol``, an answer to ``answered`` (``problem`` or :func:`unfold` of it: its nodes come
    first), on ``problem``'s nodes only: placed options dropped, parts left empty removed."""
    if answered is problem:
        return sol
    return normalize(problem, Solution(sol.part_of[:problem.n], list(sol.part_device),
                                       list(sol.part_instance), algorithm=sol.algorithm))


def over_every_choice(problem: Problem, answered: Problem, sol: Solution, *, budget: Budget,
                      **refine_kw) -> Solution:
    """``sol`` (an answer to ``answered``, ``problem`` with some options placed) with its
    ``status`` and ``lower_bound`` over every fold choice of ``problem``.

    The answer, restricted to ``problem``'s nodes, is refined on :func:`relaxed` within what
    ``budget`` has left (:class:`~hetero_solve.budget.Budget`) when its own problem proved
    it optimal: when that proves the same
    objective, no fold choice has a better answer (status ``"optimal"``); otherwise
    ``"feasible"``.  ``lower_bound`` becomes a bound on the parts over every fold choice.
    ``stats["folds"]`` gains ``proven`` and ``relaxed_objective``."""
    from . import lower_bound, refine
    rel = relaxed(problem)
    start = restrict(problem, answered, sol)
    r = None
    if sol.status == "optimal":
        say = refine_kw.get("progress") or (lambda _m: None)
        say("optional folds: the answer on the problem that bounds every fold choice")
        try:
            r = refine(rel, start, budget=budget, **refine_kw)
        except InfeasibleError:
            r = None
    key = objective_key(answered, sol)
    proven = r is not None and r.status == "optimal" and objective_key(rel, r) == key
    in_time = not budget.out_of_time()      # past the deadline: trivial bounds, no work
    lb = _relaxed_lower_bound(rel, start, evaluate(answered, sol).fallback, lower_bound) \
        if in_time else 1
    if r is not None and _same_before_parts(problem, objective_key(rel, r), key):
        lb = max(lb, r.lower_bound or 0)
    obj = problem.objective
    lb = sol.num_parts if proven and obj.lexicographic else min(lb, sol.num_parts)
    sol.status = "optimal" if proven else "feasible"
    sol.lower_bound = lb
    bounds = sol.stats.get("bounds")
    if bounds and "fallback" in bounds:     # the answer's own problem's: over every choice
        fb = _relaxed_fallback_bound(rel, r) if in_time else 0
        bounds["fallback"] = min(bounds["fallback"], fb if not proven else bounds["fallback"])
    if not proven and "proven" in sol.stats:
        sol.stats["proven"] = _proven_over_every_choice(answered, sol)
    sol.stats.setdefault("folds", {}).update(
        proven=proven, relaxed_objective=None if r is None else list(objective_key(rel, r)))
    if sol.stats.get("explain"):
        sol.stats["explain"] = with_folds(sol.stats["explain"], proven, lb,
                                          (bounds or {}).get("fallback"))
    return sol


def _proven_over_every_choice(answered: Problem, sol: Solution) -> list[str]:
    """The terms of ``sol``'s records (``stats["proven"]``, proven for its own fold choice)
    that hold over every fold choice, once ``sol``'s bounds are those over every choice: a
    lexicographic prefix whose fallback meets the fallback bound and whose parts meet the
    parts bound; a later term, or a weighted sum, is proven only with the whole answer."""
    obj = answered.objective
    if not obj.lexicographic:
        return []
    m = evaluate(answered, sol)
    own = set(sol.stats.get("proven", []))
    fallback_bound = sol.stats.get("bounds", {}).get("fallback", 0)
    out = []
    for term in obj.order:
        ok = term in own and (
            (term == "fallback" and m.fallback <= fallback_bound)
            or (term == "partitions" and sol.num_parts <= (sol.lower_bound or 0)))
        if not ok:
            break
        out.append(term)
    return out


def _relaxed_fallback_bound(rel: Problem, r: Solution | None) -> int:
    """No answer under any fold choice has less fallback (the relaxed problem's bound: its
    refinement's when it ran, else :func:`~hetero_solve.fitting.bounds.memory_bounds`)."""
    if r is not None and "fallback" in r.stats.get("bounds", {}):
        return r.stats["bounds"]["fallback"]
    R = device_sets(rel, fixed=False)
    return memory_bounds(rel, R).fallback if binding_devices(rel, R) else 0


def _relaxed_lower_bound(rel: Problem, start: Solution, fallback: int, bound) -> int:
    """The solver-free parts bound on ``rel`` for every answer as good as one with
    ``fallback`` (``bound``: :func:`hetero_solve.exact.lower_bound`, which assumes fallback 0
    when ``start`` has none: only right when the answer itself has none)."""
    if fallback == 0 or evaluate(rel, start).fallback > 0:
        return bound(rel, start)
    R = device_sets(rel, fixed=False)
    lb = lower_bounds(rel, R, binding_devices(rel, R)).lb
    obj = rel.objective
    if obj.lexicographic and "fallback" in obj.order and "partitions" in obj.order \
            and obj.order.index("fallback") < obj.order.index("partitions"):
        lb = max(lb, min(kept_packing(rel, R, fallback), start.num_parts))
    return lb


def _same_before_parts(problem: Problem, a: tuple, b: tuple) -> bool:
    """Objective keys ``a`` and ``b`` agree on the terms ranked before ``partitions`` (a
    lexicographic objective with ``partitions``; a weighted one: never)."""
    obj = problem.objective
    if not obj.lexicographic or "partitions" not in obj.order:
        return False
    i = obj.order.index("partitions")
    return tuple(a[:i]) == tuple(b[:i])
