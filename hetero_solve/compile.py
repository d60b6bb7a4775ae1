"""Compile a model and a rule file into a :class:`~hetero_solve.problem.Problem`.

Steps: pins (exact name beats globs, first glob in file order wins), allowed devices per node
(op lists, ``when`` conditions, static shapes, subgraph bodies, then pins), tensors and
constants with their sizes, data edges, and value-input edges (opset-aware).
"""

from __future__ import annotations

import fnmatch

from .errors import InfeasibleError, RuleError
from .model.graph import ModelGraph
from .problem import Device, Objective, Problem
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

    const = mg.constant_tensors
    producer_of = mg.producer
    tensor_id: dict[str, int] = {}
    t_names: list[str] = []
    t_producer: list[int] = []
    t_consumers: list[list[int]] = []
    const_id: dict[str, int] = {}
    c_names: list[str] = []
    n = len(placeable)
    node_inputs: list[list[int]] = [[] for _ in range(n)]
    node_outputs: list[list[int]] = [[] for _ in range(n)]
    node_consts: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    succ: list[list[int]] = [[] for _ in range(n)]
    value_pred: list[list[int]] = [[] for _ in range(n)]
    value_cache: dict[tuple[str, str], tuple[int, ...]] = {}

    def tensor(x: str) -> int:
        t = tensor_id.get(x)
        if t is None:
            t = tensor_id[x] = len(t_names)
            t_names.append(x)
            t_producer.append(index.get(producer_of.get(x, -1), -1))
            t_consumers.append([])
        return t

    for v, i in enumerate(placeable):
        preds = pred[v]
        for x in mg.all_inputs(i):
            if x in const:
                c = const_id.get(x)
                if c is None:
                    c = const_id[x] = len(c_names)
                    c_names.append(x)
                node_consts[v].append(c)
                continue
            t = tensor(x)
            node_inputs[v].append(t)
            t_consumers[t].append(v)
            u = t_producer[t]
            if u >= 0 and u not in preds:
                preds.append(u)
                succ[u].append(v)
        for o in mg.outputs[i]:
            if o:
                t = tensor(o)
                t_producer[t] = v
                node_outputs[v].append(t)
        op = ops[v]
        domain = mg.domains[i]
        key = (domain, op)
        idx = value_cache.get(key)
        if idx is None:
            idx = value_cache[key] = rules.value_input_indices(op, mg.opsets.get(domain or "", mg.opset))
        if idx:
            inputs = mg.inputs[i]
            for k in idx:
                if k < len(inputs) and inputs[k] and inputs[k] not in const:
                    u = index.get(producer_of.get(inputs[k], -1), -1)
                    if u >= 0 and u not in value_pred[v]:
                        value_pred[v].append(u)

    graph_outputs = set(mg.graph_outputs)
    t_bytes = [mg.tensor_bytes(x) for x in t_names]
    c_bytes = [mg.tensor_bytes(x) for x in c_names]
    unknown = mg.unknown_size_warning()
    if unknown:
        warnings.append(unknown)
    return Problem(
        devices=[Device(d.name, d.memory, d.instances, d.enforce_values) for d in rules.devices],
        names=names, op_types=ops, allowed=allowed, succ=succ, pred=pred, value_pred=value_pred,
        tensor_names=t_names, tensor_bytes=t_bytes, tensor_producer=t_producer,
        tensor_consumers=t_consumers, tensor_is_output=[x in graph_outputs for x in t_names],
        node_inputs=node_inputs, node_outputs=node_outputs,
        const_names=c_names, const_bytes=c_bytes, node_consts=node_consts,
        objective=objective or rules.objective, pinned=pins, graph_index=placeable,
        refusals=refusals,
        meta={"model": mg.path, "rules": rules.path, "folded": list(mg.folded),
              "constant_nodes": list(mg.constant_nodes), "warnings": warnings,
              "dims": dict(mg.dims), "opset": mg.opset})


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
                     pin_keys: list[str]) -> tuple[list[tuple[int, ...]], dict[tuple[int, int], str]]:
    checker = SupportChecker(rules, mg)
    devices = rules.devices
    D = len(devices)
    allowed: list[tuple[int, ...]] = []
    refusals: dict[tuple[int, int], str] = {}
    homeless: list[int] = []
    for v, i in enumerate(placeable):
        ok = []
        for d in range(D):
            reason = checker.refusal(d, i)
            if reason is None:
                ok.append(d)
            else:
                refusals[(v, d)] = reason
        pin = pins[v]
        if pin >= 0:
            if pin not in ok:
                raise InfeasibleError(
                    f"node {mg.names[i]!r} ({mg.op_types[i]}) is pinned to {devices[pin].name} by "
                    f"{pin_keys[v]} in {rules.path}, but {devices[pin].name} refuses it: "
                    f"{refusals[(v, pin)]}", [mg.names[i]])
            for d in ok:
                if d != pin:
                    refusals[(v, d)] = f"pinned to {devices[pin].name} by {pin_keys[v]}"
            ok = [pin]
        if not ok:
            homeless.append(v)
        allowed.append(tuple(ok))
    if homeless:
        v = homeless[0]
        i = placeable[v]
        why = "; ".join(f"{devices[d].name}: {refusals[(v, d)]}" for d in range(D))
        more = f" ({len(homeless) - 1} more node(s) fit no device)" if len(homeless) > 1 else ""
        raise InfeasibleError(f"node {mg.names[i]!r} ({mg.op_types[i]}) fits no device: {why}{more}",
                              [mg.names[placeable[u]] for u in homeless])
    return allowed, refusals
