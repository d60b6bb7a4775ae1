"""``hetero-solve instance FILE`` (also ``hetero-solve FILE`` when FILE is an instance file):
solve a problem given without an ONNX model, under a cost objective."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ..export.writer import check_target
from ..instances.solve import OBJECTIVES, InstanceResult, instance_manifest, solve_instance, write_instance
from . import app
from .common import (UsageError, json_option, limits, print_json, print_line, print_out,
                     progress_on_stderr, quiet_option, time_limit_option, verbose_option,
                     work_limit_option)

MAX_ROWS = 40


@app.command("instance")
def instance_command(
    path: Path = typer.Argument(..., metavar="INSTANCE", show_default=False,
                                help="An instance file: Tarnawski et al.'s (NeurIPS 2020) JSON "
                                     "operator graph with CPU and accelerator times."),
    objective: str = typer.Option("throughput", "--objective",
                                  help="throughput: the pipeline's time per sample (largest "
                                       "load of a device instance); latency: one inference, "
                                       "parts one after another."),
    contiguous: bool = typer.Option(False, "--contiguous",
                                    help="At most one part per device instance (pipeline "
                                         "stages, as the paper's dynamic programme assumes)."),
    out: Optional[str] = typer.Option(None, "-o", "--out",
                                      help="Output directory for partition.json (default: "
                                           "INSTANCE_STEM.hetero/ next to the file)."),
    time_limit: Optional[float] = time_limit_option(30.0),
    work_limit: Optional[float] = work_limit_option(),
    seed: int = typer.Option(0, "--seed", help="Solver seed: same input and seed, same answer."),
    as_json: bool = json_option("the result (partition.json's content)"),
    quiet: bool = quiet_option(),
    verbose: bool = verbose_option(),
) -> None:
    """Place an operator graph given without a model (an instance file) on CPU cores and
    accelerators, minimising time per sample or latency, with a proof when one is found.

    Writes OUT/partition.json: parts with their device instance, nodes (the file's ids) and
    each instance's load; objective (throughput = time per sample, latency); lower_bound;
    status (optimal = proven). Times keep the file's unit.

    \b
    Examples:
      hetero-solve bert.json --objective throughput --contiguous -o bert.hetero
      hetero-solve instance resnet50.json --objective latency -t 60
    """
    if objective not in OBJECTIVES:
        raise UsageError(f"--objective {objective!r}: expected one of {', '.join(OBJECTIVES)}")
    time_limit, work_limit = limits(time_limit, work_limit, default=30.0)
    target = check_target(path.with_suffix(".hetero") if out is None else out)
    with progress_on_stderr(quiet, verbose, time_limit) as say:
        result = solve_instance(path, objective, contiguous=contiguous, time_limit=time_limit,
                                work_limit=work_limit, progress=say)
        written = write_instance(result, target)
    if as_json:
        print_json({**instance_manifest(result), "out_dir": str(written)})
        return
    print_instance_summary(result, written)


def print_instance_summary(result: InstanceResult, out_dir: Path | None = None) -> None:
    """The parts (device instance, nodes, load) and the objective, on stdout."""
    p, sol, m = result.problem, result.solution, result.metrics
    loads = instance_manifest(result)
    table = Table(title=f"{Path(result.path).name}: {m.partitions} part(s)", title_justify="left")
    for col in ("part", "device", "nodes", "instance load"):
        table.add_column(col, justify="left" if col == "device" else "right")
    for part in loads["partitions"][:MAX_ROWS]:
        table.add_row(str(part["id"]), f"{part['device']}.{part['instance']}",
                      str(len(part["nodes"])), f"{part['instance_load']:.6g}")
    if len(loads["partitions"]) > MAX_ROWS:
        table.add_row("...", f"{len(loads['partitions']) - MAX_ROWS} more", "", "")
    print_out(table)
    term = p.objective.order[0]
    bound = sol.stats.get("cost_bounds", {}).get(term)
    value = getattr(m, term)
    print_line(f"status: {sol.status}   {term}: {value:.6g}"
               + (f" (lower bound {bound:.6g})" if bound is not None else "")
               + ("   contiguous stages" if p.costs.contiguous else "")
               + f"   time: {result.seconds:.2f}s")
    if out_dir is not None:
        print_line(f"written: {out_dir}/")
