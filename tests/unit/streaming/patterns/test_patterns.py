"""The patterns queries' pure parts, without Spark: registry, keyed rows, keyed-state lifecycle."""

from __future__ import annotations

import orjson
import pandas as pd
import pytest

from streaming.config import Settings, load
from streaming.match_job import BatchContext, RegistryBroadcast, match_partition
from streaming.patterns.keyed import (
    NO_KEY,
    PATTERN_EVENT,
    event_time_ms,
    group_key,
    keyed_rows,
    read_row,
)
from streaming.patterns.operator import PATTERN_LATE, STATE_SCHEMA, PatternOperator, decode, encode
from streaming.patterns.queries import _starting, _trigger, registry_dir
from streaming.patterns.registry import (
    ALL_KEY,
    PatternRegistry,
    apply_pattern_records,
    parse_pattern_change,
    partition_keys,
)
from streaming.records import Position
from streaming.registry import Registry, RegistryError
from tests.unit.cayuga.helpers import reference_matches
from tests.unit.cayuga.streams import TABLE1, stock_ticks
from tests.unit.streaming.helpers import NO_KAFKA, LocalBroadcast, kafka_batch

POS = Position("subs", 0, 1)


def _rec(**obj) -> bytes:
    return orjson.dumps(obj)


def test_pattern_records():
    known = {"old"}
    assert parse_pattern_change(b"a", _rec(id="a", pattern=TABLE1["S3"]), POS, known) == ("upsert", "a", TABLE1["S3"])
    assert parse_pattern_change(b"a", _rec(id="a", expr="x > 1"), POS, known) is None  # the match job's
    assert parse_pattern_change(b"old", _rec(id="old", expr="x > 1"), POS, known) == ("delete", "old", None)
    assert parse_pattern_change(b"old", None, POS, known) == ("delete", "old", None)
    assert parse_pattern_change(b"new", None, POS, known) is None
    assert parse_pattern_change(None, _rec(op="delete", id="old"), POS, known) == ("delete", "old", None)
    assert parse_pattern_change(None, b"not json", POS, known) is None
    bad = parse_pattern_change(b"b", _rec(id="b", pattern="S NEXT{x = 1} S"), POS, known)
    assert "'b'" in bad.reason and "$1." in bad.reason
    assert "string" in parse_pattern_change(b"c", _rec(id="c", pattern=3), POS, known).reason
    # a record the match query refuses (bad op, no id, too large) is its to report, not this query's
    assert parse_pattern_change(b"d", _rec(op="x", id="d", pattern="S"), POS, known) is None
    assert parse_pattern_change(None, _rec(pattern="S"), POS, known) is None
    big = _rec(id="e", pattern=TABLE1["S3"] + " " * 70_000)
    assert parse_pattern_change(b"e", big, POS, known) is None


def test_registry_versions_and_replay(tmp_path):
    reg = PatternRegistry(tmp_path)
    rows = [(b"a", _rec(id="a", pattern=TABLE1["S3"]), "s", 0, 0), (b"b", _rec(id="b", pattern=TABLE1["S2"]), "s", 0, 1)]
    version, errors = apply_pattern_records(reg, 0, rows)
    assert (version, errors) == (1, [])
    assert apply_pattern_records(reg, 0, rows) == (1, [])  # a replayed batch is not applied twice
    version, errors = apply_pattern_records(reg, 1, [(b"a", None, "s", 0, 2), (b"x", _rec(id="x", pattern="("), "s", 0, 3)])
    assert version == 2 and len(errors) == 1
    v, batch, patterns = PatternRegistry(tmp_path).latest()
    assert (v, batch, sorted(patterns)) == (2, 1, ["b"])
    assert patterns["b"][1] == 1  # registered at version 1
    assert partition_keys(str(tmp_path))[1:] == ([], True)


def test_a_missing_registry_is_an_error_never_empty(tmp_path):
    with pytest.raises(RegistryError, match="no pattern registry"):
        partition_keys(str(tmp_path / "nowhere"))
    PatternRegistry((tmp_path / "r").as_uri())  # created (version 0) by the driver, at a URI
    assert partition_keys(str(tmp_path / "r")) == (0, [], False)
    (tmp_path / "r" / "v000000000000.json").unlink()
    with pytest.raises(RegistryError):
        partition_keys(str(tmp_path / "r"))


class FakeState:
    """The GroupState calls the operator makes."""

    def __init__(self, watermark_ms=0, value=None, timed_out=False):
        self.value, self.watermark_ms, self.timed_out, self.timeout = value, watermark_ms, timed_out, None

    exists = property(lambda self: self.value is not None)
    get = property(lambda self: self.value)
    hasTimedOut = property(lambda self: self.timed_out)  # noqa: N815 - PySpark's name

    def getCurrentWatermarkMs(self):  # noqa: N802
        return self.watermark_ms

    def update(self, value):
        self.value = value

    def remove(self):
        self.value = None

    def setTimeoutTimestamp(self, ms):  # noqa: N802
        assert ms > self.watermark_ms
        self.timeout = ms


def settings_for(tmp_path, **patterns) -> Settings:
    return Settings().replace(spark={"checkpoint_dir": str(tmp_path)}, patterns=patterns)


def event_bytes(e, **fields) -> bytes:
    return orjson.dumps({"id": e.id, "stream": e.stream, "ts": e.t1, **e.attrs, **fields})


def _keyed(values, settings, monkeypatch) -> tuple[pd.DataFrame, list[dict]]:
    """Keyed rows of event records, and the error records the task produced."""
    import streaming.kafka.sink as sink

    sent: list[dict] = []
    monkeypatch.setattr(sink, "produce_batches", lambda producer, topic, batches: sent.extend(
        orjson.loads(r["value"]) | {"to": topic} for rb in batches for r in rb.to_pylist()))
    out = list(keyed_rows(iter([kafka_batch(values)]), registry_dir(settings), settings, NO_KAFKA))
    return pd.concat([rb.to_pandas() for rb in out]), sent


def register(settings, subs) -> PatternRegistry:
    reg = PatternRegistry(registry_dir(settings))
    apply_pattern_records(reg, 0, [(k.encode(), _rec(id=k, pattern=t), "s", 0, i) for i, (k, t) in enumerate(subs.items())])
    return reg


def feed(op, states, rows, watermark_ms, timed_out=False):
    """One micro-batch of the operator over ``rows`` (every key with state when timing out)."""
    out = []
    groups = dict(iter(rows.groupby("gkey"))) if len(rows) else {}
    keys = set(groups) | ({k for k, st in states.items() if st.exists} if timed_out else set())
    for gkey in keys:
        st = states.setdefault(gkey, FakeState())
        st.watermark_ms, st.timed_out = watermark_ms, gkey not in groups
        pdfs = iter([groups[gkey]]) if gkey in groups else iter([])
        for pdf in op((gkey,), pdfs, st):
            out.extend(pdf.itertuples(index=False))
    return out


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
    op, states, got = PatternOperator(registry_dir(settings), settings), {}, set()
    for lo in range(0, len(events), step):
        wm = event_time_ms(events[lo].t1, 1000) - 3000 if lo else 0
        got |= witnesses(feed(op, states, rows[(rows["offset"] >= lo) & (rows["offset"] < lo + step)], wm))
    got |= witnesses(feed(op, states, rows.iloc[:0], event_time_ms(events[-1].t1 + 1, 1000), timed_out=True))
    assert got == {(k[1], k[5]) for k in reference_matches(subs, events)}


def test_pattern_notification_schema(tmp_path, monkeypatch):
    """One schema with the match side: kind, the completing event's id and position."""
    settings = settings_for(tmp_path)
    register(settings, {"S3": TABLE1["S3"]})
    events = stock_ticks(60, 4)
    rows, _ = _keyed([event_bytes(e) for e in events], settings, monkeypatch)
    out = feed(PatternOperator(registry_dir(settings), settings), {}, rows, event_time_ms(events[-1].t1 + 1, 1000))
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
    states: dict = {}
    out = feed(PatternOperator(registry_dir(settings), settings), states, rows, event_time_ms(200, 1000))
    assert witnesses(out) == set() and any(st.exists for st in states.values())
    assert min(st.timeout for st in states.values() if st.exists) <= event_time_ms(311, 1000)  # a timer at bob's deadline
    # a restart: a new operator (new engines) from the states alone; the watermark passes bob's deadline
    later = PatternOperator(registry_dir(settings), settings)
    out = feed(later, states, rows.iloc[:0], event_time_ms(400, 1000), timed_out=True)
    docs = [orjson.loads(r.value) for r in out]
    assert [(d["subscription"], d["witness"]["events"], d["partition"], d["offset"]) for d in docs] == [
        ("nologin", ["b1"], None, None)]
    assert docs[0]["event_id"] == "b1" and docs[0]["kind"] == "pattern"
    assert witnesses(feed(later, states, rows.iloc[:0], event_time_ms(900, 1000), timed_out=True)) == set()


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
    states: dict = {}
    assert feed(PatternOperator(registry_dir(settings), settings), states, rows.iloc[:1], event_time_ms(1, 1000)) == []
    (instance,) = decode(next(st.value for st in states.values() if st.exists)[1])
    assert math.isnan(instance[1]["d"])
    later = PatternOperator(registry_dir(settings), settings)
    got = witnesses(feed(later, states, rows.iloc[1:], event_time_ms(2, 1000)))
    assert got == {(k[1], k[5]) for k in reference_matches({"q": NAN_AFTER_RESTORE}, events)} == {("q", ("e0", "e1"))}


def test_state_written_as_json_before_is_read():
    """A checkpoint's state from before the pickled blobs: JSON instances, pending attrs as text."""
    pending = {"t1": [3], "partition": [0], "offset": [7], "t0": [3], "eid": ["e7"], "stream": ["S"], "attrs": ['{"a":1}']}
    assert decode(orjson.dumps(pending)) == {**pending, "attrs": [b'{"a":1}']}
    assert decode(orjson.dumps([[1, {"a": 1}, {"a": 2}, 0, 1, ["e0"], 1, 0]])) == [[1, {"a": 1}, {"a": 2}, 0, 1, ["e0"], 1, 0]]
    assert decode(encode([(1, {"a": float("inf")}, None)])) == [(1, {"a": float("inf")}, None)]


def test_durations_with_a_unit_are_in_the_service_ticks(tmp_path, monkeypatch):
    """``patterns.time_unit_ms`` = one minute: ``5 min`` is 5 ticks in the workers' engines."""
    settings = settings_for(tmp_path, time_unit_ms=60_000)
    register(settings, {"nologin": "FILTER{ok = FALSE}(Login) UNLESS{$2.user = $1.user AND $2.ok = TRUE, 5 min} Login"})
    logins = [("a1", "ann", False, 0), ("a2", "ann", True, 4), ("b1", "bob", False, 1), ("b2", "bob", True, 7)]
    values = [orjson.dumps({"id": i, "stream": "Login", "ts": t, "user": u, "ok": ok}) for i, u, ok, t in logins]
    rows, _ = _keyed(values, settings, monkeypatch)
    out = feed(PatternOperator(registry_dir(settings), settings), {}, rows, event_time_ms(20, 60_000))
    assert [orjson.loads(r.value)["witness"] for r in out] == [{"events": ["b1"], "attrs": {"user": "bob", "ok": False},
                                                                "t0": 1, "t1": 6}]


def test_late_event_is_reported_once(tmp_path, monkeypatch):
    settings = settings_for(tmp_path)
    register(settings, {"S3": TABLE1["S3"]})
    events = stock_ticks(20, 1)
    rows, _ = _keyed([event_bytes(e) for e in events], settings, monkeypatch)
    op, states = PatternOperator(registry_dir(settings), settings), {}
    feed(op, states, rows, event_time_ms(events[-1].t1 + 1, 1000))
    late = rows.iloc[:1].copy()
    late["offset"] = 99
    out = feed(op, states, late, event_time_ms(events[-1].t1 + 1, 1000))
    assert [orjson.loads(r.value)["stage"] for r in out] == [PATTERN_LATE]


def test_events_without_keys_still_move_the_watermark(tmp_path, monkeypatch):
    settings = settings_for(tmp_path)
    PatternRegistry(registry_dir(settings))
    rows, _ = _keyed([event_bytes(e) for e in stock_ticks(3, 1)], settings, monkeypatch)
    assert set(rows["gkey"]) == {NO_KEY}
    st = FakeState()
    out = list(PatternOperator(registry_dir(settings), settings)((NO_KEY,), iter([rows]), st))
    assert out[0].empty and not st.exists


def test_group_keys_are_stable_and_numbers_agree():
    assert group_key("name", "IBM", 64) == group_key("name", "IBM", 64)
    assert group_key("n", 10, 64) == group_key("n", 10.0, 64)
    assert group_key("n", True, 1024) != group_key("n", 1, 1024)


def test_the_state_written_fits_the_declared_schema(tmp_path, monkeypatch):
    from pyspark.sql.types import _make_type_verifier

    settings = settings_for(tmp_path)
    register(settings, {k: TABLE1[k] for k in ("S2", "S3", "AutQ")})
    events = stock_ticks(80, 4)
    rows, _ = _keyed([event_bytes(e) for e in events], settings, monkeypatch)
    states: dict = {}
    feed(PatternOperator(registry_dir(settings), settings), states, rows, event_time_ms(events[40].t1, 1000))
    verify = _make_type_verifier(STATE_SCHEMA)
    kept = [st.value for st in states.values() if st.exists]
    assert any(decode(v[1]) for v in kept) and any(decode(v[2])["t1"] for v in kept)  # instances, pending
    for value in kept:
        verify(value)


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
    op = PatternOperator(registry_dir(settings), settings)
    st = FakeState()
    out = feed(op, {"name#0": st}, rows, event_time_ms(2, 1000))
    assert witnesses(out) == {("S3", ("u1", "u2"))}
    assert st.exists  # the instance of u2 waits for a rise (u0's ended at u1)
    assert st.timeout == event_time_ms(2 + 3, 1000)  # the state timeout of u2's instance
    feed(op, {"name#0": st}, rows.iloc[:0], event_time_ms(6, 1000), timed_out=True)
    assert not st.exists  # dropped after 3 ticks: a bound on a pattern without DUR
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
    registry = Registry(settings.registry_dir)
    spec = RegistryBroadcast(LocalBroadcast).spec(registry, "counting", registry.version, 20)
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
