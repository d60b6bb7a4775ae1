"""How quantities are read and shown: memory strings from rule files, byte sizes, ONNX element
sizes and dtype names, device instances.  Every command shows them through these functions,
so a size or an instance is spelled one way everywhere."""

from __future__ import annotations

import difflib
import re

from onnx import TensorProto

_UNITS = {
    "": 1, "B": 1,
    "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
    "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4,
}
_MEMORY_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")
#: The memory strings rule files accept, as a JSON Schema pattern (no flags: cases spelled out).
MEMORY_PATTERN = (r"^\s*([0-9]+(\.[0-9]*)?|\.[0-9]+)\s*(|[bB]|[kKmMgGtT][iI]?[bB])\s*$")


def parse_memory(value: object) -> int:
    """Bytes from an int or a string such as ``"512KiB"``, ``"64MiB"``, ``"1.5GB"``.

    ``KB``/``MB``/``GB`` are powers of 1000, ``KiB``/``MiB``/``GiB`` powers of 1024
    (docs/rules.md).  Raises ``ValueError`` with the reason on anything else.

    >>> parse_memory("1.5GB"), parse_memory("64MiB"), parse_memory(4096)
    (1500000000, 67108864, 4096)
    """
    if isinstance(value, bool):
        raise ValueError(f"expected bytes (an int or a string like '64MiB'), got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"memory must not be negative, got {value}")
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"memory must be a finite number of bytes, got {value}")
        if value < 0:
            raise ValueError(f"memory must not be negative, got {value}")
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"expected bytes (an int or a string like '64MiB'), got {value!r}")
    if value.strip().startswith("-"):
        raise ValueError(f"memory must not be negative, got {value!r}")
    m = _MEMORY_RE.match(value)
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(
            f"cannot parse memory {value!r}: use bytes or a number with KB, MB, GB (powers of 1000) "
            "or KiB, MiB, GiB (powers of 1024)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def format_bytes(n: int | None) -> str:
    """Short human form: ``1.5 MiB``; ``None`` prints as ``unlimited``."""
    if n is None:
        return "unlimited"
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def instance_label(device: str, instance: int, instances: int) -> str:
    """A device instance as every output shows it: ``NPU`` for a device with one instance,
    ``NPU.1`` for instance 1 of several (OpenVINO's spelling, ``GPU.0``, ``GPU.1``; also what a
    node -> device map given to ``check`` may name).

    >>> instance_label("NPU", 0, 1), instance_label("NPU", 1, 2)
    ('NPU', 'NPU.1')
    """
    return f"{device}.{instance}" if instances > 1 else device


# Bits per element.  Strings have no fixed size: count a pointer's worth.
_BITS = {
    TensorProto.FLOAT: 32, TensorProto.UINT8: 8, TensorProto.INT8: 8, TensorProto.UINT16: 16,
    TensorProto.INT16: 16, TensorProto.INT32: 32, TensorProto.INT64: 64, TensorProto.STRING: 64,
    TensorProto.BOOL: 8, TensorProto.FLOAT16: 16, TensorProto.DOUBLE: 64, TensorProto.UINT32: 32,
    TensorProto.UINT64: 64, TensorProto.COMPLEX64: 64, TensorProto.COMPLEX128: 128,
    TensorProto.BFLOAT16: 16,
}
for _name, _bits in (("FLOAT8E4M3FN", 8), ("FLOAT8E4M3FNUZ", 8), ("FLOAT8E5M2", 8),
                     ("FLOAT8E5M2FNUZ", 8), ("UINT4", 4), ("INT4", 4), ("FLOAT4E2M1", 4),
                     ("FLOAT8E8M0", 8), ("UINT2", 2), ("INT2", 2), ("FLOAT6E2M3", 6),
                     ("FLOAT6E3M2", 6)):
    if hasattr(TensorProto, _name):
        _BITS[getattr(TensorProto, _name)] = _bits


def element_bits(elem_type: int) -> int:
    """Bits per element of an ONNX tensor type; 0 when the type is unknown."""
    return _BITS.get(elem_type, 0)


def _build_names() -> dict[int, str]:
    import onnx.helper
    names = {0: "unknown", TensorProto.BFLOAT16: "bfloat16", TensorProto.STRING: "string"}
    for elem in TensorProto.DataType.values():
        if elem not in names:
            try:
                names[elem] = str(onnx.helper.tensor_dtype_to_np_dtype(elem).name)
            except Exception:  # a type numpy cannot represent
                names[elem] = TensorProto.DataType.Name(elem).lower()
    return names


_NAMES = _build_names()


def dtype_name(elem_type: int) -> str:
    """``float32`` style name of an ONNX element type (the names rule files use)."""
    return _NAMES.get(elem_type, "unknown")


def dtype_names() -> list[str]:
    """Every dtype name rule files accept: ``float32`` style, then ONNX's (``FLOAT``)."""
    names = [n for e, n in sorted(_NAMES.items()) if e]
    onnx_names = [TensorProto.DataType.Name(e) for e in sorted(_NAMES) if e]
    return list(dict.fromkeys(names + onnx_names))


#: Short names users write for a dtype, and the name rule files use.
_DTYPE_ALIASES = {"fp32": "float32", "f32": "float32", "float": "float32", "single": "float32",
                  "fp16": "float16", "f16": "float16", "half": "float16",
                  "fp64": "float64", "f64": "float64", "double": "float64",
                  "bf16": "bfloat16", "i8": "int8", "i16": "int16", "i32": "int32",
                  "int": "int64", "long": "int64", "i64": "int64", "u8": "uint8",
                  "u16": "uint16", "u32": "uint32", "u64": "uint64", "boolean": "bool",
                  "str": "string"}


def closest_dtype(name: str) -> str | None:
    """The dtype name a misspelt ``name`` most likely meant (``fp32`` -> ``float32``,
    ``flaot16`` -> ``float16``), or None."""
    key = name.strip().lower()
    if key in _DTYPE_ALIASES:
        return _DTYPE_ALIASES[key]
    close = difflib.get_close_matches(key, [n for e, n in sorted(_NAMES.items()) if e], n=1)
    return close[0] if close else None


def dtype_from_name(name: str) -> int | None:
    """Inverse of :func:`dtype_name`, also accepting ONNX spellings (``FLOAT``, ``float``)."""
    key = name.strip().lower()
    for elem, known in _NAMES.items():
        if elem and (known == key or TensorProto.DataType.Name(elem).lower() == key):
            return elem
    return None
