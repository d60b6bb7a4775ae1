"""What :func:`hetero_solve.solve` returns: a record of the answer and what it was computed from.

The files of an answer (``partition.json``, the part models, the affinity map, pictures) are
built from it by :mod:`hetero_solve.export` (:func:`hetero_solve.write_result`), which reads it and
never changes it; this module imports nothing of export.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .algorithms.single import SingleDevice
from .model import ModelGraph
from .problem import Problem
from .rules import Rules
from .solution import Metrics, Solution


@dataclass
class Result:
    """A partition of a model under a rule file, with everything needed to export it.

    Parameters
    ----------
    model_graph : ModelGraph
        The loaded model (shapes inferred, foldable nodes folded).
    rules : Rules
        The validated rule file, includes merged.
    problem : Problem
        The compiled problem the solvers read: node ``v`` is ``model_graph`` node
        ``problem.graph_index[v]``.
    solution : Solution
        The answer: part per node, device and instance per part, status, lower bound.
    metrics : Metrics
        The objective terms (fallback, partitions, transfer) and part memories of ``solution``.
    seconds : dict of str to float
        Wall time per pipeline stage (``rules``, ``load``, ``compile``, ...).
    warnings : list of str
        What the user should know about the answer (also issued through Python ``warnings``
        by :func:`hetero_solve.solve`).
    explanation : dict or None
        Why at least ``solution.lower_bound`` parts are needed, when the solver found out.
    instance : str or None
        The instance file the problem was read from (:mod:`hetero_solve.instances`), which
        has no model (``model_graph`` and ``rules`` are then ``None``).
    single_device : SingleDevice or None
        With a cost model: the whole model on the best single device that can run it, the
        answer to compare with (docs/costs.md).
    measured : dict or None
        The answer and the single devices measured on this machine before answering
        (``solve --measure``: :mod:`hetero_solve.profiles.answers`), as ``partition.json``
        records it; ``None`` when not measured.

    Examples
    --------
    >>> import hetero_solve as hs
    >>> r = hs.solve("examples/resnet_like.onnx", "rules/npu-static.yaml")   # doctest: +SKIP
    >>> r.metrics.partitions, r.solution.status                              # doctest: +SKIP
    (3, 'optimal')
    >>> hs.write_result(r, "resnet.hetero")                                  # doctest: +SKIP
    PosixPath('resnet.hetero')
    """

    model_graph: ModelGraph | None
    rules: Rules | None
    problem: Problem
    solution: Solution
    metrics: Metrics
    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    explanation: dict | None = None
    instance: str | None = None
    single_device: "SingleDevice | None" = None
    measured: dict | None = None

    def parts(self) -> list[list[int]]:
        """The problem node ids of each part, part by part."""
        return self.solution.parts()
