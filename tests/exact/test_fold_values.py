"""The T5 pattern of issue 24, by hand: a foldable shape chain read both as an ``Expand``'s
shape and as data, on a memory-limited card that enforces value inputs.

``s = Shape(W)`` and ``E = Expand(b, s)`` fold; ``E`` (4 KiB) is read as data by an ``Add``,
``s`` as data by another ``Add``, and ``W`` (4 KiB) by a ``Mul``.  Folded, no split of the
three fits the card (2 x 8,800 bytes): ``W``, ``E``, the 4 KiB activation between them and
the 4 KiB output cannot share an instance two at a time; placing ``Shape`` and
``Expand`` saves ``E`` but puts a value input (``Expand``'s shape) next to the node making it,
which docs/problem.md forbids on this card unless they are in different parts.  The answer must
be valid, ``check`` of the written ``partition.json`` must accept it, and the parts must
reproduce the model."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import hetero_solve as hs
from hetero_solve.validate import validate

RULES = """version: 1
include: [{constraints}]
devices:
  - name: CARD
    memory: {memory}
    instances: 2
    value_inputs: enforce
    ops: {{supported: all}}
  - name: CPU
    value_inputs: ignore
    ops: {{supported: all}}
"""


def t5_pattern(path):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 64)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal((1, 64)).astype(np.float32), "b")
    nodes = [helper.make_node("Shape", ["W"], ["s"], name="shape"),
             helper.make_node("Expand", ["b", "s"], ["E"], name="expand"),
             helper.make_node("Add", ["x", "E"], ["y"], name="add_e"),
             helper.make_node("Add", ["ids", "s"], ["z"], name="add_s"),
             helper.make_node("Mul", ["y", "W"], ["out"], name="mul")]
    graph = helper.make_graph(
        nodes, "t5_pattern",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [16, 64]),
         helper.make_tensor_value_info("z", TensorProto.INT64, [2])],
        initializer=[w, b])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def rules_file(tmp_path, memory=8800):
    from pathlib import Path
    constraints = Path(hs.__file__).resolve().parent.parent / "constraints" / "onnx-value-inputs.yaml"
    path = tmp_path / "card.yaml"
    path.write_text(RULES.format(constraints=constraints, memory=memory))
    return str(path)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "hetero_solve", *args], capture_output=True,
                          text=True, timeout=300)


def test_placing_the_expand_alone_fits_one_part_and_check_accepts_the_written_answer(tmp_path):
    """Issue 37 item 1: every fold choice is searched.  Folded, something must leave the card;
    ``Shape`` and ``Expand`` both placed need two parts (the value rule); ``Expand`` placed
    alone, reading the folded shape as a constant, saves ``E`` with no value edge: one part,
    nothing on the CPU, proven over every fold choice."""
    model = t5_pattern(str(tmp_path / "m.onnx"))
    rules = rules_file(tmp_path)
    res = hs.solve(model, rules, work_limit=2.5)
    assert validate(res.problem, res.solution) == []
    assert (res.metrics.fallback, res.metrics.partitions) == (0, 1)
    assert res.solution.status == "optimal"
    assert hs.solve(model, rules, engine="heuristic").metrics.fallback > 0
    assert "expand" in res.problem.names and "shape" not in res.problem.names
    objectives = res.solution.stats["folds"]["objectives"]
    assert [1, 2, 4096] in objectives and [0, 2, 16] in objectives   # folded; both placed

    out = tmp_path / "out"
    run = cli("solve", model, rules, "-o", str(out), "-q", "--work-limit", "2.5")
    assert run.returncode == 0, run.stderr
    manifest = json.loads((out / "partition.json").read_text())
    names = onnx.load(model).graph.node
    assert [names[g].name for g in manifest["unfolded"]] == ["expand"]
    assert [names[g].name for g in manifest["folded"]] == ["shape"]
    checked = cli("check", model, rules, "--affinity", str(out / "partition.json"),
                  "--no-export", "-e", "heuristic", "--json", "-q")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    assert report["valid"] and len(report["partitions"]) == manifest["objective"]["partitions"]

    x = np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)
    rep = hs.verify(model, out, inputs={"x": x, "ids": np.array([1, 2], dtype=np.int64)})
    assert rep.ok


def test_check_places_the_foldable_nodes_a_map_names(tmp_path):
    """The same map judged with the chain placed and with it folded: folded, the card's part
    holds ``E`` and overflows; placed in one part with ``Expand``, ``Shape`` breaks the value
    rule; placing ``Shape`` without ``Expand`` (which reads it) is refused with one line."""
    model = t5_pattern(str(tmp_path / "m.onnx"))
    rules = rules_file(tmp_path)
    data = ["add_e", "add_s", "mul"]
    folded = hs.check_affinity(model, rules, {n: "CARD" for n in data}, optimum=False)
    assert [v.kind for v in folded.violations] == ["memory"]
    placed = hs.check_affinity(model, rules, {n: 0 for n in data + ["shape", "expand"]},
                               optimum=False)
    assert "value" in [v.kind for v in placed.violations]
    assert placed.problem.n == 5
    split = hs.check_affinity(model, rules, {**{n: 1 for n in data + ["expand"]}, "shape": 0},
                              optimum=False)
    assert split.valid, [str(v) for v in split.violations]
    half = cli("check", model, rules, "--affinity", _write(tmp_path, {n: 0 for n in data + ["shape"]}),
               "--no-export", "-q")
    assert half.returncode == 2 and "'expand'" in half.stderr and "Traceback" not in half.stderr


def _write(tmp_path, mapping):
    path = tmp_path / "map.json"
    path.write_text(json.dumps(mapping))
    return str(path)
