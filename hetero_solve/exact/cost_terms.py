"""The objective's terms of the cost model (:mod:`.costs`): each a linear expression over the
model's literals, times scaled to integers and rounded down (the module doc of :mod:`.costs`
says why that keeps the solver's bound a true lower bound)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

TOTAL_BITS = 40         # scaled totals stay below 2**TOTAL_BITS


@dataclass
class Term:
    """A stage objective: ``Σ coef * var`` (already integer, scaled when ``timed``)."""
    coefs: list
    variables: list
    timed: bool
    rounded: int = 0      # how many coefficients were rounded down
    where: dict = field(default_factory=dict)   # variable index -> position (merged terms)


def scaled(model, t: float) -> int:
    """A time as a model coefficient, rounded down (module doc)."""
    return math.floor(t * model.scale)

def stage_term(model, name: str) -> Term:
    """The expression of one objective term (``timed``: scaled by ``model.scale``)."""
    p = model.p
    if name == "fallback":
        return Term([1] * p.n + [-1] * p.n, [1] * p.n + [model.dv(v, p.preferred(v))
                                                            for v in range(p.n)], False)
    if name == "partitions":
        return Term([1] * model.K, list(model.used), False)
    if name == "transfer":
        pairs = [(p.tensor_bytes[t], model.enter(t, j)) for t, u in enumerate(p.tensor_producer)
                 if u >= 0 and p.tensor_bytes[t] for j in range(model.K)]
        pairs = [(c, x) for c, x in pairs if x is not model._zero]   # outside every window
        return Term([c for c, _ in pairs], [x for _, x in pairs], False)
    if name == "latency":
        return _latency(model)
    if name == "throughput":
        return _throughput(model)
    raise ValueError(f"unknown objective term {name!r}")

def _add(model, term: Term, t: float, var) -> None:
    """``term += t * var``, scaled; one coefficient per variable (none for a slot outside
    every window: the constant 0)."""
    if var is model._zero:
        return
    c = scaled(model, t)
    if c:
        k = term.where.get(var.Index())
        if k is None:
            term.where[var.Index()] = len(term.coefs)
            term.coefs.append(c)
            term.variables.append(var)
        else:
            term.coefs[k] += c
    if c != t * model.scale:
        term.rounded += 1

def _node_times(model, term: Term, g: int | None = None) -> None:
    for v in range(model.p.n):
        for h, lit in model.ni[v].items():
            if g is None or h == g:
                _add(model, term, model.c.time(v, model.G[h][0]), lit)

def _latency(model) -> Term:
    p, m, c, K = model.p, model.m, model.c, model.K
    term = Term([], [], True)
    _node_times(model, term)
    for j in range(K):
        for g, lit in model.b[j].items():
            _add(model, term, c.part_cost[model.G[g][0]], lit)
    for t, u in enumerate(p.tensor_producer):
        if u < 0 or not p.tensor_consumers[t]:
            continue
        cross = None
        for d in range(len(p.devices)):
            tau = c.tensor_time(d, t, p.tensor_bytes)
            if tau <= 0:
                continue
            if d in p.allowed[u]:                       # written out once
                if cross is None:
                    cross = m.NewBoolVar("")
                    for j in range(K):
                        if model.may_enter(t, j):
                            m.AddImplication(model.enter(t, j), cross)
                out = m.NewBoolVar("")
                m.Add(out >= cross + model.dv(u, d) - 1)
                _add(model, term, tau, out)
            for j in range(K):                          # read in by each part on d
                if not model.may_enter(t, j):
                    continue
                on_d = [x for g, x in model.b[j].items() if model.G[g][0] == d]
                lit = m.NewBoolVar("")
                m.Add(lit >= model.enter(t, j) + sum(on_d) - 1)
                _add(model, term, tau, lit)
    return term

def _stage_loads(model, top) -> tuple[int, int]:
    """Contiguous stages: ``top >= load`` of each slot on each device it may take; the
    most rounding in one load and the largest load possible."""
    p, m, c, K = model.p, model.m, model.c, model.K
    worst = most = 0
    for j in range(K):
        for d in range(len(p.devices)):
            load = Term([], [], True)
            for v in range(p.n):
                if d in p.allowed[v]:
                    _add(model, load, c.time(v, d), model.x[v][j])
            _add(model, load, c.part_cost[d], model.b[j][d])
            for t, u in enumerate(p.tensor_producer):
                tau = c.tensor_time(d, t, p.tensor_bytes)
                if u >= 0 and tau > 0 and p.tensor_consumers[t]:
                    _add(model, load, tau, model.enter(t, j))
                    _add(model, load, tau, sent(model, t, j))
            m.Add(top >= sum(a * x for a, x in zip(load.coefs, load.variables))
                  ).OnlyEnforceIf(model.b[j][d])
            worst = max(worst, load.rounded)
            most = max(most, sum(load.coefs))
    return worst, most

def sent(model, t: int, j: int):
    """A literal bounded from below: tensor ``t`` is made in slot ``j`` and read in another
    (graph outputs aside: the transfer out of :mod:`hetero_solve.measures.costs`)."""
    u = model.p.tensor_producer[t]
    if not model.free(u, j):
        return model.zero

    def build(lit):
        for r in model.p.tensor_consumers[t]:
            model.m.Add(lit >= model.x[u][j] - model.x[r][j])
    return model.literal(("sent", t, j), build)

def _throughput(model) -> Term:
    p, m, c, K = model.p, model.m, model.c, model.K
    top = m.NewIntVar(0, 2 ** (TOTAL_BITS + 1), "time_per_sample")
    if model.stages:
        rounded, most = _stage_loads(model, top)
        m.Add(top <= most)
        return Term([1], [top], True, rounded)
    worst = 0
    for g, (d, _) in enumerate(model.G):
        load = Term([], [], True)
        _node_times(model, load, g)
        for j in range(K):
            _add(model, load, c.part_cost[d], model.b[j][g])
        for t, u in enumerate(p.tensor_producer):
            tau = c.tensor_time(d, t, p.tensor_bytes)
            if u < 0 or tau <= 0 or not p.tensor_consumers[t]:
                continue
            mine = model.ni[u].get(g)
            if mine is not None:                        # made here, read elsewhere
                out = m.NewBoolVar("")
                for r in p.tensor_consumers[t]:
                    m.Add(out >= mine - model.ni[r].get(g, 0))
                _add(model, load, tau, out)
            readers = [model.ni[r][g] for r in p.tensor_consumers[t] if g in model.ni[r]]
            if readers:                                 # read here, made elsewhere
                into = m.NewBoolVar("")
                for x in readers:
                    m.Add(into >= x - (mine if mine is not None else 0))
                _add(model, load, tau, into)
        m.Add(top >= sum(a * x for a, x in zip(load.coefs, load.variables)))
        worst = max(worst, load.rounded)
    return Term([1], [top], True, worst)
