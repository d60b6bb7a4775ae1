"""Rule files, schema version 1 (SPEC section 3): YAML -> :class:`Rules`.

Every problem is a :class:`~hetero_solve.errors.RuleError` naming the file, the key path
(``devices[0].ops.when.Conv.attributes.group``) and the reason.  Checks that need the model
(a pin by exact name that matches no node) happen when rules are compiled against a model.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx.defs

from ..errors import RuleError
from ..filekind import content_kind
from ..readers import check_regular, read_yaml
from ..problem import OBJECTIVE_TERMS, Objective
from ..units import dtype_from_name, parse_memory

TOP_KEYS = ("version", "description", "include", "devices", "value_inputs", "affinity", "dims",
            "objective")
DEVICE_KEYS = ("name", "description", "memory", "instances", "value_inputs", "ops", "runtime")
OPS_KEYS = ("supported", "unsupported", "when", "static_shapes")
WHEN_KEYS = ("attributes", "dtypes", "max_rank")
CATALOG_KEYS = ("version", "description", "include", "value_inputs", "notes")
GLOB_CHARS = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class OpCondition:
    """A ``when`` entry: all must hold for the device to take the op."""
    attributes: dict[str, Any] = field(default_factory=dict)
    dtypes: frozenset[int] | None = None
    dtype_names: tuple[str, ...] = ()
    max_rank: int | None = None


@dataclass(frozen=True)
class DeviceRules:
    name: str
    memory: int | None = None          # bytes per instance; None = unlimited
    instances: int = 1
    enforce_values: bool = True
    supported: frozenset[str] | None = None   # None = all ops
    unsupported: frozenset[str] = frozenset()
    when: dict[str, OpCondition] = field(default_factory=dict)
    static_shapes: bool = False
    runtime: dict[str, Any] = field(default_factory=dict)
    description: str = ""


@dataclass(frozen=True)
class Pin:
    pattern: str
    device: str
    is_glob: bool
    key: str                            # key path for messages: affinity["/decoder/*"]


@dataclass
class Rules:
    """A validated rule file with its includes merged."""
    path: str
    devices: list[DeviceRules]
    value_inputs: dict[str, list[tuple[int, tuple[int, ...]]]]  # op -> [(since opset, indices)]
    value_input_notes: dict[str, str] = field(default_factory=dict)
    affinity: list[Pin] = field(default_factory=list)
    dims: dict[str, int] = field(default_factory=dict)
    objective: Objective = field(default_factory=Objective)
    description: str = ""

    def device_index(self, name: str) -> int:
        for i, d in enumerate(self.devices):
            if d.name == name:
                return i
        raise KeyError(name)

    def value_input_indices(self, op_type: str, opset: int) -> tuple[int, ...]:
        """Inputs of ``op_type`` whose value must be known, at the model's opset."""
        found: tuple[int, ...] = ()
        for since, idx in self.value_inputs.get(op_type, ()):
            if since <= opset:
                found = idx
        return found


# -- loading ---------------------------------------------------------------------------------

def load_rules(source: str | Path | dict, *, base_dir: str | Path | None = None) -> Rules:
    """Read and validate a rule file (a path, or an already parsed mapping).

    >>> r = load_rules({"version": 1, "devices": [{"name": "NPU", "ops": {"supported": ["Conv"]}},
    ...                                           {"name": "CPU", "ops": {"supported": "all"}}]})
    >>> [d.name for d in r.devices], r.objective.order
    (['NPU', 'CPU'], ('fallback', 'partitions', 'transfer'))
    """
    if isinstance(source, dict):
        path, data = "<rules>", source
        base = Path(base_dir or ".")
    else:
        path = str(source)
        data = _read_yaml(Path(source), path, "")
        base = Path(source).parent
    return _Parser(path, base).parse(data)


def _read_yaml(file: Path, shown: str, key: str) -> Any:
    """A rule file or catalog: a regular file, bounded in size, UTF-8 (or UTF-16/32 with a
    byte-order mark), YAML with bounded nesting and aliases (:mod:`hetero_solve.readers`).
    An ONNX model given instead (arguments swapped) is named as such."""
    if content_kind(file) == "model":
        raise RuleError(shown, key, "this is an ONNX model, not a rule file (a model goes "
                                    "first, its rule file second)")
    return read_yaml(file, lambda reason: RuleError(shown, key, reason))


class _Parser:
    def __init__(self, path: str, base: Path):
        self.path = path
        self.base = base

    def fail(self, key: str, reason: str) -> RuleError:
        return RuleError(self.path, key, reason)

    # top level
    def parse(self, data: Any) -> Rules:
        if not isinstance(data, dict):
            raise self.fail("", "expected a mapping with keys version, devices, ... "
                                f"(got {type(data).__name__})")
        self.keys(data, TOP_KEYS, "")
        self.version(data)
        value_inputs, notes = self.catalogs(data, {str(Path(self.path).resolve())})
        # Top-level entries replace included ones op by op (SPEC section 3).
        value_inputs.update(self.value_inputs(data.get("value_inputs"), "value_inputs"))
        devices = self.devices(data.get("devices"), value_inputs)
        names = [d.name for d in devices]
        return Rules(
            path=self.path, devices=devices, value_inputs=value_inputs, value_input_notes=notes,
            affinity=self.affinity(data.get("affinity"), names),
            dims=self.dims(data.get("dims")), objective=self.objective(data.get("objective")),
            description=str(data.get("description") or ""))

    def keys(self, data: dict, allowed: tuple[str, ...], where: str) -> None:
        for k in data:
            if k not in allowed:
                hint = _close(str(k), allowed)
                raise self.fail(_join(where, str(k)),
                                f"unknown key{hint} (expected one of: {', '.join(allowed)})")

    def version(self, data: dict) -> None:
        if "version" not in data:
            raise self.fail("version", "missing: rule files start with 'version: 1'")
        if data["version"] != 1:
            raise self.fail("version", f"unsupported schema version {data['version']!r} (this "
                                       "hetero-solve reads version 1)")

    def catalogs(self, data: dict, seen: set[str]) -> tuple[dict, dict]:
        """Value inputs and notes of the included catalogs, depth first, later ones winning."""
        value_inputs: dict = {}
        notes: dict = {}
        for inc_path, inc in self.includes(data, "include", seen):
            sub = _Parser(inc_path, Path(inc_path).parent)
            sub.keys(inc, CATALOG_KEYS, "")
            sub.version(inc)
            nested_values, nested_notes = sub.catalogs(inc, seen | {inc_path})
            value_inputs.update(nested_values)
            notes.update(nested_notes)
            value_inputs.update(sub.value_inputs(inc.get("value_inputs"), "value_inputs"))
            notes.update(sub.notes(inc.get("notes"), "notes"))
        return value_inputs, notes

    def includes(self, data: dict, key: str, seen: set[str]) -> list[tuple[str, dict]]:
        raw = data.get(key)
        if raw is None:
            return []
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, list):
            raise self.fail(key, "expected a list of file paths")
        found = []
        for i, item in enumerate(raw):
            k = f"{key}[{i}]"
            if not isinstance(item, str):
                raise self.fail(k, f"expected a file path, got {item!r}")
            if "\0" in item:
                raise self.fail(k, "expected a file path, got a string with a NUL character")
            file = (self.base / item).resolve()
            if not file.exists():
                raise self.fail(k, f"included file does not exist: {item} (looked for {file})")
            check_regular(file, lambda why: self.fail(k, f"{item}: {why}"))   # FIFOs, devices
            if str(file) in seen:
                raise self.fail(k, f"include cycle: {item} includes itself")
            content = _read_yaml(file, str(file), "")
            if not isinstance(content, dict):
                raise RuleError(str(file), "", "expected a mapping (a catalog with value_inputs)")
            found.append((str(file), content))
        return found

    # devices
    def devices(self, raw: Any, value_inputs: dict) -> list[DeviceRules]:
        if raw is None:
            raise self.fail("devices", "missing: list at least one device")
        if not isinstance(raw, list) or not raw:
            raise self.fail("devices", "expected a non-empty list of devices (first = most preferred)")
        out: list[DeviceRules] = []
        for i, d in enumerate(raw):
            out.append(self.device(d, f"devices[{i}]", value_inputs))
        seen: set[str] = set()
        for i, d in enumerate(out):
            if d.name in seen:
                raise self.fail(f"devices[{i}].name", f"duplicate device name {d.name!r}")
            seen.add(d.name)
        return out

    def device(self, d: Any, k: str, value_inputs: dict) -> DeviceRules:
        if not isinstance(d, dict):
            raise self.fail(k, "expected a mapping with name, ops, ...")
        self.keys(d, DEVICE_KEYS, k)
        name = d.get("name")
        if not isinstance(name, str) or not name.strip():
            raise self.fail(_join(k, "name"), "missing or empty device name")
        memory = None
        if d.get("memory") is not None:
            try:
                memory = parse_memory(d["memory"])
            except ValueError as e:
                raise self.fail(_join(k, "memory"), str(e)) from None
        instances = d.get("instances", 1)
        if isinstance(instances, bool) or not isinstance(instances, int) or instances < 1:
            raise self.fail(_join(k, "instances"), f"expected a whole number >= 1, got {instances!r}")
        vi = d.get("value_inputs", "enforce")
        if vi not in ("enforce", "ignore"):
            raise self.fail(_join(k, "value_inputs"), f"expected 'enforce' or 'ignore', got {vi!r}")
        ops = d.get("ops")
        if ops is None:
            raise self.fail(_join(k, "ops"), "missing: say which ops the device takes "
                                             "(ops: {supported: all} or a list)")
        if not isinstance(ops, dict):
            raise self.fail(_join(k, "ops"), "expected a mapping with supported, unsupported, when")
        ok = _join(k, "ops")
        self.keys(ops, OPS_KEYS, ok)
        supported = self.op_list(ops.get("supported"), _join(ok, "supported"), allow_all=True)
        unsupported = self.op_list(ops.get("unsupported", []), _join(ok, "unsupported"))
        when = self.when(ops.get("when"), _join(ok, "when"), value_inputs)
        static = ops.get("static_shapes", False)
        if not isinstance(static, bool):
            raise self.fail(_join(ok, "static_shapes"), f"expected true or false, got {static!r}")
        runtime = d.get("runtime") or {}
        if not isinstance(runtime, dict):
            raise self.fail(_join(k, "runtime"), "expected a mapping such as "
                                                 "{onnxruntime: CPUExecutionProvider}")
        for rk, rv in runtime.items():
            if rk != "onnxruntime":
                raise self.fail(_join(_join(k, "runtime"), str(rk)),
                                "unknown runtime (expected: onnxruntime)")
            if not (isinstance(rv, str) or (isinstance(rv, list) and all(isinstance(x, str) for x in rv))):
                raise self.fail(_join(_join(k, "runtime"), rk),
                                "expected an execution provider name or a list of them")
        return DeviceRules(name=name, memory=memory, instances=instances,
                           enforce_values=(vi == "enforce"), supported=supported,
                           unsupported=frozenset(unsupported or ()), when=when, static_shapes=static,
                           runtime=dict(runtime), description=str(d.get("description") or ""))

    def op_list(self, raw: Any, k: str, allow_all: bool = False) -> frozenset[str] | None:
        if raw is None:
            raise self.fail(k, "missing: a list of op types" + (" or 'all'" if allow_all else ""))
        if allow_all and raw == "all":
            return None
        if not isinstance(raw, list) or not all(isinstance(x, str) and x for x in raw):
            raise self.fail(k, "expected a list of op type names" + (" or 'all'" if allow_all else ""))
        return frozenset(raw)

    def when(self, raw: Any, k: str, value_inputs: dict) -> dict[str, OpCondition]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self.fail(k, "expected a mapping op type -> {attributes, dtypes, max_rank}")
        out = {}
        for op, cond in raw.items():
            ck = _join(k, str(op))
            if not isinstance(cond, dict):
                raise self.fail(ck, "expected a mapping with attributes, dtypes, max_rank")
            self.keys(cond, WHEN_KEYS, ck)
            attrs = cond.get("attributes") or {}
            if not isinstance(attrs, dict):
                raise self.fail(_join(ck, "attributes"), "expected a mapping attribute -> value")
            known = _schema_attributes(str(op))
            for a in attrs:
                if known is not None and a not in known:
                    raise self.fail(_join(_join(ck, "attributes"), str(a)),
                                    f"op {op} has no attribute {a!r} (it has: "
                                    f"{', '.join(sorted(known)) or 'none'})")
            dtypes = None
            names: tuple[str, ...] = ()
            if cond.get("dtypes") is not None:
                raw_d = cond["dtypes"]
                if not isinstance(raw_d, list) or not raw_d:
                    raise self.fail(_join(ck, "dtypes"), "expected a list such as [float32, float16]")
                codes = []
                for j, name in enumerate(raw_d):
                    code = dtype_from_name(str(name))
                    if code is None:
                        raise self.fail(f"{_join(ck, 'dtypes')}[{j}]", f"unknown dtype {name!r}")
                    codes.append(code)
                dtypes, names = frozenset(codes), tuple(str(x) for x in raw_d)
            max_rank = cond.get("max_rank")
            if max_rank is not None and (isinstance(max_rank, bool) or not isinstance(max_rank, int)
                                         or max_rank < 0):
                raise self.fail(_join(ck, "max_rank"), f"expected a whole number >= 0, got {max_rank!r}")
            out[str(op)] = OpCondition(attributes=dict(attrs), dtypes=dtypes, dtype_names=names,
                                       max_rank=max_rank)
        return out

    # value inputs
    def value_inputs(self, raw: Any, k: str) -> dict[str, list[tuple[int, tuple[int, ...]]]]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self.fail(k, "expected a mapping op type -> input indices")
        out = {}
        for op, spec in raw.items():
            ok = _join(k, str(op))
            if isinstance(spec, list):
                out[str(op)] = [(1, self.indices(spec, ok))]
            elif isinstance(spec, dict):
                steps = []
                for since, idx in spec.items():
                    if isinstance(since, bool) or not isinstance(since, int) or since < 1:
                        raise self.fail(f"{ok}[{since!r}]", "expected an opset number (>= 1) as key")
                    steps.append((since, self.indices(idx, f"{ok}[{since}]")))
                out[str(op)] = sorted(steps)
            else:
                raise self.fail(ok, "expected a list of input indices, or a mapping "
                                    "since-opset -> list of input indices")
        return out

    def indices(self, raw: Any, k: str) -> tuple[int, ...]:
        if not isinstance(raw, list) or not all(isinstance(x, int) and not isinstance(x, bool)
                                                and x >= 0 for x in raw):
            raise self.fail(k, f"expected a list of input indices (whole numbers >= 0), got {raw!r}")
        return tuple(sorted(set(raw)))

    def notes(self, raw: Any, k: str) -> dict[str, str]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self.fail(k, "expected a mapping op type -> text")
        return {str(a): str(b) for a, b in raw.items()}

    # pins, dims, objective
    def affinity(self, raw: Any, devices: list[str]) -> list[Pin]:
        if raw is None:
            return []
        if not isinstance(raw, dict):
            raise self.fail("affinity", "expected a mapping node name or glob -> device name")
        pins = []
        for pattern, device in raw.items():
            k = f'affinity["{pattern}"]'
            if not isinstance(pattern, str) or not pattern:
                raise self.fail(k, "expected a node name or glob as key")
            if device not in devices:
                raise self.fail(k, f"unknown device {device!r} (devices: {', '.join(devices)})")
            pins.append(Pin(pattern, device, bool(GLOB_CHARS.search(pattern)), k))
        return pins

    def dims(self, raw: Any) -> dict[str, int]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self.fail("dims", "expected a mapping dimension name -> value")
        for name, v in raw.items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise self.fail(f"dims.{name}", f"expected a whole number >= 1, got {v!r}")
        return {str(a): int(b) for a, b in raw.items()}

    def objective(self, raw: Any) -> Objective:
        if raw is None:
            return Objective()
        if isinstance(raw, list):
            if not raw:
                raise self.fail("objective", "empty list: name at least one term")
            for j, term in enumerate(raw):
                if term not in OBJECTIVE_TERMS:
                    raise self.fail(f"objective[{j}]", f"unknown term {term!r} "
                                                       f"(terms: {', '.join(OBJECTIVE_TERMS)})")
            if len(set(raw)) != len(raw):
                raise self.fail("objective", "a term appears twice")
            return Objective(order=tuple(raw))
        if isinstance(raw, dict):
            weights = {}
            for term, w in raw.items():
                if term not in OBJECTIVE_TERMS:
                    raise self.fail(f"objective.{term}", f"unknown term {term!r} "
                                                         f"(terms: {', '.join(OBJECTIVE_TERMS)})")
                if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
                    raise self.fail(f"objective.{term}", f"expected a weight >= 0, got {w!r}")
                weights[term] = w
            if not any(weights.values()):
                raise self.fail("objective", "every weight is 0: nothing to minimise")
            return Objective(weights=weights)
        raise self.fail("objective", "expected a list of terms (lexicographic) or a mapping "
                                     "term -> weight")


def _schema_attributes(op: str) -> set[str] | None:
    """Every attribute the op has had at any opset, or None for an op onnx does not know."""
    names: set[str] = set()
    found = False
    for domain in ("", "ai.onnx.ml"):
        try:
            schema = onnx.defs.get_schema(op, domain)
        except Exception:
            continue
        found = True
        names.update(schema.attributes)
        version = schema.since_version
        while version > 1:
            try:
                older = onnx.defs.get_schema(op, version - 1, domain)
            except Exception:
                break
            if older.since_version >= version:
                break
            names.update(older.attributes)
            version = older.since_version
    return names if found else None


def pin_matches(pin: Pin, name: str) -> bool:
    return fnmatch.fnmatchcase(name, pin.pattern) if pin.is_glob else name == pin.pattern


def _join(a: str, b: str) -> str:
    return f"{a}.{b}" if a else b


def _close(word: str, allowed: tuple[str, ...]) -> str:
    import difflib
    match = difflib.get_close_matches(word, allowed, n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""
