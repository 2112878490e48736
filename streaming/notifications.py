"""Notifications: one JSON schema for both kinds, each with a deterministic id.

Every notification has ``id``, ``subscription``, ``kind`` and the event that made it:
``event_id``, ``topic``, ``partition``, ``offset``, ``event_time_ms`` and ``matched_ms``.

* ``kind = "match"`` (:class:`EventNotes`): a boolean subscription matched an event;
  also ``batch``, ``retro`` and the ``event`` itself (unless the payload is ``id``). The
  id is a hash of the subscription id and the event's topic, partition and offset.
* ``kind = "pattern"`` (:func:`pattern`): a Cayuga pattern completed; the event is the
  one that completed it, and ``key`` (the state key) and ``witness`` (``events``: the
  ids of the events that built it, ``attrs``: its output record, ``t0``, ``t1``) follow.
  The id is a hash of the subscription id and the witness.

A replay after a crash produces the same ids, so a consumer can drop the duplicates
(:class:`Deduplicator`).

The match tasks build their records in bulk into one buffer (:func:`build_records`), the
retro path as lists (:func:`match_records`); :class:`EventNotes` (and :func:`encode`) is
their per-record specification, which the tests compare them with byte for byte.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from itertools import pairwise
from typing import Any, NamedTuple

import numpy as np
import orjson

from matchers.errors import PubSubError
from streaming.notes_kernel import (
    EventParts,
    Strings,
    event_parts,
    hash_inputs,
    pack,
    quoted,
    write_values,
)

KIND_MATCH = "match"
KIND_PATTERN = "pattern"
PAYLOAD_EVENT = "event"
PAYLOAD_ID = "id"
RECORD_OVERHEAD = 512
"""Bytes a Kafka record takes besides its key and value (headers, batch framing), with margin."""


class NotificationTooLarge(PubSubError, ValueError):
    """An event's notification is past ``limits.message_bytes`` even without the event."""


def notification_id(sub_id: str, topic: str, partition: int, offset: int) -> str:
    """Deterministic id of the notification of ``sub_id`` for the event at topic/partition/offset."""
    text = f"{len(sub_id)}:{sub_id}|{topic}|{int(partition)}|{int(offset)}"
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


class EventNotes:
    """The notifications of one event, record by record: the specification of :func:`match_records`.

    Parameters
    ----------
    event_id : the event's own id field, or ``"topic/partition/offset"`` when it has none.
    event_raw : the event's JSON bytes (already validated as an object) to embed, or
        ``None`` for the id-only payload.
    event_ms : the event record's Kafka timestamp (milliseconds), if any.
    matched_ms : when the match was made (milliseconds since the epoch).
    retro : the subscription arrived after the event and matched it while it was still valid.
    """

    __slots__ = ("_position", "_fields", "_tail")

    def __init__(self, topic: str, partition: int, offset: int, event_id: Any, event_raw: bytes | None,
                 event_ms: int | None, matched_ms: int, batch_id: int, retro: bool = False):
        self._position = f"|{topic}|{int(partition)}|{int(offset)}".encode()
        self._fields = fields = {
            "kind": KIND_MATCH,
            "event_id": event_id,
            "topic": topic,
            "partition": int(partition),
            "offset": int(offset),
            "event_time_ms": event_ms,
            "matched_ms": int(matched_ms),
            "batch": int(batch_id),
            "retro": retro,
        }
        tail = orjson.dumps(fields)
        self._tail = b"," + (tail[1:] if event_raw is None else tail[1:-1] + b',"event":' + event_raw.strip() + b"}")

    def without_event(self, note: str) -> EventNotes:
        """These notifications in the id-only form, with a ``"note"`` saying why."""
        slim = object.__new__(EventNotes)
        slim._position = self._position
        slim._fields = {**self._fields, "note": note}
        slim._tail = b"," + orjson.dumps(slim._fields)[1:]
        return slim

    def encode(self, sub_id: str) -> bytes:
        """The JSON value of the notification of ``sub_id`` (id as :func:`notification_id`)."""
        sid = sub_id.encode("utf-8")
        nid = hashlib.blake2b(b"%d:%s%s" % (len(sub_id), sid, self._position), digest_size=16).hexdigest()
        return b'{"id":"%s","subscription":%s%s' % (nid.encode(), orjson.dumps(sub_id), self._tail)

    def add_records(self, sub_ids: Iterable[str], room: int, keys: list[bytes] | list[bytes | None],
                    values: list[bytes]) -> int:
        """Append the keys (the ids in UTF-8) and values of the notifications to ``sub_ids`` to
        ``keys`` and ``values``, each record within ``room`` bytes: one past it goes in the
        id-only form (:meth:`without_event`) with a note saying why. Returns how many it appended.

        Raises
        ------
        NotificationTooLarge
            One is past ``room`` even in the id-only form (the event's id is that large);
            nothing of this event is left appended, and the message is the reason for the
            event's error record.
        """
        first, slim = len(values), None
        for sub_id in sub_ids:
            key, value = sub_id.encode("utf-8"), self.encode(sub_id)
            size = len(key) + len(value)
            if size > room:  # past the largest message: the id-only form
                slim = slim or self.without_event(_slim_note(size))
                value = slim.encode(sub_id)
                if len(key) + len(value) > room:
                    del keys[first:], values[first:]
                    raise NotificationTooLarge(_too_large(len(key) + len(value), self._fields["retro"]))
            keys.append(key)
            values.append(value)
        return len(values) - first


def _slim_note(size: int) -> str:
    """The note of a record sent without its event, which with it takes ``size`` bytes."""
    return (f"sent without the event: with it the record takes {size} bytes, past "
            f"limits.message_bytes less {RECORD_OVERHEAD} bytes of record overhead")


def _too_large(size: int, retro: bool) -> str:
    """Why an event gets no notification: one takes ``size`` bytes even without the event."""
    kind = "retro notification" if retro else "notification"
    return (f"its {kind} takes {size} bytes even without the event (its id is that large), "
            "past limits.message_bytes")


class Matched(NamedTuple):
    """A match result (``offsets``, ``keys`` of :class:`~matchers.base.Matches`) as
    :func:`build_records` takes it: the events with matches, their bounds, each subscription
    once; the integers as ``int64`` arrays, no Python object per event or match."""

    hits: np.ndarray
    """The events (indices of the result) with at least one match."""
    bounds: np.ndarray
    """Their matches' ranges in ``which``: event ``hits[j]``'s are ``bounds[j]:bounds[j + 1]``."""
    ids: list[str]
    """Each matched subscription's id once."""
    which: np.ndarray
    """Per match, its subscription's index in ``ids``."""


def matched(offsets: np.ndarray, keys: np.ndarray, ids_of: Callable[[np.ndarray], list[str]]) -> Matched:
    """The result ``offsets``/``keys`` (event ``i`` matched ``keys[offsets[i]:offsets[i + 1]]``)
    grouped for :func:`build_records`, the distinct keys' ids looked up at once with ``ids_of``
    (:meth:`matchers.base.Matcher.ids_of`)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    hits = np.flatnonzero(offsets[1:] != offsets[:-1]).astype(np.int64)
    unique, which = np.unique(keys, return_inverse=True)
    return Matched(hits, offsets[np.append(hits, len(offsets) - 1)], ids_of(unique), which.ravel().astype(np.int64))


class EventColumns(NamedTuple):
    """The events of :func:`match_records`, one entry each (Kafka's 64-bit integers)."""

    topics: Sequence[str]
    partitions: Sequence[int]
    offsets: Sequence[int]
    event_ids: Sequence[Any]
    raws: Sequence[bytes] | None
    """The events' JSON bytes to embed, ``None`` for the id-only payload."""
    event_ms: Sequence[int | None]


_BUILD_ERRORS = (TypeError, ValueError, OverflowError, UnicodeError, RecursionError)
_BEFORE_SUB = len(b'{"id":"') + 32 + len(b'","subscription":')
"""Bytes of a record's value before the subscription's JSON."""


class Built(NamedTuple):
    """:func:`build_records`' records, in order: record ``r`` goes to subscription ``subs[r]``."""

    values: Strings
    """The records' values in one buffer."""
    subs: np.ndarray
    """Per record, its subscription's index in ``sub_ids`` (``int64``)."""
    keys: list[bytes]
    """Per subscription, its records' key (its id in UTF-8)."""
    failures: list[tuple[int, str]]
    """``(j, reason)`` of each event that gets no notification, in order."""


def build_records(events: EventColumns, bounds: Sequence[int] | np.ndarray, sub_ids: Sequence[str], which: Sequence[int] | np.ndarray,
                  matched_ms: int, batch_id: int, room: int, retro: bool = False) -> Built:
    """The match notifications in bulk, the records exactly :meth:`EventNotes.add_records`'s.

    Event ``j`` notifies ``sub_ids[which[k]]`` for ``k`` in ``range(bounds[j], bounds[j + 1])``;
    ``sub_ids`` holds each id once. The JSON after the subscription is written once per event,
    each id's key and JSON once, the values (their ids hashed) by one kernel into one buffer
    (:func:`~streaming.notes_kernel.write_values`), and the sizes are checked only for the
    events whose longest record could be past ``room``.

    An event gets no notification (``failures``) when its fields cannot be written as JSON, or
    when one of its records is past ``room`` even without the event (the message of
    :class:`NotificationTooLarge`); none of its records is kept.
    """
    keys = [s.encode("utf-8") for s in sub_ids]
    packed = pack(keys)
    sub_json = quoted(packed) if _plain(sub_ids, keys) else pack([orjson.dumps(s) for s in sub_ids])
    mid = b',"matched_ms":%d,"batch":%d,"retro":%s' % (int(matched_ms), int(batch_id), b"true" if retro else b"false")
    parts, unbuilt = _event_parts(events, mid)
    failures = [(j, why) for j, why in unbuilt if bounds[j] < bounds[j + 1]]  # an event without any: none to fail
    hashed = hash_inputs(packed, np.fromiter(map(len, sub_ids), dtype=np.int64, count=len(sub_ids)))
    subs = np.asarray(which, dtype=np.int64)
    tails = parts.tails
    data, ends = write_values(hashed, sub_json, parts.positions, tails, bounds, subs)
    widest = _BEFORE_SUB + _longest(packed) + _longest(sub_json)  # at least any record's
    skip = {j for j, _ in failures}
    wide = ([j for j in np.flatnonzero(widest + np.diff(tails.bounds) > room).tolist() if j not in skip]
            if widest + _longest(tails) > room else [])
    if not wide and not failures:
        return Built(Strings(data, ends), subs, keys, failures)
    values = _unpacked(Strings(data, ends))  # records to fit or drop: one by one
    json_list = _unpacked(sub_json)
    for j in wide:
        head = tails.data[tails.bounds[j]:tails.bounds[j] + parts.heads[j]].tobytes()
        _fit(values, range(bounds[j], bounds[j + 1]), which, keys, json_list, head, room, retro, j, failures)
    if failures:
        failures.sort(key=lambda f: f[0])
        dropped = {j for j, _ in failures}
        counts: np.ndarray = np.diff(np.asarray(bounds, dtype=np.int64))
        event_of = np.repeat(np.arange(len(parts.heads)), counts).tolist()
        kept = [k for k, j in enumerate(event_of) if j not in dropped]
        values, subs = [values[k] for k in kept], subs[kept]
    return Built(pack(values), subs, keys, failures)


def match_records(events: EventColumns, bounds: Sequence[int] | np.ndarray, sub_ids: Sequence[str], which: Sequence[int] | np.ndarray,
                  matched_ms: int, batch_id: int, room: int, out: tuple[list, list, list], tags: Sequence[Any],
                  retro: bool = False) -> list[tuple[int, str]]:
    """Append :func:`build_records`' records to ``out``'s keys (the ids in UTF-8), values and
    tags, with ``tags[which[k]]`` (e.g. its topic) as record ``k``'s tag; returns the failures.

    The records are exactly :meth:`EventNotes.add_records`'s; a failed event's are not appended.
    """
    built = build_records(events, bounds, sub_ids, which, matched_ms, batch_id, room, retro)
    subs = built.subs.tolist()
    keys_out, values_out, tags_out = out
    keys_out += [built.keys[w] for w in subs]
    values_out += _unpacked(built.values)
    tags_out += [tags[w] for w in subs]
    return built.failures


def _unpacked(strings: Strings) -> list[bytes]:
    """Each of ``strings`` as bytes."""
    blob, at = strings.data.tobytes(), strings.bounds.tolist()
    return [blob[a:b] for a, b in pairwise(at)]


def _longest(strings: Strings) -> int:
    """The length of the longest of ``strings`` (0 if none)."""
    return int(np.diff(strings.bounds).max(initial=0))


def _plain(strings: Sequence[str], utf8: Sequence[bytes]) -> bool:
    """Whether ``orjson`` escapes none of ``strings`` (given their UTF-8): the one array it
    writes of them is then exactly as long as all of them quoted."""
    return len(orjson.dumps(list(strings))) == sum(map(len, utf8)) + 3 * len(utf8) + (1 if utf8 else 2)


def _event_parts(events: EventColumns, mid: bytes) -> tuple[EventParts, list[tuple[int, str]]]:
    """Per event, its fields as JSON after the subscription (``mid`` the fields after
    ``event_time_ms``) and its position in the id hash (:func:`~streaming.notes_kernel.event_parts`);
    and ``(j, reason)`` of each event whose fields cannot be written (its id left empty)."""
    dumps = orjson.dumps
    topics, event_ids, event_ms = events.topics, events.event_ids, events.event_ms
    failures: list[tuple[int, str]] = []
    try:
        distinct = {t: i for i, t in enumerate(dict.fromkeys(topics))}
        topic_parts = [(("|" + t).encode("utf-8"), dumps(t)) for t in distinct]
        if all(type(e) is str for e in event_ids):
            utf8 = [e.encode("utf-8") for e in event_ids]
            id_json = quoted(pack(utf8)) if _plain(event_ids, utf8) else pack([dumps(e) for e in event_ids])
        else:
            id_json = pack([dumps(e) if type(e) is str else dumps([e])[1:-1] for e in event_ids])  # [e]: as deep as in the fields
    except _BUILD_ERRORS:  # again, one event at a time
        distinct, topic_parts, ids = {}, [], []
        for j, (t, e) in enumerate(zip(topics, event_ids, strict=True)):
            try:
                got = topic_parts[distinct[t]] if t in distinct else (("|" + t).encode("utf-8"), dumps(t))
                ids.append(dumps(e) if type(e) is str else dumps([e])[1:-1])
                if t not in distinct:
                    distinct[t] = len(topic_parts)
                    topic_parts.append(got)
            except _BUILD_ERRORS as exc:
                failures.append((j, f"cannot build its notification: {type(exc).__name__}: {exc}"))
                ids.append(b"")
        id_json = pack(ids)
    missing = len(topic_parts)  # a failed event's topic may be missing: written empty
    topic_of = np.fromiter((distinct.get(t, missing) for t in topics), dtype=np.int64, count=len(topics))
    topic_parts.append((b"", b""))
    n = len(event_ms)
    if None in event_ms:
        has_ms = np.fromiter((ms is not None for ms in event_ms), dtype=np.bool_, count=n)
        ms_of = np.fromiter((0 if ms is None else ms for ms in event_ms), dtype=np.int64, count=n)
    else:
        has_ms, ms_of = np.ones(n, dtype=np.bool_), np.asarray(event_ms, dtype=np.int64).reshape(n)
    parts = event_parts(topic_of, pack([tj for _, tj in topic_parts]), pack([th for th, _ in topic_parts]), id_json,
                        np.asarray(events.partitions, dtype=np.int64).reshape(n),
                        np.asarray(events.offsets, dtype=np.int64).reshape(n), ms_of, has_ms,
                        None if events.raws is None else pack(events.raws), mid)
    return parts, failures


def _fit(values: list[bytes], records: range, which: Sequence[int] | np.ndarray, keys: list[bytes], sub_json: list[bytes],
         head: bytes, room: int, retro: bool, j: int, failures: list[tuple[int, str]]) -> None:
    """Event ``j``'s ``records`` within ``room`` (its fields ``head``): one past it in the
    id-only form with the note of the first such; ``(j, reason)`` added to ``failures`` if
    one is past it even so."""
    slim = None
    for r in records:
        key, js = keys[which[r]], sub_json[which[r]]
        size = len(key) + len(values[r])
        if size > room:
            slim = slim or b'%s,"note":%s}' % (head, orjson.dumps(_slim_note(size)))
            value = values[r][:_BEFORE_SUB] + js + slim
            if len(key) + len(value) > room:
                failures.append((j, _too_large(len(key) + len(value), retro)))
                return
            values[r] = value


def encode(
    sub_id: str,
    topic: str,
    partition: int,
    offset: int,
    event_id: Any,
    event_raw: bytes | None,
    event_ms: int | None,
    matched_ms: int,
    batch_id: int,
    retro: bool = False,
) -> bytes:
    """The notification record's JSON value (see :class:`EventNotes` for the parameters)."""
    return EventNotes(topic, partition, offset, event_id, event_raw, event_ms, matched_ms, batch_id, retro).encode(sub_id)


def pattern(sub_id: str, witness: Sequence[str], attrs: dict[str, Any], t0: int, t1: int, key: str,
            topic: str, partition: int | None, offset: int | None, event_ms: int | None, matched_ms: int) -> bytes:
    """The JSON value of a completed pattern's notification; ``topic``/``partition``/``offset``
    are those of the completing event (the last of ``witness``), ``None`` for a pattern that the
    passing of time completed (an ``UNLESS`` whose deadline passed)."""
    nid = hashlib.blake2b("\x1f".join((sub_id, *witness)).encode("utf-8"), digest_size=16).hexdigest()
    return orjson.dumps({
        "id": nid,
        "subscription": sub_id,
        "kind": KIND_PATTERN,
        "event_id": witness[-1],
        "topic": topic,
        "partition": None if partition is None else int(partition),
        "offset": None if offset is None else int(offset),
        "event_time_ms": event_ms,
        "matched_ms": int(matched_ms),
        "key": key,
        "witness": {"events": list(witness), "attrs": attrs, "t0": t0, "t1": t1},
    })


def decode(value: bytes) -> dict[str, Any]:
    """A notification record's value as a dict."""
    return orjson.loads(value)


class Deduplicator:
    """Drops notifications whose id was seen among the last ``capacity`` ones."""

    def __init__(self, capacity: int = 1_000_000):
        self.capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.duplicates = 0

    def fresh(self, nid: str) -> bool:
        """Whether ``nid`` is new (and remember it)."""
        if nid in self._seen:
            self._seen.move_to_end(nid)
            self.duplicates += 1
            return False
        self._seen[nid] = None
        if len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return True
