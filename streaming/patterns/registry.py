"""The pattern registry: the versioned set of stateful (Cayuga) subscriptions.

Records ``{"op": "upsert", "id": ..., "pattern": "<CEL>"}`` on the subscriptions topic
register a pattern (compiled first: a bad one becomes an error record), ``{"op":
"delete", "id": ...}`` or a tombstone removes one; records without ``"pattern"`` are the
match query's and only replace a pattern of the same id. Envelopes are read by
:func:`streaming.records.read_envelope`, and a record it refuses is the match query's to
report. Each batch that changes something writes the next version, ``v<version>.json``
(the whole set ``{id: [text, since_version, partition attribute]}`` and the batch id, so a replayed batch is
not applied twice), atomically through :class:`streaming.storage.Directory` under the
checkpoint location, where the executors read it.

With tenants (:mod:`streaming.tenants`) every tenant's subscriptions topic is read too: a
tenant's pattern ``x`` is ``t:x`` here, its bad records go to its errors topic, and an
upsert past its ``patterns`` quota is refused there.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

import orjson

from matchers.cayuga.compiler import chains, partition_attribute
from matchers.cayuga.engine import Engine
from matchers.cayuga.language import TICK_MS, parse
from matchers.errors import PubSubError
from streaming.config import LimitsSettings
from streaming.errors import RegistryError
from streaming.records import (
    DEFAULT_LIMITS,
    DELETE,
    UPSERT,
    ErrorRecord,
    Position,
    error,
    read_envelope,
)
from streaming.storage import Directory
from streaming.tenants import OPERATOR, Tenants

PATTERN = "pattern"
"""Stage of a pattern record the patterns query refused."""
ALL_KEY = "*"
"""The state key of the events of patterns without a partition attribute."""

_VERSION_FILE = re.compile(r"^v(\d{12})\.json$")
Patterns = dict[str, list]
"""``{subscription id: [CEL text, registry version it was registered at, partition attribute
or None]}`` (the attribute computed once, on the driver; files without it are read too)."""


class PatternRegistry:
    """Versioned patterns: ``v<version>.json`` per version under a URI or path (version 0 empty)."""

    def __init__(self, directory: str | Path):
        self.dir = Directory(directory)
        self.dir.make()
        if not any(_VERSION_FILE.match(n) for n in self.dir.names()):
            self._write(0, -1, {})

    def _write(self, version: int, batch_id: int, patterns: Patterns) -> None:
        self.dir.write(f"v{version:012d}.json",
                       orjson.dumps({"version": version, "batch_id": batch_id, "patterns": patterns}))

    def latest(self) -> tuple[int, int, Patterns]:
        """``(version, batch id, patterns)`` of the newest version."""
        return load_registry(self.dir.uri)

    def before(self, batch_id: int) -> Patterns:
        """The patterns as they were before batch ``batch_id`` (the newest when it is a new batch)."""
        version, last_batch, patterns = self.latest()
        while batch_id <= last_batch and version > 0:
            version -= 1
            obj = orjson.loads(self.dir.read(f"v{version:012d}.json"))
            last_batch, patterns = int(obj["batch_id"]), obj["patterns"]
        return patterns

    def apply(self, batch_id: int, changes: list[tuple[str, str, str | None]]) -> int:
        """Write the next version with ``(op, id, text)`` changes; idempotent per batch."""
        version, last_batch, patterns = self.latest()
        if batch_id <= last_batch or not changes:
            return version
        patterns = dict(patterns)
        new_version = version + 1
        for op, sub_id, text in changes:
            if op == DELETE:
                patterns.pop(sub_id, None)
            else:
                patterns[sub_id] = [text, new_version, partition_attribute(chains(parse(text)))]  # type: ignore[arg-type]  # an upsert carries its text
        self._write(new_version, batch_id, patterns)
        return new_version


_registry_cache: dict[str, tuple[int, tuple[int, int, Patterns]]] = {}


def load_registry(directory: str) -> tuple[int, int, Patterns]:
    """Newest registry version in ``directory``, a URI or path (cached per process by version).

    Raises
    ------
    RegistryError
        If there is no registry there (a missing registry is never read as an empty one).
    """
    store = Directory(directory)
    try:
        names = store.names()
    except FileNotFoundError:
        names = []
    versions = [int(m.group(1)) for n in names if (m := _VERSION_FILE.match(n))]
    if not versions:
        raise RegistryError(f"no pattern registry at {store.uri} (is the checkpoint location shared with the executors?)")
    v = max(versions)
    cached = _registry_cache.get(directory)
    if cached is not None and cached[0] == v:
        return cached[1]
    obj = orjson.loads(store.read(f"v{v:012d}.json"))
    value = (v, int(obj["batch_id"]), obj["patterns"])
    _registry_cache[directory] = (v, value)
    return value


def parse_pattern_change(
    key: bytes | None, value: bytes | None, position: Position, known: set[str],
    limits: LimitsSettings = DEFAULT_LIMITS, internal: Callable[[str], str] = str,
) -> tuple[str, str, str | None] | ErrorRecord | None:
    """One subscriptions record as a pattern change, an error, or ``None`` (not a pattern).

    ``internal`` gives the registry's id of the record's id (its tenant's, with tenants);
    ``known`` holds registry ids. A record whose envelope the match query refuses is
    ``None``: that query reports it.
    """
    envelope = read_envelope(key, value, position, limits)
    if isinstance(envelope, ErrorRecord):
        return None
    op, public, obj = envelope
    sub_id = internal(public)
    if op == DELETE or obj is None or "pattern" not in obj:
        # a delete, or a boolean subscription (the match job's) replacing a pattern of that id
        return (DELETE, sub_id, None) if sub_id in known else None
    problem = pattern_error(public, obj, key, value, position)
    return problem if problem is not None else (UPSERT, sub_id, obj["pattern"])


def pattern_error(public: str, obj: dict, key: bytes | None, value: bytes | None,
                  position: Position) -> ErrorRecord | None:
    """Why the pattern subscription ``public`` (a record ``obj`` holding ``"pattern"``) is
    refused, or ``None``: a CEL pattern the compiler takes, and no target topic."""
    text = obj["pattern"]
    if not isinstance(text, str):
        return error(PATTERN, value, position, '"pattern" must be a string (a CEL expression)', key)
    if "target" in obj:
        return error(PATTERN, value, position, f"subscription {public!r}: a pattern names no target topic "
                     "(its notifications go to the notifications topic of its tenant)", key)
    try:
        chains(parse(text))
    except PubSubError as exc:
        return error(PATTERN, value, position, f"subscription {public!r}: {exc}", key)
    except (ValueError, TypeError, RecursionError, OverflowError, UnicodeError) as exc:
        return error(PATTERN, value, position, f"subscription {public!r}: {type(exc).__name__}: {exc}", key)
    return None


def apply_pattern_records(registry: PatternRegistry, batch_id: int, rows: Iterable[tuple],
                          limits: LimitsSettings = DEFAULT_LIMITS,
                          tenants: Tenants | None = None) -> tuple[int, list[ErrorRecord]]:
    """Apply a batch of subscriptions records ``(key, value, topic, partition, offset)``.

    Returns the registry version after the batch and the error records (their position's
    topic tells whose errors topic: :meth:`Tenants.errors_topic_of`). A replayed batch is
    judged against the patterns before it, so it refuses what it refused the first time.
    """
    known = set(registry.before(batch_id))
    held = Counter(Tenants.split(p)[0] for p in known)
    changes: list[tuple[str, str, str | None]] = []
    errors: list[ErrorRecord] = []
    for key, value, topic, partition, offset in rows:
        tenant = tenants.tenant_of_topic(topic) if tenants is not None else OPERATOR
        out = parse_pattern_change(key, value, Position(topic, partition, offset), known, limits,
                                   partial(Tenants.internal, tenant) if tenants is not None else str)
        if out is None:
            continue
        if isinstance(out, ErrorRecord):
            errors.append(out)
            continue
        op, sub_id, _ = out
        if op == UPSERT and sub_id not in known and tenants is not None:
            reason = tenants.refusal(tenant, Tenants.split(sub_id)[1], "patterns", held[tenant] + 1)
            if reason is not None:
                errors.append(error(PATTERN, value, Position(topic, partition, offset), reason, key))
                continue
        changes.append(out)
        if op == DELETE:
            known.discard(sub_id)
            held[tenant] -= 1
        elif sub_id not in known:
            known.add(sub_id)
            held[tenant] += 1
    return registry.apply(batch_id, changes), errors


# -- the worker's view of the registry (cached per process and registry version) --------------
_partition_cache: dict[tuple[str, int], tuple[list[str], bool]] = {}
_engines: dict[tuple[str, int, str | None, int], dict[str, Engine]] = {}


def partition_keys(registry_dir: str) -> tuple[int, list[str], bool]:
    """Registry version, the partition attributes in use, and whether any pattern has none."""
    version, _, patterns = load_registry(registry_dir)
    cached = _partition_cache.get((registry_dir, version))
    if cached is None:
        attrs: set[str] = set()
        unkeyed = False
        for entry in patterns.values():
            a = _attribute(entry)
            if a is None:
                unkeyed = True
            else:
                attrs.add(a)
        cached = (sorted(attrs), unkeyed)
        for old in [k for k in _partition_cache if k[0] == registry_dir]:
            del _partition_cache[old]
        _partition_cache[(registry_dir, version)] = cached
    return version, cached[0], cached[1]


def engines_for(registry_dir: str, gkey: str, tick_ms: int = TICK_MS) -> dict[str, Engine]:
    """The worker's compiled automata of the patterns partitioned like state key ``gkey``
    (``attr#bucket``, or :data:`ALL_KEY`), one per tenant holding some (the operator's under
    ``""``: in the single-tenant layout the only one), without instances; durations with a
    unit in ticks of ``tick_ms``. No instance is shared between tenants, so each tenant's
    live instances are its own to count (the ``pattern_instances`` quota)."""
    version, _, patterns = load_registry(registry_dir)
    attr = None if gkey == ALL_KEY else gkey.rsplit("#", 1)[0]
    ck = (registry_dir, version, attr, tick_ms)
    engines = _engines.get(ck)
    if engines is None:
        for old in [k for k in _engines if k[0] == registry_dir and k[1] != version]:
            del _engines[old]
        engines = {}
        for sub_id, entry in sorted(patterns.items()):
            if _attribute(entry) == attr:
                tenant = Tenants.split(sub_id)[0]
                eng = engines.get(tenant)
                if eng is None:
                    eng = engines[tenant] = Engine(tick_ms=tick_ms)
                    eng.epoch = version
                eng.add(sub_id, entry[0], since=entry[1])
        _engines[ck] = engines
    return engines


def _attribute(entry: list) -> str | None:
    """The partition attribute of a registry entry (computed for an entry written without it)."""
    return entry[2] if len(entry) > 2 else partition_attribute(chains(parse(entry[0])))
