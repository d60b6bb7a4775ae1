"""Baselines from the literature and from production partitioners, each a pure function
``Problem -> Solution`` in its own module, faithful to its source (the design documents named in each module, the project's seed
documents 000-003).  They return what their source would produce, even when that breaks
a constraint the source does not know (memory, value-dependent inputs): the study validates
every answer and reports the violation instead of hiding it.

- :func:`openvino`: OpenVINO HETERO subgraph selection (seed 000).
- :func:`graphcycles`: XLA-style edge contraction with GraphCycles / Pearce-Kelly (seed 002).
- :func:`longest_path`: longest-path clustering with 0/1 edge weights (seed 002).
- :func:`glow`: Glow's backend-based then memory-based partitioning (seed 003).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...problem import Problem
from ...solution import Solution
from ._common import BaselineSkipped
from .glow import glow
from .graphcycles import graphcycles
from .longest_path import longest_path
from .openvino import openvino


@dataclass(frozen=True)
class Baseline:
    """A baseline by name: what the heuristic compares itself with and ``study`` runs."""

    name: str
    run: Callable[[Problem], Solution]
    description: str


#: The one list of baselines (a new one: its module here, and a row).
BASELINES: dict[str, Baseline] = {b.name: b for b in (
    Baseline("openvino", openvino, "OpenVINO HETERO subgraph selection (seed 000)"),
    Baseline("graphcycles", graphcycles, "XLA-style edge contraction with GraphCycles (seed 002)"),
    Baseline("longest-path", longest_path, "longest-path clustering, 0/1 edge weights (seed 002)"),
    Baseline("glow", glow, "Glow backend-then-memory partitioning (seed 003)"),
)}

__all__ = ["BASELINES", "Baseline", "BaselineSkipped", "glow", "graphcycles", "longest_path",
           "openvino"]
