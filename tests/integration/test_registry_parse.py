"""Subscription records parsed in Spark tasks (issue 29, step 1): read from the real broker by
Spark's Kafka connector, parsed by ``mapInArrow`` with :func:`parse_partition`, the same rows
as :func:`parse_records` gives in this process."""

from __future__ import annotations

from functools import partial

import orjson
import pyarrow as pa
import pytest

from streaming.registry_columns import columns
from streaming.registry_columns.parse import ERROR, PARSED_SCHEMA, parse_partition, parse_records
from tests.integration.kafka_helpers import produce

pytestmark = pytest.mark.integration

SPARK_SCHEMA = ("id string, op tinyint, kind tinyint, record binary, expires double, target string, predicates int, "
                "topic string, partition int, offset bigint, error binary, key binary")


def _at(row: dict) -> tuple[int, int]:
    return row["partition"], row["offset"]


def test_records_parsed_in_spark_tasks_are_the_rows_parsed_here(spark, kafka_config, topic_factory):
    topic = topic_factory("subs", partitions=2)
    records = [(b"a", orjson.dumps({"id": "a", "expr": "price > 10"})),
               (b"p", orjson.dumps({"id": "p", "pattern": "SELECT * FROM FILTER{price > 10}(Stock)"})),
               (b"d", None), (b"x", b"{broken"), (b"y", orjson.dumps({"id": "y", "expr": "price >"}))]
    produce(kafka_config, topic, records)
    df = (spark.read.format("kafka").options(**kafka_config.java_options("consumer")).option("subscribe", topic)
          .option("startingOffsets", "earliest").load().select("key", "value", "topic", "partition", "offset"))
    rows = df.mapInArrow(partial(parse_partition), SPARK_SCHEMA).collect()
    here = parse_records(pa.RecordBatch.from_pylist([r.asDict() for r in df.collect()], schema=pa.schema([
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
        ("offset", pa.int64())]))).to_pylist()
    assert sorted((r.asDict() for r in rows), key=_at) == sorted(here, key=_at)
    by_id = {r["id"]: r for r in here if r["op"] != ERROR}
    assert by_id["a"]["kind"] == columns.EXPRESSION and by_id["p"]["kind"] == columns.PATTERN
    assert by_id["d"]["op"] == columns.DELETE and sum(r["op"] == ERROR for r in here) == 2
    assert PARSED_SCHEMA.names == [f.split()[0] for f in SPARK_SCHEMA.split(", ")]
