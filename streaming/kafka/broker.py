"""Embedded broker: Apache Kafka's own, a single-node KRaft broker and controller on loopback.

It is the default broker for development, tests and demos; production points the service
at a Kafka cluster instead. It runs from the ``kafka-broker`` jar set (:mod:`streaming.jars`,
resolved by ``make setup``) in a JVM of its own, started in its own session and ended when
its owner dies (:func:`streaming.instance.spawn`). Its log directory is formatted on the
first start (``kafka-storage format``); with a data directory it is kept there, so topics,
offsets and consumer groups survive a restart, a crash or a kill; without one it lives in a
temporary directory removed at :meth:`EmbeddedBroker.stop`.

A data directory holds::

    lock               flock of the running broker (a second one on the directory is refused)
    pids               its JVM with start time: ended by the next start if it outlived its owner
    address            host:port of the PLAINTEXT listener of the last run, reused when free
    server.properties  the broker's configuration of the last run (written at each start)
    kraft/             Kafka's log directory (topics and metadata)
    kafka.log          the broker's output (conf/kafka-log4j2.properties)

Besides PLAINTEXT, a broker can open more listeners (``listeners``: name to security
protocol, e.g. ``{"SASL_SSL": "SASL_SSL"}``) and take any broker setting
(``properties``): the tests run SASL/SCRAM, SASL/PLAIN, TLS and the standard authorizer
this way (docs/kafka.md).
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from streaming.config import PROJECT_ROOT
from streaming.instance import ChildServer, DirLock, PidRecord, free_port, free_ports, spawn
from streaming.jars import JarsError, JavaNotFoundError, classpath, java_binary
from streaming.kafka.errors import BrokerError

log = logging.getLogger(__name__)

_RUNNING: set[EmbeddedBroker] = set()  # strong references: atexit must reach them
ADDRESS_FILE = "address"
LOG4J_CONF = PROJECT_ROOT / "conf" / "kafka-log4j2.properties"
NODE_ID = 1
#: JVM options of the broker: a small heap is plenty on loopback; Kafka's own scripts use 1 GB.
#: The heap starts at its largest: from 64 MB, G1 kept a young generation of a few MB and
#: collected it over and over while the match tasks read and wrote (docs/e2e.md). It compiles
#: with C1 only: C2's compilations were about half the CPU of a broker minutes old (2.5 s
#: to start against 4.3, 4.4 µs per event served against 7.3-8.1; scripts.bench.e2e_broker).
JVM_OPTIONS = ("-Xms512m", "-Xmx512m", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
               "-XX:TieredStopAtLevel=1")

#: Settings of a single-node broker (one copy of everything, no wait for a group's members).
#: Records up to 20 MiB are taken (Kafka's default is 1 MiB), so that the service's own
#: limits (``[limits] event_bytes``) decide about an oversized event, with an error record.
SINGLE_NODE: dict[str, str] = {
    "message.max.bytes": str(20 * 2**20),
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
}


def recorded_address(data_dir: str | os.PathLike[str]) -> str:
    """``host:port`` of the last broker started on ``data_dir`` ("" when none was)."""
    try:
        return (Path(data_dir) / ADDRESS_FILE).read_text().strip()
    except OSError:
        return ""


def broker_command() -> list[str]:
    """``java ... -cp <kafka-broker jars>``: the JVM of the broker, without its main class.

    Raises
    ------
    BrokerError
        If Java is missing or the broker's jars are not resolved (``make setup``).
    """
    try:
        return [java_binary(), *JVM_OPTIONS, f"-Dlog4j2.configurationFile=file:{LOG4J_CONF}",
                "-cp", os.pathsep.join(classpath("kafka-broker"))]
    except (JarsError, JavaNotFoundError) as exc:
        raise BrokerError(f"the embedded broker cannot start: {exc}") from None


def _port_free(host: str, port: int) -> bool:
    """Whether a listener could bind ``port`` now: as Kafka binds, with ``SO_REUSEADDR``, so that
    the connections of the last run still in TIME_WAIT do not move the broker to another port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


class EmbeddedBroker(ChildServer):
    """An Apache Kafka broker process listening on ``127.0.0.1`` (context manager).

    Parameters
    ----------
    port : int, optional
        Port of the PLAINTEXT listener; when omitted, the port of the data directory's last
        run if it is free, else any free one.
    log_path : str or Path, optional
        File receiving the broker's output; when omitted, ``kafka.log`` in the data directory.
    start_timeout_s : float
        How long :meth:`start` waits for the broker to answer a metadata request.
    data_dir : str or Path, optional
        Keep the topics on disk in this directory (see the module's docstring); in a
        temporary directory, removed at :meth:`stop`, when omitted.
    listeners : Mapping[str, str], optional
        More listeners, name to security protocol (``SASL_PLAINTEXT``, ``SSL``,
        ``SASL_SSL``), each on a free port (:meth:`address`).
    properties : Mapping[str, str], optional
        Broker settings over the single-node defaults (:data:`SINGLE_NODE`).

    Examples
    --------
    >>> with EmbeddedBroker() as broker:  # doctest: +SKIP
    ...     ensure_topics(KafkaClientConfig.create(broker.bootstrap_servers), {"events": 2})
    """

    host = "127.0.0.1"

    def __init__(
        self,
        port: int | None = None,
        log_path: str | os.PathLike[str] | None = None,
        start_timeout_s: float = 120.0,
        data_dir: str | os.PathLike[str] | None = None,
        listeners: Mapping[str, str] | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        self._port = port
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._log_path = Path(log_path) if log_path is not None else None
        self._start_timeout_s = start_timeout_s
        self._listeners = dict(listeners or {})
        self._properties = dict(properties or {})
        self._ports: dict[str, int] = {}
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._lock: DirLock | None = None
        self._tmp_dir: Path | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:PORT"`` of the running broker's PLAINTEXT listener."""
        if self._port is None:
            raise BrokerError("the broker has not been started")
        return f"{self.host}:{self._port}"

    def address(self, listener: str) -> str:
        """``"127.0.0.1:PORT"`` of one of the ``listeners`` given at construction."""
        if listener not in self._ports:
            raise BrokerError(f"no listener {listener!r} (the broker has {sorted(self._ports)})")
        return f"{self.host}:{self._ports[listener]}"

    @property
    def log_path(self) -> Path | None:
        """File holding the broker's output."""
        return self._log_path

    @property
    def data_dir(self) -> Path | None:
        """Directory keeping the topics (``None``: a temporary one)."""
        return self._data_dir

    @property
    def address_file(self) -> Path | None:
        """File holding ``host:port`` of the running (or last) broker of the data directory."""
        return self._data_dir / ADDRESS_FILE if self._data_dir is not None else None

    @property
    def pids(self) -> dict[str, int]:
        """Pid of the running broker's JVM: ``{"kafka": pid}`` (empty when stopped)."""
        return {"kafka": self._process.pid} if self.running and self._process is not None else {}

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it answers a metadata request.

        Takes the data directory's lock, ends a broker a dead owner left running, formats
        the log directory on the first start, starts Kafka, and writes the address.

        Raises
        ------
        BrokerError
            If Java or the jars are missing, the broker exits, or it does not answer in time.
        streaming.instance.InUseError
            If another live process holds the data directory.
        """
        if self.running:
            return self
        command = broker_command()
        home = self._home()
        try:
            if self._log_path is None:
                self._log_path = home / "kafka.log"
            attempts = 1 if self._port is not None else 3
            for attempt in range(attempts):
                config = self._write_config(home, reuse=attempt == 0)
                if not (home / "kraft" / "meta.properties").exists():
                    self._format(command, config)
                self._log = open(self._log_path, "ab")  # noqa: SIM115 - closed in stop()
                self._process = spawn([*command, "kafka.Kafka", str(config)], self._log)
                if self._data_dir is not None:
                    PidRecord(self._data_dir / "pids").add("kafka", self._process.pid)
                try:
                    self._wait_ready()
                    break
                except BrokerError:
                    exited = self._process is not None and self._process.poll() is not None
                    if not (exited and attempt + 1 < attempts and "BindException" in self._tail_log()):
                        raise
                    self._stop_process()
                    log.warning("the broker could not bind port %s; retrying on another", self._port)
        except BaseException:
            self.stop()
            raise
        if self.address_file is not None:
            self.address_file.write_text(f"{self.bootstrap_servers}\n")
        log.info("embedded broker at %s (log %s)", self.bootstrap_servers, self._log_path)
        return self

    def _home(self) -> Path:
        """The broker's directory: the data directory, locked, or a new temporary one."""
        _RUNNING.add(self)
        if self._data_dir is None:
            self._tmp_dir = Path(tempfile.mkdtemp(prefix="kafka-"))
            return self._tmp_dir
        self._data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = DirLock(self._data_dir / "lock", f"the embedded broker's data directory {self._data_dir}")
        self._lock.acquire()
        ended = PidRecord(self._data_dir / "pids").end_stale()
        if ended:
            log.warning("ended the broker %s left running by a previous owner of %s", ended, self._data_dir)
        return self._data_dir

    def _write_config(self, home: Path, reuse: bool) -> Path:
        """Choose the ports and write ``server.properties``; its path."""
        last = self._last_port() if reuse else None
        self._port = self._port if self._port is not None and reuse else (last or free_port(self.host))
        controller, *ports = free_ports(1 + len(self._listeners), self.host, taken={self._port})
        self._ports = dict(zip(self._listeners, ports, strict=True))
        names = {"PLAINTEXT": self._port, **self._ports}
        protocols = {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT", **self._listeners}
        served = ",".join(f"{name}://{self.host}:{port}" for name, port in names.items())
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(NODE_ID),
            "controller.quorum.voters": f"{NODE_ID}@{self.host}:{controller}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listeners": f"{served},CONTROLLER://{self.host}:{controller}",
            "advertised.listeners": served,
            "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in protocols.items()),
            "log.dirs": str(home / "kraft"),
            **SINGLE_NODE,
            **self._properties,
        }
        path = home / "server.properties"
        path.write_text("".join(f"{key}={_escaped(value)}\n" for key, value in settings.items()))
        return path

    def _format(self, command: list[str], config: Path) -> None:
        """``kafka-storage format``: the log directory's identity, once (the first start)."""
        argv = [*command, "kafka.tools.StorageTool", "format", "--ignore-formatted",
                "--cluster-id", _cluster_id(), "--config", str(config)]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
        if done.returncode != 0:
            raise BrokerError(f"formatting the broker's log directory failed: {_reason(done.stdout + done.stderr)}")

    def _last_port(self) -> int | None:
        """The port of the data directory's last run when it is free now."""
        try:
            port = int(recorded_address(self._data_dir).rsplit(":", 1)[1]) if self._data_dir else 0
        except (ValueError, IndexError):
            return None
        return port if port and _port_free(self.host, port) else None

    def _wait_ready(self) -> None:
        from kafka import KafkaConsumer

        deadline = time.monotonic() + self._start_timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise BrokerError(
                    f"the broker exited with code {self._process.returncode}; "
                    f"see {self._log_path}: {_reason(self._tail_log(4000))}"
                )
            try:
                # Cheap TCP check first: the client's own bootstrap retries for seconds.
                with socket.create_connection((self.host, self._port or 0), timeout=1.0):
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

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the broker: SIGTERM (a clean shutdown), SIGKILL after ``timeout_s``. Idempotent."""
        self._stop_process(timeout_s)
        lock, self._lock = self._lock, None
        if lock is not None:
            assert self._data_dir is not None
            PidRecord(self._data_dir / "pids").clear()
            lock.release()
        tmp, self._tmp_dir = self._tmp_dir, None
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        _RUNNING.discard(self)

    def _stop_process(self, timeout_s: float = 30.0) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("the broker did not stop within %.0f s of SIGTERM: killed", timeout_s)
                process.kill()
                process.wait(timeout=timeout_s)
        self._close_log()

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self._port is not None else "not started"
        return f"EmbeddedBroker({where}, running={self.running})"


def _cluster_id() -> str:
    """A new KRaft cluster id: a random UUID in Kafka's URL-safe base64 (22 characters).

    Never one starting with ``-`` (one in 64 would): ``kafka-storage format --cluster-id``
    takes it for an option and fails; Kafka's own ``Uuid.randomUuid`` draws again too.
    """
    import base64

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _reason(output: str) -> str:
    """Kafka's own words in ``output``: its lines without the stack frames, the last few."""
    lines = [line for line in output.strip().splitlines() if not line.lstrip().startswith("at ")]
    return "\n".join(lines[-6:])[-1500:]


def _escaped(value: str) -> str:
    """``value`` for a Java properties file (backslashes and line breaks kept literal)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n")


@atexit.register
def _stop_all() -> None:
    for broker in list(_RUNNING):
        broker.stop(timeout_s=10.0)
