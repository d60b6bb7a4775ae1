"""``hetero-solve rules from-openvino DEVICE`` and ``rules from-onnxruntime PROVIDER``: a rule
file whose ops are what the runtime itself takes (docs/runtimes.md)."""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

import typer

from ..rules.ops import rule_op_name
from .common import UsageError, note
from .rules import rules_app
from ..rules.from_runtime import (ask_runtime, onnxruntime_registry, onnxruntime_taker,
                                  openvino_taker, rule_file, yaml_text)
from ..rules import load_rules
from ..model.load import read_model


def _options():
    """The options both commands share, as typer parameter defaults."""
    return dict(
        name=typer.Option(None, "--name", metavar="NAME",
                          help="The device's name in the rule file (default: the "
                               "OpenVINO device's name; for an onnxruntime provider, its name "
                               "without 'ExecutionProvider')."),
        fallback=typer.Option(None, "--fallback", metavar="NAME",
                              help="Add a second device NAME that takes every op (a CPU "
                                   "fallback), so that any model can be solved."),
        ops=typer.Option([], "--ops", metavar="OP,OP,...",
                         help="Probe only these op types (repeatable; default: every op of "
                              "ONNX's default domain)."),
        model=typer.Option(None, "--model", metavar="MODEL.onnx",
                           help="Probe only the op types MODEL uses (faster)."),
        opset=typer.Option(17, "--opset", min=7, help="The opset the probes are built at."),
        value_inputs=typer.Option("ignore", "--value-inputs", metavar="enforce|ignore",
                                  help="The device's value_inputs (enforce: a value input "
                                       "computed in a part splits it, as for static-shape "
                                       "compilers)."),
        output=typer.Option(None, "-o", "--out", "--output", metavar="FILE",
                            help="Write the rule file here (default: stdout); an existing "
                                 "file is refused unless --force."),
        force=typer.Option(False, "--force", help="Replace an existing --output file."),
    )


_O = _options()


@rules_app.command("from-openvino")
def from_openvino_command(
    device: str = typer.Argument(..., metavar="DEVICE",
                                 help="An OpenVINO device of this machine: CPU, GPU, NPU, ...",
                                 show_default=False),
    name: Optional[str] = _O["name"], fallback: Optional[str] = _O["fallback"],
    ops: List[str] = _O["ops"], model: Optional[Path] = _O["model"], opset: int = _O["opset"],
    value_inputs: str = _O["value_inputs"], output: Optional[Path] = _O["output"],
    force: bool = _O["force"],
) -> None:
    """Write a rule file whose device takes what OpenVINO's DEVICE takes, asked of OpenVINO:
    one probe model per op type and element type (built from ONNX's op schemas), read by
    OpenVINO and put to core.query_model(model, DEVICE).

    Ops OpenVINO refuses on some element types get a 'when: {Op: {dtypes: [...]}}'
    condition; ops no probe could be built for (com.microsoft.*, ...) are named in the
    file's header and a 'not probed' line, and left out (use --fallback for them).
    Shapes are not probed.  The file is checked by the rule-file loader before it is written.
    Needs OpenVINO: pip install 'hetero-solve[openvino]'.

    \b
    Examples:
      hetero-solve rules from-openvino CPU -o rules/openvino-cpu.yaml
      hetero-solve rules from-openvino NPU --fallback CPU --model model.onnx -o npu.yaml
    """
    _generate("openvino", device, name or device, openvino_taker(device), None,
              fallback, ops, model, opset, value_inputs, output, force)


@rules_app.command("from-onnxruntime")
def from_onnxruntime_command(
    provider: str = typer.Argument(..., metavar="PROVIDER",
                                   help="An execution provider of this onnxruntime: "
                                        "CPUExecutionProvider, CUDAExecutionProvider, ...",
                                   show_default=False),
    name: Optional[str] = _O["name"], fallback: Optional[str] = _O["fallback"],
    ops: List[str] = _O["ops"], model: Optional[Path] = _O["model"], opset: int = _O["opset"],
    value_inputs: str = _O["value_inputs"], output: Optional[Path] = _O["output"],
    force: bool = _O["force"],
) -> None:
    """Write a rule file whose device takes what onnxruntime's PROVIDER takes, asked of
    onnxruntime: one probe model per op type and element type (built from ONNX's op
    schemas), loaded with [PROVIDER, CPUExecutionProvider] and graph optimisations off; an op
    is taken when onnxruntime's graph assignment report puts its node on PROVIDER (on an
    onnxruntime without that report, only the CPU provider can be probed: taken when the
    session loads).  Ops no probe can be built for (com.microsoft.*, ai.onnx.ml, a few of
    ONNX's) are taken where onnxruntime's kernel registry has them for PROVIDER; what is left
    is named ('not probed').  The device's runtime is set to PROVIDER.

    \b
    Examples:
      hetero-solve rules from-onnxruntime CPUExecutionProvider -o ort-cpu.yaml
      hetero-solve rules from-onnxruntime CUDAExecutionProvider --fallback CPU -o cuda.yaml
    """
    default = provider[:-len("ExecutionProvider")] if provider.endswith("ExecutionProvider") \
        and provider != "ExecutionProvider" else provider
    _generate("onnxruntime", provider, name or default, onnxruntime_taker(provider),
              {"onnxruntime": provider}, fallback, ops, model, opset, value_inputs, output,
              force, registry=lambda: onnxruntime_registry(provider, opset))


def _generate(runtime, device, name, takes, run_with, fallback, ops, model, opset,
              value_inputs, output, force, registry=None) -> None:
    """Probe, add what ``registry()`` (the runtime's kernel registry, when it has one) says of
    the ops no probe was built for, check and write the rule file."""
    if value_inputs not in ("enforce", "ignore"):
        raise UsageError(f"--value-inputs {value_inputs!r}: expected enforce or ignore")
    if output is not None and os.path.lexists(output) and not force:
        raise UsageError(f"{output} exists: pass --force to replace it")
    wanted = _wanted_ops(ops, model)
    found = ask_runtime(runtime, device, takes, opset=opset, ops=wanted)
    if registry is not None:
        found.take_registered(registry(), every_op=wanted is None)
    if not found.taken:
        raise UsageError(f"{runtime} {device} took no probe of the op types asked for")
    rules = rule_file(found, name, fallback=fallback, value_inputs=value_inputs,
                      runtime=run_with)
    command = "hetero-solve " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    text = yaml_text(rules, found, command)
    _check_and_write(text, output, load_rules)
    if output is not None:
        registered = f", {len(found.registered)} more from its kernel registry" \
            if found.registered else ""
        note(f"written: {output} ({len(found.taken)} op type(s) taken by {device} in probes"
             f"{registered})")
    if found.not_probed:
        note(f"not probed, left out of supported: {', '.join(found.not_probed)} (a model "
             f"using them needs --fallback NAME, a device taking every op, or the ops added "
             f"to supported by hand once checked)")


def _wanted_ops(ops: list[str], model: Path | None) -> list[str] | None:
    """The op types to probe: ``--ops`` and those of ``--model``; None = all."""
    wanted = [o.strip() for item in ops for o in item.split(",") if o.strip()]
    if model is not None:
        proto, _, _ = read_model(model)
        found = set()
        todo = [proto.graph]
        while todo:   # the model's nodes and those of its subgraphs
            graph = todo.pop()
            for node in graph.node:
                found.add(rule_op_name(node.op_type, node.domain))
                for attr in node.attribute:
                    todo.extend([attr.g] if attr.HasField("g") else [])
                    todo.extend(attr.graphs)
        wanted.extend(sorted(found))
    return sorted(set(wanted)) if wanted or model is not None else None


def _check_and_write(text: str, output: Path | None, load_rules) -> None:
    """Load the rule file as ``rules check`` would (an invalid one is a bug here), then write
    it whole (a temporary renamed) or print it."""
    folder = output.parent if output is not None else Path(tempfile.gettempdir())
    fd, tmp = tempfile.mkstemp(prefix=".rules-", suffix=".yaml", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        load_rules(tmp)
        if output is not None:
            os.replace(tmp, output)
            return
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    sys.stdout.write(text)
    sys.stdout.flush()


__all__ = ["from_openvino_command", "from_onnxruntime_command"]
