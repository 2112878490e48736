"""SASL (PLAIN, SCRAM-SHA-256/512) and TLS through both Kafka clients, against brokers that require them.

The embedded Tansu cannot authenticate a client nor serve TLS (docs/kafka.md,
"Authentication"), so each broker here is a plaintext Tansu behind
:class:`~tests.integration.kafka_auth_front.AuthFront`: Tansu advertises the front's address,
so every connection (bootstrap and per broker) goes through the front, which requires the
SASL login (``SASL_PLAINTEXT``, ``SASL_SSL``) and serves TLS with a certificate made here
(``SSL``, ``SASL_SSL``). The project's own clients (admin, sink, fetch, the scripts, the
``kafka-py`` source in Spark) must get records through; a wrong password or an untrusted
certificate must fail with :class:`AuthenticationError`, and the password must appear in no
exception, log record, output, status or log file.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pytest

from scripts import publish, subscribe
from streaming.kafka.admin import ensure_topics
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.errors import AuthenticationError, KafkaConnectorError
from streaming.kafka.fetch import close_consumers, read_range
from streaming.kafka.offsets import OffsetRange
from streaming.kafka.sink import close_producers, produce_batches
from streaming.match_job import MatchJob
from tests.integration.kafka_auth_front import (
    MECHANISMS,
    AuthFront,
    broker_behind,
    make_certificates,
    server_context,
)
from tests.integration.kafka_helpers import consume_all, produce
from tests.integration.service_fixtures import Topics, notification_docs, service_settings

pytestmark = pytest.mark.integration

USER = "alice"
SECRET = "Zq9-never-printed-7Hk"
WRONG = "Wr0ng-never-printed-5Jx"
CLIENTS = ("kafka-python", "confluent")
#: Fail fast where a login is refused (kafka-python retries its bootstrap until this).
FAST: dict[str, Any] = {"bootstrap_timeout_ms": 3000, "max_block_ms": 3000, "request_timeout_ms": 3000}


class Endpoint(NamedTuple):
    front: AuthFront
    protocol: str
    cafile: Path | None


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """``(ca.pem, server.pem, server.key)`` made with ``openssl`` for this module."""
    if shutil.which("openssl") is None:
        pytest.skip("the TLS tests need the openssl binary to make a certificate")
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Callable[[str], Endpoint]]:
    """``endpoint(security_protocol)``: a Tansu behind a front requiring that protocol (one each, on first use)."""
    started: dict[str, Endpoint] = {}
    with ExitStack() as stack:

        def get(protocol: str) -> Endpoint:
            if protocol not in started:
                context, cafile = None, None
                if "SSL" in protocol:
                    cafile, cert, key = request.getfixturevalue("certificates")
                    context = server_context(cert, key)
                front = AuthFront({USER: SECRET}, sasl=protocol.startswith("SASL"), ssl_context=context)
                log = tmp_path_factory.mktemp(f"tansu-{protocol.lower()}") / "tansu.log"
                front.start(stack.enter_context(broker_behind(front.address, log)))
                stack.callback(front.stop)
                started[protocol] = Endpoint(front, protocol, cafile)
            return started[protocol]

        yield get
        close_consumers()  # this process's cached data-path clients go before their brokers
        close_producers()


def client_config(end: Endpoint, mechanism: str | None, client: str, password: str = SECRET,
                  **extra: Any) -> KafkaClientConfig:
    options: dict[str, Any] = {"security_protocol": end.protocol, **extra}
    if mechanism is not None:
        options.update(sasl_mechanism=mechanism, sasl_plain_username=USER, sasl_plain_password=password)
    if end.cafile is not None:
        options.setdefault("ssl_cafile", str(end.cafile))
    return KafkaClientConfig.create(end.front.address, options, client)


def one_record(value: bytes) -> Iterator[pa.RecordBatch]:
    return iter([pa.RecordBatch.from_pylist([{"value": value}])])


def write(config: KafkaClientConfig, values: list[bytes]) -> str:
    """A new topic holding ``values`` (one produce request each), written with ``config``."""
    topic = f"auth-{uuid.uuid4().hex[:12]}"
    ensure_topics(config, {topic: 1})
    for value in values:
        produce_batches(config, topic, one_record(value))
    return topic


CASES = [("SASL_PLAINTEXT", m) for m in MECHANISMS] + [
    ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512"), ("SSL", None)]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(("protocol", "mechanism"), CASES)
def test_a_record_round_trip_through_an_authenticating_broker(
    endpoint: Callable[[str], Endpoint], protocol: str, mechanism: str | None, client: str
) -> None:
    end = endpoint(protocol)
    config = client_config(end, mechanism, client)
    values = [b"a", b"bb", b"ccc"]
    topic = write(config, values)  # admin (kafka-python), then the data-path client
    fetched = [v for b in read_range(config, OffsetRange(topic, 0, 0, 3), timeout_s=60)
               for v in b.column("value").to_pylist()]
    assert fetched == values  # the data-path client
    assert [r.value for r in consume_all(config, topic, min_records=3)] == values  # kafka-python
    if mechanism is not None:
        assert (mechanism, USER) in end.front.authenticated


def secret_free(text: str, *secrets: str) -> bool:
    return not any(s in text for s in secrets)


@pytest.mark.parametrize(("protocol", "mechanism", "client"), [
    ("SASL_PLAINTEXT", "PLAIN", "kafka-python"), ("SASL_PLAINTEXT", "SCRAM-SHA-256", "confluent"),
    ("SASL_SSL", "SCRAM-SHA-512", "kafka-python"), ("SASL_SSL", "PLAIN", "confluent")])
def test_a_wrong_password_is_refused_clearly_and_never_shown(
    endpoint: Callable[[str], Endpoint], protocol: str, mechanism: str, client: str,
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str],
) -> None:
    end = endpoint(protocol)
    config = client_config(end, mechanism, client, password=WRONG, **FAST)
    caplog.set_level(logging.DEBUG)
    refused_before = len(end.front.refused)
    failures = []
    attempts: list[Callable[[], object]] = [lambda: produce_batches(config, "never", one_record(b"v"))]  # the data-path client
    if client == "kafka-python":  # the admin client is kafka-python's whatever the data-path client
        attempts.append(lambda: ensure_topics(config, {"never": 1}))
    for attempt in attempts:
        with pytest.raises(AuthenticationError) as failure:
            attempt()
        failures.append(failure)
        message = str(failure.value)
        assert f"Kafka at {end.front.address} refused the connection" in message
        assert f"sasl_mechanism={mechanism}, user '{USER}'" in message
        assert "Authentication failed" in message  # the broker's own reason
    assert len(end.front.refused) > refused_before
    out, err = capfd.readouterr()  # librdkafka logs to the process's stderr
    texts = [f"{f.value}\n{f.value!r}\n{f.getrepr()}" for f in failures] + [caplog.text, out, err, repr(config)]
    assert all(secret_free(t, WRONG) for t in texts), [t[max(0, t.find(WRONG) - 300):t.find(WRONG) + 50] for t in texts if WRONG in t][:2]


def test_a_client_without_sasl_is_refused(endpoint: Callable[[str], Endpoint]) -> None:
    end = endpoint("SASL_PLAINTEXT")
    config = KafkaClientConfig.create(end.front.address, FAST, "kafka-python")
    with pytest.raises(KafkaConnectorError, match="cannot reach Kafka"):
        ensure_topics(config, {"never": 1})
    assert any("before authentication" in r for r in end.front.refused)


@pytest.mark.parametrize("client", CLIENTS)
def test_an_untrusted_broker_certificate_is_refused(
    endpoint: Callable[[str], Endpoint], client: str, tmp_path: Path
) -> None:
    end = endpoint("SSL")
    other_ca, _, _ = make_certificates(tmp_path)  # a CA that did not sign the front's certificate
    config = client_config(end, None, client, ssl_cafile=str(other_ca), **FAST)
    with pytest.raises(AuthenticationError, match="refused the connection .*security_protocol=SSL"):
        produce_batches(config, "never", one_record(b"v"))


def test_the_scripts_work_through_sasl_ssl(endpoint: Callable[[str], Endpoint], tmp_path: Path) -> None:
    end = endpoint("SASL_SSL")
    config = client_config(end, "SCRAM-SHA-256", "kafka-python")
    subs, events = write(config, []), write(config, [])
    flags = ["--bootstrap", end.front.address, "--set", f"kafka.subscriptions_topic={subs}",
             "--set", f"kafka.events_topic={events}"]
    flags += [a for k, v in config.kafka_python("producer").items() if k != "bootstrap_servers"
              for a in ("--set", f"kafka.client.{k}={v}")]
    assert subscribe.main([*flags, "add", "--id", "a", "--expr", "price < 5"]) == 0
    events_file = tmp_path / "events.jsonl"
    events_file.write_text('{"price": 1}\n{"price": 9}\n')
    assert publish.main([*flags, "--file", str(events_file)]) == 0
    assert [r.key for r in consume_all(config, subs, min_records=1)] == [b"a"]
    assert [json.loads(r.body)["price"] for r in consume_all(config, events, min_records=2)] == [1, 9]
    wrong = [a.replace(SECRET, WRONG) for a in flags] + [a for k, v in FAST.items() for a in ("--set", f"kafka.client.{k}={v}")]
    with pytest.raises(AuthenticationError, match="SCRAM-SHA-256"):
        subscribe.main([*wrong, "add", "--id", "b", "--expr", "price < 5"])


def test_spark_java_connector_reads_through_sasl_ssl(spark: Any, endpoint: Callable[[str], Endpoint]) -> None:
    """Spark's ``format("kafka")`` with :meth:`KafkaClientConfig.java_options` (JAAS, PEM trust store).

    The ``kafka-py`` source's way through SASL_SSL is :func:`test_the_service_matches_through_sasl_ssl`."""
    config = client_config(endpoint("SASL_SSL"), "SCRAM-SHA-512", "confluent")
    reader = spark.read.format("kafka").options(**config.java_options("consumer"))
    try:
        reader.option("subscribe", "probe").load()
    except Exception as exc:  # noqa: BLE001 - the connector jar is not installed here
        if "Failed to find data source: kafka" not in str(exc):
            raise
        pytest.skip("Spark's Kafka connector (spark-sql-kafka) is not installed")
    values = [b"j1", b"j2"]
    topic = write(config, values)
    df = reader.option("subscribe", topic).load()
    assert [bytes(r.value) for r in df.orderBy("offset").collect()] == values


def test_the_service_refused_by_kafka_says_so_and_shows_no_secret(
    endpoint: Callable[[str], Endpoint], tmp_path: Path
) -> None:
    end = endpoint("SASL_SSL")
    status_file, logs = tmp_path / "status.json", tmp_path / "logs"
    flags = ["--set", f"kafka.bootstrap_servers={end.front.address}", "--set", f"spark.checkpoint_dir={tmp_path / 'ck'}",
             "--set", f"status.status_file={status_file}", "--set", f"status.log_dir={logs}",
             "--set", "kafka.client.security_protocol=SASL_SSL", "--set", f"kafka.client.ssl_cafile={end.cafile}",
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
    status = streaming("status", "--json")
    assert json.loads(status.stdout)["state"] == "failed"
    outputs = [config.stdout, config.stderr, run.stdout, run.stderr, status.stdout, status.stderr]
    files = [status_file, *sorted(p for p in logs.rglob("*") if p.is_file())]
    assert any(p.name == "service.log" for p in files)
    for text in [*outputs, *(p.read_text(errors="replace") for p in files)]:
        assert secret_free(text, WRONG)


def test_the_service_matches_through_sasl_ssl(
    spark: Any, endpoint: Callable[[str], Endpoint], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The match job on the test Spark session, every topic behind SASL_SSL (SCRAM-SHA-512):
    a subscription, events, a notification, an error record; the password in none of them."""
    config = client_config(endpoint("SASL_SSL"), "SCRAM-SHA-512", "confluent")
    suffix = uuid.uuid4().hex[:12]
    topics = Topics(*(f"{name}-{suffix}" for name in Topics._fields))
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
    texts = [caplog.text, *(r.body.decode() for r in errors), *(json.dumps(d) for d in notified)]
    assert all(secret_free(t, SECRET) for t in texts)
