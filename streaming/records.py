"""Kafka records to accepted subscription changes, events, and error records.

Nothing here raises on bad input: a record that cannot be used becomes an
:class:`ErrorRecord` (the raw bytes, base64 when they are not UTF-8, where they came
from, a readable reason and a deterministic id) for the ``errors`` topic, and the
stream goes on. Records past the bounds of :class:`~streaming.config.LimitsSettings`
are refused with the limit, the value and the bound.

Subscription records (topic ``subscriptions``, keyed by subscription id) hold
``{"op": "upsert", "id": ..., "expr": "text"}``, ``{"op": "upsert", "id": ...,
"json": {...}}`` or ``{"op": "upsert", "id": ..., "rule": {...}}`` (an event pattern)
with an optional ``"expires"``, or ``{"op": "delete", "id": ...}``; a
record with a key and no value (a Kafka tombstone) deletes the key's subscription.
``op`` defaults to ``upsert``.  A record with a ``"pattern"`` (a Cayuga expression) is a
stateful subscription for :mod:`streaming.patterns`; here it only replaces a boolean
subscription of the same id.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import orjson

from matchers.errors import PubSubError, TooManyRows
from matchers.events import Rows, flatten
from matchers.expr import DEFAULT_MAX_TERMS, And, Not, Or, Subscription, Value
from streaming.config import LimitsSettings
from streaming.notifications import notification_id

UPSERT = "upsert"
DELETE = "delete"
OPS = (UPSERT, DELETE)
MAX_ID_LENGTH = 256

EVENT = "event"
"""Stage of an event the match query refused (not matched)."""

RAW_KEPT = 16_384
"""Characters of a rejected record's value (bytes when base64) kept in its error record."""
TEXT_KEPT = 1_024
"""Characters of a reason or a record key kept in an error record."""
PARSER_DEPTH = 1024
"""Deepest nesting the JSON parser (orjson) reads."""
TOO_DEEP = f"nested more than {PARSER_DEPTH} levels deep"
DEFAULT_LIMITS = LimitsSettings()

SubscriptionParser = Callable[[Mapping[str, Any], int], Subscription]
"""``parse(record_without_op, max_terms) -> Subscription``; raises a :class:`PubSubError`."""


class Position(NamedTuple):
    """Where a record came from."""

    topic: str
    partition: int
    offset: int

    def event_id(self) -> str:
        """The id of the event here when it has no id field of its own: ``topic/partition/offset``."""
        return f"{self.topic}/{self.partition}/{self.offset}"


class Change(NamedTuple):
    """An accepted subscription change: an upsert carries its subscription, and the target
    topic its record named (tenants only, :mod:`streaming.tenants`)."""

    op: str
    id: str
    subscription: Subscription | None
    position: Position | None = None
    target: str | None = None


class ErrorRecord(NamedTuple):
    """A record that was rejected, with the reason (one line on the ``errors`` topic).

    ``raw`` holds at most :data:`RAW_KEPT` characters of the value (``raw_bytes`` is its
    whole size); the id is :func:`~streaming.notifications.notification_id` of the stage and
    the position, so a replay repeats it.
    """

    raw: str
    encoding: str
    position: Position
    reason: str
    stage: str
    key: str | None = None
    raw_bytes: int = 0
    truncated: bool = False
    ident: str | None = None
    """An id of its own, for a record about no one input position (a pattern's warning)."""

    @property
    def id(self) -> str:
        return self.ident or notification_id(self.stage, *self.position)

    def to_json(self) -> bytes:
        return orjson.dumps({
            "id": self.id,
            "stage": self.stage,
            "reason": self.reason,
            "topic": self.position.topic,
            "partition": self.position.partition,
            "offset": self.position.offset,
            "key": self.key,
            "encoding": self.encoding,
            "raw": self.raw,
            "raw_bytes": self.raw_bytes,
            "truncated": self.truncated,
        })


def raw_text(data: bytes | None) -> tuple[str, str]:
    """``(text, encoding)`` of raw bytes: UTF-8 text, else base64."""
    if data is None:
        return "", "none"
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def _cut(text: str, kept: int) -> str:
    return text if len(text) <= kept else text[:kept] + f"... ({len(text)} characters)"


def error(stage: str, data: bytes | None, position: Position, reason: str, key: bytes | None = None) -> ErrorRecord:
    """An :class:`ErrorRecord` for raw bytes (value, reason and key cut to a bounded size)."""
    text, encoding = raw_text(data)
    size = 0 if data is None else len(data)
    truncated = len(text) > RAW_KEPT if encoding == "utf-8" else size > RAW_KEPT
    if truncated:
        text = text[:RAW_KEPT] if encoding == "utf-8" else base64.b64encode(data[:RAW_KEPT]).decode("ascii")  # type: ignore[index]  # truncated: data is not None
    key_text = None if key is None else _cut(raw_text(key)[0], TEXT_KEPT)
    return ErrorRecord(text, encoding, position, _cut(reason, TEXT_KEPT), stage, key_text, size, truncated)


def over(what: str, value: Any, limit: str, bound: int) -> str:
    """The reason of a record past a limit: ``what (value) exceeds limits.limit = bound``."""
    return f"{what} ({value}) exceeds limits.{limit} = {bound}"


def load_json(data: bytes) -> tuple[Any, str | None]:
    """Parse JSON bytes: ``(value, None)`` or ``(None, reason)``; never raises.

    orjson refuses what is not strict JSON or not representable: ``NaN`` and
    ``Infinity``, numbers beyond the 64-bit float range (``1e400``), invalid UTF-8, lone
    surrogate escapes (``"\\ud800"``), unescaped control characters, and nesting deeper
    than :data:`PARSER_DEPTH` (reason :data:`TOO_DEEP`). Integers beyond 64 bits read as floats.
    """
    try:
        return orjson.loads(data), None
    except orjson.JSONDecodeError as exc:
        message = str(exc)
    except TypeError:
        return None, f"not JSON bytes but {type(data).__name__}"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8: {exc}"
    if message.startswith("depth limit exceeded"):
        return None, TOO_DEEP
    if "surrogate" in message:
        return None, f"invalid (lone) surrogate escape: {message}"
    if "infinity when parsed" in message:
        return None, f"a number beyond the 64-bit float range: {message}"
    if _NON_FINITE.search(data):
        return None, f"NaN and Infinity are not JSON numbers: {message}"
    return None, f"malformed JSON: {message}"


_NON_FINITE = re.compile(rb"[:\[,]\s*-?(NaN|Infinity)\b")


def default_parser() -> SubscriptionParser:
    """The subscription language's record parser (:func:`matchers.language.parse_record`)."""
    from matchers.language import parse_record

    return lambda record, max_terms: parse_record(dict(record), max_terms=max_terms)


def count_predicates(sub: Subscription) -> int:
    """Predicates of a subscription's expression (each occurrence counts)."""
    count, stack = 0, [sub.expr]
    while stack:
        e = stack.pop()
        if isinstance(e, (And, Or)):
            stack.extend(e.children)
        elif isinstance(e, Not):
            stack.append(e.child)
        else:
            count += 1
    return count


SUBSCRIPTION = "subscription"
"""Stage of a subscription record the match query refused."""


def read_envelope(
    key: bytes | None, value: bytes | None, position: Position, limits: LimitsSettings = DEFAULT_LIMITS,
) -> tuple[str, str, dict[str, Any] | None] | ErrorRecord:
    """``(op, id, record)`` of a subscriptions record whose envelope is sound, or its error record.

    Checks the key, the size, the JSON object, ``op``, ``id`` (and that it is the key) and
    that a delete holds nothing else; a tombstone is ``(DELETE, key, None)``. Both the match
    and the patterns query read records through it, and only the match query reports.
    """
    key_id: str | None = None
    if key is not None:
        try:
            key_id = key.decode("utf-8")
        except UnicodeDecodeError:
            return error(SUBSCRIPTION, value, position, "the record key is not UTF-8", key)
    if value is None:
        if not key_id:
            return error(SUBSCRIPTION, value, position,
                         "a record without value (tombstone) needs the subscription id as key", key)
        return DELETE, key_id, None
    if len(value) > limits.subscription_bytes:
        return error(SUBSCRIPTION, value, position, over(
            "the subscription record's size", f"{len(value)} bytes", "subscription_bytes", limits.subscription_bytes), key)
    obj, reason = load_json(value)
    if reason is not None:
        return error(SUBSCRIPTION, value, position, reason, key)
    if not isinstance(obj, dict):
        return error(SUBSCRIPTION, value, position,
                     f"a subscription record must be a JSON object, not {type(obj).__name__}", key)
    op = obj.get("op", UPSERT)
    if op not in OPS:
        return error(SUBSCRIPTION, value, position, f"unknown op {op!r}: expected 'upsert' or 'delete'", key)
    sub_id = obj.get("id", key_id)
    if not isinstance(sub_id, str) or not sub_id or len(sub_id) > MAX_ID_LENGTH:
        return error(SUBSCRIPTION, value, position,
                     f"the subscription id must be a non-empty string of at most {MAX_ID_LENGTH} characters, "
                     f"not {sub_id!r}", key)
    if key_id is not None and key_id != sub_id:
        return error(SUBSCRIPTION, value, position, f"the record key {key_id!r} differs from the id {sub_id!r}", key)
    if op == DELETE:
        extra = sorted(set(obj) - {"op", "id"})
        if extra:
            return error(SUBSCRIPTION, value, position,
                         f"subscription {sub_id!r}: a delete takes only op and id, not {extra}", key)
    return op, sub_id, obj


def parse_change(
    key: bytes | None,
    value: bytes | None,
    position: Position,
    parse: SubscriptionParser,
    max_terms: int = DEFAULT_MAX_TERMS,
    limits: LimitsSettings = DEFAULT_LIMITS,
    targets: bool = False,
) -> Change | ErrorRecord:
    """One subscription record as an accepted :class:`Change` or an :class:`ErrorRecord`.

    With ``targets`` (the tenant layout) an upsert may name a ``"target"`` topic, carried
    on the change for the tenants' gate to judge; without, the parser
    refuses it as an unknown field.
    """
    envelope = read_envelope(key, value, position, limits)
    if isinstance(envelope, ErrorRecord):
        return envelope
    op, sub_id, obj = envelope
    if op == DELETE or obj is None or "pattern" in obj:
        # a pattern is a stateful (Cayuga) subscription: the patterns query owns it; an id
        # names one kind of subscription at a time, so a boolean subscription of that id goes away
        return Change(DELETE, sub_id, None, position)
    return expression_change(sub_id, obj, key, value, position, parse, max_terms, limits, targets)


def expression_change(sub_id: str, obj: dict[str, Any], key: bytes | None, value: bytes | None, position: Position,
                      parse: SubscriptionParser, max_terms: int = DEFAULT_MAX_TERMS,
                      limits: LimitsSettings = DEFAULT_LIMITS, targets: bool = False) -> Change | ErrorRecord:
    """The upsert of an expression subscription whose envelope is read (:func:`read_envelope`),
    or its error record (``targets`` as in :func:`parse_change`)."""
    record = {k: v for k, v in obj.items() if k != "op" and not (targets and k == "target")}
    record["id"] = sub_id
    target = obj.get("target") if targets else None
    if target is not None and not isinstance(target, str):
        return error(SUBSCRIPTION, value, position, f'subscription {sub_id!r}: "target" must be a topic name, '
                     f"not {type(target).__name__}", key)
    try:
        sub = parse(record, max_terms)
    except PubSubError as exc:
        return error(SUBSCRIPTION, value, position, str(exc), key)
    except (ValueError, TypeError, RecursionError, OverflowError, UnicodeError) as exc:
        return error(SUBSCRIPTION, value, position, f"subscription {sub_id!r}: {type(exc).__name__}: {exc}", key)
    predicates = count_predicates(sub)
    if predicates > limits.predicates:
        return error(SUBSCRIPTION, value, position, over(
            f"subscription {sub_id!r}: the number of predicates", predicates, "predicates", limits.predicates), key)
    return Change(UPSERT, sub.id, sub, position, target)


def parse_changes(
    rows: Iterable[tuple[bytes | None, bytes | None, str, int, int]],
    parse: SubscriptionParser,
    max_terms: int = DEFAULT_MAX_TERMS,
    limits: LimitsSettings = DEFAULT_LIMITS,
    targets: bool = False,
) -> tuple[list[Change], list[ErrorRecord]]:
    """Subscription records ``(key, value, topic, partition, offset)`` in offset order per partition.

    Returns the accepted changes (in input order, so the latest record of an id wins)
    and the error records (``targets`` as in :func:`parse_change`).
    """
    changes: list[Change] = []
    errors: list[ErrorRecord] = []
    for key, value, topic, partition, offset in rows:
        out = parse_change(key, value, Position(topic, int(partition), int(offset)), parse, max_terms, limits,
                           targets)
        if isinstance(out, Change):
            changes.append(out)
        else:
            errors.append(out)
    return changes, errors


class EventRead(NamedTuple):
    """An event record as the service reads it (:func:`read_event`).

    ``obj`` is the JSON object, ``None`` when the event is refused; ``flat`` its
    attributes (:func:`matchers.events.flatten`: rows when it has arrays); ``problem``
    why it was refused (``None`` when it is read).
    """

    obj: dict[str, Any] | None
    flat: dict[str, Value] | Rows
    problem: str | None


def read_event(value: bytes | None, limits: LimitsSettings) -> EventRead:
    """An event record's object and attributes, or why it is refused; never raises."""
    if value is None:
        return EventRead(None, {}, "an event record has no value")
    if len(value) > limits.event_bytes:
        return EventRead(None, {}, over("the event's size", f"{len(value)} bytes", "event_bytes", limits.event_bytes))
    obj, reason = load_json(value)
    if reason == TOO_DEEP:
        reason = over("the nesting depth", f"over {PARSER_DEPTH}", "depth", limits.depth)
    if reason is None and not isinstance(obj, dict):
        reason = f"an event must be a JSON object, not {type(obj).__name__}"
    if reason is None:
        reason = check_shape(obj, limits)
    if reason is not None:
        return EventRead(None, {}, reason)
    try:
        flat = flatten(obj, max_rows=limits.array_rows)
    except TooManyRows:
        return EventRead(None, {}, over("the rows of its arrays", f"over {limits.array_rows}", "array_rows", limits.array_rows))
    except (RecursionError, ValueError, OverflowError, UnicodeError, TypeError) as exc:
        return EventRead(None, {}, f"cannot flatten the event: {type(exc).__name__}: {exc}")
    return EventRead(obj, flat, None)


def read_event_fast(value: bytes | None, limits: LimitsSettings) -> EventRead:
    """:func:`read_event` with the common case first: a small object of scalars (within
    ``limits.event_bytes``, ``limits.string_length`` and ``limits.attributes``) is parsed by
    orjson alone and is its own flat form (``flat is obj``); never raises."""
    if value is not None and len(value) <= min(limits.event_bytes, limits.string_length):
        try:
            obj = orjson.loads(value)
        except orjson.JSONDecodeError:
            obj = None
        if type(obj) is dict and len(obj) <= limits.attributes and SCALARS.issuperset(map(type, obj.values())):
            return EventRead(obj, obj, None)
    return read_event(value, limits)


def check_shape(obj: dict[str, Any], limits: LimitsSettings) -> str | None:
    """Why a parsed event is past a limit or ambiguous, or ``None``; iterative (any depth).

    Checks the nesting depth (objects and arrays), the number of attributes after
    flattening (the distinct names of its rows, :func:`~matchers.events.flatten`: nulls
    count, an array's elements share its name), the length of strings and attribute names,
    and that no two paths flatten to the same name (``{"a.b": 1, "a": {"b": 2}}``).
    """
    names: set[str] = set()  # names outside arrays, each once
    attributes: set[str] = set()  # names of the scalars and nulls: the attributes after flattening
    longest, deepest = limits.string_length, 0
    stack: list[tuple[Any, str, int, bool]] = [(obj, "", 1, False)]  # (node, name or prefix, depth, in an array)
    while stack:
        node, prefix, depth, in_array = stack.pop()
        deepest = max(deepest, depth)
        items = node.items() if isinstance(node, dict) else ((None, v) for v in node)
        for key, value in items:
            if key is not None and len(key) > longest:
                return over("the length of a key", f"{len(key)} characters", "string_length", longest)
            name = prefix if key is None else prefix + key  # an array's elements take its name
            if isinstance(value, dict):
                stack.append((value, name + ".", depth + 1, in_array))
                continue
            if key is not None and not in_array:
                if name in names:
                    return f"attribute {_cut(name, 200)!r} appears twice after flattening (dotted keys and nested objects collide)"
                names.add(name)
                if len(name) > longest:
                    return over(f"the length of the attribute name {_cut(name, 100)!r}", f"{len(name)} characters", "string_length", longest)
            if isinstance(value, list):
                stack.append((value, name, depth + 1, True))
                continue
            attributes.add(name)
            if len(attributes) > limits.attributes:
                return over("the number of attributes", f"over {limits.attributes}", "attributes", limits.attributes)
            if isinstance(value, str) and len(value) > longest:
                return over("the length of a string", f"{len(value)} characters", "string_length", longest)
    if deepest > limits.depth:
        return over("the nesting depth", deepest, "depth", limits.depth)
    return None


SCALARS = frozenset((str, int, float, bool))
"""Types of the values of a flat event."""


def flat_event(obj: dict[str, Any]) -> dict[str, Value] | Rows:
    """The event as :func:`matchers.events.flatten` gives it, without copying a flat one
    (an event :func:`read_event` admitted: its rows are not bounded again).

    An object whose values are all strings, booleans, integers or finite floats is
    already flat (the encoder reads integers as floats); anything else (nested objects,
    arrays, ``null``, non-finite numbers) goes through ``flatten``.
    """
    types = set(map(type, obj.values()))
    if types <= SCALARS and (float not in types or all(math.isfinite(v) for v in obj.values() if type(v) is float)):
        return obj
    return flatten(obj, max_rows=None)
