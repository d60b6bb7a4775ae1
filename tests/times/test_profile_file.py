"""The profile file (hetero_solve/times/profile.py): written and read back unchanged, checked
against the model it belongs to, and every bad value refused in one line."""

from __future__ import annotations

import doctest
import json

import pytest

from conftest import EXAMPLES
from hetero_solve.model import load_model
from hetero_solve.times import (DeviceProfile, Profile, ProfileError, model_info, read_profile,
                                write_profile)
from hetero_solve.times import profile as fmt

RESNET = EXAMPLES / "resnet_like.onnx"


@pytest.fixture(scope="module")
def mg():
    return load_model(str(RESNET), dims={"batch": 1})


def a_profile(mg) -> Profile:
    times = {name: 1e-6 * (i + 1) for i, name in enumerate(mg.names)}
    return Profile(model_info(mg, RESNET),
                   {"CPU": DeviceProfile(times, part_cost=2e-5, runtime="onnxruntime:CPU",
                                         repeats=20, warmup=3, total_seconds=0.01,
                                         attributed=0.97, spread="proportional"),
                    "NPU": DeviceProfile({mg.names[0]: 0.0}, runtime="openvino:CPU")})


def test_doctests():
    assert doctest.testmod(fmt).failed == 0


def test_written_and_read_back(mg, tmp_path):
    p = a_profile(mg)
    write_profile(p, tmp_path / "p.json")
    back = read_profile(tmp_path / "p.json", mg)
    assert back.model == p.model
    assert back.devices == p.devices
    assert back.model.input_shapes["image"] == [1, 3, 32, 32]
    assert back.node_time("CPU", mg.names[2]) == pytest.approx(3e-6)
    assert back.node_time("GPU", mg.names[2]) is None
    assert [f.name for f in tmp_path.iterdir()] == ["p.json"]   # no temporary left
    assert back.execution is None and "execution" not in json.loads(
        (tmp_path / "p.json").read_text())


def test_the_execution_settings_are_written_and_read_back(mg, tmp_path):
    from hetero_solve.run.backend import RunOptions
    p = a_profile(mg)
    p.execution = RunOptions(intra_op_threads=2, spinning="off").execution()
    write_profile(p, tmp_path / "p.json")
    back = read_profile(tmp_path / "p.json", mg)
    assert back.execution == p.execution
    assert RunOptions.of_execution(back.execution) == RunOptions(intra_op_threads=2,
                                                                 spinning="off")


def test_a_symbolic_dim_matches_any_measured_value(mg, tmp_path):
    write_profile(a_profile(mg), tmp_path / "p.json")
    read_profile(tmp_path / "p.json", load_model(str(RESNET)))


def edit(mg, tmp_path, change):
    data = a_profile(mg).as_dict()
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return path


def first_node(d):
    return next(iter(d["devices"]["CPU"]["node_seconds"]))


@pytest.mark.parametrize("change, says", [
    (lambda d: d["devices"]["CPU"]["node_seconds"].update({first_node(d): -1.0}),
     "expected seconds >= 0, got -1.0"),
    (lambda d: d["devices"]["CPU"]["node_seconds"].update({first_node(d): None}),
     "missing time (null)"),
    (lambda d: d["devices"]["CPU"]["node_seconds"].update({first_node(d): "fast"}),
     "expected seconds (a number), got 'fast'"),
    (lambda d: d["devices"]["CPU"].update(part_cost=float("nan")), "part_cost: expected seconds"),
    (lambda d: d["devices"]["CPU"].pop("node_seconds"), "node_seconds: missing"),
    (lambda d: d["devices"]["CPU"].update(attributed=1.5), "a share between 0 and 1"),
    (lambda d: d.pop("format"), "not a hetero-solve profile"),
    (lambda d: d.update(version=9), "version 9"),
    (lambda d: d.pop("model"), "model: missing"),
    (lambda d: d.update(execution=[1]), "execution: expected a mapping of execution settings"),
])
def test_bad_values_are_one_line(mg, tmp_path, change, says):
    path = edit(mg, tmp_path, change)
    with pytest.raises(ProfileError) as e:
        read_profile(path)
    assert says in str(e.value) and str(path) in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("change, says", [
    (lambda d: d["devices"]["CPU"]["node_seconds"].update({"not_a_node": 1e-3}),
     "node 'not_a_node' is not in the model"),
    (lambda d: d["model"].update(fingerprint="sha256:0"), "fingerprint differs"),
    (lambda d: d["model"].update(nodes=3), "profiled on a model of 3 nodes"),
    (lambda d: d["model"]["input_shapes"].update(image=[8, 3, 32, 32]),
     "measured at image [8, 3, 32, 32], the model is loaded at [1, 3, 32, 32]: give "
     "--shape image=8,3,32,32"),
    (lambda d: d["model"]["input_shapes"].update(tokens=[1, 16]),
     "graph input 'tokens' is not an input"),
])
def test_a_profile_of_another_model_is_refused(mg, tmp_path, change, says):
    path = edit(mg, tmp_path, change)
    read_profile(path)                      # a valid file...
    with pytest.raises(ProfileError) as e:
        read_profile(path, mg)              # ...of another model
    assert says in str(e.value), str(e.value)


def test_the_transformer_profile_is_not_the_resnet_one(mg, tmp_path):
    other = load_model(str(EXAMPLES / "transformer_encoder.onnx"), dims={"batch": 1, "seq": 16})
    write_profile(a_profile(mg), tmp_path / "p.json")
    with pytest.raises(ProfileError, match="is not in the model"):
        read_profile(tmp_path / "p.json", other)


def test_the_switch_cost_is_read_back_and_paid_by_each_part(mg, tmp_path):
    """A part after a part on another device pays the device's switch cost: the cost model's
    part cost is the profile's ``part_cost`` plus its ``switch_cost``."""
    import hetero_solve as hs
    from hetero_solve.measures.costs import latency
    from conftest import RULES
    p = a_profile(mg)
    p.devices["CPU"].switch_cost = 3e-4
    write_profile(p, tmp_path / "p.json")
    back = read_profile(tmp_path / "p.json", mg)
    assert back.devices["CPU"].switch_cost == 3e-4 and back.devices["NPU"].switch_cost == 0
    rules = {"version": 1, "devices": [{"name": "CPU", "ops": {"supported": "all"}}]}
    result = hs.solve(RESNET, rules, dims={"batch": 1}, costs=str(tmp_path / "p.json"),
                      engine="heuristic")
    c = result.problem.costs
    assert c.part_cost == [pytest.approx(2e-5 + 3e-4)]
    one = latency(result.problem, [0] * result.problem.n, [0])
    assert one == pytest.approx(sum(p.devices["CPU"].node_seconds.values()) + 2e-5 + 3e-4)
    with pytest.raises(ProfileError, match="switch_cost"):
        data = json.loads((tmp_path / "p.json").read_text())
        data["devices"]["CPU"]["switch_cost"] = -1
        (tmp_path / "q.json").write_text(json.dumps(data))
        read_profile(tmp_path / "q.json", mg)
