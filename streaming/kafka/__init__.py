"""Kafka I/O for Spark: both connectors, the embedded broker and admin helpers.

The service calls only :func:`register`, :func:`read_stream` and :func:`write_batch`;
``use_java_connector=True`` (the service's default, ``kafka.use_java_connector``) reads
and writes with Spark's own ``format("kafka")``, with the client options in the Java
client's names; ``False`` with the project's ``kafka-py`` data source.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from streaming.kafka.client_config import KafkaClientConfig, Role, redact
from streaming.kafka.errors import KafkaConnectorError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["KafkaClientConfig", "KafkaConnectorError", "read_stream", "redact", "register", "write_batch"]

JAVA_FORMAT = "kafka"


def register(spark: SparkSession) -> None:
    """Register the ``kafka-py`` data source with ``spark``."""
    from streaming.kafka.source import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)


def _format_options(config: KafkaClientConfig, use_java_connector: bool, role: Role) -> tuple[str, dict[str, str]]:
    """The data source and its client options: ``kafka-py``'s, or the Java connector's
    (Java client names, :meth:`KafkaClientConfig.java_options`)."""
    from streaming.kafka.source import NAME

    if use_java_connector:
        return JAVA_FORMAT, config.java_options(role)
    return NAME, config.spark_options()


def read_stream(
    spark: SparkSession,
    config: KafkaClientConfig,
    topics: str | Iterable[str],
    starting: str = "latest",
    max_per_trigger: int | None = None,
    use_java_connector: bool = False,
    options: Mapping[str, str] | None = None,
) -> DataFrame:
    """Streaming DataFrame of Kafka records (``key, value, topic, partition, offset, timestamp``).

    Parameters
    ----------
    spark : SparkSession
        Session with the ``kafka-py`` source registered (see :func:`register`).
    config : KafkaClientConfig
        Connection and security options, and the data-path client.
    topics : str or Iterable[str]
        Topics to subscribe to (a comma-separated string or names).
    starting : str
        ``"earliest"``, ``"latest"`` or a JSON offset map, for a query without checkpoint.
    max_per_trigger : int, optional
        Cap on records per micro-batch, split across partitions.
    use_java_connector : bool
        Use Spark's Java ``format("kafka")`` instead of ``kafka-py``.
    options : Mapping[str, str], optional
        Further source options (``failOnDataLoss``, ``kafkaConsumer.pollTimeoutMs``).

    Raises
    ------
    KafkaOptionError
        With ``use_java_connector``, if a client option has no Java client counterpart.
    """
    names = topics if isinstance(topics, str) else ",".join(topics)
    source, client_options = _format_options(config, use_java_connector, "consumer")
    reader = (
        spark.readStream.format(source)
        .options(**client_options)
        .option("subscribe", names)
        .option("startingOffsets", starting)
    )
    if max_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(int(max_per_trigger)))
    if options:
        reader = reader.options(**options)
    return reader.load()


def write_batch(
    df: DataFrame,
    config: KafkaClientConfig,
    topic: str | None = None,
    use_java_connector: bool = False,
) -> None:
    """Write ``df`` (``value`` and optional ``key``, ``topic``, ``partition``) to Kafka.

    Parameters
    ----------
    df : DataFrame
        Rows to send; a non-null ``topic`` column value overrides ``topic`` per row.
    config : KafkaClientConfig
        Connection and security options, and the data-path client.
    topic : str, optional
        Default topic for rows without a ``topic`` column value.
    use_java_connector : bool
        Use Spark's Java ``format("kafka")`` instead of ``kafka-py``.

    Raises
    ------
    KafkaConnectorError
        (inside the Spark error) if a record cannot be delivered.
    KafkaOptionError
        With ``use_java_connector``, if a client option has no Java client counterpart.
    """
    sink, client_options = _format_options(config, use_java_connector, "producer")
    writer = df.write.format(sink).options(**client_options)
    if topic is not None:
        writer = writer.option("topic", topic)
    writer.mode("append").save()
