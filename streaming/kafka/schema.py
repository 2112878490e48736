"""Schemas of the Kafka source (the same columns as Spark's own Kafka source) and sink."""

from __future__ import annotations

from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

SOURCE_SCHEMA = StructType(
    [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
    ]
)
#: Arrow schema that ``read()`` batches must have (what PySpark derives from SOURCE_SCHEMA).
ARROW_SCHEMA = to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")

#: Columns the sink understands; ``value`` is required.
SINK_COLUMNS = ("key", "value", "topic", "partition")
