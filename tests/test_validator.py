"""The one validator catches every kind of violation and names the nodes and parts."""

from __future__ import annotations

import hetero_solve as hs
from hetero_solve import Device, Solution, make_problem, validate


def kinds(p, sol, **kw):
    return [v.kind for v in validate(p, sol, **kw)]


def test_a_valid_partition_has_no_violations():
    p = make_problem(3, [(0, 1), (1, 2)], [[0], [1], [0]])
    assert validate(p, Solution([0, 1, 2], [0, 1, 0], [0, 0, 0])) == []


def test_structure_errors():
    p = make_problem(3, [(0, 1), (1, 2)], [[0], [0], [0]])
    assert kinds(p, Solution([0, 0], [0], [0])) == ["structure"]
    assert kinds(p, Solution([0, 0, 3], [0], [0])) == ["structure"]
    assert kinds(p, Solution([0, 0, 0], [0, 0], [0, 0])) == ["structure"]        # part 1 empty
    assert kinds(p, Solution([0, 0, 0], [0], [1])) == ["structure"]              # no instance 1


def test_support_violation_names_node_and_reason():
    p = make_problem(2, [(0, 1)], [[0], [1]], names=["conv", "softmax"], op_types=["Conv", "Softmax"])
    p.refusals[(1, 0)] = "Softmax is not in ACC's ops.supported"
    (v,) = validate(p, Solution([0, 0], [0], [0]))
    assert v.kind == "support" and v.nodes == ["softmax"] and v.parts == [0]
    assert "Softmax is not in ACC's ops.supported" in v.message


def test_pin_violation():
    p = make_problem(2, [(0, 1)], [[0], [1]])
    p.pinned = [-1, 1]
    (v,) = validate(p, Solution([0, 0], [0], [0]))
    assert v.kind == "pin" and "pinned to CPU" in v.message


def test_three_convex_parts_can_still_form_a_cycle():
    """A->B->C->A where each part is convex on its own: a1->b1->c1->a2."""
    p = make_problem(4, [(0, 1), (1, 2), (2, 3)], [[0]] * 4, devices=["ACC"],
                     names=["a1", "b1", "c1", "a2"])
    (v,) = validate(p, Solution([0, 1, 2, 0], [0, 0, 0], [0, 0, 0]))
    assert v.kind == "cycle" and v.parts == [0, 1, 2]
    assert v.message == "parts 0 -> 1 -> 2 -> 0 form a cycle (via 'a1' -> 'b1', 'b1' -> 'c1', 'c1' -> 'a2')"


def test_ids_that_are_not_topological():
    p = make_problem(2, [(0, 1)], [[0], [1]])
    assert kinds(p, Solution([1, 0], [1, 0], [0, 0])) == ["order"]
    assert kinds(p, Solution([1, 0], [1, 0], [0, 0]), require_order=False) == []


def test_value_violation_only_on_enforcing_devices():
    p = make_problem(2, [], [[0], [0]], devices=[Device("ACC")], value_edges=[(0, 1)])
    assert kinds(p, Solution([0, 0], [0], [0])) == ["value"]
    q = make_problem(2, [], [[0], [0]], devices=[Device("ACC", enforce_values=False)], value_edges=[(0, 1)])
    assert kinds(q, Solution([0, 0], [0], [0])) == []


def test_memory_sums_parts_per_instance():
    # each node: 10-byte constant, 5-byte output; part {0,1}: 20 + 5 (output of 1) = 25
    p = make_problem(4, [(0, 1), (2, 3)], [[0]] * 4, devices=[Device("ACC", 30, 2)],
                     tensor_bytes=5, const_bytes=10)
    assert kinds(p, Solution([0, 0, 1, 1], [0, 0], [0, 1])) == []
    (v,) = validate(p, Solution([0, 0, 1, 1], [0, 0], [0, 0]))
    assert v.kind == "memory" and "over its 30 B by 20 B" in v.message and v.parts == [0, 1]


def test_check_raises_with_the_violations():
    p = make_problem(2, [(0, 1)], [[0], [1]])
    try:
        hs.check(p, Solution([0, 0], [0], [0]))
    except hs.ValidationError as e:
        assert e.violations[0].kind == "support"
    else:
        raise AssertionError("check accepted an invalid partition")
