"""Flattening and batch encoding."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from matchers.errors import TooManyRows
from matchers.events import Dictionary, Rows, decode, encode, flatten


def test_flatten_nested_and_leaves_out_what_json_cannot_hold():
    flat = flatten({"user": {"country": "FR", "age": 30, "tags": ["a"], "x": float("inf"), "t": object()},
                    "n": None, "ok": True})
    assert flat == {"user.country": "FR", "user.age": 30.0, "user.tags": "a", "n": None, "ok": True}


def test_flatten_arrays_to_rows():
    assert flatten({"a": 1, "tags": []}) == {"a": 1.0}  # an empty array is an absent attribute
    rows = flatten({"a": 1, "tags": ["x", "y"], "items": [{"sku": "s", "qty": 2}, {"sku": "t"}, [5]]})
    assert type(rows) is Rows and list(rows) == [
        {"a": 1.0, "tags": t, **item} for t in ("x", "y")
        for item in ({"items.sku": "s", "items.qty": 2.0}, {"items.sku": "t"}, {"items": 5.0})]
    assert list(flatten({"o": {"n": [[1, 2], 3]}})) == [{"o.n": 1.0}, {"o.n": 2.0}, {"o.n": 3.0}]  # nested arrays
    assert len(flatten({"a": list(range(10)), "b": list(range(10))}, max_rows=100)) == 100
    with pytest.raises(TooManyRows, match="more than 99 rows"):
        flatten({"a": list(range(10)), "b": list(range(10))}, max_rows=99)
    with pytest.raises(TooManyRows):
        flatten({"a": list(range(100))}, max_rows=99)
    assert len(flatten({"a": list(range(10)), "b": list(range(10))}, max_rows=None)) == 100


def test_encode_rows_keeps_events_apart():
    d = Dictionary()
    events = [{"a": 1.0}, flatten({"a": [2, 3], "s": ["x", "y"]}), {}, flatten({"a": [4, 5]})]
    batch = encode(events, d)
    assert batch.n == 4 and batch.rows.tolist() == [0, 1, 5, 6, 8]
    assert [decode(batch, d, i) for i in range(8)] == [events[0], *events[1], {}, *events[3]]
    assert encode([{"a": 1.0}], d).rows is None


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
