"""What a partition measures (docs/problem.md), in one place.

* :mod:`.definitions`: the readable definitions: memory of a part, every part's memory and
  the transfer, fallback, quotient edges, part boundaries, and the two walks the rest build
  on: the tensors crossing between parts (:func:`crossings`) and the tensors at a part's
  edge (:func:`boundary_tensors`).
* :mod:`.costs`: the cost terms (latency, throughput) and where they go, on those walks.
* :mod:`.arrays`: the same measures as numpy passes over flat arrays, used when a problem
  carries them (``Problem.arrays``: compile builds them for large models).
* :mod:`.order`: topological orders of nodes and of parts (the one quotient order).
* :mod:`.tracker`: the memory of a part being grown node by node, and the runs of a
  topological order that fit a room.

Nothing here depends on a :class:`~hetero_solve.solution.Solution`: a partition is
``part_of`` (node -> part) and, where devices matter, ``part_device`` (part -> device).
"""

from .arrays import ProblemArrays, problem_arrays
from .definitions import (boundary_tensors, crossings, fallback_count, off_preferred,
                          open_figures, part_boundaries, part_memories, part_memory,
                          quotient_edges, transfer_bytes)
from .order import find_cycle, part_order, quotient_order, topological_order
from .tracker import MemoryTracker, RunInputs, fitting_runs

__all__ = [
    "MemoryTracker", "ProblemArrays", "RunInputs", "boundary_tensors", "crossings",
    "fallback_count", "fitting_runs", "find_cycle", "off_preferred", "open_figures",
    "part_boundaries", "part_memories", "part_memory", "part_order", "problem_arrays",
    "quotient_edges", "quotient_order", "topological_order", "transfer_bytes",
]
