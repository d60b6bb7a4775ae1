"""``hetero-solve explain MODEL RULES``: why the model needs at least k parts."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import List, Optional

import typer

from ..engines import ENGINES, EXACT_ENGINES
from ..exact.explain import explain_text
from ..pipeline import solve
from . import app
from .common import (UsageError, caught_warnings, dim_option, expect_model_and_rules,
                     limits, out_console, parse_dims, parse_shapes, print_json,
                     progress_on_stderr, quiet_option, shape_option, time_limit_option,
                     verbose_option, work_limit_option)



@app.command("explain")
def explain_command(
    model: Path = typer.Argument(..., metavar="MODEL", help="The ONNX model.",
                                 show_default=False),
    rules: Path = typer.Argument(..., metavar="RULES", help="Rule file (YAML).",
                                 show_default=False),
    time_limit: Optional[float] = time_limit_option(),
    work_limit: Optional[float] = work_limit_option(),
    dim: List[str] = dim_option(),
    shape: List[str] = shape_option(),
    engine: str = typer.Option("auto", "--engine", "-e",
                               help="; ".join(f"{n}: {ENGINES[n].description}" for n in EXACT_ENGINES)
                                    + "."),
    seed: int = typer.Option(0, "--seed", help="Solver seed."),
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
    time_limit, work_limit = limits(time_limit, work_limit)
    dims, shapes = parse_dims(dim), parse_shapes(shape)
    with caught_warnings() as warned:
        with progress_on_stderr(quiet, verbose, time_limit) as say:
            result = solve(model, rules, dims=dims, shapes=shapes, engine=engine,
                           time_limit=time_limit, work_limit=work_limit, seed=seed,
                           progress=say)
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
