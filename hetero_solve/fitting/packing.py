"""Packing parts (or runs) into the instances of a device, and how many instances they need
at least (docs/ARCHITECTURE.md, "Fitting into memory").

One packing, :func:`first_fit`, for every caller; they differ in where an item goes and what
happens to one that fits nowhere, and say so through its parameters (each keeps what it did
before this was one function, so answers do not change):

* the heuristic's whole parts (:mod:`.fit`): in part order (``decreasing=False``), into the
  roomiest instance, none left over;
* the heuristic's pieces and runs (:mod:`.fit`): largest first, into the first with room;
* the exact engine's runs (:mod:`.realize`): largest first, into the roomiest;
* the heuristic's candidate answers (``algorithms/greedy.py``): largest first, into the first
  with room, else instance 0 (``full="first"``: the validator rejects the candidate);
* ``check`` (``user_map.py``): the parts a map gives no instance, after those it does
  (``loads``), into the first with room, else the least loaded (``full="least"``: the
  validator names the overflow).

>>> first_fit([6, 5, 4, 3], 10, 2)
([0, 1, 0, 1], 0)
>>> first_fit([6, 5, 4, 3], 10, 2, into="roomiest")
([0, 1, 1, 0], 0)
>>> first_fit([6, 6, 6], 10, 2)                  # the third fits nowhere
([0, 1, -1], 6)
>>> first_fit([6, 6, 6], 10, 2, full="least")    # ... or goes where there is least
([0, 1, 0], 0)
"""

from __future__ import annotations

from typing import Literal, Sequence

import numpy as np


def first_fit(sizes: Sequence[int], cap: int, bins: int, *, decreasing: bool = True,
              into: Literal["first", "roomiest"] = "first",
              full: Literal["skip", "first", "least"] = "skip",
              loads: Sequence[int] | None = None) -> tuple[list[int], int]:
    """Place items of ``sizes`` bytes into ``bins`` bins of ``cap`` bytes.

    Parameters
    ----------
    sizes : sequence of int
    cap : int
        Bytes per bin (one instance's memory).
    bins : int
        Number of bins (instances).
    decreasing : bool
        Largest items first (ties in their given order); else in the given order.
    into : {"first", "roomiest"}
        The first bin with room, or the bin with the most room (the first of those).
    full : {"skip", "first", "least"}
        An item no bin has room for: left out (its bin ``-1``, its bytes counted), or put
        in bin 0, or in the least loaded bin, anyway (a caller that reports the overflow as a
        violation).
    loads : sequence of int, optional
        Bytes already in each bin.

    Returns
    -------
    (list of int, int)
        The bin of each item (``-1`` when left out) and the bytes left out.
    """
    load = list(loads) if loads is not None else [0] * bins
    where = [-1] * len(sizes)
    left = 0
    items = range(len(sizes))
    for k in (sorted(items, key=lambda k: -sizes[k]) if decreasing else items):
        size = sizes[k]
        if into == "first":
            b = next((i for i in range(bins) if load[i] + size <= cap), -1)
        else:
            b = min(range(bins), key=lambda i: (load[i], i))
            b = b if load[b] + size <= cap else -1
        if b < 0:
            if full == "skip":
                left += size
                continue
            b = 0 if full == "first" else min(range(bins), key=load.__getitem__)
        load[b] += size
        where[k] = b
    return where, left


def bin_packing_bound(sizes: Sequence[int], cap: int) -> int:
    """The least number of bins of ``cap`` bytes that hold items of ``sizes`` at least
    (Martello and Toth's L2, 1990): for every ``a <= cap / 2``, the items over ``cap - a``
    and those over ``cap / 2`` each need a bin of their own, and the items of at least ``a``
    and at most ``cap / 2`` need what the room those bins leave cannot take.  Never below
    ``ceil(sum / cap)`` (``a = 0``).

    >>> bin_packing_bound([6, 6, 5], 10), bin_packing_bound([6, 6, 5, 4, 4], 10)
    (3, 3)
    """
    s = np.sort(np.asarray([x for x in sizes if x > 0], dtype=np.int64))
    if not len(s):
        return 0
    best = -(-int(s.sum()) // cap)
    small = s[2 * s <= cap]                          # ascending
    large = s[2 * s > cap]                           # ascending
    large_prefix = np.concatenate([[0], np.cumsum(large)])
    small_suffix = np.concatenate([np.cumsum(small[::-1])[::-1], [0]])
    alphas = np.unique(np.concatenate([[0], small]))
    # J1: items > cap - a; J2: cap/2 < items <= cap - a; J3: a <= items <= cap/2
    j2_end = np.searchsorted(large, cap - alphas, side="right")       # large[:j2_end] are J2
    n1 = len(large) - j2_end
    j3_sum = small_suffix[np.searchsorted(small, alphas, side="left")]
    room = j2_end * cap - large_prefix[j2_end]
    rest = np.maximum(0, -(-(j3_sum - room) // cap))
    return max(best, int((n1 + j2_end + rest).max()))
