"""What a cut costs (issue 36 item 3): a profile's measured boundary cost is its device's link
in the cost model (per tensor and per byte, each way), its part cost wins over the rule
file's only where it has one, and a fold option a profile does not time costs nothing."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto as T, helper as h

from hetero_solve.costs import Link
from hetero_solve.measures.costs import latency
from hetero_solve.model import load_model
from hetero_solve.pipeline import prepare
from hetero_solve.problem import Objective
from hetero_solve.times import (DeviceProfile, Profile, ProfileError, model_info, read_profile,
                                write_profile)


def chain(tmp_path):
    """x -> Relu a -> Relu b -> y, 1 MiB tensors."""
    nodes = [h.make_node("Relu", ["x"], ["t"], name="a"),
             h.make_node("Relu", ["t"], ["y"], name="b")]
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", T.FLOAT, [1, 256, 1024])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 256, 1024])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    path = tmp_path / "chain.onnx"
    onnx.save(m, path)
    return path


RULES = {"version": 1, "devices": [
    {"name": "A", "ops": {"supported": "all"}, "part_cost": "1ms"},
    {"name": "B", "ops": {"supported": "all"}, "part_cost": "2ms",
     "link": {"bandwidth": "1GB/s", "latency": "5us"}}]}


def profile(path, link=None, part_cost=1e-5) -> Profile:
    mg = load_model(str(path))
    times = {"a": 1e-3, "b": 1e-3}
    return Profile(model_info(mg, path), {
        "A": DeviceProfile(dict(times), part_cost=part_cost, link=link),
        "B": DeviceProfile(dict(times), part_cost=None)})


def test_a_measured_link_prices_every_crossing_tensor_each_way(tmp_path):
    path = chain(tmp_path)
    link = {"latency": 2e-6, "bandwidth": 2 ** 30}      # 1 MiB: 1/1024 s each way
    p = prepare(path, RULES, costs=profile(path, link),
                objective=Objective(order=("latency",))).problem
    assert p.costs.links[0] == Link(bandwidth=2 ** 30, latency=2e-6)
    assert p.costs.links[1] == Link(bandwidth=1e9, latency=5e-6)     # the rule file's
    # the profile's part cost where it has one, the rule file's where it has none
    assert p.costs.part_cost == [pytest.approx(1e-5), pytest.approx(2e-3)]
    a, b = (p.names.index(n) for n in ("a", "b"))
    part_of = [0] * p.n
    part_of[b] = 1
    one = latency(p, [0] * p.n, [0])
    two = latency(p, part_of, [0, 0])
    crossing = 2 * (2e-6 + (1 << 20) / 2 ** 30)       # t written out, then read in, on A
    assert two - one == pytest.approx(1e-5 + crossing)


def test_the_link_and_a_missing_part_cost_are_written_and_read_back(tmp_path):
    path = chain(tmp_path)
    p = profile(path, {"latency": 1e-6, "bandwidth": None})
    write_profile(p, tmp_path / "p.json")
    data = json.loads((tmp_path / "p.json").read_text())
    assert "part_cost" not in data["devices"]["B"]
    back = read_profile(tmp_path / "p.json")
    assert back.devices["A"].link == {"latency": 1e-6, "bandwidth": None}
    assert back.devices["B"].part_cost is None and back.devices["B"].link is None
    data["devices"]["A"]["link"]["bandwidth"] = -3
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(ProfileError, match="devices.A.link.bandwidth: expected bytes per "
                                           "second > 0"):
        read_profile(tmp_path / "bad.json")


def test_probe_cut_crosses_few_tensors_carrying_the_most_bytes():
    from hetero_solve.problem import make_problem
    from hetero_solve.profiles.measure import probe_cut
    # a chain of 20 nodes; the tensor out of node 9 is the big one
    n = 20
    p = make_problem(n, [(v, v + 1) for v in range(n - 1)], [[0]] * n, tensor_bytes=10)
    big = next(t for t, u in enumerate(p.tensor_producer) if u == 9)
    p.tensor_bytes[big] = 1000
    k, tensors, nbytes = probe_cut(None, p)
    assert (k, tensors, nbytes) == (9, 1, 1000)


def test_a_fold_option_a_profile_does_not_time_costs_nothing(tmp_path):
    """Issue 36 item 6: a folded node an answer may place (its output read as data, with a
    memory key) needs no time from a profile: its runtime folds it too."""
    w = [h.make_tensor(n, T.FLOAT, [1, 256, 1024], [0.5] * (256 * 1024)) for n in ("w1", "w2")]
    nodes = [h.make_node("Add", ["w1", "w2"], ["c"], name="fold"),
             h.make_node("Mul", ["x", "c"], ["y"], name="mul")]
    g = h.make_graph(nodes, "folds", [h.make_tensor_value_info("x", T.FLOAT, [1, 256, 1024])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 256, 1024])], w)
    path = tmp_path / "folds.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    mg = load_model(str(path))
    assert [mg.names[i] for i in mg.folded] == ["fold"]
    rules = {"version": 1, "devices": [{"name": "A", "ops": {"supported": "all"},
                                        "memory": "64MiB"}]}
    prof = Profile(model_info(mg, path), {"A": DeviceProfile({"mul": 1e-3}, part_cost=None)})
    p = prepare(path, rules, costs=prof, objective=Objective(order=("latency",))).problem
    assert [o.name for o in p.fold_options] == ["fold"]
    assert p.costs.option_time == [[0.0]]


@pytest.mark.parametrize("spread, split", [(0.01, True), (0.10, False)])
def test_a_split_predicted_faster_by_less_than_the_noise_is_not_taken(tmp_path, spread, split):
    """Issue 36 item 5: a profile keeps each device's whole-model spread; a split predicted
    ~5 % faster than the best single device is taken under 1 % noise, not under 10 %."""
    import hetero_solve as hs
    path = chain(tmp_path)
    mg = load_model(str(path))
    rules = {"version": 1, "devices": [{"name": n, "ops": {"supported": "all"}}
                                       for n in ("A", "B")]}

    def device(a, b):
        total = a + b
        return DeviceProfile({"a": a, "b": b}, part_cost=1e-6, total_seconds=total,
                             total_spread=[total * (1 - spread), total * (1 + spread)])
    prof = Profile(model_info(mg, path), {"A": device(1.0e-3, 1.1e-3),
                                          "B": device(1.1e-3, 1.0e-3)})
    r = hs.solve(path, rules, costs=prof, objective=Objective(order=("latency",)),
                 work_limit=1)
    assert r.problem.info.noise == pytest.approx(spread)
    assert (r.metrics.partitions == 2) == split
    if not split:
        assert r.solution.status == "feasible" and "latency" not in r.solution.stats["proven"]
        assert r.solution.stats["within_noise"] == pytest.approx(spread)
        assert r.metrics.latency == pytest.approx(2.1e-3 + 1e-6)
