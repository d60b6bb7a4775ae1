"""Costs from rule files (issue 30): rooflines, part costs and links in the rule file, each
node's FLOPs and bytes from its shapes, one door for measured times, ``--objective``, and an
answer never predicted slower than the best single device.

Roofline FLOPs and bytes are held to values computed by hand for each op family; the latency
objective's answers to a model where splitting does not pay (the whole model on the CPU) and
one where it does (the NPU takes its nodes).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import onnx
import pytest
import yaml
from onnx import TensorProto as T, helper as h

import hetero_solve as hs
from hetero_solve.budget import Budget
from hetero_solve.algorithms.single import best_single_device
from hetero_solve.export import build_manifest
from hetero_solve.times import Measured
from hetero_solve.errors import CostError, RuleError
from hetero_solve.model import load_model
from hetero_solve.pipeline import prepare
from hetero_solve.problem import Objective
from hetero_solve.roofline import node_work
from hetero_solve.units import parse_quantity

from conftest import ROOT

F = 4   # bytes of a float32


# -- units and the rule file -------------------------------------------------------------------

@pytest.mark.parametrize("kind, text, value", [
    ("rate", "2TFLOPS", 2e12), ("rate", "500 GFLOP/s", 5e11), ("rate", "26TOPS", 2.6e13),
    ("rate", 1e9, 1e9), ("bandwidth", "50GB/s", 5e10), ("bandwidth", "8GiB/s", 8 * 2**30),
    ("time", "200us", 2e-4), ("time", "1.5ms", 1.5e-3), ("time", "3ns", 3e-9),
    ("time", 0.25, 0.25), ("time", "2e-3", 2e-3)])
def test_quantities_read_with_their_units(kind, text, value):
    assert parse_quantity(text, kind) == pytest.approx(value, rel=1e-12)


def _device(**extra):
    return {"name": "NPU", "ops": {"supported": "all"}, **extra}


@pytest.mark.parametrize("device, key, words", [
    ({"roofline": {"flops": "2TB/s", "bandwidth": "1GB/s"}}, "devices[0].roofline.flops",
     "cannot read '2TB/s' as an arithmetic rate"),
    ({"roofline": {"flops": "1TFLOPS", "bandwidth": "50GB"}}, "devices[0].roofline.bandwidth",
     "cannot read '50GB' as a bandwidth"),
    ({"roofline": {"flops": "1TFLOPS", "bandwidth": "0GB/s"}}, "devices[0].roofline.bandwidth",
     "must be more than 0"),
    ({"roofline": {"flops": "1TFLOPS"}}, "devices[0].roofline.bandwidth", "missing"),
    ({"roofline": {"flops": 1, "bandwidth": 1, "efficiency": {"Conv": 1.5}}},
     "devices[0].roofline.efficiency.Conv", "<= 1"),
    ({"roofline": {"flops": 1, "bandwidth": 1, "efficiency": {"Konv": 0.5}}},
     "devices[0].roofline.efficiency.Konv", "Conv"),
    ({"part_cost": "3 min"}, "devices[0].part_cost", "cannot read '3 min' as a time"),
    ({"part_cost": -1}, "devices[0].part_cost", "must not be negative"),
    ({"link": {"bandwidth": "1GB/s", "latency": "5GB/s"}}, "devices[0].link.latency",
     "as a time"),
])
def test_a_wrong_cost_value_names_the_file_key_and_reason(tmp_path, device, key, words):
    f = tmp_path / "r.yaml"
    f.write_text(yaml.safe_dump({"version": 1, "devices": [_device(**device)]}))
    with pytest.raises(RuleError) as e:
        hs.load_rules(f)
    assert e.value.key == key and words in e.value.reason and str(f) in str(e.value)
    assert "\n" not in str(e.value)


def test_cost_keys_are_read_into_the_devices():
    r = hs.load_rules({"version": 1, "objective": ["fallback", "latency"], "devices": [
        _device(roofline={"flops": "2TFLOPS", "bandwidth": "50GB/s",
                          "efficiency": {"Conv": 0.5}},
                part_cost="200us", link={"bandwidth": "8GB/s", "latency": "20us"}),
        {"name": "CPU", "ops": {"supported": "all"}}]})
    npu, cpu = r.devices
    assert (npu.roofline.flops, npu.roofline.bandwidth) == (2e12, 5e10)
    assert npu.roofline.efficiency == {"Conv": 0.5}
    assert (npu.part_cost, npu.link.bandwidth, npu.link.latency) == (2e-4, 8e9, 2e-5)
    assert (cpu.roofline, cpu.part_cost, cpu.link) == (None, 0.0, None)
    assert r.objective.order == ("fallback", "latency")


# -- FLOPs and bytes per op family, by hand ----------------------------------------------------

def _one_node(node, inputs, outputs, opset=23, domains=()):
    g = h.make_graph([node], "g", [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in inputs],
                     [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in outputs])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)]
                     + [h.make_opsetid(d, 1) for d in domains])
    m.ir_version = 10
    return load_model(m)


def _io_bytes(inputs, outputs):
    return F * sum(math.prod(s) for _, s in list(inputs) + list(outputs))


CASES = {
    # Conv 3->4 channels, 3x3, pads 1 on 8x8, bias: 2 x 256 outputs x 27 + 256
    "conv": (h.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]),
             [("x", [1, 3, 8, 8]), ("w", [4, 3, 3, 3]), ("b", [4])], [("y", [1, 4, 8, 8])],
             2 * 256 * 27 + 256),
    # depthwise: each output reads one channel: 2 x 256 x 9
    "conv-group": (h.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=4),
                   [("x", [1, 4, 8, 8]), ("w", [4, 1, 3, 3])], [("y", [1, 4, 8, 8])],
                   2 * 256 * 9),
    # every input element meets 3 x 3 x 3 weights
    "conv-transpose": (h.make_node("ConvTranspose", ["x", "w"], ["y"]),
                       [("x", [1, 2, 4, 4]), ("w", [2, 3, 3, 3])], [("y", [1, 3, 6, 6])],
                       2 * 32 * 27),
    "matmul": (h.make_node("MatMul", ["a", "b"], ["y"]),
               [("a", [2, 3, 4]), ("b", [4, 5])], [("y", [2, 3, 5])], 2 * 30 * 4),
    # transA: A is K x M = 4 x 3; + C
    "gemm": (h.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1),
             [("a", [4, 3]), ("b", [4, 5]), ("c", [5])], [("y", [3, 5])], 2 * 15 * 4 + 15),
    # 2 heads of 4: scores 2 x 4 x 6 x 8, weighted sum the same, softmax 5 x 2 x 4 x 6
    "multi-head-attention": (
        h.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="com.microsoft",
                    num_heads=2),
        [("q", [1, 4, 8]), ("k", [1, 6, 8]), ("v", [1, 6, 8])], [("y", [1, 4, 8])],
        2 * 4 * 6 * (8 + 8) + 5 * 2 * 4 * 6),
    "attention": (h.make_node("Attention", ["q", "k", "v"], ["y"]),
                  [("q", [1, 2, 4, 8]), ("k", [1, 2, 6, 8]), ("v", [1, 2, 6, 8])],
                  [("y", [1, 2, 4, 8])], 2 * 2 * 4 * 6 * (8 + 8) + 5 * 2 * 4 * 6),
    # 5 steps x batch 2 x (2 x (W 16x3 + R 16x4) + 4 x 16 gate values)
    "lstm": (h.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=4),
             [("x", [5, 2, 3]), ("w", [1, 16, 3]), ("r", [1, 16, 4])], [("y", [5, 1, 2, 4])],
             5 * 2 * (2 * (48 + 64) + 4 * 16)),
    "gru": (h.make_node("GRU", ["x", "w", "r"], ["y"], hidden_size=4),
            [("x", [5, 2, 3]), ("w", [1, 12, 3]), ("r", [1, 12, 4])], [("y", [5, 1, 2, 4])],
            5 * 2 * (2 * (36 + 48) + 4 * 12)),
    "rnn": (h.make_node("RNN", ["x", "w", "r"], ["y"], hidden_size=4),
            [("x", [5, 2, 3]), ("w", [1, 4, 3]), ("r", [1, 4, 4])], [("y", [5, 1, 2, 4])],
            5 * 2 * (2 * (12 + 16) + 4 * 4)),
    "elementwise": (h.make_node("Add", ["a", "b"], ["y"]),
                    [("a", [2, 3]), ("b", [2, 3])], [("y", [2, 3])], 6),
    "reduction": (h.make_node("ReduceSum", ["x"], ["y"], keepdims=0),
                  [("x", [2, 3, 4])], [("y", [])], 24),
    "softmax": (h.make_node("Softmax", ["x"], ["y"]), [("x", [2, 3])], [("y", [2, 3])], 30),
    "pool": (h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
             [("x", [1, 1, 4, 4])], [("y", [1, 1, 2, 2])], 4 * 4),
    "data-movement": (h.make_node("Transpose", ["x"], ["y"], perm=[1, 0]),
                      [("x", [2, 3])], [("y", [3, 2])], 0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_flops_and_bytes_of_each_op_family_as_computed_by_hand(case):
    node, inputs, outputs, flops = CASES[case]
    domains = ("com.microsoft",) if node.domain else ()
    mg = _one_node(node, inputs, outputs, domains=domains)
    assert [tuple(mg.tensor_type(n).shape) for n, _ in outputs] == [tuple(s) for _, s in outputs]
    w = node_work(mg, 0)
    assert (w.flops, w.bytes) == (flops, _io_bytes(inputs, outputs))


def test_a_view_moves_nothing():
    mg = _one_node(h.make_node("Flatten", ["x"], ["y"]), [("x", [2, 3, 4])], [("y", [2, 12])])
    assert node_work(mg, 0) == (0, 0) or (node_work(mg, 0).flops, node_work(mg, 0).bytes) == (0, 0)


# -- the cost model: one door ------------------------------------------------------------------

def _chain_model():
    """x -> Conv a -> Erf b -> Conv c -> y: the NPU takes the Convs only."""
    nodes = [h.make_node("Conv", ["x", "w1"], ["t1"], name="a", pads=[1, 1, 1, 1]),
             h.make_node("Erf", ["t1"], ["t2"], name="b"),
             h.make_node("Conv", ["t2", "w2"], ["y"], name="c", pads=[1, 1, 1, 1])]
    inits = [h.make_tensor(n, T.FLOAT, [16, 16, 3, 3], [0.01] * (16 * 16 * 9))
             for n in ("w1", "w2")]
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", T.FLOAT, [1, 16, 32, 32])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 16, 32, 32])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _chain_rules(npu_flops="10TFLOPS", cpu_flops="100GFLOPS", link=None, part_cost=0,
                 objective=None):
    npu = {"name": "NPU", "ops": {"supported": ["Conv"]},
           "roofline": {"flops": npu_flops, "bandwidth": "100GB/s"}, "part_cost": part_cost}
    if link is not None:
        npu["link"] = link
    rules = {"version": 1, "devices": [npu, {"name": "CPU", "ops": {"supported": "all"},
                                             "roofline": {"flops": cpu_flops,
                                                          "bandwidth": "20GB/s"}}]}
    if objective is not None:
        rules["objective"] = objective
    return rules


def test_node_times_are_the_rooflines_and_a_profile_wins_where_it_has_one():
    p = prepare(_chain_model(), _chain_rules()).problem
    conv = node_work(load_model(_chain_model()), 0)
    assert conv.flops == 2 * 16 * 32 * 32 * 16 * 9
    assert conv.bytes == F * (2 * 16 * 32 * 32 + 16 * 16 * 9)
    # the NPU is bound by its memory, the CPU by its arithmetic
    assert p.costs.node_time[0] == [conv.bytes / 100e9, conv.flops / 100e9]
    assert p.costs.node_time[1][0] is None          # the NPU refuses Erf: no time there
    measured = Measured(times={"CPU": {"b": 0.5}}, part_cost={"NPU": 0.125})
    q = prepare(_chain_model(), _chain_rules(), costs=measured).problem
    assert q.costs.node_time[1][1] == 0.5 and q.costs.node_time[0] == p.costs.node_time[0]
    assert q.costs.part_cost == [0.125, 0.0]


def test_a_profile_alone_is_a_cost_source():
    rules = _chain_rules()
    for d in rules["devices"]:
        del d["roofline"]
    times = {"NPU": {"a": 1.0, "c": 1.0}, "CPU": {"a": 3.0, "b": 1.0, "c": 3.0}}
    p = prepare(_chain_model(), rules, costs=Measured(times=times),
                objective=Objective(order=("latency",))).problem
    assert p.costs.node_time == [[1.0, 3.0], [None, 1.0], [1.0, 3.0]]


def test_the_library_takes_the_objective_as_the_command_and_the_rule_file_write_it():
    """``hs.solve(..., objective="latency")`` (the text ``--objective`` takes), a list of
    terms and a mapping of weights give the same answer as the ``Objective``; a misspelt term
    is one line naming it (issue 39: a text raised AttributeError)."""
    want = hs.solve(_chain_model(), _chain_rules(), objective=Objective(order=("latency",)))
    for given in ("latency", ["latency"], ("latency",), {"latency": 1}):
        r = hs.solve(_chain_model(), _chain_rules(), objective=given)
        assert r.metrics.latency == pytest.approx(want.metrics.latency), given
        assert (r.solution.part_of, r.solution.part_device) == \
            (want.solution.part_of, want.solution.part_device), given
    r = hs.solve(_chain_model(), _chain_rules(), objective="fallback=1,partitions=20")
    assert (r.metrics.partitions, r.metrics.fallback) == (1, 2)     # 2 + 20 < 1 + 3 * 20
    for wrong, words in (("latncy", "did you mean 'latency'"), (["speed"], "unknown term"),
                         (3, "not int")):
        with pytest.raises(RuleError, match=words) as e:
            hs.solve(_chain_model(), _chain_rules(), objective=wrong)
        assert "objective=" in str(e.value) and "\n" not in str(e.value)


def test_a_cost_objective_without_times_is_one_line_naming_what_would_give_them():
    rules = _chain_rules()
    for d in rules["devices"]:
        del d["roofline"]
    with pytest.raises(CostError) as e:
        prepare(_chain_model(), rules, objective=Objective(order=("latency",)))
    text = str(e.value)
    assert "latency" in text and "roofline" in text and "--costs" in text and "\n" not in text
    # a device without a time for a node it may take is named
    rules["devices"][0]["roofline"] = {"flops": "1TFLOPS", "bandwidth": "1GB/s"}
    with pytest.raises(CostError, match=r"device CPU has no time for node 'a'.*devices\[1\]"):
        prepare(_chain_model(), rules, objective=Objective(order=("throughput",)))
    # without a cost term: no cost model, a warning, the same answer as before
    p = prepare(_chain_model(), rules).problem
    assert p.costs is None and any("no predicted times" in w for w in p.info.warnings)


def test_a_rule_file_without_cost_keys_compiles_as_before():
    p = prepare(ROOT / "examples" / "resnet_like.onnx", ROOT / "rules" / "npu-static.yaml").problem
    assert p.costs is None
    r = hs.solve(ROOT / "examples" / "seed000.onnx", ROOT / "rules" / "seed000.yaml")
    assert r.single_device is None and "single_device" not in build_manifest(r, files=False)
    objective = build_manifest(r, files=False)["objective"]
    assert set(objective) == {"fallback", "partitions", "transfer"}


def test_a_quantized_unit_costs_the_sum_of_its_members():
    from corpus import truth as TR
    entry = TR.load_corpus()["resnet-tiny-qdq"]
    mg = load_model(str(TR.model_file("resnet-tiny-qdq", entry)), dims=entry["dims"])
    rules = hs.load_rules(ROOT / "rules" / "gpu-cpu.yaml")
    rules = dataclasses_replace_devices(rules, {"flops": 1e11, "bandwidth": 1e10})
    p = hs.compile_problem(mg, rules)
    roof = rules.devices[-1].roofline
    own = {i: roof.time(mg.op_types[i], *_fb(node_work(mg, i))) for i in mg.placeable()}
    units = [v for v in range(p.n) if len(p.graph_nodes(v)) > 1]
    assert units
    counted: set[int] = set()
    for v in range(p.n):
        members = [i for i in p.graph_nodes(v) if i not in counted]
        counted.update(members)
        assert p.costs.node_time[v][-1] == pytest.approx(sum(own[i] for i in members))
    assert sum(r[-1] for r in p.costs.node_time) == pytest.approx(sum(own.values()))


def _fb(w):
    return w.flops, w.bytes


def dataclasses_replace_devices(rules, roofline):
    import dataclasses
    from hetero_solve.costs import Roofline
    devices = [dataclasses.replace(d, roofline=Roofline(**roofline)) for d in rules.devices]
    return dataclasses.replace(rules, devices=devices)


# -- never slower than one device --------------------------------------------------------------

SLOW_LINK = {"bandwidth": "100MB/s", "latency": "5ms"}
FAST_LINK = {"bandwidth": "100GB/s", "latency": "1us"}


def test_when_splitting_does_not_pay_the_latency_answer_is_the_cpu_alone():
    rules = _chain_rules(link=SLOW_LINK, part_cost="1ms")
    fewest = hs.solve(_chain_model(), rules, work_limit=2.5)
    assert fewest.metrics.partitions == 3
    assert fewest.metrics.latency > fewest.single_device.latency
    for engine in ("auto", "heuristic"):
        r = hs.solve(_chain_model(), rules, objective=Objective(order=("latency",)),
                     engine=engine, work_limit=5)
        assert r.metrics.partitions == 1 and r.solution.part_device == [1], engine
        assert r.metrics.latency == pytest.approx(r.single_device.latency)
        assert r.problem.devices[r.single_device.device].name == "CPU"


def test_when_offloading_pays_the_latency_answer_offloads():
    rules = _chain_rules(link=FAST_LINK, cpu_flops="10GFLOPS")
    r = hs.solve(_chain_model(), rules, objective=Objective(order=("latency",)), work_limit=5)
    assert r.solution.node_device() == [0, 1, 0]
    assert r.metrics.latency < r.single_device.latency
    assert r.metrics.latency == pytest.approx(sum(
        r.problem.costs.node_time[v][d] for v, d in enumerate([0, 1, 0]))
        + 2 * (1e-6 + 16 * 32 * 32 * F / 100e9))   # t1 out of, t2 into the NPU
    m = build_manifest(r, files=False)
    assert m["objective"]["latency"] == r.metrics.latency
    assert m["single_device"] == {"device": "CPU", "latency": r.single_device.latency,
                                  "throughput": r.single_device.throughput}


def test_the_best_single_device_must_take_every_node_and_fit():
    p = prepare(_chain_model(), _chain_rules()).problem
    best = best_single_device(p)
    assert best.device == 1                       # the NPU refuses Erf
    rules = _chain_rules()
    rules["devices"][1]["memory"] = "1KiB"        # the CPU cannot hold the model
    assert best_single_device(prepare(_chain_model(), rules).problem) is None


# -- the command line --------------------------------------------------------------------------

def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "hetero_solve", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_solve_objective_latency_on_the_command_line(tmp_path):
    model, rules = tmp_path / "chain.onnx", tmp_path / "r.yaml"
    onnx.save(_chain_model(), model)
    rules.write_text(yaml.safe_dump(_chain_rules(link=SLOW_LINK, part_cost="1ms")))
    r = _cli(model, rules, "--objective", "latency", "-o", tmp_path / "out", "--no-models",
             "--work-limit", "1")
    assert r.returncode == 0, r.stderr
    assert "predicted latency:" in r.stdout and "on CPU alone:" in r.stdout
    m = json.loads((tmp_path / "out" / "partition.json").read_text())
    assert m["objective"]["partitions"] == 1
    assert m["objective"]["latency"] == m["single_device"]["latency"]


@pytest.mark.parametrize("value, words", [
    ("latncy", "did you mean 'latency'"), ("fallback=0", "every weight is 0"),
    ("fallback=1,latency", "has no weight"), ("fallback=x", "not a number"),
    ("latency,latency", "appears twice"), ("fallback=-1", ">= 0")])
def test_a_bad_objective_option_is_one_line(value, words):
    from hetero_solve.cli.common import UsageError, parse_objective
    with pytest.raises(UsageError) as e:
        parse_objective(value)
    assert words in str(e.value) and str(e.value).startswith(f"--objective {value!r}: ")


@pytest.mark.parametrize("value, objective", [
    ("latency", Objective(order=("latency",))),
    ("[fallback, latency]", Objective(order=("fallback", "latency"))),
    ("fallback=1,latency=1000", Objective(weights={"fallback": 1.0, "latency": 1000.0})),
    ("{fallback: 1, partitions: 20}", Objective(weights={"fallback": 1.0, "partitions": 20.0}))])
def test_the_objective_option_reads_orders_and_weights(value, objective):
    from hetero_solve.cli.common import parse_objective
    assert parse_objective(value) == objective


def test_a_bad_objective_on_the_command_line_exits_2_writing_nothing(tmp_path):
    r = _cli(ROOT / "examples" / "seed000.onnx", ROOT / "rules" / "seed000.yaml",
             "--objective", "latncy", "-o", tmp_path / "out")
    assert r.returncode == 2 and "did you mean 'latency'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_objective_latency_without_a_cost_source_says_which_keys(tmp_path):
    r = _cli(ROOT / "examples" / "seed000.onnx", ROOT / "rules" / "seed000.yaml",
             "--objective", "fallback,latency", "-o", tmp_path / "out")
    assert r.returncode == 2 and not (tmp_path / "out").exists()
    line = r.stderr.strip().splitlines()[-1]
    assert "roofline" in line and "--costs" in line and "seed000.yaml" in line


def test_rules_check_predicts_each_devices_time_for_the_model():
    from hetero_solve.rules.check import format_query, query
    mg = load_model(_chain_model())
    r = query(hs.load_rules(_chain_rules(part_cost="1ms")), mg)
    npu, cpu = r.devices
    w = [node_work(mg, i) for i in range(3)]
    assert cpu.predicted_all and cpu.predicted == pytest.approx(
        sum(max(x.flops / 100e9, x.bytes / 20e9) for x in w))
    assert not npu.predicted_all and npu.predicted == pytest.approx(
        1e-3 + 2 * max(w[0].flops / 10e12, w[0].bytes / 100e9))
    text = format_query(r)
    assert "for the whole model" in text and "for the 2 node(s) it takes" in text
    assert r.as_dict()["devices"][1]["predicted"] == cpu.predicted


def test_explain_under_a_latency_objective_says_where_the_time_goes(tmp_path):
    from hetero_solve.measures.costs import latency_by_part
    r = hs.solve(_chain_model(), _chain_rules(link=FAST_LINK, cpu_flops="10GFLOPS"),
                 objective=Objective(order=("latency",)), work_limit=2)
    spread = latency_by_part(r.problem, r.solution.part_of, r.solution.part_device)
    assert sum(sum(row.values()) for row in spread) == pytest.approx(r.metrics.latency)
    assert [row["transfer"] > 0 for row in spread] == [True, False, True]   # the NPU's link
    model, rules = tmp_path / "chain.onnx", tmp_path / "r.yaml"
    onnx.save(_chain_model(), model)
    rules.write_text(yaml.safe_dump(_chain_rules(link=FAST_LINK, cpu_flops="10GFLOPS")))
    out = _cli("explain", model, rules, "--objective", "latency", "--work-limit", "1", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [p["device"] for p in data["time"]["parts"]] == ["NPU", "CPU", "NPU"]
    assert data["parts"] == 3 and data["status"] and data["objective_spec"]
    assert data["single_device"]["device"] == "CPU"
    assert data["objective"]["latency"] < data["single_device"]["latency"]


def test_study_takes_the_objective_and_keeps_runs_apart(tmp_path):
    from hetero_solve.study import StudyConfig, run_study
    from hetero_solve.study.core import StudyError
    model, rules = tmp_path / "chain.onnx", tmp_path / "r.yaml"
    onnx.save(_chain_model(), model)
    rules.write_text(yaml.safe_dump(_chain_rules(link=SLOW_LINK, part_cost="1ms")))

    def study(objective, out):
        return run_study(StudyConfig(models=[model], rules=[rules], out_dir=tmp_path / out,
                                     algorithms=["heuristic", "cpsat"], work_limit=1,
                                     time_limit=None,
                                     memory="none", plots=False, objective=objective),
                         progress=False)
    plain, timed = study(None, "a").records, study("latency", "b").records
    assert {r["objective_spec"] for r in timed} == {"lexicographic latency"}
    assert {r["key"] for r in plain}.isdisjoint(r["key"] for r in timed)
    cpsat = next(r for r in timed if r["algorithm"] == "cpsat")
    alone = best_single_device(prepare(model, rules).problem).latency
    assert cpsat["valid"] and cpsat["latency"] == pytest.approx(alone)   # the CPU's time
    with pytest.raises(StudyError, match="--objective 'latncy'"):
        study("latncy", "c")


# -- the cost-aware heuristic ------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(40))
def test_cost_islands_is_valid_and_never_worse_than_fewest_parts(seed):
    from hetero_solve.algorithms.greedy import heuristic
    from hetero_solve.algorithms.islands import cost_islands
    from hetero_solve.solution import objective_key
    from hetero_solve.validate import validate
    from support.problems import costed
    p = costed(seed)
    try:
        start = heuristic(p)
    except Exception:     # noqa: BLE001 - memory the greedy cannot pack: nothing to improve
        return
    sol = cost_islands(p, start)
    if validate(p, start) == []:
        assert validate(p, sol) == []
    assert objective_key(p, sol) <= objective_key(p, start)


def test_the_heuristic_engine_leaves_an_island_that_does_not_pay():
    rules = _chain_rules(link=SLOW_LINK, part_cost="1ms")
    p = prepare(_chain_model(), rules, objective=Objective(order=("latency",))).problem
    from hetero_solve.pipeline import initial_solution
    sol = initial_solution(p, engine="heuristic")
    assert sol.node_device() == [1, 1, 1] and sol.algorithm == "cost islands"
    fast = prepare(_chain_model(), _chain_rules(link=FAST_LINK, cpu_flops="10GFLOPS"),
                   objective=Objective(order=("latency",))).problem
    assert initial_solution(fast, engine="heuristic").node_device() == [0, 1, 0]


def test_a_profile_that_cannot_be_used_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text('{"format": "something else"}')
    r = _cli(ROOT / "examples" / "seed000.onnx", ROOT / "rules" / "seed000.yaml",
             "--costs", bad, "-o", tmp_path / "out")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert str(bad) in r.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["hetero_solve.units", "hetero_solve.costs",
                                  "hetero_solve.roofline", "hetero_solve.measures.costs",
                                  "hetero_solve.algorithms.single",
                                  "hetero_solve.algorithms.islands", "hetero_solve.rules.load"])
def test_doctests_of_the_cost_modules(name, monkeypatch):
    import doctest
    import importlib
    monkeypatch.chdir(ROOT)
    res = doctest.testmod(importlib.import_module(name))
    assert res.failed == 0 and res.attempted > 0


def test_rules_check_without_a_model_lists_the_cost_keys():
    from hetero_solve.rules.check import format_summary, summary
    s = summary(hs.load_rules(_chain_rules(link=FAST_LINK, part_cost="1ms")))
    npu, cpu = s["devices"]
    assert npu["costs"] == {"roofline": {"flops": 10e12, "bandwidth": 100e9, "efficiency": {}},
                            "part_cost": 1e-3, "link": {"bandwidth": 100e9, "latency": 1e-6}}
    assert cpu["costs"]["link"] is None
    text = format_summary(s)
    assert "costs: roofline 10000 GFLOPS, 100 GB/s; part cost 1 ms; link 100 GB/s + 1 µs" in text
    plain = summary(hs.load_rules(ROOT / "rules" / "npu-static.yaml"))
    assert all("costs" not in d for d in plain["devices"])


def _profile(tmp_path, times, part_cost=0.0, model=None):
    """A profile file of the chain model (hetero_solve.times.profile's format)."""
    from hetero_solve.times import DeviceProfile, Profile, model_info, write_profile
    path = tmp_path / "chain.onnx"
    onnx.save(model or _chain_model(), path)
    mg = load_model(str(path))
    prof = Profile(model_info(mg, path), {d: DeviceProfile(dict(t), part_cost=part_cost,
                                                           runtime="test")
                                          for d, t in times.items()})
    write_profile(prof, tmp_path / "profile.json")
    return path, tmp_path / "profile.json"


def test_a_profile_file_is_read_through_the_one_door(tmp_path):
    model, profile = _profile(tmp_path, {"CPU": {"b": 0.5}}, part_cost=0.25)
    p = prepare(model, _chain_rules(), costs=profile).problem
    assert p.costs.node_time[1][1] == 0.5 and p.costs.part_cost[1] == 0.25
    rules = tmp_path / "r.yaml"
    rules.write_text(yaml.safe_dump(_chain_rules()))
    r = _cli(model, rules, "--costs", profile, "-o", tmp_path / "out", "--no-models",
             "--work-limit", "1")
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "out" / "partition.json").read_text())
    assert m["objective"]["latency"] >= 0.5


def test_a_profile_of_other_devices_or_another_model_is_refused(tmp_path):
    model, profile = _profile(tmp_path, {"GPU": {"b": 0.5}})
    with pytest.raises(CostError, match="GPU, none of which"):
        prepare(model, _chain_rules(), costs=profile)
    r = _cli(ROOT / "examples" / "seed000.onnx", ROOT / "rules" / "seed000.yaml",
             "--costs", profile, "-o", tmp_path / "out")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("seed", range(0, 40, 4))
def test_a_cost_model_follows_a_fold_choice(seed):
    """A placed fold option gets its own times (``CostModel.option_time``): the answer's
    latency is measured on the problem it answers, whichever fold choice wins."""
    from hetero_solve.costs import CostModel
    from hetero_solve.errors import InfeasibleError
    from hetero_solve.exact import refine_with_folds
    from hetero_solve.pipeline import initial_solution
    from hetero_solve.solution import evaluate
    from hetero_solve.validate import validate
    from support.problems import folds_problem
    p = folds_problem(seed)
    p.costs = CostModel(node_time=[[1.0, 2.0] for _ in range(p.n)], part_cost=[0.1, 0.0],
                        links=[None, None], option_time=[[0.5, 0.25] for _ in p.fold_options])
    try:
        q, sol = refine_with_folds(p, initial_solution(p), budget=Budget.of(work_limit=0.5))
    except InfeasibleError:
        return
    assert validate(q, sol) == [] and len(q.costs.node_time) == q.n
    placed = q.n - p.n
    m = evaluate(q, sol)
    assert m.latency >= sum(min(r[d] for d in range(2) if r[d] is not None)
                            for r in q.costs.node_time[:p.n]) + placed * 0.25
