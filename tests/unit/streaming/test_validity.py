"""Validity ends of events and the store's file handling."""

from __future__ import annotations

import pytest

from streaming.validity import ValidEvent, ValidityStore, decode, encode, validity_end


def test_validity_end_rules():
    assert validity_end({"valid_until": 200}, "valid_until", 100.0, 1000.0) == 200.0
    assert validity_end({"valid_until": 5000.5}, "valid_until", 100.0, 1000.0) == 1100.0  # capped
    for value in (100, 50, True, "200", None, float("inf"), float("nan")):
        assert validity_end({"valid_until": value}, "valid_until", 100.0, 1000.0) is None
    assert validity_end({}, "valid_until", 100.0, 1000.0) is None


def test_store_files_by_batch_and_expiry(tmp_path):
    store = ValidityStore(tmp_path / "v")
    ev = lambda off, until: ValidEvent("events", 0, off, 1, until, f"e{off}", b'{"a": 1}')  # noqa: E731
    assert store.write(0, [ev(0, 150.0), ev(1, 300.0)]) == 2
    assert store.write(1, [ev(2, 120.0)]) == 1
    assert store.write(2, []) == 0 and store.count_files() == 2
    assert [e.offset for e in store.valid_events(2, 130.0)] == [0, 1]
    assert [e.offset for e in store.valid_events(1, 100.0)] == [0, 1]
    assert [e.offset for e in store.valid_events(5, 200.0)] == [1]
    assert store.prune(130.0) == 1 and store.count_files() == 1
    assert store.write(0, []) == 0 and store.count_files() == 0  # a replayed batch with nothing valid


def test_events_round_trip_and_a_store_on_a_file_uri(tmp_path):
    events = [ValidEvent("events", 1, 7, None, 9.5, 3, b'{"x": "\xc3\xa9"}'),
              ValidEvent("events", 0, 2, 5, 8.0, "e", b"{}")]
    assert decode(encode(events)) == events and decode(b"") == []
    store = ValidityStore((tmp_path / "a b").as_uri())
    store.write(3, events)
    assert ValidityStore(tmp_path / "a b").valid_events(4, 0.0) == events


def test_a_store_that_disappears_is_an_error(tmp_path):
    store = ValidityStore(tmp_path / "v")
    (tmp_path / "v").rmdir()
    with pytest.raises(FileNotFoundError):
        store.valid_events(1, 0.0)
