"""Subscription records: ids, the two forms, expiry, unknown fields, the DNF bound."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from matchers.errors import SubscriptionError
from matchers.expr import Subscription, pred
from matchers.language import MAX_ID_LENGTH, parse_record, parse_subscription, parse_text, to_record

TEXT = "symbol = 'IBM' AND price < 100"
JSON = {"all": [["symbol", "=", "IBM"], ["price", "<", 100]]}


def error_of(obj, **kwargs) -> SubscriptionError:
    with pytest.raises(SubscriptionError) as info:
        parse_record(obj, **kwargs)
    return info.value


def test_text_and_json_records_give_the_same_subscription():
    a = parse_record({"id": "s1", "expr": TEXT})
    b = parse_record({"id": "s1", "json": JSON})
    assert a == b == Subscription.of("s1", parse_text(TEXT))
    assert a.conjunctions == ((pred("price", "<", 100), pred("symbol", "=", "IBM")),)
    assert a.expires is None


@pytest.mark.parametrize("expires,seconds", [
    (1700000000, 1700000000.0),
    (1700000000.5, 1700000000.5),
    (0, 0.0),
    (None, None),
    ("2026-01-31T12:00:00Z", datetime(2026, 1, 31, 12, tzinfo=UTC).timestamp()),
    ("2026-01-31T12:00:00+02:00", datetime(2026, 1, 31, 10, tzinfo=UTC).timestamp()),
    ("2026-01-31T12:00:00", datetime(2026, 1, 31, 12, tzinfo=UTC).timestamp()),
    ("2026-01-31 12:00:00.250Z", datetime(2026, 1, 31, 12, 0, 0, 250000, tzinfo=UTC).timestamp()),
    ("2026-01-31", datetime(2026, 1, 31, tzinfo=UTC).timestamp()),
])
def test_expires(expires, seconds):
    assert parse_record({"id": "s", "expr": "a = 1", "expires": expires}).expires == seconds


@pytest.mark.parametrize("record,position,message", [
    ([TEXT], "$", "must be a JSON object, not an array"),
    ("s1", "$", "must be a JSON object"),
    (None, "$", "must be a JSON object, not null"),
    ({"expr": TEXT}, "$", "the record has no id"),
    ({"id": 7, "expr": TEXT}, "$.id", "the id must be a string, not int 7"),
    ({"id": None, "expr": TEXT}, "$.id", "the id must be a string, not null"),
    ({"id": "", "expr": TEXT}, "$.id", "the id is empty"),
    ({"id": "x" * (MAX_ID_LENGTH + 1), "expr": TEXT}, "$.id", "more than 256"),
])
def test_record_errors_before_the_id_is_known(record, position, message):
    err = error_of(record)
    assert err.position == position and message in err.reason


@pytest.mark.parametrize("record,position,message", [
    ({"id": "s1"}, "$", 'none of "expr", "json" and "rule"'),
    ({"id": "s1", "expr": TEXT, "rule": {"a": [1]}}, "$", 'both "expr" and "rule"'),
    ({"id": "s1", "expr": TEXT, "json": JSON}, "$", 'both "expr" and "json"'),
    ({"id": "s1", "expr": TEXT, "exprs": TEXT}, "$.exprs", "unknown field 'exprs'"),
    ({"id": "s1", "expr": TEXT, "op": "upsert", "x": 1}, "$.op", "unknown fields 'op', 'x'"),
    ({"id": "s1", "expr": JSON}, "$.expr", '"expr" must be a string (the text form), not an object'),
    ({"id": "s1", "expr": "price <"}, "1:8", "ends too early"),
    ({"id": "s1", "expr": "a = 1 AND\n b IN ()"}, "2:2", "the list is empty"),
    ({"id": "s1", "json": {"all": [["a", "in", []]]}}, "$.json.all[0][2]", "the list is empty"),
    ({"id": "s1", "json": "price < 100"}, "$.json", "is not an expression"),
    ({"id": "s1", "expr": TEXT, "expires": True}, "$.expires", "not bool True"),
    ({"id": "s1", "expr": TEXT, "expires": [1]}, "$.expires", "not an array"),
    ({"id": "s1", "expr": TEXT, "expires": "tomorrow"}, "$.expires", "not an ISO-8601 time"),
    ({"id": "s1", "expr": TEXT, "expires": float("inf")}, "$.expires", "finite"),
    ({"id": "s1", "expr": TEXT, "expires": 10**400}, "$.expires", "finite"),
])
def test_record_errors_name_the_subscription(record, position, message):
    err = error_of(record)
    assert err.sub_id == "s1" and err.position == position and message in err.reason
    assert str(err).startswith(f"subscription 's1' at {position}: ")


def test_id_length_limit_is_inclusive():
    sub_id = "é" * MAX_ID_LENGTH
    assert parse_record({"id": sub_id, "expr": "a = 1"}).id == sub_id


def test_dnf_over_the_bound_is_rejected_not_truncated():
    text = " AND ".join(f"(a{i} = 1 OR b{i} = 1)" for i in range(9))  # 2**9 = 512 conjunctions
    err = error_of({"id": "wide", "expr": text})
    assert err.sub_id == "wide" and "more than 256 conjunctions" in err.reason
    assert len(parse_record({"id": "wide", "expr": text}, max_terms=512).conjunctions) == 512
    err = error_of({"id": "wide", "expr": " AND ".join(f"(a{i} = 1 OR b{i} = 1)" for i in range(3))}, max_terms=4)
    assert "more than 4" in err.reason


def test_parse_subscription():
    sub = parse_subscription(TEXT, "s9", expires=5.0)
    assert sub == Subscription.of("s9", parse_text(TEXT), expires=5.0)
    with pytest.raises(SubscriptionError) as info:
        parse_subscription("price <", "s9")
    assert info.value.sub_id == "s9" and info.value.position == "1:8"
    with pytest.raises(SubscriptionError, match="the id is empty"):
        parse_subscription(TEXT, "")
    with pytest.raises(SubscriptionError, match="more than 2 conjunctions"):
        parse_subscription("a = 1 OR b = 1 OR c = 1", "s9", max_terms=2)


@pytest.mark.parametrize("form", ["text", "json"])
def test_to_record_round_trip(form):
    sub = parse_record({"id": "s1", "expr": "NOT (a = 1 OR s LIKE '%x_') AND f = true", "expires": 12.5})
    record = to_record(sub, form)
    assert ("expr" in record) == (form == "text") and record["expires"] == 12.5
    assert parse_record(record) == sub
    assert "expires" not in to_record(parse_record({"id": "s1", "expr": "a = 1"}), form)


def test_to_record_rejects_an_unknown_form():
    with pytest.raises(ValueError):
        to_record(parse_record({"id": "s1", "expr": "a = 1"}), "yaml")
