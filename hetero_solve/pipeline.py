"""The pipeline, in order: load the model -> compile rules into a problem -> heuristic ->
exact refinement -> validate.  Export (:mod:`hetero_solve.export`) comes after.

:func:`prepare` (rules -> load -> compile) is where every entry point starts (``solve``,
``check``, ``explain``, ``study``); :func:`solve` is what the command line runs and what
``import hetero_solve`` offers (:func:`solve_prepared` continues from a :class:`Prepared`).
It touches the file system only to read its inputs and returns a :class:`Result` record;
:meth:`Result.write` exports it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import onnx

from .algorithms.greedy import PackingFailed, heuristic
from .algorithms.islands import cost_islands
from .algorithms.single import SingleDevice, best_single_device
from .compile import compile_problem, missing_dims
from .cost_sources import Measured
from .engines import check_engine
from .errors import InfeasibleError, ValidationError, warn
from .gcpause import paused_gc
from .measures import topological_order
from .model import ModelGraph, load_model
from .problem import Objective, Problem
from .profiles import read_profile
from .result import Result
from .rules import Rules, load_rules
from .solution import Solution, evaluate
from .validate import check, validate

MAX_TIME_LIMIT = 1e6   #: seconds (11 days): a longer limit, infinity included, is no limit
#: The progress message sent when the exact solver starts (its time limit starts counting).
EXACT_STAGE = "exact refinement"
Progress = Callable[[str], None]
#: Measured times: a profile file (``--costs``), a loaded profile, or :class:`Measured`.
CostSource = Any

__all__ = ["prepare", "Prepared", "solve", "solve_prepared", "refine", "Result"]


@dataclass
class Prepared:
    """What every entry point starts from (:func:`prepare`).

    Parameters
    ----------
    model_graph : ModelGraph
        The loaded model.
    rules : Rules
        The validated rule file.
    problem : Problem
        The model compiled under the rules; ``problem.info.missing_dims`` says what input
        dims with no value cost each static-shape device (also in ``info.warnings``).
    seconds : dict of str to float
        Wall time of the ``rules``, ``load`` and ``compile`` stages.
    """

    model_graph: ModelGraph
    rules: Rules
    problem: Problem
    seconds: dict[str, float] = field(default_factory=dict)


class _Clock:
    """Wall time per stage, added up by name."""

    def __init__(self, seconds: dict[str, float] | None = None):
        self.seconds = dict(seconds or {})
        self.last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - self.last
        self.last = now


def prepare(model: str | os.PathLike | onnx.ModelProto | ModelGraph,
            rules: str | os.PathLike | dict | Rules, *, dims: dict[str, int] | None = None,
            shapes: dict[str, list[int]] | None = None, objective: Objective | None = None,
            progress: Progress | None = None, defer_check: bool = False,
            costs: CostSource = None) -> Prepared:
    """Rules -> load -> compile: the steps ``solve``, ``check``, ``explain`` and ``study``
    share (parameters as :func:`solve`'s).  ``costs``: measured times (a profile), the one
    door for cost data beside the rule file's rooflines (:mod:`hetero_solve.cost_sources`).

    ``defer_check``: on large models the ONNX checker runs in a forked process; the caller
    waits for its verdict with ``model_graph.ensure_valid()`` (:func:`solve` does after
    validating).  Raises what :func:`solve` raises for bad rules or models.
    """
    say = progress or (lambda _msg: None)
    clock = _Clock()
    say("reading rules")
    rule_set = rules if isinstance(rules, Rules) else load_rules(rules)
    clock.lap("rules")
    if isinstance(model, ModelGraph):
        mg = model
    else:
        say("loading the model and inferring shapes")
        mg = load_model(model, dims=dims, shapes=shapes, rule_dims=rule_set.dims,
                        defer_check=defer_check)
    clock.lap("load")
    try:
        measured = measured_times(costs, mg)
        say(f"compiling rules for {len(mg.names)} nodes")
        problem = compile_problem(mg, rule_set, objective=objective, measured=measured)
        # Input dims with no value may cost a static-shape device nodes: say which, how many.
        problem.info.missing_dims = missing_dims(mg, rule_set, problem)
        problem.info.warnings.extend(m.text() for m in problem.info.missing_dims)
    except Exception:
        mg.ensure_valid()   # an invalid model explains the failure
        raise
    clock.lap("compile")
    return Prepared(mg, rule_set, problem, clock.seconds)


def measured_times(costs: CostSource, mg: ModelGraph) -> Measured | None:
    """What ``costs=`` gives: a profile file read (and checked to be one of this model) by
    :mod:`hetero_solve.profiles`, or a profile or :class:`Measured` as it is."""
    if costs is None:
        return None
    if isinstance(costs, (str, os.PathLike)):
        return Measured.of(read_profile(costs, mg))
    return Measured.of(costs)


def solve(model: str | os.PathLike | onnx.ModelProto | ModelGraph,
          rules: str | os.PathLike | dict | Rules, *, dims: dict[str, int] | None = None,
          shapes: dict[str, list[int]] | None = None, engine: str = "auto", time_limit: float = 10.0, seed: int = 0,
          objective: Objective | None = None, progress: Progress | None = None,
          costs: CostSource = None) -> Result:
    """Partition ``model`` under ``rules``: the fewest parts every device can run.

    Runs the pipeline (load, compile, heuristic, exact refinement, validate) and returns the
    answer; nothing is written (see :meth:`Result.write`).

    Parameters
    ----------
    model : path, onnx.ModelProto or ModelGraph
        The ONNX model (a file, an in-memory model, or one already loaded by
        :func:`~hetero_solve.model.load_model`).
    rules : path, dict or Rules
        A rule file (YAML), the same as a parsed mapping, or loaded :class:`Rules`.
    dims : dict of str to int, optional
        Values of symbolic dimensions of the graph inputs; they override the rule file's
        ``dims``.  A name no graph input uses is a warning (the rule file's are silent).
    shapes : dict of str to list of int, optional
        Whole shapes of graph inputs by name (for anonymous ``?`` dims), e.g.
        ``{"x": [1, 3, 320, 320]}``; they win over ``dims`` for that input.
    engine : {"auto", "heuristic", "cpsat", "sat"}, default "auto"
        ``heuristic``: the greedy answer with its lower bound; ``cpsat`` or ``sat``: exact
        refinement within ``time_limit``; ``auto``: the best available (CP-SAT).
    time_limit : float, default 10.0
        Seconds for the exact refinement.
    seed : int, default 0
        Solver seed: same input and seed, same answer.
    objective : Objective, optional
        Overrides the rule file's objective (``Objective(order=("latency",))``: the fastest
        answer; docs/costs.md).
    progress : callable, optional
        Called with a short text at every stage (the command line shows it on a terminal).
    costs : path or profile, optional
        Measured node times (a profile file, ``--costs``); they win over the rule file's
        rooflines where they have a node's time.

    Returns
    -------
    Result
        The partition (``solution``), its measures (``metrics``), the problem it solves and
        the warnings (also issued through Python :mod:`warnings`).

    Warns
    -----
    HeteroSolveWarning
        Each text of ``Result.warnings`` (a glob pin matching no node, a dimension with no
        value, ...), through Python :mod:`warnings`.

    Raises
    ------
    RuleError
        The rule file is invalid (names the file, key path and reason).
    ModelError
        The model cannot be read or is not a valid ONNX model.
    InfeasibleError
        A node no device takes, or memory that cannot hold the model (names which).
    ValueError
        ``engine`` is not one of the four.

    Examples
    --------
    >>> import hetero_solve as hs
    >>> r = hs.solve("examples/resnet_like.onnx", "rules/npu-static.yaml")   # doctest: +SKIP
    >>> r.metrics.partitions, r.solution.status                              # doctest: +SKIP
    (3, 'optimal')
    """
    time_limit = _checked(engine, time_limit)
    with paused_gc():
        # The checker (forked, lowest priority, on large models) is waited for at the end.
        prepared = prepare(model, rules, dims=dims, shapes=shapes, objective=objective,
                           progress=progress, defer_check=True, costs=costs)
        result = _solve(prepared, engine=engine, time_limit=time_limit, seed=seed,
                        progress=progress)
    for message in result.warnings:
        warn(message)
    return result


def solve_prepared(prepared: Prepared, *, engine: str = "auto", time_limit: float = 10.0,
                   seed: int = 0, progress: Progress | None = None) -> Result:
    """:func:`solve` from what :func:`prepare` returned (``check`` compares a map with the
    optimum of the problem it compiled once).  ``prepared`` is not changed."""
    time_limit = _checked(engine, time_limit)
    with paused_gc():
        result = _solve(prepared, engine=engine, time_limit=time_limit, seed=seed,
                        progress=progress)
    for message in result.warnings:
        warn(message)
    return result


def _checked(engine: str, time_limit: float) -> float:
    """The time limit to use; refuses an unknown engine or a negative limit."""
    check_engine(engine)
    if not time_limit >= 0:   # NaN too
        raise ValueError(f"time_limit must be a number of seconds >= 0, not {time_limit!r}")
    # Infinity means no limit; the engines count conflicts and deadlines in 64-bit integers.
    return min(time_limit, MAX_TIME_LIMIT)


def _solve(prepared: Prepared, *, engine: str, time_limit: float, seed: int,
           progress: Progress | None) -> Result:
    say = progress or (lambda _msg: None)
    clock = _Clock(prepared.seconds)
    lap = clock.lap
    mg, rule_set = prepared.model_graph, prepared.rules
    # the warnings below are this answer's: the prepared problem keeps its own
    problem = dataclasses.replace(prepared.problem, info=dataclasses.replace(
        prepared.problem.info, warnings=list(prepared.problem.info.warnings)))
    try:
        say("greedy heuristic")
        sol = initial_solution(problem, engine=engine, time_limit=time_limit, seed=seed,
                               progress=say)
        lap("heuristic")
        compiled = problem
        if engine == "heuristic":
            sol = refine(problem, sol, engine=engine, time_limit=time_limit, seed=seed,
                         progress=say)
        else:   # the exact engine also decides optional folds: the problem may change
            from .exact import refine_with_folds
            problem, sol = refine_with_folds(problem, sol, engine=engine,
                                             time_limit=time_limit, seed=seed, progress=say)
        lap("exact")
        single = best_single_device(problem)
        sol = never_slower(problem, sol, single)
        say("validating")
        metrics = evaluate(problem, sol)
        check(problem, sol, metrics=metrics)
        if problem is not compiled:
            # foldable nodes placed: the answer must pass check of what will be written,
            # which rebuilds its problem from the compiled one and the parts' node names
            from .user_partition import judge_answer
            violations = judge_answer(mg, compiled, problem, sol)
            if violations:
                raise ValidationError(violations)
    except Exception:
        mg.ensure_valid()   # an invalid model explains the failure
        raise
    mg.ensure_valid()
    lap("validate")
    warnings = list(problem.info.warnings) + _unknown_rank_boundaries(mg, problem, sol)
    if sol.stats.get("stopped_by"):     # the exact stage's wall-clock guard fired
        from .exact.budget import guard_warning
        warnings.append(guard_warning(time_limit))
    return Result(mg, rule_set, problem, sol, metrics, clock.seconds, warnings,
                  explanation=sol.stats.pop("explain", None), single_device=single)


def never_slower(problem: Problem, sol: Solution, single: SingleDevice | None) -> Solution:
    """``sol``, or the whole model on the best single device when the objective has a cost
    term and ranks that better or equal (docs/costs.md: an answer is never predicted slower
    than the obvious one; a tie keeps one part).  The kept answer has ``sol``'s bounds and
    records."""
    if single is None or not problem.objective.uses_costs():
        return sol
    key = problem.objective.key
    alone = key(evaluate(problem, single.solution).as_dict())
    found = key(evaluate(problem, sol).as_dict())
    if alone > found or (alone == found and sol.num_parts == 1):
        return sol
    # a tie keeps the one part (and what was proven of the tied value)
    return dataclasses.replace(single.solution, lower_bound=sol.lower_bound,
                               stats=dict(sol.stats),
                               status=sol.status if alone == found else "feasible")


def initial_solution(problem: Problem, *, engine: str = "auto", time_limit: float = 10.0,
                     seed: int = 0, progress: Progress | None = None) -> Solution:
    """The heuristic's answer (under a cost objective, with the islands that do not pay moved
    back: :func:`~hetero_solve.algorithms.islands.cost_islands`); when it cannot fit the
    memory limits (and says that is not a proof), the exact solver's, searched from one node
    per part.

    Raises
    ------
    InfeasibleError
        A node no device can hold (proven, named), or no partition found by either (the
        message says it is not a proof).
    """
    try:
        sol = heuristic(problem)
    except PackingFailed as failure:
        return _exact_rescue(problem, failure, engine, time_limit, seed,
                             progress or (lambda _m: None))
    if problem.costs is not None and problem.objective.uses_costs():
        sol = cost_islands(problem, sol)     # islands that do not pay go back
    return sol


def _exact_rescue(problem: Problem, failure: InfeasibleError, engine: str, time_limit: float,
                  seed: int, say: Progress) -> Solution:
    """The heuristic can miss a packing that exists (bin packing); the exact solver, started
    from one node per part, searches for one.  If it finds none within the time limit, the
    error says so (and that it is not a proof)."""
    if engine == "heuristic" or not problem.has_memory_limits():
        raise InfeasibleError(f"{failure} (--engine heuristic: the exact solver was not asked)"
                              if engine == "heuristic" else str(failure), failure.nodes)
    say("the heuristic could not fit the memory limits: searching with the exact solver")
    order = topological_order(problem.succ, problem.pred)
    start = Solution(part_of=[0] * problem.n, part_device=[problem.allowed[v][0] for v in order],
                     part_instance=[0] * problem.n, algorithm="one node per part")
    for k, v in enumerate(order):
        start.part_of[v] = k
    sol = refine(problem, start, engine=engine, time_limit=time_limit, seed=seed, progress=say)
    if validate(problem, sol):
        raise InfeasibleError(f"{failure}; the exact solver found none within {time_limit:g} s "
                              f"either (raise --time-limit to search longer)", failure.nodes)
    problem.info.warnings.append(
        f"the greedy heuristic could not fit the memory limits ({failure}); the exact solver "
        f"found this partition")
    sol.stats["heuristic_partitions"] = None
    return sol


def _unknown_rank_boundaries(mg: ModelGraph, problem: Problem, sol: Solution) -> list[str]:
    """Part inputs/outputs whose rank shape inference could not find: their sub-models run in
    onnxruntime but onnx.checker rejects a graph input or output without a shape."""
    names = []
    for t, u in enumerate(problem.tensor_producer):
        if u >= 0 and any(sol.part_of[c] != sol.part_of[u] for c in problem.tensor_consumers[t]):
            if mg.tensor_type(problem.tensor_names[t]).rank is None:
                names.append(problem.tensor_names[t])
    if not names:
        return []
    return [f"{len(names)} tensor(s) between parts have an unknown rank, so their sub-models do "
            f"not pass onnx.checker (they still run): {', '.join(names[:5])}"]


def refine(problem: Problem, start: Solution, *, engine: str = "auto", time_limit: float = 10.0,
           seed: int = 0, progress: Progress | None = None) -> Solution:
    """Exact refinement of a heuristic answer (never worse than ``start``).  With
    ``engine="heuristic"`` the answer is kept and only its lower bound is computed."""
    if problem.n == 0:
        return start
    from .exact import lower_bound, refine as exact_refine
    if engine == "heuristic":
        if progress:
            progress("lower bound")
        # bounds over every fold choice: on the problem each optional fold relaxes
        from .exact.folds import relaxed
        rel = relaxed(problem)
        start.lower_bound = lower_bound(rel, start)
        if problem.has_memory_limits():
            from .exact.analysis import device_sets
            from .fitting.bounds import memory_bounds
            from .fitting.floors import binding_devices
            R = device_sets(rel, fixed=False)
            if binding_devices(rel, R):
                start.stats.setdefault("bounds", {})["fallback"] = memory_bounds(rel, R).fallback
        return start
    if progress:
        progress(f"{EXACT_STAGE} ({engine})")
    return exact_refine(problem, start, engine=engine, time_limit=time_limit, seed=seed,
                        progress=progress)
