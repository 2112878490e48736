"""The index each Python worker keeps between micro-batches, keyed by registry version.

Spark reuses its Python worker processes across batches, so a module-level cache
survives: a worker brings its matcher from the version it holds to the version a
batch needs with the deltas shipped along with the batch, or reads them from the
registry on disk, or, when it has no index (a new worker, a restart), holds a newer
version than the batch (a replayed batch), or is more than ``max_catchup`` versions
behind, rebuilds from the latest snapshot plus the deltas after it.

With ``IndexSpec.app_id`` set the index is shared by the Python workers of the machine
(:mod:`streaming.shared_index`): a worker first maps the newest version another one
published (and catches up from there), and a rebuild happens once per machine and
version and is published for the others.  Catching up changes a worker's private
copy-on-write pages only.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple

from matchers.base import Matcher, create, no_cyclic_gc
from streaming import shared_index
from streaming.registry import Delta, RegistryError, load_state, net_changes, read_deltas


class IndexSpec(NamedTuple):
    """What a batch needs: which index, at which version, and the recent deltas to reach it."""

    registry_dir: str
    matcher: str
    version: int
    deltas: tuple[Delta, ...] = ()
    max_catchup: int = 20
    app_id: str | None = None
    """Spark application whose workers share the index on each machine (``None``: not shared)."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.registry_dir, self.matcher)


@dataclass
class CachedIndex:
    matcher: Matcher
    version: int
    rebuilds: int = 0
    catchups: int = 0
    maps: int = 0


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
    if spec.app_id is not None:
        entry = _map_newer(entry, spec)
        if entry is not None and entry.version == spec.version:
            return entry
    if entry is not None and _catch_up(entry, spec):
        return entry
    rebuilds, maps = (entry.rebuilds, entry.maps) if entry is not None else (0, 0)
    _CACHE.pop(spec.key, None)  # free the old index before building the new one
    with long_lived():
        if spec.app_id is None:
            matcher, built = build(spec), True
        else:  # built here, or mapped from what another worker built meanwhile
            matcher, built = shared_index.obtain(_shared_key(spec), spec.version, lambda: build(spec))
        entry = CachedIndex(matcher, spec.version, rebuilds + built, maps=maps + (not built))
    _CACHE[spec.key] = entry
    return entry


def _shared_key(spec: IndexSpec) -> shared_index.SharedKey:
    return shared_index.SharedKey(spec.app_id or "", spec.registry_dir, spec.matcher)


def _map_newer(entry: CachedIndex | None, spec: IndexSpec) -> CachedIndex | None:
    """``entry``, or the newest version between it and ``spec.version`` that another worker published."""
    with long_lived():  # the unpickled objects live as long as a built index's
        found = shared_index.newest(_shared_key(spec), entry.version if entry is not None else -1, spec.version)
    if found is None:
        return entry
    version, matcher = found
    counts = (entry.rebuilds, entry.catchups, entry.maps + 1) if entry is not None else (0, 0, 1)
    _CACHE[spec.key] = entry = CachedIndex(matcher, version, *counts)
    return entry


def clear() -> None:
    """Forget every cached index of this process."""
    _CACHE.clear()
