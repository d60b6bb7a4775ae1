"""Device choices with few device changes along paths, turned into answers (docs/exact.md,
"Its device choice is also the best start for an answer").

The fallback and partitions stages both ask the segment model (:func:`..assign.relaxed_parts`)
for the device choice with the fewest device segments under a fallback cap, and turn it into
parts: regrouped (:func:`~hetero_solve.fitting.realize.realize`), cut into runs kept or dropped
(:func:`~hetero_solve.fitting.realize.fit_by_runs`), and, when those miss, the full model with every device fixed
(:func:`fixed_devices`).
"""

from __future__ import annotations

from ...budget import Budget
from .. import cpsat
from ...fitting.floors import binding_devices
from ..assign import relaxed_parts
from ..bounds import lower_bounds
from ..encoding import Encoding
from ..runner import model_size
from ...algorithms.greedy import parts_without_memory
from ...fitting.realize import fit_by_runs, realize
from ..search import Search
from ...solution import objective_key

FIXED_SECONDS = 1.0        # deterministic seconds for the fixed-device model at most
FIXED_EXTRA_SLOTS = 2      # ... slots beyond the greedy's parts of the device choice
FIXED_VARIABLES = 20_000   # ... and its size at most (about)


def segment_devices(ctx: Search, runs: list[dict], R, mem, cap: int, budget: Budget,
                    label: str):
    """:func:`..assign.relaxed_parts` with fallback at most ``cap``: its bound (returned, a
    :class:`..assign.PartsBound`), and its device choice turned into parts
    (:func:`~hetero_solve.fitting.realize.realize`, and runs kept or dropped) as candidate answers: few device
    changes along paths is what lets the parts fit (ddddocr-det on the 3 MiB NPU:
    [215, 9] -> [213, 6], both at their bounds)."""
    ctx.say(f"{label}: relaxed assignment model, fewest device segments with "
            f"fallback <= {cap}")
    work = budget.left()
    r = relaxed_parts(ctx.p, R, mem, cap, budget=budget, seed=ctx.seed)
    runs.append({"engine": "relaxed parts", "bound": r.bound, **r.stats})
    if r.node_device is not None:
        for how, build in (("realize", lambda p, d, steps: realize(
                p, d, parts=parts_without_memory(p, d), steps=steps)),
                           ("runs", lambda p, d, steps: fit_by_runs(
                               p, parts_without_memory(p, d), budget=budget, steps=steps))):
            if ctx.guard():
                break
            sol = ctx.counted(budget, build, ctx.p, r.node_device)
            ctx.guard()    # past it, the runs' bisection stopped early
            kept = ctx.accept(sol, "exact-runs", runs)
            runs.append({"engine": "runs", "from": f"segments ({how})",
                         "objective": list(objective_key(ctx.p, sol)) if sol else None,
                         "kept": kept})
        m = ctx.metrics()
        if not ctx.valid or m["fallback"] > cap or m["partitions"] > r.bound:
            fixed_devices(ctx, runs, r.node_device, budget.allot(min(FIXED_SECONDS, work / 2)))
    return r


def fixed_devices(ctx: Search, runs: list[dict], devices: list[int], budget: Budget) -> None:
    """The fewest parts with every node's device fixed (``R(v) = (devices[v],)``): the
    full model, but small (the windows of a fixed device choice are narrow; 900
    variables on a 169-node BERT), with slots for a few parts more than the greedy's
    extensions of those devices.  Where runs cut a device choice into too many parts
    (bert-small-legacy on the 3 MiB NPU: the greedy's parts did not fit at fallback 83,
    these do, in 13 parts), CP-SAT finds the parts that fit."""
    if budget.left() <= 0.01 or ctx.guard():
        return
    Rf = [(d,) for d in devices]
    memf = binding_devices(ctx.p, Rf)
    bf = lower_bounds(ctx.p, Rf, memf)
    K = parts_without_memory(ctx.p, devices).num_parts + FIXED_EXTRA_SLOTS
    if model_size(ctx.p, K, bf, ("partitions",), memf) > FIXED_VARIABLES:
        return
    enc = Encoding(ctx.p, Rf, K, bf, terms=("partitions",), memory_devices=tuple(memf))
    r = cpsat.solve(enc, {"partitions": 1}, budget=budget, seed=ctx.seed)
    kept = ctx.accept(r.solution, "exact-fixed-devices", runs) if r.solution else False
    runs.append({"engine": "cpsat (devices fixed)", "slots": K, "kept": kept,
                 **{k: r.stats[k] for k in ("status", "variables", "deterministic_time")
                    if k in r.stats}})
