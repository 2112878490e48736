"""The kafka-python 3.0 transport fix: bytes read before a close reach the connection first."""

from __future__ import annotations

import asyncio
from typing import Any

import kafka
import pytest
from kafka.errors import KafkaConnectionError

from streaming.kafka import kafka_python_fix


class FakeTransport:
    """What the read loop touches of a ``KafkaTCPTransport``: reads scripted as ``_sock_recv`` results."""

    def __init__(self, reads: list[tuple[bytes, Exception | None]]) -> None:
        self.reads = reads
        self._read, self._closed = True, False
        self._sock = object()
        self.events: list[Any] = []
        transport = self

        class Net:
            async def wait_read(self, sock: object) -> None:
                return None

        class Protocol:
            _sensors = None

            def data_received(self, data: bytes) -> None:
                transport.events.append(("data", data))

        self._net, self._protocol = Net(), Protocol()

    def _sock_recv(self) -> tuple[bytes, Exception | None]:
        return self.reads.pop(0)

    def abort(self, error: Exception | None = None) -> None:
        self.events.append(("abort", error))
        self._closed = True


def read(reads: list[tuple[bytes, Exception | None]]) -> list[Any]:
    transport = FakeTransport(reads)
    asyncio.run(kafka_python_fix._read_from_sock(transport))
    return transport.events


def test_the_bytes_read_with_a_close_reach_the_connection_before_it_is_aborted() -> None:
    closed = KafkaConnectionError("socket disconnected")
    # a refused login's answer and the broker's close, read together; the next read finds the close again
    assert read([(b"answer", closed), (b"", closed)]) == [("data", b"answer"), ("abort", closed)]


def test_a_close_without_bytes_aborts_at_once_and_bytes_alone_go_on() -> None:
    closed = KafkaConnectionError("socket disconnected")
    assert read([(b"a", None), (b"b", None), (b"", closed)]) == [("data", b"a"), ("data", b"b"), ("abort", closed)]


def test_apply_replaces_the_read_loop_of_the_affected_versions_only() -> None:
    from kafka.net.transport import KafkaSSLTransport, KafkaTCPTransport

    low, high = kafka_python_fix.AFFECTED
    installed = kafka_python_fix._version(kafka.__version__)
    if not low <= installed <= high:
        pytest.skip(f"kafka-python {kafka.__version__} is not one of the affected versions")
    assert kafka_python_fix.apply()
    assert KafkaTCPTransport._read_from_sock is kafka_python_fix._read_from_sock
    assert KafkaSSLTransport._read_from_sock is kafka_python_fix._read_from_sock  # inherited
