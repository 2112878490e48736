"""SASL (PLAIN, SCRAM-SHA-256/512), TLS and ACLs enforced by Apache Kafka itself, through every client.

The test broker (``kafka_broker``, ``conftest.py``) has SASL_PLAINTEXT, SASL_SSL and SSL
listeners and Kafka's standard authorizer, denying what no ACL allows
(:mod:`tests.integration.kafka_security`). Here ``alice`` (SASL/PLAIN from the broker's JAAS
configuration, SCRAM credentials with the same password created with the Admin API) and the
client certificate's ``CN=pubsub-client`` may do everything on topics starting with
``auth-`` and nothing else. The project's own clients (admin, sink, fetch, the scripts, the
``kafka-py`` source in Spark, Spark's ``format("kafka")``) must get records through; a wrong
password or an untrusted certificate must fail with :class:`AuthenticationError` carrying
the broker's reason, and a password must appear in no exception, log record, output,
status or log file.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from scripts import publish, subscribe
from streaming.kafka.admin import ensure_topics
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.errors import AuthenticationError, KafkaConnectorError
from streaming.kafka.fetch import read_range
from streaming.kafka.offsets import OffsetRange
from streaming.kafka.sink import produce_batches
from streaming.match import MatchJob
from tests.integration.kafka_helpers import consume_all, produce
from tests.integration.kafka_security import (
    CLIENT_SUBJECT,
    Acl,
    Credentials,
    SecuredKafka,
    make_ca,
    reader_group,
)
from tests.integration.service_fixtures import Topics, notification_docs, service_settings

pytestmark = pytest.mark.integration

USER = "alice"
PREFIX = "auth-"
WRONG = "Wr0ng-never-printed-5Jx"
CLIENTS = ("kafka-python", "confluent")
#: Fail fast where a login is refused (kafka-python retries its bootstrap until this).
FAST: dict[str, Any] = {"bootstrap_timeout_ms": 3000, "max_block_ms": 3000, "request_timeout_ms": 3000}


@pytest.fixture(scope="module")
def kafka(kafka_security: SecuredKafka) -> SecuredKafka:
    """The secured broker with ``alice`` and the client certificate allowed the ``auth-`` topics
    (and the group the project's librdkafka readers look up)."""
    kafka_security.plain_user(USER)
    for principal in (f"User:{USER}", f"User:{CLIENT_SUBJECT}"):
        kafka_security.grant(principal, [Acl("all", "topic", PREFIX, "prefixed"),
                                         Acl("describe", "group", reader_group())])
    return kafka_security


@pytest.fixture(scope="module")
def alice(kafka: SecuredKafka) -> Credentials:
    return kafka.users[USER]


def one_record(value: bytes) -> Iterator[pa.RecordBatch]:
    return iter([pa.RecordBatch.from_pylist([{"value": value}])])


def write(config: KafkaClientConfig, values: list[bytes]) -> str:
    """A new ``auth-`` topic holding ``values`` (one produce request each), written with ``config``."""
    topic = f"{PREFIX}{uuid.uuid4().hex[:12]}"
    ensure_topics(config, {topic: 1})
    for value in values:
        produce_batches(config, topic, one_record(value))
    return topic


CASES = [("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
         ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512"), ("SSL", None)]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(("listener", "mechanism"), CASES)
def test_a_record_round_trip_through_an_authenticating_broker(
    kafka: SecuredKafka, alice: Credentials, listener: str, mechanism: str | None, client: str
) -> None:
    config = kafka.config(listener, alice, mechanism or "", client)
    values = [b"a", b"bb", b"ccc"]
    topic = write(config, values)  # admin (kafka-python), then the data-path client
    fetched = [v for b in read_range(config, OffsetRange(topic, 0, 0, 3), timeout_s=60)
               for v in b.column("value").to_pylist()]
    assert fetched == values  # the data-path client
    assert [r.value for r in consume_all(config, topic, min_records=3)] == values  # kafka-python


def test_the_authorizer_refuses_what_no_acl_allows(kafka: SecuredKafka, alice: Credentials) -> None:
    """alice may create ``auth-*`` topics only; the broker logs its refusal."""
    since = kafka.log_size()
    config = kafka.config("SASL_PLAINTEXT", alice, "SCRAM-SHA-512", "kafka-python")
    other = f"other-{uuid.uuid4().hex[:12]}"
    with pytest.raises(KafkaConnectorError, match="TopicAuthorizationFailed"):
        ensure_topics(config, {other: 1})
    refused = kafka.refusals(since, f"User:{USER}")
    assert any(f"operation = CREATE from host = 127.0.0.1 on resource = Topic:LITERAL:{other}" in line
               for line in refused), refused


@pytest.mark.parametrize(("listener", "mechanism"), [("SASL_PLAINTEXT", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512")])
def test_the_admin_is_a_super_user(kafka: SecuredKafka, listener: str, mechanism: str) -> None:
    """The admin (PLAIN from the JAAS configuration, SCRAM from the Admin API) holds no ACL and
    may do anything: ``super.users``."""
    config = kafka.config(listener, kafka.admin, mechanism, "kafka-python")
    topic = f"admin-{uuid.uuid4().hex[:12]}"
    assert ensure_topics(config, {topic: 1}) == {topic: 1}
    produce(config, topic, [b"v"])
    assert [r.value for r in consume_all(config, topic, min_records=1)] == [b"v"]
    assert kafka.acls_of(kafka.admin.principal) == set()


def secret_free(text: str, *secrets: str) -> bool:
    return not any(s in text for s in secrets)


@pytest.mark.parametrize(("listener", "mechanism", "client"), [
    ("SASL_PLAINTEXT", "PLAIN", "kafka-python"), ("SASL_PLAINTEXT", "SCRAM-SHA-256", "confluent"),
    ("SASL_SSL", "SCRAM-SHA-512", "kafka-python"), ("SASL_SSL", "PLAIN", "confluent")])
def test_a_wrong_password_is_refused_clearly_and_never_shown(
    kafka: SecuredKafka, listener: str, mechanism: str, client: str,
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str],
) -> None:
    config = kafka.config(listener, Credentials(USER, WRONG), mechanism, client, **FAST)
    caplog.set_level(logging.DEBUG)
    failures = []
    attempts: list[Callable[[], object]] = [lambda: produce_batches(config, "never", one_record(b"v"))]  # the data-path client
    if client == "kafka-python":  # the admin client is kafka-python's whatever the data-path client
        attempts.append(lambda: ensure_topics(config, {"never": 1}))
    for attempt in attempts:
        with pytest.raises(AuthenticationError) as failure:
            attempt()
        failures.append(failure)
        message = str(failure.value)
        assert f"Kafka at {kafka.addresses[listener]} refused the connection" in message
        assert f"sasl_mechanism={mechanism}, user '{USER}'" in message
        # the broker's own reason (Kafka's SaslServer: PLAIN and SCRAM word it differently)
        reason = "Invalid username or password" if mechanism == "PLAIN" else \
            f"invalid credentials with SASL mechanism {mechanism}"
        assert "Authentication failed" in message and reason in message, message
    out, err = capfd.readouterr()  # librdkafka logs to the process's stderr
    texts = [f"{f.value}\n{f.value!r}\n{f.getrepr()}" for f in failures] + [caplog.text, out, err, repr(config)]
    assert all(secret_free(t, WRONG) for t in texts), [t[max(0, t.find(WRONG) - 300):t.find(WRONG) + 50] for t in texts if WRONG in t][:2]


def test_a_client_without_sasl_is_refused(kafka: SecuredKafka) -> None:
    config = KafkaClientConfig.create(kafka.addresses["SASL_PLAINTEXT"], FAST, "kafka-python")
    with pytest.raises(KafkaConnectorError, match="cannot reach Kafka"):
        ensure_topics(config, {"never": 1})


@pytest.mark.parametrize("client", CLIENTS)
def test_an_untrusted_broker_certificate_is_refused(kafka: SecuredKafka, alice: Credentials, client: str,
                                                    tmp_path: Path) -> None:
    other_ca = make_ca(tmp_path, "other-ca")  # a CA that did not sign the broker's certificate
    config = kafka.config("SASL_SSL", alice, "SCRAM-SHA-512", client, ssl_cafile=str(other_ca.cert), **FAST)
    with pytest.raises(AuthenticationError, match="refused the connection .*security_protocol=SASL_SSL.*"
                                                  "TLS handshake failed|certificate verify failed"):
        produce_batches(config, "never", one_record(b"v"))


@pytest.mark.parametrize("client", CLIENTS)
def test_a_client_without_a_certificate_is_refused_by_the_ssl_listener(kafka: SecuredKafka, client: str) -> None:
    options = {"security_protocol": "SSL", "ssl_cafile": str(kafka.certificates.ca.cert), **FAST}
    config = KafkaClientConfig.create(kafka.addresses["SSL"], options, client)
    with pytest.raises(AuthenticationError, match="refused the connection .*security_protocol=SSL") as refused:
        produce_batches(config, "never", one_record(b"v"))
    assert "certificate" in str(refused.value).lower(), refused.value  # the TLS alert of the broker


def test_the_scripts_work_through_sasl_ssl(kafka: SecuredKafka, alice: Credentials, tmp_path: Path) -> None:
    config = kafka.config("SASL_SSL", alice, "SCRAM-SHA-256", "kafka-python")
    subs, events = write(config, []), write(config, [])
    flags = ["--bootstrap", config.bootstrap_servers, "--set", f"kafka.subscriptions_topic={subs}",
             "--set", f"kafka.events_topic={events}"]
    flags += [a for k, v in config.kafka_python("producer").items() if k != "bootstrap_servers"
              for a in ("--set", f"kafka.client.{k}={v}")]
    assert subscribe.main([*flags, "add", "--id", "a", "--expr", "price < 5"]) == 0
    events_file = tmp_path / "events.jsonl"
    events_file.write_text('{"price": 1}\n{"price": 9}\n')
    assert publish.main([*flags, "--file", str(events_file)]) == 0
    assert [r.key for r in consume_all(config, subs, min_records=1)] == [b"a"]
    assert [json.loads(r.body)["price"] for r in consume_all(config, events, min_records=2)] == [1, 9]
    wrong = [a.replace(alice.password, WRONG) for a in flags] + [
        a for k, v in FAST.items() for a in ("--set", f"kafka.client.{k}={v}")]
    with pytest.raises(AuthenticationError, match="SCRAM-SHA-256"):
        subscribe.main([*wrong, "add", "--id", "b", "--expr", "price < 5"])


def test_spark_java_connector_reads_through_sasl_ssl(spark: Any, kafka: SecuredKafka, alice: Credentials) -> None:
    """Spark's ``format("kafka")`` with :meth:`KafkaClientConfig.java_options` (JAAS, PEM trust store).

    The whole service through SASL_SSL is
    :func:`test_the_service_matches_through_sasl_ssl`."""
    config = kafka.config("SASL_SSL", alice, "SCRAM-SHA-512", "confluent")
    values = [b"j1", b"j2"]
    topic = write(config, values)
    df = spark.read.format("kafka").options(**config.java_options("consumer")).option("subscribe", topic).load()
    assert [bytes(r.value) for r in df.orderBy("offset").collect()] == values


def test_the_service_refused_by_kafka_says_so_and_shows_no_secret(kafka: SecuredKafka, tmp_path: Path) -> None:
    status_file, logs = tmp_path / "status.json", tmp_path / "logs"
    flags = ["--set", f"kafka.bootstrap_servers={kafka.addresses['SASL_SSL']}",
             "--set", f"spark.checkpoint_dir={tmp_path / 'ck'}",
             "--set", f"status.status_file={status_file}", "--set", f"status.log_dir={logs}",
             "--set", "kafka.client.security_protocol=SASL_SSL",
             "--set", f"kafka.client.ssl_cafile={kafka.certificates.ca.cert}",
             "--set", "kafka.client.sasl_mechanism=SCRAM-SHA-512",
             "--set", f"kafka.client.sasl_plain_username={USER}", "--set", f"kafka.client.sasl_plain_password={WRONG}",
             "--set", "kafka.client.bootstrap_timeout_ms=5000"]

    def streaming(*command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "streaming", *flags, *command], capture_output=True,
                              text=True, timeout=timeout)

    config = streaming("config")
    assert config.returncode == 0
    assert json.loads(config.stdout)["kafka"]["client"]["sasl_plain_password"] == "***"
    run = streaming("run", timeout=240)
    assert run.returncode != 0 and "refused the connection" in run.stderr + run.stdout
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in run.stderr + run.stdout  # Kafka's reason
    status = streaming("status", "--json")
    assert json.loads(status.stdout)["state"] == "failed"
    outputs = [config.stdout, config.stderr, run.stdout, run.stderr, status.stdout, status.stderr]
    files = [status_file, *sorted(p for p in logs.rglob("*") if p.is_file())]
    assert any(p.name == "service.log" for p in files)
    for text in [*outputs, *(p.read_text(errors="replace") for p in files)]:
        assert secret_free(text, WRONG)


def test_the_service_matches_through_sasl_ssl(
    spark: Any, kafka: SecuredKafka, alice: Credentials, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """The match job on the test Spark session as alice, every topic behind SASL_SSL
    (SCRAM-SHA-512), with the default connector: a subscription, events, a notification, an error
    record; no password in any of them, nor in the broker's log."""
    config = kafka.config("SASL_SSL", alice, "SCRAM-SHA-512", "confluent")
    since = kafka.log_size()
    suffix = uuid.uuid4().hex[:12]
    topics = Topics(*(f"{PREFIX}{name}-{suffix}" for name in Topics._fields))
    ensure_topics(config, dict.fromkeys(topics, 1))
    settings = service_settings(topics, tmp_path, config.bootstrap_servers)
    settings = settings.replace(kafka={"client": {k: v for k, v in config.options if k != "bootstrap_servers"}})
    assert settings.kafka.client_config().kafka_python("admin") == config.kafka_python("admin")
    caplog.set_level(logging.INFO)
    sub = {"op": "upsert", "id": "cheap", "expr": "price < 5"}
    produce(config, topics.subscriptions, [("cheap", json.dumps(sub)), ("bad", b'{"op": "upsert", "id": "bad"')])
    query = MatchJob(settings, spark, config).start()
    try:
        query.processAllAvailable()
        produce(config, topics.events, [json.dumps({"price": p}) for p in (1, 9, 3)])
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    notified = notification_docs(config, topics.notifications, min_records=2)
    assert sorted((d["subscription"], d["offset"]) for d in notified) == [("cheap", 0), ("cheap", 2)]
    errors = consume_all(config, topics.errors, min_records=1)
    assert [json.loads(e.body)["key"] for e in errors] == ["bad"]
    texts = [caplog.text, *(r.body.decode() for r in errors), *(json.dumps(d) for d in notified), kafka.log_text()]
    assert all(secret_free(t, alice.password, kafka.admin.password) for t in texts)
    assert kafka.refusals(since, f"User:{USER}") == []  # its ACLs are all the job needs
