"""The support check caches one answer per node signature (op, tensor types, named attributes)
and fills the node's own tensor names into a cached refusal: every answer must equal the
uncached check, reasons word for word, on every example model, every profile, and symbolic
shapes left open (where static-shape devices refuse most nodes)."""

from __future__ import annotations

import pytest

from hetero_solve.model import load_model
from hetero_solve.rules import load_rules
from hetero_solve.rules.conditions import SupportChecker, node_refusal, op_refusal

from conftest import EXAMPLE_DIMS, EXAMPLES, example_models, rule_profiles


def _uncached(rules, mg, d: int, i: int) -> str | None:
    dev = rules.devices[d]
    op = mg.op_types[i]
    reason = op_refusal(dev, op)
    if reason is not None:
        return reason
    opset = mg.opsets.get(mg.domains[i] or "", mg.opset)
    value_idx = rules.value_input_indices(op, opset) if op in dev.when else ()
    return node_refusal(dev, op, mg.inputs[i], mg.outputs[i],
                        lambda: mg.model.graph.node[i].attribute, mg.tensor_type, opset,
                        value_idx, mg.domains[i])


@pytest.mark.parametrize("dims", ["given", "open"])
@pytest.mark.parametrize("model", example_models(), ids=lambda p: p.stem)
def test_cached_answers_equal_the_uncached_check(model, dims):
    mg = load_model(model, dims=EXAMPLE_DIMS[model.stem] if dims == "given" else {})
    refused = 0
    for profile in rule_profiles():
        rules = load_rules(profile)
        checker = SupportChecker(rules, mg)
        for d in range(len(rules.devices)):
            for i in range(len(mg.names)):
                if mg.has_subgraph[i]:
                    continue
                want = _uncached(rules, mg, d, i)
                assert checker.refusal(d, i) == want, (profile.name, mg.names[i])
                refused += want is not None
    assert refused > 0


@pytest.mark.parametrize("when", [False, True])
def test_a_static_shape_refusal_names_each_nodes_own_tensors(tmp_path, when):
    """Two Relu nodes with symbolic shapes on a static-shape device: each reason names the
    node's own tensors, with or without a ``when`` condition (which passes here, so the
    static-shape reason is the one given)."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    nodes = [h.make_node("Relu", ["x"], ["a"], name="r1"), h.make_node("Relu", ["a"], ["b'q"], name="r2")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["n"])],
                         [h.make_tensor_value_info("b'q", T.FLOAT, ["n"])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    mg = load_model(path)
    npu = {"supported": ["Relu"], "static_shapes": True}
    if when:
        npu["when"] = {"Relu": {"max_rank": 4}}
    rules = load_rules({"version": 1, "devices": [
        {"name": "NPU", "ops": npu}, {"name": "CPU", "ops": {"supported": "all"}}]})
    checker = SupportChecker(rules, mg)
    first, second = checker.refusal(0, 0), checker.refusal(0, 1)
    assert first == "input 0 'x' has a non-static shape ['n'] (NPU needs static shapes)"
    assert second == "input 0 'a' has a non-static shape ['n'] (NPU needs static shapes)"


def test_a_cached_refusal_names_each_nodes_own_tensors(tmp_path):
    """Two Relu nodes with the same signature (static shapes) refused by a ``when``
    condition: the second answer comes from the signature cache and must name the second
    node's tensors."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    nodes = [h.make_node("Relu", ["x"], ["a"], name="r1"), h.make_node("Relu", ["a"], ["b'q"], name="r2")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                         [h.make_tensor_value_info("b'q", T.FLOAT, [2, 3])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    mg = load_model(path)
    rules = load_rules({"version": 1, "devices": [
        {"name": "NPU", "ops": {"supported": ["Relu"], "static_shapes": True,
                                "when": {"Relu": {"max_rank": 1}}}},
        {"name": "CPU", "ops": {"supported": "all"}}]})
    checker = SupportChecker(rules, mg)
    first, second = checker.refusal(0, 0), checker.refusal(0, 1)
    assert first == "input 0 'x' has rank 2, NPU takes at most 1 (ops.when.Relu.max_rank)"
    assert second == "input 0 'a' has rank 2, NPU takes at most 1 (ops.when.Relu.max_rank)"
    assert len(checker._node_cache) == 1


def test_a_constant_with_open_dims_is_not_taken_for_static(tmp_path):
    """An initializer also declared as a graph input with a symbolic dim (IR >= 4: an input
    with a default) has an open shape: a static-shape device refuses the node reading it,
    with or without a ``when`` condition."""
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
    nodes = [h.make_node("Add", ["x", "c"], ["a"], name="add"),
             h.make_node("Relu", ["a"], ["y"], name="relu")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2]),
                                      h.make_tensor_value_info("c", T.FLOAT, ["n"])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2])],
                         initializer=[nh.from_array(np.ones(2, np.float32), "c")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    mg = load_model(path)
    assert "c" in mg.nonstatic
    rules = load_rules({"version": 1, "devices": [
        {"name": "NPU", "ops": {"supported": ["Add", "Relu"], "static_shapes": True}},
        {"name": "CPU", "ops": {"supported": "all"}}]})
    assert "'c' has a non-static shape" in SupportChecker(rules, mg).refusal(0, 0)


def test_placeholder_like_text_in_names_is_never_filled_in(tmp_path):
    """Cached refusals are computed on placeholder tensor names; a device name or a tensor
    name that looks like a placeholder must come out as it is (found by review)."""
    from onnx import TensorProto as T
    from onnx import helper as h
    lookalike = "\u27e8o0\u27e9"
    graph = h.make_graph([h.make_node("Relu", ["a" + lookalike], ["y"], name="r")], "g",
                         [h.make_tensor_value_info("a" + lookalike, T.FLOAT, ["n"])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["n"])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    mg = load_model(model)
    rules = load_rules({"version": 1, "devices": [
        {"name": lookalike, "ops": {"supported": "all", "static_shapes": True}},
        {"name": "CPU", "ops": {"supported": "all"}}]})
    assert SupportChecker(rules, mg).refusal(0, 0) == _uncached(rules, mg, 0, 0) == (
        f"input 0 'a{lookalike}' has a non-static shape ['n'] ({lookalike} needs static shapes)")


@pytest.mark.parametrize("model", example_models(), ids=lambda p: p.stem)
def test_compiled_refusals_are_the_checkers_reasons(model):
    """compile_problem keeps reasons unformatted (problem.Refusals); read back, they are the
    checker's texts word for word, plus the pins' own."""
    from hetero_solve.compile import compile_problem
    from hetero_solve.errors import HeteroSolveError
    mg = load_model(model)   # symbolic dims left open: static-shape devices refuse a lot
    compiled = 0
    for profile in rule_profiles():
        rules = load_rules(profile)
        try:
            p = compile_problem(mg, rules)
        except HeteroSolveError:
            continue
        compiled += 1
        checker = SupportChecker(rules, mg)
        want = {(v, d): why for d in range(len(rules.devices)) for v, g in enumerate(p.graph_index)
                if (why := checker.refusal(d, g)) is not None}
        got = dict(p.refusals)
        assert len(p.refusals) == len(got)
        assert {k: w for k, w in got.items() if not w.startswith("pinned to ")} == want
        for v, d in want:
            assert p.why_not(v, d) == want[(v, d)]
    assert compiled > 0


def test_refusals_mapping():
    from hetero_solve.problem import NonStaticShape, Refusals
    lazy = NonStaticShape("input", 0, "x", ("n",), "NPU")
    text = "input 0 'x' has a non-static shape ['n'] (NPU needs static shapes)"
    r = Refusals([[None, "op", lazy], [None, None, None]])
    assert dict(r) == {(1, 0): "op", (2, 0): text} and len(r) == 2
    assert (0, 0) not in r and r.get((5, 7)) is None and r.get((2, 0)) == text
    r[(0, 1)] = "pinned to X"
    r[(1, 0)] = "overridden"
    assert dict(r) == {(0, 1): "pinned to X", (1, 0): "overridden", (2, 0): text}
    del r[(1, 0)]
    assert (1, 0) not in r and len(r) == 2
    with pytest.raises(KeyError):
        del r[(0, 0)]


def test_a_compiled_problem_pickles_without_the_model_or_callables():
    """A compiled problem is plain data: pickled, it holds no ONNX protobuf (the model would
    come along) and no function or method, and reads back the same reasons."""
    import io
    import pickle
    import types

    import onnx
    from google.protobuf.message import Message
    from hetero_solve.compile import compile_problem

    class Recorder(pickle.Pickler):
        def __init__(self, f):
            super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
            self.seen: set[type] = set()

        def reducer_override(self, obj):
            self.seen.add(type(obj))
            return NotImplemented

    mg = load_model(EXAMPLES / "transformer_encoder.onnx", dims={"batch": 1})  # seq left open
    rules = load_rules({"version": 1, "devices": [
        {"name": "NPU", "ops": {"supported": "all", "static_shapes": True,
                                "when": {"MatMul": {"max_rank": 3}}}},
        {"name": "CPU", "ops": {"supported": "all"}}]})
    p = compile_problem(mg, rules)
    assert len(p.refusals) > 0
    f = io.BytesIO()
    rec = Recorder(f)
    rec.dump(p)
    bad = {t for t in rec.seen if issubclass(t, Message) or issubclass(
        t, (types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.LambdaType))}
    assert not bad
    assert not any(issubclass(t, onnx.ModelProto) for t in rec.seen)
    back = pickle.loads(f.getvalue())
    assert dict(back.refusals) == dict(p.refusals)
    # Nor does the live object refer to any (no __reduce__ hides what it holds).
    import gc
    seen, stack, kinds = set(), [p], set()
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        kinds.add(type(obj))
        stack.extend(gc.get_referents(obj))
    assert not {t for t in kinds if issubclass(t, Message) or issubclass(
        t, (types.FunctionType, types.MethodType))}


def test_a_when_condition_reason_comes_before_the_static_shape_one(tmp_path):
    """A node a static-shape device refuses for a non-static tensor is refused at once; the
    reason, made when read, is still the when condition's when that refuses too."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    graph = h.make_graph([h.make_node("Add", ["x", "x"], ["y"], name="add")], "g",
                         [h.make_tensor_value_info("x", T.INT64, ["n"])],
                         [h.make_tensor_value_info("y", T.INT64, ["n"])])
    mg = load_model(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]))
    rules = load_rules({"version": 1, "devices": [
        {"name": "NPU", "ops": {"supported": ["Add"], "static_shapes": True,
                                "when": {"Add": {"dtypes": ["float32"]}}}},
        {"name": "CPU", "ops": {"supported": "all"}}]})
    from hetero_solve.compile import compile_problem
    p = compile_problem(mg, rules)
    assert p.allowed == [(1,)]
    assert p.why_not(0, 0) == _uncached(rules, mg, 0, 0) == \
        "input 0 'x' is int64, NPU takes float32 (ops.when.Add.dtypes)"
