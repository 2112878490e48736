"""Flattening and batch encoding."""

from __future__ import annotations

import itertools
import math

from hypothesis import given
from hypothesis import strategies as st

from matchers.events import Dictionary, decode, encode, flatten


def test_flatten_nested_and_unsupported_values_are_reported():
    problems: list[str] = []
    flat = flatten({"user": {"country": "FR", "age": 30, "tags": ["a"]}, "n": None, "ok": True}, problems)
    assert flat == {"user.country": "FR", "user.age": 30.0, "n": None, "ok": True}  # null is a value
    assert len(problems) == 1 and "user.tags" in problems[0] and "array" in problems[0]


def test_encode_round_trip_and_codes():
    d = Dictionary()
    aid = d.attr("sym")
    d.code(aid, "IBM")
    events = [{"sym": "IBM", "price": 10.0, "live": False}, {}, {"sym": "MSFT", "gone": None}]
    batch = encode(events, d)
    assert batch.n == 3 and batch.offsets.tolist() == [0, 3, 3, 5]
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


_VALUES = st.one_of(st.integers(-5, 5), st.floats(-5, 5, allow_nan=False), st.booleans(), st.sampled_from(["IBM", "x", ""]))


@given(st.lists(st.dictionaries(st.sampled_from("abcdefg"), _VALUES, max_size=7), max_size=12),
       st.integers(1, 8), st.permutations("abcdefg"))
def test_encode_equals_an_entry_by_entry_encoding(events, cap, known):
    d = Dictionary(max_attributes=cap)
    for name in known[:3]:  # some attributes (and a string code) exist before the batch
        d.code(d.attr(name), "IBM")
    batch = encode(events, d)
    kept = [{k: v for k, v in e.items() if d.attr(k, create=False) >= 0} for e in events]
    assert batch.offsets.tolist() == [0, *itertools.accumulate(len(e) for e in kept)]
    for i, e in enumerate(kept):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        assert batch.attrs[lo:hi].tolist() == sorted(d.attr(k) for k in e)
        assert decode(batch, d, i) == {k: v if isinstance(v, (bool, str)) else float(v) for k, v in e.items()}
        for j in range(lo, hi):
            text = batch.strings[batch.texts[j]] if batch.texts[j] >= 0 else None
            assert batch.codes[j] == (d.strings[batch.attrs[j]].get(text, -1) if text is not None else -1)
