"""How quantities are read and shown: memory strings from rule files, byte sizes, ONNX element
sizes and dtype names, device instances.  Every command shows them through these functions,
so a size or an instance is spelled one way everywhere."""

from __future__ import annotations

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


def dtype_from_name(name: str) -> int | None:
    """Inverse of :func:`dtype_name`, also accepting ONNX spellings (``FLOAT``, ``float``)."""
    key = name.strip().lower()
    for elem, known in _NAMES.items():
        if elem and (known == key or TensorProto.DataType.Name(elem).lower() == key):
            return elem
    return None


# -- rates and times (the cost keys of rule files, docs/rules.md) ----------------------------

_NUMBER = r"([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?)"
_SI = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
#: Time units as divisors of seconds (200 / 1e6 is exactly 0.0002; 200 * 1e-6 is not).
_TIMES = {"": 1.0, "s": 1.0, "ms": 1e3, "us": 1e6, "µs": 1e6, "μs": 1e6, "ns": 1e9}


def _rate_factor(unit: str) -> float | None:
    """FLOP/s of an arithmetic-rate unit: ``FLOPS``, ``FLOP/s``, ``OPS`` or ``OP/s`` after an
    SI prefix (``k``, ``M``, ``G``, ``T``, ``P``; case does not matter)."""
    u = unit.lower()
    for word in ("flops", "flop/s", "ops", "op/s"):
        if u.endswith(word) and u[:-len(word)] in _SI:
            return _SI[u[:-len(word)]]
    return 1.0 if u == "" else None


def _bandwidth_factor(unit: str) -> float | None:
    """Bytes per second of a bandwidth unit: a memory unit (``B``, ``KB``... ``TB`` powers of
    1000, ``KiB``... ``TiB`` powers of 1024) then ``/s``."""
    if unit == "":
        return 1.0
    if not unit.endswith("/s"):
        return None
    size = _UNITS.get(unit[:-2].upper())
    return None if size is None or unit[:-2] == "" else float(size)


#: What each kind of quantity is, its units, and an example: the rule file's messages say it.
QUANTITIES = {
    "time": ("a time", lambda u: 1.0 / _TIMES[u.lower()] if u.lower() in _TIMES else None,
             "seconds, or a number with s, ms, us or ns", "150us"),
    "rate": ("an arithmetic rate", _rate_factor,
             "operations per second, or a number with FLOPS or OPS after a prefix "
             "k, M, G, T or P", "2TFLOPS"),
    "bandwidth": ("a bandwidth", _bandwidth_factor,
                  "bytes per second, or a number with B/s, KB/s, MB/s, GB/s, TB/s (powers of "
                  "1000) or KiB/s, MiB/s, GiB/s, TiB/s (powers of 1024)", "50GB/s"),
}
#: The strings each kind accepts, as JSON Schema patterns (cases spelled out: no flags).
QUANTITY_PATTERNS = {
    "time": rf"^\s*{_NUMBER}\s*([sS]|[mMuUnN][sS]|µs|μs)?\s*$".replace("(?:", "("),
    "rate": rf"^\s*{_NUMBER}\s*(([kKmMgGtTpP])?([fF][lL])?[oO][pP]([sS]|/s))?\s*$"
            .replace("(?:", "("),
    "bandwidth": rf"^\s*{_NUMBER}\s*([bB]/s|[kKmMgGtT][iI]?[bB]/s)?\s*$".replace("(?:", "("),
}
_QUANTITY_RE = re.compile(rf"^\s*{_NUMBER}\s*(\S*)\s*$")


def parse_quantity(value: object, kind: str, *, positive: bool = False) -> float:
    """A time (seconds), an arithmetic rate (FLOP/s) or a bandwidth (bytes/s) from a number
    (in that base unit) or a string with a unit (:data:`QUANTITIES`).  Raises ``ValueError``
    with the reason: a wrong unit, a negative or non-finite value, or 0 where ``positive``.

    >>> parse_quantity("2TFLOPS", "rate"), parse_quantity("50GB/s", "bandwidth")
    (2000000000000.0, 50000000000.0)
    >>> parse_quantity("150us", "time"), parse_quantity(0.5, "time")
    (0.00015, 0.5)
    """
    what, factor_of, units, example = QUANTITIES[kind]
    if isinstance(value, bool):
        raise ValueError(f"expected {what} ({units}, e.g. {example}), got {value!r}")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        m = _QUANTITY_RE.match(value)
        factor = factor_of(m.group(2)) if m else None
        if value.strip().startswith("-"):
            raise ValueError(f"{what} must not be negative, got {value!r}")
        if factor is None:
            raise ValueError(f"cannot read {value!r} as {what}: use {units} (e.g. {example})")
        number = (float(m.group(1)) / _TIMES[m.group(2).lower()] if kind == "time"
                  else float(m.group(1)) * factor)
    else:
        raise ValueError(f"expected {what} ({units}, e.g. {example}), got {value!r}")
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"{what} must be finite, got {value!r}")
    if number < 0:
        raise ValueError(f"{what} must not be negative, got {value!r}")
    if positive and number == 0:
        raise ValueError(f"{what} must be more than 0, got {value!r}")
    return number


def format_seconds(seconds: float | None) -> str:
    """A predicted time as every output shows it: ``1.25 ms``, ``310 µs``, ``2.1 s``.

    >>> format_seconds(0.00125), format_seconds(0.00031), format_seconds(2.1)
    ('1.25 ms', '310 µs', '2.1 s')
    """
    if seconds is None:
        return "unknown"
    if seconds == 0:
        return "0 s"
    for unit, size in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"
