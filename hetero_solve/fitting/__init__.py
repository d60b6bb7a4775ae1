"""Fitting parts into memory: one home for the heuristic, the exact engine, ``check`` and the
bounds (docs/ARCHITECTURE.md, "Fitting into memory").

A part's memory itself is defined in :mod:`hetero_solve.measures` (``part_memory``,
``MemoryTracker``, ``fitting_runs``); everything here calls it and never recounts it.

* :mod:`.order`: the branch-by-branch topological order that runs are cut along.
* :mod:`.cuts`: cutting a part into runs (contiguous stretches of that order) that fit a room.
* :mod:`.packing`: first-fit packing of parts or runs into device instances, and the bin
  packing lower bound.
* :mod:`.network`: a node set's memory as a minimum cut (which nodes can ever be on a device,
  which to keep when it is too small).
* :mod:`.floors`: what any part holding a node must hold, and which devices' limits can bind.
* :mod:`.devices`: the devices each node may use (``device_sets``, ``R(v)``).
* :mod:`.bounds`: lower bounds memory forces: parts per device (packing) and fallback.
* :mod:`.placement`: the heuristic's device per node when memory binds.
* :mod:`.fit`: the heuristic's fit of a partition into instances (``fit_memory``).
* :mod:`.realize`: the exact engine's fit of a device choice into runs (``realize``,
  ``fit_by_runs``).
"""
