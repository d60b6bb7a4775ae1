"""The pipeline, in order: load the model -> compile rules into a problem -> heuristic ->
exact refinement -> validate.  Export (:mod:`hetero_solve.export`) comes after.

:func:`prepare` (rules -> load -> compile) is where every entry point starts (``solve``,
``check``, ``explain``, ``study``); :func:`solve` is what the command line runs and what
``import hetero_solve`` offers (:func:`solve_prepared` continues from a :class:`Prepared`).
It touches the file system only to read its inputs and returns a :class:`Result` record;
:func:`hetero_solve.export.write_result` exports it.
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
from .algorithms.stages import pipeline_stages
from .budget import RUN_STEPS_PER_SECOND, Budget, Limit
from .compile import compile_problem, missing_dims, missing_dims_ahead
from .engines import check_engine
from .errors import InfeasibleError, ValidationError, warn
from .exact import lower_bound, refine as exact_refine, refine_with_folds
from .exact.explain import answer_claims, explain_text, explain_time
from .exact.folds import relaxed
from .fitting.bounds import memory_bounds
from .fitting.devices import device_sets
from .fitting.floors import binding_devices
from .gcpause import paused_gc
from .measures import crossings, topological_order
from .model import ModelGraph, load_model
from .model.parallel import Forked
from .problem import Objective, Problem
from .result import Result
from .rules import Rules, load_rules
from .rules.change import Change, apply_change
from .rules.conditions import SupportChecker
from .rules.ops import rule_op_name
from .solution import Metrics, Solution, evaluate, objective_key, open_sizes
from .times import Measured, read_profile
from .user_map import judge_answer
from .validate import check, validate

#: The progress message sent when the solve starts (the model is prepared: the time limit
#: starts counting), and when the exact solver starts.
SOLVE_STAGE = "greedy heuristic"
EXACT_STAGE = "exact refinement"
Progress = Callable[[str], None]
#: Measured times: a profile file (``--costs``), a loaded profile, or :class:`Measured`.
CostSource = Any

__all__ = ["prepare", "Prepared", "vary", "solve", "solve_prepared", "solve_problem", "refine",
           "replace_answer", "Result"]


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
    missing_dims : PendingMissingDims or None
        With ``prepare(defer_check=True)`` on a large model: ``problem.info.missing_dims``
        still being found in a forked process; :func:`solve` adds it before validating.
    measured : Measured, optional
        The measured times it was compiled with (``costs=``), for :func:`vary`.
    """

    model_graph: ModelGraph
    rules: Rules
    problem: Problem
    seconds: dict[str, float] = field(default_factory=dict)
    missing_dims: PendingMissingDims | None = None
    measured: Measured | None = None


@dataclass
class PendingMissingDims:
    """:func:`~hetero_solve.compile.missing_dims` running beside the solve (its analysis
    forked right after loading): :meth:`add_to` waits for it and puts its entries and
    warnings where ``prepare`` would have (``at``: after the compile's warnings)."""

    model_graph: ModelGraph
    rules: Rules
    problem: Problem
    ahead: Forked
    at: int

    def add_to(self, problem: Problem) -> None:
        found = missing_dims(self.model_graph, self.rules, self.problem, ahead=self.ahead)
        problem.info.missing_dims = found
        problem.info.warnings[self.at:self.at] = [m.text() for m in found]

    def cancel(self) -> None:
        self.ahead.cancel()


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
    door for cost data beside the rule file's rooflines (:mod:`hetero_solve.times.sources`).

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
    # Input dims with no value may cost a static-shape device nodes: say which, how many.
    # On a large model the counterfactual analysis runs forked, beside the rest.
    ahead = missing_dims_ahead(mg, rule_set)
    pending = None
    try:
        measured = measured_times(costs, mg)
        say(f"compiling rules for {len(mg.names)} nodes")
        problem = compile_problem(mg, rule_set, objective=objective, measured=measured)
        if defer_check and ahead is not None:
            pending = PendingMissingDims(mg, rule_set, problem, ahead, len(problem.info.warnings))
        else:
            problem.info.missing_dims = missing_dims(mg, rule_set, problem, ahead=ahead)
            problem.info.warnings.extend(m.text() for m in problem.info.missing_dims)
    except BaseException as e:
        if ahead is not None:
            ahead.cancel()
        if isinstance(e, Exception):
            mg.ensure_valid()   # an invalid model explains the failure
        raise
    clock.lap("compile")
    return Prepared(mg, rule_set, problem, clock.seconds, pending, measured)


def vary(prepared: Prepared, change: Change) -> Prepared:
    """``prepared`` as if its rule file had ``change`` made (``NPU+=Pad``: docs/costs.md,
    "What if"): the model is not loaded again; when the change alters which devices take some
    node, the problem is compiled again from the loaded model under the changed rules (with
    the same objective and measured times), so solving it is a real re-solve and gives what
    solving with the edited rule file gives.  A change no node's support depends on returns
    the same problem.  ``prepared`` is not changed.

    Raises
    ------
    InfeasibleError
        The change leaves a node no device (``CPU-=Conv`` on a CPU-only model), or refuses a
        pinned node its device.
    """
    rules = apply_change(prepared.rules, change)
    mg = prepared.model_graph
    d = rules.device_index(change.device)
    touched = [g for g in mg.placeable()
               if rule_op_name(mg.op_types[g], mg.domains[g]) == change.op]
    before = SupportChecker(prepared.rules, mg).reasons(d, touched)
    after = SupportChecker(rules, mg).reasons(d, touched)
    if all((a is None) == (b is None) for a, b in zip(before, after)):
        return dataclasses.replace(prepared, rules=rules)
    start = time.perf_counter()
    problem = compile_problem(mg, rules, objective=prepared.problem.objective,
                              measured=prepared.measured)
    problem.info.missing_dims = missing_dims(mg, rules, problem)
    problem.info.warnings.extend(m.text() for m in problem.info.missing_dims)
    seconds = {**prepared.seconds, "compile": time.perf_counter() - start}
    return Prepared(mg, rules, problem, seconds, None, prepared.measured)


def measured_times(costs: CostSource, mg: ModelGraph) -> Measured | None:
    """What ``costs=`` gives: a profile file read (and checked to be one of this model) by
    :mod:`hetero_solve.times`, or a profile or :class:`Measured` as it is."""
    if costs is None:
        return None
    if isinstance(costs, (str, os.PathLike)):
        return Measured.of(read_profile(costs, mg))
    return Measured.of(costs)


def solve(model: str | os.PathLike | onnx.ModelProto | ModelGraph,
          rules: str | os.PathLike | dict | Rules, *, dims: dict[str, int] | None = None,
          shapes: dict[str, list[int]] | None = None, engine: str = "auto",
          time_limit: float | None = None, work_limit: float | None = None, seed: int = 0,
          objective: Objective | None = None, progress: Progress | None = None,
          costs: CostSource = None) -> Result:
    """Partition ``model`` under ``rules``: the fewest parts every device can run.

    Runs the pipeline (load, compile, heuristic, exact refinement, validate) and returns the
    answer; nothing is written (see :func:`hetero_solve.export.write_result`).

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
        refinement within the limit; ``auto``: the best available (CP-SAT).
    time_limit : float, optional
        Wall-clock seconds from the model prepared to the answer ready: a promise.  Work inside it is counted
        deterministically (:class:`~hetero_solve.budget.Budget`), so on a quiet machine the
        same input gives the same answer; when the clock ends first the best answer so far
        is returned, ``solution.stats["deterministic"]`` is False and a warning says so.
    work_limit : float, optional
        Deterministic seconds of work instead, with no clock: the same answer on any
        machine at any load (not with ``time_limit``).  Neither: the one library default,
        :data:`~hetero_solve.budget.DEFAULT_WORK` deterministic seconds (what ``-t 10``, the
        command's default, gives on a quiet machine).
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
        ``engine`` is not one of the four, or a limit is negative, or both are given.

    Examples
    --------
    >>> import hetero_solve as hs
    >>> r = hs.solve("examples/resnet_like.onnx", "rules/npu-static.yaml")   # doctest: +SKIP
    >>> r.metrics.partitions, r.solution.status                              # doctest: +SKIP
    (3, 'optimal')
    """
    check_engine(engine)
    limit = Limit.of(time_limit, work_limit)    # a bad limit fails before any work
    with paused_gc():
        # The checker (forked, lowest priority, on large models) is waited for at the end.
        prepared = prepare(model, rules, dims=dims, shapes=shapes, objective=objective,
                           progress=progress, defer_check=True, costs=costs)
        # the clock starts here: the model is prepared
        result = _solve(prepared, engine=engine, budget=limit.start(), seed=seed,
                        progress=progress)
    for message in result.warnings:
        warn(message)
    return result


def solve_prepared(prepared: Prepared, *, engine: str = "auto",
                   time_limit: float | None = None, work_limit: float | None = None,
                   budget: Budget | None = None, seed: int = 0,
                   progress: Progress | None = None) -> Result:
    """:func:`solve` from what :func:`prepare` returned (``check`` compares a map with the
    optimum of the problem it compiled once).  ``prepared`` is not changed.  ``budget``:
    a :class:`~hetero_solve.budget.Budget` to draw on instead of the limits (``check``
    shares one between its two solves)."""
    check_engine(engine)
    if budget is None:
        budget = Limit.of(time_limit, work_limit).start()
    with paused_gc():
        result = _solve(prepared, engine=engine, budget=budget, seed=seed, progress=progress)
    for message in result.warnings:
        warn(message)
    return result


def _solve(prepared: Prepared, *, engine: str, budget: Budget, seed: int,
           progress: Progress | None) -> Result:
    say = progress or (lambda _msg: None)
    clock = _Clock(prepared.seconds)
    lap = clock.lap
    mg, rule_set = prepared.model_graph, prepared.rules
    # the warnings below are this answer's: the prepared problem keeps its own
    problem = dataclasses.replace(prepared.problem, info=dataclasses.replace(
        prepared.problem.info, warnings=list(prepared.problem.info.warnings)))
    try:
        compiled = problem
        problem, sol, metrics, single = solve_problem(
            problem, engine=engine, budget=budget, seed=seed, progress=say, lap=lap)
        if problem is not compiled:
            # foldable nodes placed: the answer must pass check of what will be written,
            # which rebuilds its problem from the compiled one and the parts' node names
            violations = judge_answer(mg, compiled, problem, sol)
            if violations:
                raise ValidationError(violations)
        if prepared.missing_dims is not None:
            prepared.missing_dims.add_to(problem)
    except BaseException as e:
        if prepared.missing_dims is not None:
            prepared.missing_dims.cancel()
        if isinstance(e, Exception):
            mg.ensure_valid()   # an invalid model explains the failure
        raise
    mg.ensure_valid()
    lap("validate")
    warnings = list(problem.info.warnings) + _unknown_rank_boundaries(mg, problem, sol)
    sizes = open_sizes(problem, sol)
    if sizes is not None:
        # docs/problem.md: an unknown dim counts as 1, so these figures are lower bounds; a
        # memory-limited part holding such a tensor may not fit, which nothing here proves
        warnings.append(sizes.text(problem, sol))
        if sizes.unproven_fit:
            sol.status = "feasible" if sol.status == "optimal" else sol.status
            if "proven" in sol.stats:   # proven for the sizes counted, which may be short
                sol.stats["proven_if_sizes_hold"] = sol.stats["proven"]
                sol.stats["proven"] = []
    if budget.warning():     # the clock, not the deterministic budget, ended some work
        sol.stats.update(deterministic=False, stopped_by=budget.stopped_by)
        warnings.append(budget.warning())
    return Result(mg, rule_set, problem, sol, metrics, clock.seconds, warnings,
                  explanation=_with_claims(problem, sol, metrics, sol.stats.pop("explain", None)),
                  single_device=single)


def _with_claims(problem: Problem, sol: Solution, metrics: Metrics, ex: dict | None) -> dict | None:
    """The explanation with what the answer claims of each term (``claims``), read from the
    final records (docs/exact.md, "Explanations"): the summary and ``explain`` say the same."""
    if ex is None or "proven" not in sol.stats:
        return ex
    ex = dict(ex)
    ex["claims"] = answer_claims(problem, sol.stats, sol.lower_bound, metrics.as_dict())
    ex["text"] = explain_text(ex)
    return ex


def replace_answer(result: Result, sol: Solution) -> Result:
    """``result`` with another answer ``sol`` to the same problem (the measured fastest single
    device, :mod:`hetero_solve.profiles.answers`): its measures evaluated, judged by the
    validator, its claims read again; the rest as ``result`` has it."""
    metrics = evaluate(result.problem, sol)
    check(result.problem, sol, metrics=metrics)
    return dataclasses.replace(result, solution=sol, metrics=metrics,
                               explanation=_with_claims(result.problem, sol, metrics,
                                                        result.explanation))


def never_slower(problem: Problem, sol: Solution, single: SingleDevice | None) -> Solution:
    """``sol``, or the whole model on the best single device when the objective has a cost
    term and ranks that better or equal (docs/costs.md: an answer is never predicted slower
    than the obvious one; a tie keeps one part), or, under a latency objective priced with a
    measured profile, when ``sol`` is predicted faster by less than the profile's noise
    (``problem.info.noise``: then its latency is no longer claimed proven).  The kept answer
    has ``sol``'s bounds and records."""
    if single is None or not problem.objective.uses_costs():
        return sol
    key = problem.objective.key
    values = evaluate(problem, single.solution).as_dict()
    alone = key(values)
    found = key(evaluate(problem, sol).as_dict())
    if alone > found and problem.info.noise > 0 and "latency" in problem.objective.terms() \
            and sol.part_device != single.solution.part_device:
        # a measured profile: a predicted gain within the noise of a run is not one
        shaded = dict(values, latency=values["latency"] * (1 - problem.info.noise))
        if key(shaded) <= found:
            stats = dict(sol.stats)
            stats["proven"] = [t for t in stats.get("proven", []) if t not in
                               ("latency", "throughput")]
            stats["within_noise"] = round(problem.info.noise, 4)
            return dataclasses.replace(single.solution, lower_bound=sol.lower_bound,
                                       stats=stats, status="feasible")
    if alone > found or (alone == found and sol.num_parts == 1):
        return sol
    # a tie keeps the one part (and what was proven of the tied value)
    stats = dict(sol.stats)
    if "time" in stats.get("explain", {}):     # where the time goes: this answer's
        stats["explain"] = {**stats["explain"], "time": explain_time(problem, single.solution)}
    return dataclasses.replace(single.solution, lower_bound=sol.lower_bound, stats=stats,
                               status=sol.status if alone == found else "feasible")


def solve_problem(problem: Problem, start: Solution | None = None, *, engine: str = "auto",
                  budget: Budget | None = None, seed: int = 0,
                  progress: Progress | None = None, lap: Callable[[str], None] | None = None
                  ) -> tuple[Problem, Solution, Metrics, SingleDevice | None]:
    """heuristic -> exact -> never slower than one device -> validate on a compiled problem: a
    model's (:func:`solve`) or an instance file's
    (:func:`hetero_solve.instances.solve.solve_instance`).

    Parameters
    ----------
    problem : Problem
    start : Solution or None
        A first answer to use instead of the heuristic's (a hint when invalid).
    engine, seed, progress
        As :func:`solve`.
    budget : Budget or None
        The call's (default: 5 deterministic seconds, no clock).
    lap : callable or None
        Called with ``"heuristic"`` and ``"exact"`` when each step ends (stage times).

    Returns
    -------
    (Problem, Solution, Metrics, SingleDevice or None)
        The problem the answer answers (the exact engine may place optional folds), the
        validated answer, its measures, and the best single device (:func:`never_slower`).
    """
    say = progress or (lambda _msg: None)
    lap = lap or (lambda _name: None)
    if budget is None:
        budget = Budget.default()
    watch = getattr(progress, "watch", None)    # a progress line that reads the budget
    if watch is not None:
        watch(budget.root)
    if start is None:
        say(SOLVE_STAGE)
        start = initial_solution(problem, engine=engine, budget=budget, seed=seed,
                                 progress=say)
    lap("heuristic")
    if engine == "heuristic":
        sol = refine(problem, start, engine=engine, budget=budget, seed=seed, progress=say)
    else:   # the exact engine also decides optional folds: the problem may change
        problem, sol = refine_with_folds(problem, start, engine=engine, budget=budget,
                                         seed=seed, progress=say)
        # the call's budget, not one refinement's: folds and rescue drew on it too
        for key in ("time_limit", "work_limit", "stopped_by"):
            sol.stats.pop(key, None)
        sol.stats.update(budget.stats(), deterministic_seconds=round(budget.spent, 3))
    lap("exact")
    single = best_single_device(problem)
    sol = never_slower(problem, sol, single)
    say("validating")
    metrics = evaluate(problem, sol)
    check(problem, sol, metrics=metrics)
    return problem, sol, metrics, single


def initial_solution(problem: Problem, *, engine: str = "auto", budget: Budget | None = None,
                     seed: int = 0, progress: Progress | None = None) -> Solution:
    """The heuristic's answer (under a cost objective, with the islands that do not pay moved
    back: :func:`~hetero_solve.algorithms.islands.cost_islands`); when it cannot fit the
    memory limits (and says that is not a proof), the exact solver's, searched from one node
    per part within half of ``budget`` (default: 5 deterministic seconds, no clock).  The
    heuristic always runs (an answer is needed) and is charged to ``budget`` (one step per
    node).

    Raises
    ------
    InfeasibleError
        A node no device can hold (proven, named), or no partition found by either (the
        message says it is not a proof).
    """
    budget = budget if budget is not None else Budget.default()
    try:
        sol = heuristic(problem)
    except PackingFailed as failure:
        return _exact_rescue(problem, failure, engine, budget.split(2), seed,
                             progress or (lambda _m: None))
    finally:
        budget.charge(problem.n / RUN_STEPS_PER_SECOND)
    if problem.costs is not None and problem.objective.uses_costs():
        sol = cost_islands(problem, sol)     # islands that do not pay go back
        if problem.objective.order[0] == "throughput":
            staged = pipeline_stages(problem)    # the best cut of one order into stages
            if staged is not None and objective_key(problem, staged) < objective_key(problem, sol):
                staged.stats["heuristic_partitions"] = sol.stats.get("heuristic_partitions")
                sol = staged
    return sol


def _exact_rescue(problem: Problem, failure: InfeasibleError, engine: str, budget: Budget,
                  seed: int, say: Progress) -> Solution:
    """The heuristic can miss a packing that exists (bin packing); the exact solver, started
    from one node per part, searches for one within ``budget``.  If it finds none, the
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
    sol = refine(problem, start, engine=engine, budget=budget, seed=seed, progress=say)
    if validate(problem, sol):
        raise InfeasibleError(f"{failure}; the exact solver found none within its budget "
                              f"either (raise --time-limit or --work-limit to search longer)",
                              failure.nodes)
    problem.info.warnings.append(
        f"the greedy heuristic could not fit the memory limits ({failure}); the exact solver "
        f"found this partition")
    sol.stats["heuristic_partitions"] = None
    return sol


def _unknown_rank_boundaries(mg: ModelGraph, problem: Problem, sol: Solution) -> list[str]:
    """Part inputs/outputs whose rank shape inference could not find: their sub-models run in
    onnxruntime but onnx.checker rejects a graph input or output without a shape."""
    names = []
    for t, _, _ in crossings(problem, sol.part_of):
        if mg.tensor_type(problem.tensor_names[t]).rank is None:
            names.append(problem.tensor_names[t])
    if not names:
        return []
    return [f"{len(names)} tensor(s) between parts have an unknown rank, so their sub-models do "
            f"not pass onnx.checker (they still run): {', '.join(names[:5])}"]


def refine(problem: Problem, start: Solution, *, engine: str = "auto",
           budget: Budget | None = None, seed: int = 0,
           progress: Progress | None = None) -> Solution:
    """Exact refinement of a heuristic answer within ``budget`` (never worse than
    ``start``).  With ``engine="heuristic"`` the answer is kept and only its lower bound is
    computed (unless the deadline has passed)."""
    if problem.n == 0:
        return start
    if engine == "heuristic":
        if budget is not None and budget.out_of_time():
            return start
        if progress:
            progress("lower bound")
        # bounds over every fold choice: on the problem each optional fold relaxes
        rel = relaxed(problem)
        start.lower_bound = lower_bound(rel, start)
        if problem.has_memory_limits():
            R = device_sets(rel, fixed=False)
            if binding_devices(rel, R):
                start.stats.setdefault("bounds", {})["fallback"] = memory_bounds(rel, R).fallback
        return start
    if progress:
        progress(f"{EXACT_STAGE} ({engine})")
    return exact_refine(problem, start, engine=engine, budget=budget, seed=seed,
                        progress=progress)
