"""onnxruntime's profiler (``SessionOptions.enable_profiling``) read back to ONNX nodes.

The profile is a Chrome trace: one ``Session``/``model_run`` event per run and, inside it,
one ``Node`` event ``<node>_kernel_time`` per kernel (``dur`` in microseconds, ``args.op_name``,
``args.provider``).  Its node names are those of the **optimised** graph: a fused
``Conv + Relu`` keeps one name, the NCHWc layout pass renames a ``Conv`` after its output
(``.../Relu_output_0_nchwc``), a QDQ unit becomes a ``QLinearConv`` named ``..._token_N``.
:func:`regions` maps each optimised node back to the ONNX nodes it stands for through the
optimised graph (onnxruntime writes it with ``optimized_model_filepath``; an imported trace
is matched against the graph this onnxruntime makes of the same model):

- each optimised tensor is resolved to an original one: the same name, the name without
  onnxruntime's prefixes and suffixes (``InsertedPrecisionFreeCast_``, ``_nchwc``,
  ``_token_N``, ``/...Fusion/``), the input of a layout node or cast it added
  (``ReorderInput``, ``ReorderOutput``, ``Transpose``, ``Cast``), or the output of the
  original node or tensor its producer is named after;
- a node's members are the original nodes between its resolved inputs and outputs (walking
  back from the producers of its outputs, stopping at its inputs, at constants and at nodes
  an earlier kernel took; only the producers when the walk escapes to a graph input); a
  kernel named after its first node (NCHWc names a ``Conv`` after its output) also takes the
  chain of single readers fused after it (the residual ``Add``, the ``Relu``);
- the nodes of an ``If`` branch onnxruntime inlined (``_if_then_branch_...``) belong to the
  ``If``; a node onnxruntime added (a reorder, a cast, the unnamed nodes of an inlined
  function, which its trace calls ``<Op>_<index>``) to the kernel next to it.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import onnx

from ..readers import read_json
from ..run.backend import RunOptions
from ..run.common import ort_line
from ..run.onnxruntime import session_options
from .attribute import RuntimeNode, medians
from ..times.profile import ProfileError

#: Ops onnxruntime inserts to change a tensor's layout or precision (their output is their
#: input, moved or cast).
LAYOUT_OPS = frozenset({"ReorderInput", "ReorderOutput", "Transpose", "Cast"})
#: What onnxruntime adds to the names it gives tensors and nodes it rewrites.
_SUFFIX = re.compile(r"(?:_nchwc|_token_\d+|_fused|/\w*Fusion/?)+$")
_PREFIX = re.compile(r"^(?:InsertedPrecisionFreeCast_)+")
#: What onnxruntime puts before the nodes of an ``If`` branch it inlines (a constant condition).
_INLINED = re.compile(r"^_if_(?:then|else)_branch(?:_token_\d+)?_")
_UNNAMED = re.compile(r"[A-Za-z]\w*_\d+")
#: A fused node's members are searched at most this far back.
MAX_REGION = 256


def optimized_graph(model: str, providers: Sequence, optimization: str = "all"
                    ) -> onnx.ModelProto:
    """The graph onnxruntime runs for ``model`` at ``optimization`` (graph structure only)."""
    import onnxruntime as ort
    with tempfile.TemporaryDirectory(prefix="hetero-solve-opt-") as tmp:
        opts = session_options(RunOptions(optimization=optimization))
        path = os.path.join(tmp, "optimized.onnx")
        opts.optimized_model_filepath = path
        opts.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                      "weights.bin")
        try:
            ort.InferenceSession(model, opts, providers=list(providers))
        except Exception as e:   # noqa: BLE001
            raise ProfileError(model, f"onnxruntime cannot load it: {ort_line(e)}") from None
        return onnx.load(path, load_external_data=False)


def _base(name: str) -> str:
    return _SUFFIX.sub("", _PREFIX.sub("", name))


def regions(mg, opt: onnx.ModelProto) -> dict[str, tuple[list[int], bool]]:
    """Optimised node name -> (the main-graph nodes of ``mg`` it stands for, whether they
    were found through a neighbour) (module doc).  A node onnxruntime added (a layout
    reorder, a cast, the inside of an inlined function) stands for the nodes of the first
    kernel after it that has some (before it when none follows: a ``ReorderOutput``)."""
    node_of = {name: i for i, name in enumerate(mg.names)}
    known = set(mg.producer) | set(mg.graph_inputs) | set(mg.initializers) | \
        set(mg.constant_tensors)
    readers: dict[str, list[int]] = {}
    for v in range(len(mg.names)):
        for x in mg.inputs[v]:
            if x:
                readers.setdefault(x, []).append(v)
    # original nodes some optimised node is named after (by node or output tensor name)
    named_nodes = set()
    for n in opt.graph.node:
        for key in (n.name, _base(n.name)):
            if key in node_of:
                named_nodes.add(node_of[key])
            elif key in mg.producer:
                named_nodes.add(mg.producer[key])
    inner = _subgraph_owners(mg)
    alias: dict[str, str] = {}
    claimed: set[int] = set()

    def resolve(t: str) -> str | None:
        if t in known:
            return t
        if t in alias:
            return alias[t]
        base = _base(t)
        return base if base in known else None

    out: dict[str, tuple[list[int], bool]] = {}
    added: list[onnx.NodeProto] = []
    for n in opt.graph.node:
        ins = [resolve(x) for x in n.input if x]
        base = _base(n.name)
        named = node_of.get(n.name, node_of.get(base))
        if named is None and n.op_type in LAYOUT_OPS:
            for o in n.output:
                if resolve(o) is None and ins and ins[0] is not None:
                    alias[o] = ins[0]
            added.append(n)
            continue
        outs, guessed = [], {}
        for k, o in enumerate(n.output):
            r = resolve(o) if o else None
            if r is None and o:
                if base in known and k == 0:
                    r = base
                elif named is not None and k < len(mg.outputs[named]):
                    r = mg.outputs[named][k] or None
                if r is not None:
                    guessed[o] = r
            if r is not None:
                outs.append(r)
        producers = {mg.producer[o] for o in outs if o in mg.producer}
        if not producers and named is not None:
            producers = {named}
        if not producers:
            keys = [n.name, *n.output]
            keys += [_base(_INLINED.sub("", k)) for k in keys]
            owners = {inner[k] for k in keys if k in inner}
            if owners:        # a node of an If/Loop body onnxruntime inlined: the If's time
                _add(out, n.name, owners, False)
                claimed.update(owners)
            else:
                added.append(n)
            continue
        stops = {x for x in ins if x}
        region = _between(mg, producers, stops, claimed)
        if len(guessed) == 1 and len(producers) == 1:
            # named after its first node: the ops fused after it (Add, Relu) follow it
            tip = _fused_after(mg, next(iter(producers)), readers, stops,
                               named_nodes | claimed, region)
            guessed = {o: mg.outputs[tip][0] for o in guessed}
        alias.update(guessed)
        claimed.update(region)
        _add(out, n.name, region, False)
    for n in added:
        _add(out, n.name, _neighbour(opt, n, out), True)
    return out


def _add(out: dict, name: str, members, near: bool) -> None:
    """Record ``members`` for the optimised node ``name``; nodes sharing a name (the unnamed
    nodes of an inlined function: the trace sums their kernels under one name) share all."""
    if name in out:
        members = set(members) | set(out[name][0])
        near = near and out[name][1]
    out[name] = (sorted(members), near)


def _subgraph_owners(mg) -> dict[str, int]:
    """Names of the nodes and tensors inside each main-graph node's subgraphs (an ``If``'s
    branches, a ``Loop``'s body) -> that node."""
    out: dict[str, int] = {}
    for v, node in enumerate(mg.model.graph.node):
        if not mg.has_subgraph[v]:
            continue
        todo = [g for a in node.attribute for g in ([a.g] if a.HasField("g") else [])
                + list(a.graphs)]
        while todo:
            graph = todo.pop()
            for inner in graph.node:
                for key in (inner.name, *inner.output):
                    if key:
                        out.setdefault(key, v)
                todo.extend(g for a in inner.attribute
                            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs))
    return out


def _fused_after(mg, v: int, readers: dict[str, list[int]], stops: set[str], taken: set[int],
                 region: set[int]) -> int:
    """Grow ``region`` from ``v`` along the chain of its single readers that no other kernel
    is named after and whose other inputs the kernel reads (a ``Conv`` fused with the
    residual ``Add`` and the ``Relu`` after it); the last node of the chain."""
    tip = v
    while len(mg.outputs[tip]) >= 1 and mg.outputs[tip][0]:
        nxt = readers.get(mg.outputs[tip][0], [])
        if len(nxt) != 1 or nxt[0] in taken or nxt[0] in region:
            break
        s = nxt[0]
        made = {o for u in region for o in mg.outputs[u]}
        if not all(not x or x in stops or x in made or x in mg.constant_tensors
                   or x in mg.initializers for x in mg.inputs[s]):
            break
        region.add(s)
        tip = s
    return tip


def _neighbour(opt: onnx.ModelProto, node: onnx.NodeProto,
               found: dict[str, tuple[list[int], bool]]) -> list[int]:
    """The members of the first kernel after ``node`` that has some (breadth first), else of
    the first before it."""
    readers: dict[str, list[onnx.NodeProto]] = {}
    makers: dict[str, onnx.NodeProto] = {}
    for n in opt.graph.node:
        for x in n.input:
            readers.setdefault(x, []).append(n)
        for o in n.output:
            makers[o] = n
    first = ["before", "after"] if node.op_type == "ReorderOutput" else ["after", "before"]
    for way in first:
        seen = {node.name}
        todo = [node]
        while todo:
            nxt = []
            for n in todo:
                near = ([r for o in n.output for r in readers.get(o, [])] if way == "after"
                        else [makers[x] for x in n.input if x in makers])
                for m in near:
                    if m.name in seen:
                        continue
                    seen.add(m.name)
                    members = found.get(m.name, ([], True))[0]
                    if members and not found[m.name][1]:
                        return members
                    nxt.append(m)
            todo = nxt
    return []


def _between(mg, producers: set[int], stops: set[str], claimed: set[int]) -> set[int]:
    """The nodes from ``producers`` back to the tensors ``stops``, constants and what earlier
    kernels ``claimed``; just the producers when the walk reaches a graph input or grows past
    :data:`MAX_REGION`."""
    region = set(producers)
    todo = list(producers)
    while todo:
        v = todo.pop()
        for x in mg.inputs[v]:
            if not x or x in stops or x in mg.constant_tensors or x in mg.initializers:
                continue
            u = mg.producer.get(x)
            if u is not None and u in claimed:
                continue
            if u is None or len(region) >= MAX_REGION:
                return set(producers)
            if u not in region:
                region.add(u)
                todo.append(u)
    return region


def trace_runs(events: Any, path: str = "trace") -> list[dict[str, tuple[str, float]]]:
    """Per run of an onnxruntime trace: node name -> (op type, seconds), nested kernels left
    out (module doc).  A trace without ``model_run`` events is one run."""
    if isinstance(events, dict):
        events = events.get("traceEvents")
    if not isinstance(events, list):
        raise ProfileError(path, "not an onnxruntime profile: expected a JSON list of trace "
                                 "events (SessionOptions.enable_profiling writes one)")
    nodes, runs = [], []
    for e in events:
        if not isinstance(e, dict):
            continue
        try:
            ts, dur = float(e.get("ts", 0)), float(e.get("dur", 0))
        except (TypeError, ValueError):
            raise ProfileError(path, f"event {str(e.get('name'))[:80]!r}: ts and dur must be "
                                     "numbers") from None
        if e.get("cat") == "Session" and e.get("name") == "model_run":
            runs.append((ts, ts + dur))
        elif e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"):
            if dur < 0:
                raise ProfileError(path, f"event {e['name'][:80]!r}: negative dur {dur}")
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            nodes.append((ts, ts + dur, e.get("tid"), e["name"][:-len("_kernel_time")],
                          str(args.get("op_name", ""))))
    if not nodes:
        raise ProfileError(path, "no Node events (\"cat\": \"Node\", \"name\": "
                                 "\"..._kernel_time\"): not an onnxruntime profile of a run")
    nodes.sort(key=lambda n: (n[0], -n[1]))
    runs.sort()
    out: list[dict[str, tuple[str, float]]] = [{} for _ in runs] or [{}]
    open_until: dict[Any, float] = {}
    k = 0
    for start, end, tid, name, op in nodes:
        if start < open_until.get(tid, float("-inf")):
            continue                      # inside an If/Loop kernel: counted there
        open_until[tid] = end
        while runs and k + 1 < len(runs) and start >= runs[k + 1][0]:
            k += 1
        if runs and not (runs[k][0] <= start <= runs[k][1]):
            continue                      # a kernel outside every run (initialisation)
        op0, s = out[k].get(name, (op, 0.0))
        out[k][name] = (op0, s + (end - start) * 1e-6)
    return [r for r in out if r]


def records(mg, opt: onnx.ModelProto,
            runs: Sequence[dict[str, tuple[str, float]]]) -> list[RuntimeNode]:
    """One :class:`RuntimeNode` per optimised node, its median time over ``runs``."""
    members = regions(mg, opt)
    node_of = {name: i for i, name in enumerate(mg.names)}
    ops = {name: op for run in runs for name, (op, _) in run.items()}
    times = medians({name: s for name, (_, s) in run.items()} for run in runs)
    out = []
    for name, seconds in times.items():
        found, near = members.get(name, (None, False))
        if found is None and "" in members and _UNNAMED.fullmatch(name):
            found, near = members[""]          # onnxruntime names unnamed nodes <Op>_<index>
        if found is None:      # a name the optimised graph does not have (another build)
            base = _base(name)
            found = [node_of[base]] if base in node_of else \
                [mg.producer[base]] if base in mg.producer else []
        out.append(RuntimeNode(name, ops.get(name, ""), seconds, list(found), near))
    return out


def import_trace(mg, path: str, model: str, providers: Sequence = ("CPUExecutionProvider",),
                 optimization: str = "all") -> tuple[list[RuntimeNode], float | None, int]:
    """An onnxruntime profile file of ``model``: its records, the median run time (from its
    ``model_run`` events; ``None`` without) and the number of runs."""
    data = read_json(path, lambda why: ProfileError(path, why))
    runs = trace_runs(data, path)
    events = data.get("traceEvents") if isinstance(data, dict) else data
    walls = [float(e["dur"]) * 1e-6 for e in events if isinstance(e, dict)
             and e.get("cat") == "Session" and e.get("name") == "model_run"]
    opt = optimized_graph(model, list(providers), optimization)
    return records(mg, opt, runs), (statistics.median(walls) if walls else None), len(runs)


# -- measuring ---------------------------------------------------------------------------------

def measure(mg, model: str, providers: Sequence, feeds: Mapping[str, Any], *, warmup: int,
            repeats: int, options: RunOptions | None = None,
            tick: Callable[[], None] = lambda: None) -> list[RuntimeNode]:
    """Profile ``model`` on ``providers`` with ``options`` (the execution settings):
    ``warmup`` runs, then ``repeats`` runs whose kernel times give each record its median.
    ``tick`` is called after each run."""
    import onnxruntime as ort
    options = options or RunOptions()
    with tempfile.TemporaryDirectory(prefix="hetero-solve-profile-") as tmp:
        opts = session_options(options, profile_prefix=os.path.join(tmp, "ort"))
        opts.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
        opts.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                      "weights.bin")
        try:
            sess = ort.InferenceSession(model, opts, providers=list(providers))
            names = [i.name for i in sess.get_inputs()]
            for _ in range(warmup + repeats):
                sess.run(None, {x: feeds[x] for x in names})
                tick()
        except Exception as e:   # noqa: BLE001
            raise ProfileError(model, f"onnxruntime failed: {ort_line(e)}") from None
        trace = Path(sess.end_profiling())
        events = json.loads(trace.read_text())
        opt = onnx.load(os.path.join(tmp, "optimized.onnx"), load_external_data=False)
    return records(mg, opt, trace_runs(events, str(trace))[warmup:])


def profiler_floor(providers: Sequence, options: RunOptions | None = None,
                   runs: int = 50) -> float:
    """What onnxruntime's profiler adds to each kernel's time: the median kernel time of a
    one-node part (an ``Identity`` of one float, whose own work is nil), profiled with
    ``options``."""
    import onnxruntime as ort
    with tempfile.TemporaryDirectory(prefix="hetero-solve-floor-") as tmp:
        opts = session_options(options or RunOptions(),
                               profile_prefix=os.path.join(tmp, "floor"))
        sess = ort.InferenceSession(tiny_model().SerializeToString(), opts,
                                    providers=list(providers))
        x = {"x": np.ones(1, np.float32)}
        for _ in range(runs):
            sess.run(None, x)
        events = json.loads(Path(sess.end_profiling()).read_text())
    times = [s for run in trace_runs(events) for _, s in run.values()]
    return statistics.median(times) if times else 0.0


def tiny_model() -> onnx.ModelProto:
    """A one-node model (``Identity`` of a float of shape [1]): what a part costs to call."""
    from onnx import TensorProto, helper
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="identity")],
                              "part", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model
