"""Quantized (QDQ) models stay quantized (issue 21, docs/problem.md).

On ``corpus/models/resnet-tiny-qdq.onnx`` (onnxruntime's ``quantize_static``, QDQ format,
per-channel int8 weights, of the corpus's float ResNet), on every shipped profile and on the
int8 NPU profile with its memory cut until the NPU needs several parts:

- every initializer of every part file is one of the original's, with its type and bytes: no
  ``DequantizeLinear`` was folded into a float weight;
- no part boundary between a ``DequantizeLinear`` and the op reading it, nor between an op and
  the ``QuantizeLinear`` after it (a shared DQ is copied into the part of each reader);
- the parts, run one after another by onnxruntime with its default optimisations, give the
  original's outputs as onnxruntime runs it with the same settings, bit for bit;
- a part's memory counts the int8 bytes of the weights as the file stores them.

The contraction itself (one problem node per unit) is checked against brute force restricted
to partitions that keep each group together.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import yaml

import hetero_solve as hs
from hetero_solve.contract import contract
from support import brute
from support.generators import random_small
from hetero_solve.export import affinity_map, build_manifest, write_result
from hetero_solve.measures import topological_order
from hetero_solve.model.qdq import find_units
from hetero_solve.problem import Objective
from hetero_solve.solution import evaluate, objective_key
from hetero_solve.user_partition import check_affinity
from hetero_solve.validate import validate

from conftest import ROOT, rule_profiles
from corpus import truth as T

NAME = "resnet-tiny-qdq"
ENTRY = T.load_corpus()[NAME]
MODEL = T.model_file(NAME, ENTRY)
INT8_NPU = ROOT / "rules" / "int8-npu.yaml"


def _small_npu(tmp_path: Path, memory: str) -> Path:
    """The int8 NPU profile with less memory (it then needs several NPU parts)."""
    data = yaml.safe_load(INT8_NPU.read_text())
    data["devices"][0]["memory"] = memory
    data["include"] = [str(ROOT / "constraints" / "onnx-value-inputs.yaml")]
    path = tmp_path / f"int8-npu-{memory}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


PROFILES = [pytest.param(p, id=p.stem) for p in rule_profiles()] + \
    [pytest.param("300KiB", id="int8-npu-300KiB"), pytest.param("200KiB", id="int8-npu-200KiB")]


def _solved(profile, tmp_path: Path) -> tuple[hs.Result, Path, dict]:
    rules = _small_npu(tmp_path, profile) if isinstance(profile, str) else profile
    result = hs.solve(str(MODEL), str(rules), dims=ENTRY["dims"], engine="heuristic")
    out = write_result(result, tmp_path / "out", annotated=False, dots=False)
    return result, out, json.loads((out / "partition.json").read_text())


def _run_parts(out: Path, manifest: dict, feeds: dict) -> dict:
    """The parts in id order, each in onnxruntime with its default session options."""
    env = dict(feeds)
    for part in manifest["partitions"]:
        sess = ort.InferenceSession(str(out / part["file"]), providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        env.update(zip(names, sess.run(names, {i.name: env[i.name] for i in sess.get_inputs()})))
    return {x: env[x] for x in manifest["graph_outputs"]}


@pytest.mark.parametrize("profile", PROFILES)
def test_qdq_parts_stay_quantized_whole_and_exact(profile, tmp_path):
    result, out, manifest = _solved(profile, tmp_path)
    assert validate(result.problem, result.solution) == []
    original = onnx.load(str(MODEL))
    inits = {t.name: t for t in original.graph.initializer}
    nodes = list(original.graph.node)
    if isinstance(profile, str):
        npu = [p for p in manifest["partitions"] if p["device"] == "NPU"]
        assert len(npu) >= 2, "the memory limit should force the NPU to split"

    # weights: every initializer of every part is one of the original's, bytes and type kept
    for part in manifest["partitions"]:
        model = onnx.load(str(out / part["file"]))
        onnx.checker.check_model(model, full_check=True)
        for t in model.graph.initializer:
            assert t.name in inits, f"{part['file']}: {t.name} is not an initializer of the model"
            assert t.data_type == inits[t.name].data_type, t.name
            assert t.SerializeToString() == inits[t.name].SerializeToString(), t.name

    # units: a DQ is in the part of each op reading it; a Q after an op in the op's part
    parts_of: dict[int, set[int]] = {}
    for part in manifest["partitions"]:
        for g in part["nodes"]:
            parts_of.setdefault(g, set()).add(part["id"])
    readers: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        for x in node.input:
            readers.setdefault(x, []).append(i)
    qdq = ("QuantizeLinear", "DequantizeLinear")
    pairs = 0
    for i, node in enumerate(nodes):
        for r in readers.get(node.output[0], []):
            dq_into_op = node.op_type == "DequantizeLinear" and nodes[r].op_type not in qdq
            op_into_q = node.op_type not in qdq and nodes[r].op_type == "QuantizeLinear"
            if dq_into_op:
                assert parts_of[r] <= parts_of[i], (node.name, nodes[r].name)
                pairs += 1
            elif op_into_q:
                assert parts_of[r] == parts_of[i], (node.name, nodes[r].name)
                pairs += 1
    assert pairs >= 40

    # outputs: as onnxruntime runs the original, default optimisations on both sides
    feeds = T.random_feeds(original, ENTRY, seed=0)
    want = dict(zip([o.name for o in original.graph.output],
                    ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
                    .run(None, feeds)))
    got = _run_parts(out, manifest, feeds)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_memory_counts_the_int8_bytes_the_file_stores(tmp_path):
    """One part on the CPU: its memory is the initializers' bytes as stored (int8 weights,
    int32 biases, float scales) plus the input and the output, nothing at float size."""
    result, out, manifest = _solved(ROOT / "rules" / "gpu-cpu.yaml", tmp_path)
    assert len(manifest["partitions"]) == 1
    original = onnx.load(str(MODEL))
    stored = sum(onnx.numpy_helper.to_array(t).nbytes for t in original.graph.initializer)
    int8 = sum(onnx.numpy_helper.to_array(t).nbytes for t in original.graph.initializer
               if t.data_type == onnx.TensorProto.INT8)
    assert int8 > 100_000     # the conv weights
    io = 1 * 3 * 224 * 224 * 4 + 1 * 128 * 1 * 1 * 4
    assert manifest["partitions"][0]["memory"] == stored + io
    # a float copy of the weights (what folding the DQ nodes made) would cost 3 bytes more each
    assert manifest["partitions"][0]["memory"] < stored + io + 3 * int8


def test_the_int8_npu_takes_quantized_units_only():
    q = hs.solve(str(MODEL), str(INT8_NPU), dims=ENTRY["dims"], engine="heuristic")
    assert q.metrics.fallback == 0 and q.metrics.partitions == 1
    assert {q.problem.devices[d].name for d in q.solution.part_device} == {"NPU"}
    float_model = T.model_file("resnet-tiny-legacy")
    f = hs.solve(str(float_model), str(INT8_NPU), dims={"batch": 1}, engine="heuristic")
    assert {f.problem.devices[d].name for d in f.solution.part_device} == {"CPU"}
    conv = f.problem.op_types.index("Conv")
    assert "only in a quantized unit" in f.problem.why_not(conv, 0)


def test_quantized_false_refuses_the_quantized_form(tmp_path):
    rules = tmp_path / "float-only.yaml"
    rules.write_text("version: 1\ndevices:\n"
                     "  - name: ACC\n    ops:\n      supported: [Conv, QuantizeLinear, DequantizeLinear]\n"
                     "      when: {Conv: {quantized: false}}\n"
                     "  - name: CPU\n    ops: {supported: all}\n")
    r = hs.solve(str(MODEL), str(rules), dims=ENTRY["dims"], engine="heuristic")
    conv = r.problem.op_types.index("Conv")
    assert r.problem.allowed[conv] == (1,)
    assert "outside a quantized unit" in r.problem.why_not(conv, 0)


def test_units_of_the_quantize_static_model():
    mg = hs.load_model(str(MODEL), dims=ENTRY["dims"])
    units = find_units(mg)
    ops = mg.op_types
    assert not any(ops[i] == "DequantizeLinear" for i in mg.folded)
    # every Conv, Add and pool is the centre of a quantized unit
    centres = {ops[a] for a in units.quantized}
    assert centres == {"Conv", "Add", "MaxPool", "GlobalAveragePool"}
    assert len(units.quantized) == sum(ops.count(o) for o in centres)
    # the activation DQs read by a residual Add and a Conv are shared
    assert units.shared and all(ops[i] == "DequantizeLinear" for i in units.shared)
    # the problem has one node per unit, in a topological order
    p = hs.compile_problem(mg, hs.load_rules(str(ROOT / "rules" / "gpu-cpu.yaml")))
    assert p.n == len(mg.placeable()) - sum(len(g) - 1 for g in units.groups) + \
        sum(sum(1 for g in units.groups if i in g) - 1 for i in units.shared)
    assert topological_order(p.succ, p.pred) == list(range(p.n))


def _groups(p, rng) -> list[list[int]]:
    """Random disjoint groups ``[u, v]`` on an edge ``u -> v`` that no other path joins."""
    used, groups = set(), []
    for u in rng.sample(range(p.n), p.n):
        for v in p.succ[u]:
            if u in used or v in used:
                continue
            seen, stack = set(), [w for w in p.succ[u] if w != v]
            while stack:
                w = stack.pop()
                if w not in seen:
                    seen.add(w)
                    stack.extend(p.succ[w])
            if v not in seen:
                groups.append([v, u] if rng.random() < 0.5 else [u, v])
                used.update((u, v))
    return groups


@pytest.mark.parametrize("seed", range(60))
def test_contraction_equals_brute_force_keeping_groups_together(seed, monkeypatch):
    """The contracted problem's optimum is the optimum of the original over the partitions
    that keep each group in one part (fallback left out: a unit counts once)."""
    p = random_small(seed)
    p.objective = Objective(order=("partitions", "transfer"))
    groups = _groups(p, random.Random(seed))
    if not groups:
        pytest.skip("no contractible edge")
    try:
        c, _ = contract(p, groups)
    except hs.InfeasibleError:
        c = None
    best_c = brute.brute_force(c) if c is not None else None
    whole = brute.set_partitions

    def together(n):
        for a in whole(n):
            if all(len({a[v] for v in g}) == 1 for g in groups):
                yield a

    monkeypatch.setattr(brute, "set_partitions", together)
    best_p = brute.brute_force(p)
    if best_p is None:
        assert best_c is None
        return
    assert best_c is not None
    assert objective_key(c, best_c) == objective_key(p, best_p)
    # the contracted answer, expanded, is valid for the original
    unit_of = {}
    for u in range(c.n):
        for g in c.graph_nodes(u):
            unit_of[g] = u
    expanded = type(best_c)([best_c.part_of[unit_of[p.graph_index[v]]] for v in range(p.n)],
                            list(best_c.part_device), list(best_c.part_instance))
    assert validate(p, expanded, require_order=False) == []
    assert evaluate(p, expanded).partitions == evaluate(c, best_c).partitions


def test_check_of_a_qdq_answer_judges_it_valid_and_a_split_unit_is_refused(tmp_path):
    small = _small_npu(tmp_path, "300KiB")
    result, out, manifest = _solved("300KiB", tmp_path)
    report = check_affinity(str(MODEL), str(small), str(out / "partition.json"),
                               dims=ENTRY["dims"], optimum=False)
    assert report.valid and report.partitions == len(manifest["partitions"])
    affinity = json.loads((out / "affinity.json").read_text())
    mg = hs.load_model(str(MODEL), dims=ENTRY["dims"])
    assert set(affinity) == {mg.names[i] for i in mg.placeable()}
    weight_dq = next(n for n in affinity if n.endswith("Conv_114_DequantizeLinear"))
    affinity[weight_dq] = "CPU" if affinity[weight_dq] == "NPU" else "NPU"
    with pytest.raises(hs.HeteroSolveError, match="quantized unit"):
        check_affinity(str(MODEL), str(small), affinity, dims=ENTRY["dims"], optimum=False)


# -- small items of issue 21 --------------------------------------------------------------------

def test_external_data_files_are_as_readable_as_their_model(tmp_path, monkeypatch):
    from hetero_solve.export import writer
    monkeypatch.setattr(writer, "EXTERNAL_DATA_BYTES", 2000)
    old = os.umask(0o022)
    try:
        result, out, manifest = _solved(ROOT / "rules" / "int8-npu.yaml", tmp_path)
    finally:
        os.umask(old)
    data = [f for f in manifest["files"] if f.endswith(".onnx.data")]
    assert data
    for f in data:
        assert (out / f).stat().st_mode == (out / f[:-len(".data")]).stat().st_mode


def test_partition_json_saves_the_input_shapes(tmp_path):
    _, _, manifest = _solved(INT8_NPU, tmp_path)
    assert manifest["input_shapes"] == {"pixel_values": [1, 3, 224, 224]}
    r = hs.solve(str(ROOT / "examples" / "transformer_encoder.onnx"),
                 str(ROOT / "rules" / "gpu-cpu.yaml"), dims={"batch": 2})
    assert build_manifest(r)["input_shapes"] == {}      # seq has no value: not fully known
    r = hs.solve(str(ROOT / "examples" / "transformer_encoder.onnx"),
                 str(ROOT / "rules" / "gpu-cpu.yaml"), shapes={"input_ids": [2, 7]})
    assert build_manifest(r)["input_shapes"] == {"input_ids": [2, 7]}


def test_an_op_of_another_domain_is_suggested_with_its_domain(tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\ndevices:\n  - name: NPU\n"
                     "    ops: {supported: [DynamicQuantizeLSTM]}\n")
    with pytest.raises(hs.HeteroSolveError) as e:
        hs.load_rules(str(rules))
    assert "did you mean com.microsoft.DynamicQuantizeLSTM" in str(e.value)
    rules.write_text("version: 1\ndevices:\n  - name: NPU\n    ops: {supported: [conv]}\n")
    with pytest.raises(hs.HeteroSolveError, match=r"did you mean Conv\?"):
        hs.load_rules(str(rules))


def _cli(*args):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "hetero_solve", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_check_and_study_take_whole_input_shapes(tmp_path):
    """``--shape`` reaches the model on ``check`` and ``study`` as on solve: the static-shape
    NPU takes the encoder only once ``seq`` has a value, here through the whole shape."""
    model = ROOT / "examples" / "transformer_encoder.onnx"
    rules = ROOT / "rules" / "npu-static.yaml"
    shaped = hs.solve(str(model), str(rules), shapes={"input_ids": [1, 16]}, engine="heuristic")
    plain = hs.solve(str(model), str(rules), engine="heuristic")
    assert shaped.metrics.partitions > plain.metrics.partitions == 1
    (tmp_path / "map.json").write_text(json.dumps(affinity_map(shaped.problem, shaped.solution)))
    with_shape = _cli("check", model, rules, "--affinity", tmp_path / "map.json", "--no-export",
                      "--engine", "heuristic", "--shape", "input_ids=1,16", "--json")
    assert with_shape.returncode == 0, with_shape.stderr
    assert json.loads(with_shape.stdout)["valid"]
    without = _cli("check", model, rules, "--affinity", tmp_path / "map.json", "--no-export",
                   "--engine", "heuristic", "--json")
    # without the shape the Shape chains do not fold: nodes the map does not name are placed
    assert without.returncode == 2 and "missing from the map" in without.stderr

    parts = {}
    for label, extra in (("shape", ["--shape", "input_ids=1,16"]), ("none", [])):
        out = tmp_path / f"study-{label}"
        r = _cli("study", model, "--rules", rules, "-a", "heuristic", "--no-plots", "-q",
                 "-o", out, *extra)
        assert r.returncode == 0, r.stderr
        import csv
        rows = list(csv.DictReader((out / "results.csv").open()))
        parts[label] = (int(rows[0]["parts"]), int(rows[0]["fallback"]))
    assert parts["shape"] == (shaped.metrics.partitions, shaped.metrics.fallback)
    assert parts["none"] == (plain.metrics.partitions, plain.metrics.fallback)
