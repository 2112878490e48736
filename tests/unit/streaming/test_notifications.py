"""Notification ids are deterministic per (subscription, event position); consumers drop replays."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from streaming.notifications import Deduplicator, EventNotes, decode, encode, notification_id


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=10), st.integers(0, 50),
       st.integers(0, 2**40))
def test_id_is_deterministic_and_position_sensitive(sub, topic, partition, offset):
    nid = notification_id(sub, topic, partition, offset)
    assert nid == notification_id(sub, topic, partition, offset) and len(nid) == 32
    assert nid != notification_id(sub, topic, partition, offset + 1)
    assert nid != notification_id(sub + "x", topic, partition, offset)
    assert nid != notification_id(sub, topic, partition + 1, offset)


def test_ids_do_not_collide_across_field_boundaries():
    assert notification_id("a|b", "c", 0, 0) != notification_id("a", "b|c", 0, 0)


def test_encode_embeds_the_event_or_only_its_id():
    full = decode(encode("s", "events", 1, 2, "e", b' {"x": [1, "y"]}\n', 5, 6, 7))
    assert full["event"] == {"x": [1, "y"]} and full["event_id"] == "e" and full["retro"] is False
    assert full["id"] == notification_id("s", "events", 1, 2)
    short = orjson.loads(encode("s", "events", 1, 2, "e", None, None, 6, 7, retro=True))
    assert "event" not in short and short["event_time_ms"] is None and short["retro"] is True


def test_deduplicator():
    d = Deduplicator(capacity=2)
    assert d.fresh("a") and d.fresh("b") and not d.fresh("a")
    assert d.fresh("c")  # evicts b, the least recently seen
    assert not d.fresh("a") and d.duplicates == 2
    assert d.fresh("b")


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=10), st.integers(0, 50),
       st.integers(0, 2**40), st.one_of(st.none(), st.integers(-2**63, 2**63 - 1), st.text(max_size=5)), st.booleans())
def test_event_notes_give_the_same_record_for_every_subscription(sub, topic, partition, offset, event_id, with_event):
    raw = b'{"x": 1}' if with_event else None
    notes = EventNotes(topic, partition, offset, event_id, raw, 5, 6, 7)
    for sid in (sub, sub + "\u00e9", "q\"uote"):
        doc = decode(notes.encode(sid))
        assert doc["id"] == notification_id(sid, topic, partition, offset) and doc["subscription"] == sid
        assert doc["event_id"] == event_id and doc["offset"] == offset and ("event" in doc) == with_event
        assert list(doc)[:2] == ["id", "subscription"]


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
                     | st.text(), lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                     max_leaves=6)


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=10), st.integers(0, 50), st.integers(0, 2**40),
       _JSON, st.none() | st.integers(0, 2**50), st.integers(0, 2**50), st.integers(0, 2**31), st.booleans(),
       st.none() | st.dictionaries(st.text(max_size=5), _JSON, max_size=4), st.text(max_size=30))
def test_records_are_the_documented_fields_as_orjson_writes_them(sub, topic, partition, offset, event_id, event_ms,
                                                                 matched_ms, batch, retro, event, note):
    raw = None if event is None else b" " + orjson.dumps(event) + b"\n"
    notes = EventNotes(topic, partition, offset, event_id, raw, event_ms, matched_ms, batch, retro)
    fields = {"kind": "match", "event_id": event_id, "topic": topic, "partition": partition, "offset": offset,
              "event_time_ms": event_ms, "matched_ms": matched_ms, "batch": batch, "retro": retro}
    head = {"id": notification_id(sub, topic, partition, offset), "subscription": sub}
    assert notes.encode(sub) == orjson.dumps({**head, **fields, **({} if event is None else {"event": event})})
    assert notes.without_event(note).encode(sub) == orjson.dumps({**head, **fields, "note": note})
