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
"""The objects frozen since the last full collection may reach this fraction more than it left alive."""
_frozen = {"alive": 0, "since": 0}
"""Objects frozen by the last full collection, and frozen since (counted as they are frozen:
``gc.get_freeze_count()`` walks the whole frozen set, 0.3 s a call in a loaded worker here)."""


class no_cyclic_gc:  # lower case: used like the function it was, ``with no_cyclic_gc():``
    """Pause the cyclic garbage collector: a bulk insert creates millions of long-lived
    objects, and each full collection it would trigger rescans the whole heap; a batch of
    events (``Engine.process_batch``) frees most of what it makes before it ends.

    A class, not a generator: leaving it allocates nothing, so no collection starts while
    what the block returns is still held only by the caller's frame.
    """

    __slots__ = ("enabled",)

    def __enter__(self) -> None:
        self.enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *_exc: object) -> None:
        if self.enabled:
            gc.enable()


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """Build long-lived objects without garbage collection, then freeze them out of it.

    A full collection scans every tracked object (about 3 s with 1,000,000 subscriptions
    held): none runs while the objects are made, one collects the garbage made since the
    last freeze (frozen objects are not scanned), and later ones skip what is frozen.
    Frozen objects that later become cyclic garbage are not collected, so once the objects
    frozen since the last full collection exceed ``REFREEZE_GROWTH - 1`` times what it left
    alive, everything is unfrozen and collected in full first: the frozen garbage stays within
    that fraction of the live objects, at the cost of one full collection per such growth.
    """
    try:
        with no_cyclic_gc():
            yield
    finally:
        if _frozen["since"] >= (REFREEZE_GROWTH - 1) * _frozen["alive"]:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            _frozen.update(alive=gc.get_freeze_count(), since=0)
        else:
            gc.collect()  # the objects made since the last freeze only
            _frozen["since"] += len(gc.get_objects(generation=2))
            gc.freeze()
