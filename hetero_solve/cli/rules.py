"""``hetero-solve rules check [MODEL] RULES``: validate a rule file and explain it on a model."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

from ..model import load_model
from ..rules import load_rules
from ..rules.check import format_query, format_summary, query, summary
from . import app
from ..filekind import content_kind
from .common import (UsageError, caught_warnings, dim_option, expect_model_and_rules,
                     out_console, parse_dims, parse_shapes, print_json, shape_option)
from ..rules.schema import json_schema_text

rules_app = typer.Typer(no_args_is_help=True, add_completion=False,
                        help="Rule files: validate one, or see what each device takes in a model.")
app.add_typer(rules_app, name="rules")


@rules_app.command("check")
def check_command(
    files: List[Path] = typer.Argument(..., metavar="[MODEL] RULES", show_default=False,
                                       help="A rule file (YAML) to validate, after the ONNX model "
                                            "to explain it on (the order of solve). RULES MODEL, "
                                            "the order of earlier versions, still works."),
    dim: List[str] = dim_option(),
    shape: List[str] = shape_option(),
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

    \b
    Examples:
      hetero-solve rules check rules/npu-static.yaml
      hetero-solve rules check examples/resnet_like.onnx rules/npu-static.yaml
    """
    model, rules = model_and_rules(files)
    with caught_warnings() as warned:
        rule_set = load_rules(rules)
        if model is None:
            s = summary(rule_set)
        else:
            mg = load_model(model, dims=parse_dims(dim), shapes=parse_shapes(shape),
                            rule_dims=rule_set.dims)
            report = query(rule_set, mg)
    if model is None:   # the warnings are caught once the block is left
        warned.show()
        print_json(s) if as_json else _print(format_summary(s))
        return
    warned.show(skip=report.warnings if not as_json else ())
    print_json(report.as_dict()) if as_json else _print(format_query(report, nodes=nodes))
    if not report.ok:
        raise typer.Exit(1)


@rules_app.command("schema")
def schema_command(
    catalog: bool = typer.Option(False, "--catalog",
                                 help="The schema of a value-input catalog instead."),
) -> None:
    """Print the JSON Schema of rule files (draft-07), for editors to validate and complete
    them.

    Generated from the definition the loader checks files against, so the two never
    disagree. The repository publishes it as schemas/rules.schema.json; VS Code's YAML
    extension picks it up from a first line such as:

    \b
      # yaml-language-server: $schema=PATH/TO/rules.schema.json

    \b
    Example:
      hetero-solve rules schema > rules.schema.json
    """
    typer.echo(json_schema_text("catalog" if catalog else "rules"), nl=False)


def model_and_rules(files: list[Path]) -> tuple[Path | None, Path]:
    """``[MODEL] RULES`` from the command line; ``RULES MODEL`` (the order of earlier versions)
    is recognised by the files' contents.  A model alone, or two of a kind, is named."""
    usage = "hetero-solve rules check [MODEL] RULES"
    if len(files) == 1:
        if content_kind(files[0]) == "model":
            raise UsageError(f"{files[0]} is an ONNX model; rules check needs a rule file: "
                             f"{usage}")
        return None, files[0]
    if len(files) != 2:
        raise UsageError(f"expected one or two files, got {len(files)}: {usage}")
    first, second = files
    if content_kind(first) == "rules" and content_kind(second) == "model":
        return second, first
    expect_model_and_rules(first, second, usage)
    return first, second


def _print(text: str) -> None:
    out_console.print(text, markup=False, highlight=False, soft_wrap=True)
