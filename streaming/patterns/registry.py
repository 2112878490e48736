"""The patterns of the registry as the ``patterns`` query sees them: the judging of a pattern
record, and the worker's view (the partition keys in use, the compiled engines).

Records ``{"op": "upsert", "id": ..., "pattern": "<CEL>"}`` on the subscriptions topic
register a pattern (compiled first, :func:`pattern_change`: a bad one becomes an error record),
``{"op": "delete", "id": ...}`` or a tombstone removes one, and an expression of the same id
replaces it: the match query judges them all, as columns
(:mod:`streaming.registry_columns.parse`, :mod:`~streaming.registry_columns.admit`: the
tenants' ``patterns`` quota too), and its one registry stores them
(:class:`~streaming.registry_columns.ColumnRegistry`). Each version that changes a pattern
writes the whole set as the pattern view (:mod:`streaming.registry_columns.view`), which the
executors read here (:func:`current`, cached per process by version).
"""

from __future__ import annotations

from matchers.cayuga.compiler import chains, partition_attribute
from matchers.cayuga.engine import Engine
from matchers.cayuga.language import TICK_MS, parse
from matchers.errors import PubSubError
from streaming.records import ErrorRecord, Position, error
from streaming.registry_columns import view
from streaming.registry_columns.view import Patterns, View
from streaming.tenants import Tenants

PATTERN = "pattern"
"""Stage of a pattern record refused."""
ALL_KEY = "*"
"""The state key of the events of patterns without a partition attribute."""

__all__ = ["ALL_KEY", "PATTERN", "Patterns", "View", "current", "engines_for", "partition_keys", "pattern_change"]


def current(registry_dir: str) -> View:
    """The newest pattern view of the registry at ``registry_dir`` (a URI or path; cached per
    process by version).

    Raises
    ------
    RegistryError
        If there is no registry there (a missing registry is never read as an empty one).
    """
    return view.latest(registry_dir)


def pattern_change(public: str, obj: dict, key: bytes | None, value: bytes | None,
                   position: Position) -> ErrorRecord | bytes:
    """Why the pattern subscription ``public`` (a record ``obj`` holding ``"pattern"``) is
    refused, or its ``packed`` column (:func:`~streaming.registry_columns.view.packed`: the
    text and its partition attribute): a CEL pattern the compiler takes, and no target topic."""
    text = obj["pattern"]
    if not isinstance(text, str):
        return error(PATTERN, value, position, '"pattern" must be a string (a CEL expression)', key)
    if "target" in obj:
        return error(PATTERN, value, position, f"subscription {public!r}: a pattern names no target topic "
                     "(its notifications go to the notifications topic of its tenant)", key)
    try:
        attribute = partition_attribute(chains(parse(text)))
    except PubSubError as exc:
        return error(PATTERN, value, position, f"subscription {public!r}: {exc}", key)
    except (ValueError, TypeError, RecursionError, OverflowError, UnicodeError) as exc:
        return error(PATTERN, value, position, f"subscription {public!r}: {type(exc).__name__}: {exc}", key)
    return view.packed(text, attribute)


# -- the worker's view of the registry (cached per process and registry version) --------------
_partition_cache: dict[tuple[str, int], tuple[list[str], bool]] = {}
_engines: dict[tuple[str, int, str | None, int], dict[str, Engine]] = {}


def partition_keys(registry_dir: str) -> tuple[int, list[str], bool]:
    """The view's version, the partition attributes in use, and whether any pattern has none."""
    got = current(registry_dir)
    version, patterns = got.version, got.patterns
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
    got = current(registry_dir)
    version, patterns = got.version, got.patterns
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
                    eng.epoch = got.epoch
                eng.add(sub_id, entry[0], since=entry[1])
        _engines[ck] = engines
    return engines


def _attribute(entry: list) -> str | None:
    """The partition attribute of a view's entry."""
    return entry[2]
