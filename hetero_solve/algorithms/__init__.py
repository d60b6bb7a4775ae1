"""Partitioning algorithms.  Each is a pure function of a :class:`~hetero_solve.problem.Problem`
returning a :class:`~hetero_solve.solution.Solution`; one module per algorithm."""

from .greedy import greedy, heuristic

__all__ = ["greedy", "heuristic"]
