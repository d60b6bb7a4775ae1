"""The SAT engine's binary adder takes weights >= 0: a negative one (a tensor of negative
bytes, as a declared ``-1`` dim once gave) must be refused, not loop while it eats memory."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pysat.solvers import Solver

from hetero_solve.exact.sat import _CNF


def test_sum_bits_of_nonnegative_weights_is_the_binary_sum():
    with Solver(name="g4") as s:
        cnf = _CNF(SimpleNamespace(nv=3), s)
        bits = cnf.sum_bits([(5, 1), (3, 2), (6, 3)])
        for a in (False, True):
            for b in (False, True):
                for c in (False, True):
                    fix = [1 if a else -1, 2 if b else -2, 3 if c else -3]
                    assert s.solve(assumptions=fix)
                    model = set(s.get_model())
                    got = sum(1 << k for k, x in enumerate(bits) if x and x in model)
                    assert got == 5 * a + 3 * b + 6 * c


def test_a_negative_weight_is_refused():
    with Solver(name="g4") as s:
        cnf = _CNF(SimpleNamespace(nv=1), s)
        with pytest.raises(ValueError, match="negative weight"):
            cnf.sum_bits([(-12, 1)])
