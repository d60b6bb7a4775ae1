"""``hetero-solve study MODELS... --rules RULES...``: every algorithm side by side."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from ..study import ALGORITHMS, StudyConfig, analyse, run_study
from ..study.executors import EXECUTORS
from . import app
from .common import (UsageError, limits, objective_option, out_console, parse_dims,
                     parse_shapes, print_line, print_out, quiet_option, shape_option, verbose_option)

RULE_SUFFIXES = (".yaml", ".yml")


@app.command("study")
def study_command(
    inputs: List[Path] = typer.Argument(
        ..., metavar="MODELS...", show_default=False,
        help="ONNX models, or folders of them. Arguments ending in .yaml/.yml are taken as "
             "rule files, so '--rules rules/*.yaml' works as the shell expands it."),
    rules: List[Path] = typer.Option([], "--rules", "-r", metavar="RULES",
                                     help="Rule file (repeatable; see rules/ for profiles)."),
    algorithms: List[str] = typer.Option(
        ["all"], "--algorithms", "-a", metavar="A[,B...]",
        help=f"Algorithms to run, comma-separated or repeated: {', '.join(ALGORITHMS)}, or all."),
    time_limit: Optional[float] = typer.Option(
        None, "--time-limit", "-t", min=0, show_default=False,
        help="Wall-clock seconds per run for CP-SAT and SAT (default 10; the others run to "
             "completion). A run the clock ends first says deterministic=False."),
    work_limit: Optional[float] = typer.Option(
        None, "--work-limit", min=0, show_default=False,
        help="Instead: deterministic seconds of work per run, no clock: the same answers on "
             "any machine at any load (results.csv records the mode)."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1,
                             help="Runs in parallel: local processes, or Dask workers of a local "
                                  "cluster. 1 = in this process."),
    out: Path = typer.Option(Path("study"), "-o", "--out",
                             help="Output directory: results.csv, summary.md, parts/time plots "
                                  "(PNG, SVG), runs/ (one JSON per run, reused on restart)."),
    dim: List[str] = typer.Option([], "--dim", "-d", metavar="NAME=VALUE",
                                  help="Value of a symbolic dimension for every model "
                                       "(repeatable; beats the rule files' dims)."),
    shape: List[str] = shape_option(),
    executor: str = typer.Option("local", "--executor",
                                 help=f"Where runs execute: {' or '.join(EXECUTORS)} "
                                      "(dask.distributed, the 'dask' extra)."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", metavar="ADDRESS",
                                            help="Dask scheduler, e.g. tcp://host:8786 "
                                                 "(default: a local cluster of --jobs workers)."),
    seed: int = typer.Option(0, "--seed", help="Solver seed for CP-SAT and SAT."),
    objective: Optional[str] = objective_option(),
    memory: str = typer.Option("rss", "--memory",
                               help="Peak memory measure: rss (resident set increase, no "
                                    "overhead), tracemalloc (Python heap, a second traced run), "
                                    "or none."),
    note: str = typer.Option("", "--note", help="A sentence for summary.md (e.g. the machine "
                                                "was shared)."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Tables only (no matplotlib)."),
    quiet: bool = quiet_option(),
    verbose: bool = verbose_option(),
) -> None:
    """Run algorithms over models × rule files; validate every answer; tables and plots.

    Every (model, rules) pair is compiled once, then each algorithm runs on it and its answer
    is checked by the validator: invalid answers are reported with the reason, never hidden.
    Each finished run is saved at once under OUT/runs/: an interrupted study, started again
    with the same arguments, computes only what is missing.

    Example: `hetero-solve study examples/*.onnx --rules rules/*.yaml -j 2 -o study/`

    Example: `hetero-solve study models/ -r rules/npu-static.yaml -a heuristic,openvino,glow
    --executor dask --scheduler tcp://10.0.0.5:8786`
    """
    models, rule_files = _split_inputs(inputs)
    # '--rules a.yaml b.yaml' reaches us as the option value a.yaml and the positional b.yaml:
    # option values first keeps the command line's order.
    rule_files = list(rules) + rule_files
    names = [a.strip() for item in algorithms for a in item.split(",") if a.strip()]
    if scheduler and executor == "local":
        executor = "dask"               # an address only makes sense for Dask
    time_limit, work_limit = limits(time_limit, work_limit)
    config = StudyConfig(models=models, rules=_unique(rule_files), out_dir=out,
                         algorithms=names, time_limit=time_limit, work_limit=work_limit,
                         jobs=jobs, dims=parse_dims(dim), shapes=parse_shapes(shape),
                         executor=executor, scheduler=scheduler,
                         seed=seed, memory=memory, note=note, plots=not no_plots,
                         objective=objective,
                         command=" ".join(shlex.quote(a) for a in ["hetero-solve", *sys.argv[1:]]))
    result = run_study(config, progress=not quiet, verbose=verbose)
    _print_study(result, out)


def _print_study(result, out: Path) -> None:
    """The study's table, the problems with dims left open, what was computed and written."""
    print_table(result.records, config_algorithms(result.records))
    open_dims = {(r["model"], r["rules"]): r["missing_dims"] for r in result.records
                 if r.get("missing_dims")}
    if open_dims:
        (model, rules), text = next(iter(open_dims.items()))
        out_console.print(f"dims with no value in {len(open_dims)} problem(s) (their answers "
                          f"are marked † in summary.md and parts.*): {Path(model).name} × "
                          f"{Path(rules).name}: {text}", markup=False, highlight=False,
                          soft_wrap=True)
    print_line(f"runs: {result.computed} computed, {result.reused} reused   "
               f"written: {out}/ ({', '.join(p.name for p in result.files)})")


def config_algorithms(records: list[dict]) -> list[str]:
    seen: list[str] = []
    for r in records:
        if r["algorithm"] not in seen:
            seen.append(r["algorithm"])
    return seen


def print_table(records: list[dict], algorithms: list[str]) -> None:
    a = analyse(records, algorithms)
    table = Table(title=f"study: {len(a['problems'])} problem(s)", title_justify="left")
    for col in ("algorithm", "solved", "valid", "optimal", "mean gap", "mean s", "other"):
        table.add_column(col, justify="left" if col in ("algorithm", "other") else "right")
    for alg, s in a["algorithms"].items():
        other = ", ".join(f"{v} {k}" for k, v in s["other"].items() if v)
        gap = "" if s["mean_gap"] is None else f"{s['mean_gap']:.2f}"
        secs = "" if s["mean_seconds"] is None else f"{s['mean_seconds']:.4f}"
        table.add_row(alg, f"{s['solved']}/{s['runs']}", str(s["valid"]), str(s["optimal"]),
                      gap, secs, other)
    print_out(table)


def _split_inputs(inputs: list[Path]) -> tuple[list[Path], list[Path]]:
    models: list[Path] = []
    rules: list[Path] = []
    for p in inputs:
        if p.suffix.lower() in RULE_SUFFIXES:
            rules.append(p)
        elif p.is_dir():
            found = sorted(p.glob("*.onnx"))
            if not found:
                raise UsageError(f"{p}: a folder without .onnx files")
            models.extend(found)
        else:
            models.append(p)
    return _unique(models), rules


def _unique(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p not in out:
            out.append(p)
    return out
