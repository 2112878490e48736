"""The index each Python worker keeps between micro-batches, keyed by registry version.

Spark reuses its Python worker processes across batches, so a module-level cache
survives: a worker brings its matcher from the version it holds to the version a batch
needs by reading the registry's deltas after its own (:func:`~streaming.registry_columns.shards.catch_up`)
or, when it has no index (a new worker, a restart), holds a newer version than the batch
(a replayed batch), or is further behind than ``max_catchup`` versions, builds it from its
shard of the registry's files (:func:`~streaming.registry_columns.shards.build_shard`). The
driver sends only the registry's location and the version: its memory does not grow with
the subscriptions, and the location is one every executor reaches (a shared disk, HDFS, S3),
as the checkpoint is.

With ``IndexSpec.app_id`` set the index is shared by the Python workers of the machine
(:mod:`streaming.shared_index`): a worker first maps the newest version another one
published (and catches up from there), and a rebuild happens once per machine and
version and is published for the others.  Catching up changes a worker's private
copy-on-write pages only.

With shards, a worker drops the index of a shard it has not matched with for
:data:`DROP_AFTER_S` while it obtained :data:`DROP_AFTER_USES` other indexes (one its
executor no longer gets tasks for: the shard's group moved, :mod:`streaming.placement`),
and the shard's shared file too if no worker of the machine used it that long
(:func:`sweep`, at most every :data:`SWEEP_S`).

A worker encodes each event batch once against one *common* dictionary, the union of its
indexes' dictionaries, and each index gets the batch through its :class:`~matchers.translate.Translation`
(:func:`translation`; :mod:`matchers.translate`).
"""

from __future__ import annotations

import gc
import time
import zlib
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from matchers.base import Matcher
from matchers.catalog import create
from matchers.collector import long_lived
from matchers.events import Dictionary
from matchers.translate import Translation, common_dictionary
from streaming import shared_index
from streaming.registry_columns import shards as registry_shards
from streaming.registry_columns.files import MissingFile
from streaming.routing import Routing

IndexKey = tuple[str, str, int, int, tuple[tuple[str, Any], ...]]
"""What a cached index is kept under: registry, matcher, shard, shards, parameters."""


@dataclass(frozen=True)
class IndexSpec:
    """What a batch needs: which index, and at which version of the registry.

    Checked as it is made (by :func:`dataclasses.replace` too), on the driver: a wrong
    ``shard`` or ``shards`` is an error there, not on a worker.

    Parameters
    ----------
    registry : the columnar registry's location (a URI every executor reaches; with
        ``matcher``, the key of the cached index).
    matcher : matcher name.
    version : the registry version the batch matches against.
    max_catchup : a cached index further behind is rebuilt rather than caught up.
    shard, shards : the index holds the subscriptions of shard ``shard`` of ``shards``
        (:func:`shard_of`).
    app_id : the Spark application whose workers share the index on each machine
        (``None``: not shared).
    params : the matcher's parameters (``[match.params]``), sorted ``(name, value)`` pairs.
    routing : the registry's routing (``match.route_by``, :mod:`streaming.routing`; ``None``: none).

    Raises
    ------
    ValueError
        If ``shard`` is not one of ``0 .. shards - 1``.
    """

    registry: str
    matcher: str
    version: int
    max_catchup: int = 20
    shard: int = 0
    shards: int = 1
    app_id: str | None = None
    params: tuple[tuple[str, Any], ...] = ()
    routing: Routing | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.shard < self.shards:
            raise ValueError(f"index spec: shard {self.shard} of {self.shards} (shards are 0 .. shards - 1)")

    @property
    def key(self) -> IndexKey:
        return (self.registry, self.matcher, self.shard, self.shards, self.params)


@dataclass
class CachedIndex:
    matcher: Matcher
    version: int
    rebuilds: int = 0
    catchups: int = 0
    maps: int = 0
    used: float = 0.0
    """When a task last obtained it (``time.monotonic``)."""
    use: int = 0
    """How many indexes this process had obtained then (:data:`_uses`)."""
    translation: Translation | None = None
    """From :func:`common` to the matcher's dictionary (:func:`translation`)."""


_CACHE: dict[IndexKey, CachedIndex] = {}

DROP_AFTER_S = 300.0
"""A shard's index unused this long (and :data:`DROP_AFTER_USES`) is dropped from a worker."""
DROP_AFTER_USES = 100
"""... while the worker obtained this many indexes (so that a quiet stream drops nothing)."""
SWEEP_S = 60.0
"""A worker looks for such indexes (and marks its own shards' shared files as in use) at most this often."""
_last_sweep = [float("-inf")]
_uses = [0]
_COMMON = [common_dictionary()]


def common() -> Dictionary:
    """This process's common dictionary: what every batch is encoded against (:mod:`matchers.translate`)."""
    return _COMMON[0]


def translation(entry: CachedIndex) -> Translation:
    """``entry``'s translation from :func:`common` to its matcher's dictionary, brought up to date
    (the names and strings the matcher gained added to :func:`common`): call it for each of a
    task's indexes before encoding the task's events."""
    t = entry.translation
    if t is None or t.own is not entry.matcher.dictionary or t.common is not _COMMON[0]:
        t = entry.translation = Translation(_COMMON[0], entry.matcher.dictionary)
    t.update()
    return t


def shard_of(sub_id: str, shards: int) -> int:
    """The shard of an unrouted subscription: CRC-32 of its id modulo ``shards`` (the same in every
    process; a routed one's: :func:`streaming.routing.shard_keys`)."""
    return zlib.crc32(sub_id.encode("utf-8")) % shards


def build(spec: IndexSpec) -> Matcher:
    """A new matcher holding ``spec``'s shard of the registry at ``spec.version``, from its files.

    Raises
    ------
    RegistryError
        If that version is not stored (pruned, or never written) or a file is unreadable.
    """
    return registry_shards.build_shard(spec.registry, spec.version, spec.shard, spec.shards,
                                       lambda: create(spec.matcher, **dict(spec.params)),
                                       packed=spec.app_id is not None,  # to be published: pickled as read
                                       routing=spec.routing)


def _catch_up(entry: CachedIndex, spec: IndexSpec) -> bool:
    """Try to move ``entry`` forward to ``spec.version``; False if it must be rebuilt (too far
    behind, ahead, or the deltas it needs were pruned)."""
    if entry.version > spec.version or spec.version - entry.version > spec.max_catchup:
        return False
    try:
        with long_lived():
            registry_shards.catch_up(entry.matcher, spec.registry, entry.version, spec.version, spec.shard,
                                     spec.shards, spec.routing)
    except MissingFile:  # a delta it needs was pruned (read before anything is applied)
        return False
    except BaseException:
        _CACHE.pop(spec.key, None)  # half-applied: never serve it again
        raise
    entry.version = spec.version
    entry.catchups += 1
    return True


def index_for(spec: IndexSpec, then: tuple[int, ...] = ()) -> CachedIndex:
    """This process's index for ``spec``, brought to ``spec.version`` (and, with shards, a
    :func:`sweep` of the other shards' at most every :data:`SWEEP_S`).

    ``then``: the shards the caller asks for next. A shared index another worker of the machine
    is building meanwhile is waited for only after building one of them that no worker has
    (:func:`_build_ahead`): the machine's workers build different shards at once rather than
    each one in turn while the others wait."""
    entry = _obtain(spec, then)
    now = time.monotonic()
    _uses[0] += 1
    entry.used, entry.use = now, _uses[0]
    if spec.shards > 1 and now - _last_sweep[0] >= SWEEP_S:
        _last_sweep[0] = now
        sweep(spec, now, time.time())
    return entry


def sweep(spec: IndexSpec, now: float, wall: float, idle_s: float = DROP_AFTER_S,
          idle_uses: int = DROP_AFTER_USES) -> list[int]:
    """Drop the indexes of ``spec``'s other shards that this process has not used for ``idle_s``
    seconds before ``now`` (``time.monotonic``) nor in its last ``idle_uses`` obtained indexes.
    With ``spec.app_id``, mark the shared files of the shards it keeps as in use and unlink
    those of the dropped shards unless another process of the machine used them in the
    ``idle_s`` before ``wall`` (``time.time``). The shards dropped from this process."""
    family = (spec.registry, spec.matcher, spec.shards, spec.params)
    ours = {k[2]: e for k, e in _CACHE.items() if (k[0], k[1], k[3], k[4]) == family}
    dropped = sorted(shard for shard, e in ours.items()
                     if shard != spec.shard and now - e.used > idle_s and _uses[0] - e.use > idle_uses)
    for shard in dropped:
        del _CACHE[replace(spec, shard=shard).key]
    if spec.app_id is not None:
        for shard in ours:
            key = _shared_key(replace(spec, shard=shard))
            if shard in dropped:
                shared_index.drop_idle(key, idle_s, wall)
            else:
                shared_index.touch(key)
    if dropped:
        gc.collect()  # the dropped matchers' cycles, and with them their mappings
    return dropped


def _obtain(spec: IndexSpec, then: tuple[int, ...] = ()) -> CachedIndex:
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
            got = shared_index.obtain(_shared_key(spec), spec.version, lambda: build(spec), wait=not then)
            if got is None:  # another worker builds it: one of the next shards first
                _build_ahead(spec, then)
                got = shared_index.obtain(_shared_key(spec), spec.version, lambda: build(spec))
            matcher, built = got  # type: ignore[misc]  # waited for: never None
        entry = CachedIndex(matcher, spec.version, rebuilds + built, maps=maps + (not built))
    _CACHE[spec.key] = entry
    return entry


def _build_ahead(spec: IndexSpec, shards: tuple[int, ...]) -> None:
    """Build (and publish), or map, the first of ``shards`` (of ``spec``'s family and version) that
    this process has no index of and no other process is building, into the cache."""
    for shard in shards:
        ahead = replace(spec, shard=shard)
        if ahead.key in _CACHE:
            continue
        got = shared_index.obtain(_shared_key(ahead), ahead.version, partial(build, ahead), wait=False)
        if got is not None:
            _CACHE[ahead.key] = CachedIndex(got[0], ahead.version, rebuilds=int(got[1]), maps=int(not got[1]),
                                            used=time.monotonic(), use=_uses[0])  # not idle for sweep
            return


def _shared_key(spec: IndexSpec) -> shared_index.SharedKey:
    where = spec.registry if spec.shards == 1 else f"{spec.registry}#shard{spec.shard}of{spec.shards}"
    return shared_index.SharedKey(spec.app_id or "", where, spec.matcher)


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
    """Forget every cached index of this process, and the common dictionary."""
    _CACHE.clear()
    _COMMON[0] = common_dictionary()
