"""Exact refinement: the fewest parts (and the rest of the objective) with a proof.

:func:`refine` takes the heuristic's answer and improves it stage by stage (docs/exact.md):

* a **lexicographic** objective is solved term by term, each earlier term capped at its best
  value (``fallback``, then ``partitions``, then ``transfer`` by default);
* a **weighted** objective is one stage (weights scaled to integers);
* ``latency`` and ``throughput`` (docs/costs.md) are stages too (:mod:`.stages.costs`, on the
  slot model with instances and times of :mod:`.costs`), from the first of them on.

How it is built (docs/ARCHITECTURE.md, "Exact refinement"): :class:`.search.Search` is the
shared context (budget, best answer so far, device sets and bounds computed once); one module
per stage in :mod:`.stages` (``fallback``, ``partitions``, ``transfer``, ``weighted``,
``costs``), run by one loop, each given its :class:`.search.Task` (weights, caps, its child of
the budget) and returning a :class:`.search.StageRecord` of what it tried, proved and found;
:mod:`.runner` is the one model runner (one protocol for the ordinal and the slot model, one
size guard, the neighbourhood search, the engines); :mod:`.report` derives the status, the
bounds and the explanation from the records.

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

Same input and seed, same answer: the call's :class:`~hetero_solve.budget.Budget` is spent in
deterministic work (CP-SAT's deterministic time, conflicts and propagations for SAT, counted
steps for our own loops and model builds); with a time limit its deadline stops whatever runs
when the clock ends first, and ``stats["deterministic"]`` (and ``stats["stopped_by"]``) say
whether it did.  The number of parts gets twice the share of the budget of the other terms,
and transfer (a tie-breaker) at most a third of it.

>>> from hetero_solve.problem import make_problem
>>> from hetero_solve.algorithms.greedy import heuristic
>>> p = make_problem(4, [(0, 2), (1, 3)], [[0], [1], [1], [0]])
>>> s = refine(p, heuristic(p))
>>> s.num_parts, s.status, s.lower_bound
(3, 'optimal', 3)
"""

from __future__ import annotations

from typing import Callable

from ..algorithms.greedy import heuristic
from ..budget import Budget
from ..errors import InfeasibleError
from ..problem import Problem
from ..solution import Solution, evaluate, objective_key
from ..units import format_bytes
from ..validate import validate
from ..fitting.bounds import kept_packing
from ..fitting.floors import binding_devices, min_part_memory
from .analysis import device_sets
from .bounds import lower_bounds
from .folds import candidates, closure, over_every_choice, unfold
from .explain import with_folds, with_memory_parts
from .report import report
from .search import Search
from .stages import run_stages

__all__ = ["refine", "refine_with_folds", "lower_bound", "refuse_unplaceable", "ENGINES"]

from ..engines import EXACT_ENGINES as ENGINES   # noqa: E402 - the one list


def refine(problem: Problem, start: Solution | None, *, engine: str = "auto",
           budget: Budget | None = None, seed: int = 0,
           progress: Callable[[str], None] | None = None, workers: int = 1) -> Solution:
    """Improve ``start`` and prove what can be proven within ``budget``.

    The objective's terms are refined one at a time, in order (module doc): each stage bounds
    its term from below, searches for a better answer with the earlier terms capped at their
    values, and records whether the term is proven.  The answer is never worse than ``start``.

    Parameters
    ----------
    problem : Problem
    start : Solution or None
        A solution of ``problem`` (the heuristic's, say): the first incumbent and the
        solver's hint when valid, only a hint otherwise (any valid answer replaces it);
        ``None``: none (every node in one part on its preferred device, as a hint).
    engine : {"auto", "cpsat", "sat"}
        ``"auto"``: solver-free bounds, the search over device sequences, CP-SAT, then SAT to
        close a gap; ``"cpsat"`` or ``"sat"``: that engine only.
    budget : Budget, optional
        The call's :class:`~hetero_solve.budget.Budget` (default: 5 deterministic seconds,
        no clock), charged what the refinement spends: its deterministic work decides where
        each search stops (same input and seed, same answer); its deadline, if it has one,
        stops the search when the clock ends first (then ``stats["deterministic"]`` is
        False).
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
    >>> s = refine(p, heuristic(p), budget=Budget.of(work_limit=0.5))
    >>> s.num_parts, s.status, s.lower_bound
    (3, 'optimal', 3)
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    return _refine(problem, start, device_sets(problem, fixed=False), engine, _budget(budget),
                   seed, progress, workers)


def _budget(budget: Budget | None) -> Budget:
    """The budget to spend (the default when none is given)."""
    return budget if budget is not None else Budget.default()


def _refine(problem: Problem, start: Solution, R: list[tuple[int, ...]], engine: str,
            budget: Budget, seed: int, progress, workers: int) -> Solution:
    """:func:`refine` with the device sets ``R`` (``fixed=False``) already computed: with
    memory limits they cost minimum cuts, a quarter of a second at 100,000 nodes.  The
    search spends a child of ``budget`` (all it has left), so its record counts its own."""
    refuse_unplaceable(problem, R)
    ctx = Search.begin(problem, start, engine, budget.allot(budget.left()), seed, progress,
                       workers, R)
    return with_kept_packing(problem, report(ctx, run_stages(ctx)), R)


def with_kept_packing(problem: Problem, sol: Solution, R: list[tuple[int, ...]] | None = None
                      ) -> Solution:
    """``sol`` with its parts bound raised to :func:`~hetero_solve.fitting.bounds.kept_packing`
    at its own fallback when that is more (a lexicographic objective with fallback before
    partitions, memory limits, some fallback: the bounds of the stages see every node free to
    leave and say 1), and ``explain`` saying so."""
    obj = problem.objective
    if not (obj.lexicographic and "fallback" in obj.order and "partitions" in obj.order
            and obj.order.index("fallback") < obj.order.index("partitions")) \
            or not problem.has_memory_limits() or sol.lower_bound is None:
        return sol
    fallback = evaluate(problem, sol).fallback
    if fallback == 0:
        return sol           # the stages' bounds already keep every node where it prefers
    if R is None:
        R = device_sets(problem, fixed=False)
    kept = min(kept_packing(problem, R, fallback), sol.num_parts)
    if kept <= sol.lower_bound:
        return sol
    sol.lower_bound = kept
    ex = sol.stats.get("explain")
    if ex:
        sol.stats["explain"] = with_memory_parts(ex, kept)
    return sol


def refine_with_folds(problem: Problem, start: Solution, *, engine: str = "auto",
                      budget: Budget | None = None, seed: int = 0,
                      progress: Callable[[str], None] | None = None,
                      workers: int = 1) -> tuple[Problem, Solution]:
    """:func:`refine`, deciding optional folds too (:mod:`.folds`): when placing some folded
    nodes could save memory, each fold choice of :func:`fold_choices` (every subset of the
    candidates closed under ``requires``, when there are few) is refined with an equal share
    of ``budget`` and the best answer is kept, with the problem it answers.  Ties keep the
    earlier choice (the compiled problem first).  ``stats["folds"]`` says what was compared.

    ``status`` is ``"optimal"`` only when it holds over every fold choice: every choice of
    every option was refined and proven optimal, or the relaxation that lower-bounds every
    choice (:func:`.folds.over_every_choice`, refined in the budget the choices left
    unspent) proves the answer; ``lower_bound`` bounds every fold choice's answers."""
    budget = _budget(budget)
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    say = progress or (lambda _m: None)
    if problem.objective.uses_costs():   # cost terms: their own model; folds stay as compiled
        return problem, refine(problem, start, engine=engine, budget=budget, seed=seed,
                               progress=progress, workers=workers)
    R = device_sets(problem, fixed=False)
    # every limited device: one that memory cannot bind as compiled may bind once placing
    # an option makes room (a widening Expand whose output alone overflows it)
    limited = [d for d, dev in enumerate(problem.devices) if dev.memory is not None]
    cands = candidates(problem, limited) if problem.fold_options else []
    if not cands or budget.out_of_time():   # past the deadline: no second problem
        return problem, _refine(problem, start, R, engine, budget, seed, progress, workers)
    names = [problem.fold_options[k].name for k in cands]
    chosen = fold_choices(problem, cands)
    say(f"optional folds: comparing {len(chosen)} choice(s) of placing {len(cands)} foldable "
        f"node(s) ({', '.join(names[:3])}{'...' if len(names) > 3 else ''})")
    tried: list[tuple[tuple, Problem, Solution | None]] = []
    for i, ks in enumerate(chosen):
        # an equal share of what is left: what a choice leaves unspent goes to the next ones
        share = budget.share(1, len(chosen) - i)
        if ks and budget.out_of_time():      # past the deadline: no further problem
            break
        q = unfold(problem, ks)[0] if ks else problem
        try:
            sol_k = refine(q, start if not ks else heuristic(q), engine=engine,
                           budget=budget.allot(share), seed=seed, progress=progress,
                           workers=workers)
            if validate(q, sol_k):
                sol_k = None
        except InfeasibleError:
            sol_k = None
        key = objective_key(q, sol_k) if sol_k is not None else (float("inf"),)
        tried.append((key, q, sol_k))
    key_best, win_p, sol = min(tried, key=lambda t: t[0])   # ties: the first, the compiled
    if sol is None:          # no choice gave a valid answer: the compiled problem's start
        return problem, _refine(problem, start, R, engine, budget, seed, progress, workers)
    sol.stats["folds"] = {"candidates": names, "placed": win_p is not problem,
                          "placed_options": [problem.fold_options[k].name for k in
                                             (chosen[[t[1] for t in tried].index(win_p)])],
                          "choices": len(chosen), "tried": len(tried),
                          "objectives": [None if t[2] is None else list(t[0]) for t in tried],
                          "folded_objective": None if tried[0][2] is None else list(tried[0][0])}
    # Every choice of every option tried, each proven optimal: the best is optimal over every
    # fold choice (nothing to certify).  Otherwise the relaxation certifies what it can.
    every = len(cands) == len(problem.fold_options) and len(tried) == len(chosen) \
        and len(chosen) == _closed_count(problem, cands)
    if every and all(t[2] is not None and t[2].status == "optimal" for t in tried):
        sol.stats["folds"].update(proven=True, by="every choice solved")
        if sol.stats.get("explain"):
            sol.stats["explain"] = with_folds(sol.stats["explain"], True, sol.lower_bound)
        return win_p, sol
    sol = over_every_choice(problem, win_p, sol, budget=budget, engine=engine, seed=seed,
                            progress=progress, workers=workers)
    return win_p, sol


#: At most this many fold choices are refined (each with an equal share of what is left).
MAX_FOLD_CHOICES = 8


def _closed_sets(problem: Problem, cands: list[int], limit: int) -> list[list[int]] | None:
    """Every subset of ``cands`` closed under ``requires`` (the empty one first), or ``None``
    when there are more than ``limit``."""
    found: dict[tuple[int, ...], None] = {(): None}
    frontier = [()]
    while frontier:
        nxt = []
        for base in frontier:
            for k in cands:
                if k in base:
                    continue
                c = tuple(closure(problem, list(base) + [k]))
                if c not in found:
                    found[c] = None
                    nxt.append(c)
                    if len(found) > limit:
                        return None
        frontier = nxt
    return [list(c) for c in found]


def _closed_count(problem: Problem, cands: list[int]) -> int:
    sets = _closed_sets(problem, cands, MAX_FOLD_CHOICES)
    return -1 if sets is None else len(sets)


def fold_choices(problem: Problem, cands: list[int]) -> list[list[int]]:
    """The fold choices :func:`refine_with_folds` refines: every subset of the candidates
    closed under ``requires`` when there are at most :data:`MAX_FOLD_CHOICES` (the empty one,
    "as compiled", first); otherwise as compiled and all placed."""
    every = _closed_sets(problem, cands, MAX_FOLD_CHOICES)
    # many candidates (a detector's 56 shape nodes): each further choice would cost a whole
    # refinement of a large problem for a share too small to prove anything
    return every if every is not None else [[], sorted(cands)]


def refuse_unplaceable(problem: Problem, R: list[tuple[int, ...]] | None = None) -> None:
    """Raise :class:`~hetero_solve.errors.InfeasibleError` when some node fits no instance of
    any device it may use, whatever part holds it: its constants, the graph inputs it reads and
    the graph outputs it writes are in every part that holds it (docs/exact.md, "Memory"), and they
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
    lb = lower_bounds(problem, R, binding_devices(problem, R)).lb
    if not fixed and problem.has_memory_limits() and "fallback" in obj.order \
            and "partitions" in obj.order and obj.lexicographic \
            and obj.order.index("fallback") < obj.order.index("partitions"):
        lb = max(lb, min(kept_packing(problem, R, evaluate(problem, solution).fallback),
                         solution.num_parts))
    return lb
