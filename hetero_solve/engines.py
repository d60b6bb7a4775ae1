"""The engines a solve can use, by name: the one list that the pipeline, ``check``,
``explain``, the exact package and the command line read (the study's algorithms add the
baselines of :data:`hetero_solve.algorithms.baselines.BASELINES`).

To add an engine: a row here, and its dispatch in :func:`hetero_solve.pipeline.refine` (or,
for a solver of the exact stage, in :mod:`hetero_solve.exact`).  See docs/exact.md.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Engine:
    """A value of ``--engine``.

    Parameters
    ----------
    name : str
        What ``--engine`` and ``engine=`` take.
    exact : bool
        It runs the exact stage (``hetero_solve.exact``) after the heuristic; ``explain``
        takes only these.
    description : str
        One line for ``--help``.
    """

    name: str
    exact: bool
    description: str


#: Every engine, in the order ``--help`` lists them; ``auto`` is the default.
ENGINES: dict[str, Engine] = {e.name: e for e in (
    Engine("auto", True, "best available: bounds, CP-SAT, then SAT to close a gap"),
    Engine("heuristic", False, "greedy only (and its lower bound)"),
    Engine("cpsat", True, "CP-SAT refinement only"),
    Engine("sat", True, "SAT refinement only"),
)}
#: The engines that run the exact stage.
EXACT_ENGINES: tuple[str, ...] = tuple(n for n, e in ENGINES.items() if e.exact)


def check_engine(name: str, *, exact: bool = False) -> None:
    """Refuse an engine name that is not in :data:`ENGINES` (or, with ``exact``, in
    :data:`EXACT_ENGINES`).

    Raises
    ------
    ValueError
        Naming the engines it could be.

    Examples
    --------
    >>> check_engine("cpsat", exact=True)
    >>> check_engine("heuristic", exact=True)
    Traceback (most recent call last):
    ...
    ValueError: engine must be one of auto, cpsat, sat, not 'heuristic'
    """
    names = EXACT_ENGINES if exact else tuple(ENGINES)
    if name not in names:
        raise ValueError(f"engine must be one of {', '.join(names)}, not {name!r}")
