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

from ._common import BaselineSkipped
from .glow import glow
from .graphcycles import graphcycles
from .longest_path import longest_path
from .openvino import openvino

BASELINES = {
    "openvino": openvino,
    "graphcycles": graphcycles,
    "longest-path": longest_path,
    "glow": glow,
}

__all__ = ["BASELINES", "BaselineSkipped", "glow", "graphcycles", "longest_path", "openvino"]
