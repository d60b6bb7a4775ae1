"""The boolean model both exact engines solve: the ordinal model in order encoding, with windows.

A solution with at most ``K`` parts is a slot ``p(v)`` in ``0..K-1`` per node such that every
edge goes to the same or a later slot, strictly when its ends cannot share a part (dagP's
characterisation of acyclic quotients; docs/exact.md, "The model").  Built in
small named steps:

1. ``_order``: ``ge[v,j] = [p(v) >= j]`` only inside the node's window ``top[v] .. K-1-bottom[v]``
   (:mod:`~hetero_solve.exact.bounds`), with ``ge[v,j] -> ge[v,j-1]``.
2. ``_slots``: one device per slot (``y[j,d]``, at most one), used slots form a prefix, the first
   ``lb`` slots are used.
3. ``_edges``: ``ge[u,j] -> ge[v,j]`` per edge, ``ge[u,j] -> ge[v,j+1]`` when the ends cannot
   share a part; a value edge whose ends could share a part only on devices that ignore value
   inputs gets ``u, v both in j -> y[j, one of those]``.
4. ``_devices``: ``v in j -> y[j, d]`` for some ``d`` in ``R(v)`` (support and pins; fallback
   when the device is not the preferred one).
5. ``_transfer``: a tensor crosses into slot ``j`` when a consumer is in ``j`` and its producer is
   earlier (single-consumer tensors get one literal ``[p(c) > p(u)]``).
6. ``_memory`` (a part's memory, docs/exact.md): per slot, literals for each distinct
   constant, input tensor and output tensor of the part, so shared constants count once per
   part and boundary tensors are exact; slots are assigned to instances (instance ``i`` only
   from slot ``i`` on: symmetry); the engines add the capacity per instance in their own way.

Auxiliary literals are *defined* one-sidedly (``body -> head``): the objective and the
capacities only ever push them down, so their minimal value is their meaning; :func:`hint_values`
computes exactly that from a solution, giving the solvers a complete warm start, and
:func:`decode` reads a solution back from the solvers' values.

>>> from hetero_solve.problem import make_problem
>>> from hetero_solve.exact.bounds import lower_bounds
>>> p = make_problem(3, [(0, 1), (1, 2)], [[0], [1], [0]])
>>> R = [(a[0],) for a in p.allowed]
>>> enc = Encoding(p, R, 3, lower_bounds(p, R), terms=("partitions",))
>>> enc.windows()
[(0, 0), (1, 1), (2, 2)]
"""

from __future__ import annotations

from ..fitting.floors import slot_items
from ..problem import Problem
from ..solution import Solution
from .analysis import shared_devices
from .bounds import Bounds

Lit = "int | bool"


def neg(x):
    return (not x) if isinstance(x, bool) else -x


class Encoding:
    """Variables are positive ints ``1..nv``; a literal is ``+x``/``-x`` or a Python bool."""

    def __init__(self, problem: Problem, R: list[tuple[int, ...]], K: int, bounds: Bounds, *,
                 terms: tuple[str, ...] = ("partitions",), memory_devices: tuple[int, ...] = (),
                 lb_parts: int | None = None):
        self.problem = problem
        self.R = R
        self.K = K
        self.n = problem.n
        self.terms = set(terms)
        self.memory_devices = tuple(memory_devices)
        self.lo = [bounds.top[v] for v in range(self.n)]
        self.hi = [K - 1 - bounds.bottom[v] for v in range(self.n)]
        self.lb = max(1 if self.n else 0, lb_parts if lb_parts is not None else bounds.lb)
        self.per_device_lb = list(bounds.per_device)
        self.nv = 0
        self.clauses: list[list[int]] = []
        self.amo: list[list[int]] = []
        self.defs: list[tuple[int, list]] = []     # (head, body): AND(body) -> head
        self.infeasible = any(self.lo[v] > self.hi[v] for v in range(self.n)) or self.lb > K
        self.ge: list[list[int]] = []
        self.y: list[dict[int, int]] = []
        self.used: list = []
        self.fallback: list[tuple[int, int]] = []
        self.fallback_const = 0
        self.transfer: list[tuple[int, int]] = []
        self.items: list[dict] = []                 # slot -> key -> (bytes, var)
        self.inst: dict[int, list[list]] = {}       # device -> slot -> instance literals
        self._aux: dict = {}
        if self.infeasible:
            return
        self._order()
        self._slots()
        self._edges()
        self._devices()
        if "fallback" in self.terms:
            self._fallback()
        if "transfer" in self.terms:
            self._transfer()
        if self.memory_devices:
            _memory(self)

    # -- basics ------------------------------------------------------------------------------
    def var(self) -> int:
        self.nv += 1
        return self.nv

    def GE(self, v: int, j: int):
        """Literal ``p(v) >= j``."""
        lo = self.lo[v]
        if j <= lo:
            return True
        if j > self.hi[v]:
            return False
        return self.ge[v][j - lo - 1]

    def clause(self, lits) -> None:
        out = []
        for x in lits:
            if x is True:
                return
            if x is not False:
                out.append(x)
        if not out:
            self.infeasible = True
        else:
            self.clauses.append(out)

    def define(self, head: int, body) -> None:
        """``AND(body) -> head`` (a vacuous body with a False literal is dropped)."""
        b = []
        for x in body:
            if x is False:
                return
            if x is not True:
                b.append(x)
        self.defs.append((head, b))
        self.clauses.append([-x for x in b] + [head])

    def aux(self, key) -> int:
        x = self._aux.get(key)
        if x is None:
            x = self._aux[key] = self.var()
        return x

    def windows(self) -> list[tuple[int, int]]:
        return list(zip(self.lo, self.hi))

    # -- the model, step by step ---------------------------------------------------------------
    def _order(self) -> None:
        for v in range(self.n):
            lits = [self.var() for _ in range(self.lo[v] + 1, self.hi[v] + 1)]
            self.ge.append(lits)
            for a, b in zip(lits[1:], lits):
                self.clauses.append([-a, b])            # p >= j  ->  p >= j-1

    def _slots(self) -> None:
        devs_at: list[set[int]] = [set() for _ in range(self.K)]
        for v in range(self.n):
            for j in range(self.lo[v], self.hi[v] + 1):
                devs_at[j].update(self.R[v])
        for j in range(self.K):
            yj = {d: self.var() for d in sorted(devs_at[j])}
            self.y.append(yj)
            if len(yj) > 1:
                self.amo.append(list(yj.values()))
            if j < self.lb:
                self.used.append(True)
                continue
            u = self.var()
            self.used.append(u)
            for x in yj.values():
                self.clauses.append([-x, u])
            if j > 0 and self.used[j - 1] is not True:
                self.clauses.append([-u, self.used[j - 1]])   # used slots: a prefix

    def _in(self, v: int, j: int) -> list:
        """Body literals of ``p(v) == j``."""
        return [self.GE(v, j), neg(self.GE(v, j + 1))]

    def _edges(self) -> None:
        p, R = self.problem, self.R
        for u in range(self.n):
            for v in p.succ[u]:
                share = shared_devices(p, R, u, v)
                if not share:
                    for j in range(self.lo[v], self.hi[u] + 1):
                        self.clause([neg(self.GE(u, j)), self.GE(v, j + 1)])
                    continue
                for j in range(self.lo[v] + 1, self.hi[u] + 1):
                    self.clause([neg(self.GE(u, j)), self.GE(v, j)])
                common = [d for d in R[u] if d in R[v]]
                if len(share) < len(common):   # a value edge, some common devices enforce
                    for j in range(max(self.lo[u], self.lo[v]), min(self.hi[u], self.hi[v]) + 1):
                        self.clause([neg(self.GE(u, j)), self.GE(v, j + 1)]
                                    + [self.y[j][d] for d in share if d in self.y[j]])

    def _devices(self) -> None:
        for v in range(self.n):
            for j in range(self.lo[v], self.hi[v] + 1):
                yj = self.y[j]
                self.clause([neg(self.GE(v, j)), self.GE(v, j + 1)]
                            + [yj[d] for d in self.R[v] if d in yj])

    def _fallback(self) -> None:
        p = self.problem
        for v in range(self.n):
            pref = p.allowed[v][0]
            if pref not in self.R[v]:
                self.fallback_const += 1
                continue
            if len(self.R[v]) == 1:
                continue
            f = self.var()
            self.fallback.append((1, f))
            for j in range(self.lo[v], self.hi[v] + 1):
                self.define(f, self._in(v, j) + [neg(self.y[j].get(pref, False))])

    def _transfer(self) -> None:
        p = self.problem
        for t, u in enumerate(p.tensor_producer):
            size = p.tensor_bytes[t]
            cons = [c for c in p.tensor_consumers[t] if c != u]
            if u < 0 or size == 0 or not cons:
                continue
            if len(cons) == 1:
                c = cons[0]
                z = self.var()
                for j in range(self.lo[u] + 1, self.hi[c] + 1):
                    self.define(z, [self.GE(c, j), neg(self.GE(u, j))])
                self.transfer.append((size, z))
                continue
            for j in range(self.lo[u] + 1, max(self.hi[c] for c in cons) + 1):
                z = None
                for c in cons:
                    if self.lo[c] <= j <= self.hi[c]:
                        z = z or self.aux(("in", t, j))
                        self.define(z, self._in(c, j) + [neg(self.GE(u, j))])
                if z is not None:
                    self.transfer.append((size, z))

    # -- terms ---------------------------------------------------------------------------------
    def term(self, name: str) -> tuple[list[tuple[int, int]], int]:
        """``(weighted literals, constant)`` of an objective term."""
        if name == "partitions":
            lits = [(1, u) for u in self.used if u is not True]
            return lits, sum(1 for u in self.used if u is True)
        if name == "fallback":
            return list(self.fallback), self.fallback_const
        if name == "transfer":
            return list(self.transfer), 0
        raise ValueError(name)


def _memory(enc: Encoding) -> None:
    """Step 6 of the build (module doc): per slot the memory items of the nodes that may be
    in it, and per limited device and slot the instance literals."""
    p, R = enc.problem, enc.R
    mem = set(enc.memory_devices)
    enc.items = [dict() for _ in range(enc.K)]
    for v in range(enc.n):
        if not mem.intersection(R[v]):
            continue
        node_items = list(slot_items(p, v))
        for j in range(enc.lo[v], enc.hi[v] + 1):
            here = enc._in(v, j)
            items = enc.items[j]
            for kind, i, nbytes in node_items:
                if kind == "c":
                    bodies = [here]
                elif kind == "in":
                    u = p.tensor_producer[i]
                    bodies = [here if u < 0 else here + [neg(enc.GE(u, j))]]
                else:
                    bodies = [here] if p.tensor_is_output[i] else []
                    bodies += [here + [enc.GE(c, j + 1)] for c in p.tensor_consumers[i]]
                if kind != "c":     # a constant's item is made even where v cannot be
                    bodies = [b for b in bodies if False not in b]
                    if not bodies:
                        continue
                key = (kind, i, j)
                x = enc.aux(key)
                items[key] = (nbytes, x)
                for b in bodies:
                    enc.define(x, b)
    for d in enc.memory_devices:
        count = p.devices[d].instances
        per_slot = []
        for j in range(enc.K):
            yd = enc.y[j].get(d)
            if yd is None:
                per_slot.append([])
                continue
            if count == 1:
                per_slot.append([yd])
                continue
            a = [enc.var() for _ in range(min(count, j + 1))]
            for x in a:
                enc.clauses.append([-x, yd])
            enc.clauses.append([-yd] + a)
            if len(a) > 1:
                enc.amo.append(a)
            per_slot.append(a)
        enc.inst[d] = per_slot


# -- solutions (reading an encoding) ------------------------------------------------------------
def hint_values(enc: Encoding, sol: Solution) -> dict[int, bool] | None:
    """Every variable's value for ``sol`` (auxiliaries at their minimal value), or None
    when ``sol`` does not fit the windows."""
    if enc.infeasible or len(sol.part_of) != enc.n or sol.num_parts > enc.K:
        return None
    p = sol.part_of
    if any(not (enc.lo[v] <= p[v] <= enc.hi[v]) or sol.part_device[p[v]] not in enc.R[v]
           for v in range(enc.n)):
        return None
    val: dict[int, bool] = {}
    for v in range(enc.n):
        for k, x in enumerate(enc.ge[v]):
            val[x] = p[v] >= enc.lo[v] + 1 + k
    k = sol.num_parts
    for j in range(enc.K):
        for d, x in enc.y[j].items():
            val[x] = j < k and sol.part_device[j] == d
        if enc.used[j] is not True:
            val[enc.used[j]] = j < k
    for d, per_slot in enc.inst.items():
        relabel: dict[int, int] = {}
        for j, a in enumerate(per_slot):
            if len(a) <= 1:
                continue
            on = j < k and sol.part_device[j] == d
            i = relabel.setdefault(sol.part_instance[j], len(relabel)) if on else -1
            for q, x in enumerate(a):
                val[x] = on and q == i
    for x in range(1, enc.nv + 1):
        val.setdefault(x, False)

    def lit(x) -> bool:
        return val[x] if x > 0 else not val[-x]

    for head, body in enc.defs:
        if not val[head] and all(lit(x) for x in body):
            val[head] = True
    return val

def decode(enc: Encoding, value) -> Solution:
    """A solution from an assignment (``value(var) -> bool``); not normalized."""
    part_of = []
    for v in range(enc.n):
        j = enc.lo[v]
        for x in enc.ge[v]:
            if not value(x):
                break
            j += 1
        part_of.append(j)
    part_device = []
    part_instance = []
    for j in range(enc.K):
        d = next((d for d, x in enc.y[j].items() if value(x)), -1)
        i = 0
        if d in enc.inst:
            a = enc.inst[d][j]
            if len(a) > 1:
                i = next((q for q, x in enumerate(a) if value(x)), 0)
        part_device.append(d)
        part_instance.append(i)
    used = sorted(set(part_of))
    new = {j: q for q, j in enumerate(used)}
    return Solution([new[j] for j in part_of], [part_device[j] for j in used],
                    [part_instance[j] for j in used])
