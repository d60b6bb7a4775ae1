"""``hetero-solve explain MODEL RULES``: why the model needs at least k parts."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import List, Optional

import typer

from ..engines import ENGINES, EXACT_ENGINES
from ..exact.explain import claims_text, explain_text, time_text
from ..units import format_seconds
from ..pipeline import prepare, solve, solve_prepared
from ..rules.change import parse_change
from ..budget import Limit
from ..what_if import candidates, outcome, rank_changes, what_if
from . import app
from .common import (UsageError, caught_warnings, costs_option, dim_option, expect_model_and_rules,
                     limits, objective_option, out_console, parse_dims, parse_objective,
                     parse_shapes, predicted_line, print_json, progress_on_stderr, quiet_option,
                     shape_option, time_limit_option, verbose_option, work_limit_option)



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
    objective: Optional[str] = objective_option(),
    costs: Optional[Path] = costs_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the explanation as JSON (the "
                                                       "'explain' entry of partition.json)."),
    limit: int = typer.Option(40, "--limit", min=1, help="Breaks to list per chain."),
    what_if_changes: List[str] = typer.Option(
        [], "--what-if", metavar="DEVICE+=OP",
        help="Solve again as if the rule file were changed: DEVICE+=OP makes the device take "
             "the op (listed as supported, its ops.when condition lifted), DEVICE-=OP makes it "
             "refuse it; repeatable (all applied together). Prints the answer before and after "
             "(parts, fallback nodes, predicted latency when there are costs).",
        show_default=False),
    rank: Optional[int] = typer.Option(
        None, "--rank", metavar="N", min=1,
        help="Rank the op types each device refuses (op list or ops.when condition) by what "
             "supporting them would save, each from a real re-solve; show the best N (e.g. "
             "--rank 5). Every solve of the command (the answer, --what-if, each ranked "
             "change) draws an equal share of the one limit (-t or --work-limit: with "
             "--work-limit the same ranking at any load).", show_default=False),
    quiet: bool = quiet_option(),
    verbose: bool = verbose_option(),
) -> None:
    """Why MODEL needs at least k parts under RULES: the chain of nodes behind the lower bound
    and the reason for each forced break (device change, value input, memory), then how the
    rest was proven.  Nothing is written.

    \b
    Examples:
      hetero-solve explain examples/transformer_encoder.onnx rules/npu-static.yaml --dim seq=16
      hetero-solve explain MODEL.onnx RULES.yaml --what-if NPU+=Pad --rank 5
    """
    if engine not in EXACT_ENGINES:
        raise UsageError(f"--engine {engine!r}: expected one of {', '.join(EXACT_ENGINES)}")
    expect_model_and_rules(model, rules, "hetero-solve explain MODEL.onnx RULES.yaml")
    time_limit, work_limit = limits(time_limit, work_limit)
    dims, shapes = parse_dims(dim), parse_shapes(shape)
    goal = parse_objective(objective)
    varied = None
    with caught_warnings() as warned:
        with progress_on_stderr(quiet, verbose) as say:
            if what_if_changes or rank:
                prepared = prepare(model, rules, dims=dims, shapes=shapes, objective=goal,
                                   progress=say, costs=costs)
                changes = _changes(what_if_changes, prepared.rules)
                result, varied = _what_if(prepared, changes, rank, engine=engine,
                                          limit=Limit.of(time_limit, work_limit), seed=seed,
                                          say=say)
            else:
                result = solve(model, rules, dims=dims, shapes=shapes, engine=engine,
                               time_limit=time_limit, work_limit=work_limit, seed=seed,
                               progress=say, objective=goal, costs=costs)
    ex = result.explanation
    if ex is None:
        raise UsageError("no explanation: the exact solver is not available in this build")
    missing = result.problem.info.missing_dims
    said = [entry.text() for entry in missing]   # printed below, not as warnings
    warned.show(result.warnings, skip=said)
    if as_json:
        print_json(_as_json(result, ex, varied))
        return
    _print_explanation(result, ex, said, limit)
    _print_what_if(varied)


def _print_explanation(result, ex: dict, said: list[str], limit: int) -> None:
    """The answer's head line, then the explanation in words: where the time goes under a
    cost objective, else the chain behind the lower bound (``limit`` breaks per chain)."""
    m, sol, p = result.metrics, result.solution, result.problem
    head = f"{Path(result.model_graph.path).name}: {m.partitions} part(s), status {sol.status}"
    if "time" in ex:
        out_console.print(f"{head}, objective {p.objective.describe()}", markup=False)
        claimed = [claims_text(ex["claims"]) + "."] if ex.get("claims") else []
        lines = [*said, *claimed, predicted_line(result), *time_text(ex["time"])]
    else:
        out_console.print(f"{head}, lower bound {sol.lower_bound}", markup=False)
        lines = [*said, *explain_text(ex, limit)]
    for line in lines:
        out_console.print(line, markup=False, soft_wrap=True)


def _changes(texts: list[str], rules) -> list:
    """The ``--what-if`` changes, checked against the rule file."""
    changes = []
    for text in texts:
        try:
            changes.append(parse_change(text, rules))
        except ValueError as e:
            raise UsageError(f"--what-if {e}") from None
    return changes


def _as_json(result, ex: dict, varied: dict | None) -> dict:
    """``explain --json``: the answer's status and objective, then the explanation as
    ``partition.json``'s ``explain`` holds it (under a cost objective with ``time``: where the
    time goes), the dims without a value, and the what-if answers when asked."""
    p, m = result.problem, result.metrics
    head = {"status": result.solution.status, "objective": m.as_dict(),
            "objective_spec": p.objective.describe()}
    if result.single_device is not None:
        head["single_device"] = result.single_device.as_dict(p)
    missing = p.info.missing_dims
    tail = {"missing_dims": [dataclasses.asdict(e) for e in missing]} if missing else {}
    return {**head, **ex, **tail, **(varied or {})}


def _what_if(prepared, changes, rank, *, engine, limit: Limit, seed, say) -> tuple:
    """The answer, and the what-if answers (``--what-if``: before and after) and the ranking
    (``--rank``) as ``explain --json`` gives them: every solve an equal share of the one
    budget, made once the model is prepared."""
    ranked = candidates(prepared) if rank else []
    budget = limit.start()                   # the model is prepared: the clock starts
    solves = 1 + bool(changes) + len(ranked)
    result = solve_prepared(prepared, engine=engine, budget=budget.split(solves), seed=seed,
                            progress=say)
    before = outcome(result)
    out: dict = {}
    if changes:
        say(f"what if {', '.join(map(str, changes))}")
        after = outcome(what_if(prepared, changes, engine=engine,
                                budget=budget.split(solves - 1), seed=seed))
        out["what_if"] = {"changes": [str(c) for c in changes], "before": before.as_dict(),
                          "after": after.as_dict()}
    if rank:
        best, tried = rank_changes(prepared, before, top=rank, engine=engine, budget=budget,
                                   seed=seed, progress=say, changes=ranked)
        out["ranking"] = {"candidates": tried, "limit": str(limit),
                          "before": before.as_dict(), "best": [r.as_dict() for r in best]}
    return result, out


def _outcome_text(o: dict) -> str:
    ms = "" if o["latency"] is None else f", predicted latency {format_seconds(o['latency'])}"
    return (f"{o['partitions']} part(s), {o['fallback']} node(s) on {o['fallback_device']}{ms} "
            f"({o['status']})")


def _print_what_if(varied: dict | None) -> None:
    """The text of :func:`_what_if`'s answers."""
    if not varied:
        return
    lines = []
    if "what_if" in varied:
        w = varied["what_if"]
        lines += [f"what if {', '.join(w['changes'])}:",
                  f"  before: {_outcome_text(w['before'])}",
                  f"  after:  {_outcome_text(w['after'])}"]
    if "ranking" in varied:
        r = varied["ranking"]
        lines.append(f"refused op types ranked by what supporting them saves ({r['candidates']} "
                     f"candidate(s), each re-solved on an equal share of {r['limit']}; now "
                     f"{_outcome_text(r['before'])}):")
        if not r["best"]:
            lines.append("  none: no device refuses an op type of this model for its op list "
                         "or an ops.when condition")
        for k, row in enumerate(r["best"], 1):
            lines.append(f"  {k}. {row['change']}: "
                         f"{saves_text(row['saves'], row['after']['fallback_device'])} -> "
                         f"{_outcome_text(row['after'])}")
    for line in lines:
        out_console.print(line, markup=False, soft_wrap=True)


def saves_text(saves: dict, fallback_device: str) -> str:
    """What a ranked change saves, in words that stay true when it makes the answer worse
    ("adds 2 part(s)", "3 more node(s) on CPU", "1.2 ms slower"; a saving reads "saves 4
    part(s), 5 node(s) on CPU, 1.2 ms").

    >>> saves_text({"partitions": 4, "fallback": 5, "latency": None}, "CPU")
    'saves 4 part(s), 5 node(s) on CPU'
    >>> saves_text({"partitions": -2, "fallback": -3, "latency": -0.0012}, "CPU")
    'adds 2 part(s), 3 more node(s) on CPU, 1.2 ms slower'
    """
    parts, fallback, latency = saves["partitions"], saves["fallback"], saves["latency"]
    text = f"saves {parts} part(s)" if parts >= 0 else f"adds {-parts} part(s)"
    text += (f", {fallback} node(s) on {fallback_device}" if fallback >= 0
             else f", {-fallback} more node(s) on {fallback_device}")
    if latency is not None:
        text += (f", {format_seconds(latency)}" if latency >= 0
                 else f", {format_seconds(-latency)} slower")
    return text

