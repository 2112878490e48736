"""The patterns query's pure parts, without Spark: pattern records in the registry and its view,
keyed rows, keyed-state lifecycle."""

from __future__ import annotations

import pickle
from collections import namedtuple

import orjson
import pandas as pd
import pytest

from streaming.config import Settings
from streaming.config_sources import load
from streaming.errors import RegistryError
from streaming.match import BatchContext, match_partition
from streaming.match.changes import parse_subscription_records, records_of, register_records
from streaming.patterns.keyed import (
    NO_KEY,
    PATTERN_EVENT,
    event_time_ms,
    group_key,
    keyed_rows,
    read_row,
)
from streaming.patterns.operator import PATTERN_LATE, PatternOperator
from streaming.patterns.queries import _starting, _trigger, registry_dir
from streaming.patterns.registry import ALL_KEY, current, partition_keys, pattern_change
from streaming.records import Position
from streaming.registry_columns import PATTERN, ColumnRegistry, view
from streaming.registry_columns.parse import ERROR
from tests.unit.cayuga.helpers import reference_matches
from tests.unit.cayuga.streams import TABLE1, stock_ticks
from tests.unit.streaming.helpers import NO_KAFKA, ModelRegistry, kafka_batch

POS = Position("subs", 0, 1)


def _rec(**obj) -> bytes:
    return orjson.dumps(obj)


def _rows(records):
    """``(id, op, kind, packed)`` of each record ``(key, value)`` as the match query parses it."""
    got = parse_subscription_records(records_of([(k, v, "s", 0, i) for i, (k, v) in enumerate(records)]))
    return [(r["id"], r["op"], r["kind"], r["packed"]) for r in got.to_pylist()]


def test_pattern_records():
    text = TABLE1["S3"]
    assert pattern_change("a", {"pattern": text}, b"a", b"", POS) == view.packed(text, "name")
    bad = pattern_change("b", {"pattern": "S NEXT{x = 1} S"}, b"b", b"", POS)
    assert "'b'" in bad.reason and "$1." in bad.reason and bad.stage == "pattern"
    assert "string" in pattern_change("c", {"pattern": 3}, b"c", b"", POS).reason
    assert "target" in pattern_change("t", {"pattern": text, "target": "x"}, b"t", b"", POS).reason
    rows = _rows([(b"a", _rec(id="a", pattern=text)), (b"a", _rec(id="a", expr="x > 1")), (b"old", None),
                  (None, _rec(op="delete", id="old")), (b"b", _rec(id="b", pattern="S NEXT{x = 1} S"))])
    assert [r[:3] for r in rows] == [("a", 0, PATTERN), ("a", 0, 1), ("old", 1, 0), ("old", 1, 0), ("b", ERROR, PATTERN)]
    assert rows[0][3] == view.packed(text, "name")
    # a record the envelope refuses (bad op, no id, too large) is one error record, whatever its kind
    rows = _rows([(b"d", _rec(op="x", id="d", pattern="S")), (None, _rec(pattern="S")),
                  (b"e", _rec(id="e", pattern=text + " " * 70_000))])
    assert [(r[0], r[1]) for r in rows] == [(None, ERROR)] * 3


def test_registry_versions_and_replay(tmp_path):
    reg = ColumnRegistry(tmp_path)
    rows = [(b"a", _rec(id="a", pattern=TABLE1["S3"]), "s", 0, 0), (b"b", _rec(id="b", pattern=TABLE1["S2"]), "s", 0, 1)]
    applied, admitted = register_records(reg, 0, records_of(rows), 1.0)
    assert (applied.version, admitted.errors.num_rows) == (1, 0)
    again, _ = register_records(reg, 0, records_of(rows), 1.0)  # a replayed batch is not applied twice
    assert (again.version, again.replay) == (1, True)
    applied, admitted = register_records(reg, 1, records_of([(b"a", None, "s", 0, 2),
                                                             (b"x", _rec(id="x", pattern="("), "s", 0, 3)]), 2.0)
    assert applied.version == 2 and admitted.errors.num_rows == 1
    got = current(str(tmp_path))
    assert (got.version, got.batch_id, sorted(got.patterns)) == (2, 1, ["b"])
    assert got.patterns["b"][1] == 1  # registered at version 1
    assert ColumnRegistry(tmp_path).pattern_view() == got.patterns
    assert partition_keys(str(tmp_path))[1:] == ([], True)


def test_a_missing_registry_is_an_error_never_empty(tmp_path):
    with pytest.raises(RegistryError, match="no pattern view"):
        partition_keys(str(tmp_path / "nowhere"))
    ColumnRegistry((tmp_path / "r").as_uri())  # created by the driver, at a URI: no pattern yet
    assert partition_keys(str(tmp_path / "r")) == (0, [], False)
    (tmp_path / "r" / "patterns").rmdir()
    with pytest.raises(RegistryError):
        partition_keys(str(tmp_path / "r"))


class Part:
    """One state partition between the operator's micro-batches."""

    def __init__(self):
        self.state: dict = {}


OutRow = namedtuple("OutRow", "key value topic")


def settings_for(tmp_path, **patterns) -> Settings:
    return Settings().replace(spark={"checkpoint_dir": str(tmp_path)}, patterns=patterns)


def event_bytes(e, **fields) -> bytes:
    return orjson.dumps({"id": e.id, "stream": e.stream, "ts": e.t1, **e.attrs, **fields})


def _keyed(values, settings, monkeypatch, marks=False) -> tuple[pd.DataFrame, list[dict]]:
    """Keyed rows of event records (with the partitions' marks if ``marks``), and the error records the task produced."""
    import streaming.kafka.sink as sink

    sent: list[dict] = []
    monkeypatch.setattr(sink, "produce_batches", lambda producer, topic, batches: sent.extend(
        orjson.loads(r["value"]) | {"to": topic} for rb in batches for r in rb.to_pylist()))
    out = list(keyed_rows(iter([kafka_batch(values)]), registry_dir(settings), settings, NO_KAFKA))
    rows = pd.concat([rb.to_pandas() for rb in out], ignore_index=True)
    return (rows if marks else rows[rows["gkey"] != NO_KEY]), sent


def register(settings, subs) -> ColumnRegistry:
    """The patterns ``{id: text}`` registered as the match query does, in one batch."""
    reg = ColumnRegistry(registry_dir(settings))
    _, admitted = register_records(reg, 0, records_of(
        [(k.encode(), _rec(id=k, pattern=t), "s", 0, i) for i, (k, t) in enumerate(subs.items())]), 0.0)
    assert not admitted.errors.num_rows
    return reg


def feed(op, part, rows, watermark_ms):
    """One micro-batch of the operator over ``rows`` (a keyed rows frame) in one state partition."""
    events = {c: rows[c].tolist() for c in rows.columns} if len(rows) else {}
    part.state, out = op.run(part.state, events, watermark_ms)
    return [OutRow(*r) for r in out]


def witnesses(out) -> set:
    docs = [orjson.loads(r.value) for r in out if r.topic == "notifications"]
    return {(n["subscription"], tuple(n["witness"]["events"])) for n in docs}


@pytest.mark.parametrize("step, buckets", [(1, 64), (7, 2), (1000, 1)])
def test_keyed_state_lifecycle_equals_reference(tmp_path, monkeypatch, step, buckets):
    """Events fed in slices with a lagging watermark, then timeouts: same witnesses."""
    subs = {k: TABLE1[k] for k in ("S2", "S3", "S4", "AutQ")}
    settings = settings_for(tmp_path, key_buckets=buckets)
    register(settings, subs)
    events = stock_ticks(200, 4)
    rows, sent = _keyed([event_bytes(e) for e in events] + [b"[1]"], settings, monkeypatch)
    assert sent == []  # the event that is no JSON object is the match query's to report
    assert set(rows["gkey"]) <= {ALL_KEY} | {group_key("name", s, buckets) for s in ("IBM", "MSFT", "ORCL", "SUN")}
    op, part, got = PatternOperator(registry_dir(settings), settings), Part(), set()
    for lo in range(0, len(events), step):
        wm = event_time_ms(events[lo].t1, 1000) - 3000 if lo else 0
        got |= witnesses(feed(op, part, rows[(rows["offset"] >= lo) & (rows["offset"] < lo + step)], wm))
    got |= witnesses(feed(op, part, rows.iloc[:0], event_time_ms(events[-1].t1 + 1, 1000)))
    assert got == {(k[1], k[5]) for k in reference_matches(subs, events)}


def test_pattern_notification_schema(tmp_path, monkeypatch):
    """One schema with the match side: kind, the completing event's id and position."""
    settings = settings_for(tmp_path)
    register(settings, {"S3": TABLE1["S3"]})
    events = stock_ticks(60, 4)
    rows, _ = _keyed([event_bytes(e) for e in events], settings, monkeypatch)
    out = feed(PatternOperator(registry_dir(settings), settings), Part(), rows, event_time_ms(events[-1].t1 + 1, 1000))
    docs = [orjson.loads(r.value) for r in out]
    assert docs
    for r, d in zip(out, docs, strict=True):
        assert d["kind"] == "pattern" and r.key == d["subscription"].encode() and r.topic == "notifications"
        assert d["event_id"] == d["witness"]["events"][-1]
        assert (d["topic"], d["partition"]) == ("events", 0) and events[d["offset"]].id == d["event_id"]
        assert d["event_time_ms"] == d["witness"]["t1"] * 1000
    from scripts.follow import pretty

    assert pretty(docs[0], errors=False).startswith("pattern S3 <- events [")


def test_absence_fires_from_the_watermark_and_survives_a_restart(tmp_path, monkeypatch):
    """A failed login not followed by a success within 300 ticks: reported when the watermark
    passes the deadline, with no later event of the key, across a restore of the state."""
    settings = settings_for(tmp_path)
    register(settings, {"nologin": "FILTER{ok = FALSE}(Login) UNLESS{$2.user = $1.user AND $2.ok = TRUE, 300} Login"})
    logins = [("a1", "ann", False, 0), ("a2", "ann", True, 100), ("b1", "bob", False, 10)]
    values = [orjson.dumps({"id": i, "stream": "Login", "ts": t, "user": u, "ok": ok}) for i, u, ok, t in logins]
    rows, _ = _keyed(values, settings, monkeypatch)
    part = Part()
    out = feed(PatternOperator(registry_dir(settings), settings), part, rows, event_time_ms(200, 1000))
    assert witnesses(out) == set() and part.state
    assert min(ks.wake for ks in part.state.values()) <= event_time_ms(311, 1000)  # a timer at bob's deadline
    # a restart: a new operator (new engines) from the pickled state alone; the watermark passes bob's deadline
    later, part.state = PatternOperator(registry_dir(settings), settings), pickle.loads(pickle.dumps(part.state))
    out = feed(later, part, rows.iloc[:0], event_time_ms(400, 1000))
    docs = [orjson.loads(r.value) for r in out]
    assert [(d["subscription"], d["witness"]["events"], d["partition"], d["offset"]) for d in docs] == [
        ("nologin", ["b1"], None, None)]
    assert docs[0]["event_id"] == "b1" and docs[0]["kind"] == "pattern"
    assert witnesses(feed(later, part, rows.iloc[:0], event_time_ms(900, 1000))) == set()


NAN_AFTER_RESTORE = ("(SELECT name, price * 1e308 - price * 1e308 AS d FROM Stock) "
                     "NEXT{$2.name = $1.name AND NOT ($1.d > 0)} Stock")


def test_nan_in_an_instance_survives_the_state(tmp_path, monkeypatch):
    """An instance whose record holds NaN (inf - inf) is restored with NaN, not null: NOT (NaN > 0)
    is true, NOT (null > 0) unknown. The state is restored by a new operator between the events."""
    import math

    from matchers.cayuga.algebra import Event

    settings = settings_for(tmp_path)
    register(settings, {"q": NAN_AFTER_RESTORE})
    events = [Event("e0", "Stock", 0, 0, {"name": "A", "price": 2}), Event("e1", "Stock", 1, 1, {"name": "A", "price": 3})]
    rows, _ = _keyed([event_bytes(e) for e in events], settings, monkeypatch)
    part = Part()
    assert feed(PatternOperator(registry_dir(settings), settings), part, rows.iloc[:1], event_time_ms(1, 1000)) == []
    part.state = pickle.loads(pickle.dumps(part.state))  # as the state partition's snapshot holds it
    (instance,) = next(ks.instances[""] for ks in part.state.values())  # the operator's engine
    assert math.isnan(instance[1]["d"])
    later = PatternOperator(registry_dir(settings), settings)
    got = witnesses(feed(later, part, rows.iloc[1:], event_time_ms(2, 1000)))
    assert got == {(k[1], k[5]) for k in reference_matches({"q": NAN_AFTER_RESTORE}, events)} == {("q", ("e0", "e1"))}


def test_a_snapshot_of_one_list_of_instances_is_restored(tmp_path, monkeypatch):
    """A key state written before each tenant had its own engines holds one list of rows: the
    next batch goes on from it as from the per-tenant form."""
    import dataclasses

    settings = settings_for(tmp_path)
    register(settings, {"S3": TABLE1["S3"]})
    events = stock_ticks(60, 3)
    rows, _ = _keyed([event_bytes(e) for e in events], settings, monkeypatch)
    half = len(rows) // 2
    op, now, old = PatternOperator(registry_dir(settings), settings), Part(), Part()
    feed(op, now, rows.iloc[:half], event_time_ms(events[-1].t1 + 1, 1000))
    old.state = {k: dataclasses.replace(ks, instances=ks.instances.get("", [])) for k, ks in now.state.items()}
    assert any(ks.instances for ks in old.state.values())
    end = event_time_ms(events[-1].t1 + 1, 1000)
    assert witnesses(feed(op, old, rows.iloc[half:], end)) == witnesses(feed(op, now, rows.iloc[half:], end)) != set()


def test_durations_with_a_unit_are_in_the_service_ticks(tmp_path, monkeypatch):
    """``patterns.time_unit_ms`` = one minute: ``5 min`` is 5 ticks in the workers' engines."""
    settings = settings_for(tmp_path, time_unit_ms=60_000)
    register(settings, {"nologin": "FILTER{ok = FALSE}(Login) UNLESS{$2.user = $1.user AND $2.ok = TRUE, 5 min} Login"})
    logins = [("a1", "ann", False, 0), ("a2", "ann", True, 4), ("b1", "bob", False, 1), ("b2", "bob", True, 7)]
    values = [orjson.dumps({"id": i, "stream": "Login", "ts": t, "user": u, "ok": ok}) for i, u, ok, t in logins]
    rows, _ = _keyed(values, settings, monkeypatch)
    out = feed(PatternOperator(registry_dir(settings), settings), Part(), rows, event_time_ms(20, 60_000))
    assert [orjson.loads(r.value)["witness"] for r in out] == [{"events": ["b1"], "attrs": {"user": "bob", "ok": False},
                                                                "t0": 1, "t1": 6}]


def test_late_event_is_reported_once(tmp_path, monkeypatch):
    settings = settings_for(tmp_path)
    register(settings, {"S3": TABLE1["S3"]})
    events = stock_ticks(20, 1)
    rows, _ = _keyed([event_bytes(e) for e in events], settings, monkeypatch)
    op, part = PatternOperator(registry_dir(settings), settings), Part()
    feed(op, part, rows, event_time_ms(events[-1].t1 + 1, 1000))
    late = rows.iloc[:1].copy()
    late["offset"] = 99
    out = feed(op, part, late, event_time_ms(events[-1].t1 + 1, 1000))
    assert [orjson.loads(r.value)["stage"] for r in out] == [PATTERN_LATE]


def test_events_without_keys_still_move_the_watermark(tmp_path, monkeypatch):
    settings = settings_for(tmp_path)
    ColumnRegistry(registry_dir(settings))
    events = stock_ticks(3, 1)
    rows, _ = _keyed([event_bytes(e) for e in events], settings, monkeypatch, marks=True)
    # only the marks: one per state partition, with the latest event time the task read
    assert list(rows["gkey"]) == [NO_KEY] * 4 and list(rows["part"]) == [0, 1, 2, 3]
    assert list(rows["t1"]) == [events[-1].t1] * 4
    part = Part()
    assert feed(PatternOperator(registry_dir(settings), settings), part, rows, event_time_ms(9, 1000)) == []
    assert part.state == {}


def test_group_keys_are_stable_and_numbers_agree():
    assert group_key("name", "IBM", 64) == group_key("name", "IBM", 64)
    assert group_key("n", 10, 64) == group_key("n", 10.0, 64)
    assert group_key("n", True, 1024) != group_key("n", 1, 1024)


def test_patterns_settings_take_effect(tmp_path, monkeypatch):
    """Reserved fields, key buckets, the state timeout, starting offsets and trigger come from [patterns]."""
    conf = tmp_path / "p.toml"
    conf.write_text('[patterns]\nstream_field = "kind"\ntime_field = "at"\nkey_buckets = 1\n'
                    'state_timeout = 3\nstarting_offsets = "latest"\ntrigger_interval = "7 seconds"\n'
                    '[match]\nevent_id_field = "uid"\n')
    settings = load(conf, [f"spark.checkpoint_dir={tmp_path / 'ckpt'}"], environ={})
    assert (_starting(settings), _trigger(settings)) == ("latest", "7 seconds")
    assert (_starting(Settings()), _trigger(Settings())) == ("earliest", "1 second")  # kafka's and spark's
    # S3: a price rise of one stock, no DUR bound
    register(settings, {"S3": TABLE1["S3"]})
    values = [orjson.dumps({"uid": f"u{t}", "kind": "Stock", "at": t, "name": "IBM", "price": p})
              for t, p in enumerate([10, 5, 6])]
    rows, sent = _keyed(values, settings, monkeypatch)
    assert sent == [] and set(rows["gkey"]) == {"name#0"} and list(rows["eid"]) == ["u0", "u1", "u2"]
    op, part = PatternOperator(registry_dir(settings), settings), Part()
    out = feed(op, part, rows, event_time_ms(2, 1000))
    assert witnesses(out) == {("S3", ("u1", "u2"))}
    assert list(part.state) == ["name#0"]  # the instance of u2 waits for a rise (u0's ended at u1)
    assert part.state["name#0"].wake == event_time_ms(2 + 3, 1000)  # the state timeout of u2's instance
    feed(op, part, rows.iloc[:0], event_time_ms(6, 1000))
    assert part.state == {}  # dropped after 3 ticks: a bound on a pattern without DUR
    bad = orjson.dumps({"uid": "x", "kind": "Stock", "at": "soon", "name": "IBM"})
    rows, sent = _keyed([bad], settings, monkeypatch)
    assert len(rows) == 0 and [e["stage"] for e in sent] == [PATTERN_EVENT] and "'at'" in sent[0]["reason"]


BAD_EVENTS = [b"not json", b"[1, 2]", b'{"a": ' * 40 + b"1" + b"}" * 40, None,
              b'{"id": "t", "stream": "Stock", "ts": "soon", "name": "IBM", "price": 1}',
              b'{"id": "s", "stream": 7, "ts": 1, "name": "IBM"}',
              b'{"id": "n", "stream": "Stock", "ts": 5, "ts_start": 9, "name": "IBM"}']


def test_one_error_record_per_bad_event_across_both_queries(tmp_path, monkeypatch):
    """The match query and the patterns query over the same bad events: each yields one error record."""
    settings = settings_for(tmp_path)
    register(settings, {"S3": TABLE1["S3"]})
    _, pattern_errors = _keyed(BAD_EVENTS, settings, monkeypatch)
    spec = ModelRegistry(settings.registry_columns_dir).spec()
    ctx = BatchContext.of(settings, 0, 0.0, spec, NO_KAFKA)
    match_rows: list[dict] = []
    list(match_partition(iter([kafka_batch(BAD_EVENTS)]), ctx,
                         lambda batches: match_rows.extend(r for rb in batches for r in rb.to_pylist()) or 0))
    match_errors = [orjson.loads(r["value"]) for r in match_rows if r["topic"] == settings.kafka.errors_topic]
    offsets = sorted(e["offset"] for e in [*pattern_errors, *match_errors])
    assert offsets == list(range(len(BAD_EVENTS)))
    assert {e["stage"] for e in pattern_errors} == {PATTERN_EVENT}


def test_show_lists_the_pattern_registry(tmp_path, capsys):
    from scripts.show import show_patterns

    settings = settings_for(tmp_path)
    show_patterns(settings, 5)
    assert "patterns: no registry" in capsys.readouterr().out
    register(settings, {"S3": TABLE1["S3"]})
    show_patterns(settings, 5)
    out = capsys.readouterr().out
    assert "version=1 patterns=1" in out and f"S3: {TABLE1['S3']}" in out


def test_patterns_read_the_single_valued_attributes_of_an_event_with_arrays(tmp_path):
    settings = settings_for(tmp_path)
    value = orjson.dumps({"id": "a", "stream": "Stock", "ts": 4, "name": "IBM", "tags": ["x", "y"], "same": [1, 1],
                          "items": [{"sku": "s"}, {"sku": "t"}], "price": 7})
    assert read_row(value, POS, None, settings) == (4, 4, "a", "Stock", {"name": "IBM", "same": 1, "price": 7})


def _tricky_events(rng) -> list[bytes | None]:
    """Event records at the edges of what the keying's scan takes (seeded)."""
    def pick(choices: list[str]) -> str:  # the plain first choice more often
        return choices[0] if rng.random() < 0.7 else rng.choice(choices)

    fields = {
        "id": ['"e1"', "7", "7.5", "null", "true", '{"x": 1}', '"q\\"uote"', '"\u00fcn"', '["a"]'],
        "stream": ['"Stock"', "7", "null", '"A\\u0041"', '"Other"', "[]"],
        "ts": ["5", "5.0", "1e3", "-1", '"soon"', "null", "true", "1.5", "1e20", "9007199254740993", "-0.0", "0", "12"],
        "ts_start": ["4", "6", "null", "2.0", '"x"', "-0", "5"],
        "name": ['"IBM"', '"I\\"BM"', '"\x7f"', '"\u00cfBM"', "3", "3.0", "true", "null", '["IBM"]', '["A", "B"]',
                 '{"x": 1}', '""', '"MSFT"', '"a/b"'],
        "sym": ['"X"', '"Y"', "1", '[]', '"Z"'],
        "price": ["1", "2.5", "NaN", "[1, 1]", "1e400"],
        "user": ['{"id": 1}', '{"id": "u"}', "{}"],
    }
    out: list[bytes | None] = [None, b"", b"not json", b"[1, 2]", b'{"a": ' * 40 + b"1" + b"}" * 40,
                               b'{"id": "d", "ts": 1, "name": "A", "name": "B"}', b'{"ts": 1, "name": "A"} x',
                               b' {"id" : "w" , "ts" :3,"name":"A" } ', b'{"user.id": 1, "user": {"id": 2}, "ts": 1}']
    for _ in range(400):
        chosen = [k for k in fields if rng.random() < (0.9 if k in ("id", "ts", "name", "stream") else 0.4)]
        rng.shuffle(chosen)
        out.append(("{" + ", ".join(f'"{k}": {pick(fields[k])}' for k in chosen) + "}").encode())
    return out


@pytest.mark.parametrize("limits, cap", [({}, 8), ({"string_length": 6, "attributes": 4, "depth": 2, "event_bytes": 90}, 2)])
def test_scanned_keying_equals_keying_event_by_event(tmp_path, monkeypatch, limits, cap):
    """keyed_rows (the events the scan takes read in one pass, the others one by one) gives the
    rows and error records of reading every event one by one (read_row), hostile ones included."""
    import random

    import numpy as np

    from streaming.patterns.keyed import _read_rows, scan_rows
    from tests.unit.streaming.helpers import kafka_batch

    settings = settings_for(tmp_path, max_keys_per_event=cap, key_buckets=16).replace(limits=limits)
    register(settings, {"S3": TABLE1["S3"], "sym": "FILTER{DUR <= 5}(FILTER{price > 1}(Stock) NEXT{$2.sym = $1.sym} Stock)",
                        "all": "FILTER{price > 100}(Stock)"})
    values = _tricky_events(random.Random(7))
    batch = kafka_batch(values)
    _, attrs, unkeyed = partition_keys(registry_dir(settings))
    fast, slow, _ = scan_rows(batch, attrs, unkeyed, settings)
    assert fast is not None and fast.num_rows > 50 and len(slow) > 50  # both ways are taken
    rows, sent = _keyed(values, settings, monkeypatch, marks=True)
    expected, errors, latest = _read_rows(batch, np.arange(len(values)), attrs, unkeyed, settings)
    got = sorted(map(tuple, rows[rows["gkey"] != NO_KEY].itertuples(index=False)))
    assert got == sorted(map(tuple, expected.to_pandas().itertuples(index=False)))
    assert sorted(e["offset"] for e in sent) == sorted(e.position.offset for e in errors)
    assert sorted(orjson.dumps(e, option=orjson.OPT_SORT_KEYS) for e in sent) == sorted(
        orjson.dumps(orjson.loads(e.to_json()) | {"to": settings.kafka.errors_topic}, option=orjson.OPT_SORT_KEYS)
        for e in errors)
    assert set(rows.loc[rows["gkey"] == NO_KEY, "t1"]) == {latest}
