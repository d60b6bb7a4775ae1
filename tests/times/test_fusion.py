"""A cut through a fused group (issue 36 item 3): a tensor inside ``Conv | BatchNormalization |
Add | Relu``, ``MatMul | Add`` or ``Sigmoid | Mul`` moves twice its bytes when a cut crosses
it, priced at the profile's measured per-byte cost; nothing changes without a profile's link."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper

import numpy as np

from hetero_solve.measures.costs import latency
from hetero_solve.model import load_model
from hetero_solve.pipeline import prepare
from hetero_solve.problem import Objective
from hetero_solve.times import DeviceProfile, Profile, model_info
from hetero_solve.times.fusion import fused_edges

C = 8


def model(tmp_path):
    """x -> Conv c1 -> BN bn -> Add add(+x) -> Relu r1 -> Conv c2 -> (Relu r2, Mul m) ->
    Sigmoid s -> Mul silu(s, its input) -> y; 8x32x32 float tensors (32 KiB)."""
    w = numpy_helper.from_array(np.ones((C, C, 1, 1), np.float32), "w")
    bn = [numpy_helper.from_array(np.ones(C, np.float32), n) for n in ("g", "b", "mu", "var")]
    nodes = [h.make_node("Conv", ["x", "w"], ["c1o"], name="c1"),
             h.make_node("BatchNormalization", ["c1o", "g", "b", "mu", "var"], ["bno"],
                         name="bn"),
             h.make_node("Add", ["bno", "x"], ["addo"], name="add"),
             h.make_node("Relu", ["addo"], ["r1o"], name="r1"),
             h.make_node("Conv", ["r1o", "w"], ["c2o"], name="c2"),
             h.make_node("Relu", ["c2o"], ["r2o"], name="r2"),
             h.make_node("Mul", ["c2o", "r2o"], ["mo"], name="m"),
             h.make_node("Sigmoid", ["mo"], ["so"], name="s"),
             h.make_node("Mul", ["mo", "so"], ["y"], name="silu")]
    g = h.make_graph(nodes, "fused", [h.make_tensor_value_info("x", T.FLOAT, [1, C, 32, 32])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, C, 32, 32])], [w, *bn])
    path = tmp_path / "fused.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    return path


RULES = {"version": 1, "devices": [{"name": "A", "ops": {"supported": "all"}},
                                   {"name": "B", "ops": {"supported": "all"}}]}


def profile(path, links=True) -> Profile:
    mg = load_model(str(path))
    times = {n: 1e-4 for n in mg.names}
    link = {"latency": 0.0, "bandwidth": 2 ** 30} if links else None
    return Profile(model_info(mg, path), {
        "A": DeviceProfile(dict(times), part_cost=0.0, link=link),
        "B": DeviceProfile(dict(times), part_cost=0.0, link=link)})


def test_the_fused_edges_are_those_inside_a_group(tmp_path):
    p = prepare(model(tmp_path), RULES).problem
    fused = {p.tensor_names[t] for t, f in enumerate(fused_edges(p)) if f}
    # Conv | BN | Add | Relu (the Add's other input, x, is read from memory); the SiLU's
    # Sigmoid output; not c2o (two readers), r2o (Relu does not head a group and m is not in
    # one), mo (read by two), nor r1o (a Conv reads it)
    assert fused == {"c1o", "bno", "addo", "so"}


def test_a_cut_through_a_fused_edge_costs_twice_its_bytes(tmp_path):
    path = model(tmp_path)
    p = prepare(path, RULES, costs=profile(path),
                objective=Objective(order=("latency",))).problem
    nbytes = 4 * C * 32 * 32
    each_way = nbytes / 2 ** 30

    def cut_after(name):
        k = p.names.index(name)
        return latency(p, [0 if v <= k else 1 for v in range(p.n)], [0, 1])

    whole = latency(p, [0] * p.n, [0])
    # r1o is no fused edge: written out and read in once
    assert cut_after("r1") - whole == pytest.approx(2 * each_way)
    # bno is inside Conv | BN | Add | Relu: the fusion lost moves it once more each way
    assert cut_after("bn") - whole == pytest.approx(2 * 2 * each_way)


def test_nothing_changes_without_a_measured_link(tmp_path):
    path = model(tmp_path)
    rules = {**RULES, "devices": [dict(RULES["devices"][0]),
                                  {**RULES["devices"][1],
                                   "link": {"bandwidth": "1GB/s", "latency": "0us"}}]}
    only_a = profile(path)
    only_a.devices["B"].link = None
    for costs in (profile(path, links=False), only_a):
        # a rule file's link (B's bus) is no place of a lost fusion: bytes as they are
        p = prepare(path, rules, costs=costs, objective=Objective(order=("latency",))).problem
        assert p.costs.volume is None
    # the profile's links replace every link: the lost fusion is priced
    p = prepare(path, rules, costs=profile(path), objective=Objective(order=("latency",))
                ).problem
    assert p.costs.volume is not None
    p = prepare(path, RULES, costs=profile(path),
                objective=Objective(order=("latency",))).problem
    assert p.costs.volume is not None
    assert [v for v, b in zip(p.costs.volume, p.tensor_bytes) if v != b]
