"""The pipeline, in order: load the model -> compile rules into a problem -> heuristic ->
exact refinement -> validate -> (export).

:func:`solve` is what the command line runs and what ``import hetero_solve`` offers; it
touches the file system only to read its inputs.  :meth:`Result.write` exports.
"""

from __future__ import annotations

import gc
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import onnx

from .algorithms.greedy import heuristic
from .compile import compile_problem
from .export.submodels import (DIRECT_FILE, build_direct_model, build_part_model,
                               direct_outputs, part_boundaries, part_boundary, unused_inputs)
from .export.writer import part_file, write_result
from .model import ModelGraph, load_model
from .problem import Objective, Problem, topological_order
from .rules import Rules, load_rules
from .solution import Metrics, Solution, evaluate, quotient_edges
from .errors import InfeasibleError
from .validate import check, validate

ENGINES = ("auto", "heuristic", "cpsat", "sat")
Progress = Callable[[str], None]


@dataclass
class Result:
    model_graph: ModelGraph
    rules: Rules
    problem: Problem
    solution: Solution
    metrics: Metrics
    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    explanation: dict | None = None

    # -- views -------------------------------------------------------------------------------
    def parts(self) -> list[list[int]]:
        return self.solution.parts()

    def affinity(self) -> dict[str, str]:
        """Node name -> device name for every placed node (OpenVINO's QueryNetwork map)."""
        device_names = [d.name for d in self.problem.devices]
        return dict(zip(self.problem.names, [device_names[d] for d in self.solution.node_device()]))

    def manifest(self, files: bool = True) -> dict:
        """The content of ``partition.json`` (SPEC section 7)."""
        p, sol, mg = self.problem, self.solution, self.model_graph
        parts = []
        boundaries = part_boundaries(p, sol.part_of)
        for k, nodes in enumerate(sol.parts()):
            ins, outs = boundaries.get(k, ([], []))
            dev = p.devices[sol.part_device[k]].name
            graph_nodes = sorted(p.graph_index[v] for v in nodes)
            parts.append({
                "id": k, "device": dev, "instance": sol.part_instance[k],
                "nodes": graph_nodes, "node_names": [mg.names[g] for g in graph_nodes],
                "inputs": ins, "outputs": outs, "memory": self.metrics.part_memory[k],
                "file": part_file(k, dev) if files else None})
        stats = dict(sol.stats)
        extra = {}
        names, inputs = direct_outputs(mg)
        if names:   # constant or passed-through graph outputs: no part makes them, this model does
            extra["direct_outputs"] = {"names": names, "inputs": inputs,
                                       "file": DIRECT_FILE if files else None}
        unused = unused_inputs(mg)
        if unused:   # inputs of the original that nothing reads: run accepts and ignores them
            extra["unused_inputs"] = unused
        return {
            "version": 1,
            "model": mg.path, "rules": self.rules.path,
            "status": sol.status,
            "objective": self.metrics.as_dict(),
            "objective_spec": p.objective.describe(),
            "lower_bound": {"partitions": sol.lower_bound},
            "partitions": parts,
            "edges": [list(e) for e in sorted(quotient_edges(p, sol.part_of))],
            "folded": sorted(p.meta.get("folded", [])),
            "constant_nodes": sorted(p.meta.get("constant_nodes", [])),
            "devices": [{"name": d.name, "memory": d.memory, "instances": d.instances,
                         "value_inputs": "enforce" if d.enforce_values else "ignore",
                         "runtime": r.runtime,
                         "memory_used": [self.metrics.instance_memory.get((i, j), 0)
                                         for j in range(d.instances)]}
                        for i, (d, r) in enumerate(zip(p.devices, self.rules.devices))],
            "graph_inputs": list(mg.graph_inputs),
            "graph_outputs": list(mg.graph_outputs),
            **extra,
            "dims": dict(mg.dims),
            "warnings": list(self.warnings),
            "explain": self.explanation,
            "solver": {"algorithm": sol.algorithm,
                       "heuristic_partitions": stats.pop("heuristic_partitions", None),
                       "seconds": round(sum(self.seconds.values()), 4),
                       "stages": {k: round(v, 4) for k, v in self.seconds.items()}, **stats},
        }

    def part_model(self, k: int, nodes: list[int] | None = None,
                   boundary: tuple[list[str], list[str]] | None = None) -> onnx.ModelProto:
        """The sub-model of part ``k``.  ``nodes`` (its nodes) and ``boundary`` (its inputs
        and outputs, as the manifest lists them), when known, save recomputing them."""
        if nodes is None:
            nodes = [v for v, q in enumerate(self.solution.part_of) if q == k]
        ins, outs = boundary or part_boundary(self.problem, self.solution, k, nodes)
        return build_part_model(self.model_graph, self.problem, self.solution, k, nodes, ins, outs)

    def direct_model(self) -> onnx.ModelProto | None:
        """The model of the graph outputs no part makes (constants, passed-through inputs),
        or None when there are none."""
        names, inputs = direct_outputs(self.model_graph)
        return build_direct_model(self.model_graph, names, inputs) if names else None

    def annotated_model(self) -> onnx.ModelProto:
        """The original model, each placed node with ``affinity`` and ``partition`` metadata.
        Unnamed and duplicate-named nodes get the generated names affinity.json uses."""
        m = onnx.ModelProto()
        m.CopyFrom(self.model_graph.model)
        nodes = m.graph.node
        names = self.model_graph.names
        for g, node in enumerate(nodes):
            if node.name != names[g]:
                node.name = names[g]
        devs = self.problem.devices
        for v, g in enumerate(self.problem.graph_index):
            p = self.solution.part_of[v]
            node = nodes[g]
            for key, value in (("affinity", devs[self.solution.part_device[p]].name),
                               ("partition", str(p))):
                entry = node.metadata_props.add()
                entry.key, entry.value = key, value
        return m

    def write(self, out_dir: str | os.PathLike | None = None, **kw) -> Path:
        """Export to OUT_DIR (default ``<model stem>.hetero/`` next to the model)."""
        with paused_gc():
            target = default_out_dir(self.model_graph.path) if out_dir is None else out_dir
            return write_result(self, target, **kw)


@contextmanager
def paused_gc():
    """Pause the cyclic garbage collector.  The pipeline creates hundreds of thousands of small
    acyclic lists and tuples; each allocation burst would trigger collections that rescan every
    live object (40 % of compile time at 100,000 nodes).  Reference counting still frees
    everything; the previous GC state is restored."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def default_out_dir(model_path: str) -> Path:
    p = Path(model_path)
    return p.with_name(p.stem + ".hetero") if model_path != "<model>" else Path("model.hetero")


def solve(model: str | os.PathLike | onnx.ModelProto | ModelGraph,
          rules: str | os.PathLike | dict | Rules, *, dims: dict[str, int] | None = None,
          engine: str = "auto", time_limit: float = 10.0, seed: int = 0,
          objective: Objective | None = None, progress: Progress | None = None) -> Result:
    """Partition ``model`` under ``rules``; nothing is written.

    ``dims`` override the rule file's ``dims``.  ``engine``: ``heuristic`` (greedy only),
    ``cpsat`` or ``sat`` (exact refinement within ``time_limit`` seconds), ``auto`` (the best
    available, CP-SAT).  Raises a :class:`~hetero_solve.errors.HeteroSolveError` on bad input.

    >>> r = solve("examples/resnet_like.onnx", "rules/npu-static.yaml")   # doctest: +SKIP
    >>> r.metrics.partitions, r.solution.status                           # doctest: +SKIP
    (3, 'optimal')
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    with paused_gc():
        return _solve(model, rules, dims=dims, engine=engine, time_limit=time_limit, seed=seed,
                      objective=objective, progress=progress)


def _solve(model, rules, *, dims, engine, time_limit, seed, objective, progress) -> Result:
    say = progress or (lambda _msg: None)
    seconds: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[stage] = seconds.get(stage, 0.0) + now - clock
        clock = now

    say("reading rules")
    rule_set = rules if isinstance(rules, Rules) else load_rules(rules)
    lap("rules")
    all_dims = {**rule_set.dims, **(dims or {})}
    if isinstance(model, ModelGraph):
        mg = model
    else:
        say("loading the model and inferring shapes")
        # The checker (forked, lowest priority, on large models) is waited for at the end.
        mg = load_model(model, dims=all_dims, defer_check=True)
    lap("load")
    try:
        say(f"compiling rules for {len(mg.names)} nodes")
        problem = compile_problem(mg, rule_set, objective=objective)
        lap("compile")
        say("greedy heuristic")
        try:
            sol = heuristic(problem)
        except InfeasibleError as failure:
            sol = _exact_rescue(problem, failure, engine, time_limit, seed, say)
        lap("heuristic")
        sol = refine(problem, sol, engine=engine, time_limit=time_limit, seed=seed, progress=say)
        lap("exact")
        say("validating")
        metrics = evaluate(problem, sol)
        check(problem, sol, metrics=metrics)
    except Exception:
        mg.ensure_valid()   # an invalid model explains the failure
        raise
    mg.ensure_valid()
    lap("validate")
    warnings = list(problem.meta.get("warnings", [])) + _unknown_rank_boundaries(mg, problem, sol)
    return Result(mg, rule_set, problem, sol, metrics, seconds, warnings,
                  explanation=sol.stats.pop("explain", None))


def _exact_rescue(problem: Problem, failure: InfeasibleError, engine: str, time_limit: float,
                  seed: int, say: Progress) -> Solution:
    """The greedy packs memory in one pass and can miss a packing that exists (bin packing);
    the exact solver, started from one node per part, searches for one.  If it finds none
    within the time limit the greedy's error stands."""
    if engine == "heuristic" or not problem.has_memory_limits():
        raise failure
    say("the heuristic could not fit the memory limits: searching with the exact solver")
    order = topological_order(problem.succ, problem.pred)
    start = Solution(part_of=[0] * problem.n, part_device=[problem.allowed[v][0] for v in order],
                     part_instance=[0] * problem.n, algorithm="one node per part")
    for k, v in enumerate(order):
        start.part_of[v] = k
    sol = refine(problem, start, engine=engine, time_limit=time_limit, seed=seed, progress=say)
    if validate(problem, sol):
        raise failure
    problem.meta.setdefault("warnings", []).append(
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
        start.lower_bound = lower_bound(problem, start)
        return start
    return exact_refine(problem, start, engine=engine, time_limit=time_limit, seed=seed,
                        progress=progress)
