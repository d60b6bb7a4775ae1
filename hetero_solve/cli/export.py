"""``hetero-solve export openvino OUT_DIR``: the answer as a model for OpenVINO's HETERO plugin."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from . import app
from .common import (caught_warnings, json_option, parse_shapes, print_json, print_line,
                     shape_option)
from ..export.openvino import export_openvino

export_app = typer.Typer(no_args_is_help=True, add_completion=False,
                         help="Hand an answer to a runtime in its own format.")
app.add_typer(export_app, name="export")


@export_app.command("openvino")
def openvino_command(
    out_dir: Path = typer.Argument(..., metavar="OUT_DIR", show_default=False,
                                   help="A folder hetero-solve wrote (its partition.json)."),
    device_map: List[str] = typer.Option(
        [], "--device-map", metavar="NAME=DEVICE",
        help="OpenVINO device name for a rule-file device, e.g. --device-map NPU=AUTO, or "
             "for one of its instances, ACC.1=GPU.1; a device with several instances mapped "
             "to GPU runs instance i on GPU.i (repeatable; default: the rule file's names, "
             "instances as NAME.i)."),
    model: Optional[Path] = typer.Option(
        None, "--model", metavar="MODEL.onnx",
        help="The ONNX model the answer was solved for, when the path in partition.json no "
             "longer finds it (default: that path, else OUT_DIR/model.annotated.onnx)."),
    shape: List[str] = shape_option(with_dim=False),
    compile_: bool = typer.Option(
        True, "--compile/--no-compile",
        help="Compile under HETERO to report its submodel count next to the answer's parts "
             "(only when this OpenVINO has every mapped device)."),
    as_json: bool = json_option("what was written and HETERO's submodel count"),
) -> None:
    """Write OUT_DIR/openvino/model.xml and model.bin: the original model read by OpenVINO,
    its inputs fixed to the solved shapes, every op with the affinity of the answer (the
    device of its ONNX node; constants and parameters with their consumer).

    Node affinities are stored in the model's rt_info (hetero_solve/affinity) because
    OpenVINO does not save node rt_info; docs/runtimes.md has the lines that put them back
    and compile the model with HETERO.  HETERO groups ops by connected same-device regions,
    so it may make more submodels than the answer has parts: the count is printed next to
    ours (the per-part route in docs/runtimes.md keeps the parts).

    Needs OpenVINO: pip install 'hetero-solve[openvino]'.

    \b
    Examples:
      hetero-solve export openvino resnet.hetero
      hetero-solve export openvino resnet.hetero --device-map NPU=AUTO --device-map CPU=CPU
    """
    with caught_warnings() as warned:
        result = export_openvino(out_dir, device_map, model=model, shapes=parse_shapes(shape),
                                 compile=compile_)
    warned.show(skip=result.warnings)
    if as_json:
        print_json(result.as_dict())
        return
    print_line(f"written: {result.folder}/model.xml, model.bin (from {result.model})")
    print_line("devices: " + ", ".join(f"{k} -> {v} ({result.ops.get(k, 0)} ops)"
                                       for k, v in result.device_map.items()))
    if result.reshaped:
        print_line("inputs fixed to: " + ", ".join(f"{k}={v}" for k, v in result.reshaped.items()))
    count = (f"{result.submodels} OpenVINO HETERO submodel(s)" if result.submodels is not None
             else f"HETERO submodels not counted: {result.not_compiled}")
    print_line(f"parts: {result.parts} (hetero-solve)   {count}")
    for text in result.warnings:
        print_line(f"note: {text}")
