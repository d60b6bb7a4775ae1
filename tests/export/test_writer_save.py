"""The writer serializes each model once and writes the bytes itself: the files are the bytes
``onnx.save_model`` writes, and a model over the external-data threshold still goes to
``<file>.data`` (checker passes, the parts reproduce the original outputs)."""

from __future__ import annotations

import json

import onnx

from conftest import EXAMPLES, RULES

import hetero_solve as hs
from hetero_solve.export import writer
from hetero_solve.export import write_result
from hetero_solve.export.annotated import build_annotated_model
from hetero_solve.export.submodels import build_part_model
from hetero_solve.run.verify import verify

MODEL, PROFILE, DIMS = EXAMPLES / "transformer_encoder.onnx", RULES / "npu-static.yaml", {"seq": 16}


def test_files_are_the_bytes_onnx_save_model_writes(tmp_path):
    r = hs.solve(MODEL, PROFILE, dims=DIMS, work_limit=2.5)
    out = write_result(r, tmp_path / "out")
    manifest = json.loads((out / "partition.json").read_text())
    nodes_of = r.solution.parts()
    assert len(manifest["partitions"]) > 1
    for part in manifest["partitions"]:
        model = build_part_model(r.model_graph, r.problem, r.solution, part["id"],
                                 nodes_of[part["id"]], part["inputs"], part["outputs"])
        onnx.save_model(model, str(tmp_path / "want.onnx"))
        assert (out / part["file"]).read_bytes() == (tmp_path / "want.onnx").read_bytes()
    onnx.save_model(build_annotated_model(r.model_graph, r.problem, r.solution),
                    str(tmp_path / "want.onnx"))
    assert (out / "model.annotated.onnx").read_bytes() == (tmp_path / "want.onnx").read_bytes()


def test_models_over_the_threshold_keep_their_tensors_in_external_data(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "EXTERNAL_DATA_BYTES", 2000)
    r = hs.solve(MODEL, PROFILE, dims=DIMS, work_limit=2.5)
    out = write_result(r, tmp_path / "out")
    manifest = json.loads((out / "partition.json").read_text())
    data_files = [f for f in manifest["files"] if f.endswith(".onnx.data")]
    assert "model.annotated.onnx.data" in data_files and len(data_files) > 1
    for part in manifest["partitions"]:
        onnx.checker.check_model(str(out / part["file"]))   # by path: reads the data file
    assert verify(MODEL, out, dims=DIMS).ok
