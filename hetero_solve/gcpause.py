"""Pausing Python's cyclic garbage collector around allocation-heavy work."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector.  The pipeline creates hundreds of thousands of small
    acyclic lists and tuples; each allocation burst would trigger collections that rescan every
    live object (40 % of compile time at 100,000 nodes).  Reference counting still frees
    everything; the previous GC state is restored."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
