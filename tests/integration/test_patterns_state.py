"""The ``patterns`` query's keyed state read back with Spark's state data source
(``spark.read.format("statestore")``) and checked against the engine's own view: the
operator run in memory over the same events at the same watermarks holds the same keys'
states (clock, instances, pending events, timer) as the partition values' states of each key
together, and the keys' reported changes of live instances add up to the instances in the store."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import orjson
import pytest

from streaming.patterns.keyed import event_time_ms
from streaming.patterns.operator import KeyState, PatternOperator, live_instances
from streaming.patterns.processor import BUCKET_NAME, LIVE, VALUES_NAME, WAKES_NAME, from_row
from streaming.patterns.queries import pattern_plan, query_conf, registry_dir
from tests.unit.cayuga.streams import TABLE1, stock_ticks
from tests.unit.streaming.helpers import NO_KAFKA
from tests.unit.streaming.patterns.test_patterns import event_bytes, register, settings_for

pytestmark = pytest.mark.integration

SUBS = {k: TABLE1[k] for k in ("S2", "S3", "S4")}
SOURCE_DDL = "value string, topic string, partition int, offset long, timestamp timestamp"


def _write(directory: Path, name: str, values: list[bytes], first: int) -> None:
    lines = [json.dumps({"value": v.decode(), "topic": "events", "partition": 0, "offset": first + i,
                         "timestamp": "2026-11-28T00:00:00Z"}) for i, v in enumerate(values)]
    (directory / name).write_text("\n".join(lines) + "\n")


def test_state_store_holds_what_the_engine_holds(spark, tmp_path, monkeypatch):
    settings = settings_for(tmp_path / "ck", key_buckets=4, state_partitions=2)
    register(settings, SUBS)
    events = stock_ticks(120, 4)
    values = [event_bytes(e) for e in events]
    src_dir = tmp_path / "in"
    src_dir.mkdir()
    src = (spark.readStream.schema(SOURCE_DDL).option("maxFilesPerTrigger", 1).json(str(src_dir))
           .selectExpr("CAST(value AS BINARY) AS value", "topic", "partition", "offset", "timestamp"))
    query_dir = str(tmp_path / "query")
    with query_conf(spark, settings):
        q = (pattern_plan(src, settings, NO_KAFKA).writeStream.format("memory").queryName("pattern_state_test")
             .option("checkpointLocation", query_dir).start())
    try:
        _write(src_dir, "0.json", values[:80], 0)
        q.processAllAvailable()  # batch 0 at watermark 0, then a batch at the new watermark (its timers)
        watermarks = [int(_ms(p["eventTime"]["watermark"])) for p in q.recentProgress
                      if "watermark" in p.get("eventTime", {})]
        out = spark.sql("SELECT kind, value FROM pattern_state_test").collect()
    finally:
        q.stop()
    # the engine's own view: the same events, the same watermark steps, in memory
    import tests.unit.streaming.patterns.test_patterns as tp

    rows, _ = tp._keyed(values[:80], settings, monkeypatch)
    op, state = PatternOperator(registry_dir(settings), settings), {}
    state, _ = op.run(state, {c: rows[c].tolist() for c in rows.columns}, 0)
    for wm in sorted(set(watermarks) - {0}):  # the batches after the first: no new events, timers
        state, _ = op.run(state, {}, wm)
    assert max(watermarks) >= event_time_ms(events[79].t1, 1000) - 5000 - 1000
    def read(name: str) -> list:
        return spark.read.format("statestore").option("path", query_dir).option("stateVarName", name).load().collect()

    clocks = {r["key"][0]: r["value"]["clock"] for r in read(BUCKET_NAME)}
    values: dict[str, dict[str, KeyState]] = {}
    for r in read(VALUES_NAME):
        v = r["user_map_value"]
        values.setdefault(r["key"][0], {})[r["user_map_key"]["value"]] = from_row(
            (v["instances"], v["pending"], v["wake"]), clocks[r["key"][0]])
    listed = {(r["key"][0], r["user_map_key"]["wake"], x) for r in read(WAKES_NAME)
              for x in pickle.loads(r["user_map_value"]["values"])}
    assert listed == {(g, ks.wake, x) for g, vs in values.items() for x, ks in vs.items() if ks.wake is not None}
    got = {g: _merged(vs) for g, vs in values.items()}
    assert got.keys() == state.keys() and got == {g: _merged({"": ks}) for g, ks in state.items()}
    assert sum(live_instances({f"{g}/{x}": ks for g, vs in values.items() for x, ks in vs.items()}).values()) > 0
    reported = sum(n for r in out if r["kind"] == LIVE for n in orjson.loads(r["value"]).values())
    assert reported == sum(live_instances({f"{g}/{x}": ks for g, vs in values.items() for x, ks in vs.items()}).values())


def _merged(states: dict) -> tuple:
    """A state key's partition values' states as one: its clock, instances (without their start sequence
    numbers, which each value's engine counts on its own), pending events, its earliest timer."""
    clock = {ks.clock for ks in states.values()}
    assert len(clock) == 1
    rows = sorted(repr(_plain((t, r[:7]))) for ks in states.values() for t, rs in ks.instances.items() for r in rs)
    pending = sorted(repr(_plain(e)) for ks in states.values() for e in zip(*ks.pending.values(), strict=True))
    wakes = [ks.wake for ks in states.values() if ks.wake is not None]
    return clock.pop(), rows, pending, min(wakes, default=None)


def _ms(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


def _plain(x):
    """``x`` with integral floats as ints (the in-memory run's times come through pandas as floats)."""
    if isinstance(x, float) and x.is_integer():
        return int(x)
    if isinstance(x, (tuple, list)):
        return tuple(_plain(v) for v in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _plain(v)) for k, v in x.items()))
    return x
