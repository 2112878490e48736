"""The unknown-attribute warning without Spark: the census, the keying's tally, the driver's side."""

from __future__ import annotations

import random

import numpy as np
import orjson
import pytest

from streaming.config import ConfigError, Settings
from streaming.config_sources import load
from streaming.match.changes import records_of, register_records
from streaming.patterns.census import (
    ATTRIBUTE_WARNING,
    CENSUS_KEY,
    FILE,
    Census,
    CurrentWarnings,
    Tally,
    Watch,
    census_dir,
)
from streaming.patterns.keyed import _read_rows, keyed_rows, scan_rows
from streaming.patterns.queries import AttributeWarnings, registry_dir
from streaming.patterns.registry import partition_keys
from streaming.registry_columns import ColumnRegistry
from tests.unit.streaming.helpers import NO_KAFKA, kafka_batch

from .test_patterns import _tricky_events, register, settings_for

MISSPELT = "FILTER{prcie > 3}(Stock) NEXT{$2.name = $1.name AND $2.price > $1.price} Stock"
GOOD = "FILTER{price > 3}(Stock) NEXT{$2.name = $1.name AND $2.price > $1.price} Stock"
ENTRIES = {"bad": [MISSPELT, 1, "name"], "good": [GOOD, 1, "name"]}


def _tally(stream: str, n: int, names: list[str], watch: Watch) -> bytes:
    t = Tally(watch, cap=10)
    t.add(stream, n, names)
    return t.to_json()


def test_a_read_is_unknown_once_its_stream_has_settled_without_it():
    census = Census(settle=100, cap=10)
    watch = census.watch(1, ENTRIES)
    assert watch == Watch(frozenset({"Stock"}), ("name", "prcie", "price"))
    census.merge([_tally("Stock", 60, ["name", "price", "vol"], watch)], set(watch.names))
    assert census.unknown(1, ENTRIES) == []  # 60 events: not settled yet
    assert census.watch(1, ENTRIES) == Watch(frozenset({"Stock"}), ("prcie",))  # only the open read is watched
    census.merge([_tally("Stock", 60, ["name"], watch)], set(watch.names))
    [u] = census.unknown(1, ENTRIES)
    assert (u.pattern, u.read.text, u.events) == ("bad", "prcie", {"Stock": 100})  # counted up to the settle point
    reason = u.reason()
    assert reason.startswith("pattern 'bad' reads prcie, which no event of Stock has carried: Stock (100 events) seen")
    assert "did you mean 'price'?" in reason and "Stock carries: name, price, vol" in reason
    census.merge([_tally("Stock", 1, ["prcie"], Watch(frozenset({"Stock"}), ("prcie",)))], {"prcie"})
    assert census.unknown(1, ENTRIES) == [] and census.watch(1, ENTRIES) is None  # carried now: nothing open


def test_every_stream_of_a_read_must_settle_and_none_carry_it():
    entries = {"q": ["A NEXT{TRUE} B NEXT{$2.x = $1.k} C", 3, None]}
    census = Census(settle=10, cap=10)
    watch = census.watch(3, entries)
    census.merge([_tally("A", 10, ["j"], watch), _tally("C", 10, ["x"], watch)], set(watch.names))
    assert census.unknown(3, entries) == []  # B has not been seen
    census.merge([_tally("B", 10, ["kk"], watch)], set(watch.names))
    [u] = census.unknown(3, entries)
    assert u.read.text == "$.k" and u.read.streams == ("A", "B")
    assert "no event of A, B has carried" in u.reason() and "did you mean 'kk'?" in u.reason()


def test_names_are_capped_but_read_names_kept():
    census = Census(settle=1, cap=3)
    census.merge([orjson.dumps({"S": [5, [f"a{i}" for i in range(10)] + ["zz"]]})], {"zz"})
    assert census.names["S"] == {"a0", "a1", "a2", "zz"}
    t = Tally(Watch(frozenset({"S"}), ("zz",)), cap=2)
    t.add("S", 3, ["b", "c", "d", "zz"])
    t.add("T", 3, ["x"])  # not watched
    assert orjson.loads(t.to_json()) == {"S": [3, ["zz", "b", "c"]]}


def test_reserved_fields_are_named_and_the_census_round_trips():
    entries = {"q": ["FILTER{ts > 3}(S)", 1, None]}
    census = Census(settle=1, cap=10)
    census.merge([orjson.dumps({"S": [2, ["price"]]})], set())
    [u] = census.unknown(1, entries)
    assert "'ts' is the time field" in u.reason({"ts": "time field"})
    census.warned.add(u.key)
    again = Census.from_json(census.to_json([u]), 1, 10)
    assert (again.events, again.names, again.warned) == (census.events, census.names, {"q|1|S.ts"})


def test_the_scanned_tally_equals_the_tally_event_by_event(tmp_path, monkeypatch):
    """The keying's tally of the events the scan reads (numpy over the scan's lookups) counts the
    same events and watched names as reading every event one by one."""
    settings = settings_for(tmp_path, key_buckets=16)
    register(settings, {"sym": "FILTER{price > 1}(Stock) NEXT{$2.sym = $1.sym AND $2.user > 1} Stock"})
    values = _tricky_events(random.Random(11))
    batch = kafka_batch(values)
    _, attrs, unkeyed = partition_keys(registry_dir(settings))
    watch = Watch(frozenset({"Stock", "Other", "events"}), ("name", "price", "user", "ts", "zz"))
    fast_tally, slow_tally = Tally(watch, cap=100), Tally(watch, cap=100)
    fast, slow, _ = scan_rows(batch, attrs, unkeyed, settings, fast_tally)
    assert fast is not None and fast.num_rows > 50 and len(slow) > 50
    _read_rows(batch, slow, attrs, unkeyed, settings, fast_tally)
    _read_rows(batch, np.arange(len(values)), attrs, unkeyed, settings, slow_tally)
    assert fast_tally.events == slow_tally.events and sum(slow_tally.events.values()) > 200
    for stream, names in slow_tally.names.items():
        assert fast_tally.names[stream] & set(watch.names) == names & set(watch.names)
        assert fast_tally.names[stream] <= names  # the others: a sample
    assert "ts" not in set().union(*slow_tally.names.values())  # reserved fields are not attributes
    # keyed_rows adds the tally as one census row; without a watch, none
    import streaming.kafka.sink as sink

    monkeypatch.setattr(sink, "produce_batches", lambda *args: None)  # its error records
    out = list(keyed_rows(iter([batch]), registry_dir(settings), settings, NO_KAFKA, watch))
    rows = [r for rb in out for r in rb.to_pylist() if r["gkey"] == CENSUS_KEY]
    assert len(rows) == 1 and rows[0]["part"] == 0
    assert {s: n for s, (n, _) in orjson.loads(rows[0]["attrs"]).items()} == slow_tally.events
    out = list(keyed_rows(iter([batch]), registry_dir(settings), settings, NO_KAFKA))
    assert not [r for rb in out for r in rb.to_pylist() if r["gkey"] == CENSUS_KEY]


def test_the_driver_warns_once_per_pattern_and_attribute(tmp_path, caplog):
    settings = settings_for(tmp_path, unknown_attribute_events=5)
    reg = ColumnRegistry(registry_dir(settings))
    register_records(reg, 0, records_of([(b"bad", orjson.dumps({"id": "bad", "pattern": MISSPELT}), "subscriptions", 0, 0),
                                   (b"good", orjson.dumps({"id": "good", "pattern": GOOD}), "subscriptions", 0, 1)]), 0.0)
    warnings = AttributeWarnings(settings, registry_dir(settings), None)
    watch = warnings.watch()
    assert watch is not None and "prcie" in watch.names
    tally = _tally("Stock", 10, ["name", "price"], watch)
    with caplog.at_level("WARNING", logger="streaming.patterns"):
        [(topic, record)] = warnings.note(0, [tally], watch)
    assert topic == settings.kafka.errors_topic and record.stage == ATTRIBUTE_WARNING
    doc = orjson.loads(record.to_json())
    assert doc["key"] == "bad" and "did you mean 'price'?" in doc["reason"] and doc["topic"] == "subscriptions"
    assert [r.getMessage() for r in caplog.records] == [f"patterns: {record.reason}"]
    assert warnings.note(1, [tally], watch) == []  # once
    [shown] = CurrentWarnings(str(tmp_path / "patterns"))()
    assert (shown["pattern"], shown["attribute"], shown["streams"]) == ("bad", "prcie", ["Stock"])
    # a restart keeps the warned reads: no second record; the id of a record is its warning's
    again = AttributeWarnings(settings, registry_dir(settings), None)
    assert again.note(2, [], again.watch()) == []
    # one warning per pattern, stream and attribute, whatever the references
    entries = {"q": ["FILTER{prcie > 1}(Stock) NEXT{$2.prcie > $1.prcie} Stock", 1, None]}
    census = Census(settle=1, cap=10)
    census.merge([orjson.dumps({"Stock": [2, ["price"]]})], set())
    [u] = census.unknown(1, entries)
    assert u.read.text == "$.prcie, $2.prcie, prcie" and u.key == "q|1|Stock.prcie"
    assert u.reason().startswith("pattern 'q' reads $.prcie, $2.prcie, prcie, which no event of Stock")
    assert record.id == record._replace(position=record.position._replace(offset=99)).id  # the warning's, not the position's


def test_settings(tmp_path):
    assert Settings().patterns.unknown_attribute_events == 1000
    with pytest.raises(ConfigError, match="unknown_attribute_events"):
        load(None, ["patterns.unknown_attribute_events=-1"])
    with pytest.raises(ConfigError, match="stream_attribute_names"):
        load(None, ["patterns.stream_attribute_names=0"])


def test_a_deleted_patterns_warning_leaves_the_census(tmp_path):
    settings = settings_for(tmp_path, unknown_attribute_events=5)
    reg = ColumnRegistry(registry_dir(settings))
    register_records(reg, 0, records_of([(b"bad", orjson.dumps({"id": "bad", "pattern": MISSPELT}), "subscriptions", 0, 0)]), 0.0)
    warnings = AttributeWarnings(settings, registry_dir(settings), None)
    watch = warnings.watch()
    assert len(warnings.note(0, [_tally("Stock", 10, ["name", "price"], watch)], watch)) == 1
    assert warnings.census.warned == {"bad|1|Stock.prcie"}
    register_records(reg, 1, records_of([(b"bad", orjson.dumps({"op": "delete", "id": "bad"}), "subscriptions", 0, 1)]), 0.0)
    assert warnings.note(1, [], None) == [] and warnings.census.warned == set()
    assert CurrentWarnings(str(tmp_path / "patterns"))() == []
    # registered again: a new registration, warned again
    register_records(reg, 2, records_of([(b"bad", orjson.dumps({"id": "bad", "pattern": MISSPELT}), "subscriptions", 0, 2)]), 0.0)
    [(_, record)] = warnings.note(2, [], warnings.watch())
    assert warnings.census.warned == {"bad|3|Stock.prcie"} and record.position.offset == 3



def test_the_status_reads_the_census_file_only_when_it_changed(tmp_path, monkeypatch):
    """The match job's status asks for the warnings every batch: one stat, and a read only after a
    write; a removed, unreadable or broken file gives no warnings and no error."""
    settings = settings_for(tmp_path, unknown_attribute_events=5)
    reg = ColumnRegistry(registry_dir(settings))
    register_records(reg, 0, records_of([(b"bad", orjson.dumps({"id": "bad", "pattern": MISSPELT}), "subscriptions", 0, 0)]), 0.0)
    ckpt = str(tmp_path / "patterns")
    current = CurrentWarnings(ckpt)
    reads: list[str] = []
    read = current.directory.read

    def counted(name):
        reads.append(name)
        return read(name)

    monkeypatch.setattr(current.directory, "read", counted)
    assert current() == [] and reads == []  # no census yet: nothing read
    warnings = AttributeWarnings(settings, registry_dir(settings), None)
    watch = warnings.watch()
    assert len(warnings.note(0, [_tally("Stock", 10, ["name", "price"], watch)], watch)) == 1
    [shown] = current()
    assert shown["pattern"] == "bad" and shown["attribute"] == "prcie" and reads == [FILE]
    for _ in range(3):  # unchanged: served from the last read
        assert current() == [shown]
    assert reads == [FILE]
    register_records(reg, 1, records_of([(b"bad", orjson.dumps({"op": "delete", "id": "bad"}), "subscriptions", 0, 1)]), 0.0)
    warnings.note(1, [], None)  # the census written again, the warning gone
    assert current() == [] and reads == [FILE, FILE]
    register_records(reg, 2, records_of([(b"bad", orjson.dumps({"id": "bad", "pattern": MISSPELT}), "subscriptions", 0, 2)]), 0.0)
    warnings.note(2, [], warnings.watch())
    assert [w["pattern"] for w in current()] == ["bad"] and len(reads) == 3
    path = tmp_path / "patterns" / "attribute-census" / FILE
    path.unlink()  # removed
    assert current() == [] and len(reads) == 3
    census_dir(ckpt).write(FILE, b"{not json", durable=False)  # broken: read once, no warnings
    assert current() == [] and current() == [] and len(reads) == 4
    census_dir(ckpt).write(FILE, b'[1, 2]', durable=False)  # JSON, not a census
    assert current() == [] and len(reads) == 5
    path.unlink()
    path.mkdir()  # not a file
    assert current() == [] and len(reads) == 5
    path.rmdir()
    census_dir(ckpt).write(FILE, orjson.dumps({"unknown": [shown]}), durable=False)

    def denied(name):
        reads.append(name)
        raise PermissionError(13, "Permission denied", name)

    monkeypatch.setattr(current.directory, "read", denied)
    assert current() == [] and current() == [] and len(reads) == 7  # unreadable: tried again each time
    monkeypatch.setattr(current.directory, "read", counted)
    assert current() == [shown] and current() == [shown] and len(reads) == 8
