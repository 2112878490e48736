"""The pickled registry of earlier releases (read by :mod:`.legacy`) converted once, at start.

A checkpoint written before the columnar registry holds ``<checkpoint>/registry/`` (pickled
deltas and snapshots of parsed subscriptions). :func:`convert_pickled` turns its latest state
into the first version of the columnar registry: one upsert per subscription, its record
written back from the parsed subscription (the JSON form, :func:`matchers.language.to_record`,
under the tenant's own id and with its target topic, as the tenant's topic held it) and the
subscription packed (:func:`matchers.packed.pack`), recorded
at the old state's batch id and time, so a replay of that batch finds its version. Nothing is
converted once the columnar registry holds a version; the old files are left as they are.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path

import orjson

from matchers.expr import Subscription
from matchers.language import to_record
from matchers.packed import pack
from streaming.records import count_predicates
from streaming.registry_columns.columns import EXPRESSION, UPSERT, ChangeBatch
from streaming.registry_columns.legacy import read_pickled
from streaming.registry_columns.registry import Applied, ColumnRegistry
from streaming.storage import Directory
from streaming.tenants import parts

log = logging.getLogger(__name__)


def record_of(internal: str, sub: Subscription) -> bytes:
    """The subscription record of a parsed subscription held under ``internal`` (a tenant's id
    ``t:x`` or ``t>topic:x``: the record names ``x`` and the target topic)."""
    _, target, public = parts(internal)
    record = to_record(dataclasses.replace(sub, id=public), form="json")
    if target is not None:
        record["target"] = target
    return orjson.dumps(record)


def upserts_of(subscriptions: Mapping[str, Subscription]) -> ChangeBatch:
    """One expression upsert per parsed subscription ``{internal id: Subscription}`` (records written
    back, subscriptions packed)."""
    ids, subs = list(subscriptions), list(subscriptions.values())
    return ChangeBatch.of(
        ids, [UPSERT] * len(ids), [EXPRESSION] * len(ids), [record_of(i, s) for i, s in subscriptions.items()],
        [float("nan") if s.expires is None else s.expires for s in subs],
        [parts(i)[0] for i in ids], [count_predicates(s) for s in subs], [pack(s) for s in subs])


def convert_pickled(old: str | Path | Directory, registry: ColumnRegistry) -> Applied | None:
    """Convert the pickled registry at ``old`` into ``registry`` if ``registry`` holds no version
    yet and ``old`` holds one; what :meth:`ColumnRegistry.apply` did (``None``: nothing to convert).

    Raises
    ------
    RegistryError
        If the pickled registry is unreadable.
    """
    location = old if isinstance(old, Directory) else Directory(old)
    if registry.version or registry.batch_id >= 0 or not location.exists():
        return None
    state = read_pickled(location)
    if state.batch_id < 0:
        return None
    applied = registry.apply(state.batch_id, upserts_of(state.subscriptions), state.time)
    log.info("registry: converted the pickled registry %s (version %d, batch %d, %d subscriptions) into %s "
             "(version %d); the old files are no longer read", location.uri, state.version, state.batch_id,
             len(state.subscriptions), registry.directory.uri, applied.version)
    return applied
