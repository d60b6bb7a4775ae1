"""Compile a model and a rule file into a :class:`~hetero_solve.problem.Problem`.

Steps: pins (exact name beats globs, first glob in file order wins), allowed devices per node
(op lists, ``when`` conditions, static shapes, subgraph bodies, then pins), tensors and
constants with their sizes, data edges, and value-input edges (opset-aware); last, each
quantized unit (:mod:`hetero_solve.model.qdq`) contracted into one node
(:mod:`hetero_solve.contract`).
"""

from __future__ import annotations

import heapq

from .contract import contract
from .times.sources import Measured, NoCosts, cost_model
from .errors import CostError, InfeasibleError, ModelError, RuleError
from .measures import problem_arrays
from .model.graph import ModelGraph
from .model.parallel import Forked, fork_pays
from .model.qdq import find_units
from .model.shapes import analyse_shapes
from .model.structure import structure
from .problem import (Device, FoldOption, MissingDims, NonStaticShape, Objective, Problem,
                      ProblemInfo, Refusals)
from .rules.conditions import SupportChecker
from .rules.pins import resolve_pins
from .rules.load import Rules, as_objective


def compile_problem(mg: ModelGraph, rules: Rules, *, objective: Objective | str | None = None,
                    measured: Measured | None = None) -> Problem:
    """Compile a loaded model and a rule file into the problem every algorithm solves.

    In named steps: pins (an exact name beats globs, the first glob in file order wins);
    the devices each placeable node may use and why the others refuse it (op lists, ``when``
    conditions, static shapes, subgraph bodies, then pins); tensors and constants with their
    bytes (docs/problem.md; constants inside ``If``/``Loop``/``Scan`` bodies belong to their
    node); data edges; value-input edges at the opset of each node's domain.

    Parameters
    ----------
    mg : ModelGraph
        The model as :func:`~hetero_solve.model.load_model` returns it.
    rules : Rules
        The rule file as :func:`~hetero_solve.rules.load_rules` returns it.
    objective : Objective, str, list or mapping, optional
        Overrides the rule file's objective: an ``Objective``, or as the rule file's
        ``objective`` key or the command's ``--objective`` write it (``"latency"``,
        ``["fallback", "latency"]``, ``{"fallback": 1, "partitions": 20}``).
    measured : Measured, optional
        Measured node times (a profile); with the devices' rooflines they make
        ``problem.costs`` (:mod:`hetero_solve.times.sources`).

    Returns
    -------
    Problem
        Plain data: node ``v`` is ``mg.model.graph.node[problem.graph_index[v]]``; every
        ``Constant`` and folded node is left out.

    Raises
    ------
    InfeasibleError
        A node fits no device (names the node, its op and each device's reason), or is
        pinned to a device that refuses it.
    RuleError
        A pin by exact name matches no node, or ``objective`` is not an objective.
    CostError
        The objective has a cost term (``latency``, ``throughput``) and some node has no time
        on a device that may take it.

    Examples
    --------
    >>> from hetero_solve.model import load_model
    >>> from hetero_solve.rules import load_rules
    >>> p = compile_problem(load_model("examples/seed000.onnx"), load_rules("rules/seed000.yaml"))
    >>> p.n, [p.devices[d].name for d in p.allowed[p.names.index("4")]]
    (7, ['CPU'])
    """
    objective = _objective(objective)
    placeable = mg.placeable()
    index = {g: v for v, g in enumerate(placeable)}
    warnings = list(mg.warnings)
    pins, pin_keys = resolve_pins(rules, mg, placeable, warnings)
    allowed, refusals = _allowed_devices(rules, mg, placeable, pins, pin_keys)

    struct = structure(mg, placeable)
    t_names = struct["tensor_names"]
    graph_outputs = set(mg.graph_outputs)
    t_bytes, c_names, c_bytes, node_consts, options, unknown = _sizes(
        mg, rules, placeable, index, struct, warnings)
    problem = Problem(
        devices=[Device(d.name, d.memory, d.instances, d.enforce_values) for d in rules.devices],
        names=[mg.names[i] for i in placeable], op_types=[mg.op_types[i] for i in placeable],
        allowed=allowed, succ=struct["succ"], pred=struct["pred"],
        value_pred=_value_edges(mg, rules, placeable, index),
        tensor_names=t_names, tensor_bytes=t_bytes,
        tensor_producer=struct["tensor_producer"], tensor_consumers=struct["tensor_consumers"],
        tensor_is_output=[x in graph_outputs for x in t_names],
        node_inputs=struct["node_inputs"], node_outputs=struct["node_outputs"],
        const_names=c_names, const_bytes=c_bytes, node_consts=node_consts,
        objective=objective or rules.objective, pinned=pins, graph_index=placeable,
        refusals=refusals,
        info=ProblemInfo(folded=list(mg.folded), constant_nodes=list(mg.constant_nodes),
                         warnings=warnings, open_sizes=sorted(set(unknown))),
        fold_options=options)
    problem = _contract_units(mg, problem, placeable, index)
    _add_costs(mg, rules, problem, measured)
    problem.arrays = problem_arrays(problem)   # large models are measured with numpy
    return problem


def _objective(objective) -> Objective | None:
    """``compile_problem``'s ``objective`` as an :class:`Objective` (``None``: the rule
    file's)."""
    if objective is not None and not isinstance(objective, Objective):
        try:
            objective = as_objective(objective)
        except ValueError as e:
            raise RuleError(f"objective={objective!r}", "", str(e)) from None
    return objective


def _sizes(mg: ModelGraph, rules: Rules, placeable: list[int], index: dict[int, int],
           struct: dict, warnings: list[str]) -> tuple:
    """The tensors' bytes and the constants (names, bytes, which node reads which), with the
    constants of subgraph bodies and of foldable nodes: ``(tensor_bytes, const_names,
    const_bytes, node_consts, fold_options, open_sizes)``; a warning for sizes not known."""
    t_names, c_names = struct["tensor_names"], struct["const_names"]
    t_bytes = mg.bytes_of(t_names)
    c_bytes = mg.bytes_of(c_names)
    unknown = mg.open_sizes(t_names) + mg.open_sizes(c_names)
    if unknown:
        warnings.append(_unknown_size_warning(unknown, mg))
    node_consts = struct["node_consts"]
    if mg.subgraph_constants:
        c_names, c_bytes, node_consts = _with_subgraph_constants(
            mg, placeable, c_names, c_bytes, node_consts)
    options: list[FoldOption] = []
    if mg.folded and any(d.memory is not None for d in rules.devices):
        options, c_names, c_bytes = _fold_options(mg, rules, placeable, index, c_names, c_bytes)
    _check_sizes(mg, t_names + c_names, t_bytes + c_bytes)
    return t_bytes, c_names, c_bytes, node_consts, options, unknown


def _add_costs(mg: ModelGraph, rules: Rules, problem: Problem, measured: Measured | None) -> None:
    """``problem.costs`` (:func:`_costs`) and what the profile says about how its times were
    taken (execution settings, noise)."""
    problem.costs = _costs(mg, rules, problem, measured)
    if measured is not None and measured.execution:
        problem.info.execution = dict(measured.execution)
    if measured is not None and measured.noise and problem.costs is not None:
        problem.info.noise = max(measured.noise.get(d.name, 0.0) for d in rules.devices)


def _costs(mg: ModelGraph, rules: Rules, problem: Problem, measured: Measured | None):
    """The cost model (node times, part costs, links), or ``None`` when the rule file and
    the profile give none: an error if the objective needs one, a warning if they give
    some times but not all."""
    found = cost_model(mg, rules, problem, measured)
    if not isinstance(found, NoCosts):
        return found
    term = next((t for t in problem.objective.terms() if t in ("latency", "throughput")), None)
    if term is not None:
        raise CostError(f"{rules.path}: the {term} term of the objective "
                        + found.text("").lstrip())
    if found.device is not None:
        problem.info.warnings.append(f"{rules.path}: no predicted times: "
                                     + found.text("the cost model").split(": ", 1)[1])
    return None


def _contract_units(mg: ModelGraph, problem: Problem, placeable: list[int],
                    index: dict[int, int]) -> Problem:
    """Each quantized unit made one node (docs/problem.md: a part boundary never cuts one)."""
    units = find_units(mg, placeable)
    if not units:
        return problem
    groups = [[index[a]] + [index[i] for i in g if i != a]
              for a, g in zip(units.anchors, units.groups)]
    problem, _ = contract(problem, groups)
    problem.info.member_names = {i: mg.names[i] for g in units.groups for i in g}
    return problem


#: The bytes all tensors and constants of a model may add up to: every sum of sizes (a part's
#: memory, a transfer, an objective) then fits the 64-bit integers numpy and CP-SAT compute in.
MAX_TOTAL_BYTES = 2**62


def _check_sizes(mg: ModelGraph, names: list[str], sizes: list[int]) -> None:
    """Refuse sizes adding up to more than :data:`MAX_TOTAL_BYTES` (absurd dims, in the model
    or from ``--dim``): no device holds them, and the solvers' 64-bit sums would overflow."""
    if sum(sizes) <= MAX_TOTAL_BYTES:
        return
    k = max(range(len(sizes)), key=sizes.__getitem__)
    dims = f" ({', '.join(f'{a}={b}' for a, b in mg.dims.items())})" if mg.dims else ""
    raise ModelError(mg.path, f"tensor {names[k]!r} has {sizes[k]:,} bytes (shape "
                              f"{mg.tensor_type(names[k]).shape}), and the model's tensors add up "
                              f"to more than 2^62 bytes: check the dims{dims}")


def missing_dims(mg: ModelGraph, rules: Rules, problem: Problem, *,
                 ahead: Forked | None = None) -> list[MissingDims]:
    """What the graph inputs' dims with no value cost on each static-shape device: the nodes
    it refuses *only* because they have none.

    Decided by a counterfactual, not by reading names: the model is analysed again with every
    such dim given a value (1), and a node counts when a device that refused it for a
    non-static shape takes it there, or it folds there.  Returns one entry per device that
    loses nodes (:class:`~hetero_solve.problem.MissingDims`).  ``ahead``: that analysis
    already running in a forked process (:func:`missing_dims_ahead`); it is waited for, or
    stopped when no node needs it.
    """
    unset = mg.unset_dims()
    static = _static_devices(rules)
    refused = {d: [v for v in range(problem.n)
                   if isinstance(problem.refusals.entry(v, d), NonStaticShape)]
               for d in static} if unset and problem.n else {}
    if not any(refused.values()):
        if ahead is not None:
            ahead.cancel()
        return []
    names, anonymous, _, _ = _counterfactual_dims(mg)
    nodes = {d: [problem.graph_index[v] for v in refused[d]] for d in static}
    taken = None
    done = ahead.result() if ahead is not None else None
    if done is not None and done[0] == "ok" and (done[1] is None or all(
            g in done[1][0] for d in static for g in nodes[d])):
        taken = done[1] and done[1][1]
        if taken is None:
            return []
    if taken is None:   # nothing ahead, or the forked analysis failed: here, on these nodes
        taken = _counterfactual_takes(mg, rules, nodes)
        if taken is None:
            return []
    hint = " ".join([f"--dim {n}=N" for n in names] + [
        f"--shape {x}=" + ",".join(str(u.value) if u.value is not None else "?"
                                   for u in mg.input_dims if u.input == x) for x in anonymous])
    found = []
    for d in static:
        freed = sum(1 for g in nodes[d] if g in taken[d])
        if freed:
            found.append(MissingDims(rules.devices[d].name, freed, names, anonymous, hint))
    return found


def missing_dims_ahead(mg: ModelGraph, rules: Rules) -> Forked | None:
    """Start :func:`missing_dims`'s counterfactual analysis of a large model in a forked
    process (:mod:`~hetero_solve.model.parallel`), before compiling: it needs the loaded
    model alone, and runs beside the rest of the pipeline.  It answers for every placeable
    node a static-shape device could refuse for a non-static shape (one with such a tensor, or
    a subgraph); :func:`missing_dims` checks that the refused nodes are among them.  ``None``
    when no static-shape device and unset dim make it possible, or a fork does not pay."""
    if not mg.unset_dims() or not _static_devices(rules) or not fork_pays(len(mg.names)):
        return None
    open_ = mg.nonstatic.__contains__
    candidates = [g for g in mg.placeable() if mg.has_subgraph[g]
                  or any(map(open_, mg.inputs[g])) or any(map(open_, mg.outputs[g]))]
    return Forked(_takes_of_all, mg, rules, candidates)


def _takes_of_all(mg: ModelGraph, rules: Rules, placeable: list[int]
                  ) -> tuple[frozenset[int], dict[int, set[int]]] | None:
    taken = _counterfactual_takes(mg, rules, {d: placeable for d in _static_devices(rules)})
    return None if taken is None else (frozenset(placeable), taken)


def _static_devices(rules: Rules) -> list[int]:
    return [d for d, dev in enumerate(rules.devices) if dev.static_shapes]


def _counterfactual_dims(mg: ModelGraph
                         ) -> tuple[list[str], list[str], dict[str, int], dict[str, tuple]]:
    """The unset dims' names, the inputs with unnamed ones, and the dims and shapes that give
    every one of them the value 1."""
    unset = mg.unset_dims()
    names = sorted({u.name for u in unset if u.name is not None})
    anonymous = sorted({u.input for u in unset if u.name is None})
    dims = {**mg.dims, **{n: 1 for n in names}}
    shapes = dict(mg.shapes)
    for x in anonymous:
        shapes[x] = tuple(u.value if u.value is not None else
                          dims.get(u.name, 1) if u.name is not None else 1
                          for u in mg.input_dims if u.input == x)
    return names, anonymous, dims, shapes


def _counterfactual_takes(mg: ModelGraph, rules: Rules, nodes: dict[int, list[int]]
                          ) -> dict[int, set[int]] | None:
    """Of ``nodes[d]`` (main-graph nodes), those device ``d`` takes, or that fold, once the
    unset dims have the value 1; ``None`` when the model rejects that value (no claim)."""
    _, _, dims, shapes = _counterfactual_dims(mg)
    try:   # the same graph lists, analysed again (nothing else depends on dims)
        found = analyse_shapes(mg, dims, shapes)
    except Exception:   # a value the model rejects: no claim
        return None
    alt = ModelGraph.of(mg, types=found.types, declared=found.declared, folded=found.folded,
                        constant_tensors=found.constant_tensors, nonstatic=found.nonstatic,
                        folded_values=found.folded_values, subgraph_nodes=found.subgraph_nodes)
    checker = SupportChecker(rules, alt)
    alt_folded = set(alt.folded)
    taken = {}
    for d, of_d in nodes.items():
        kept = [g for g in of_d if g not in alt_folded]
        taken[d] = {g for g in of_d if g in alt_folded} | {
            g for g, r in zip(kept, checker.reasons(d, kept)) if r is None}
    return taken


def _fold_options(mg: ModelGraph, rules: Rules, placeable: list[int], index: dict[int, int],
                  c_names: list[str], c_bytes: list[int]
                  ) -> tuple[list[FoldOption], list[str], list[int]]:
    """The folded nodes whose folding can cost memory (:class:`FoldOption`), with the
    constants placing one needs added to the constant lists.

    A folded node is always folded when every reader of its outputs reads them only as a
    value-dependent input, or is itself such a node: those are the shape chains, whose
    folding removes value splits and costs bytes of shape values only.  Every other folded
    node is an option, unless a folded node that is not an option reads it (unfolding it
    would make that reader's input unknown)."""
    folded = list(mg.folded)
    is_folded = set(folded)
    outs = {i: [o for o in mg.outputs[i] if o] for i in folded}
    made_by = {o: i for i, os_ in outs.items() for o in os_}
    readers: dict[str, list[tuple[int, bool]]] = {o: [] for o in made_by}
    for i, ins in enumerate(mg.inputs):
        if not ins or (i not in index and i not in is_folded):
            continue
        # folded readers too: placed with this node, they read it as a value (docs/problem.md)
        idx = rules.value_input_indices(mg.op_types[i], mg.opsets.get(mg.domains[i] or "",
                                                                       mg.opset))
        for k, x in enumerate(ins):
            if x in readers:
                readers[x].append((i, k in idx))
    safe: dict[int, bool] = {}
    for i in reversed(folded):      # graph order is topological: readers first
        safe[i] = all((as_value and r not in is_folded) or (r in is_folded and safe.get(r, False))
                      for o in outs[i] for r, as_value in readers[o])
    # a Shape of a placed tensor reads no constant: it stays folded
    candidates = [i for i in folded if not safe[i]
                  and all(x in mg.constant_tensors for x in mg.all_inputs(i))]
    # an option read by a folded node that is not an option stays folded (closure)
    keep = set(candidates)
    changed = True
    while changed:
        changed = False
        for i in list(keep):
            if any(r in is_folded and r not in keep for o in outs[i] for r, _ in readers[o]):
                keep.discard(i)
                changed = True
    chosen = [i for i in folded if i in keep]
    if not chosen:
        return [], c_names, c_bytes
    c_names, c_bytes = list(c_names), list(c_bytes)
    cid = {x: k for k, x in enumerate(c_names)}

    def const_id(x: str) -> int:
        k = cid.get(x)
        if k is None:
            k = cid[x] = len(c_names)
            c_names.append(x)
            c_bytes.append(mg.bytes_of([x])[0])
        return k

    position = {i: k for k, i in enumerate(chosen)}
    checker = SupportChecker(rules, mg)
    refusals = [checker.refusals(d, chosen) for d in range(len(rules.devices))]
    options = []
    for k, i in enumerate(chosen):
        ins = mg.all_inputs(i)
        options.append(FoldOption(
            graph_index=i, name=mg.names[i], op_type=mg.op_types[i],
            allowed=tuple(d for d in range(len(rules.devices)) if refusals[d][k] is None),
            const_inputs=tuple(dict.fromkeys(const_id(x) for x in ins
                                             if x in mg.constant_tensors)),
            outputs=tuple(const_id(o) for o in outs[i]),
            value_readers=tuple(sorted({index[r] for o in outs[i] for r, v in readers[o]
                                        if v and r in index})),
            requires=tuple(sorted({position[r] for o in outs[i] for r, _ in readers[o]
                                   if r in position})),
            value_requires=tuple(sorted({position[r] for o in outs[i] for r, v in readers[o]
                                         if v and r in position}))))
    return options, c_names, c_bytes


def _unknown_size_warning(names: list[str], mg: ModelGraph) -> str:
    """docs/problem.md: an unknown dimension counts as 1, with a warning naming the tensors
    and what would size them: the input dims still without a value, or, when every one has
    one, that the sizes depend on values the model computes."""
    first = heapq.nsmallest(5, names)   # the first five by name, without sorting them all
    shown = ", ".join(first) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    unset = mg.unset_dims()
    named = list(dict.fromkeys(d.name for d in unset if d.name))
    anonymous = list(dict.fromkeys(d.input for d in unset if not d.name))
    if named or anonymous:
        hint = "give " + " ".join([f"--dim {n}=VALUE" for n in named]
                                  + [f"--shape {x}=D0,D1,..." for x in anonymous])
    else:
        hint = ("every input dimension has a value: these sizes depend on values the model "
                "computes, or on ops whose output size nothing infers")
    return (f"{len(names)} tensor(s) have unknown dimensions or type, counted as 1 element "
            f"in memory and transfer sizes ({hint}): {shown}")


def _with_subgraph_constants(mg: ModelGraph, placeable: list[int], c_names: list[str],
                             c_bytes: list[int], node_consts: list[list[int]]):
    """The constants with those held inside ``If``/``Loop``/``Scan`` bodies added, each a
    constant of the node that owns the body (docs/problem.md: they live on its device)."""
    c_names, c_bytes, node_consts = list(c_names), list(c_bytes), list(node_consts)
    taken = mg.constant_tensors
    for v, i in enumerate(placeable):
        inner = mg.subgraph_constants.get(i)
        if not inner:
            continue
        ids = list(range(len(c_names), len(c_names) + len(inner)))
        for name, _ in inner:
            while name in taken:   # a qualified name is never a main-graph constant's
                name += "'"
            c_names.append(name)
        c_bytes.extend(b for _, b in inner)
        node_consts[v] = node_consts[v] + ids
    return c_names, c_bytes, node_consts


def _value_edges(mg: ModelGraph, rules: Rules, placeable: list[int], index: dict[int, int]) -> list[list[int]]:
    """``value_pred[v]``: nodes making a value-dependent input of ``v`` (constants and graph
    inputs are known values and make none), at the opset of the node's domain."""
    const = mg.constant_tensors
    producer_of = mg.producer
    ops, domains = mg.op_types, mg.domains
    value_idx: dict[tuple[str, str], tuple[int, ...]] = {}
    for key in set(zip(domains, ops)):     # a few hundred distinct (domain, op) at most
        idx = rules.value_input_indices(key[1], mg.opsets.get(key[0] or "", mg.opset))
        if idx:
            value_idx[key] = idx
    value_ops = {op for _, op in value_idx}
    value_pred: list[list[int]] = [[] for _ in placeable]
    for v, i in enumerate(placeable):
        if ops[i] not in value_ops:        # most nodes: one set lookup
            continue
        idx = value_idx.get((domains[i], ops[i]))
        if not idx:
            continue
        inputs = mg.inputs[i]
        for k in idx:
            if k < len(inputs) and inputs[k] and inputs[k] not in const:
                u = index.get(producer_of.get(inputs[k], -1), -1)
                if u >= 0 and u not in value_pred[v]:
                    value_pred[v].append(u)
    return value_pred


def _allowed_devices(rules: Rules, mg: ModelGraph, placeable: list[int], pins: list[int],
                     pin_keys: list[str]) -> tuple[list[tuple[int, ...]], Refusals]:
    """Devices each node may use, and why the others refuse it.  Device by device: the op
    lists decide most nodes with one lookup per op type; only nodes that need it (a ``when``
    condition, a non-static tensor on a static-shape device, a subgraph) get a node check."""
    checker = SupportChecker(rules, mg)
    devices = rules.devices
    D = len(devices)
    reasons = [checker.reasons(d, placeable) for d in range(D)]
    masks = [0] * len(placeable)
    for d in range(D):   # one bit per device that takes the node; then one lookup per node
        bit = 1 << d
        masks = [m | bit if why is None else m for m, why in zip(masks, reasons[d])]
    table = {m: tuple(d for d in range(D) if m >> d & 1) for m in set(masks)}
    allowed = [table[m] for m in masks]
    refusals = Refusals(reasons)
    for v, pin in enumerate(pins):
        if pin < 0:
            continue
        i = placeable[v]
        if pin not in allowed[v]:
            raise InfeasibleError(
                f"node {mg.names[i]!r} ({mg.op_types[i]}) is pinned to {devices[pin].name} by "
                f"{pin_keys[v]} in {rules.path}, but {devices[pin].name} refuses it: "
                f"{refusals[(v, pin)]}", [mg.names[i]])
        for d in allowed[v]:
            if d != pin:
                refusals[(v, d)] = f"pinned to {devices[pin].name} by {pin_keys[v]}"
        allowed[v] = (pin,)
    homeless = [v for v, a in enumerate(allowed) if not a]
    if homeless:
        v = homeless[0]
        i = placeable[v]
        why = "; ".join(f"{devices[d].name}: {refusals[(v, d)]}" for d in range(D))
        more = f" ({len(homeless) - 1} more node(s) fit no device)" if len(homeless) > 1 else ""
        raise InfeasibleError(f"node {mg.names[i]!r} ({mg.op_types[i]}) fits no device: {why}{more}",
                              [mg.names[placeable[u]] for u in homeless])
    return allowed, refusals
