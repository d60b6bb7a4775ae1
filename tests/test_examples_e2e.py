"""For every example model and every profile in rules/: the validator accepts the answer, every
sub-model passes onnx.checker, and running the parts in id order with onnxruntime reproduces
the original outputs (max abs difference at most 1e-5)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import hetero_solve as hs
from hetero_solve.export import write_result
from hetero_solve.run.onnxruntime import run_original
from hetero_solve.run.session import run_partitioned

from conftest import EXAMPLE_DIMS, example_models, random_feeds, rule_profiles

CASES = [(m, r) for m in example_models() for r in rule_profiles()]


@pytest.mark.parametrize("model,rules", CASES, ids=[f"{m.stem}-{r.stem}" for m, r in CASES])
def test_example_partition_is_valid_and_reproduces_outputs(model, rules, tmp_path):
    dims = EXAMPLE_DIMS[model.stem]
    result = hs.solve(model, rules, dims=dims, work_limit=2.5)
    assert hs.validate(result.problem, result.solution) == []
    out = write_result(result, tmp_path / "out")

    manifest = json.loads((out / "partition.json").read_text())
    placed = [g for p in manifest["partitions"] for g in p["nodes"]]
    everything = placed + manifest["folded"] + manifest["constant_nodes"]
    assert sorted(everything) == list(range(len(onnx.load(str(model)).graph.node)))
    assert len(placed) == len(set(placed))
    assert all(a < b for a, b in manifest["edges"])
    for part in manifest["partitions"]:
        onnx.checker.check_model(str(out / part["file"]), full_check=True)

    feeds = random_feeds(model, {**result.rules.dims, **dims})
    got = run_partitioned(out, feeds).outputs
    want = run_original(model, feeds)
    assert set(got) == set(want)
    for name in want:
        assert got[name].shape == want[name].shape
        np.testing.assert_allclose(got[name], want[name], atol=1e-5, rtol=0)


def test_outputs_of_the_export_are_all_there(tmp_path):
    result = hs.solve(example_models()[0], rule_profiles()[0], engine="heuristic",
                      dims=EXAMPLE_DIMS[example_models()[0].stem])
    out = write_result(result, tmp_path / "o")
    names = {p.name for p in out.iterdir()}
    assert {"partition.json", "affinity.json", "model.annotated.onnx", "affinity.dot",
            "partitions.dot"} <= names
    annotated = onnx.load(str(out / "model.annotated.onnx"))
    affinity = json.loads((out / "affinity.json").read_text())
    for node in annotated.graph.node:
        meta = {e.key: e.value for e in node.metadata_props}
        if node.name in affinity:
            assert meta["affinity"] == affinity[node.name]
            assert int(meta["partition"]) in range(result.metrics.partitions)
    assert (out / "partitions.dot").read_text().startswith("digraph")
