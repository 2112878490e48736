"""One Kafka client configuration: its kafka-python, librdkafka and Spark spellings, checks, redaction."""

from __future__ import annotations

import pickle

import pytest

from streaming.kafka.client_config import NAMES, REDACTED, KafkaClientConfig, redact
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
    config = KafkaClientConfig.from_spark_options(SECURE)
    consumer = config.kafka_python("consumer")
    assert consumer["bootstrap_servers"] == ["b1:9093", "b2:9093"]
    assert consumer["sasl_plain_password"] == "s3cret"
    assert consumer["ssl_check_hostname"] is False
    assert consumer["request_timeout_ms"] == 40000
    assert consumer["fetch_max_wait_ms"] == 200
    assert "acks" not in consumer and "subscribe" not in consumer
    producer = config.kafka_python("producer")
    assert producer["acks"] == "all" and "fetch_max_wait_ms" not in producer
    admin = config.kafka_python("admin")
    assert "acks" not in admin and admin["security_protocol"] == "SASL_SSL"
    assert config.bootstrap_servers == "b1:9093,b2:9093" and config.data_client == "confluent"


def test_option_keys_are_case_insensitive() -> None:
    config = KafkaClientConfig.from_spark_options({"KAFKA.Bootstrap.Servers": "h:1", "KafkaClient": "Kafka-Python"})
    assert config.kafka_python("consumer") == {"bootstrap_servers": ["h:1"]}
    assert config.data_client == "kafka-python"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kafka.sasl.jaas.config": "x"}, "unknown"),
        ({"kafka.request.timeout.ms": "soon"}, "expects a int"),
        ({"kafka.ssl.check.hostname": "yes"}, "expects a bool"),
        ({"kafka.ssl.context": "x"}, "Python object"),
        ({"kafka.bootstrap.servers": None, "kafka.security.protocol": "SSL"}, "bootstrap.servers is required"),
        ({"kafka.bootstrap.servers": " , "}, "empty"),
        ({"kafkaClient": "auto"}, "kafkaClient must be one of"),
        # no librdkafka counterpart on the confluent data path: refused, not a switch of client
        ({"kafka.sasl.kerberos.name": "x"}, "no librdkafka counterpart"),
    ],
)
def test_bad_options_are_clear_errors(options: dict, message: str) -> None:
    given = {"kafka.bootstrap.servers": "h:1", **options}
    with pytest.raises(KafkaOptionError, match=message):
        KafkaClientConfig.from_spark_options({k: v for k, v in given.items() if v is not None})


def test_an_option_only_kafka_python_knows_needs_the_kafka_python_data_client() -> None:
    config = KafkaClientConfig.create("h:1", {"sasl_kerberos_name": "x"}, data_client="kafka-python")
    assert config.kafka_python("consumer")["sasl_kerberos_name"] == "x"
    with pytest.raises(KafkaOptionError, match="librdkafka"):
        config.rdkafka("consumer")


def test_create_takes_kafka_python_names_with_dots_or_underscores() -> None:
    config = KafkaClientConfig.create(["h1:1", "h2:2"], {"security.protocol": "SSL", "request_timeout_ms": 31000,
                                                         "api_version": "2.8.0", "ssl_check_hostname": False})
    assert config.kafka_python("admin") == {"bootstrap_servers": ["h1:1", "h2:2"], "security_protocol": "SSL",
                                            "request_timeout_ms": 31000, "api_version": (2, 8, 0),
                                            "ssl_check_hostname": False}


def test_spark_options_round_trip() -> None:
    config = KafkaClientConfig.create("h1:1,h2:2", {"security_protocol": "SSL", "ssl_check_hostname": False,
                                                    "api_version": (2, 8, 0)}, "kafka-python")
    options = config.spark_options()
    assert options == {"kafka.bootstrap.servers": "h1:1,h2:2", "kafka.security.protocol": "SSL",
                       "kafka.ssl.check.hostname": "false", "kafka.api.version": "2.8.0",
                       "kafkaClient": "kafka-python"}
    assert KafkaClientConfig.from_spark_options(options) == config
    assert pickle.loads(pickle.dumps(config)) == config  # travels to the executors


def test_rdkafka_properties_from_the_one_table() -> None:
    config = KafkaClientConfig.from_spark_options(SECURE)
    assert config.rdkafka("consumer") == {
        "bootstrap.servers": "b1:9093,b2:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "s3cret",
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
        "socket.timeout.ms": 40000,
    }
    producer = config.rdkafka("producer")
    assert producer["acks"] == "all" and "fetch.wait.max.ms" not in producer


def test_every_librdkafka_name_of_the_table_is_one_librdkafka_knows() -> None:
    from confluent_kafka import Producer

    values = {"security.protocol": "PLAINTEXT", "sasl.mechanism": "PLAIN", "isolation.level": "read_committed",
              "ssl.endpoint.identification.algorithm": "none", "acks": "all", "compression.type": "none",
              "check.crcs": True, "enable.idempotence": False, "linger.ms": 5, "delivery.timeout.ms": 30000}
    conf = {prop: values.get(prop, "1000") for prop in NAMES.values() if prop is not None}
    conf["bootstrap.servers"] = "127.0.0.1:1"
    Producer(conf).flush(0)  # an unknown property fails construction ("No such configuration property")


def test_secrets_never_in_repr() -> None:
    config = KafkaClientConfig.from_spark_options(SECURE)
    assert "s3cret" not in repr(config) and "s3cret" not in str(config)
    assert config.redacted()["sasl_plain_password"] == REDACTED
    assert config.redacted()["sasl_plain_username"] == "alice"


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
