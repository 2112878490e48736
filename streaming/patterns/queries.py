"""The two patterns queries, started by the service (:func:`starters`).

* ``pattern-subscriptions`` reads the subscriptions topic (and every tenant's) and keeps the
  pattern registry (:mod:`streaming.patterns.registry`); its bad pattern records go to the
  errors topic of the record's tenant.
* ``patterns`` reads the events topic, keys the events (:mod:`streaming.patterns.keyed`)
  and runs the keyed-state operator (:class:`~streaming.patterns.operator.PatternOperator`)
  with ``applyInPandasWithState`` and an event-time watermark; notifications and error
  records go to their topics through the ``kafka-py`` sink.

Both checkpoint under ``<spark.checkpoint_dir>/patterns`` (the registry under it too), start
from ``patterns.starting_offsets`` and trigger every ``patterns.trigger_interval``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from streaming.config import Settings
from streaming.kafka.client_config import KafkaClientConfig
from streaming.patterns.keyed import ROWS_DDL, keyed_rows
from streaming.patterns.operator import OUT_DDL, STATE_SCHEMA, PatternOperator
from streaming.patterns.registry import PatternRegistry, apply_pattern_records
from streaming.storage import join
from streaming.tenants import Tenants

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("streaming.patterns")


def checkpoint(settings: Settings) -> str:
    """Where the patterns queries keep their checkpoints and the registry."""
    return join(settings.checkpoint, "patterns")


def registry_dir(settings: Settings) -> str:
    return join(checkpoint(settings), "pattern-registry")


def _starting(settings: Settings) -> str:
    return settings.patterns.starting_offsets or settings.kafka.starting_offsets


def _trigger(settings: Settings) -> str:
    return settings.patterns.trigger_interval or settings.spark.trigger_interval


def start_subscriptions_query(spark: SparkSession, settings: Settings, client_config: KafkaClientConfig) -> StreamingQuery:
    """The query keeping the pattern registry from the subscriptions topic."""
    from streaming import kafka

    kafka.register(spark)
    registry = PatternRegistry(registry_dir(settings))
    config, k, tenants = client_config, settings.kafka, Tenants.of(settings)

    def on_batch(df: DataFrame, batch_id: int) -> None:
        rows = [(r.key, r.value, r.topic, r.partition, r.offset)
                for r in df.select("key", "value", "topic", "partition", "offset").collect()]
        version, errors = apply_pattern_records(registry, batch_id, rows, settings.limits, tenants)
        if errors:
            err_df = spark.createDataFrame([(None, e.to_json(), k.errors_topic if tenants is None else
                                             tenants.errors_topic_of(e.position.topic)) for e in errors], OUT_DDL)
            kafka.write_batch(err_df, config)
        log.info("pattern registry at version %d after batch %d (%d errors)", version, batch_id, len(errors))

    topics = [k.subscriptions_topic] if tenants is None else list(tenants.subscription_topics)
    src = kafka.read_stream(spark, config, topics, starting=_starting(settings))
    return (src.writeStream.foreachBatch(on_batch)
            .option("checkpointLocation", join(checkpoint(settings), "pattern-subscriptions"))
            .queryName("pattern-subscriptions").trigger(processingTime=_trigger(settings)).start())


def start_patterns_query(spark: SparkSession, settings: Settings, client_config: KafkaClientConfig) -> StreamingQuery:
    """The stateful query: events keyed by partition value, instances in keyed state."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    from streaming import kafka

    kafka.register(spark)
    rdir = registry_dir(settings)
    PatternRegistry(rdir)  # exists before the executors read it
    config, k = client_config, settings.kafka
    src = kafka.read_stream(spark, config, k.events_topic, starting=_starting(settings),
                            max_per_trigger=k.max_offsets_per_trigger or None)
    rows = src.select("value", "topic", "partition", "offset", "timestamp").mapInArrow(
        partial(keyed_rows, registry_dir=rdir, settings=settings, kafka=config),
        ROWS_DDL)
    out = rows.withWatermark("ts", settings.patterns.watermark_delay).groupBy("gkey").applyInPandasWithState(
        PatternOperator(rdir, settings), OUT_DDL, STATE_SCHEMA, "append", GroupStateTimeout.EventTimeTimeout)
    return (out.writeStream.format("kafka-py").options(**config.spark_options())
            .option("checkpointLocation", join(checkpoint(settings), "patterns"))
            .queryName("patterns").trigger(processingTime=_trigger(settings)).outputMode("append").start())


def starters(settings: Settings, spark: SparkSession, client_config: KafkaClientConfig) -> list[Callable[[], StreamingQuery]]:
    """How to start both queries (the service supervises them), or none when disabled."""
    if not settings.patterns.enabled:
        return []
    return [partial(start_subscriptions_query, spark, settings, client_config),
            partial(start_patterns_query, spark, settings, client_config)]
