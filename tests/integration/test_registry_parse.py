"""Subscription records parsed in Spark tasks (issue 29, step 1): read from the real broker by
Spark's Kafka connector, parsed by ``mapInArrow`` with :func:`parse_partition`, the same rows
as :func:`parse_records` gives in this process."""

from __future__ import annotations

from functools import partial

import orjson
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import from_arrow_schema

from streaming.kafka.offsets import OffsetRange
from streaming.match.changes import (
    parse_in_tasks,
    parse_subscription_records,
    read_records,
)
from streaming.registry_columns import columns
from streaming.registry_columns.parse import ERROR, PARSED_SCHEMA, parse_partition, parse_records
from tests.integration.kafka_helpers import produce

pytestmark = pytest.mark.integration


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
    rows = df.mapInArrow(partial(parse_partition), from_arrow_schema(PARSED_SCHEMA)).collect()
    here = parse_records(pa.RecordBatch.from_pylist([r.asDict() for r in df.collect()], schema=pa.schema([
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
        ("offset", pa.int64())]))).to_pylist()
    assert sorted((r.asDict() for r in rows), key=_at) == sorted(here, key=_at)
    by_id = {r["id"]: r for r in here if r["op"] != ERROR}
    assert by_id["a"]["kind"] == columns.EXPRESSION and by_id["p"]["kind"] == columns.PATTERN
    assert by_id["d"]["op"] == columns.DELETE and sum(r["op"] == ERROR for r in here) == 2


def test_the_match_querys_parse_in_tasks_gives_the_drivers_rows(spark, kafka_config, topic_factory):
    """:func:`parse_in_tasks` (an RDD job whose tasks read their ranges, split across tasks)
    gives the driver's rows: good, bad
    (malformed JSON, no id, a bad expression), pattern and delete records, one row and so at
    most one error record each."""
    topic = topic_factory("subs", partitions=2)
    good = [orjson.dumps({"id": f"s{i}", "expr": f"price > {i}"}) for i in range(16)] + [
        orjson.dumps({"id": f"s{i}", "json": {"all": [["price", ">", i]]}}) for i in range(16, 20)]  # the fast form
    bad = [b"{broken", orjson.dumps({"expr": "price > 1"}), orjson.dumps({"id": "y", "expr": "price >"}),
           orjson.dumps({"id": "", "expr": "price > 1"}), orjson.dumps([1, 2])]
    patterns = [orjson.dumps({"id": "p", "pattern": "SELECT * FROM FILTER{price > 10}(Stock)"}),
                orjson.dumps({"id": "q", "pattern": "SELECT * FROM ("})]
    deletes = [None, orjson.dumps({"id": "s3", "op": "delete"})]
    values = good + bad + patterns + deletes
    ids = [f"s{i}" for i in range(20)] + ["k0", "k1", "y", "", "k2", "p", "q", "s5", "s3"]
    records = [(None if i == "k1" else i.encode(), v) for i, v in zip(ids, values, strict=True)]  # no id, no key
    n0 = produce(kafka_config, topic, records[::2], partition=0)
    n1 = produce(kafka_config, topic, records[1::2], partition=1)
    ranges = [OffsetRange(topic, 0, 0, n0), OffsetRange(topic, 1, 0, n1)]

    driver = parse_subscription_records(read_records(kafka_config, ranges))
    tasks = parse_in_tasks(spark.sparkContext, kafka_config, ranges, task_records=5, driver_records=0)
    small = parse_in_tasks(spark.sparkContext, kafka_config, ranges)  # fewer than DRIVER_RECORDS: the driver's
    split = parse_in_tasks(spark.sparkContext, kafka_config, ranges, general_records=1)  # the general path's in tasks
    assert driver.num_rows == len(values) and tasks.schema == small.schema == PARSED_SCHEMA
    want = sorted(driver.to_pylist(), key=_at)
    assert sorted(tasks.to_pylist(), key=_at) == want
    assert sorted(small.to_pylist(), key=_at) == want
    assert sorted(split.to_pylist(), key=_at) == want
    errors = [r for r in want if r["op"] == ERROR]
    assert len(errors) == len(bad) + 1  # and the pattern that does not compile (stage "pattern")
    assert sum(r["op"] == columns.DELETE for r in want) == len(deletes)
    assert [r["kind"] for r in want if r["id"] in ("p", "q")] == [columns.PATTERN] * 2
    assert parse_in_tasks(spark.sparkContext, kafka_config, [OffsetRange(topic, 0, n0, n0)],
                          driver_records=0).num_rows == 0
