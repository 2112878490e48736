"""Subscription and event records: accepted changes, and error records with a reason."""

from __future__ import annotations

import base64

import orjson
import pytest

from matchers.oracle import evaluate
from streaming.config import LimitsSettings
from streaming.records import (
    DELETE,
    UPSERT,
    Change,
    ErrorRecord,
    Position,
    default_parser,
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
