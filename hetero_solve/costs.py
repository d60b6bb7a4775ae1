"""The cost model: how long each node takes on each device, what a part costs to dispatch,
and what moving a tensor costs (the ``latency`` and ``throughput`` terms of docs/costs.md).

Plain data, read by the measures (:mod:`hetero_solve.measures.costs`) and the exact solver
(:mod:`hetero_solve.exact.costs`) alike.  **Units**: one time unit throughout a model, seconds
unless ``unit`` says otherwise (an imported instance keeps the unit its authors used); bytes
for volumes, bytes per time unit for bandwidths.

Transfers are staged through **host memory**, as ``hetero-solve run`` hands tensors from part
to part and as Tarnawski et al. (NeurIPS 2020) model accelerators: each device has a link
between its own memory and host memory (``links[d]``; ``None`` = the device computes in host
memory, the CPU, and moves nothing).  A tensor leaving its producer's part is written to host
memory once over the producer's link; each part (``latency``) or device instance
(``throughput``) that reads it elsewhere reads it once over its own link.  Graph inputs and
outputs are not transfers (as docs/problem.md's ``transfer``).

>>> c = CostModel(node_time=[[1.0, 4.0], [None, 2.0]], part_cost=[0.5, 0.0],
...               links=[Link(bandwidth=100.0, latency=0.25), None])
>>> c.time(0, 1), c.transfer_time(0, 50), c.transfer_time(1, 50)
(4.0, 0.75, 0.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence


@dataclass(frozen=True)
class Link:
    """A device's link to host memory: ``latency`` per tensor plus bytes / ``bandwidth``
    (``None`` = unlimited bandwidth)."""

    bandwidth: float | None = None
    latency: float = 0.0

    def time(self, nbytes: float) -> float:
        """Time to move one tensor of ``nbytes`` over this link, one way."""
        return self.latency + (nbytes / self.bandwidth if self.bandwidth else 0.0)


@dataclass(frozen=True)
class Roofline:
    """A device's roofline (a rule file's ``roofline``, docs/costs.md): a node of ``flops``
    operations moving ``nbytes`` takes ``max(flops / (peak x efficiency), nbytes /
    bandwidth)``.

    >>> Roofline(flops=1e12, bandwidth=1e10, efficiency={"Conv": 0.5}).time("Conv", 1e9, 1e6)
    0.002
    """

    flops: float                          # peak operations per second
    bandwidth: float                      # bytes per second
    efficiency: Mapping[str, float] = field(default_factory=dict)   # op type -> (0, 1]

    def time(self, op_type: str, flops: float, nbytes: float) -> float:
        """Seconds for one node of ``op_type``."""
        rate = self.flops * self.efficiency.get(op_type, 1.0)
        return max(flops / rate, nbytes / self.bandwidth)


@dataclass
class CostModel:
    """Times for the cost terms (docs/costs.md); see the module doc for units and transfers.

    Parameters
    ----------
    node_time : list of list of (float or None)
        ``node_time[v][d]``: node ``v``'s time on device ``d`` (``None`` where ``d`` cannot
        run it; never read for a device ``v`` is not allowed on).
    part_cost : list of float
        Per device, the fixed time each part placed there costs (dispatch, synchronisation).
    links : list of (Link or None)
        Per device, its link to host memory; ``None``: the device works in host memory.
    volume : list of float or None
        Per tensor, what a link moves (bytes); ``None``: ``Problem.tensor_bytes``.  An
        imported instance whose transfer costs are times sets the times here with links of
        bandwidth 1.
    contiguous : bool
        Pipeline stages: at most one part per device instance (every answer must obey it).
    unit : str
        The time unit, for reports.
    option_time : list of list of (float or None), optional
        Per fold option (``Problem.fold_options``), its times per device as ``node_time``
        has them: the rows a problem that places it gains (:meth:`placing`).
    """

    node_time: list[list[float | None]]
    part_cost: list[float]
    links: list[Link | None]
    volume: list[float] | None = None
    contiguous: bool = False
    unit: str = "s"
    option_time: list[list[float | None]] | None = None

    def placing(self, options: Sequence[int]) -> "CostModel":
        """The cost model of the problem with the fold ``options`` placed, as new nodes in that
        order after the others (:func:`hetero_solve.exact.folds.unfold`)."""
        extra = [list(self.option_time[k]) if self.option_time is not None else
                 [0.0] * len(self.part_cost) for k in options]
        return replace(self, node_time=self.node_time + extra, option_time=None)

    def time(self, v: int, d: int) -> float:
        """Node ``v``'s time on device ``d``."""
        t = self.node_time[v][d]
        if t is None:
            raise ValueError(f"node {v} has no time on device {d}")
        return t

    def transfer_time(self, d: int, nbytes: float) -> float:
        """One tensor of ``nbytes`` over device ``d``'s link, one way (0 without a link)."""
        link = self.links[d]
        return 0.0 if link is None else link.time(nbytes)

    def tensor_time(self, d: int, t: int, tensor_bytes: Sequence[int]) -> float:
        """Tensor ``t`` over device ``d``'s link, one way."""
        return self.transfer_time(d, (self.volume if self.volume is not None else tensor_bytes)[t])
