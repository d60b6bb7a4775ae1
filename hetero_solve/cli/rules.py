"""``hetero-solve rules check RULES [MODEL]``: validate a rule file and explain it on a model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ..model import load_model
from ..rules import load_rules
from ..rules.check import format_query, format_summary, query, summary
from . import app
from .common import out_console, parse_dims

rules_app = typer.Typer(no_args_is_help=True, add_completion=False,
                        help="Rule files: validate one, or see what each device takes in a model.")
app.add_typer(rules_app, name="rules")


@rules_app.command("check")
def check_command(
    rules: Path = typer.Argument(..., help="Rule file (YAML) to validate.", show_default=False),
    model: Optional[Path] = typer.Argument(None, help="ONNX model: report per device which nodes "
                                                      "it takes and refuses, and why.",
                                           show_default=False),
    dim: List[str] = typer.Option([], "--dim", "-d", metavar="NAME=VALUE",
                                  help="Value of a symbolic dimension (repeatable; beats the "
                                       "rule file's dims)."),
    nodes: bool = typer.Option(True, "--nodes/--no-nodes",
                               help="List every node with its preferred device (QueryNetwork)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Validate RULES; with MODEL, explain what each device takes and refuses (QueryNetwork).

    Without a model: the devices in priority order with their memory, instances, value-input
    mode, op lists, conditions and runtime, then pins, dims and objective.  With a model: per
    device the op types it takes (with counts) and the nodes it refuses with the condition that
    refused them; the pins applied; the value inputs computed inside the model (they force a
    split on devices that enforce them); and per node its preferred device.

    Exit code 0 when every node has a device, 1 when some node fits no device or is pinned to
    a device that refuses it, 2 for an invalid rule file or model (one line on stderr).

    Example: hetero-solve rules check rules/npu-static.yaml examples/resnet_like.onnx
    """
    rule_set = load_rules(rules)
    if model is None:
        s = summary(rule_set)
        _print(json.dumps(s, indent=2) if as_json else format_summary(s))
        return
    mg = load_model(model, dims=parse_dims(dim), rule_dims=rule_set.dims)
    report = query(rule_set, mg)
    _print(json.dumps(report.as_dict(), indent=2) if as_json else format_query(report, nodes=nodes))
    if not report.ok:
        raise typer.Exit(1)


def _print(text: str) -> None:
    out_console.print(text, markup=False, highlight=False, soft_wrap=True)
