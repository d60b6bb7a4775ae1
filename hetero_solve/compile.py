"""Compile a model and a rule file into a :class:`~hetero_solve.problem.Problem`.

Steps: pins (exact name beats globs, first glob in file order wins), allowed devices per node
(op lists, ``when`` conditions, static shapes, subgraph bodies, then pins), tensors and
constants with their sizes, data edges, and value-input edges (opset-aware).
"""

from __future__ import annotations

import fnmatch
import heapq

from .errors import InfeasibleError, ModelError, RuleError
from .measures import problem_arrays
from .model.graph import ModelGraph
from .model.structure import structure
from .problem import Device, Objective, Problem, Refusals
from .rules.conditions import SupportChecker
from .rules.schema import Rules


def compile_problem(mg: ModelGraph, rules: Rules, *, objective: Objective | None = None) -> Problem:
    """The problem every algorithm solves.  Raises :class:`InfeasibleError` when a node fits no
    device (naming the node, its op and each device's reason) and :class:`RuleError` for a pin
    by exact name that matches no node."""
    placeable = mg.placeable()
    index = {g: v for v, g in enumerate(placeable)}
    names = [mg.names[i] for i in placeable]
    ops = [mg.op_types[i] for i in placeable]
    warnings = list(mg.warnings)
    pins, pin_keys = resolve_pins(rules, mg, placeable, warnings)
    allowed, refusals = _allowed_devices(rules, mg, placeable, pins, pin_keys)

    struct = structure(mg, placeable)
    t_names, c_names = struct["tensor_names"], struct["const_names"]
    value_pred = _value_edges(mg, rules, placeable, index)

    graph_outputs = set(mg.graph_outputs)
    t_bytes = mg.bytes_of(t_names)
    c_bytes = mg.bytes_of(c_names)
    unknown = mg.open_sizes(t_names) + mg.open_sizes(c_names)
    if unknown:
        warnings.append(_unknown_size_warning(unknown))
    node_consts = struct["node_consts"]
    flat = struct["flat"]
    if mg.subgraph_constants:
        c_names, c_bytes, node_consts, flat = _with_subgraph_constants(
            mg, placeable, c_names, c_bytes, node_consts, flat)
    _check_sizes(mg, t_names + c_names, t_bytes + c_bytes)
    problem = Problem(
        devices=[Device(d.name, d.memory, d.instances, d.enforce_values) for d in rules.devices],
        names=names, op_types=ops, allowed=allowed, succ=struct["succ"], pred=struct["pred"],
        value_pred=value_pred, tensor_names=t_names, tensor_bytes=t_bytes,
        tensor_producer=struct["tensor_producer"], tensor_consumers=struct["tensor_consumers"],
        tensor_is_output=[x in graph_outputs for x in t_names],
        node_inputs=struct["node_inputs"], node_outputs=struct["node_outputs"],
        const_names=c_names, const_bytes=c_bytes, node_consts=node_consts,
        objective=objective or rules.objective, pinned=pins, graph_index=placeable,
        refusals=refusals,
        meta={"model": mg.path, "rules": rules.path, "folded": list(mg.folded),
              "constant_nodes": list(mg.constant_nodes), "warnings": warnings,
              "dims": dict(mg.dims), "opset": mg.opset})
    # Large models are measured with numpy; the flat pairs structure found serve as they are.
    problem.arrays = problem_arrays(problem, flat)
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


def _unknown_size_warning(names: list[str]) -> str:
    """SPEC section 5: an unknown dimension counts as 1, with a warning naming the tensors."""
    first = heapq.nsmallest(5, names)   # the first five by name, without sorting them all
    shown = ", ".join(first) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (f"{len(names)} tensor(s) have unknown dimensions or type, counted as 1 element "
            f"in memory and transfer sizes (give --dim NAME=VALUE): {shown}")


def _with_subgraph_constants(mg: ModelGraph, placeable: list[int], c_names: list[str],
                             c_bytes: list[int], node_consts: list[list[int]], flat: dict):
    """The constants with those held inside ``If``/``Loop``/``Scan`` bodies added, each a
    constant of the node that owns the body (SPEC section 5: they live on its device)."""
    import numpy as np
    c_names, c_bytes, node_consts = list(c_names), list(c_bytes), list(node_consts)
    extra_node, extra_id = [], []
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
        extra_node.extend([v] * len(ids))
        extra_id.extend(ids)
    flat = dict(flat, const_node=np.concatenate([flat["const_node"], np.array(extra_node, np.int64)]),
                const_id=np.concatenate([flat["const_id"], np.array(extra_id, np.int64)]))
    return c_names, c_bytes, node_consts, flat


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


def resolve_pins(rules: Rules, mg: ModelGraph, placeable: list[int],
                 warnings: list[str]) -> tuple[list[int], list[str]]:
    """Pinned device index per placeable node (-1 = none) and the key that pinned it."""
    n = len(placeable)
    pins = [-1] * n
    keys = [""] * n
    if not rules.affinity:
        return pins, keys
    all_names = set(mg.names)
    pos = {mg.names[g]: v for v, g in enumerate(placeable)}
    exact = set()
    for pin in rules.affinity:
        if pin.is_glob:
            continue
        if pin.pattern not in all_names:
            raise RuleError(rules.path, pin.key, f"no node is named {pin.pattern!r} in {mg.path}")
        v = pos.get(pin.pattern)
        if v is None:
            warnings.append(f"{rules.path}: {pin.key}: node {pin.pattern!r} is a Constant or was "
                            "folded; it belongs to no part, the pin has no effect")
            continue
        pins[v] = rules.device_index(pin.device)
        keys[v] = pin.key
        exact.add(v)
    for pin in rules.affinity:
        if not pin.is_glob:
            continue
        match = fnmatch.fnmatchcase
        hits = 0
        d = rules.device_index(pin.device)
        for v, g in enumerate(placeable):
            if match(mg.names[g], pin.pattern):
                hits += 1
                if v not in exact and pins[v] < 0:
                    pins[v] = d
                    keys[v] = pin.key
        if hits == 0:
            warnings.append(f"{rules.path}: {pin.key}: the glob matches no node")
    return pins, keys


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
