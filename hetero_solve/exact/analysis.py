"""What every exact engine needs to know about a problem before modelling it.

* :func:`~hetero_solve.fitting.devices.device_sets`: the devices each node may use in the
  solutions under consideration (``R(v)``), defined with the memory fitting it rests on.
* :func:`shared_devices`: the devices an edge's ends could share a part on.
"""

from __future__ import annotations

from ..fitting.devices import device_sets
from ..problem import Problem

__all__ = ["device_sets", "shared_devices"]


def shared_devices(problem: Problem, R: list[tuple[int, ...]], u: int, v: int) -> tuple[int, ...]:
    """Devices on which ``u`` and ``v`` (an edge u -> v) could share a part: common to both
    sets and, for a value edge, not enforcing value inputs.  Empty = a forced break."""
    common = tuple(d for d in R[u] if d in R[v])
    if not common or u not in problem.value_pred[v]:
        return common
    devs = problem.devices
    return tuple(d for d in common if not devs[d].enforce_values)
