"""Load an ONNX model into a :class:`ModelGraph`: names, structure, shapes, folding.

Step by step: read (external data stays in its files: :mod:`.weights`), check, flatten the main graph (:mod:`.flatten`:
stable names for unnamed and duplicate-named nodes, outer-scope reads of subgraph nodes),
then shapes and folding (:mod:`.shapes`), then the ranks inference cannot find
(:mod:`.observe`); :func:`analyse_model` assembles the :class:`ModelGraph`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

import onnx

from ..errors import ModelError, one_line
from ..readers import check_regular, read_bytes, resolves_inside
from ..units import dtype_name
from .flatten import flatten
from .graph import InputDim, ModelGraph
from .observe import observed_types, unknown_rank_tensors
from .parallel import Forked, fork_pays
from .shapes import analyse_shapes, forked_inference, input_dims
from .structure import name_refs
from .weights import elements, external_tensors, tensor_bytes


#: protobuf cannot parse a message of 2 GiB or more: a larger model keeps its weights outside.
MODEL_FILE_BYTES = (2 << 30) - 1


def read_model(source: str | os.PathLike | onnx.ModelProto) -> tuple[onnx.ModelProto, str, bytes | None]:
    """The ``ModelProto``, a display path, and the file's bytes when they are the whole model
    (no external data), so the checker can reuse them.  External data is checked but not
    read: its tensors stay references to their files (:mod:`.weights`).

    Only a regular file is opened (a FIFO or a device is refused before, so nothing blocks);
    external data must lie in regular files inside the model's folder, within their size.

    Raises
    ------
    ModelError
        The file is missing, not a regular file, over 2 GiB, not an ONNX model, or its
        external data is missing, outside the model's folder or too short.
    """
    if isinstance(source, onnx.ModelProto):
        return source, "<model>", None
    path = Path(source)

    def fail(reason: str) -> ModelError:
        return ModelError(path, reason)

    st = check_regular(path, fail)
    if st.st_size > MODEL_FILE_BYTES:
        raise fail(f"is {st.st_size:,} bytes: over protobuf's 2 GiB limit for one file, so not "
                   "an ONNX model (large models keep their weights as external data)")
    data = read_bytes(path, fail, limit=MODEL_FILE_BYTES)
    try:
        model = onnx.ModelProto.FromString(data)
    except Exception as e:  # protobuf decode errors
        raise fail(f"cannot read ONNX model: {one_line(e)}") from None
    # A tensor stored outside names its file under the required key "location": without
    # those bytes anywhere in the file (a C-speed search), no tensor can be external.
    external = external_tensors(model) if b"location" in data else []
    if external:
        # The weights stay in their files (:mod:`.weights`): every step reads this
        # weight-free view, and a part file's weights are copied file to file.
        folder = path.parent
        for tensor in external:
            _check_external(tensor, folder, fail)
        data = None
    return model, str(path), data


def _check_external(tensor: onnx.TensorProto, folder: Path, fail) -> None:
    """The external data of ``tensor``: a relative location inside ``folder`` naming a
    regular file, offset and length whole numbers within it, the length (or, without one,
    what is left of the file) at least the tensor's bytes (dims × element size).  Only the
    file's size is read (``stat``), never its bytes."""
    info = {e.key: e.value for e in tensor.external_data}
    where = f"external data of tensor {tensor.name!r}"
    location = info.get("location", "")
    if not location or "\0" in location:
        raise fail(f"{where}: no file location")
    if os.path.isabs(location):
        raise fail(f"{where}: location {location!r} is an absolute path; it must be relative to "
                   "the model's folder")
    file = folder / location
    if not resolves_inside(file, folder):
        raise fail(f"{where}: location {location!r} points outside the model's folder")
    st = check_regular(file, lambda why: fail(f"{where}: {location}: {why}"))
    numbers = {}
    for key in ("offset", "length"):
        text = info.get(key)
        if text is None:
            continue
        if not text.isdigit():   # also refuses "-1"
            raise fail(f"{where}: {key} {text!r} is not a whole number >= 0")
        numbers[key] = int(text)
    offset = numbers.get("offset", 0)
    needed = tensor_bytes(tensor)
    length = numbers.get("length", needed)
    if needed is not None and length < needed:
        raise fail(f"{where}: {location}: the stored length is {length:,} bytes, the tensor "
                   f"needs {needed:,} ({elements(tensor):,} {dtype_name(tensor.data_type)} "
                   f"elements)")
    end = offset + (length or 0)
    if end > st.st_size:
        raise fail(f"{where}: {location} has {st.st_size:,} bytes, the tensor needs {end:,}"
                   + (f" (offset {offset:,} + {length:,})" if offset else ""))


def check_model(model: onnx.ModelProto, path: str, data: bytes | None = None) -> None:
    """``onnx.checker`` with a one-line error.  Given the file's ``data``, they are checked as
    they are (no second serialisation); models with external data are checked by path (the
    checker reads the ``.onnx`` file, not the weights)."""
    try:
        if data is not None:
            onnx.checker.check_model(data)
        elif path != "<model>":   # external data: the checker finds it beside the file
            onnx.checker.check_model(path)
        else:
            onnx.checker.check_model(model)
    except Exception as e:
        raise ModelError(path, f"not a valid ONNX model: {one_line(e)}") from None


#: The newest opset of each standard domain the installed onnx knows; a model declaring a
#: newer one (or a newer opset of another domain than its first) is asked of onnxruntime.
_KNOWN_OPSETS = {"": onnx.helper.VERSION_TABLE[-1][2], "ai.onnx": onnx.helper.VERSION_TABLE[-1][2],
                 "ai.onnx.ml": onnx.helper.VERSION_TABLE[-1][3]}
_RUNTIME_REFUSALS: dict[tuple, str | None] = {}


def check_opsets(model: onnx.ModelProto, path: str) -> None:
    """Refuse a model whose declared opsets the installed onnxruntime cannot run (an opset
    from the future, ``ai.onnx`` 1000 say): every part would fail to load later.  Only a
    model declaring an opset newer than the installed onnx knows (or above 1 in another
    domain) is asked of onnxruntime, with a one-node model of the same opsets."""
    imports = tuple(sorted((o.domain, o.version) for o in model.opset_import))
    if all(v <= _KNOWN_OPSETS.get(d, 1) for d, v in imports):
        return
    if imports not in _RUNTIME_REFUSALS:
        _RUNTIME_REFUSALS[imports] = _runtime_refusal(imports)
    reason = _RUNTIME_REFUSALS[imports]
    if reason:
        raise ModelError(path, reason)


def _runtime_refusal(imports: tuple) -> str | None:
    """What onnxruntime says of a model declaring the opsets ``imports``, when it refuses
    them; ``None`` when it accepts them (or fails for another reason)."""
    import re

    import onnxruntime as ort
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "opsets",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    opsets = dict(imports)
    if "" not in opsets and "ai.onnx" not in opsets:
        opsets[""] = 17
    probe = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    probe.ir_version = 8
    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return None
    except Exception as e:
        text = one_line(e, 2000)
    found = re.search(r"support for domain (\S+) is till opset (\d+)", text)
    if not found:
        return None
    domain, newest = found.group(1), int(found.group(2))
    declared = opsets.get(domain, opsets.get("" if domain == "ai.onnx" else domain))
    return (f"declares opset {declared} of domain {domain}; the installed onnxruntime "
            f"{ort.__version__} runs {domain} up to opset {newest} (export the model for an "
            "opset it runs, or upgrade onnxruntime)")


def load_model(source: str | os.PathLike | onnx.ModelProto, dims: Mapping[str, int] | None = None,
               *, shapes: Mapping[str, Sequence[int]] | None = None,
               rule_dims: Mapping[str, int] | None = None, check: bool = True,
               fold: bool = True, defer_check: bool = False) -> ModelGraph:
    """Read, check and analyse a model: its graph as per-node lists, every tensor's type, the
    folded nodes (docs/problem.md, docs/rules.md).

    Parameters
    ----------
    source : path or onnx.ModelProto
        The model (external data is read from the file's directory).
    dims : mapping, optional
        Values of symbolic dimensions of the graph inputs, by name.  A name no input uses is
        a warning that lists the names they do use.
    shapes : mapping, optional
        Whole shapes of graph inputs by input name (for anonymous ``?`` dims); they win over
        ``dims`` for that input.
    rule_dims : mapping, optional
        Values of symbolic dimensions from a rule file: used where the graph inputs have
        those names, silently ignored elsewhere (one rule file serves many models);
        ``dims`` win.
    check : bool
        Run ``onnx.checker`` (default).
    fold : bool
        Fold the nodes computable before running (default).
    defer_check : bool
        Return while a checker running in a forked process (large models) may still be
        running: call :meth:`ModelGraph.ensure_valid` before trusting the result.

    Returns
    -------
    ModelGraph

    Raises
    ------
    ModelError
        The file cannot be read, the checker rejects it, or ``shapes`` disagree with the
        model's inputs.

    Examples
    --------
    >>> mg = load_model("examples/resnet_like.onnx", dims={"batch": 1})
    >>> mg.names[0], mg.tensor_type(mg.outputs[0][0]).shape
    ('stem/conv', (1, 8, 32, 32))
    """
    model, path, data = read_model(source)
    return analyse_model(model, path, data, dims, shapes=shapes, rule_dims=rule_dims,
                         check=check, fold=fold, defer_check=defer_check)


def list_dims(source: str | os.PathLike | onnx.ModelProto, dims: Mapping[str, int] | None = None,
              *, shapes: Mapping[str, Sequence[int]] | None = None) -> list[InputDim]:
    """Every dimension of the model's graph inputs and the value it takes with ``dims`` and
    ``shapes`` (as :func:`load_model` takes them), without analysing the model.

    Returns
    -------
    list of InputDim
        ``(input, axis, name, value)`` per dimension: ``name`` is ``None`` for an anonymous
        dim (give the input's whole shape), ``value`` is ``None`` while it has none.

    Raises
    ------
    ModelError
        The file cannot be read, or ``shapes`` disagree with the model's inputs.

    Examples
    --------
    >>> [(d.input, d.name, d.value) for d in list_dims("examples/resnet_like.onnx")][:2]
    [('image', 'batch', None), ('image', None, 3)]
    """
    model, path, _ = read_model(source)
    return input_dims(model, path, {k: int(v) for k, v in (dims or {}).items()},
                      {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()})


def analyse_model(model: onnx.ModelProto, path: str, data: bytes | None,
                  dims: Mapping[str, int] | None = None, *,
                  shapes: Mapping[str, Sequence[int]] | None = None,
                  rule_dims: Mapping[str, int] | None = None, check: bool = True,
                  fold: bool = True, defer_check: bool = False) -> ModelGraph:
    """:func:`load_model` after reading: check, flatten, shapes and folding.  On large models
    the checker and the first shape inference run in forked processes alongside flattening
    (:mod:`.parallel`)."""
    dims = {k: int(v) for k, v in (dims or {}).items()}
    given = {**{k: int(v) for k, v in (rule_dims or {}).items()}, **dims}
    whole = {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()}
    listed = input_dims(model, path, given, whole)
    check_opsets(model, path)
    checking = inferring = None
    if fork_pays(len(model.graph.node)):
        # The checker and the first shape inference are C++ holding the GIL: run them in
        # forked processes while this one flattens the graph.  The inference is the longest
        # of the three: the checker yields to it (and to this process) and runs on what is
        # left.
        checking = Forked(_check_message, model, path, data, idle=True) if check else None
        inferring = Forked(forked_inference, model, given, whole,
                           None if path == "<model>" else str(Path(path).resolve().parent))
    elif check:
        check_model(model, path, data)
    pending = _PendingCheck(checking, model, path, data)
    try:
        graph = flatten(model, path)
        refs = None
        if inferring is not None:   # the inference takes longer: meanwhile, the tensor ids
            constant = set(graph.constant_nodes)
            refs = name_refs(graph, [i for i in range(len(graph.names)) if i not in constant])
        done = inferring.result() if inferring is not None else None
        first = done[1] if done and done[0] == "ok" else None
        found = analyse_shapes(graph, given, whole, fold=fold, first=first)
    except Exception:
        pending.raise_if_invalid()   # an invalid model explains the failure
        raise
    if not (defer_check and checking is not None):
        pending.raise_if_invalid()
    warnings = _unused_dims(dims, listed) + found.warnings
    unknown = unknown_rank_tensors(graph, found.types, found.declared, set(found.folded))
    if unknown:   # a part boundary needs a rank: the runtime knows it
        seen = observed_types(graph, found.types, unknown)
        for name, t in seen.items():
            found.types[name] = t
            found.declared.pop(name, None)
        missing = [x for x in unknown if x not in seen]
        if missing:
            warnings.append(f"{len(missing)} tensor(s) have no known rank or element type "
                            f"(neither ONNX shape inference nor a run in onnxruntime gives "
                            f"them), so a part file where one crosses between parts fails "
                            f"onnx.checker: {', '.join(missing[:5])}")
    return ModelGraph.of(graph, input_dims=listed, dims=given, shapes=whole, types=found.types,
                         declared=found.declared, folded=found.folded,
                         constant_tensors=found.constant_tensors, nonstatic=found.nonstatic,
                         folded_values=found.folded_values, subgraph_nodes=found.subgraph_nodes,
                         warnings=warnings, refs=refs, checking=pending,
                         weights_inline=data is not None)


def _unused_dims(dims: Mapping[str, int], listed: list[InputDim]) -> list[str]:
    """A warning for the ``dims`` that no graph input uses, naming those they use."""
    used = sorted({d.name for d in listed if d.name is not None})
    unused = [k for k in dims if k not in used]
    if not unused:
        return []
    names = ", ".join(repr(k) for k in unused)
    return [f"dim{'s' if len(unused) > 1 else ''} {names} name{'' if len(unused) > 1 else 's'} "
            f"no dimension of the model's inputs (they have: {', '.join(used) or 'no named dims'})"]


def _check_message(model: onnx.ModelProto, path: str, data: bytes | None) -> str | None:
    try:
        check_model(model, path, data)
    except ModelError as e:
        return e.reason
    return None


class _PendingCheck:
    """The answer of a checker running in a forked process, waited for when asked."""

    def __init__(self, checking, model: onnx.ModelProto, path: str, data: bytes | None):
        self._checking = checking
        self._args = (model, path, data)

    def raise_if_invalid(self) -> None:
        checking, self._checking = self._checking, None
        if checking is None:
            return
        done = checking.result()
        if done is None or done[0] != "ok":   # the child died: check here
            check_model(*self._args)
        elif done[1]:
            raise ModelError(self._args[1], done[1])
