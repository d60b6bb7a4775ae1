"""``hetero-solve explain MODEL RULES``: why the model needs at least k parts."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import List, Optional

import typer

from ..engines import ENGINES, EXACT_ENGINES
from ..exact.explain import explain_text
from ..measures.costs import latency_by_part
from ..units import format_seconds, instance_label
from ..pipeline import solve
from . import app
from .common import (UsageError, caught_warnings, costs_option, dim_option, expect_model_and_rules,
                     objective_option, out_console, parse_dims, parse_objective, parse_shapes,
                     predicted_line, print_json, progress_on_stderr, quiet_option, shape_option,
                     verbose_option)



@app.command("explain")
def explain_command(
    model: Path = typer.Argument(..., metavar="MODEL", help="The ONNX model.",
                                 show_default=False),
    rules: Path = typer.Argument(..., metavar="RULES", help="Rule file (YAML).",
                                 show_default=False),
    time_limit: float = typer.Option(10.0, "--time-limit", "-t", min=0,
                                     help="Seconds for the exact solver after the heuristic."),
    dim: List[str] = dim_option(),
    shape: List[str] = shape_option(),
    engine: str = typer.Option("auto", "--engine", "-e",
                               help="; ".join(f"{n}: {ENGINES[n].description}" for n in EXACT_ENGINES)
                                    + "."),
    seed: int = typer.Option(0, "--seed", help="Solver seed."),
    objective: Optional[str] = objective_option(),
    costs: Optional[Path] = costs_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the explanation as JSON (the "
                                                       "'explain' entry of partition.json)."),
    limit: int = typer.Option(40, "--limit", min=1, help="Breaks to list per chain."),
    quiet: bool = quiet_option(),
    verbose: bool = verbose_option(),
) -> None:
    """Why MODEL needs at least k parts under RULES: the chain of nodes behind the lower bound
    and the reason for each forced break (device change, value input, memory), then how the
    rest was proven.  Nothing is written.

    \b
    Example:
      hetero-solve explain examples/transformer_encoder.onnx rules/npu-static.yaml --dim seq=16
    """
    if engine not in EXACT_ENGINES:
        raise UsageError(f"--engine {engine!r}: expected one of {', '.join(EXACT_ENGINES)}")
    expect_model_and_rules(model, rules, "hetero-solve explain MODEL.onnx RULES.yaml")
    dims, shapes = parse_dims(dim), parse_shapes(shape)
    goal = parse_objective(objective)
    with caught_warnings() as warned:
        with progress_on_stderr(quiet, verbose, time_limit) as say:
            result = solve(model, rules, dims=dims, shapes=shapes, engine=engine,
                           time_limit=time_limit, seed=seed, progress=say, objective=goal,
                           costs=costs)
    if result.problem.objective.uses_costs():
        warned.show(result.warnings)
        _explain_time(result, as_json)
        return
    ex = result.explanation
    if ex is None:
        raise UsageError("no explanation: the exact solver is not available in this build")
    missing = result.problem.info.missing_dims
    said = [entry.text() for entry in missing]   # printed below, not as warnings
    warned.show(result.warnings, skip=said)
    if as_json:
        print_json({**ex, "missing_dims": [dataclasses.asdict(m) for m in missing]}
                   if missing else ex)
        return
    m, sol = result.metrics, result.solution
    out_console.print(f"{Path(result.model_graph.path).name}: {m.partitions} part(s), "
                      f"status {sol.status}, lower bound {sol.lower_bound}", markup=False)
    for line in said:
        out_console.print(line, markup=False, soft_wrap=True)
    for line in explain_text(ex, limit):
        out_console.print(line, markup=False, soft_wrap=True)


def _explain_time(result, as_json: bool) -> None:
    """Under a cost objective: the predicted time, the best single device's, and where the
    time goes part by part (compute, fixed cost, transfers; docs/costs.md)."""
    p, sol, m = result.problem, result.solution, result.metrics
    spread = latency_by_part(p, sol.part_of, sol.part_device)
    sizes = [len(nodes) for nodes in sol.parts()]
    parts = [{"id": k, "device": instance_label(p.devices[d].name, sol.part_instance[k],
                                                p.devices[d].instances),
              "nodes": sizes[k], **spread[k]} for k, d in enumerate(sol.part_device)]
    if as_json:
        single = result.single_device
        print_json({"status": sol.status, "objective": m.as_dict(),
                    "objective_spec": p.objective.describe(),
                    "single_device": None if single is None else single.as_dict(p),
                    "parts": parts})
        return
    out_console.print(f"{Path(result.model_graph.path).name}: {m.partitions} part(s), status "
                      f"{sol.status}, objective {p.objective.describe()}", markup=False)
    out_console.print(predicted_line(result), markup=False, soft_wrap=True)
    for row in parts:
        out_console.print(f"  part {row['id']} on {row['device']}: {row['nodes']} node(s): "
                          f"compute {format_seconds(row['compute'])}, fixed cost "
                          f"{format_seconds(row['fixed'])}, transfers "
                          f"{format_seconds(row['transfer'])}", markup=False, soft_wrap=True)
