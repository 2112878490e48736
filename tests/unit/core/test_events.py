"""Flattening and batch encoding."""

from __future__ import annotations

import math

from matchers.events import Dictionary, decode, encode, flatten


def test_flatten_nested_and_unsupported_values_are_reported():
    problems: list[str] = []
    flat = flatten({"user": {"country": "FR", "age": 30, "tags": ["a"]}, "n": None, "ok": True}, problems)
    assert flat == {"user.country": "FR", "user.age": 30.0, "ok": True}
    assert len(problems) == 2 and any("user.tags" in p and "array" in p for p in problems)


def test_encode_round_trip_and_codes():
    d = Dictionary()
    aid = d.attr("sym")
    d.code(aid, "IBM")
    events = [{"sym": "IBM", "price": 10.0, "live": False}, {}, {"sym": "MSFT"}]
    batch = encode(events, d)
    assert batch.n == 3 and batch.offsets.tolist() == [0, 3, 3, 4]
    assert [decode(batch, d, i) for i in range(3)] == events
    assert batch.codes[0] == 0 and batch.codes[3] == -1  # unknown string: no code
    assert math.isnan(batch.nums[0])
    for i in range(batch.n):  # sorted by attribute within an event
        seg = batch.attrs[batch.offsets[i]:batch.offsets[i + 1]]
        assert list(seg) == sorted(seg)


def test_attribute_cap_drops_unknown_attributes():
    d = Dictionary(max_attributes=1)
    batch = encode([{"a": 1.0, "b": 2.0}], d)
    assert batch.attrs.tolist() == [0] and d.attr_names == ["a"]
