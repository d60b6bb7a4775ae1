"""Tarnawski et al.'s (NeurIPS 2020) instances: import, their load model, and their DP's
proven optima reproduced with contiguous stages (BERT-3: 27.9186, ResNet-50: 124.349)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetero_solve.cli import main
from hetero_solve.filekind import content_kind
from hetero_solve.instances.solve import solve_instance
from hetero_solve.instances.tarnawski import InstanceError, load_instance
from hetero_solve.measures.costs import time_per_sample
from hetero_solve.validate import validate
from support.training import their_max_load

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "tarnawski2020"
BERT = DATA / "throughput_bert_l-3_inference.json"
RESNET = DATA / "throughput_resnet50_inference.json"


@pytest.mark.parametrize("path, optimum", [(BERT, 27.9186), (RESNET, 124.349)])
def test_contiguous_optimum_equals_their_dp(path, optimum):
    result = solve_instance(path, "throughput", contiguous=True, work_limit=60)
    p, sol = result.problem, result.solution
    assert validate(p, sol) == []
    assert sol.status == "optimal"
    assert abs(result.metrics.throughput - optimum) <= 1e-4 + 5e-6 * optimum   # their 6 digits
    assert sol.stats["cost_bounds"]["throughput"] <= result.metrics.throughput
    # one part per device instance, colour classes together, and their own load formula agrees
    where = {(d, i) for d, i in zip(sol.part_device, sol.part_instance)}
    assert len(where) == sol.num_parts
    device_of = {}
    for v, q in enumerate(sol.part_of):
        device_of[p.graph_index[v]] = (p.devices[sol.part_device[q]].name, sol.part_instance[q])
    data = json.loads(path.read_text())
    classes: dict = {}
    for n in data["nodes"]:
        classes.setdefault(n.get("colorClass", ("own", n["id"])), set()).add(device_of[n["id"]])
    assert all(len(s) == 1 for s in classes.values())
    assert their_max_load(data, device_of) == pytest.approx(result.metrics.throughput, abs=1e-9)


def test_import_keeps_their_model():
    p = load_instance(BERT)
    data = json.loads(BERT.read_text())
    assert p.n == len(data["nodes"]) and p.colocation
    assert [d.name for d in p.devices] == ["FPGA", "CPU"]
    assert (p.devices[0].instances, p.devices[1].instances) == (data["maxFPGAs"], data["maxCPUs"])
    # every node's memory is its size; topological numbering
    assert sum(p.const_bytes) == sum(int(n["size"]) for n in data["nodes"])
    assert all(u < v for u in range(p.n) for v in p.succ[u])
    # all on the CPU: the sum of CPU times, no transfer paid
    total = sum(n["cpuLatency"] for n in data["nodes"])
    assert time_per_sample(p, [0] * p.n, [1], [0]) == pytest.approx(total)


def test_command_writes_value_and_status(tmp_path, capsys):
    out = tmp_path / "bert"
    assert content_kind(BERT) == "instance"
    with pytest.raises(SystemExit) as e:
        main([str(BERT), "--objective", "throughput", "--contiguous", "-o", str(out),
              "--work-limit", "60"])
    assert e.value.code == 0
    manifest = json.loads((out / "partition.json").read_text())
    assert manifest["status"] == "optimal"
    assert abs(manifest["objective"]["throughput"] - 27.9186) <= 1e-4
    assert manifest["lower_bound"]["throughput"] <= manifest["objective"]["throughput"]
    assert "status: optimal" in capsys.readouterr().out


def test_bad_instance_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"maxSizePerFPGA": 1, "maxFPGAs": 1, "maxCPUs": 1,
                               "nodes": [{"id": 0, "supportedOnFpga": True, "cpuLatency": 1,
                                          "fpgaLatency": 1}],
                               "edges": [{"sourceId": 0, "destId": 7, "cost": 1}]}))
    with pytest.raises(InstanceError, match=r"edges\[0\]\.destId: names no node: 7"):
        load_instance(bad)
    with pytest.raises(SystemExit) as e:
        main([str(bad), "-o", str(tmp_path / "out")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "names no node" in err[0]
    assert not (tmp_path / "out").exists()


def test_latency_meets_the_cheapest_bound():
    """BERT-3 is cheaper on an accelerator node by node and fits one: the latency optimum is
    one accelerator part (no transfer), the sum of the cheapest times, proven by that bound
    though the slot model is not complete at 235 nodes."""
    result = solve_instance(BERT, "latency", work_limit=20)
    data = json.loads(BERT.read_text())
    cheapest = sum(min(n["cpuLatency"], n["fpgaLatency"]) for n in data["nodes"])
    assert result.metrics.latency == pytest.approx(cheapest, abs=1e-9)
    assert result.solution.status == "optimal"
    assert result.metrics.partitions == 1
