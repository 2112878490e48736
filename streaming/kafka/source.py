"""The ``kafka-py`` Spark data source: Kafka reads (batch, streaming) and writes on kafka-python.

Options (case-insensitive):

* ``kafka.*``: kafka-python arguments with dots for underscores
  (``kafka.bootstrap.servers``, ``kafka.security.protocol``, ``kafka.sasl.mechanism``,
  ``kafka.sasl.plain.username``, ``kafka.ssl.cafile``, ...), checked and translated by
  :class:`streaming.kafka.client_config.KafkaClientConfig`. Required: bootstrap servers.
* ``subscribe``: comma-separated topics (reads).
* ``startingOffsets``: ``earliest``, ``latest`` or JSON ``{"t": {"0": 42}}`` with ``-2`` for
  earliest and ``-1`` for latest (default ``latest`` for streams, ``earliest`` for batches).
* ``endingOffsets``: batch reads only, ``latest`` (default) or JSON.
* ``initialOffsetsLog``: streams only, a location (:mod:`streaming.storage`) where the
  stream's initial offsets are kept as the Java connector keeps them under the query's
  checkpoint (``sources/<n>``: file ``0``, :func:`~streaming.kafka.offsets.initial_offsets_text`):
  written when the query first starts, read back at a restart before its first batch
  committed, so that batch reads the same records again (and its ranges are known:
  :func:`streaming.match.job.logged_ranges`). Without it ``startingOffsets`` is resolved again.
* ``maxOffsetsPerTrigger``: cap on offsets per micro-batch, split across partitions.
* ``failOnDataLoss``: ``true`` (default) fails a read whose offsets are gone from the log.
* ``kafkaConsumer.pollTimeoutMs``: longest wait without progress in a read (120000).
* ``kafkaClient``: ``confluent`` (default) or ``kafka-python``: the client of reads and
  writes; a ``kafka.*`` option it cannot express is an error when the source is created.
* ``topic``: writes; a ``topic`` column overrides it per row.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from streaming.kafka import offsets as off
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.errors import DataLossError, KafkaOptionError
from streaming.kafka.fetch import read_range
from streaming.kafka.offsets import TP, OffsetMap, OffsetRange
from streaming.kafka.schema import SOURCE_SCHEMA
from streaming.kafka.sink import KafkaBatchWriter, KafkaStreamWriter
from streaming.kafka.watermarks import Watermarks

NAME = "kafka-py"


def _bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = str(options.get(name, default)).strip().lower()
    if text not in ("true", "false"):
        raise KafkaOptionError(f"option {name} must be true or false, got {text!r}")
    return text == "true"


def _positive_int_option(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise KafkaOptionError(f"option {name} must be an integer, got {text!r}") from None
    if value < 1:
        raise KafkaOptionError(f"option {name} must be positive, got {value}")
    return value


def resolve(spec: str | OffsetMap, tps: list[TP], watermarks: Watermarks, option: str) -> OffsetMap:
    """Turn ``earliest``/``latest``/a JSON offset map into offsets of every partition in ``tps``.

    Raises
    ------
    KafkaOptionError
        If a JSON map names a partition that does not exist or leaves one out.
    """
    if spec == off.EARLIEST:
        return watermarks.earliest(tps)
    if spec == off.LATEST:
        return watermarks.latest(tps)
    assert isinstance(spec, dict)
    unknown = sorted(set(spec) - set(tps))
    missing = sorted(set(tps) - set(spec))
    if unknown or missing:
        raise KafkaOptionError(
            f"option {option} must name every partition of the subscribed topics: "
            f"unknown {unknown}, missing {missing}"
        )
    earliest = [tp for tp in tps if spec[tp] == off.EARLIEST_MARKER]
    latest = [tp for tp in tps if spec[tp] == off.LATEST_MARKER]
    result = dict(spec)
    result.update(watermarks.earliest(earliest))
    result.update(watermarks.latest(latest))
    return result


class _ReaderBase:
    """Options shared by the batch and the streaming reader, and ``read()``."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self._config = KafkaClientConfig.from_spark_options(options)
        self._topics = off.parse_topics(options.get("subscribe"))
        self._fail_on_data_loss = _bool_option(options, "failOnDataLoss", True)
        timeout_ms = _positive_int_option(options, "kafkaConsumer.pollTimeoutMs") or 120_000
        self._timeout_s = timeout_ms / 1000.0

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one topic-partition offset range (runs on an executor)."""
        rng = partition.value
        if rng is None:  # Spark's placeholder partition of an empty batch read
            return iter(())
        return read_range(
            self._config,
            OffsetRange(*rng),
            timeout_s=self._timeout_s,
            fail_on_data_loss=self._fail_on_data_loss,
        )


class KafkaBatchReader(_ReaderBase, DataSourceReader):
    """``spark.read.format("kafka-py")``: the records between two offset specifications."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        self._starting = off.parse_spec(
            options.get("startingOffsets"), "startingOffsets", off.EARLIEST
        )
        self._ending = off.parse_spec(options.get("endingOffsets"), "endingOffsets", off.LATEST)
        if self._starting == off.LATEST or self._ending == off.EARLIEST:
            raise KafkaOptionError(
                "a batch read needs startingOffsets != 'latest' and endingOffsets != 'earliest'"
            )

    def partitions(self) -> list[InputPartition]:
        """One input partition per non-empty topic-partition range."""
        watermarks = Watermarks(self._config.kafka_python("consumer"))
        try:
            tps = watermarks.partitions(self._topics, refresh=True)
            start = resolve(self._starting, tps, watermarks, "startingOffsets")
            end = resolve(self._ending, tps, watermarks, "endingOffsets")
        finally:
            watermarks.close()
        bad = {tp: (start[tp], end[tp]) for tp in tps if end[tp] < start[tp]}
        if bad:
            raise KafkaOptionError(f"endingOffsets before startingOffsets for {bad}")
        return [InputPartition(tuple(r)) for r in off.ranges(start, end)]


class KafkaStreamReader(_ReaderBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafka-py")``: micro-batches of per-partition offset ranges.

    Offsets are ``{"topic": {"partition": next_offset}}``. Partitions that appear while the
    query runs (new partitions, topics created later) are read from their first offset.
    With ``Trigger.AvailableNow`` the query reads up to the ends seen when it started.
    """

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        self._starting = off.parse_spec(
            options.get("startingOffsets"), "startingOffsets", off.LATEST
        )
        self._max_per_trigger = _positive_int_option(options, "maxOffsetsPerTrigger")
        self._initial_log = options.get("initialOffsetsLog") or None
        self._watermarks: Watermarks | None = None
        self._latest: OffsetMap | None = None
        self._target: OffsetMap | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_watermarks"] = None
        return state

    @property
    def watermarks(self) -> Watermarks:
        """The driver-side offset reader, created on first use."""
        if self._watermarks is None:
            self._watermarks = Watermarks(self._config.kafka_python("consumer"))
        return self._watermarks

    def initialOffset(self) -> dict:
        """Offsets the query starts from (``startingOffsets``) when it has no checkpoint: those
        kept in ``initialOffsetsLog`` when it holds them, else resolved now (and kept there)."""
        from streaming.storage import Directory

        log = None if self._initial_log is None else Directory(self._initial_log)
        if log is not None:
            try:
                return off.to_json(off.read_initial_offsets(log.read("0")))
            except FileNotFoundError:
                pass
        tps = self.watermarks.partitions(self._topics, refresh=True)
        start = resolve(self._starting, tps, self.watermarks, "startingOffsets")
        if log is not None:
            log.make()
            log.write("0", off.initial_offsets_text(start))
        return off.to_json(start)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the ends a ``Trigger.AvailableNow`` query reads up to: the ends now."""
        tps = self.watermarks.partitions(self._topics, refresh=True)
        self._target = self.watermarks.latest(tps)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)`` when the option is set."""
        if self._max_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self._max_per_trigger)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """End offsets of the next micro-batch: the ends, capped by ``limit``."""
        begin = off.from_json(start)
        tps = self.watermarks.partitions(self._topics)
        ends = self.watermarks.latest(tps)
        for tp, end in ends.items():
            if tp in begin and end < begin[tp]:
                if self._fail_on_data_loss:
                    raise DataLossError(
                        f"{tp[0]}-{tp[1]}: the log ends at {end} but the query has read up to "
                        f"{begin[tp]} (topic deleted and recreated?); set failOnDataLoss=false "
                        "to wait for the log to pass that offset"
                    )
                ends[tp] = begin[tp]
        # Partitions that vanished keep their offsets; new ones start at 0 (see ranges()).
        latest = {**begin, **ends}
        self._latest = dict(latest)
        if self._target is not None:  # Trigger.AvailableNow: nothing past the target
            for tp in latest:
                floor = begin.get(tp, 0)
                latest[tp] = max(floor, min(latest[tp], self._target.get(tp, floor)))
        if isinstance(limit, ReadMaxRows):
            return off.to_json(off.cap(begin, latest, limit.max_rows))
        return off.to_json(latest)

    def reportLatestOffset(self) -> dict | None:
        """The ends seen by the last :meth:`latestOffset` call."""
        return None if self._latest is None else off.to_json(self._latest)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """One input partition per non-empty topic-partition range of the micro-batch."""
        ranges = off.ranges(off.from_json(start), off.from_json(end))
        return [InputPartition(tuple(r)) for r in ranges]

    def commit(self, end: dict) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        """Close the driver-side consumer."""
        if self._watermarks is not None:
            self._watermarks.close()
            self._watermarks = None


class KafkaDataSource(DataSource):
    """Kafka source and sink registered under the short name ``kafka-py``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> KafkaBatchReader:
        return KafkaBatchReader(self.options)

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        return KafkaStreamReader(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> KafkaBatchWriter:
        _append_only(overwrite)
        return KafkaBatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        _append_only(overwrite)
        return KafkaStreamWriter(self.options, schema)


def _append_only(overwrite: bool) -> None:
    if overwrite:
        raise KafkaOptionError("a Kafka topic can only be appended to: use mode('append')")
