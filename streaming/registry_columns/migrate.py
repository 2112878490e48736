"""The pickled registry of earlier releases (read by :mod:`.legacy`) converted once, at start.

A checkpoint written before the columnar registry holds ``<checkpoint>/registry/`` (pickled
deltas and snapshots of parsed subscriptions). :func:`convert_pickled` turns its latest state
into the first version of the columnar registry: one upsert per subscription, its record
written back from the parsed subscription (the JSON form, :func:`matchers.language.to_record`,
under the tenant's own id and with its target topic, as the tenant's topic held it) and the
subscription packed (:func:`matchers.packed.pack`), recorded
at the old state's batch id and time, so a replay of that batch finds its version. Nothing is
converted once the columnar registry holds a version; the old files are left as they are.

A checkpoint of the release before the pattern view (:mod:`.view`) holds the patterns in their
own registry, ``<checkpoint>/patterns/pattern-registry/v<version>.json`` (the whole set
``{id: [text, since, partition attribute]}`` per version). :func:`import_patterns` records its
newest set as one version of the columnar registry (:meth:`ColumnRegistry.append`), keeping
each pattern's ``since`` and the old version as the view's ``base``, so that the instances in
Spark's state stay as their patterns saw them. Nothing is imported once the registry has a
pattern view (its first is written in the step that records that version, or when the registry
is loaded after a crash between the two).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping
from pathlib import Path

import orjson

from matchers.expr import Subscription
from matchers.language import to_record
from matchers.packed import pack
from streaming.errors import RegistryError
from streaming.records import count_predicates
from streaming.registry_columns import view
from streaming.registry_columns.columns import EXPRESSION, PATTERN, UPSERT, ChangeBatch
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


_LEGACY_VIEW = re.compile(r"^v(\d{12})\.json$")


def legacy_patterns(old: Directory) -> tuple[int, dict[str, list]]:
    """The newest version of the pattern registry of earlier releases at ``old`` and its patterns
    ``{internal id: [text, since, attribute]}`` (``(0, {})``: none there).

    Raises
    ------
    RegistryError
        If its newest file is unreadable.
    """
    try:
        names = old.names()
    except FileNotFoundError:
        return 0, {}
    found = sorted(int(m.group(1)) for n in names if (m := _LEGACY_VIEW.match(n)))
    if not found:
        return 0, {}
    name = f"v{found[-1]:012d}.json"
    try:
        obj = orjson.loads(old.read(name))
        patterns = {str(k): [str(e[0]), int(e[1]), e[2] if len(e) > 2 else _attribute(str(e[0]))]
                    for k, e in obj["patterns"].items()}
        return int(obj["version"]), patterns
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise RegistryError(f"cannot read the pattern registry file {old.uri}/{name}: "
                            f"{type(exc).__name__}: {exc}") from None


def _attribute(text: str) -> str | None:
    """The partition attribute of a pattern (files written before it was kept lack it)."""
    from matchers.cayuga.compiler import chains, partition_attribute
    from matchers.cayuga.language import parse

    return partition_attribute(chains(parse(text)))


def pattern_upserts(patterns: dict[str, list], base: int) -> ChangeBatch:
    """One pattern upsert per entry ``{internal id: [text, since, attribute]}`` of the old registry
    (records written back under the tenant's own id; ``since`` and ``base`` kept, :func:`.view.packed`)."""
    ids = sorted(patterns)
    texts, attrs = [patterns[i][0] for i in ids], [patterns[i][2] for i in ids]
    return ChangeBatch.of(
        ids, [UPSERT] * len(ids), [PATTERN] * len(ids),
        [orjson.dumps({"id": parts(i)[2], "pattern": t}) for i, t in zip(ids, texts, strict=True)],
        tenants=[parts(i)[0] for i in ids],
        packed=[view.packed(t, a, patterns[i][1], base) for i, t, a in zip(ids, texts, attrs, strict=True)])


def import_patterns(old: str | Path | Directory, registry: ColumnRegistry) -> Applied | None:
    """Import the newest pattern set of the old pattern registry at ``old`` into ``registry`` as one
    version, if ``registry`` has no pattern view yet; what :meth:`ColumnRegistry.append` did
    (``None``: nothing to import).

    Raises
    ------
    RegistryError
        If the old registry is unreadable.
    """
    location = old if isinstance(old, Directory) else Directory(old)
    if view.versions(registry.directory) or registry.patterns:
        return None
    version, patterns = legacy_patterns(location)
    if not patterns:
        return None
    registry.base = max(registry.base, version)
    applied = registry.append(pattern_upserts(patterns, registry.base))
    log.info("registry: imported %d patterns of the pattern registry %s (version %d) into %s (version %d); the "
             "old files are no longer read", len(patterns), location.uri, version, registry.directory.uri,
             applied.version)
    return applied
