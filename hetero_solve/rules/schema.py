"""The rule-file format (schema version 1), defined once.

:data:`RULE_FILE` and :data:`CATALOG_FILE` describe every key: its type, allowed values and
ranges, default, meaning and an example.  Three things are generated from them, so that they
cannot disagree:

- the loader's structural checks (:func:`check`: unknown keys, types, ranges, enums, with the
  key path in every message); :mod:`hetero_solve.rules.load` then builds :class:`Rules` and
  checks what needs more than the file (op names against the installed onnx, device names
  used by pins, includes);
- the JSON Schema (:func:`json_schema`, ``hetero-solve rules schema``, published as
  ``schemas/rules.schema.json`` and ``schemas/catalog.schema.json``) that editors use to
  validate and complete rule files;
- the key reference of ``docs/rules.md`` (:func:`markdown_reference`).

No library: a few node classes (mapping with known keys, mapping of names, list, string,
number, memory size, one-of) are all rule files need, and each knows how to check a value and
how to describe itself in JSON Schema (draft-07, which YAML editors support).
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from ..problem import TERMS
from ..units import (MEMORY_PATTERN, QUANTITIES, QUANTITY_PATTERNS, closest_dtype,
                     dtype_from_name, dtype_names, parse_memory, parse_quantity)
from .ops import check_op_name, known_op_names, other_domain_ops

#: Largest memory a device may declare (bytes): sizes are 64-bit signed integers.
MAX_MEMORY = 2**63 - 1
#: Most identical instances of one device (the solver builds per-instance variables).
MAX_INSTANCES = 4096
#: Longest device name (it becomes part of file names).
MAX_NAME = 128
#: Largest input index and opset a catalog may name.
MAX_INDEX = 1024
MAX_OPSET = 1000


class DefinitionError(Exception):
    """A value does not fit the definition: ``key`` is its path, ``reason`` says why."""

    def __init__(self, key: str, reason: str):
        self.key, self.reason = key, reason
        super().__init__(f"{key}: {reason}")


MISSING = object()


# -- node types ------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Node:
    """One kind of value.  ``doc``: what it means; ``default``: what absence means (shown in
    the docs and the JSON Schema; the loader applies it); ``example``: a YAML snippet."""
    doc: str = ""
    default: Any = MISSING
    example: str = ""

    def check(self, value: Any, key: str) -> Any:
        raise NotImplementedError

    def schema(self) -> dict:
        raise NotImplementedError

    def type_text(self) -> str:
        raise NotImplementedError

    def _with_doc(self, out: dict) -> dict:
        if self.doc:
            out["description"] = self.doc
        if self.default is not MISSING:
            out["default"] = self.default
        return out


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "true/false",
            type(None): "nothing (null)"}.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class Str(Node):
    """A string; ``choices`` (with ``unknown``, the word for a wrong one), ``max_length``,
    ``pattern`` (for the JSON Schema; ``check_fn`` does the loader's finer check)."""
    choices: tuple[str, ...] = ()
    unknown: str = "value"
    min_length: int = 0
    max_length: int | None = None
    pattern: str | None = None
    hint: str = ""                       # what to write, in errors

    def check(self, value: Any, key: str) -> Any:
        if not isinstance(value, str):
            raise DefinitionError(key, f"expected {self.hint or 'a string'}, got {_show(value)}")
        if self.choices and value not in self.choices:
            close = difflib.get_close_matches(value, self.choices, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise DefinitionError(key, f"unknown {self.unknown} {value!r}{hint} "
                                       f"(expected one of: {', '.join(self.choices)})")
        if len(value.strip()) < self.min_length:
            raise DefinitionError(key, f"expected {self.hint or 'a non-empty string'}")
        if self.max_length is not None and len(value) > self.max_length:
            raise DefinitionError(key, f"too long ({len(value)} characters; at most "
                                       f"{self.max_length})")
        if "\0" in value:
            raise DefinitionError(key, "a string with a NUL character")
        return value

    def schema(self) -> dict:
        out: dict = {"type": "string"}
        if self.choices:
            out["enum"] = list(self.choices)
        if self.min_length:
            out["minLength"] = self.min_length
        if self.max_length is not None:
            out["maxLength"] = self.max_length
        if self.pattern:
            out["pattern"] = self.pattern
        return self._with_doc(out)

    def type_text(self) -> str:
        if self.choices:
            return " | ".join(f"`{c}`" for c in self.choices)
        return "string"


@dataclass(frozen=True)
class Int(Node):
    """A whole number in ``[minimum, maximum]`` (booleans are not numbers)."""
    minimum: int | None = None
    maximum: int | None = None

    def check(self, value: Any, key: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or \
                (self.minimum is not None and value < self.minimum) or \
                (self.maximum is not None and value > self.maximum):
            raise DefinitionError(key, f"expected a whole number {self.range_text()}, "
                                       f"got {_show(value)}")
        return value

    def range_text(self) -> str:
        if self.minimum is not None and self.maximum is not None:
            return f"from {self.minimum} to {self.maximum}"
        if self.minimum is not None:
            return f">= {self.minimum}"
        return f"<= {self.maximum}" if self.maximum is not None else ""

    def schema(self) -> dict:
        out: dict = {"type": "integer"}
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        return self._with_doc(out)

    def type_text(self) -> str:
        return f"integer {self.range_text()}".strip()


@dataclass(frozen=True)
class Number(Node):
    """A finite number ``>= minimum`` (int or float); with ``above``, ``> minimum``; with
    ``maximum``, ``<= maximum``."""
    minimum: float = 0
    maximum: float | None = None
    above: bool = False

    def check(self, value: Any, key: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value) or value < self.minimum or \
                (self.above and value == self.minimum) or \
                (self.maximum is not None and value > self.maximum):
            raise DefinitionError(key, f"expected a {self.type_text()}, got {_show(value)}")
        return value

    def schema(self) -> dict:
        out: dict = {"type": "number"}
        out["exclusiveMinimum" if self.above else "minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        return self._with_doc(out)

    def type_text(self) -> str:
        low = f"{'>' if self.above else '>='} {self.minimum:g}"
        high = f" and <= {self.maximum:g}" if self.maximum is not None else ""
        return f"finite number {low}{high}"


@dataclass(frozen=True)
class Quantity(Node):
    """A time, an arithmetic rate or a bandwidth (``kind``, :data:`hetero_solve.units.
    QUANTITIES`): a number in the base unit (seconds, FLOP/s, bytes/s) or a string with a
    unit (``150us``, ``2TFLOPS``, ``50GB/s``); ``positive``: more than 0."""
    kind: str = "time"
    positive: bool = False

    def check(self, value: Any, key: str) -> Any:
        try:
            return parse_quantity(value, self.kind, positive=self.positive)
        except ValueError as e:
            raise DefinitionError(key, str(e)) from None

    def schema(self) -> dict:
        number: dict = {"type": "number"}
        number["exclusiveMinimum" if self.positive else "minimum"] = 0
        return self._with_doc({"oneOf": [
            number, {"type": "string", "pattern": QUANTITY_PATTERNS[self.kind]}]})

    def type_text(self) -> str:
        what, _, units, example = QUANTITIES[self.kind]
        return f"{what}: {units} (`{example}`)"


@dataclass(frozen=True)
class Bool(Node):
    def check(self, value: Any, key: str) -> Any:
        if not isinstance(value, bool):
            raise DefinitionError(key, f"expected true or false, got {_show(value)}")
        return value

    def schema(self) -> dict:
        return self._with_doc({"type": "boolean"})

    def type_text(self) -> str:
        return "`true` | `false`"


@dataclass(frozen=True)
class Memory(Node):
    """Bytes: a whole number, or a string with a unit (``KB``/``MB``/``GB``/``TB``: powers of
    1000; ``KiB``/``MiB``/``GiB``/``TiB``: powers of 1024); at most :data:`MAX_MEMORY`."""

    def check(self, value: Any, key: str) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            raise DefinitionError(key, f"memory must be a finite number of bytes, got {value!r}")
        try:
            parsed = parse_memory(value)
        except (ValueError, OverflowError) as e:
            raise DefinitionError(key, str(e)) from None
        if parsed > MAX_MEMORY:
            raise DefinitionError(key, f"memory {value!r} is too large (at most 2^63 - 1 bytes)")
        return parsed

    def schema(self) -> dict:
        return self._with_doc({"oneOf": [
            {"type": "integer", "minimum": 0, "maximum": MAX_MEMORY},
            {"type": "string", "pattern": MEMORY_PATTERN}]})

    def type_text(self) -> str:
        return "bytes: integer, or string with a unit (`512KiB`, `64MiB`, `1.5GB`)"


@dataclass(frozen=True)
class Const(Node):
    """Exactly one value (``supported: all``)."""
    value: Any = None

    def check(self, value: Any, key: str) -> Any:
        if value != self.value:
            raise DefinitionError(key, f"expected {self.value!r}, got {_show(value)}")
        return value

    def schema(self) -> dict:
        return self._with_doc({"const": self.value})

    def type_text(self) -> str:
        return f"`{self.value}`"


@dataclass(frozen=True)
class AnyValue(Node):
    def check(self, value: Any, key: str) -> Any:
        return value

    def schema(self) -> dict:
        return self._with_doc({})

    def type_text(self) -> str:
        return "any value"


@dataclass(frozen=True)
class ListOf(Node):
    item: Node = field(default_factory=AnyValue)
    min_items: int = 0
    unique: bool = False
    what: str = "a list"

    def check(self, value: Any, key: str) -> Any:
        if not isinstance(value, list):
            raise DefinitionError(key, f"expected {self.what}, got {_show(value)}")
        if len(value) < self.min_items:
            raise DefinitionError(key, f"expected {self.what} (at least {self.min_items} "
                                       f"item{'s' if self.min_items > 1 else ''})")
        out = [self.item.check(v, f"{key}[{i}]") for i, v in enumerate(value)]
        if self.unique:
            seen = set()
            for i, v in enumerate(out):
                marker = json.dumps(v, sort_keys=True, default=str)
                if marker in seen:
                    raise DefinitionError(f"{key}[{i}]", f"{_show(v)} appears twice")
                seen.add(marker)
        return out

    def schema(self) -> dict:
        out: dict = {"type": "array", "items": self.item.schema()}
        if self.min_items:
            out["minItems"] = self.min_items
        if self.unique:
            out["uniqueItems"] = True
        return self._with_doc(out)

    def type_text(self) -> str:
        return f"list of {self.item.type_text()}"


@dataclass(frozen=True)
class MapOf(Node):
    """A mapping from names (``keys``) to values (``values``): op type -> ..., node -> device."""
    keys: Node = field(default_factory=Str)
    values: Node = field(default_factory=AnyValue)
    what: str = "a mapping"
    key_text: str = "name"

    def check(self, value: Any, key: str) -> Any:
        if not isinstance(value, dict):
            raise DefinitionError(key, f"expected {self.what}, got {_show(value)}")
        out = {}
        for k, v in value.items():
            where = _join(key, k)
            # YAML reads `4: CPU` with an int key; names are strings (a node may be named 4).
            self.keys.check(k if isinstance(self.keys, Int) else str(k), where)
            out[k] = self.values.check(v, where)
        return out

    def schema(self) -> dict:
        out: dict = {"type": "object", "additionalProperties": self.values.schema()}
        names = self.keys.schema()
        names.pop("description", None)
        names.pop("default", None)
        if isinstance(self.keys, Int):   # JSON keys are strings: digits
            names = {"pattern": "^[0-9]+$"}
        else:
            names.pop("type", None)
        if names:
            out["propertyNames"] = names
        return self._with_doc(out)

    def type_text(self) -> str:
        return f"mapping {self.key_text} → {self.values.type_text()}"


@dataclass(frozen=True)
class Key:
    """A known key of a :class:`Record` (``null``: taken as absent unless ``null`` says why
    it cannot be, then an error)."""
    node: Node
    required: bool = False
    null: str = ""


@dataclass(frozen=True)
class Record(Node):
    """A mapping with known keys (any other key is an error naming the closest known one;
    with ``extra``, other keys are kept unchecked: a file read back that holds more than its
    reader needs, like ``partition.json``)."""
    keys: dict[str, Key] = field(default_factory=dict)
    what: str = "a mapping"
    title: str = ""
    extra: bool = False

    def check(self, value: Any, key: str) -> Any:
        if not isinstance(value, dict):
            raise DefinitionError(key, f"expected {self.what}, got {_type_name(value)}")
        known = tuple(self.keys)
        for k in value:
            if k not in self.keys and not self.extra:
                close = difflib.get_close_matches(str(k), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise DefinitionError(_join(key, str(k)), f"unknown key{hint} (expected one "
                                                          f"of: {', '.join(known)})")
        out = {k: v for k, v in value.items() if k not in self.keys} if self.extra else {}
        for name, spec in self.keys.items():
            if spec.null and name in value and value[name] is None:
                raise DefinitionError(_join(key, name), spec.null)
            if name in value and value[name] is not None:
                out[name] = spec.node.check(value[name], _join(key, name))
            elif spec.required:
                raise DefinitionError(_join(key, name), f"missing: {spec.node.doc.split('.')[0]}")
            elif spec.node.default is not MISSING:
                out[name] = spec.node.default
        return out

    def schema(self) -> dict:
        out: dict = {"type": "object",
                     "properties": {k: s.node.schema() for k, s in self.keys.items()},
                     "additionalProperties": self.extra}
        required = [k for k, s in self.keys.items() if s.required]
        if required:
            out["required"] = required
        if self.title:
            out["title"] = self.title
        return self._with_doc(out)

    def type_text(self) -> str:
        return self.what


@dataclass(frozen=True)
class OneOf(Node):
    """One of several kinds, told apart by the value's Python type (first that fits)."""
    options: tuple[Node, ...] = ()
    what: str = ""

    def check(self, value: Any, key: str) -> Any:
        for option in self.options:
            if _fits(option, value):
                return option.check(value, key)
        raise DefinitionError(key, f"expected {self.what}, got {_show(value)}")

    def schema(self) -> dict:
        return self._with_doc({"oneOf": [o.schema() for o in self.options]})

    def type_text(self) -> str:
        return " or ".join(o.type_text() for o in self.options)


def _fits(node: Node, value: Any) -> bool:
    """Whether ``value`` is the kind of thing ``node`` describes (its checks aside)."""
    if isinstance(node, (Record, MapOf)):
        return isinstance(value, dict)
    if isinstance(node, ListOf):
        return isinstance(value, list)
    if isinstance(node, Const):
        return value == node.value
    if isinstance(node, (Str,)):
        return isinstance(value, str)
    if isinstance(node, Memory):
        return isinstance(value, (int, float, str)) and not isinstance(value, bool)
    if isinstance(node, (Int, Number)):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(node, Bool):
        return isinstance(value, bool)
    return True


@dataclass(frozen=True)
class OpName(Str):
    """An op type: one the installed onnx knows (any domain it knows, any opset), or
    ``domain.Op`` for an op of another domain (``com.microsoft.FusedConv``).  The loader checks
    it (:func:`hetero_solve.rules.ops.check_op_name`); the JSON Schema lists the known names
    and accepts any ``domain.Op``.  ``bare_ok``: a bare name of another domain's op
    (``FusedConv``) is left to the loader, which reads it with its domain and warns."""
    bare_ok: bool = False

    def check(self, value: Any, key: str) -> Any:
        value = super().check(value, key)
        reason = check_op_name(value)
        if reason and not (self.bare_ok and value in other_domain_ops()):
            raise DefinitionError(key, reason)
        return value

    def schema(self) -> dict:
        return self._with_doc({"anyOf": [
            {"enum": sorted(known_op_names())},
            {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
                                          r"\.[A-Za-z_][A-Za-z0-9_]*$"}]})

    def type_text(self) -> str:
        return "op type (`Conv`, or `com.microsoft.FusedConv` for other domains)"


def _join(a: str, b: Any) -> str:
    return f"{a}.{b}" if a else str(b)


# -- the format ------------------------------------------------------------------------------

@dataclass(frozen=True)
class DtypeName(Str):
    """An element type: ``float32`` style (numpy's names) or ONNX's (``FLOAT``)."""

    def check(self, value: Any, key: str) -> Any:
        value = super().check(value, key)
        if dtype_from_name(value) is None:
            close = closest_dtype(value)
            hint = f" (did you mean {close!r}?)" if close else ""
            raise DefinitionError(key, f"unknown dtype {value!r}{hint}")
        return value

    def schema(self) -> dict:
        return self._with_doc({"enum": dtype_names()})

    def type_text(self) -> str:
        return "dtype (`float32`, `float16`, `int8`, ... or ONNX's `FLOAT`)"


DTYPE = DtypeName(hint="a dtype name such as float32")

CONDITION = Record(
    what="a mapping with attributes, dtypes, max_rank, quantized",
    doc="Conditions under which the device takes the op; a node failing one is refused.",
    keys={
        "attributes": Key(MapOf(
            keys=Str(), values=AnyValue(), what="a mapping attribute -> value",
            key_text="attribute", doc=(
                "Attribute values the device needs. A node's value is compared, or the "
                "op's schema default at the model's opset when the node does not set it; an "
                "unset attribute without a default fails."),
            example="{group: 1, kernel_shape: [3, 3]}")),
        "dtypes": Key(ListOf(DTYPE, min_items=1, what="a list such as [float32, float16]",
                             doc=("Element types every input and output must have (the op's "
                                  "value inputs excepted); an unknown type fails."),
                             example="[float32, float16]")),
        "max_rank": Key(Int(minimum=0, maximum=64,
                            doc="Highest rank of any input or output; an unknown rank fails.",
                            example="4")),
        "quantized": Key(Bool(doc=(
            "`true`: the device takes the op only in quantized form, the centre of a QDQ "
            "unit: every floating-point input comes through a `DequantizeLinear` and every "
            "floating-point output goes only to `QuantizeLinear` nodes (what an int8 NPU "
            "compiles into one integer kernel). `false`: only outside such a unit (float "
            "form). A quantized unit is placed whole: a device takes it only if it takes each "
            "of its nodes, so list `DequantizeLinear` and `QuantizeLinear` too."),
            example="true")),
    })

OP_LIST = ListOf(OpName(min_length=1), what="a list of op type names", unique=False)

OPS = Record(
    what="a mapping with supported, unsupported, when, static_shapes",
    doc="Which ops the device takes.",
    keys={
        "supported": Key(OneOf((Const(value="all"), OP_LIST),
                               what="'all' or a list of op type names",
                               doc="The ops the device takes: `all`, or a list of op types.",
                               example="[Conv, Relu, Add]"), required=True),
        "unsupported": Key(ListOf(OpName(min_length=1, bare_ok=True),
                                  what="a list of op type names",
                                  doc="Ops subtracted from `supported`.", default=[],
                                  example="[Softmax]")),
        "when": Key(MapOf(keys=OpName(min_length=1), values=CONDITION, key_text="op type",
                          what="a mapping op type -> {attributes, dtypes, max_rank, quantized}",
                          doc="Per-op conditions; failing one makes the node unsupported.",
                          example="{Conv: {attributes: {group: 1}, dtypes: [float32], "
                                  "max_rank: 4}}")),
        "static_shapes": Key(Bool(doc="Every input and output shape of a node must be static "
                                      "(all dimensions known integers).", default=False,
                                  example="true")),
    })

PROVIDERS = OneOf((Str(min_length=1, hint="an execution provider name"),
                   ListOf(Str(min_length=1), min_items=1,
                          what="a list of execution provider names")),
                  what="an execution provider name or a list of them",
                  doc="onnxruntime execution providers, in preference order; those this "
                      "onnxruntime lacks are skipped, CPU is always last.",
                  example="[CUDAExecutionProvider, CPUExecutionProvider]")

PROVIDER_OPTIONS = MapOf(
    keys=Str(min_length=1, hint="an execution provider name"),
    values=MapOf(keys=Str(min_length=1),
                 values=OneOf((Str(), Bool(), Number()),
                              what="a string, number or true/false"),
                 key_text="option", what="a mapping option -> value"),
    key_text="execution provider", what="a mapping execution provider -> {option: value}",
    doc="onnxruntime provider options of the providers in `onnxruntime` (passed as strings, "
        "as onnxruntime takes them; a provider not used ignores its entry).",
    example="{CUDAExecutionProvider: {device_id: 1, arena_extend_strategy: "
            "kSameAsRequested}}")

ROOFLINE = Record(
    what="a mapping with flops, bandwidth, efficiency",
    doc=("The device's roofline: a node takes max(FLOPs / (flops x efficiency), bytes / "
         "bandwidth), its FLOPs and bytes computed from its shapes (docs/costs.md). What the "
         "`latency` and `throughput` objectives read (a measured profile, `--costs`, wins "
         "where it has a node's time)."),
    example="{flops: 2TFLOPS, bandwidth: 50GB/s, efficiency: {Conv: 0.6}}",
    keys={
        "flops": Key(Quantity(kind="rate", positive=True,
                              doc="Peak arithmetic rate (a multiply-add is 2 operations).",
                              example="2TFLOPS"), required=True),
        "bandwidth": Key(Quantity(kind="bandwidth", positive=True,
                                  doc="Bandwidth of the memory the device computes from.",
                                  example="50GB/s"), required=True),
        "efficiency": Key(MapOf(
            keys=OpName(min_length=1), values=Number(minimum=0, above=True, maximum=1),
            key_text="op type", what="a mapping op type -> fraction of the peak rate",
            doc="Fraction of `flops` an op type reaches (default 1).",
            example="{Conv: 0.6, MatMul: 0.8}")),
    })

LINK = Record(
    what="a mapping with bandwidth, latency",
    doc=("The device's link to host memory: a tensor crossing between parts is written to host "
         "memory over its producer's link and read over each reader's (docs/costs.md). Absent: "
         "the device computes in host memory and moves nothing."),
    example="{bandwidth: 8GB/s, latency: 20us}",
    keys={
        "bandwidth": Key(Quantity(kind="bandwidth", positive=True, doc="Bytes per second.",
                                  example="8GB/s"), required=True),
        "latency": Key(Quantity(kind="time", default=0, doc="Time per tensor moved, one way.",
                                example="20us")),
    })

DEVICE = Record(
    what="a mapping with name, ops, ...",
    title="device",
    doc="A device; list order is priority (first = most preferred).",
    keys={
        "name": Key(Str(min_length=1, max_length=MAX_NAME, pattern=r"\S",
                        hint="a device name",
                        doc=f"Device name (at most {MAX_NAME} characters; pins and maps use "
                            "it; part files are named after it).", example="NPU"),
                    required=True),
        "description": Key(Str(doc="Free text.", example="Edge NPU, 8 MiB SRAM")),
        "memory": Key(Memory(doc="Bytes per instance; absent = unlimited.",
                             example="64MiB")),
        "instances": Key(Int(minimum=1, maximum=MAX_INSTANCES, default=1,
                             doc="Identical instances of the device (each with `memory`).",
                             example="4")),
        "value_inputs": Key(Str(choices=("enforce", "ignore"), default="enforce",
                                doc="Whether value-dependent inputs bind on this device: a "
                                    "value input of a node here must be a constant, a graph "
                                    "input or made in another part.", example="ignore")),
        "ops": Key(OPS, required=True),
        "roofline": Key(ROOFLINE),
        "part_cost": Key(Quantity(kind="time", default=0,
                                  doc="Fixed time of each part placed on the device "
                                      "(dispatch, synchronisation).", example="200us")),
        "link": Key(LINK),
        "runtime": Key(Record(
            what="a mapping such as {onnxruntime: CPUExecutionProvider}",
            doc="How `hetero-solve run` runs the device's parts.",
            keys={"onnxruntime": Key(PROVIDERS, null="empty: name an execution provider "
                                                      "(onnxruntime: CPUExecutionProvider) "
                                                      "or leave the key out"),
                  "onnxruntime_options": Key(PROVIDER_OPTIONS, null="empty: give "
                                             "{provider: {option: value}} or leave the key "
                                             "out"),
                  "openvino": Key(Str(min_length=1, hint="an OpenVINO device name",
                                      doc="An OpenVINO device (`CPU`, `GPU`, `GPU.1`, `NPU`): "
                                          "the device's parts run on OpenVINO there (where "
                                          "`onnxruntime` is also given, it wins unless `run "
                                          "--backend openvino`).", example="CPU"),
                                  null="empty: name an OpenVINO device (openvino: CPU) or "
                                       "leave the key out")})),
    })

INDICES = ListOf(Int(minimum=0, maximum=MAX_INDEX), what="a list of input indices (whole "
                 "numbers >= 0)")

VALUE_INPUTS = MapOf(
    keys=Str(min_length=1), key_text="op type",
    values=OneOf((INDICES, MapOf(keys=Int(minimum=1, maximum=MAX_OPSET), values=INDICES,
                                 key_text="since-opset", what="a mapping since-opset -> list "
                                 "of input indices")),
                 what="a list of input indices, or a mapping since-opset -> list of input "
                      "indices"),
    what="a mapping op type -> input indices",
    doc=("Op type -> indices of inputs whose value must be known (every opset), or since-"
         "opset -> indices (the largest since-opset not above the model's applies). Entries "
         "here replace included ones op by op."),
    example="{Reshape: [1], Squeeze: {1: [], 13: [1]}}")

INCLUDE = OneOf((Str(min_length=1, hint="a catalog name or file path"),
                 ListOf(Str(min_length=1, hint="a catalog name or file path"),
                        what="a list of catalog names or file paths")),
                what="a list of catalog names or file paths",
                doc=("Catalogs of value inputs: the name of a catalog installed with "
                     "hetero-solve (`onnx-value-inputs`), or a path relative to this file."),
                example="[onnx-value-inputs]")

VERSION = Const(value=1, doc="Schema version: 1.", example="1")

RULE_FILE = Record(
    what="a mapping with keys version, devices, ...",
    title="hetero-solve rule file",
    doc="Devices in priority order, what each takes, memory, pins and the objective.",
    keys={
        "version": Key(VERSION, required=True),
        "description": Key(Str(doc="Free text.")),
        "include": Key(INCLUDE),
        "devices": Key(ListOf(DEVICE, min_items=1, what="a non-empty list of devices (first = "
                              "most preferred)", doc="Devices, most preferred first."),
                       required=True),
        "value_inputs": Key(VALUE_INPUTS),
        "affinity": Key(MapOf(keys=Str(min_length=1), values=Str(min_length=1, hint="a device "
                              "name"), key_text="node name or glob",
                              what="a mapping node name or glob -> device name",
                              doc=("Pins: a node name, or an fnmatch glob (`*` also matches "
                                   "`/`), -> device name. An exact name beats globs; among "
                                   "globs the first in file order wins."),
                              example='{"/decoder/*": CPU, conv1: NPU}')),
        "dims": Key(MapOf(keys=Str(min_length=1), values=Int(minimum=1, maximum=2**31 - 1),
                          key_text="dimension name",
                          what="a mapping dimension name -> value",
                          doc=("Values of symbolic dimensions of the graph inputs, by "
                               "their `dim_param` (`?` too: every dim so spelled takes the "
                               "value; `--dim` wins)."), example="{batch: 1, seq: 128}")),
        "objective": Key(OneOf((
            ListOf(Str(choices=TERMS, unknown="term"), min_items=1, unique=True,
                   what="a non-empty list of terms"),
            MapOf(keys=Str(choices=TERMS, unknown="term"), values=Number(minimum=0),
                  key_text="term", what="a mapping term -> weight")),
            what="a list of terms (lexicographic) or a mapping term -> weight",
            default=["fallback", "partitions", "transfer"],
            doc=("A list is lexicographic; a mapping is a weighted sum (weights finite, "
                 ">= 0, not all 0). Terms: fallback, partitions, transfer; latency and "
                 "throughput (seconds: they need each device's `roofline` or a measured "
                 "profile, `--costs`)."),
            example="{fallback: 1, partitions: 20}")),
    })

CATALOG_FILE = Record(
    what="a mapping (a catalog with value_inputs)",
    title="hetero-solve value-input catalog",
    doc="Value-dependent inputs, included by rule files.",
    keys={
        "version": Key(VERSION, required=True),
        "description": Key(Str(doc="Free text.")),
        "include": Key(INCLUDE),
        "value_inputs": Key(VALUE_INPUTS),
        "notes": Key(MapOf(keys=Str(), values=Str(), key_text="op type", what="a mapping op "
                           "type -> text", doc="Why an entry is there.")),
    })


def check(definition: Record, data: Any) -> dict:
    """``data`` checked against ``definition``: defaults filled in, memory sizes parsed.
    Raises :class:`DefinitionError` with the key path of the first problem."""
    return definition.check(data, "")


# -- generated outputs -----------------------------------------------------------------------

def json_schema(which: str = "rules") -> dict:
    """The JSON Schema (draft-07) of a rule file (``"rules"``) or a catalog (``"catalog"``)."""
    definition = {"rules": RULE_FILE, "catalog": CATALOG_FILE}[which]
    import onnx
    return {"$schema": "http://json-schema.org/draft-07/schema#",
            "$comment": f"generated by 'hetero-solve rules schema' (onnx {onnx.__version__}: "
                        "the op names it knows); do not edit",
            **definition.schema()}


def json_schema_text(which: str = "rules") -> str:
    return json.dumps(json_schema(which), indent=1, ensure_ascii=False) + "\n"


def markdown_reference() -> str:
    """The key reference of ``docs/rules.md``: one row per key path."""
    rows = ["| key | type | default | meaning | example |", "| --- | --- | --- | --- | --- |"]

    def walk(node: Node, path: str) -> None:
        if isinstance(node, Record):
            for name, spec in node.keys.items():
                sub = spec.node
                where = f"{path}.{name}" if path else name
                default = ("required" if spec.required else
                           "" if sub.default is MISSING else f"`{json.dumps(sub.default)}`")
                rows.append(f"| `{where}` | {_cell(sub.type_text())} | {default} | "
                            f"{_cell(sub.doc)} | {_code(sub.example)} |")
                walk(sub, where)
        elif isinstance(node, ListOf):
            walk(node.item, path + "[]")
        elif isinstance(node, MapOf):
            walk(node.values, f"{path}.<{node.key_text}>")
        elif isinstance(node, OneOf):
            for option in node.options:
                walk(option, path)

    walk(RULE_FILE, "")
    return "\n".join(rows) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


__all__ = ["RULE_FILE", "CATALOG_FILE", "DefinitionError", "check", "json_schema",
           "json_schema_text", "markdown_reference", "MAX_MEMORY", "MAX_INSTANCES", "MAX_NAME"]
