"""Offset parsing, JSON form, ranges and the per-trigger cap."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.kafka import offsets as off
from streaming.kafka.errors import KafkaOptionError


def test_parse_spec_keywords_and_json() -> None:
    assert off.parse_spec(None, "startingOffsets", off.LATEST) == off.LATEST
    assert off.parse_spec(" Earliest ", "startingOffsets", off.LATEST) == off.EARLIEST
    spec = off.parse_spec('{"a": {"0": 5, "1": -2}, "b": {"0": -1}}', "s", off.LATEST)
    assert spec == {("a", 0): 5, ("a", 1): -2, ("b", 0): -1}


@pytest.mark.parametrize(
    "text", ["newest", "{", '{"a": 3}', '{"a": {"0": -3}}', '{"a": {"0": "5"}}', '{"a": {"x": 1}}']
)
def test_parse_spec_rejects_bad_values(text: str) -> None:
    with pytest.raises(KafkaOptionError, match="startingOffsets"):
        off.parse_spec(text, "startingOffsets", off.LATEST)


def test_from_json_rejects_markers_in_checkpointed_offsets() -> None:
    with pytest.raises(ValueError):
        off.from_json({"a": {"0": -1}})
    with pytest.raises(ValueError):
        off.from_json({"a": {"0": True}})


def test_parse_topics() -> None:
    assert off.parse_topics(" events, subscriptions ,events") == ["events", "subscriptions"]
    with pytest.raises(KafkaOptionError, match="subscribe"):
        off.parse_topics(" , ")
    with pytest.raises(KafkaOptionError):
        off.parse_topics(None)


offset_maps = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b", "events"]), st.integers(0, 5)),
    st.integers(0, 10**12),
    max_size=8,
)


@given(offset_maps)
def test_json_round_trip_is_spark_shaped(offsets: dict) -> None:
    raw = off.to_json(offsets)
    assert json.loads(json.dumps(raw)) == raw
    assert all(isinstance(p, str) for parts in raw.values() for p in parts)
    assert off.from_json(raw) == offsets


def test_ranges_skip_empty_and_start_new_partitions_at_zero() -> None:
    start = {("a", 0): 5, ("a", 1): 7}
    end = {("a", 0): 9, ("a", 1): 7, ("a", 2): 3}
    assert off.ranges(start, end) == [
        off.OffsetRange("a", 0, 5, 9),
        off.OffsetRange("a", 2, 0, 3),
    ]


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=6),
    st.integers(1, 3000),
)
def test_cap_is_exact_bounded_and_fair(pairs: list[tuple[int, int]], max_records: int) -> None:
    start = {("t", i): s for i, (s, _) in enumerate(pairs)}
    end = {("t", i): s + n for i, (s, n) in enumerate(pairs)}
    capped = off.cap(start, end, max_records)
    backlog = sum(n for _, n in pairs)
    assert set(capped) == set(end)
    for tp in end:
        assert start[tp] <= capped[tp] <= end[tp]
    assert sum(capped[tp] - start[tp] for tp in end) == min(max_records, backlog)
    if backlog > max_records:
        for tp in end:  # each partition gets its proportional share, rounded either way
            share = (end[tp] - start[tp]) * max_records / backlog
            assert abs((capped[tp] - start[tp]) - share) < 1


def test_cap_counts_new_partitions_from_zero_and_rejects_zero() -> None:
    capped = off.cap({("a", 0): 100}, {("a", 0): 200, ("a", 1): 100}, 50)
    assert capped == {("a", 0): 125, ("a", 1): 25}
    with pytest.raises(KafkaOptionError):
        off.cap({}, {("a", 0): 1}, 0)
