"""The cyclic garbage collector around long-lived objects (an index, a compiled automaton,
a worker's cached state): paused while they are built, then frozen out of later collections.

Spark's reused Python workers run a full ``gc.collect()`` after every task, and the
collector's own oldest generation scans every tracked object: with the imported modules and
a cache of compiled subscriptions that is 0.1 to 1 s each time here, unless they are frozen.
Light on purpose (no NumPy or Numba): importing it costs a fresh worker nothing.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

REFREEZE_GROWTH = 1.25
"""The frozen objects may grow to this multiple of those alive after the last full collection."""
_frozen_after_full = [0]


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: a bulk insert creates millions of long-lived
    objects, and each full collection it would trigger rescans the whole heap."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """Build long-lived objects without garbage collection, then freeze them out of it.

    A full collection scans every tracked object (about 3 s with 1,000,000 subscriptions
    held): none runs while the objects are made, one collects the garbage made since the
    last freeze (frozen objects are not scanned), and later ones skip what is frozen.
    Frozen objects that later become cyclic garbage are not collected, so when the frozen
    set has grown past :data:`REFREEZE_GROWTH` times what the last full collection left,
    it is unfrozen and collected in full first: memory stays within that bound of what is
    alive, at the cost of one full collection per such growth.
    """
    try:
        with no_cyclic_gc():
            yield
    finally:
        frozen = gc.get_freeze_count()
        full = frozen == 0 or frozen > REFREEZE_GROWTH * _frozen_after_full[0]
        if full:
            gc.unfreeze()
        gc.collect()
        gc.freeze()
        if full:
            _frozen_after_full[0] = gc.get_freeze_count()
