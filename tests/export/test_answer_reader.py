"""``partition.json`` has one reader (``hetero_solve.answer``): what the writer wrote reads
back part by part, and every command that reads an answer (``run``, ``export openvino``,
``check --affinity``, the writer replacing an answer) refuses a broken one with the same key
path and reason."""

from __future__ import annotations

import json

import pytest

import hetero_solve as hs
from conftest import EXAMPLES, RULES
from hetero_solve.answer import read_answer
from hetero_solve.errors import HeteroSolveError
from hetero_solve.export import build_manifest, write_result
from hetero_solve.export.openvino import answer_data
from hetero_solve.export.writer import answer_files
from hetero_solve.run.manifest import load_manifest
from hetero_solve.user_partition import read_affinity


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    result = hs.solve(EXAMPLES / "resnet_like.onnx", RULES / "npu-static.yaml")
    out = write_result(result, tmp_path_factory.mktemp("answer") / "out")
    return result, out


def test_what_the_writer_wrote_reads_back_part_by_part(written):
    result, out = written
    answer = read_answer(out, ValueError)
    manifest = build_manifest(result)
    assert len(answer.parts) == result.metrics.partitions > 1
    for part, entry in zip(answer.parts, manifest["partitions"]):
        assert (part.id, part.device, part.instance, part.file) == \
            (entry["id"], entry["device"], entry["instance"], entry["file"])
        assert list(part.node_names) == entry["node_names"]
        assert list(part.inputs) == entry["inputs"] and list(part.outputs) == entry["outputs"]
    assert answer.data == json.loads((out / "partition.json").read_text())


@pytest.mark.parametrize("edit, key, reason", [
    (lambda d: d["partitions"][1].update(id="one"), "partitions[1].id", "expected a whole number"),
    (lambda d: d["partitions"][0].update(node_names="conv"), "partitions[0].node_names",
     "expected a list of node names"),
    (lambda d: d["partitions"][0].update(device=""), "partitions[0].device",
     "expected a non-empty string"),
    (lambda d: d.update(partitions={"0": "NPU"}), "partitions", "expected a list of parts"),
])
def test_every_reader_names_the_key_and_the_reason(written, tmp_path, edit, key, reason):
    _, out = written
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in out.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    data = json.loads((out / "partition.json").read_text())
    edit(data)
    (broken / "partition.json").write_text(json.dumps(data))
    readers = [load_manifest, answer_data, lambda d: read_affinity(d / "partition.json")]
    for reader in readers:
        with pytest.raises(HeteroSolveError) as e:
            reader(broken)
        text = str(e.value)
        assert f"{key}: {reason}" in text and "partition.json" in text, text
        assert "\n" not in text
    assert answer_files(broken) is None        # not an answer: the writer replaces nothing
    assert answer_files(out) is not None
