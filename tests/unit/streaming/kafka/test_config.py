"""Spark ``kafka.*`` options to kafka-python arguments, and redaction of secrets."""

from __future__ import annotations

import pytest

from streaming.kafka.config import (
    REDACTED,
    client_kwargs,
    client_option,
    config_client_kwargs,
    options_from_config,
    rdkafka_config,
    redact,
)
from streaming.kafka.errors import KafkaOptionError

SECURE = {
    "kafka.bootstrap.servers": "b1:9093, b2:9093",
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "PLAIN",
    "kafka.sasl.plain.username": "alice",
    "kafka.sasl.plain.password": "s3cret",
    "kafka.ssl.cafile": "/etc/ca.pem",
    "kafka.ssl.check.hostname": "false",
    "kafka.request.timeout.ms": "40000",
    "kafka.fetch.max.wait.ms": "200",
    "kafka.acks": "all",
    "subscribe": "events",
}


def test_options_map_to_typed_kafka_python_arguments() -> None:
    consumer = client_kwargs(SECURE, "consumer")
    assert consumer["bootstrap_servers"] == ["b1:9093", "b2:9093"]
    assert consumer["sasl_plain_password"] == "s3cret"
    assert consumer["ssl_check_hostname"] is False
    assert consumer["request_timeout_ms"] == 40000
    assert consumer["fetch_max_wait_ms"] == 200
    assert "acks" not in consumer and "subscribe" not in consumer
    producer = client_kwargs(SECURE, "producer")
    assert producer["acks"] == "all" and "fetch_max_wait_ms" not in producer
    admin = client_kwargs(SECURE, "admin")
    assert "acks" not in admin and admin["security_protocol"] == "SASL_SSL"


def test_option_keys_are_case_insensitive() -> None:
    assert client_kwargs({"KAFKA.Bootstrap.Servers": "h:1"}, "consumer") == {
        "bootstrap_servers": ["h:1"]
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kafka.sasl.jaas.config": "x", "kafka.bootstrap.servers": "h:1"}, "unknown"),
        ({"kafka.request.timeout.ms": "soon", "kafka.bootstrap.servers": "h:1"}, "expects a int"),
        ({"kafka.ssl.check.hostname": "yes", "kafka.bootstrap.servers": "h:1"}, "expects a bool"),
        ({"kafka.ssl.context": "x", "kafka.bootstrap.servers": "h:1"}, "Python object"),
        ({"kafka.security.protocol": "SSL"}, "bootstrap.servers is required"),
        ({"kafka.bootstrap.servers": " , "}, "empty"),
    ],
)
def test_bad_options_are_clear_errors(options: dict, message: str) -> None:
    with pytest.raises(KafkaOptionError, match=message):
        client_kwargs(options, "consumer")


def test_config_round_trips_through_spark_options() -> None:
    config = {
        "bootstrap_servers": ["h1:1", "h2:2"],
        "security_protocol": "SSL",
        "ssl_check_hostname": False,
        "api_version": (2, 8, 0),
        "request_timeout_ms": 31000,
    }
    options = options_from_config(config)
    assert options["kafka.bootstrap.servers"] == "h1:1,h2:2"
    assert options["kafka.ssl.check.hostname"] == "false"
    assert options["kafka.api.version"] == "2.8.0"
    assert config_client_kwargs(config, "consumer") == config
    assert options_from_config({"bootstrap.servers": "h:1"}) == {"kafka.bootstrap.servers": "h:1"}
    with pytest.raises(KafkaOptionError):
        options_from_config({"ssl_context": object()})


def test_redact_hides_every_secret_and_nothing_else() -> None:
    shown = redact(
        {
            **SECURE,
            "sasl_plain_password": "p",
            "ssl_password": "q",
            "sasl_oauth_token": "t",
            "kafka.sasl.jaas.config": "j",
            "client_secret": "c",
        }
    )
    hidden = {k for k, v in shown.items() if v == REDACTED}
    assert hidden == {
        "kafka.sasl.plain.password",
        "sasl_plain_password",
        "ssl_password",
        "sasl_oauth_token",
        "kafka.sasl.jaas.config",
        "client_secret",
    }
    assert shown["kafka.sasl.plain.username"] == "alice"
    assert "s3cret" not in repr(shown)


def test_rdkafka_config_translates_or_refuses() -> None:
    consumer = rdkafka_config(client_kwargs(SECURE, "consumer"), "consumer")
    assert consumer == {
        "bootstrap.servers": "b1:9093,b2:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "s3cret",
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
        "socket.timeout.ms": 40000,
    }
    producer = rdkafka_config(client_kwargs(SECURE, "producer"), "producer")
    assert producer is not None and producer["acks"] == "all"
    assert "fetch.wait.max.ms" not in producer
    # No librdkafka equivalent: the caller must fall back to kafka-python.
    assert (
        rdkafka_config({"bootstrap_servers": ["h:1"], "sasl_kerberos_name": "x"}, "consumer")
        is None
    )


def test_client_option() -> None:
    assert client_option({}) == "auto"
    assert client_option({"kafkaClient": " Confluent "}) == "confluent"
    with pytest.raises(KafkaOptionError, match="kafkaClient"):
        client_option({"kafkaClient": "java"})
