"""Session fixtures of the integration tests: one broker, one Spark session, unique topics.

Set ``PUBSUB_BOOTSTRAP_SERVERS`` to run against another Kafka instead of the embedded
Apache Kafka broker.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from streaming.kafka.admin import ensure_topics
from streaming.kafka.broker import EmbeddedBroker
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.fetch import close_consumers
from streaming.kafka.sink import close_producers
from streaming.shared_index import remove_application
from tests.integration.hadoop_fixtures import hadoop_store, hdfs_cluster, s3_store  # noqa: F401 - fixtures
from tests.integration.kafka_security import LISTENERS, PLAIN_USERS, BrokerSecurity, SecuredKafka
from tests.integration.service_fixtures import CONNECTORS

BOOTSTRAP_ENV = "PUBSUB_BOOTSTRAP_SERVERS"


class ExternalBroker:
    """A broker the tests do not manage (``PUBSUB_BOOTSTRAP_SERVERS``)."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers

    def __repr__(self) -> str:
        return f"ExternalBroker({self.bootstrap_servers})"


@pytest.fixture(scope="session")
def broker_security(tmp_path_factory: pytest.TempPathFactory) -> BrokerSecurity:
    """What the embedded broker's secured listeners start with: a test CA and the broker's
    certificate, the admin and the SASL/PLAIN users (:data:`PLAIN_USERS`)."""
    return BrokerSecurity.create(tmp_path_factory.mktemp("broker-tls"), PLAIN_USERS)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory, broker_security: BrokerSecurity) -> Iterator[Any]:
    """The broker of this test run: embedded Apache Kafka, or the one named by the environment.

    The embedded one has, besides the PLAINTEXT listener of every test (``User:ANONYMOUS``, a
    super user), SASL_PLAINTEXT, SASL_SSL and SSL listeners and Kafka's standard authorizer
    (deny by default): :mod:`tests.integration.kafka_security`, fixture :func:`kafka_security`.
    """
    external = os.environ.get(BOOTSTRAP_ENV)
    if external:
        yield ExternalBroker(external)
        return
    log_path = tmp_path_factory.mktemp("broker") / "kafka.log"
    with EmbeddedBroker(log_path=log_path, listeners=LISTENERS, properties=broker_security.properties()) as broker:
        yield broker
        close_consumers()  # this process's cached readers go before their broker does
        close_producers()


@pytest.fixture(scope="session")
def kafka_security(kafka_broker: Any, broker_security: BrokerSecurity) -> SecuredKafka:
    """The embedded broker's secured listeners, certificates, users (the admin SCRAM user
    created now) and ACL grants; skipped on a broker named by the environment."""
    if not isinstance(kafka_broker, EmbeddedBroker):
        pytest.skip(f"the security tests configure the embedded broker ({BOOTSTRAP_ENV} names another)")
    return broker_security.secured(kafka_broker)


@pytest.fixture(scope="session")
def kafka_config(kafka_broker: Any) -> KafkaClientConfig:
    """The Kafka client configuration of the test broker."""
    return KafkaClientConfig.create(kafka_broker.bootstrap_servers)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one Spark session (``local[2]``) of this test run, ``kafka-py`` registered."""
    from streaming.spark import get_session

    session = get_session(app_name="pubsub-tests", master="local[2]")
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        remove_application(session.sparkContext.applicationId)
        session.stop()


@pytest.fixture
def topic_factory(kafka_config: KafkaClientConfig) -> Callable[..., str]:
    """Create a topic with a unique name: ``topic_factory(prefix="t", partitions=1)``."""

    def make(prefix: str = "t", partitions: int = 1) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        ensure_topics(kafka_config, {name: partitions})
        return name

    return make


@pytest.fixture(params=CONNECTORS)
def connector(request: pytest.FixtureRequest) -> str:
    """Each Kafka connector of the service in turn (:data:`CONNECTORS`)."""
    return str(request.param)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A standalone Spark cluster on loopback (master, two 1-core workers), stopped at the end."""
    from streaming.standalone import standalone_cluster

    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster
