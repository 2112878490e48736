"""Offset planning of the kafka-py stream reader, over a scripted view of the log."""

from __future__ import annotations

import pickle
from collections.abc import Iterable

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from streaming.kafka.errors import DataLossError, KafkaOptionError
from streaming.kafka.offsets import TP, OffsetMap
from streaming.kafka.source import KafkaBatchReader, KafkaStreamReader

BASE = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "ev,subs"}


class ScriptedLog:
    """Stands in for :class:`Watermarks`: partitions with first and end offsets."""

    def __init__(self, first: OffsetMap, end: OffsetMap) -> None:
        self.first = dict(first)
        self.end = dict(end)

    def partitions(self, topics: Iterable[str], refresh: bool = False) -> list[TP]:
        return sorted(tp for tp in self.end if tp[0] in set(topics))

    def earliest(self, tps: Iterable[TP]) -> OffsetMap:
        return {tp: self.first[tp] for tp in tps}

    def latest(self, tps: Iterable[TP]) -> OffsetMap:
        return {tp: self.end[tp] for tp in tps}

    def close(self) -> None:
        pass


def _reader(log: ScriptedLog, **options: str) -> KafkaStreamReader:
    reader = KafkaStreamReader({**BASE, **options})
    reader._watermarks = log  # type: ignore[assignment]  # a recording stand-in for the method
    return reader


def test_initial_offsets_follow_starting_offsets() -> None:
    log = ScriptedLog({("ev", 0): 3, ("subs", 0): 0}, {("ev", 0): 10, ("subs", 0): 4})
    assert _reader(log).initialOffset() == {"ev": {"0": 10}, "subs": {"0": 4}}
    assert _reader(log, startingOffsets="earliest").initialOffset() == {
        "ev": {"0": 3},
        "subs": {"0": 0},
    }
    spec = '{"ev": {"0": 5}, "subs": {"0": -2}}'
    assert _reader(log, startingOffsets=spec).initialOffset() == {"ev": {"0": 5}, "subs": {"0": 0}}
    with pytest.raises(KafkaOptionError, match="missing"):
        _reader(log, startingOffsets='{"ev": {"0": 5}}').initialOffset()


def test_latest_offset_picks_up_new_partitions_and_topics() -> None:
    log = ScriptedLog({("ev", 0): 0}, {("ev", 0): 10})
    reader = _reader(log, startingOffsets="earliest")
    start = reader.initialOffset()
    assert start == {"ev": {"0": 0}}
    log.end.update({("ev", 1): 4, ("subs", 0): 2})
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"ev": {"0": 10, "1": 4}, "subs": {"0": 2}}
    parts = [p.value for p in reader.partitions(start, end)]
    assert parts == [("ev", 0, 0, 10), ("ev", 1, 0, 4), ("subs", 0, 0, 2)]
    assert reader.reportLatestOffset() == end


def test_latest_offset_respects_the_read_limit() -> None:
    log = ScriptedLog({("ev", 0): 0, ("ev", 1): 0}, {("ev", 0): 300, ("ev", 1): 100})
    reader = _reader(log, maxOffsetsPerTrigger="40")
    assert reader.getDefaultReadLimit() == ReadMaxRows(40)
    start = {"ev": {"0": 0, "1": 0}}
    assert reader.latestOffset(start, ReadMaxRows(40)) == {"ev": {"0": 30, "1": 10}}
    # Spark may ask for everything (e.g. Trigger.AvailableNow); the limit is then ignored.
    assert reader.latestOffset(start, ReadAllAvailable()) == {"ev": {"0": 300, "1": 100}}
    assert reader.reportLatestOffset() == {"ev": {"0": 300, "1": 100}}
    assert _reader(log).getDefaultReadLimit() == ReadAllAvailable()


def test_log_behind_checkpoint_is_data_loss_unless_allowed() -> None:
    log = ScriptedLog({("ev", 0): 0}, {("ev", 0): 5})
    start = {"ev": {"0": 9}}
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        _reader(log).latestOffset(start, ReadAllAvailable())
    lenient = _reader(log, failOnDataLoss="false")
    assert lenient.latestOffset(start, ReadAllAvailable()) == {"ev": {"0": 9}}


def test_vanished_partitions_keep_their_offsets() -> None:
    log = ScriptedLog({("ev", 0): 0}, {("ev", 0): 5})
    start = {"ev": {"0": 5}, "subs": {"0": 7}}
    end = _reader(log).latestOffset(start, ReadAllAvailable())
    assert end == {"ev": {"0": 5}, "subs": {"0": 7}}
    assert _reader(log).partitions(start, end) == []


def test_reader_pickles_without_its_consumer() -> None:
    reader = _reader(ScriptedLog({}, {}))
    clone = pickle.loads(pickle.dumps(reader))
    assert clone._watermarks is None
    assert clone._topics == ["ev", "subs"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"maxOffsetsPerTrigger": "0"}, "positive"),
        ({"maxOffsetsPerTrigger": "lots"}, "integer"),
        ({"failOnDataLoss": "maybe"}, "true or false"),
        ({"subscribe": ""}, "subscribe"),
        ({"startingOffsets": "now"}, "startingOffsets"),
    ],
)
def test_bad_source_options(options: dict, message: str) -> None:
    with pytest.raises(KafkaOptionError, match=message):
        KafkaStreamReader({**BASE, **options})


def test_batch_reader_rejects_backward_specs() -> None:
    with pytest.raises(KafkaOptionError):
        KafkaBatchReader({**BASE, "startingOffsets": "latest"})
    with pytest.raises(KafkaOptionError):
        KafkaBatchReader({**BASE, "endingOffsets": "earliest"})


def test_available_now_stops_at_the_ends_seen_when_prepared() -> None:
    log = ScriptedLog({("ev", 0): 0}, {("ev", 0): 10})
    reader = _reader(log, startingOffsets="earliest", maxOffsetsPerTrigger="6")
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    log.end.update({("ev", 0): 50, ("subs", 0): 5})  # arrives after the query started
    first = reader.latestOffset(start, ReadMaxRows(6))
    assert first == {"ev": {"0": 6}, "subs": {"0": 0}}
    second = reader.latestOffset(first, ReadMaxRows(6))
    assert second == {"ev": {"0": 10}, "subs": {"0": 0}}
    assert reader.latestOffset(second, ReadMaxRows(6)) == second


def test_writes_are_append_only() -> None:
    from pyspark.sql.types import StringType, StructField, StructType

    from streaming.kafka.source import KafkaDataSource

    schema = StructType([StructField("value", StringType())])
    source = KafkaDataSource({"kafka.bootstrap.servers": "h:1", "topic": "t"})
    assert source.writer(schema, overwrite=False) is not None
    with pytest.raises(KafkaOptionError, match="append"):
        source.writer(schema, overwrite=True)
    with pytest.raises(KafkaOptionError, match="append"):
        source.streamWriter(schema, overwrite=True)
