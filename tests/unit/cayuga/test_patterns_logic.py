"""The patterns queries' pure parts, without Spark: registry, records, keyed-state lifecycle."""

from __future__ import annotations

import orjson
import pandas as pd
import pytest

from streaming.patterns import (
    ALL_KEY,
    NO_KEY,
    PatternRegistry,
    PatternSettings,
    advance,
    apply_pattern_records,
    event_time_ms,
    group_key,
    parse_pattern_change,
    partition_keys,
    to_keyed_rows,
)
from streaming.records import Position
from streaming.registry import RegistryError
from tests.unit.cayuga.helpers import reference_matches
from tests.unit.cayuga.streams import TABLE1, stock_ticks

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
    """The GroupState calls ``advance`` makes."""

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


def _keyed(events, rdir, settings):
    pdf = pd.DataFrame({
        "value": [orjson.dumps({"id": e.id, "stream": e.stream, "ts": e.t1, **e.attrs}) for e in events] + [b"[1]"],
        "topic": "ev", "partition": 0, "offset": range(len(events) + 1),
        "timestamp": pd.Timestamp("2026-01-01", tz="UTC"),
    })
    sent = []
    import streaming.patterns as P

    original = P.send_errors
    P.send_errors = lambda cfg, topic, values: sent.extend(values)
    try:
        rows = pd.concat(list(to_keyed_rows(iter([pdf]), rdir, settings, "err", {})))
    finally:
        P.send_errors = original
    return rows, sent


@pytest.mark.parametrize("step, buckets", [(1, 64), (7, 2), (1000, 1)])
def test_keyed_state_lifecycle_equals_reference(tmp_path, step, buckets):
    """Events fed in slices with a lagging watermark, then timeouts: same witnesses."""
    subs = {k: TABLE1[k] for k in ("S2", "S3", "S4", "AutQ")}
    reg = PatternRegistry(tmp_path)
    apply_pattern_records(reg, 0, [(k.encode(), _rec(id=k, pattern=t), "s", 0, i) for i, (k, t) in enumerate(subs.items())])
    settings = PatternSettings(time_unit_ms=1000, key_buckets=buckets)
    events = stock_ticks(200, 4)
    rows, sent = _keyed(events, str(tmp_path), settings)
    assert sent == []  # the event that is no JSON object is the match query's to report
    assert set(rows["gkey"]) <= {ALL_KEY} | {group_key("name", s, settings.key_buckets) for s in ("IBM", "MSFT", "ORCL", "SUN")}
    states: dict = {}
    got = set()
    for lo in range(0, len(events), step):
        wm = event_time_ms(events[lo].t1, settings) - 3000 if lo else 0
        part = rows[(rows["offset"] >= lo) & (rows["offset"] < lo + step)]
        for gkey, pdf in part.groupby("gkey"):
            st = states.setdefault(gkey, FakeState())
            st.watermark_ms, st.timed_out = wm, False
            for out in advance((gkey,), iter([pdf]), st, str(tmp_path), settings, "note", "err"):
                got |= {(n["subscription"], tuple(n["witness"]["events"])) for n in map(orjson.loads, out["value"])}
    final = event_time_ms(events[-1].t1 + 1, settings)
    for gkey, st in states.items():
        if st.exists:
            st.watermark_ms, st.timed_out = final, True
            for out in advance((gkey,), iter([]), st, str(tmp_path), settings, "note", "err"):
                got |= {(n["subscription"], tuple(n["witness"]["events"])) for n in map(orjson.loads, out["value"])}
    assert got == {(k[1], k[5]) for k in reference_matches(subs, events)}


def test_events_without_keys_still_move_the_watermark(tmp_path):
    PatternRegistry(tmp_path)
    rows, _ = _keyed(stock_ticks(3, 1), str(tmp_path), PatternSettings())
    assert set(rows["gkey"]) == {NO_KEY}
    st = FakeState()
    out = list(advance((NO_KEY,), iter([rows]), st, str(tmp_path), PatternSettings(), "n", "e"))
    assert out[0].empty and not st.exists


def test_group_keys_are_stable_and_numbers_agree():
    from streaming.patterns import group_key

    assert group_key("name", "IBM", 64) == group_key("name", "IBM", 64)
    assert group_key("n", 10, 64) == group_key("n", 10.0, 64)
    assert group_key("n", True, 1024) != group_key("n", 1, 1024)
