"""Kafka records to accepted subscription changes, events, and error records.

Nothing here raises on bad input: a record that cannot be used becomes an
:class:`ErrorRecord` (the raw bytes, base64 when they are not UTF-8, where they came
from, and a readable reason) for the ``errors`` topic, and the stream goes on.

Subscription records (topic ``subscriptions``, keyed by subscription id) hold
``{"op": "upsert", "id": ..., "expr": "text"}`` or ``{"op": "upsert", "id": ...,
"json": {...}}`` with an optional ``"expires"``, or ``{"op": "delete", "id": ...}``; a
record with a key and no value (a Kafka tombstone) deletes the key's subscription.
``op`` defaults to ``upsert``.  A record with a ``"pattern"`` (a Cayuga expression) is a
stateful subscription for :mod:`streaming.patterns`; here it only replaces a boolean
subscription of the same id.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import orjson

from matchers.errors import PubSubError
from matchers.events import flatten
from matchers.expr import DEFAULT_MAX_TERMS, Scalar, Subscription

UPSERT = "upsert"
DELETE = "delete"
OPS = (UPSERT, DELETE)
MAX_ID_LENGTH = 256

SubscriptionParser = Callable[[Mapping[str, Any], int], Subscription]
"""``parse(record_without_op, max_terms) -> Subscription``; raises a :class:`PubSubError`."""


class Position(NamedTuple):
    """Where a record came from."""

    topic: str
    partition: int
    offset: int


class Change(NamedTuple):
    """An accepted subscription change: an upsert carries its subscription."""

    op: str
    id: str
    subscription: Subscription | None
    position: Position | None = None


class ErrorRecord(NamedTuple):
    """A record that was rejected, with the reason (one line on the ``errors`` topic)."""

    raw: str
    encoding: str
    position: Position
    reason: str
    stage: str
    key: str | None = None

    def to_json(self) -> bytes:
        return orjson.dumps({
            "stage": self.stage,
            "reason": self.reason,
            "topic": self.position.topic,
            "partition": self.position.partition,
            "offset": self.position.offset,
            "key": self.key,
            "encoding": self.encoding,
            "raw": self.raw,
        })


def raw_text(data: bytes | None) -> tuple[str, str]:
    """``(text, encoding)`` of raw bytes: UTF-8 text, else base64."""
    if data is None:
        return "", "none"
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def error(stage: str, data: bytes | None, position: Position, reason: str, key: bytes | None = None) -> ErrorRecord:
    """An :class:`ErrorRecord` for raw bytes."""
    text, encoding = raw_text(data)
    key_text = None if key is None else raw_text(key)[0]
    return ErrorRecord(text, encoding, position, reason, stage, key_text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def load_json(data: bytes) -> tuple[Any, str | None]:
    """Parse JSON bytes: ``(value, None)`` or ``(None, reason)``.

    orjson first; the standard library as a fallback for what orjson refuses but JSON
    allows (integers beyond 64 bits). ``NaN`` and ``Infinity`` are refused.
    """
    try:
        return orjson.loads(data), None
    except orjson.JSONDecodeError as exc:
        first = str(exc)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8: {exc}"
    try:
        return json.loads(text, parse_constant=_reject_constant), None
    except ValueError:
        return None, f"malformed JSON: {first}"


def default_parser() -> SubscriptionParser:
    """The subscription language's record parser (:func:`matchers.language.parse_record`)."""
    from matchers.language import parse_record

    return lambda record, max_terms: parse_record(dict(record), max_terms=max_terms)


def parse_change(
    key: bytes | None,
    value: bytes | None,
    position: Position,
    parse: SubscriptionParser,
    max_terms: int = DEFAULT_MAX_TERMS,
) -> Change | ErrorRecord:
    """One subscription record as an accepted :class:`Change` or an :class:`ErrorRecord`."""
    stage = "subscription"
    key_id: str | None = None
    if key is not None:
        try:
            key_id = key.decode("utf-8")
        except UnicodeDecodeError:
            return error(stage, value, position, "the record key is not UTF-8", key)
    if value is None:
        if not key_id:
            return error(stage, value, position, "a record without value (tombstone) needs the subscription id as key", key)
        return Change(DELETE, key_id, None, position)
    obj, reason = load_json(value)
    if reason is not None:
        return error(stage, value, position, reason, key)
    if not isinstance(obj, dict):
        return error(stage, value, position, f"a subscription record must be a JSON object, not {type(obj).__name__}", key)
    op = obj.get("op", UPSERT)
    if op not in OPS:
        return error(stage, value, position, f"unknown op {op!r}: expected 'upsert' or 'delete'", key)
    sub_id = obj.get("id", key_id)
    if not isinstance(sub_id, str) or not sub_id or len(sub_id) > MAX_ID_LENGTH:
        return error(stage, value, position,
                     f"the subscription id must be a non-empty string of at most {MAX_ID_LENGTH} characters, not {sub_id!r}", key)
    if key_id is not None and key_id != sub_id:
        return error(stage, value, position, f"the record key {key_id!r} differs from the id {sub_id!r}", key)
    if op == DELETE:
        extra = sorted(set(obj) - {"op", "id"})
        if extra:
            return error(stage, value, position, f"subscription {sub_id!r}: a delete takes only op and id, not {extra}", key)
        return Change(DELETE, sub_id, None, position)
    if "pattern" in obj:
        # a stateful (Cayuga) subscription: the patterns query owns it; an id names one kind
        # of subscription at a time, so a boolean subscription of that id goes away
        return Change(DELETE, sub_id, None, position)
    record = {k: v for k, v in obj.items() if k != "op"}
    record["id"] = sub_id
    try:
        sub = parse(record, max_terms)
    except PubSubError as exc:
        return error(stage, value, position, str(exc), key)
    except (ValueError, TypeError, RecursionError) as exc:
        return error(stage, value, position, f"subscription {sub_id!r}: {type(exc).__name__}: {exc}", key)
    return Change(UPSERT, sub.id, sub, position)


def parse_changes(
    rows: Iterable[tuple[bytes | None, bytes | None, str, int, int]],
    parse: SubscriptionParser,
    max_terms: int = DEFAULT_MAX_TERMS,
) -> tuple[list[Change], list[ErrorRecord]]:
    """Subscription records ``(key, value, topic, partition, offset)`` in offset order per partition.

    Returns the accepted changes (in input order, so the latest record of an id wins)
    and the error records.
    """
    changes: list[Change] = []
    errors: list[ErrorRecord] = []
    for key, value, topic, partition, offset in rows:
        out = parse_change(key, value, Position(topic, int(partition), int(offset)), parse, max_terms)
        (changes if isinstance(out, Change) else errors).append(out)  # type: ignore[arg-type]
    return changes, errors


def parse_event(value: bytes | None) -> tuple[dict[str, Any] | None, str | None]:
    """An event record's JSON object, or ``(None, reason)``."""
    if value is None:
        return None, "an event record has no value"
    obj, reason = load_json(value)
    if reason is not None:
        return None, reason
    if not isinstance(obj, dict):
        return None, f"an event must be a JSON object, not {type(obj).__name__}"
    return obj, None


SCALARS = frozenset((str, int, float, bool))
"""Types of the values of a flat event."""


def flat_event(obj: dict[str, Any]) -> dict[str, Scalar]:
    """The event as :func:`matchers.events.flatten` gives it, without copying a flat one.

    An object whose values are all strings, booleans, integers or finite floats is
    already flat (the encoder reads integers as floats); anything else (nested objects,
    arrays, ``null``, non-finite numbers) goes through ``flatten``.
    """
    types = set(map(type, obj.values()))
    if types <= SCALARS and (float not in types or all(math.isfinite(v) for v in obj.values() if type(v) is float)):
        return obj
    return flatten(obj)
