"""The value-input catalog against the ONNX schemas (docs/problem.md).

A *value input* is an input whose value (not just its shape) must be known to compile the op for
a static-shape device: it sets an output shape (Reshape's ``shape``, Resize's ``sizes``,
TopK's ``K``...) or the axes the kernel works on (Squeeze's ``axes``, CumSum's ``axis``).
``constraints/onnx-value-inputs.yaml`` lists them for every op of ``ai.onnx`` and
``ai.onnx.ml`` at every opset where they change.  This module checks such a catalog against the
op schemas of the installed ``onnx`` package, and derives the catalog from them:

    python -m hetero_solve.rules.catalog --check [CATALOG.yaml]   # problems, exit 1 if any
    python -m hetero_solve.rules.catalog --derive                 # the catalog, as YAML

How an input is *recognised* as possibly value-dependent (any of three signals):

- **name**: the schema names it like a shape parameter (:data:`SHAPE_INPUT_NAMES`: ``shape``,
  ``axes``, ``pads``, ``sizes``, ``scales``, ``repeats``, ``K``, ``starts``, ``split``,
  ``depth``, ``limit``, ``delta``...);
- **description**: its schema text says its values give the output's shape or size
  (:data:`DESCRIPTION_SIGNAL`, e.g. "Specified shape for output", "The shape of the expected
  output tensor");
- **type**: it is an index-typed input (every allowed type is ``tensor(int64)`` or
  ``tensor(int32)``), the way ONNX passes shapes, axes and counts.  This signal over-reaches
  (indices, sequence lengths, labels are int64 too); it is there so that no integer parameter
  escapes review when onnx adds ops.

Every recognised input must be in the catalog unless :data:`NOT_VALUE_INPUTS` says why it is not
(each exception with its reason).  An entry recognised only by its type, or not at all, is not
*derived* from the schemas: the catalog must say why it is there (``notes:``), and this module
lists it in :data:`EXTRA_VALUE_INPUTS`.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import onnx.defs
import yaml
from .load import load_rules

DOMAINS = ("", "ai.onnx.ml")
CATALOG_PATH = Path(__file__).resolve().parents[1] / "catalogs" / "onnx-value-inputs.yaml"

#: Input names the ONNX schemas use for shape parameters, axes and counts.
SHAPE_INPUT_NAMES = frozenset({
    "shape", "output_shape", "image_shape", "block_shape",         # a shape, verbatim
    "sizes", "size", "scales",                                      # output sizes / scale factors
    "axes", "axis",                                                 # the dimensions worked on
    "pads", "repeats", "tiles", "split",                            # per-axis counts
    "starts", "ends", "steps",                                      # Slice
    "start", "limit", "delta",                                      # Range
    "K", "k", "depth",                                              # TopK, OneHot
    "dft_length", "frame_length", "frame_step", "num_mel_bins",    # signal ops
})

#: Schema text saying that the input's values give the output's shape or size.
DESCRIPTION_SIGNAL = re.compile(
    r"shape (of|for) (the )?(expected )?output"
    r"|(specified|target) (output )?(shape|size)"
    r"|shape you want"
    r"|size of the (output|one-hot dimension)"
    r"|output (image )?size"
    r"|list of output lengths|length of each output"
    r"|number of (top elements|repeated copies|classes|bands)"
    r"|length of the (window|signal)"
    r"|cropping window dimensions",
    re.IGNORECASE)

INDEX_TYPES = frozenset({"tensor(int64)", "tensor(int32)"})

_DATA_INDICES = ("the values are data (positions to read or write); the output shape follows "
                 "this input's shape, not its values")
_LENGTHS = ("per-sample lengths only mask the computation; the output shape comes from the data "
            "inputs' shapes")
_LABELS = "class labels are data; the output shape follows this input's shape, not its values"

#: Recognised inputs that are NOT value inputs: (op, input name) -> why.
NOT_VALUE_INPUTS: dict[tuple[str, str], str] = {
    ("Gather", "indices"): _DATA_INDICES,
    ("GatherElements", "indices"): _DATA_INDICES,
    ("GatherND", "indices"): _DATA_INDICES,
    ("Scatter", "indices"): _DATA_INDICES,
    ("ScatterElements", "indices"): _DATA_INDICES,
    ("ScatterND", "indices"): _DATA_INDICES,
    ("ArrayFeatureExtractor", "Y"): _DATA_INDICES,
    ("MaxUnpool", "I"): _DATA_INDICES,
    ("RoiAlign", "batch_indices"): _DATA_INDICES,
    ("TensorScatter", "write_indices"): _DATA_INDICES,
    ("RotaryEmbedding", "position_ids"): _DATA_INDICES,
    ("GRU", "sequence_lens"): _LENGTHS,
    ("LSTM", "sequence_lens"): _LENGTHS,
    ("RNN", "sequence_lens"): _LENGTHS,
    ("ReverseSequence", "sequence_lens"): _LENGTHS,
    ("Scan", "sequence_lens"): _LENGTHS,
    ("Attention", "nonpad_kv_seqlen"): _LENGTHS,
    ("NegativeLogLikelihoodLoss", "target"): _LABELS,
    ("SoftmaxCrossEntropyLoss", "labels"): _LABELS,
    ("QLinearConv", "B"): "the int32 bias is data, added to the output",
    ("Attention", "K"): "the name matches TopK's K, but here K is the key tensor (data)",
    ("Trilu", "k"): ("k only chooses which diagonal is kept; the output has the input's shape, "
                     "so a device can take k at run time"),
    ("MelWeightMatrix", "sample_rate"): ("only the values of the matrix depend on it; its shape "
                                         "comes from num_mel_bins and dft_length"),
    ("NonMaxSuppression", "max_output_boxes_per_class"): (
        "the number of boxes selected depends on the scores and boxes whatever this bound is: "
        "the output shape is data-dependent anyway, and static-shape devices refuse the op "
        "through static_shapes"),
    ("STFT", "window"): ("the window's values are data applied to each frame; only its length (a "
                         "shape) can set frame_length"),
    ("SequenceErase", "position"): "the position moves no shape: sequences are not tensors, and "
                                   "the remaining tensors keep their shapes",
    ("SequenceInsert", "position"): "the position moves no shape: sequences are not tensors, and "
                                    "the inserted tensor keeps its shape",
}

#: Catalog entries the signals above do not derive (or derive only by type): (op, input) -> why.
#: The committed catalog carries these as ``notes:``.
EXTRA_VALUE_INPUTS: dict[tuple[str, str], str] = {
    ("Loop", "M"): ("the trip count sets the length of the scan outputs (their first "
                    "dimension); a static-shape device must know it (the body's condition may "
                    "still stop early, which such devices refuse through static_shapes)"),
    ("SequenceAt", "position"): ("the tensor picked from the sequence is the output: when the "
                                 "sequence's tensors differ in shape, the position sets the "
                                 "output shape"),
}

#: Notes for derived entries whose reason is not obvious from the input's name.
EXTRA_NOTES: dict[str, str] = {
    "CumSum": ("axis does not change the output shape, but it is the dimension the kernel scans: "
               "a static compiler needs it"),
    "CumProd": ("axis does not change the output shape, but it is the dimension the kernel "
                "scans: a static compiler needs it"),
    "Resize": ("roi (input 1 from opset 11) is not listed: it shifts sampling coordinates "
               "(tf_crop_and_resize) but never the output shape"),
    "Pad": ("constant_value (input 2 from opset 11) is not listed: it is a fill value, not a "
            "shape; add it in your rule file if your compiler bakes it into the kernel"),
    "DFT": "from opset 20 the axis is an input (2) as well as dft_length (1)",
    "Tile": "Tile-1 took tiles and axis as inputs; from opset 6 one repeats input",
    "Split": ("Split-1 took split as an optional input; opsets 2 and 11 made it an attribute; "
              "from opset 13 it is an input again"),
    "STFT": ("frame_step sets the number of frames and frame_length the DFT size; window (2) is "
             "not listed: its values are data, only its length (a shape) matters"),
}


@dataclass(frozen=True)
class Recognised:
    """One input of one schema version that a signal recognises."""
    op: str
    domain: str
    since: int
    index: int
    name: str
    signals: tuple[str, ...]        # subset of ("name", "description", "type")

    @property
    def derived(self) -> bool:
        """True when the schema says the input sets a shape (name or description)."""
        return "name" in self.signals or "description" in self.signals


# -- schemas ---------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def schema_history() -> dict[str, tuple[onnx.defs.OpSchema, ...]]:
    """Op type -> every schema version of the op in ``ai.onnx`` and ``ai.onnx.ml``, oldest first.

    The two domains share one namespace of op types (the catalog's keys); a name defined in
    both would be ambiguous and raises ``ValueError``."""
    by_op: dict[str, list[onnx.defs.OpSchema]] = {}
    domain_of: dict[str, str] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain not in DOMAINS:
            continue
        if domain_of.setdefault(s.name, s.domain) != s.domain:
            raise ValueError(f"op {s.name} is defined in both {domain_of[s.name]!r} and "
                             f"{s.domain!r}: the catalog cannot tell them apart")
        by_op.setdefault(s.name, []).append(s)
    return {op: tuple(sorted(v, key=lambda s: s.since_version)) for op, v in sorted(by_op.items())}


def signals(schema: onnx.defs.OpSchema, index: int) -> tuple[str, ...]:
    """Which signals recognise input ``index`` of ``schema`` (empty: not recognised)."""
    inp = schema.inputs[index]
    found = []
    if inp.name in SHAPE_INPUT_NAMES:
        found.append("name")
    if DESCRIPTION_SIGNAL.search(inp.description or ""):
        found.append("description")
    types = set(inp.types)
    if types and types <= INDEX_TYPES:
        found.append("type")
    return tuple(found)


def recognised(schema: onnx.defs.OpSchema) -> list[Recognised]:
    """The recognised inputs of one schema version."""
    out = []
    for k, inp in enumerate(schema.inputs):
        sig = signals(schema, k)
        if sig:
            out.append(Recognised(schema.name, schema.domain, schema.since_version, k, inp.name, sig))
    return out


# -- derivation ------------------------------------------------------------------------------

def wanted_indices(schema: onnx.defs.OpSchema) -> tuple[int, ...]:
    """The value inputs of one schema version: recognised and not excepted, plus the extras."""
    out = []
    for k, inp in enumerate(schema.inputs):
        key = (schema.name, inp.name)
        if key in EXTRA_VALUE_INPUTS or (signals(schema, k) and key not in NOT_VALUE_INPUTS):
            out.append(k)
    return tuple(out)


def derive() -> dict[str, dict[int, list[int]]]:
    """The catalog the schemas give: op -> {since opset: indices}, one step per change."""
    catalog: dict[str, dict[int, list[int]]] = {}
    for op, versions in schema_history().items():
        steps: dict[int, list[int]] = {}
        current: tuple[int, ...] = ()
        for s in versions:
            idx = wanted_indices(s)
            if idx != current:
                steps[s.since_version] = list(idx)
                current = idx
        if steps:
            catalog[op] = steps
    return catalog


def derived_notes() -> dict[str, str]:
    """``notes:`` of the derived catalog: every extra entry, then the other explanations."""
    notes: dict[str, str] = {}
    for (op, name), why in EXTRA_VALUE_INPUTS.items():
        notes[op] = f"{name}: {why}"
    for op, why in EXTRA_NOTES.items():
        notes[op] = notes[op] + "; " + why if op in notes else why
    return dict(sorted(notes.items()))


def resolve(steps: Iterable[tuple[int, Iterable[int]]], opset: int) -> tuple[int, ...]:
    """Indices in force at ``opset`` (the step with the largest since-opset <= opset)."""
    found: tuple[int, ...] = ()
    for since, idx in sorted(steps, key=lambda x: x[0]):
        if since <= opset:
            found = tuple(idx)
    return found


# -- audit -----------------------------------------------------------------------------------

def read_catalog(path: str | Path) -> tuple[dict[str, list[tuple[int, tuple[int, ...]]]], dict[str, str]]:
    """A catalog file's value inputs and notes, validated the way rule files include it."""
    rules = load_rules({"version": 1, "include": [str(Path(path).resolve())],
                        "devices": [{"name": "CPU", "ops": {"supported": "all"}}]})
    return rules.value_inputs, rules.value_input_notes


def audit(value_inputs: dict[str, list[tuple[int, tuple[int, ...]]]],
          notes: dict[str, str] | None = None) -> list[str]:
    """Problems of a catalog against the installed schemas (empty = none).

    1. every op exists in ``ai.onnx``/``ai.onnx.ml`` and every since-opset is a version of it;
    2. every index exists at every version where it is in force;
    3. every recognised input not in :data:`NOT_VALUE_INPUTS` is listed at every version;
    4. no input of :data:`NOT_VALUE_INPUTS` is listed;
    5. every listed input that no name or description signal derives has a note."""
    notes = notes or {}
    history = schema_history()
    problems: list[str] = []
    # (op, message) -> versions, so that one problem spanning opsets is one line
    found: dict[tuple[str, str], list[int]] = {}

    def add(op: str, since: int, message: str) -> None:
        found.setdefault((op, message), []).append(since)

    for op, steps in sorted(value_inputs.items()):
        versions = history.get(op)
        if versions is None:
            problems.append(f"{op}: no such op in ai.onnx or ai.onnx.ml (onnx {onnx.__version__})")
            continue
        since_versions = [s.since_version for s in versions]
        for since, _ in steps:
            if since not in since_versions and since != 1:
                problems.append(f"{op}[{since}]: {op} does not change at opset {since} "
                                f"(its versions: {since_versions})")
        for s in versions:
            for k in resolve(steps, s.since_version):
                if k >= len(s.inputs):
                    add(op, s.since_version, f"input {k} does not exist ({op} has "
                                             f"{len(s.inputs)} input(s) there)")
                    continue
                name = s.inputs[k].name
                if (op, name) in NOT_VALUE_INPUTS:
                    add(op, s.since_version, f"input {k} ({name}) is listed, but it is not a "
                                             f"value input: {NOT_VALUE_INPUTS[(op, name)]}")
                elif not any(r.derived for r in recognised(s) if r.index == k) and op not in notes:
                    add(op, s.since_version, f"input {k} ({name}) is not derived from the schema "
                                             "(no shape-like name or description): add a note "
                                             "saying why it is a value input")
    for op, versions in history.items():
        steps = value_inputs.get(op, [])
        for s in versions:
            have = resolve(steps, s.since_version)
            for r in recognised(s):
                if r.index in have or (op, r.name) in NOT_VALUE_INPUTS:
                    continue
                add(op, s.since_version, f"input {r.index} ({r.name}) is missing; recognised by "
                                         f"{'+'.join(r.signals)} (list it, or add it to "
                                         "NOT_VALUE_INPUTS with the reason)")
    for (op, message), sinces in found.items():
        problems.append(f"{op} at opset {', '.join(map(str, sinces))}: {message}")
    return problems


def audit_exceptions() -> list[str]:
    """Stale entries of :data:`NOT_VALUE_INPUTS` / :data:`EXTRA_VALUE_INPUTS`: an exception
    that names no input, or that no signal recognises (it would exclude nothing)."""
    history = schema_history()
    problems = []
    for (op, name) in NOT_VALUE_INPUTS:
        hits = [r for s in history.get(op, ()) for r in recognised(s) if r.name == name]
        if not hits:
            problems.append(f"NOT_VALUE_INPUTS[{op}, {name}]: no input {name!r} of {op} is "
                            "recognised; the exception is stale")
    for (op, name) in EXTRA_VALUE_INPUTS:
        names = {i.name for s in history.get(op, ()) for i in s.inputs}
        if name not in names:
            problems.append(f"EXTRA_VALUE_INPUTS[{op}, {name}]: {op} has no input {name!r}")
    return problems


# -- YAML ------------------------------------------------------------------------------------

def to_yaml() -> str:
    """The derived catalog as the commented YAML committed in ``constraints/``."""
    history = schema_history()
    lines = [
        "# Value-dependent inputs of the standard ONNX ops (docs/problem.md).",
        "#",
        "# op type -> indices of the inputs whose VALUE must be known to compile the op for a",
        "# static-shape device (they set an output shape, or the axes the kernel works on).  A list",
        "# applies at every opset; a mapping since-opset -> list applies from that opset on (the",
        "# entry with the largest since-opset not above the model's opset; [] = none from there).",
        "# The opset is the model's import of the op's domain (ai.onnx, or ai.onnx.ml).",
        "#",
        "# Rule files include this catalog; their own top-level value_inputs replace entries op by",
        "# op.  Ops not listed have no value input.  Data-dependent output shapes (NonZero, Unique,",
        "# Compress, NonMaxSuppression, If with branches of different shapes) are not value inputs:",
        "# their output shape is unknown whatever is known beforehand, so static-shape devices",
        "# refuse them through ops.static_shapes.",
        "#",
        f"# Derived from the op schemas of onnx {onnx.__version__} (ai.onnx opset "
        f"{onnx.defs.onnx_opset_version()}) by",
        "#     python -m hetero_solve.rules.catalog --derive > constraints/onnx-value-inputs.yaml",
        "# and checked by tests/rules/test_catalog.py (python -m hetero_solve.rules.catalog --check).",
        "# How inputs are recognised, and the inputs that look like value inputs but are not, with",
        "# the reasons: hetero_solve/rules/catalog.py and docs/rules.md.",
        "version: 1",
        "description: Value-dependent inputs of every ai.onnx and ai.onnx.ml op, per opset.",
        "value_inputs:",
    ]
    catalog = derive()
    for op, steps in catalog.items():
        parts = []
        for since, idx in steps.items():
            s = next(v for v in history[op] if v.since_version == since)
            names = ", ".join(s.inputs[k].name for k in idx) if idx else "none"
            parts.append(f"{since}: {names}")
        body = ", ".join(f"{since}: [{', '.join(map(str, idx))}]" for since, idx in steps.items())
        entry = f"  {op}: {{{body}}}"
        lines.append(f"{entry:<50} # {'; '.join(parts)}")
    lines.append("notes:")
    for op, text in derived_notes().items():
        lines.append(f"  {op}: {yaml.safe_dump(text, width=10**6).strip().removesuffix('...').strip()}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``--check [PATH]``: print the catalog's problems (exit 1 if any); ``--derive``: print it."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--derive"]:
        sys.stdout.write(to_yaml())
        return 0
    if args[:1] == ["--check"]:
        path = Path(args[1]) if len(args) > 1 else CATALOG_PATH
        value_inputs, notes = read_catalog(path)
        problems = audit(value_inputs, notes) + audit_exceptions()
        for p in problems:
            print(f"{path}: {p}")
        if not problems:
            print(f"{path}: {len(value_inputs)} ops, consistent with onnx {onnx.__version__}")
        return 1 if problems else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
