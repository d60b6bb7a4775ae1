"""Rule files, schema version 1 (docs/rules.md): YAML -> :class:`Rules`.

Every problem is a :class:`~hetero_solve.errors.RuleError` naming the file, the key path
(``devices[0].ops.when.Conv.attributes.group``) and the reason.  Checks that need the model
(a pin by exact name that matches no node) happen when rules are compiled against a model.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import onnx.defs

from ..costs import Link, Roofline
from ..errors import RuleError, warn
from ..filekind import content_kind
from ..readers import check_regular, read_yaml
from ..problem import Objective
from ..units import dtype_from_name
from .ops import check_op_name, other_domain_ops
from .schema import CATALOG_FILE, RULE_FILE, DefinitionError, check

GLOB_CHARS = re.compile(r"[*?\[]")
#: An include that is a bare name (no path, no suffix) names a catalog installed with the tool.
CATALOG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
#: The catalogs installed with hetero-solve (``include: [onnx-value-inputs]``).
CATALOG_DIR = Path(__file__).resolve().parents[1] / "catalogs"


def packaged_catalogs() -> dict[str, Path]:
    """Name -> file of every catalog installed with hetero-solve."""
    return {p.stem: p for p in sorted(CATALOG_DIR.glob("*.yaml"))}


@dataclass(frozen=True)
class OpCondition:
    """A ``when`` entry: all must hold for the device to take the op."""
    attributes: dict[str, Any] = field(default_factory=dict)
    dtypes: frozenset[int] | None = None
    dtype_names: tuple[str, ...] = ()
    max_rank: int | None = None
    quantized: bool | None = None      # in (True) or outside (False) a quantized unit's centre


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
    roofline: Roofline | None = None   # time of a node from its FLOPs and bytes
    part_cost: float = 0.0             # seconds per part placed here
    link: Link | None = None           # to host memory; None = computes in host memory


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
    """Checks a parsed file against the one definition of the format
    (:mod:`hetero_solve.rules.schema`: keys, types, ranges, op names), then builds
    :class:`Rules` and checks what needs more than one value (includes, pins naming devices,
    duplicate devices, attributes the op has)."""

    def __init__(self, path: str, base: Path):
        self.path = path
        self.base = base

    def fail(self, key: str, reason: str) -> RuleError:
        return RuleError(self.path, key, reason)

    def checked(self, definition, data: Any) -> dict:
        self.version(data)
        try:
            return check(definition, data)
        except DefinitionError as e:
            raise self.fail(e.key, e.reason) from None

    # top level
    def parse(self, data: Any) -> Rules:
        data = self.checked(RULE_FILE, data)
        value_inputs, notes = self.catalogs(data, {str(Path(self.path).resolve())})
        # Top-level entries replace included ones op by op (docs/rules.md).
        value_inputs.update(self.value_inputs(data.get("value_inputs")))
        devices = self.devices(data["devices"])
        names = [d.name for d in devices]
        return Rules(
            path=self.path, devices=devices, value_inputs=value_inputs, value_input_notes=notes,
            affinity=self.affinity(data.get("affinity"), names),
            dims={str(a): int(b) for a, b in (data.get("dims") or {}).items()},
            objective=self.objective(data["objective"]),
            description=str(data.get("description") or ""))

    def version(self, data: Any) -> None:
        if not isinstance(data, dict):
            return      # the definition names what was expected
        if "version" not in data:
            raise self.fail("version", "missing: rule files start with 'version: 1'")
        if data["version"] != 1 or isinstance(data["version"], bool):
            raise self.fail("version", f"unsupported schema version {data['version']!r} (this "
                                       "hetero-solve reads version 1)")

    def catalogs(self, data: dict, seen: set[str]) -> tuple[dict, dict]:
        """Value inputs and notes of the included catalogs, depth first, later ones winning."""
        value_inputs: dict = {}
        notes: dict = {}
        for inc_path, inc in self.includes(data, "include", seen):
            sub = _Parser(inc_path, Path(inc_path).parent)
            inc = sub.checked(CATALOG_FILE, inc)
            nested_values, nested_notes = sub.catalogs(inc, seen | {inc_path})
            value_inputs.update(nested_values)
            notes.update(nested_notes)
            value_inputs.update(sub.value_inputs(inc.get("value_inputs")))
            notes.update({str(a): str(b) for a, b in (inc.get("notes") or {}).items()})
        return value_inputs, notes

    def includes(self, data: dict, key: str, seen: set[str]) -> list[tuple[str, dict]]:
        raw = data.get(key)
        if raw is None:
            return []
        if isinstance(raw, str):
            raw = [raw]
        found = []
        for i, item in enumerate(raw):
            k = f"{key}[{i}]"
            file = self.include_path(item, k)
            check_regular(file, lambda why: self.fail(k, f"{item}: {why}"))   # FIFOs, devices
            if str(file) in seen:
                raise self.fail(k, f"include cycle: {item} includes itself")
            try:
                content = _read_yaml(file, str(file), "")
            except RuleError as e:   # named where the user wrote it: this file, this key
                raise self.fail(k, f"{item}: {e.reason}") from None
            if not isinstance(content, dict):
                raise self.fail(k, f"{item}: expected a mapping (a catalog with value_inputs), "
                                   f"not {_kind(content)}")
            found.append((str(file), content))
        return found

    def include_path(self, item: str, k: str) -> Path:
        """A packaged catalog by name (``onnx-value-inputs``), else a path relative to this
        file."""
        try:
            file = (self.base / item).resolve()
        except (OSError, RuntimeError) as e:   # a symbolic link loop
            raise self.fail(k, f"{item}: cannot follow the path: {e}") from None
        exists = os.path.exists(file)   # False, not an error, for a name too long
        if exists or not CATALOG_NAME.fullmatch(item):
            if not exists:
                raise self.fail(k, f"included file does not exist: {item} (looked for {file}; "
                                   f"catalogs installed with hetero-solve: "
                                   f"{', '.join(packaged_catalogs())})")
            return file
        packaged = packaged_catalogs().get(item)
        if packaged is None:
            raise self.fail(k, f"no catalog named {item!r} is installed with hetero-solve "
                               f"(installed: {', '.join(packaged_catalogs())}) and no file "
                               f"{file} exists")
        return packaged

    # devices
    def devices(self, raw: list[dict]) -> list[DeviceRules]:
        out = [self.device(d, f"devices[{i}]") for i, d in enumerate(raw)]
        seen: set[str] = set()
        for i, d in enumerate(out):
            if d.name in seen:
                raise self.fail(f"devices[{i}].name", f"duplicate device name {d.name!r}")
            seen.add(d.name)
        return out

    def device(self, d: dict, k: str) -> DeviceRules:
        ops = d["ops"]
        supported = ops["supported"]
        unsupported = []
        for i, name in enumerate(ops.get("unsupported") or ()):
            domains = other_domain_ops().get(name, ()) if check_op_name(name) else ()
            if domains:   # another domain's op written bare: read with its domain
                full = [f"{domain}.{name}" for domain in domains]
                warn(f"{self.path}: {k}.ops.unsupported[{i}]: {name!r} is not an op of "
                     f"onnx; read as {', '.join(full)} (write it so to silence this)")
                unsupported.extend(full)
            else:
                unsupported.append(name)
        runtime = dict(d.get("runtime") or {})
        return DeviceRules(
            name=d["name"], memory=d.get("memory"), instances=d["instances"],
            enforce_values=(d["value_inputs"] == "enforce"),
            supported=None if supported == "all" else frozenset(supported),
            unsupported=frozenset(unsupported),
            when=self.when(ops.get("when"), f"{k}.ops.when"),
            static_shapes=ops["static_shapes"], runtime=runtime,
            description=str(d.get("description") or ""),
            roofline=_roofline(d.get("roofline")), part_cost=float(d["part_cost"]),
            link=None if d.get("link") is None else Link(bandwidth=d["link"]["bandwidth"],
                                                         latency=d["link"]["latency"]))

    def when(self, raw: dict | None, k: str) -> dict[str, OpCondition]:
        out = {}
        for op, cond in (raw or {}).items():
            ck = _join(k, str(op))
            attrs = cond.get("attributes") or {}
            known = _schema_attributes(str(op))
            for a in attrs:
                if known is not None and a not in known:
                    raise self.fail(_join(_join(ck, "attributes"), str(a)),
                                    f"op {op} has no attribute {a!r} (it has: "
                                    f"{', '.join(sorted(known)) or 'none'})")
            dtypes = None
            names: tuple[str, ...] = ()
            if cond.get("dtypes") is not None:
                dtypes = frozenset(dtype_from_name(str(x)) for x in cond["dtypes"])
                names = tuple(str(x) for x in cond["dtypes"])
            out[str(op)] = OpCondition(attributes=dict(attrs), dtypes=dtypes, dtype_names=names,
                                       max_rank=cond.get("max_rank"),
                                       quantized=cond.get("quantized"))
        return out

    # value inputs
    def value_inputs(self, raw: dict | None) -> dict[str, list[tuple[int, tuple[int, ...]]]]:
        out = {}
        for op, spec in (raw or {}).items():
            if isinstance(spec, list):
                out[str(op)] = [(1, tuple(sorted(set(spec))))]
            else:
                out[str(op)] = sorted((since, tuple(sorted(set(idx))))
                                      for since, idx in spec.items())
        return out

    # pins, objective
    def affinity(self, raw: dict | None, devices: list[str]) -> list[Pin]:
        pins = []
        for pattern, device in (raw or {}).items():
            pattern = str(pattern)
            k = f'affinity["{pattern}"]'
            if device not in devices:
                raise self.fail(k, f"unknown device {device!r} (devices: {', '.join(devices)})")
            pins.append(Pin(pattern, device, bool(GLOB_CHARS.search(pattern)), k))
        return pins

    def objective(self, raw: list | dict) -> Objective:
        try:
            return objective_of(raw)
        except ValueError as e:
            raise self.fail("objective", str(e)) from None


def objective_of(raw: list | dict) -> Objective:
    """An objective as the rule file's ``objective`` key (or ``--objective``) gives it, after
    the format's checks: a list is lexicographic, a mapping weights.  ``ValueError`` when
    every weight is 0."""
    if isinstance(raw, list):
        return Objective(order=tuple(raw))
    if not any(raw.values()):
        raise ValueError("every weight is 0: nothing to minimise")
    return Objective(weights=dict(raw))


def objective_from_text(text: str) -> Objective:
    """An objective written on one line (``--objective``): ``latency``, ``fallback,latency``
    or ``[fallback, latency]`` (an order), ``fallback=1,partitions=20`` or ``{fallback: 1,
    partitions: 20}`` (weights); checked as the rule file's ``objective`` key is.  Raises
    ``ValueError`` with the reason.

    >>> objective_from_text("fallback,latency").order
    ('fallback', 'latency')
    >>> objective_from_text("fallback=1,partitions=20").weights
    {'fallback': 1.0, 'partitions': 20.0}
    """
    body = text.strip()
    if body[:1] in "[{" and body[-1:] in "]}":
        body = body[1:-1]
    items = [x.strip() for x in body.split(",") if x.strip()]
    raw: list | dict = items
    if any("=" in x or ":" in x for x in items):
        raw = {}
        for x in items:
            name, sep, value = x.replace(":", "=", 1).partition("=")
            name = name.strip()
            if not sep:
                raise ValueError(f"{name!r} has no weight: write every term as TERM=WEIGHT, "
                                 f"or none (an order)")
            try:
                raw[name] = float(value)
            except ValueError:
                raise ValueError(f"the weight of {name!r} is not a number: "
                                 f"{value.strip()!r}") from None
    try:
        return objective_of(RULE_FILE.keys["objective"].node.check(raw, "objective"))
    except DefinitionError as e:
        raise ValueError(e.reason) from None


def as_objective(value: Any) -> Objective:
    """An objective as a library caller gives it (``hetero_solve.solve(..., objective=...)``):
    an :class:`~hetero_solve.problem.Objective`, a text as the command's ``--objective``
    takes it (``"latency"``, ``"fallback,latency"``, ``"fallback=1,partitions=20"``), a list
    of terms (an order) or a mapping term -> weight; checked as the rule file's ``objective``
    key is.  Raises ``ValueError`` with the reason.

    >>> as_objective(["fallback", "latency"]).order
    ('fallback', 'latency')
    >>> as_objective({"fallback": 1, "partitions": 20}).weights
    {'fallback': 1, 'partitions': 20}
    """
    if isinstance(value, Objective):
        return value
    if isinstance(value, str):
        return objective_from_text(value)
    if isinstance(value, (list, tuple)):
        raw: list | dict = list(value)
    elif isinstance(value, Mapping):
        raw = dict(value)
    else:
        raise ValueError(f"expected an Objective, a text such as 'latency', a list of terms or "
                         f"a mapping of term to weight, not {type(value).__name__}")
    try:
        return objective_of(RULE_FILE.keys["objective"].node.check(raw, "objective"))
    except DefinitionError as e:
        raise ValueError(e.reason) from None


def _roofline(raw: dict | None) -> Roofline | None:
    if raw is None:
        return None
    return Roofline(flops=raw["flops"], bandwidth=raw["bandwidth"],
                    efficiency={str(k): float(v) for k, v in (raw.get("efficiency") or {}).items()})


def _schema_attributes(op: str) -> set[str] | None:
    """Every attribute the op has had at any opset in any domain onnx knows, or None for an op
    onnx does not know (another domain's: its attributes cannot be checked)."""
    found = [s for s in onnx.defs.get_all_schemas_with_history() if s.name == op]
    if not found:
        return None
    return {a for s in found for a in s.attributes}


def _kind(value: Any) -> str:
    """What a YAML document is, in words: ``a list``, ``a string``, ``nothing``."""
    if value is None:
        return "nothing (an empty file)"
    return {list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def _join(a: str, b: str) -> str:
    return f"{a}.{b}" if a else b

