"""The index each Python worker keeps between micro-batches, keyed by registry version.

Spark reuses its Python worker processes across batches, so a module-level cache
survives: a worker brings its matcher from the version it holds to the version a
batch needs with the deltas shipped along with the batch, or reads them from the
registry on disk, or, when it has no index (a new worker, a restart), holds a newer
version than the batch (a replayed batch), or is more than ``max_catchup`` versions
behind, rebuilds from the latest snapshot plus the deltas after it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple

from matchers.base import Matcher, create, no_cyclic_gc
from streaming.registry import Delta, RegistryError, load_state, net_changes, read_deltas


class IndexSpec(NamedTuple):
    """What a batch needs: which index, at which version, and the recent deltas to reach it."""

    registry_dir: str
    matcher: str
    version: int
    deltas: tuple[Delta, ...] = ()
    max_catchup: int = 20

    @property
    def key(self) -> tuple[str, str]:
        return (self.registry_dir, self.matcher)


@dataclass
class CachedIndex:
    matcher: Matcher
    version: int
    rebuilds: int = 0
    catchups: int = 0


_CACHE: dict[tuple[str, str], CachedIndex] = {}


def apply(matcher: Matcher, deltas: list[Delta]) -> None:
    """Bring ``matcher`` forward by consecutive ``deltas``."""
    deletes, upserts = net_changes(deltas)
    matcher.remove(deletes)
    matcher.add(upserts)


def build(spec: IndexSpec) -> Matcher:
    """A new matcher holding the registry at ``spec.version`` (from snapshot plus deltas)."""
    state = load_state(spec.registry_dir, spec.version)
    matcher = create(spec.matcher)
    matcher.add(state.subscriptions.values())
    return matcher


@contextmanager
def long_lived() -> Iterator[None]:
    """Build long-lived objects without garbage collection, then freeze them out of it.

    A full collection scans every tracked object (about 3 s with 1,000,000 subscriptions
    held): none runs while the objects are made, one collects the garbage made since the
    last freeze (frozen objects are not scanned), and later ones skip what is frozen.
    """
    try:
        with no_cyclic_gc():
            yield
    finally:
        gc.collect()
        gc.freeze()


def _catch_up(entry: CachedIndex, spec: IndexSpec) -> bool:
    """Try to move ``entry`` forward to ``spec.version``; False if it must be rebuilt."""
    if entry.version > spec.version or spec.version - entry.version > spec.max_catchup:
        return False
    shipped = [d for d in spec.deltas if entry.version < d.version <= spec.version]
    versions = [d.version for d in shipped]
    if versions != list(range(entry.version + 1, spec.version + 1)):
        try:
            shipped = read_deltas(spec.registry_dir, entry.version, spec.version)
        except RegistryError:
            return False
    try:
        with long_lived():
            apply(entry.matcher, shipped)
    except BaseException:
        _CACHE.pop(spec.key, None)  # half-applied: never serve it again
        raise
    entry.version = spec.version
    entry.catchups += 1
    return True


def index_for(spec: IndexSpec) -> CachedIndex:
    """This process's index for ``spec``, brought to ``spec.version``."""
    entry = _CACHE.get(spec.key)
    if entry is not None and entry.version == spec.version:
        return entry
    if entry is not None and _catch_up(entry, spec):
        return entry
    rebuilds = entry.rebuilds + 1 if entry is not None else 1
    _CACHE.pop(spec.key, None)  # free the old index before building the new one
    with long_lived():
        entry = CachedIndex(build(spec), spec.version, rebuilds)
    _CACHE[spec.key] = entry
    return entry


def clear() -> None:
    """Forget every cached index of this process."""
    _CACHE.clear()
