"""Why a model needs at least k parts: the chain behind the lower bound, in words and as data.

The bound (:mod:`~hetero_solve.exact.bounds`) is a path of nodes; every part meets a path in one
contiguous stretch, so each *forced break* along it starts a new part:

* ``device``: the two nodes have no device in common (support, pins, or, when fallback is
  already minimal at 0, their preferred devices differ);
* ``value``: the second node needs the *value* of the first one's output when its part is
  compiled, and every device they could share enforces value inputs (SPEC section 4);
* ``memory``: the constants and graph inputs/outputs of the stretch would not fit one instance
  of the device (SPEC section 5).

When the optimum is above the bound, the rest of the proof is the solver's exhaustive search
(``proof`` says which); the chain still shows where the bound comes from.

The dict goes into ``partition.json`` as ``"explain"``; ``text`` is what ``hetero-solve explain``
prints.
"""

from __future__ import annotations

from ..problem import Problem
from .analysis import shared_devices
from .bounds import Bounds, path_chain, run_chain

PROOFS = {
    "bound": "the lower bound equals the number of parts",
    "sequence": "an exhaustive search over device sequences found no partition with fewer parts",
    "cpsat": "CP-SAT proved that no partition has fewer parts",
    "sat": "the SAT solver proved that no partition has fewer parts",
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
                                 f"{problem.devices[c].name}: "
                                 + (problem.why_not(v, c) or "(its preferred device is "
                                    f"{problem.devices[R[v][0]].name})")}
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
                                         f"({problem.devices[c].memory} bytes)"}
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


def explain(problem: Problem, R: list[tuple[int, ...]], b: Bounds, parts: int, *,
            proof: str | None, fixed: bool, max_items: int = 2000) -> dict:
    """The ``explain`` dict (module doc).  ``parts``: the answer's number of parts; ``proof``:
    a key of :data:`PROOFS` (``None`` when the optimum is not proven)."""
    names = problem.names
    out: dict = {"parts": parts, "lower_bound": b.lb, "bound": b.kind,
                 "proof": proof, "proof_text": PROOFS.get(proof, str(proof)),
                 "devices_fixed": fixed,
                 "bounds": {"path": b.lb_path, "segments": b.lb_segments, "through": b.lb_through}}
    if problem.n == 0:
        out.update(chain=[], breaks=[], runs=[], text=["an empty model needs no part"])
        return out
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
    out["text"] = explain_text(out)
    return out


def explain_text(ex: dict, limit: int = 40) -> list[str]:
    """The explanation in words, at most ``limit`` breaks per chain (built from the dict alone,
    so ``hetero-solve explain`` can re-render ``partition.json``'s entry)."""
    k, lb, kind = ex["parts"], ex["lower_bound"], ex["bound"]
    lines = [f"at least {lb} part(s) are needed; the answer has {k}."]
    breaks, runs = ex.get("breaks", []), ex.get("runs", [])
    if kind == "path" or not runs:
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
        if kind == "through":
            lines.append(f"  ({through}'s own part is counted on both sides: {lb} in total)")
    lines.append(("proof: " if ex.get("proof") else "") + ex.get("proof_text", "") + ".")
    return lines
