"""Ground-truth tensor shapes of the corpus's models, from onnxruntime, and what the corpus
says about each model (``corpus.yaml``).

The runtime is the judge of a shape (SPEC section 3: "no static shape differs from the one
onnxruntime produces"): with every input's shape fixed, each main-graph tensor is made a graph
output and the model runs on three different random inputs (integer inputs drawn from the
ranges ``corpus.yaml`` gives: token ids below the vocabulary size, a sample rate the model
accepts...).  A tensor whose shape is the same in the three runs is static with that shape; one
whose shape changes depends on input values (e.g. ``NonZero``) and is not static.

Pure functions; the only file they read is the model (and ``corpus.yaml`` for
:func:`load_corpus`).  ``build.py`` caches :func:`ground_truth` as ``truth/<model>.json``;
``tests/test_real_models.py`` and ``benchmarks/bench_real.py`` compare hetero-solve with it
through :func:`compare`.

>>> corpus = load_corpus()                                              # doctest: +SKIP
>>> truth = ground_truth(model_file("rapidocr-cls"), corpus["rapidocr-cls"])  # doctest: +SKIP
>>> truth["tensors"]["conv2d_0.tmp_0"]                                  # doctest: +SKIP
[1, 8, 24, 96]
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
CORPUS_YAML = HERE / "corpus.yaml"
MODELS_DIR = HERE / "models"          # committed models (<= 2 MB each)
TRUTH_DIR = HERE / "truth"            # committed ground truth (every model's, when built)
#: Models too big to commit: ``build.py`` fills this directory; ``HETERO_CORPUS_CACHE`` moves it.
CACHE_DIR = Path(os.environ.get("HETERO_CORPUS_CACHE", HERE / "cache"))
RUNS = 3                              # random inputs per model
TRUTH_VERSION = 1


# -- the corpus description --------------------------------------------------------------------

def load_corpus(path: str | os.PathLike = CORPUS_YAML) -> dict[str, dict]:
    """Model name -> its entry in ``corpus.yaml`` (source, license, sha256, dims, shapes...)."""
    import yaml
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    return dict(data["models"])


def model_file(name: str, entry: Mapping | None = None) -> Path:
    """Where model ``name`` lives: ``models/`` when committed, else the cache directory (the
    file may not exist there until ``build.py`` ran)."""
    stored = (entry or {}).get("stored", "committed")
    return (MODELS_DIR if stored == "committed" else CACHE_DIR / "models") / f"{name}.onnx"


def truth_file(name: str) -> Path:
    return TRUTH_DIR / f"{name}.json"


def sha256_of(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def needs_whole_shapes(entry: Mapping) -> bool:
    """Whether some input has anonymous (``?``) dims, so that named ``dims`` cannot fix it and
    its whole shape must be given (``--shape NAME=d0,d1,...``)."""
    return bool(entry.get("shapes"))


# -- inputs --------------------------------------------------------------------------------

def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The inputs fed at run time (initializers listed as inputs excluded)."""
    inits = {t.name for t in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def input_shapes(model: onnx.ModelProto, entry: Mapping) -> dict[str, tuple[int, ...]]:
    """Every input's concrete shape: ``entry["shapes"][name]`` when given, else the declared
    shape with ``entry["dims"]`` substituted for symbolic dims.

    Raises ``ValueError`` naming the input and dim that neither fixes."""
    dims = entry.get("dims") or {}
    whole = entry.get("shapes") or {}
    shapes = {}
    for vi in graph_inputs(model):
        if vi.name in whole:
            shapes[vi.name] = tuple(int(d) for d in whole[vi.name])
            continue
        out = []
        for k, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                out.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param in dims:
                out.append(int(dims[d.dim_param]))
            else:
                raise ValueError(f"input {vi.name!r}: dim {k} ({d.dim_param or '?'}) has no "
                                 "value: give it in dims, or the whole shape in shapes")
        shapes[vi.name] = tuple(out)
    return shapes


def random_feeds(model: onnx.ModelProto, entry: Mapping, seed: int) -> dict[str, np.ndarray]:
    """Inputs of the declared types and :func:`input_shapes`: floats ~ N(0, 1) (or uniform in
    ``entry["ranges"][name]``), integers uniform in their inclusive range (default [0, 9]),
    booleans fair coins.  Deterministic for a seed."""
    rng = np.random.default_rng(seed)
    ranges = entry.get("ranges") or {}
    shapes = input_shapes(model, entry)
    feeds = {}
    for vi in graph_inputs(model):
        dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        shape = shapes[vi.name]
        lo_hi = ranges.get(vi.name)
        if dtype == np.bool_:
            value = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            lo, hi = lo_hi if lo_hi is not None else (0, 9)
            value = rng.integers(lo, hi, size=shape, endpoint=True)
        elif lo_hi is not None:
            value = rng.uniform(lo_hi[0], lo_hi[1], size=shape)
        else:
            value = rng.standard_normal(shape)
        feeds[vi.name] = np.asarray(value).astype(dtype)
    return feeds


# -- observing every tensor ------------------------------------------------------------------

def main_graph_tensors(model: onnx.ModelProto) -> list[str]:
    """Every tensor a main-graph node produces, in node order (``Constant`` outputs included)."""
    seen, names = set(), []
    for node in model.graph.node:
        for out in node.output:
            if out and out not in seen:
                seen.add(out)
                names.append(out)
    return names


def exposing_all(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose graph outputs are every main-graph tensor (untyped outputs:
    onnxruntime types them itself)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    declared = {o.name for o in m.graph.output}
    for name in main_graph_tensors(m):
        if name not in declared:
            m.graph.output.append(onnx.ValueInfoProto(name=name))
    return m


def observe_shapes(exposed: onnx.ModelProto | bytes, feeds: Mapping[str, np.ndarray],
                   names: list[str], folder: str | None = None) -> dict[str, list[int] | None]:
    """Run ``exposed`` (from :func:`exposing_all`) once in onnxruntime on ``feeds`` (graph
    optimisations off, so no tensor is fused away); each name's shape (``None`` when the
    value is not a tensor).  ``folder``: where its external data lies."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    if folder is not None:
        opts.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                      folder)
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    opts.intra_op_num_threads = 1
    data = exposed if isinstance(exposed, bytes) else exposed.SerializeToString()
    sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
    values = sess.run(names, dict(feeds))
    return {n: (list(v.shape) if isinstance(v, np.ndarray) else None)
            for n, v in zip(names, values)}


def ground_truth(path: str | os.PathLike, entry: Mapping, runs: int = RUNS) -> dict:
    """The runtime shape of every main-graph tensor of the model at ``path``.

    Returns ``{"version", "sha256", "inputs": {name: shape}, "runs", "tensors": {name: shape
    or None}, "ops": {name: op type}}``: ``None`` marks a tensor whose shape changed between
    the ``runs`` random inputs (seeds 0, 1, 2...) or that is not a tensor."""
    # external data stays in its files (a 2 GB decoder's proto could not be serialised)
    model = onnx.load(str(path), load_external_data=False)
    names = main_graph_tensors(model)
    exposed = exposing_all(model).SerializeToString()
    folder = str(Path(path).resolve().parent)
    observed = [observe_shapes(exposed, random_feeds(model, entry, seed), names, folder)
                for seed in range(runs)]
    tensors = {}
    for n in names:
        seen = [o[n] for o in observed]
        tensors[n] = seen[0] if all(s == seen[0] and s is not None for s in seen) else None
    producer_op = {}
    for node in model.graph.node:
        for out in node.output:
            if out:
                producer_op.setdefault(out, node.op_type if not node.domain
                                       else f"{node.domain}.{node.op_type}")
    return {"version": TRUTH_VERSION, "sha256": sha256_of(path),
            "inputs": {k: list(v) for k, v in input_shapes(model, entry).items()},
            "runs": runs, "tensors": tensors, "ops": {n: producer_op[n] for n in names}}


def save_truth(truth: dict, path: str | os.PathLike) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(truth, f, indent=0, sort_keys=True)
        f.write("\n")


def load_truth(path: str | os.PathLike) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# -- comparing a shape analysis with the truth ---------------------------------------------

@dataclass
class Comparison:
    """How a shape analysis (name -> shape tuple or None) agrees with the ground truth.

    ``wrong``: tensors called static with a shape that differs from the runtime's (must be
    empty); ``missed``: tensors static at run time that the analysis leaves non-static, with
    their op type; ``static_truth`` / ``static_ours``: counts over main-graph tensors."""
    static_truth: int
    static_ours: int
    wrong: dict[str, tuple] = field(default_factory=dict)      # name -> (ours, truth)
    missed: dict[str, str] = field(default_factory=dict)       # name -> op type
    extra: list[str] = field(default_factory=list)             # static for us, dynamic at run time

    def missed_ops(self) -> dict[str, int]:
        """Op type -> number of missed tensors it produces."""
        out: dict[str, int] = {}
        for op in self.missed.values():
            out[op] = out.get(op, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def as_dict(self) -> dict:
        return {"static_truth": self.static_truth, "static_ours": self.static_ours,
                "wrong": {k: [list(a) if a is not None else None for a in v]
                          for k, v in self.wrong.items()},
                "missed": len(self.missed), "missed_ops": self.missed_ops(),
                "extra": self.extra}


def _static(shape) -> bool:
    return shape is not None and all(isinstance(d, int) and not isinstance(d, bool)
                                     for d in shape)


def compare(truth: Mapping, shape_of: Callable[[str], tuple | None]) -> Comparison:
    """Compare ``shape_of(name)`` (a tuple of ints / names / None, or None for an unknown
    rank) with ``truth["tensors"]`` over every main-graph tensor."""
    tensors, ops = truth["tensors"], truth.get("ops", {})
    static_truth = sum(1 for s in tensors.values() if s is not None)
    cmp = Comparison(static_truth=static_truth, static_ours=0)
    for name, real in tensors.items():
        ours = shape_of(name)
        if _static(ours):
            cmp.static_ours += 1
            if real is None:
                cmp.extra.append(name)
            elif list(ours) != list(real):
                cmp.wrong[name] = (tuple(ours), tuple(real))
        elif real is not None:
            cmp.missed[name] = ops.get(name, "?")
    return cmp


def hetero_shapes(path: str | os.PathLike, entry: Mapping) -> Callable[[str], tuple | None]:
    """hetero-solve's shape of each tensor after loading with the entry's dims (and whole
    shapes, once the library takes them)."""
    import hetero_solve as hs
    mg = hs.load_model(str(path), dims=dict(entry.get("dims") or {}))
    return lambda name: mg.tensor_type(name).shape


# -- open dims, axis by axis -----------------------------------------------------------------

@dataclass
class Axes:
    """hetero-solve's dims with the inputs' dims left open, axis by axis against onnxruntime
    run at several dim settings (:func:`open_axes`): every axis of every main-graph tensor the
    runtime gives a shape is ``static`` (a number, the runtime's at every setting),
    ``symbolic`` (an expression of the dim names, the runtime's value at every setting),
    ``open`` (unknown, or no rank) or ``wrong`` (a number or an expression the runtime
    contradicts at some setting: must be none).  ``open`` and ``wrong`` list ``(tensor,
    axis, ours, the runtime's sizes, op)``; ``open_fixed``: the open axes whose size is the
    same at every setting (a number the analysis could have known)."""
    total: int = 0
    static: int = 0
    symbolic: int = 0
    open: list[tuple] = field(default_factory=list)
    wrong: list[tuple] = field(default_factory=list)

    @property
    def open_fixed(self) -> list[tuple]:
        return [a for a in self.open if len(set(a[3])) == 1]

    def as_dict(self) -> dict:
        return {"axes": self.total, "static": self.static, "symbolic": self.symbolic,
                "open": len(self.open), "open_fixed": len(self.open_fixed),
                "wrong": len(self.wrong)}


def open_axes(model: onnx.ModelProto, settings: list[Mapping[str, int]],
              shape_of: Callable[[str], tuple | None], evaluate: Callable,
              ranges: Mapping | None = None) -> Axes:
    """Compare ``shape_of(name)`` (an analysis with the dims open) with onnxruntime's shapes
    at each of the dim ``settings`` (values for every input dim name); ``evaluate(d, dims)``:
    the value of one of the analysis's dims at a setting (``None`` when unknown)."""
    names = main_graph_tensors(model)
    exposed = exposing_all(model).SerializeToString()
    runs = [observe_shapes(exposed, random_feeds(model, {"dims": dict(s), "ranges": ranges or {}},
                                                 seed=0), names) for s in settings]
    producer = {o: op_name(n) for n in model.graph.node for o in n.output}
    out = Axes()
    for x in names:
        real = [r[x] for r in runs]
        if any(s is None or len(s) != len(real[0]) for s in real):
            continue
        ours = shape_of(x)
        for k in range(len(real[0])):
            out.total += 1
            d = ours[k] if ours is not None and len(ours) == len(real[0]) else None
            sizes = [s[k] for s in real]
            values = [evaluate(d, s) for s in settings]
            row = (x, k, d, sizes, producer.get(x, "?"))
            if any(v is None for v in values):
                out.open.append(row)
            elif values != sizes:
                out.wrong.append(row)
            elif isinstance(d, int):
                out.static += 1
            else:
                out.symbolic += 1
    return out


# -- ops ONNX cannot infer -------------------------------------------------------------------

def op_name(node: onnx.NodeProto) -> str:
    """``Conv``, or ``com.microsoft.DynamicQuantizeLSTM`` outside the default domain."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def has_shape_inference(node: onnx.NodeProto, opsets: Mapping[str, int]) -> bool:
    """Whether the installed onnx has a schema with a shape inference function for the node's
    op at the model's opset (contrib ops such as ``com.microsoft.*`` have none)."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    version = opsets.get(domain, opsets.get("ai.onnx", 1) if domain == "" else 1)
    try:
        schema = onnx.defs.get_schema(node.op_type, version, domain)
    except onnx.defs.SchemaError:
        return False
    return bool(schema.has_type_and_shape_inference_function)


def beyond_inference(model: onnx.ModelProto) -> dict[str, str]:
    """Tensors whose shape ONNX shape inference cannot know whatever the analysis does: the
    outputs of ops without shape inference, and every tensor computed from one of them.
    Name -> the op without inference it depends on."""
    opsets = {o.domain: o.version for o in model.opset_import}
    tainted: dict[str, str] = {}
    for node in model.graph.node:
        if not has_shape_inference(node, opsets):
            cause = op_name(node)
        else:
            cause = next((tainted[i] for i in node.input if i in tainted), None)
        if cause is not None:
            for out in node.output:
                if out:
                    tainted[out] = cause
    return tainted
