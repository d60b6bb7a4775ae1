"""Why a model needs at least k parts: the chain behind the lower bound, in words and as data.

The bound (:mod:`~hetero_solve.exact.bounds`) is a path of nodes; every part meets a path in one
contiguous stretch, so each *forced break* along it starts a new part:

* ``device``: the two nodes have no device in common (support, pins, or, when fallback is
  already minimal at 0, their preferred devices differ);
* ``value``: the second node needs the *value* of the first one's output when its part is
  compiled, and every device they could share enforces value inputs (docs/rules.md);
* ``memory``: the constants and graph inputs/outputs of the stretch would not fit one instance
  of the device (docs/exact.md, "Memory").

A device whose memory binds also needs as many parts as the constants of the nodes that must
be on it take to pack into its instances (``packing``: a constant whose readers cannot share a
part, such as a tied embedding, counted once per reader).

When the optimum is above the bound, the rest of the proof is the solver's exhaustive search
(``proof`` says which); the chain still shows where the bound comes from.

An answer of one part needs no chain (bound ``nonempty``): a model with a node needs a part,
so one part is optimal and no bound is computed for it.

When memory limits bind, ``memory`` (:func:`explain_memory`) says why nodes left their
preferred device: per device, how many bytes the nodes that prefer it need as one part against
what its instances hold (and by how much that overflows), which nodes no part on it can hold
(and the least bytes a part holding them needs), and the fallback lower bound; per instance of
the answer, what fills it (its largest constants and boundary tensors); and the nodes moved,
each with its reason.

Under a cost objective, ``time`` (:func:`explain_time`) says where the answer's time goes, part
by part, and which chain of parts is critical.

The dict goes into ``partition.json`` as ``"explain"``; ``text`` is what ``hetero-solve explain``
prints.
"""

from __future__ import annotations

from ..measures import boundary_tensors, part_memories
from ..measures.costs import critical_chain, latency_by_part
from ..problem import Problem
from ..solution import Solution
from ..units import format_bytes, format_seconds, instance_label
from ..fitting.bounds import MemoryBounds, memory_bounds
from ..fitting.floors import binding_devices, min_part_memory
from .analysis import device_sets, shared_devices
from .bounds import Bounds, path_chain, run_chain
from ..fitting.network import placeable_nodes

MAX_LISTED = 20         # nodes, tensors or constants listed per entry of the memory section

PROOFS = {
    "bound": "the lower bound equals the number of parts",
    "sequence": "an exhaustive search over device sequences found no partition with fewer parts",
    "cpsat": "CP-SAT proved that no partition has fewer parts",
    "sat": "the SAT solver proved that no partition has fewer parts",
    "relaxation": "with the devices any answer as good on the earlier terms could use (the "
                  "relaxed assignment model), some path crosses as many device segments as the "
                  "answer has parts",
    "weighted": "the weighted objective is proven optimal: fewer parts would cost more in "
                "the other terms",
    None: "not proven: the gap between the bound and the answer was not closed within the "
          "time limit",
}


def _devs(problem: Problem, devs) -> str:
    return "/".join(problem.devices[d].name for d in devs)


def _break(problem: Problem, R, u: int, v: int, fixed: bool) -> dict:
    names, ops = problem.names, problem.op_types
    common = [d for d in R[u] if d in R[v]]
    if not common:
        why = []
        for d in R[u]:
            if d not in problem.allowed[v]:
                why.append(problem.why_not(v, d))
            elif not fixed:
                why.append(_why_not_in(problem, R, v, d))
        for x in (u, v):
            if not R[x]:
                why.append(f"{names[x]!r} fits no device: no part holding it fits an "
                           f"instance of any device it may use")
        detail = (f"{names[u]!r} ({ops[u]}) runs on {_devs(problem, R[u])}, {names[v]!r} "
                  f"({ops[v]}) on {_devs(problem, R[v])}")
        if why:
            detail += ": " + "; ".join(why)
        elif fixed:
            detail += " (each on its preferred device: moving one would be a fallback)"
        return {"after": names[u], "before": names[v], "reason": "device", "detail": detail}
    detail = (f"{names[v]!r} ({ops[v]}) needs the value of {names[u]!r} ({ops[u]}) when its part "
              f"is compiled, and value inputs are enforced on {_devs(problem, common)}")
    return {"after": names[u], "before": names[v], "reason": "value", "detail": detail}


def _why_not_in(problem: Problem, R, v: int, c: int) -> str:
    """Why device ``c`` is not in ``R(v)``: the rules refuse it, fallback is fixed at 0 (its
    preferred device is another), or memory (no part on ``c`` holding ``v`` fits)."""
    why = problem.why_not(v, c)
    if why:
        return why
    if len(R[v]) == 1 and R[v][0] == problem.allowed[v][0] and c != R[v][0]:
        return f"(its preferred device is {problem.devices[R[v][0]].name})"
    return (f"memory: no part on {problem.devices[c].name} holding it fits one instance "
            f"({format_bytes(problem.devices[c].memory)})")


def _runs(problem: Problem, R, b: Bounds, c: int, fixed: bool, v: int | None = None,
          backward: bool = False) -> dict:
    chain = run_chain(problem, b, c, v, backward)
    names = problem.names
    path = [names[x] for x, _ in chain]
    if backward:
        chain = chain[::-1]     # processing order: the events read forwards
    runs: list[list[str]] = []
    breaks: list[dict] = []
    pending = None
    last_forced = None
    for v, event in chain:
        forced = R[v] == (c,)
        kind = event[0] if event else None
        if kind == "device":
            pending = {"after": names[last_forced] if last_forced is not None else None,
                       "before": names[v], "reason": "device",
                       "detail": f"{names[v]!r} ({problem.op_types[v]}) cannot run on "
                                 f"{problem.devices[c].name}: " + _why_not_in(problem, R, v, c)}
        elif kind == "value":
            u, w = event[1], event[2]
            pending = {"after": names[u], "before": names[w], "reason": "value",
                       "detail": f"{names[w]!r} ({problem.op_types[w]}) needs the value of "
                                 f"{names[u]!r} ({problem.op_types[u]}) and "
                                 f"{problem.devices[c].name} enforces value inputs"}
        if not forced:
            continue
        if kind in ("start", "memory") or not runs:
            if runs:
                if kind == "memory":
                    pending = {"after": names[last_forced] if last_forced is not None else None,
                               "before": names[v], "reason": "memory",
                               "detail": f"the constants of the stretch up to {names[v]!r} "
                                         f"overflow one {problem.devices[c].name} instance "
                                         f"({format_bytes(problem.devices[c].memory)})"}
                breaks.append(pending or {"after": None, "before": names[v], "reason": "device",
                                          "detail": ""})
            runs.append([])
            pending = None
        runs[-1].append(names[v])
        last_forced = v
    if backward:
        runs = [r[::-1] for r in runs[::-1]]
        breaks = [{**br, "after": br["before"], "before": br["after"]} for br in breaks[::-1]]
    return {"device": problem.devices[c].name, "count": len(runs), "runs": runs, "breaks": breaks,
            "path": path}


def explain(problem: Problem, R: list[tuple[int, ...]], b: Bounds | None, parts: int, *,
            proof: str | None, fixed: bool, max_items: int = 2000,
            solution: Solution | None = None, memory: MemoryBounds | None = None,
            memory_sets: list[tuple[int, ...]] | None = None,
            lower_bound: int | None = None) -> dict:
    """The ``explain`` dict (module doc).  ``b``: the bounds, or ``None`` for the bound
    ``nonempty`` (a model with a node needs a part: no chain, nothing computed); ``parts``:
    the answer's number of parts; ``proof``: a key of :data:`PROOFS` (``None`` when the
    optimum is not proven); ``solution``: the answer, for the memory section when memory
    binds (``memory``: its bounds, and ``memory_sets`` the device sets behind them, when the
    caller has them); ``lower_bound``: the answer's bound on parts, when the solvers proved
    more than the structural bound ``b`` shows (then ``structural_bound`` keeps ``b``'s)."""
    out: dict = {"parts": parts, "lower_bound": b.lb if b is not None else min(1, problem.n),
                 "bound": b.kind if b is not None else "nonempty",
                 "proof": proof, "proof_text": PROOFS.get(proof, str(proof)),
                 "devices_fixed": fixed,
                 "bounds": {"path": b.lb_path, "segments": b.lb_segments, "through": b.lb_through}
                 if b is not None else {"nonempty": min(1, problem.n)}}
    if problem.n == 0:
        out.update(chain=[], breaks=[], runs=[], text=["an empty model needs no part"])
        return out
    if b is None:
        out.update(chain=[], breaks=[], runs=[])
    else:
        out.update(_chains(problem, R, b, fixed, max_items))
        packing = _packing(problem, b)
        if any(x["parts"] > x["runs"] for x in packing):   # the packing gives the bound
            out["packing"] = packing
            out["bounds"]["packing"] = sum(x["parts"] for x in packing)
    if solution is not None:
        section = explain_memory(problem, solution, memory, memory_sets)
        if section is not None:
            out["memory"] = section
    if lower_bound is not None and lower_bound > out["lower_bound"]:
        out["structural_bound"] = out["lower_bound"]
        out["lower_bound"] = lower_bound
    out["text"] = explain_text(out)
    return out


def _chains(problem: Problem, R, b: Bounds, fixed: bool, max_items: int) -> dict:
    """``chain``, ``breaks``, ``runs`` (and ``through``) of the explanation of ``b``."""
    names = problem.names
    out: dict = {}
    path = path_chain(problem, R, b)
    breaks = []
    for u, v in zip(path, path[1:]):
        if not shared_devices(problem, R, u, v):
            breaks.append(_break(problem, R, u, v, fixed))
    out["chain"] = [{"node": names[v], "op": problem.op_types[v],
                     "devices": [problem.devices[d].name for d in R[v]]} for v in path[:max_items]]
    out["breaks"] = breaks[:max_items]
    if b.kind == "through":
        mid = b.through_node
        runs = []
        for c in range(len(problem.devices)):
            for back in (False, True):
                r = _runs(problem, R, b, c, fixed, mid, back)
                if r["count"]:
                    r["direction"] = "after" if back else "before"
                    runs.append(r)
        out["through"] = names[mid]
    else:
        runs = [_runs(problem, R, b, c, fixed) for c in range(len(problem.devices))
                if b.per_device[c] > 0]
    out["runs"] = runs
    return out


def _packing(problem: Problem, b: Bounds) -> list[dict]:
    """Per memory-limited device, the parts its memory forces (:func:`.bounds.packing`): the
    bytes of the constants (and graph inputs/outputs) of the nodes that must be on it, and the
    constants more than one part must hold, with the readers no part holds together."""
    out = []
    for c, parts in enumerate(b.packing):
        if not parts:
            continue
        shared = [{"constant": problem.const_names[k], "bytes": problem.const_bytes[k],
                   "parts": len(vs), "readers": [problem.names[v] for v in vs]}
                  for k, vs in b.packing_copies.get(c, {}).items()]
        out.append({"device": problem.devices[c].name, "parts": parts,
                    "bytes": b.packing_bytes[c], "memory": problem.devices[c].memory,
                    "runs": b.runs_per_device[c] if b.runs_per_device else 0, "shared": shared})
    return out


def explain_memory(problem: Problem, sol: Solution, mb: MemoryBounds | None = None,
                   R: list[tuple[int, ...]] | None = None) -> dict | None:
    """Why nodes left their preferred device, as data (module doc); None when no device's
    memory can bind.  ``R``: :func:`~.analysis.device_sets` (``fixed=False``), when the
    caller has them."""
    if R is None:
        R = device_sets(problem, fixed=False)
    if not binding_devices(problem, R):
        return None
    mb = mb or memory_bounds(problem, R)
    names, ops, devs = problem.names, problem.op_types, problem.devices
    devices = []
    why_not: dict[int, str] = {}
    for db in mb.devices:
        dev = devs[db.device]
        cannot = []
        least = _least(problem, db.device) if db.cannot else {}
        for v in db.cannot:
            need = least.get(v, 0)
            why_not[v] = (f"no part on {dev.name} holding it fits one instance "
                          f"({format_bytes(dev.memory)}): such a part needs at least "
                          f"{format_bytes(need)}")
            cannot.append({"node": names[v], "op": ops[v], "least_bytes": need})
        devices.append({
            "device": dev.name, "memory": dev.memory, "instances": dev.instances,
            "capacity": db.capacity, "preferred_nodes": db.preferred, "need": db.need,
            "need_possible": db.need_possible,
            "over": max(0, db.need - db.capacity), "cannot_hold": cannot[:MAX_LISTED],
            "cannot_hold_count": len(cannot), "fallback_bound": db.bound})
    mems, _ = part_memories(problem, sol.part_of, sol.num_parts)
    instances = []
    for d, dev in enumerate(devs):
        if dev.memory is None:
            continue
        for i in range(dev.instances):
            parts = [q for q in range(sol.num_parts)
                     if sol.part_device[q] == d and sol.part_instance[q] == i]
            if not parts:
                continue
            instances.append({"device": dev.name, "instance": i, "memory": dev.memory,
                              "used": sum(mems[q] for q in parts), "parts": parts,
                              "largest": _largest_items(problem, sol, parts)})
    moved = []
    node_device = sol.node_device()
    for v in range(problem.n):
        pref = problem.allowed[v][0]
        d = node_device[v]
        if d == pref:
            continue
        if v in why_not:
            why = why_not[v]
        else:
            db = next((x for x in mb.devices if x.device == pref), None)
            if db is not None:
                why = (f"room: the nodes that prefer {devs[pref].name} need "
                       f"{format_bytes(db.need)} as one part, its instances hold "
                       f"{format_bytes(db.capacity)}; those kept need the least memory per node")
            else:
                why = "not memory-bound: the answer trades it for fewer parts"
        moved.append({"node": names[v], "op": ops[v], "from": devs[pref].name,
                      "to": devs[d].name, "why": why})
    return {"fallback": len(moved), "fallback_bound": mb.fallback, "devices": devices,
            "instances": instances, "moved": moved[:MAX_LISTED * 5], "moved_count": len(moved)}


def _least(problem: Problem, d: int) -> dict[int, int]:
    """Per node that no part on ``d`` can hold: the least memory of a part holding it, as
    :func:`~.analysis.device_sets` found it (what any part holds for it, then the minimum
    cut of the fixed point)."""
    cap = problem.devices[d].memory
    out: dict[int, int] = {}
    candidates = []
    for v in range(problem.n):
        if d not in problem.allowed[v]:
            continue
        need = min_part_memory(problem, v)
        if need > cap:
            out[v] = need
        else:
            candidates.append(v)
    out.update(placeable_nodes(problem, d, candidates)[1])
    return out


def _largest_items(problem: Problem, sol: Solution, parts: list[int], k: int = 5) -> list[dict]:
    """The largest constants and boundary tensors held by ``parts`` (what a part's memory counts),
    largest first."""
    items: dict[tuple[str, int, int], int] = {}
    inside = set(parts)
    members = [v for v, q in enumerate(sol.part_of) if q in inside]
    for v in members:
        for c in problem.node_consts[v]:
            items[("constant", c, sol.part_of[v])] = problem.const_bytes[c]
    for q, is_input, t in boundary_tensors(problem, sol.part_of, members):
        items[("input" if is_input else "output", t, q)] = problem.tensor_bytes[t]
    top = sorted(items.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    return [{"kind": kind, "name": (problem.const_names if kind == "constant"
                                    else problem.tensor_names)[i], "part": q, "bytes": size}
            for (kind, i, q), size in top]


def explain_text(ex: dict, limit: int = 40) -> list[str]:
    """The explanation in words, at most ``limit`` breaks per chain (built from the dict alone,
    so ``hetero-solve explain`` can re-render ``partition.json``'s entry)."""
    k, lb, kind = ex["parts"], ex["lower_bound"], ex["bound"]
    lines = [claims_text(ex["claims"]) + "."] if ex.get("claims") else []
    lines.append(f"at least {lb} part(s) are needed; the answer has {k}.")
    if ex.get("structural_bound") is not None:
        lines.append(f"(the solvers showed {lb}; the graph's structure alone shows "
                     f"{ex['structural_bound']}, as follows)")
    breaks, runs = ex.get("breaks", []), ex.get("runs", [])
    if kind == "nonempty":
        lines.append("the model has nodes, and every node is in a part.")
    elif kind == "path" or not runs:
        lines.append(f"a chain of {len(ex.get('chain', []))} node(s) crosses {len(breaks)} forced "
                     f"break(s), so it meets at least {len(breaks) + 1} parts:")
        for i, br in enumerate(breaks[:limit], 1):
            lines.append(f"  {i}. {br['after']} -> {br['before']}: {br['reason']}: {br['detail']}")
        if len(breaks) > limit:
            lines.append(f"  ... and {len(breaks) - limit} more")
    else:
        lines.append("parts on different devices are different, and a part meets a path in one "
                     "stretch; per device, the most separate stretches on one path:")
        through = ex.get("through")
        for r in runs:
            where = {"before": f" on a path into {through}",
                     "after": f" on a path out of {through}"}.get(r.get("direction"), "")
            lines.append(f"  {r['device']}: {r['count']} stretch(es){where}")
            for i, (run, br) in enumerate(zip(r["runs"][1:], r["breaks"]), 1):
                if i > limit:
                    lines.append(f"    ... and {len(r['breaks']) - limit} more")
                    break
                lines.append(f"    {i}. before {run[0]}: {br['reason']}: {br['detail']}")
        for pk in ex.get("packing", []) if kind == "segments" else []:
            if pk["parts"] <= pk["runs"]:
                continue
            line = (f"  {pk['device']}: its memory needs {pk['parts']} part(s) at least: the "
                    f"constants of the nodes that must be on it need {format_bytes(pk['bytes'])}")
            for sh in pk["shared"]:
                line += (f" ({sh['constant']}, {format_bytes(sh['bytes'])}, counted "
                         f"{sh['parts']} times: no part holds its readers {', '.join(sh['readers'])} "
                         f"together with the nodes between them)")
            lines.append(line + f", packed into parts of at most "
                                f"{format_bytes(pk['memory'])} each (bin packing)")
        if kind == "through":
            lines.append(f"  ({through}'s own part is counted on both sides: {lb} in total)")
    if ex.get("memory_parts"):
        lines.append(f"memory: at least {ex['memory_parts']['bound']} part(s): "
                     + ex["memory_parts"]["text"] + ".")
    lines.append(("proof: " if ex.get("proof") else "") + ex.get("proof_text", "") + ".")
    if ex.get("folds"):
        lines.append("optional folds: " + ex["folds"]["text"] + ".")
    if ex.get("memory"):
        lines.extend(memory_text(ex["memory"], limit))
    return lines


def memory_text(mem: dict, limit: int = 40) -> list[str]:
    """The memory section in words (from the dict alone)."""
    own = mem.get("fallback_bound_own_choice")
    lines = [f"memory: {mem['fallback']} node(s) off their preferred device; at least "
             f"{mem['fallback_bound']} must be (no valid partition keeps more on them"
             + (f" under any fold choice; {own} with the answer's, as below" if own else "")
             + ")."]
    for d in mem["devices"]:
        line = (f"  {d['device']} ({d['instances']} x {format_bytes(d['memory'])}): the "
                f"{d['preferred_nodes']} node(s) that prefer it need {format_bytes(d['need'])} "
                f"as one part")
        if d["over"]:
            line += (f", over the {format_bytes(d['capacity'])} its instances hold by "
                     f"{format_bytes(d['over'])}")
        lines.append(line + f"; at least {d['fallback_bound']} of them must leave it")
        for c in d["cannot_hold"][:limit]:
            lines.append(f"    {c['node']} ({c['op']}): no part on {d['device']} holding it "
                         f"fits; the least such part needs {format_bytes(c['least_bytes'])}")
        if d["cannot_hold_count"] > len(d["cannot_hold"][:limit]):
            lines.append(f"    ... and {d['cannot_hold_count'] - len(d['cannot_hold'][:limit])} more")
    for inst in mem["instances"]:
        what = ", ".join(f"{x['kind']} {x['name']} {format_bytes(x['bytes'])}" for x in inst["largest"])
        lines.append(f"  {inst['device']} instance {inst['instance']}: {format_bytes(inst['used'])} "
                     f"of {format_bytes(inst['memory'])} in part(s) {inst['parts']}; largest: {what}")
    groups: dict[tuple[str, str, str], list[str]] = {}
    for m in mem["moved"]:
        groups.setdefault((m["from"], m["to"], m["why"]), []).append(m["node"])
    for (src, dst, why), nodes in groups.items():
        shown = ", ".join(nodes[:10]) + (f" and {len(nodes) - 10} more" if len(nodes) > 10 else "")
        lines.append(f"  moved {src} -> {dst}, {len(nodes)} node(s): {why}: {shown}")
    listed = len(mem["moved"])
    if mem["moved_count"] > listed:
        lines.append(f"  ... and {mem['moved_count'] - listed} more moved")
    return lines


FOLD_PROOFS = {
    True: "the answer is optimal over every fold choice: the problem where each optional fold "
          "costs the cheaper of folded and placed has no better answer",
    False: "not proven over every fold choice (the lower bound holds over all of them)",
}


def with_folds(ex: dict, proven: bool, lower_bound: int,
               fallback_bound: int | None = None) -> dict:
    """``ex`` for an answer that chose among optional folds: ``lower_bound`` is the bound over
    every fold choice (``fallback_bound`` the fallback's, when known), and ``folds`` says
    whether the answer is proven over all of them."""
    ex = dict(ex)
    mem = ex.get("memory")
    if mem and fallback_bound is not None and fallback_bound < mem.get("fallback_bound", 0):
        # the memory section's figures are the answer's own fold choice's: say which is which
        ex["memory"] = {**mem, "fallback_bound": fallback_bound,
                        "fallback_bound_own_choice": mem["fallback_bound"]}
    if lower_bound < ex["lower_bound"]:     # the answer's own problem showed more
        ex.pop("structural_bound", None)
    ex["lower_bound"] = lower_bound
    ex["folds"] = {"proven": proven, "text": FOLD_PROOFS[proven]}
    if not proven and ex.get("proof") and lower_bound < ex["parts"]:
        # what the stages proved holds for the answer's own fold choice only
        ex["proof_text"] = (f"not proven over every fold choice (for the answer's own fold "
                            f"choice: {ex['proof_text']})")
        ex["proof"] = None
    ex["text"] = explain_text(ex)
    return ex


def explain_time(problem: Problem, solution: Solution) -> dict:
    """Where an answer's time goes (the ``time`` entry of the explanation under a cost
    objective, docs/costs.md): per part its device instance, nodes, ``compute``, ``fixed``
    cost and ``transfer`` (:func:`~hetero_solve.measures.costs.latency_by_part`), and the
    critical chain of parts (:func:`~hetero_solve.measures.costs.critical_chain`), in the cost
    model's time unit."""
    sol = solution
    spread = latency_by_part(problem, sol.part_of, sol.part_device)
    sizes = [len(nodes) for nodes in sol.parts()]
    parts = [{"id": k, "device": instance_label(problem.devices[d].name, sol.part_instance[k],
                                                problem.devices[d].instances),
              "nodes": sizes[k], **spread[k]} for k, d in enumerate(sol.part_device)]
    chain, seconds = critical_chain(problem, sol.part_of, sol.part_device)
    return {"parts": parts, "critical_chain": {"parts": chain, "seconds": seconds},
            "one_after_another": sum(sum(s.values()) for s in spread)}


def time_text(section: dict) -> list[str]:
    """:func:`explain_time`'s entry in words (what ``hetero-solve explain`` prints)."""
    lines = [f"  part {row['id']} on {row['device']}: {row['nodes']} node(s): compute "
             f"{format_seconds(row['compute'])}, fixed cost {format_seconds(row['fixed'])}, "
             f"transfers {format_seconds(row['transfer'])}" for row in section["parts"]]
    chain = section["critical_chain"]
    if len(section["parts"]) > 1:
        lines.append(f"critical chain: part {' -> '.join(map(str, chain['parts']))}: "
                     f"{format_seconds(chain['seconds'])} (parts run one after another: "
                     f"{format_seconds(section['one_after_another'])})")
    return lines


def with_memory_parts(ex: dict, lower_bound: int) -> dict:
    """``ex`` for an answer whose parts bound is the memory's (:func:`~hetero_solve.fitting.
    bounds.kept_packing`): the constants of the nodes that stay on their memory-limited
    devices, however the allowed fallback is spent, fill at least that many parts."""
    ex = dict(ex)
    if lower_bound > ex["lower_bound"]:
        ex.setdefault("structural_bound", ex["lower_bound"])
    ex["lower_bound"] = lower_bound
    ex["memory_parts"] = {"bound": lower_bound,
                          "text": "the constants, graph inputs and outputs of the nodes that "
                                  "stay on their memory-limited devices (however the answer's "
                                  "fallback is spent) fill at least that many parts there"}
    ex["text"] = explain_text(ex)
    return ex


def claims(order: list[str], values: dict, proven: list[str], bounds: dict) -> list[dict]:
    """What an answer claims of each objective term, from its records alone (``partition.json``
    holds them all: ``objective``, ``solver.proven``, ``lower_bound``): per term of ``order``
    its ``value``, whether it is ``proven`` and its best proven lower ``bound`` (the value
    when proven, ``None`` when nothing bounds it).  ``order``: the objective's terms (a
    weighted objective: the one entry ``"weighted"``, proven or not as a whole)."""
    out = []
    for term in order:
        ok = term in proven
        value = values.get(term)
        bound = value if ok else bounds.get(term)
        out.append({"term": term, "value": value, "proven": ok, "bound": bound})
    return out


#: Why a term is not proven: the search ran out of budget, or (``"sizes"``) it is proven for
#: the sizes counted but a memory-limited part holds a tensor of unknown size.
UNPROVEN = {"limit": "not proven within the limit",
            "sizes": "not proven (proven only if the tensors of unknown size are 1 element)"}


def answer_claims(problem: Problem, stats: dict, lower_bound: int | None,
                  values: dict) -> list[dict]:
    """:func:`claims` of an answer: its objective ``values`` (``Metrics.as_dict()``), its
    solver ``stats`` (``proven``, ``bounds``, ``cost_bounds``) and parts ``lower_bound``."""
    obj = problem.objective
    bounds = {"partitions": lower_bound, **stats.get("cost_bounds", {})}
    if "fallback" in stats.get("bounds", {}):
        bounds["fallback"] = stats["bounds"]["fallback"]
    proven = list(stats.get("proven", []))
    if obj.lexicographic:
        out = claims(list(obj.order), values, proven, bounds)
    else:
        out = claims(["weighted"], {"weighted": obj.key(values)[0]}, proven, bounds)
    if_sizes = set(stats.get("proven_if_sizes_hold", []))
    for c in out:
        if not c["proven"]:
            c["why"] = "sizes" if c["term"] in if_sizes else "limit"
    return out


def _term_text(c: dict) -> str:
    term, v = c["term"], c["value"]
    if term == "transfer" and v is not None:
        return f"transfer {format_bytes(v)}"
    if term == "partitions":
        return f"parts {v}"
    if term in ("latency", "throughput") and isinstance(v, (int, float)):
        return f"{term} {format_seconds(v)}"
    return f"{term} {v:g}" if isinstance(v, (int, float)) else term


def claims_text(cs: list[dict]) -> str:
    """One line: the proven terms, then the unproven with their best bounds (``proven: parts
    6, fallback 1; not proven within the limit: transfer 661.4 KiB (no bound)``)."""
    done = [_term_text(c) for c in cs if c["proven"]]
    open_: dict[str, list[str]] = {}
    for c in cs:
        if c["proven"]:
            continue
        b = c["bound"]
        shown = ("no bound" if b is None else
                 f"bound {format_bytes(b)}" if c["term"] == "transfer" else
                 f"bound {format_seconds(b)}" if c["term"] in ("latency", "throughput") else
                 f"bound {b:g}")
        open_.setdefault(c.get("why", "limit"), []).append(f"{_term_text(c)} ({shown})")
    parts = []
    if done:
        parts.append("proven: " + ", ".join(done))
    for why, texts in open_.items():
        parts.append(UNPROVEN[why] + ": " + ", ".join(texts))
    return "; ".join(parts)
