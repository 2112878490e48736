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
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from matchers.errors import PubSubError

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
    """The notifications of one event: the JSON after the subscription is built once per event.

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
                slim = slim or self.without_event(
                    f"sent without the event: with it the record takes {size} bytes, past "
                    f"limits.message_bytes less {RECORD_OVERHEAD} bytes of record overhead")
                value = slim.encode(sub_id)
                if len(key) + len(value) > room:
                    del keys[first:], values[first:]
                    kind = "retro notification" if self._fields["retro"] else "notification"
                    raise NotificationTooLarge(f"its {kind} takes {len(key) + len(value)} bytes even without the "
                                               "event (its id is that large), past limits.message_bytes")
            keys.append(key)
            values.append(value)
        return len(values) - first


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
