"""``hetero-solve dims MODEL``: the model's inputs and the dims they need a value for."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

from ..model import list_dims
from ..model.load import read_model
from ..units import dtype_name
from . import app
from .common import dim_option, json_option, parse_dims, parse_shapes, print_json, print_line, shape_option


@app.command("dims")
def dims_command(
    model: Path = typer.Argument(..., metavar="MODEL", help="The ONNX model.", show_default=False),
    dim: List[str] = dim_option(),
    shape: List[str] = shape_option(),
    as_json: bool = json_option("the inputs and their dims"),
) -> None:
    """List MODEL's inputs with their dims: the symbolic ones (give them with --dim NAME=N or
    a rule file's dims), the anonymous '?' ones (give the input's whole shape with --shape,
    or every '?' dim one value with --dim '?=N'), and the values that --dim/--shape given
    here would set.

    A static-shape device (static_shapes: true) refuses every node whose shapes depend on a
    dim with no value.

    \b
    Examples:
      hetero-solve dims examples/transformer_encoder.onnx
      hetero-solve dims model.onnx --shape x=1,3,320,320
    """
    found = list_dims(model, parse_dims(dim), shapes=parse_shapes(shape))
    proto, _, _ = read_model(model)
    types = {vi.name: vi.type.tensor_type.elem_type for vi in proto.graph.input
             if vi.type.HasField("tensor_type")}
    inputs: dict[str, list] = {}
    for d in found:
        inputs.setdefault(d.input, []).append(d)
    names = [vi.name for vi in proto.graph.input
             if vi.name not in {t.name for t in proto.graph.initializer}]
    if as_json:
        print_json({"model": str(model), "inputs": [
            {"name": x, "dtype": dtype_name(types.get(x, 0)),
             "dims": [{"name": d.name, "value": d.value} for d in inputs.get(x, [])]}
            for x in names]})
        return
    print_line(f"{model.name}: {len(names)} input(s)")
    needed = []
    for x in names:
        ds = inputs.get(x, [])
        shown = ", ".join(_show(d) for d in ds)
        print_line(f"  {x}: {dtype_name(types.get(x, 0))} [{shown}]")
        if any(d.value is None and d.name is None for d in ds):
            needed.append(f"--shape {x}=" + ",".join(str(d.value) if d.value is not None else "?"
                                                     for d in ds))
    unset = sorted({d.name for d in found if d.value is None and d.name is not None})
    needed = [f"--dim {n}=N" for n in unset] + needed
    print_line("every dim has a value" if not needed else "no value yet: " + " ".join(needed))


def _show(d) -> str:
    if d.name is None:
        return "?" if d.value is None else str(d.value)
    return d.name if d.value is None else f"{d.name}={d.value}"
