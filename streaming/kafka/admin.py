"""Topic administration: create missing topics, describe topics and partitions."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.errors import AuthenticationError, KafkaConnectorError
from streaming.kafka.refusals import kafka_python_refusals

log = logging.getLogger(__name__)


def admin_client(client_config: KafkaClientConfig) -> KafkaAdminClient:
    """A kafka-python admin client for ``client_config``.

    Raises
    ------
    AuthenticationError
        If the broker refuses the client's SASL login or TLS handshake.
    KafkaConnectorError
        If the cluster cannot be reached.
    """
    try:
        with kafka_python_refusals(client_config):
            return KafkaAdminClient(**client_config.kafka_python("admin"))
    except AuthenticationError:
        raise
    except Exception as exc:
        raise KafkaConnectorError(
            f"cannot reach Kafka with {client_config!r}: {exc!r}"
        ) from exc


def partition_counts(client_config: KafkaClientConfig, topics: Iterable[str]) -> dict[str, int]:
    """Number of partitions of each existing topic among ``topics`` (missing ones left out)."""
    wanted = set(topics)
    admin = admin_client(client_config)
    try:
        existing = wanted & set(admin.list_topics())
        if not existing:
            return {}
        described = admin.describe_topics(sorted(existing))
    finally:
        admin.close()
    return {d["name"]: len(d["partitions"]) for d in described if d["name"] in existing}


def ensure_topics(
    client_config: KafkaClientConfig,
    topics: Mapping[str, int],
    replication_factor: int = 1,
    timeout_s: float = 30.0,
) -> dict[str, int]:
    """Create the topics of ``topics`` that do not exist yet (idempotent).

    Parameters
    ----------
    client_config : KafkaClientConfig
        Connection and security options.
    topics : Mapping[str, int]
        Topic name to partition count for topics to create.
    replication_factor : int
        Replication factor of created topics.
    timeout_s : float
        How long to wait until created topics show up in the metadata.

    Returns
    -------
    dict[str, int]
        Partition count of every topic in ``topics`` as the cluster reports it (an
        existing topic keeps its own count; a mismatch is logged, not changed).

    Raises
    ------
    KafkaConnectorError
        If a topic cannot be created or does not appear in time.
    """
    admin = admin_client(client_config)
    try:
        existing = set(admin.list_topics())
        missing = [name for name in topics if name not in existing]
        if missing:
            new = [NewTopic(name, int(topics[name]), replication_factor) for name in missing]
            try:
                admin.create_topics(new)
            except TopicAlreadyExistsError:
                pass  # created concurrently; the describe below checks the result
            except Exception as exc:
                raise KafkaConnectorError(f"cannot create topics {missing}: {exc!r}") from exc
        deadline = time.monotonic() + timeout_s
        while True:
            present = set(admin.list_topics())
            if set(topics) <= present:
                break
            if time.monotonic() > deadline:
                raise KafkaConnectorError(
                    f"topics {sorted(set(topics) - present)} did not appear within {timeout_s} s"
                )
            time.sleep(0.1)
        described = admin.describe_topics(sorted(topics))
    finally:
        admin.close()
    counts = {d["name"]: len(d["partitions"]) for d in described}
    for name, want in topics.items():
        if counts.get(name) != want:
            log.warning("topic %s has %s partitions, not %s", name, counts.get(name), want)
    return counts
