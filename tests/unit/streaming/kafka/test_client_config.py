"""One Kafka client configuration: its kafka-python, librdkafka and Spark spellings, checks, redaction."""

from __future__ import annotations

import logging
import pickle

import pytest

from streaming.kafka.client_config import NAMES, REDACTED, KafkaClientConfig, redact
from streaming.kafka.errors import KafkaOptionError
from streaming.kafka.refusals import refusal

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
# the consumer settings of SECURE in the Java client's and in librdkafka's names
JAVA_CONSUMER = {
    "kafka.bootstrap.servers": "b1:9093,b2:9093",
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "PLAIN",
    "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                              'username="alice" password="s3cret";',
    "kafka.ssl.truststore.location": "/etc/ca.pem",
    "kafka.ssl.truststore.type": "PEM",
    "kafka.ssl.endpoint.identification.algorithm": "",
    "kafka.request.timeout.ms": "40000",
    "kafka.fetch.max.wait.ms": "200",
}
RDKAFKA_CONSUMER = {
    "bootstrap.servers": "b1:9093,b2:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "alice",
    "sasl.password": "s3cret",
    "ssl.ca.location": "/etc/ca.pem",
    "ssl.endpoint.identification.algorithm": "none",
    "socket.timeout.ms": 40000,
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


@pytest.mark.parametrize(
    ("spelling", "consumer", "acks", "fetch_wait"),
    [("rdkafka", RDKAFKA_CONSUMER, "acks", "fetch.wait.max.ms"),
     ("java_options", JAVA_CONSUMER, "kafka.acks", "kafka.fetch.max.wait.ms")],
)
def test_client_properties_from_the_one_table(spelling: str, consumer: dict, acks: str, fetch_wait: str) -> None:
    """librdkafka's and the Java client's names: the consumer's settings, and the producer's acks
    (the consumer's fetch wait left out)."""
    options = getattr(KafkaClientConfig.from_spark_options(SECURE), spelling)
    assert options("consumer") == consumer
    producer = options("producer")
    assert producer[acks] == "all" and fetch_wait not in producer


def test_every_librdkafka_name_of_the_table_is_one_librdkafka_knows() -> None:
    from confluent_kafka import Producer

    values = {"security.protocol": "PLAINTEXT", "sasl.mechanism": "PLAIN", "isolation.level": "read_committed",
              "ssl.endpoint.identification.algorithm": "none", "acks": "all", "compression.type": "none",
              "check.crcs": True, "enable.idempotence": False, "linger.ms": 5, "delivery.timeout.ms": 30000}
    conf = {names.rdkafka: values.get(names.rdkafka, "1000") for names in NAMES.values() if names.rdkafka}
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


def test_java_options_leave_the_client_choice_out_and_redact_the_login() -> None:
    producer = KafkaClientConfig.from_spark_options(SECURE).java_options("producer")
    assert "kafkaClient" not in producer and REDACTED in redact(producer).values()


def test_java_options_quote_the_jaas_values_and_pick_the_login_module() -> None:
    config = KafkaClientConfig.create("h:1", {"sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": 'a"b',
                                              "sasl_plain_password": "c\\d", "max_request_size": 2048,
                                              "api_version": "2.8.0", "ssl_check_hostname": True})
    options = config.java_options("producer")
    assert options["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="a\\"b" password="c\\\\d";')
    assert options["kafka.max.request.size"] == "2048" and "kafka.message.max.bytes" not in options
    assert options["kafka.ssl.endpoint.identification.algorithm"] == "https"
    assert not any("api" in key for key in options)  # the Java client negotiates the version itself


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ssl_certfile": "/c.pem", "ssl_keyfile": "/k.pem"}, r"\['ssl_certfile', 'ssl_keyfile'\].*Java"),
        ({"ssl_crlfile": "/crl.pem"}, "Java"),
        ({"sasl_kerberos_name": "x"}, "Java"),  # kafka-python only, in no table column
        ({"sasl_mechanism": "GSSAPI", "sasl_plain_username": "u"}, "takes no user name"),
    ],
)
def test_java_options_refuse_what_the_java_client_cannot_express(options: dict, message: str) -> None:
    config = KafkaClientConfig.create("h:1", options, data_client="kafka-python")
    with pytest.raises(KafkaOptionError, match=message):
        config.java_options("consumer")


class _Recorder:
    """Records the calls of Spark's reader and writer builders (our option plumbing only)."""

    def __init__(self) -> None:
        self.source = ""
        self.given: dict[str, str] = {}

    @property
    def readStream(self) -> _Recorder:  # noqa: N802 - SparkSession's name
        return self

    @property
    def write(self) -> _Recorder:
        return self

    def format(self, source: str) -> _Recorder:
        self.source = source
        return self

    def options(self, **options: str) -> _Recorder:
        self.given.update(options)
        return self

    def option(self, key: str, value: str) -> _Recorder:
        self.given[key] = value
        return self

    def mode(self, _: str) -> _Recorder:
        return self

    def load(self) -> _Recorder:
        return self

    def save(self) -> None:
        return None


@pytest.mark.parametrize("java", [False, True])
def test_read_stream_and_write_batch_pass_each_connector_its_spelling(java: bool) -> None:
    from streaming.kafka import read_stream, write_batch

    config = KafkaClientConfig.from_spark_options(SECURE)
    reader, writer = _Recorder(), _Recorder()
    read_stream(reader, config, ["events", "more"], use_java_connector=java)  # type: ignore[arg-type]  # a recorder
    write_batch(writer, config, "out", use_java_connector=java)  # type: ignore[arg-type]  # a recorder
    client = {k: v for k, v in reader.given.items() if k.startswith("kafka.") or k == "kafkaClient"}
    assert reader.given["subscribe"] == "events,more" and writer.given["topic"] == "out"
    if java:
        assert reader.source == writer.source == "kafka"
        assert client == config.java_options("consumer")
        assert "kafka.sasl.jaas.config" in writer.given and "kafka.sasl.plain.password" not in writer.given
    else:
        assert reader.source == writer.source == "kafka-py"
        assert client == config.spark_options() and writer.given["kafka.sasl.plain.password"] == "s3cret"


def test_kafka_python_debug_records_never_show_a_configured_secret(caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python logs its admin configuration and every request (SASL/PLAIN's included) at DEBUG."""
    KafkaClientConfig.from_spark_options({**SECURE, "kafka.sasl.plain.password": "Pw-in-a-log-9"})
    caplog.set_level(logging.DEBUG)
    logging.getLogger("kafka.admin.client").debug("configuration: %s", {"sasl_plain_password": "Pw-in-a-log-9"})
    logging.getLogger("kafka.net.connection").debug("Request %d: %s", 3, b"alice\x00alice\x00Pw-in-a-log-9")
    logging.getLogger("kafka.net.connection").debug("Request %d: %s", 4, "nothing secret")
    assert "Pw-in-a-log-9" not in caplog.text
    assert caplog.text.count(REDACTED) == 2 and "Request 4: nothing secret" in caplog.text


def test_a_refusal_names_the_login_but_not_the_secret() -> None:
    config = KafkaClientConfig.from_spark_options(SECURE)
    message = str(refusal(config, "Authentication failed: Invalid username or password"))
    assert message == ("Kafka at b1:9093,b2:9093 refused the connection (security_protocol=SASL_SSL, "
                       "sasl_mechanism=PLAIN, user 'alice'): Authentication failed: Invalid username or password")
