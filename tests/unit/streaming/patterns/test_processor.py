"""The stateful processor of the ``patterns`` query through PySpark's own ``TwsTester`` (no stream):
state per key, Spark's event-time timers, the live-instance changes, the census rows, the old layout."""

from __future__ import annotations

import orjson
import pandas as pd
import pytest
from pyspark.sql.streaming.tws_tester import TwsTester

from streaming.patterns.census import CENSUS_KEY
from streaming.patterns.keyed import NO_KEY, event_time_ms
from streaming.patterns.live import LiveRecord, StateError
from streaming.patterns.operator import PATTERN_LATE, PENDING, key_live
from streaming.patterns.processor import (
    BUCKET_NAME,
    CENSUS,
    LIVE,
    RECORD,
    VALUES_NAME,
    WAKES_NAME,
    PatternProcessor,
    from_row,
    to_row,
)
from streaming.patterns.queries import live_dir, refuse_old_layout, registry_dir
from tests.unit.cayuga.helpers import reference_matches
from tests.unit.cayuga.streams import TABLE1, stock_ticks
from tests.unit.streaming.patterns.test_patterns import _keyed, event_bytes, register, settings_for

NOLOGIN = "FILTER{ok = FALSE}(Login) UNLESS{$2.user = $1.user AND $2.ok = TRUE, 300} Login"


def new_tester(settings) -> TwsTester:
    # Spark drops no late event here (the operator's input has no event-time column): the extractor keeps all
    return TwsTester(PatternProcessor(registry_dir(settings), live_dir(settings), settings), timeMode="EventTime",
                     eventTimeExtractor=lambda row: 2**62)


def run_batch(t: TwsTester, rows: pd.DataFrame, watermark_ms: int) -> pd.DataFrame:
    """One micro-batch as Spark runs it: the watermark (from the previous batches) first, then each
    key's new rows, then the timers the watermark passed. The output rows."""
    t._currentWatermarkMs = max(t._currentWatermarkMs, watermark_ms)  # (setWatermark fires timers before the input)
    floats = {c: "float64" for c in ("t0", "t1", "partition", "offset")}  # as Spark may hand nullable longs
    outs = [t.testInPandas(gkey, group[list(PENDING)].astype(floats).reset_index(drop=True))
            for gkey, group in rows.groupby("gkey")]
    outs.append(t._handleExpiredTimers())  # then the timers the watermark passed, as Spark
    frames = [o for o in outs if len(o)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["kind", "key", "value", "topic"])


def notifications(out: pd.DataFrame) -> set:
    docs = [orjson.loads(v) for k, v, topic in zip(out["kind"], out["value"], out["topic"], strict=True)
            if k == RECORD and topic == "notifications"]
    return {(d["subscription"], tuple(d["witness"]["events"])) for d in docs}


@pytest.mark.parametrize("step", [1, 13, 1000])
def test_processor_equals_reference_with_spark_timers(tmp_path, monkeypatch, step):
    """Events in slices with a lagging watermark: the keys' states between batches are only Spark's
    (a value per key, a timer per key); the witnesses are the reference evaluator's, and the keys'
    live-instance changes add up to the instances held."""
    subs = {k: TABLE1[k] for k in ("S2", "S3", "S4", "AutQ")}
    settings = settings_for(tmp_path, key_buckets=4)
    register(settings, subs)
    events = stock_ticks(200, 4)
    rows, _ = _keyed([event_bytes(e) for e in events], settings, monkeypatch)
    t, got, live = new_tester(settings), set(), 0
    for lo in range(0, len(events), step):
        wm = event_time_ms(events[lo].t1, 1000) - 3000 if lo else 0
        out = run_batch(t, rows[(rows["offset"] >= lo) & (rows["offset"] < lo + step)], wm)
        got |= notifications(out)
        live += sum(sum(orjson.loads(v).values()) for k, v in zip(out["kind"], out["value"], strict=True) if k == LIVE)
        held = sum(sum(key_live(from_row(r)).values()) for g in set(rows["gkey"]) for r in t.peekMapState(VALUES_NAME, g).values())
        assert live == held
        timers = [w for g in set(rows["gkey"]) for w in t.handle._timers.listTimers(g)]
        assert all(type(w) is int for w in timers)  # Spark takes whole ms only
    got |= notifications(run_batch(t, rows.iloc[:0], event_time_ms(events[-1].t1 + 1, 1000)))
    assert got == {(k[1], k[5]) for k in reference_matches(subs, events)}


def test_absence_fires_from_a_spark_timer_without_later_events_and_after_a_restart(tmp_path, monkeypatch):
    """bob's failed login with no success: the key's timer is at the deadline; the state and timer
    alone (a new processor, as after a restart) fire it when the watermark passes, once."""
    settings = settings_for(tmp_path)
    register(settings, {"nologin": NOLOGIN})
    logins = [("a1", "ann", False, 0), ("a2", "ann", True, 100), ("b1", "bob", False, 10)]
    values = [orjson.dumps({"id": i, "stream": "Login", "ts": ts, "user": u, "ok": ok}) for i, u, ok, ts in logins]
    rows, _ = _keyed(values, settings, monkeypatch)
    first = new_tester(settings)
    assert notifications(run_batch(first, rows, 0)) == set()
    assert notifications(run_batch(first, rows.iloc[:0], event_time_ms(200, 1000))) == set()
    keys = sorted(set(rows["gkey"]))
    states = {g: (first.peekValueState(BUCKET_NAME, g), first.peekMapState(VALUES_NAME, g),
                  first.peekMapState(WAKES_NAME, g)) for g in keys}
    timers = {g: list(first.handle._timers.listTimers(g)) for g in keys}
    assert min(w for ws in timers.values() for w in ws) <= event_time_ms(311, 1000)  # at bob's deadline
    assert all(sorted({from_row(r).wake for r in states[g][1].values()} - {None}) == timers[g] == sorted(w for (w,) in states[g][2])
               for g in keys)  # a timer per distinct wake of the key's partition values
    later = new_tester(settings)  # a restart: the state store's values and timers, nothing else
    later._usingPandas = True  # (its output as one frame: no input was given to it yet)
    for g in keys:
        if states[g][0] is not None:
            later.updateValueState(BUCKET_NAME, g, states[g][0])
            later.updateMapState(VALUES_NAME, g, states[g][1])
            later.updateMapState(WAKES_NAME, g, states[g][2])
            later.handle.setGroupingKey(g)
            for w in timers[g]:
                later.handle.registerTimer(w)
    out = later.setWatermark(event_time_ms(400, 1000))
    docs = [orjson.loads(v) for v in out["value"]]
    assert [(d["subscription"], d["witness"]["events"], d["partition"]) for d in docs if "subscription" in d] == [
        ("nologin", ["b1"], None)]
    assert len(later.setWatermark(event_time_ms(900, 1000))) == 0
    assert all(later.peekValueState(BUCKET_NAME, g) is None and not later.peekMapState(VALUES_NAME, g)
               for g in keys)  # nothing left: state cleared


def test_late_event_is_an_error_record_and_the_state_round_trips(tmp_path, monkeypatch):
    settings = settings_for(tmp_path)
    register(settings, {"S3": TABLE1["S3"]})
    events = stock_ticks(30, 1)
    rows, _ = _keyed([event_bytes(e) for e in events], settings, monkeypatch)
    t = new_tester(settings)
    run_batch(t, rows.iloc[5:], 0)
    run_batch(t, rows.iloc[:0], event_time_ms(events[-1].t1 + 1, 1000))
    out = run_batch(t, rows.iloc[:1], event_time_ms(events[-1].t1 + 1, 1000))
    errs = [orjson.loads(v) for k, v, topic in zip(out["kind"], out["value"], out["topic"], strict=True)
            if k == RECORD and topic == "errors"]
    assert [e["stage"] for e in errs] == [PATTERN_LATE]
    for g in set(rows["gkey"]):
        for row in t.peekMapState(VALUES_NAME, g).values():
            assert to_row(from_row(row)) == row


def test_the_keying_marks_reach_the_processor_and_are_dropped(tmp_path, monkeypatch):
    """The marks go through the grouping unfiltered (a filter before it would be pushed below the
    watermark by Spark's optimizer, and events without a key would not move it): no output, no state."""
    settings = settings_for(tmp_path)
    register(settings, {"S3": TABLE1["S3"]})
    rows, _ = _keyed([event_bytes(e) for e in stock_ticks(5, 1)], settings, monkeypatch, marks=True)
    marks = rows[rows["gkey"] == NO_KEY]
    assert len(marks) and marks["t1"].notna().all()
    t = new_tester(settings)
    assert len(run_batch(t, marks, 0)) == 0
    assert t.peekValueState(BUCKET_NAME, NO_KEY) is None and not list(t.handle._timers.listTimers(NO_KEY))


def test_census_rows_pass_through_and_quota_comes_from_the_last_record(tmp_path):
    settings = settings_for(tmp_path)
    out = new_tester(settings).testInPandas(CENSUS_KEY, pd.DataFrame({c: [None] for c in PENDING} | {"attrs": [b"tally"]}))
    assert out["kind"].tolist() == [CENSUS] and out["value"].tolist() == [b"tally"]
    from tests.unit.streaming.test_tenants import settings_for as tenant_settings

    settings = tenant_settings(tmp_path, quotas={"acme.pattern_instances": 1})
    LiveRecord(live_dir(settings)).write(4, 1000, {"acme": 1, "beta": 5})
    assert new_tester(settings).processor.blocked == {"acme"}


def test_a_checkpoint_of_the_old_layout_is_refused_with_the_way_on(tmp_path):
    settings = settings_for(tmp_path)
    refuse_old_layout(settings)
    (tmp_path / "patterns" / "pattern-state" / "p0000").mkdir(parents=True)
    with pytest.raises(StateError, match=r"older layout.*--reset"):
        refuse_old_layout(settings)


def test_partition_values_of_one_state_key_keep_their_own_state_and_skips(tmp_path, monkeypatch):
    """Two symbols in one state key (one bucket): each has its own state row, a batch touching one
    writes that one alone, and a SKIP PAST LAST of one symbol does not silence the other (the
    partition value's skip, as docs/cayuga.md has it); the late-event clock stays the key's."""
    settings = settings_for(tmp_path, key_buckets=1)
    register(settings, {"up": "Stock NEXT{$2.symbol = $1.symbol AND $2.price > $1.price} Stock SKIP PAST LAST"})
    ticks = [("a1", "A", 1, 0), ("b1", "B", 1, 1), ("a2", "A", 2, 2), ("b2", "B", 2, 3)]
    values = [orjson.dumps({"id": i, "stream": "Stock", "ts": ts, "symbol": s, "price": p}) for i, s, p, ts in ticks]
    rows, _ = _keyed(values, settings, monkeypatch)
    (g,) = set(rows["gkey"])
    t = new_tester(settings)
    got = notifications(run_batch(t, rows, event_time_ms(10, 1000)))
    assert got == {("up", ("a1", "a2")), ("up", ("b1", "b2"))}
    assert set(t.peekMapState(VALUES_NAME, g)) == {('"A"',), ('"B"',)}
    assert t.peekValueState(BUCKET_NAME, g)[0] == 3
