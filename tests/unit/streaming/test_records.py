"""Subscription and event records: accepted changes, and error records with a reason."""

from __future__ import annotations

import base64

import orjson
import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from matchers.oracle import evaluate
from streaming.config import LimitsSettings
from streaming.records import (
    DELETE,
    UPSERT,
    Change,
    ErrorRecord,
    Position,
    default_parser,
    error,
    load_json,
    parse_change,
    parse_changes,
    read_event,
)

POS = Position("subscriptions", 0, 7)
LIMITS = LimitsSettings()


@pytest.fixture(scope="module")
def parse():
    return default_parser()


def change(parse, value, key=None):
    return parse_change(key, value, POS, parse)


def test_upsert_text_form(parse):
    out = change(parse, b'{"op": "upsert", "id": "s1", "expr": "symbol = \'IBM\' AND price < 100"}', b"s1")
    assert isinstance(out, Change) and out.op == UPSERT and out.id == "s1" and out.position == POS
    assert evaluate(out.subscription.expr, {"symbol": "IBM", "price": 99.0})
    assert not evaluate(out.subscription.expr, {"symbol": "IBM", "price": 100.0})


def test_upsert_json_form_default_op_and_expires(parse):
    rec = {"id": "s2", "json": {"all": [["price", "<", 5], ["symbol", "=", "IBM"]]}, "expires": 1234.5}
    out = change(parse, orjson.dumps(rec))
    assert isinstance(out, Change), out
    assert out.op == UPSERT and out.subscription.expires == 1234.5


def test_delete_and_tombstone(parse):
    out = change(parse, b'{"op": "delete", "id": "s1"}')
    assert out == Change(DELETE, "s1", None, POS)
    assert change(parse, None, b"s9") == Change(DELETE, "s9", None, POS)


def test_pattern_record_is_left_to_the_patterns_query(parse):
    # a stateful subscription: no error; a boolean subscription of the same id goes away
    out = change(parse, b'{"id": "p1", "pattern": "SELECT * FROM FILTER{price > 10}(Stock)"}', b"p1")
    assert out == Change(DELETE, "p1", None, POS)


def test_id_from_key(parse):
    out = change(parse, b'{"expr": "a = 1"}', b"k1")
    assert isinstance(out, Change) and out.id == "k1"


@pytest.mark.parametrize(
    ("value", "key", "reason"),
    [
        (b'{"op": "upsert", "id": "s1", "expr": "a = 1"', None, "malformed JSON"),
        (b"\xff\xfe{}", None, "not UTF-8"),
        (b'[1, 2]', None, "must be a JSON object"),
        (b'{"op": "replace", "id": "s1", "expr": "a = 1"}', None, "unknown op"),
        (b'{"id": "s1", "expr": "a ~~ 1"}', None, "s1"),
        (b'{"id": "s1", "expr": "a < true"}', None, "cannot order booleans"),
        (b'{"id": "s1", "expr": "a IN (1, \'x\')"}', None, "mixes types"),
        (b'{"id": "s1", "json": ["a", "~~", 1]}', None, "s1"),
        (b'{"id": "", "expr": "a = 1"}', None, "non-empty string"),
        (b'{"expr": "a = 1"}', None, "non-empty string"),
        (b'{"id": "s1", "expr": "a = 1"}', b"s2", "differs from the id"),
        (b'{"op": "delete", "id": "s1", "expr": "a = 1"}', None, "only op and id"),
        (b'{"id": "s1", "expr": "a = 1", "colour": "red"}', None, "s1"),
        (None, None, "tombstone"),
        (b'{"id": "s1", "expr": "a = 1"}', b"\xff", "key is not UTF-8"),
        (b'{"id": "s1", "expr": "x = NaN"}', None, "s1"),
    ],
)
def test_bad_subscription_records_become_errors(parse, value, key, reason):
    out = change(parse, value, key)
    assert isinstance(out, ErrorRecord), out
    assert reason in out.reason
    assert out.position == POS and out.stage == "subscription"
    doc = orjson.loads(out.to_json())
    assert doc["topic"] == "subscriptions" and doc["partition"] == 0 and doc["offset"] == 7
    assert doc["reason"] == out.reason


def test_error_keeps_raw_bytes_base64_when_not_utf8(parse):
    raw = b"\xff\xfe garbage"
    out = change(parse, raw)
    assert out.encoding == "base64" and base64.b64decode(out.raw) == raw
    text = change(parse, b"{oops")
    assert text.encoding == "utf-8" and text.raw == "{oops"


def test_parse_changes_keeps_order_and_splits(parse):
    rows = [
        (b"s1", b'{"id": "s1", "expr": "a = 1"}', "subs", 0, 0),
        (None, b"nope", "subs", 0, 1),
        (b"s1", b'{"op": "delete", "id": "s1"}', "subs", 0, 2),
    ]
    changes, errors = parse_changes(rows, parse)
    assert [(c.op, c.id, c.position.offset) for c in changes] == [(UPSERT, "s1", 0), (DELETE, "s1", 2)]
    assert [e.position.offset for e in errors] == [1]


def test_read_event():
    assert read_event(b'{"a": 1, "b": {"c": "x"}}', LIMITS) == ({"a": 1, "b": {"c": "x"}}, {"a": 1.0, "b.c": "x"}, None)
    assert read_event(b"[1]", LIMITS).problem.startswith("an event must be a JSON object")
    assert "malformed JSON" in read_event(b'{"a": ', LIMITS).problem
    assert "not UTF-8" in read_event(b'{"a": "\xff"}', LIMITS).problem
    assert read_event(None, LIMITS).problem == "an event record has no value"


def test_integers_beyond_64_bits_read_as_floats():
    value, reason = load_json(b'{"a": 123456789012345678901234567890}')
    assert reason is None and value["a"] == pytest.approx(1.2345678901234568e29)


@pytest.mark.parametrize("raw", [
    b'{"a": 1, "b": 2.5, "c": "x", "d": true, "e": false}',
    b'{"a": {"b": 1}, "c": 2}',
    b'{"a": [1, 2], "b": null, "c": 3}',
    b'{}',
])
def test_flat_event_encodes_like_flatten(raw):
    from matchers.events import Dictionary, encode, flatten
    from streaming.records import flat_event

    obj, reason = load_json(raw)
    assert reason is None
    d = Dictionary()
    a, b = encode([flat_event(obj)], d), encode([flatten(obj)], d)
    import numpy as np

    for x, y in zip(a[:-1], b[:-1], strict=True):
        np.testing.assert_array_equal(x, y)
    assert a.strings == b.strings


# -- limits and hostile input ------------------------------------------------------------
def nested(depth: int) -> bytes:
    return b'{"n":' + b'{"a":' * depth + b"1" + b"}" * (depth + 1)


@pytest.mark.parametrize(("value", "reason"), [
    (nested(10_000), "the nesting depth (over 1024) exceeds limits.depth = 32"),
    (nested(100_000), "the nesting depth (over 1024) exceeds limits.depth = 32"),
    (nested(32), "the nesting depth (33) exceeds limits.depth = 32"),
    (b'{"a": [[[' + b"[" * 40 + b"]" * 43 + b"}", "the nesting depth (44) exceeds limits.depth = 32"),
    (b'{"a": NaN}', "NaN and Infinity are not JSON numbers"),
    (b'{"a": [1, -Infinity]}', "NaN and Infinity are not JSON numbers"),
    (b'{"a": 1e400}', "64-bit float range"),
    (b'{"a": -' + b"9" * 400 + b"}", "64-bit float range"),
    (b'{"a": "\xff"}', "not UTF-8"),
    (b'{"a": "\xed\xa0\x80"}', "not UTF-8"),  # a surrogate encoded in UTF-8
    (b'{"a": "\\udc00x"}', "invalid (lone) surrogate escape"),
    (b'{"a": "\\ud800"}', "invalid (lone) surrogate escape"),
    (b'{"a": "x\x00y"}', "control character"),
    (b'{"a.b": 1, "a": {"b": 2}}', "attribute 'a.b' appears twice"),
    (b'{"a": {"": 1}, "a.": 2}', "attribute 'a.' appears twice"),
    (orjson.dumps({f"k{i}": i for i in range(1001)}), "the number of attributes (over 1000) exceeds limits.attributes"),
    (orjson.dumps({"a": {f"k{i}": None for i in range(1001)}}), "limits.attributes = 1000"),
    (orjson.dumps({"a": "x" * 65_537}), "the length of a string (65537 characters) exceeds limits.string_length"),
    (orjson.dumps({"a": ["x" * 65_537]}), "limits.string_length"),
    (orjson.dumps({"k" * 65_537: 1}), "limits.string_length"),
    (orjson.dumps({"a": "x" * 1_000_000}), "the event's size (1000008 bytes) exceeds limits.event_bytes = 1000000"),
])
def test_refused_events_say_why(value, reason):
    read = read_event(value, LIMITS)
    assert read.obj is None and reason in read.problem, read.problem


def test_accepted_oddities():
    assert read_event(b'{"a": 1, "a": 2}', LIMITS).flat == {"a": 2.0}  # duplicate keys: the last wins
    assert read_event(b'{"": 1, "a.b": "x"}', LIMITS).flat == {"": 1.0, "a.b": "x"}
    assert read_event(b'{"a": "x\\u0000y"}', LIMITS).flat == {"a": "x\x00y"}  # escaped control characters are data
    assert read_event(nested(30), LIMITS).flat == {"n" + ".a" * 30: 1.0}
    read = read_event(b'{"a": [1, {"b": 2}], "b": null, "c": 3}', LIMITS)
    assert list(read.flat) == [{"a": 1.0, "b": None, "c": 3.0}, {"a.b": 2.0, "b": None, "c": 3.0}]  # rows
    assert read.obj is not None and read.problem is None


def test_limits_are_settings():
    small = LimitsSettings(event_bytes=30, depth=2, attributes=2, string_length=3)
    assert "limits.event_bytes = 30" in read_event(b'{"a": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}', small).problem
    assert "(3) exceeds limits.depth = 2" in read_event(b'{"a": {"b": {}}}', small).problem
    assert "limits.attributes = 2" in read_event(b'{"a": 1, "b": 2, "c": 3}', small).problem
    assert "limits.string_length = 3" in read_event(b'{"a": "xxxx"}', small).problem
    rows = LimitsSettings(array_rows=4)
    assert len(read_event(b'{"a": [1, 2], "b": [1, 2]}', rows).flat) == 4
    assert read_event(b'{"a": [1, 2], "b": [1, 2, 3]}', rows).problem == (
        "the rows of its arrays (over 4) exceeds limits.array_rows = 4")
    assert read_event(b'{"a": {"b": 1}, "c": 2}', small).flat == {"a.b": 1.0, "c": 2.0}


@given(st.binary(max_size=200))
@hyp_settings(max_examples=500, deadline=None)
def test_reading_random_bytes_never_raises(data):
    read = read_event(data, LIMITS)
    assert (read.obj is None) == (read.problem is not None and not read.flat and not isinstance(read.obj, dict))
    load_json(data)
    out = parse_change(None, data, POS, default_parser())
    assert isinstance(out, (Change, ErrorRecord))
    orjson.loads(error("event", data, POS, read.problem or "").to_json())


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=30,
)


@given(st.dictionaries(st.text(max_size=3), JSON, max_size=5))
@hyp_settings(max_examples=300, deadline=None)
def test_random_objects_read_like_flatten(obj):
    from matchers.events import flatten

    read = read_event(orjson.dumps(obj), LIMITS)
    if read.obj is not None:
        assert read.flat == flatten(obj)
    else:
        assert any(why in read.problem for why in ("appears twice", "limits.depth", "limits.array_rows"))


def test_error_records_have_a_deterministic_id_and_bounded_size():
    from streaming.notifications import notification_id
    from streaming.records import RAW_KEPT

    a = error("event", b"x" * 5_000_000, Position("events", 1, 42), "r" * 10_000, key=b"k" * 10_000)
    doc = orjson.loads(a.to_json())
    assert doc["id"] == notification_id("event", "events", 1, 42) == a.id
    assert doc["id"] != error("pattern-event", b"x", Position("events", 1, 42), "r").id
    assert doc["raw_bytes"] == 5_000_000 and doc["truncated"] and len(doc["raw"]) == RAW_KEPT
    assert len(doc["reason"]) < 1_100 and len(doc["key"]) < 1_100 and len(a.to_json()) < 20_000
    b = error("event", b"\xff" * 100_000, Position("events", 1, 42), "r")
    assert b.encoding == "base64" and b.truncated and base64.b64decode(b.raw) == b"\xff" * RAW_KEPT
    c = error("event", b"{oops", Position("events", 1, 42), "r")
    assert not c.truncated and c.raw == "{oops" and c.raw_bytes == 5


def test_subscription_limits(parse):
    many = " AND ".join(f"x = {i}" for i in range(1_001))
    out = change(parse, orjson.dumps({"id": "s", "expr": many}))
    assert "subscription 's': the number of predicates (1001) exceeds limits.predicates = 1000" == out.reason
    assert isinstance(change(parse, orjson.dumps({"id": "s", "expr": " AND ".join(f"x = {i}" for i in range(1_000))})),
                      Change)
    big = orjson.dumps({"id": "s", "expr": "x = 1", "pad": "y" * 70_000})
    assert "limits.subscription_bytes = 65536" in change(parse, big).reason
    deep = b'{"id": "s", "json": ' + b'{"all": [' * 3_000 + b"]}" * 3_000 + b"}"
    assert "nested more than 1024 levels deep" in change(parse, deep).reason
    assert "NaN and Infinity" in change(parse, b'{"id": "s", "expr": "x = 1", "expires": NaN}').reason
    small = LimitsSettings(subscription_bytes=40, predicates=1)
    assert "limits.predicates = 1" in parse_change(None, b'{"id": "s", "expr": "x = 1 OR y = 2"}', POS, parse,
                                                   limits=small).reason
    assert "limits.subscription_bytes = 40" in parse_change(None, big[:50], POS, parse, limits=small).reason


def test_event_pattern_records_and_their_errors():
    ok = parse_change(b"r", b'{"id": "r", "rule": {"source": ["aws.ec2"], "detail": {"n": [{"numeric": [">", 1]}]}}}',
                      POS, default_parser())
    assert isinstance(ok, Change) and ok.op == UPSERT
    assert evaluate(ok.subscription.expr, {"source": "aws.ec2", "detail.n": 2.0})
    assert not evaluate(ok.subscription.expr, {"source": "aws.ec2", "detail.n": "2"})
    bad = parse_change(None, b'{"id": "r", "rule": {"source": [{"contains": "ec2"}]}}', POS, default_parser())
    assert isinstance(bad, ErrorRecord) and "at $.rule.source[0].contains: unsupported matcher 'contains'" in bad.reason
