"""SAT engine (python-sat, Glucose 4): the same encoding as CP-SAT, solved by a decreasing bound.

The clauses of :class:`~.encoding.Encoding` go to Glucose as they are.  Weighted sums (memory
per device instance, caps of earlier stages, the stage objective) are encoded with a binary adder
network (Warners 1998; Een and Sorensson 2006, "Translating pseudo-Boolean constraints into
SAT"): each weighted literal feeds the columns of its weight's set bits, full and half adders
reduce every column to one bit, and ``sum <= B`` is one clause per zero bit of ``B`` (the sum
exceeds ``B`` iff at the highest bit where they differ the sum has a 1).  ``python-sat``'s own
``pysat.pb`` needs the optional ``pindakaas`` package, which this product does not require.

Minimisation: from the hint's value (or the first model found), ask for ``objective <= best - 1``
under an assumption literal that activates that comparator; SAT gives a better solution, UNSAT
proves the best optimal.  For the number of parts the bound is simply ``not used[k]`` (used slots
form a prefix), which is what made SAT fast at the K-1 proofs (docs/exact.md, "Measured").

Determinism: Glucose is run with a *conflict* budget (``CONFLICTS_PER_SECOND`` per deterministic
second its :class:`~hetero_solve.budget.Budget` has left) and a *propagation* budget
(``PROPAGATIONS_PER_SECOND``: a conflict can cost many propagations on a large model), not a
clock, so the same input gives the same answer on any machine; the budget's deadline
(``--time-limit``) interrupts it only when the clock ends first (then ``deterministic:
False`` in the stats).  The run charges its work (search and build) to its budget.  Ctrl-C interrupts Glucose and raises
:class:`KeyboardInterrupt` (:func:`~hetero_solve.interrupt.run_stoppable`).

>>> from hetero_solve.problem import make_problem
>>> from hetero_solve.exact.bounds import lower_bounds
>>> from hetero_solve.exact.encoding import Encoding
>>> p = make_problem(4, [(0, 2), (1, 3)], [[0], [1], [1], [0]])
>>> R = [(a[0],) for a in p.allowed]
>>> r = solve(Encoding(p, R, 4, lower_bounds(p, R)), {"partitions": 1})
>>> r.value, r.optimal
(3, True)
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable

from ..budget import CLAUSES_PER_SECOND, Budget
from ..interrupt import run_stoppable
from ..solution import Solution
from .cpsat import EngineResult, stage_value
from .encoding import Encoding, decode, hint_values

if TYPE_CHECKING:
    from pysat.solvers import Solver

CONFLICTS_PER_SECOND = 10000   # about what Glucose does here on mid-sized models
PROPAGATIONS_PER_SECOND = 20_000_000   # ... and propagations (Glucose: 10-50 million a second)


class _CNF:
    """Clauses with fresh variables after the encoding's own."""

    def __init__(self, enc: Encoding, solver: Solver):
        self.nv = enc.nv
        self.solver = solver
        self.added = 0          # clauses added: the build's deterministic cost (:mod:`hetero_solve.budget`)

    def var(self) -> int:
        self.nv += 1
        return self.nv

    def add(self, clause: list[int]) -> None:
        self.added += 1
        self.solver.add_clause(clause)

    # -- adders ----------------------------------------------------------------------------
    def full_adder(self, a: int, b: int, c: int) -> tuple[int, int]:
        """``s = a xor b xor c``, ``k = majority(a, b, c)``, both as equivalences."""
        s, k = self.var(), self.var()
        for clause in ([-a, -b, -c, s], [-a, b, c, s], [a, -b, c, s], [a, b, -c, s],
                       [a, b, c, -s], [-a, -b, c, -s], [-a, b, -c, -s], [a, -b, -c, -s],
                       [-a, -b, k], [-a, -c, k], [-b, -c, k], [a, b, -k], [a, c, -k], [b, c, -k]):
            self.add(clause)
        return s, k

    def half_adder(self, a: int, b: int) -> tuple[int, int]:
        s, k = self.var(), self.var()
        self.add([-a, -b, -s])
        self.add([a, b, -s])
        self.add([-a, b, s])
        self.add([a, -b, s])
        self.add([-a, -b, k])
        self.add([a, -k])
        self.add([b, -k])
        return s, k

    def sum_bits(self, terms: list[tuple[int, int]]) -> list[int]:
        """Bits (least significant first) of ``sum w * lit`` for ``w > 0``."""
        cols: dict[int, list[int]] = {}
        for w, x in terms:
            if w < 0:       # sizes are bytes; a negative one is a bug upstream, not a weight
                raise ValueError(f"negative weight {w} in a sum")
            k = 0
            while w:
                if w & 1:
                    cols.setdefault(k, []).append(x)
                w >>= 1
                k += 1
        bits: list[int] = []
        k = 0
        while k <= max(cols, default=-1):
            col = cols.get(k, [])
            while len(col) >= 2:
                if len(col) >= 3:
                    s, c = self.full_adder(col.pop(), col.pop(), col.pop())
                else:
                    s, c = self.half_adder(col.pop(), col.pop())
                col.append(s)
                cols.setdefault(k + 1, []).append(c)
            bits.append(col[0] if col else 0)
            k += 1
        return bits

    def contradiction(self, act: int | None = None) -> None:
        """Make the formula unsatisfiable (under ``act`` when given)."""
        if act:
            self.add([-act])
            return
        x = self.var()
        self.add([x])
        self.add([-x])

    def at_most(self, bits: list[int], bound: int, act: int | None = None) -> None:
        """``sum <= bound`` over the bits of a sum (guarded by ``act`` when given)."""
        if bound < 0:
            self.contradiction(act)
            return
        guard = [-act] if act else []
        ones = [k for k in range(bound.bit_length()) if bound >> k & 1]
        for i, x in enumerate(bits):
            if not x or bound >> i & 1:
                continue
            higher = [j for j in ones if j > i]
            if any(j >= len(bits) or not bits[j] for j in higher):
                continue        # a higher 1-bit of the bound the sum cannot reach: fine
            self.add(guard + [-x] + [-bits[j] for j in higher])


def build_cost(enc: Encoding, weights: dict[str, int], caps: dict[str, int] | None = None
               ) -> int:
    """About how many clauses :func:`solve` adds for this stage (without building them): the
    encoding's, the pairwise at-most-ones, and the adder networks (about eleven clauses per
    set bit of a weight, measured; memory items once per instance of a slot).  The build is Python work the
    budget pays for (:mod:`hetero_solve.budget`), so a stage whose build would cost more than it has left
    does not start it."""
    bits = 0
    for d, per_slot in enc.inst.items():
        for j, a in enumerate(per_slot):
            per_item = sum(1 + bin(size).count("1") for size, _ in enc.items[j].values() if size)
            bits += len(a) * per_item
    for t in set(weights) | set(caps or {}):
        if t != "partitions" or t in weights and set(weights) != {"partitions"}:
            bits += sum(bin(abs(w)).count("1") for w, _ in enc.term(t)[0] if w)
    pairs = sum(len(g) * (len(g) - 1) // 2 for g in enc.amo)
    return len(enc.clauses) + pairs + 11 * bits      # 11: measured, adders and guards


def solve(enc: Encoding, weights: dict[str, int], *, caps: dict[str, int] | None = None,
          hint: Solution | None = None, budget: Budget | None = None, seed: int = 0,
          progress: Callable[[str], None] | None = None, label: str = "sat") -> EngineResult:
    """Minimise ``sum weights[t] * term t`` subject to ``term t <= caps[t]`` (module doc)
    within ``budget`` (default: :meth:`~hetero_solve.budget.Budget.default`), which is charged the
    build and the search."""
    budget = budget if budget is not None else Budget.default()
    if budget.out_of_time():        # nothing is built past the deadline
        return EngineResult(None, None, None, False, stats={"skipped": "time limit"})
    if enc.infeasible:
        return EngineResult(None, None, None, False, infeasible=True)
    say = progress or (lambda _m: None)
    from pysat.solvers import Solver    # the solver imported when used
    solver = Solver(name="g4")
    cnf = _CNF(enc, solver)
    only_parts = set(weights) == {"partitions"}
    bits, obj_const = _encode(cnf, enc, weights, caps, only_parts)
    built = cnf.added
    t0 = time.perf_counter()
    seconds = max(0.05, budget.left())
    conflicts = max(1000, int(CONFLICTS_PER_SECOND * seconds))
    props = max(100_000, int(PROPAGATIONS_PER_SECOND * seconds))
    timer = threading.Timer(max(0.01, min(budget.wall_left(), 1e7)), solver.interrupt)
    timer.daemon = True
    timer.start()
    interrupted = [False]

    def call(assumptions: list[int]):
        done = solver.accum_stats()
        left = conflicts - done.get("conflicts", 0)
        left_props = props - done.get("propagations", 0)
        if left <= 0 or left_props <= 0:
            return None
        solver.conf_budget(left)
        solver.prop_budget(left_props)
        res = run_stoppable(lambda: solver.solve_limited(assumptions=assumptions,
                                                         expect_interrupt=True),
                            solver.interrupt, watch=budget.past_deadline)
        if res is None and budget.past_deadline():
            interrupted[0] = True
        return res

    val = hint_values(enc, hint) if hint is not None else None
    if val is not None:
        solver.set_phases([x if val[x] else -x for x in range(1, enc.nv + 1)])
    try:
        best, best_val, proven, infeasible = _descend(
            solver, cnf, enc, weights, call, bits, obj_const, only_parts, say, label)
    finally:
        timer.cancel()
    acc = solver.accum_stats()
    stats = {"variables": cnf.nv, "clauses": len(enc.clauses), "hinted": val is not None,
             "conflicts": acc.get("conflicts", 0),
             "wall": round(time.perf_counter() - t0, 3),
             "propagations": acc.get("propagations", 0),
             "build_clauses": built, "build_time": round(built / CLAUSES_PER_SECOND, 3),
             "deterministic_time": round(max(
                 acc.get("conflicts", 0) / CONFLICTS_PER_SECOND,
                 acc.get("propagations", 0) / PROPAGATIONS_PER_SECOND), 3),
             "deterministic": not interrupted[0]}
    budget.charge_run(stats)
    solver.delete()
    if infeasible:
        return EngineResult(None, None, None, True, infeasible=True, stats=stats)
    if best is None:
        return EngineResult(None, None, None, False, stats=stats)
    return EngineResult(best, best_val, best_val if proven else None, proven, stats=stats)


def _encode(cnf: _CNF, enc: Encoding, weights: dict[str, int], caps: dict[str, int] | None,
            only_parts: bool):
    """The clauses: the encoding's, one device per slot (pairwise), memory per device
    instance, the caps of earlier stages; and the objective's adder (``None`` when it is
    the parts alone, asked through ``used`` literals).  Returns ``(bits, constant)``."""
    for c in enc.clauses:
        cnf.add(c)
    for g in enc.amo:
        for i in range(len(g)):
            for j in range(i + 1, len(g)):
                cnf.add([-g[i], -g[j]])
    # memory: per device instance, sum over slots of the slot's items when on that instance
    p = enc.problem
    for d, per_slot in enc.inst.items():
        cap = p.devices[d].memory
        loads: list[list[tuple[int, int]]] = [[] for _ in range(p.devices[d].instances)]
        for j, a in enumerate(per_slot):
            for i, ai in enumerate(a):
                for size, x in enc.items[j].values():
                    if size:
                        g = cnf.var()
                        cnf.add([-x, -ai, g])
                        loads[i].append((size, g))
        for terms in loads:
            if terms and sum(w for w, _ in terms) > cap:
                cnf.at_most(cnf.sum_bits(terms), cap)
    # caps of earlier stages
    for t, cap in (caps or {}).items():
        lits, const = enc.term(t)
        if t == "partitions":
            if cap < enc.K:
                if enc.used[cap] is True:
                    cnf.contradiction()
                else:
                    cnf.add([-enc.used[cap]])
            continue
        terms = [(w, x) for w, x in lits if w]
        if terms and sum(w for w, _ in terms) + const > cap:
            cnf.at_most(cnf.sum_bits(terms), cap - const)
    obj: list[tuple[int, int]] = []
    obj_const = 0
    for t, w in weights.items():
        lits, c = enc.term(t)
        obj += [(w * a, x) for a, x in lits if w * a]
        obj_const += w * c
    return (None if only_parts else cnf.sum_bits(obj)), obj_const


def _descend(solver, cnf: _CNF, enc: Encoding, weights, call, bits, obj_const: int,
             only_parts: bool, say, label: str):
    """Solve, then ask for a strictly better answer until the solver says there is none
    (proven) or the budget ends.  Returns ``(best, best value, proven, infeasible)``."""
    best: Solution | None = None
    best_val: int | None = None
    proven = False
    infeasible = False
    res = call([])
    if res is False:
        infeasible = True
    while res:
        model = solver.get_model()
        truth = set(x for x in model if x > 0)
        sol = decode(enc, lambda x: x in truth)
        value = stage_value(enc, weights, sol)
        if best_val is None or value < best_val:
            best, best_val = sol, value
            say(f"{label}: best {best_val}")
        solver.set_phases(model[:enc.nv])
        # ask for better
        if only_parts:
            k = sol.num_parts
            if k - 1 < enc.lb or enc.used[k - 1] is True:
                proven = True
                break
            res = call([-enc.used[k - 1]])
        else:
            act = cnf.var()
            cnf.at_most(bits, best_val - 1 - obj_const, act)
            res = call([act])
            if res is not True:
                cnf.add([-act])
        if res is False:
            proven = True
    return best, best_val, proven, infeasible
