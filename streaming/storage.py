"""The driver's files on any Hadoop-compatible location: local disk, HDFS, S3 (``pyarrow.fs``).

A location is a URI (``file:///srv/ckpt``, ``hdfs://nn:8020/ckpt``, ``s3a://bucket/ckpt``)
or a path without scheme, which :func:`to_uri` makes absolute on this machine
(``file://...``). Hadoop's ``s3a://`` and ``s3n://`` open as pyarrow's ``s3://``; Spark is
given the URI unchanged.

Files are written whole or not at all (:meth:`Directory.write`): on a local disk to a
temporary name, flushed to disk (unless the file need not survive a crash of the machine)
and renamed; on an object store (S3, GCS, Azure) with
one PUT, which is atomic; elsewhere (HDFS) to a temporary name and renamed. Names that
are written are written once (or rewritten with the same content by a replay).

Where a location's file system is, and how to sign in to it, is read from this process's
environment (the driver's and, through Spark, the executors' Python workers'), which
:func:`configure` fills from the Hadoop settings that Spark's own file systems use
(``spark.hadoop.<key>`` in ``spark.conf``: one source of truth, :data:`HADOOP_ENV`):

* ``s3a://`` (pyarrow's S3 client): ``fs.s3a.endpoint`` (``AWS_ENDPOINT_URL``),
  ``fs.s3a.endpoint.region`` (``AWS_REGION``), ``fs.s3a.access.key`` and ``fs.s3a.secret.key``
  (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``), ``fs.s3a.path.style.access``; the
  AWS defaults (instance roles, ``~/.aws``) for what is not set.
* ``hdfs://`` through WebHDFS, the name node's HTTP interface (this machine has no
  ``libhdfs``, and an executor's Python worker no JVM): at ``dfs.namenode.http-address``
  (``PUBSUB_WEBHDFS_ADDRESS``), by default the name node's host and port 9870, as the user
  ``HADOOP_USER_NAME`` (else this process's), simple authentication only.
"""

from __future__ import annotations

import getpass
import os
import re
import stat
import tempfile
import uuid
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

import pyarrow.fs as pafs

if TYPE_CHECKING:
    from streaming.webhdfs import WebHdfs

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_S3_ALIASES = ("s3a://", "s3n://")
OBJECT_STORES = frozenset({"s3", "gcs", "abfs"})

#: Hadoop settings this module follows too, and the environment variable carrying each.
HADOOP_ENV = {
    "fs.s3a.endpoint": "AWS_ENDPOINT_URL",
    "fs.s3a.endpoint.region": "AWS_REGION",
    "fs.s3a.access.key": "AWS_ACCESS_KEY_ID",
    "fs.s3a.secret.key": "AWS_SECRET_ACCESS_KEY",
    "fs.s3a.path.style.access": "PUBSUB_S3_PATH_STYLE",
    "dfs.namenode.http-address": "PUBSUB_WEBHDFS_ADDRESS",
}
WEBHDFS_PORT = 9870
"""The name node's HTTP port when ``dfs.namenode.http-address`` is not set (Hadoop 3's default)."""
HTTP_TIMEOUT_S = 60.0
_READ_TRIES = 10


def environment(spark_conf: Mapping[str, Any]) -> dict[str, str]:
    """The variables of :data:`HADOOP_ENV` that ``spark_conf`` (``spark.hadoop.<key>`` entries)
    sets. An endpoint without scheme gets ``https://``, or ``http://`` when
    ``fs.s3a.connection.ssl.enabled`` is false, as S3A does."""
    hadoop = {k[len("spark.hadoop."):]: str(v) for k, v in spark_conf.items() if k.startswith("spark.hadoop.")}
    env = {var: hadoop[key].strip() for key, var in HADOOP_ENV.items() if hadoop.get(key, "").strip()}
    endpoint = env.get("AWS_ENDPOINT_URL")
    if endpoint and "://" not in endpoint:
        ssl = hadoop.get("fs.s3a.connection.ssl.enabled", "true").strip().lower() != "false"
        env["AWS_ENDPOINT_URL"] = ("https://" if ssl else "http://") + endpoint
    return env


def configure(spark_conf: Mapping[str, Any]) -> dict[str, str]:
    """Follow the Hadoop settings of ``spark_conf`` in this process (:func:`environment` put
    into ``os.environ``, inherited by the processes it starts: a local master's Spark and its
    Python workers); the variables set, for a cluster's executors (``spark.executorEnv.*``)."""
    env = environment(spark_conf)
    os.environ.update(env)
    _open.cache_clear()
    return env


def to_uri(location: str | Path) -> str:
    """``location`` as a URI: one with a scheme unchanged, a path made absolute as ``file://``."""
    text = str(location)
    if _SCHEME.match(text):
        return text.rstrip("/") if not text.endswith(":///") else text
    return Path(text).resolve().as_uri()


def local_path(location: str | Path) -> Path | None:
    """The path of ``location`` on this machine's disk, or ``None`` when it lies elsewhere."""
    fs, path = _open(to_uri(location))
    return Path(path) if fs.type_name == "local" else None


def join(location: str | Path, *names: str) -> str:
    """The URI of ``names`` under ``location``."""
    return "/".join([to_uri(location), *(quote(n) for n in names)])


@lru_cache(maxsize=64)
def _open(uri: str) -> tuple[pafs.FileSystem, str]:
    for alias in (*_S3_ALIASES, "s3://"):
        if uri.startswith(alias) and "?" not in uri:  # options in the URI: pyarrow's own parsing
            return _s3(), unquote(uri[len(alias):])
        if uri.startswith(alias):
            uri = "s3://" + uri[len(alias):]
    if uri.startswith("hdfs://"):
        parts = urlsplit(uri)
        address = os.environ.get("PUBSUB_WEBHDFS_ADDRESS") or f"{parts.hostname}:{WEBHDFS_PORT}"
        return _webhdfs(address), unquote(parts.path) or "/"
    return pafs.FileSystem.from_uri(uri)


def _flag(value: str | None) -> bool | None:
    return None if not value else value.strip().lower() == "true"


def _s3() -> pafs.FileSystem:
    """pyarrow's S3 client as the environment says (:data:`HADOOP_ENV`), path-style
    addressing unless ``fs.s3a.path.style.access`` is false."""
    env = os.environ
    options: dict[str, Any] = {"connect_timeout": HTTP_TIMEOUT_S, "request_timeout": HTTP_TIMEOUT_S}
    endpoint = env.get("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urlsplit(endpoint)
        options["scheme"] = parts.scheme or "https"
        options["endpoint_override"] = parts.netloc or parts.path
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        options["region"] = region
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        options["access_key"] = env["AWS_ACCESS_KEY_ID"]
        options["secret_key"] = env["AWS_SECRET_ACCESS_KEY"]
        if env.get("AWS_SESSION_TOKEN"):
            options["session_token"] = env["AWS_SESSION_TOKEN"]
    if _flag(env.get("PUBSUB_S3_PATH_STYLE")) is False:
        options["force_virtual_addressing"] = True
    return pafs.S3FileSystem(**options)


def _webhdfs(address: str) -> pafs.FileSystem:
    """HDFS through WebHDFS at ``address`` (``host:port`` or ``http(s)://host:port``)."""
    from streaming.webhdfs import WebHdfs

    parts = urlsplit(address if "://" in address else "http://" + address)
    user = os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
    client = WebHdfs(parts.hostname, parts.port or WEBHDFS_PORT, user=user, use_https=parts.scheme == "https",
                     timeout=HTTP_TIMEOUT_S)
    return pafs.PyFileSystem(pafs.FSSpecHandler(client))


class Directory:
    """A directory at a location (created on the first write).

    Parameters
    ----------
    location : URI or path (see :func:`to_uri`).
    """

    def __init__(self, location: str | Path):
        self.uri = to_uri(location)
        self.fs, self.path = _open(self.uri)

    def __repr__(self) -> str:
        return f"Directory({self.uri!r})"

    def sub(self, name: str) -> Directory:
        """The directory ``name`` under this one."""
        return Directory(join(self.uri, name))

    def _file(self, name: str) -> str:
        return f"{self.path.rstrip('/')}/{name}"

    def exists(self) -> bool:
        return self.fs.get_file_info(self.path).type == pafs.FileType.Directory

    def make(self) -> None:
        """Create the directory (and its parents); nothing to do on an object store."""
        self.fs.create_dir(self.path, recursive=True)

    def names(self) -> list[str]:
        """Names of the files directly in the directory.

        Raises
        ------
        FileNotFoundError
            If the directory does not exist.
        """
        infos = self.fs.get_file_info(pafs.FileSelector(self.path))
        return [info.base_name for info in infos if info.type == pafs.FileType.File]

    def read(self, name: str) -> bytes:
        """The content of file ``name``: one version of it whole, even while it is rewritten.

        On HDFS one ``OPEN`` of the whole file. On an object store pyarrow asks for the size,
        then for that many bytes: a rewrite in between gives the new object cut to the old
        size, so the size is asked again after the read and the read repeated until they agree.

        Raises
        ------
        FileNotFoundError
            If there is no such file.
        """
        path = self._file(name)
        hdfs = _webhdfs_client(self.fs)
        if hdfs is not None:
            return hdfs.read_whole(path)
        for _ in range(_READ_TRIES):
            with self.fs.open_input_stream(path) as f:
                data = f.read()
            if self.fs.type_name == "local" or self.fs.get_file_info(path).size == len(data):
                return data
        raise OSError(f"{self.uri}/{name} kept changing while it was read ({_READ_TRIES} tries)")

    def stamp(self, name: str) -> tuple[int, int, int] | None:
        """What changes whenever file ``name`` is written again, with one ``stat``: its inode,
        modification time (ns) and size on a local disk (a write replaces the file: a new
        inode, whatever the clock's granularity), ``(0, mtime_ns, size)`` elsewhere; ``None``
        when there is no such file.

        Raises
        ------
        OSError
            If the file cannot be looked at (a denied or broken path).
        """
        if self.fs.type_name == "local":
            try:
                st = os.stat(self._file(name))
            except FileNotFoundError:
                return None
            return (st.st_ino, st.st_mtime_ns, st.st_size) if stat.S_ISREG(st.st_mode) else None
        info = self.fs.get_file_info(self._file(name))
        if info.type != pafs.FileType.File:
            return None
        return (0, info.mtime_ns or 0, info.size or 0)

    def write(self, name: str, data: bytes, durable: bool = True) -> None:
        """Write file ``name`` so that readers see the old file, or the whole new one.

        ``durable=False`` skips the two ``fsync`` calls of a local disk (about 11 ms here):
        for a file that a crash of the machine may leave at an older version.
        """
        kind = self.fs.type_name
        hdfs = _webhdfs_client(self.fs)
        if kind == "local":
            _write_local(Path(self._file(name)), data, durable)
        elif hdfs is not None:  # a temporary name, renamed over the file in one step
            hdfs.write_replacing(self._file(name), data)
        elif kind in OBJECT_STORES:
            with self.fs.open_output_stream(self._file(name)) as f:
                f.write(data)
        else:  # a file system with atomic rename that does not replace (HDFS)
            self.make()
            tmp = self._file(f".{name}.{uuid.uuid4().hex}.tmp")
            with self.fs.open_output_stream(tmp) as f:
                f.write(data)
            if self.fs.get_file_info(self._file(name)).type != pafs.FileType.NotFound:
                self.fs.delete_file(self._file(name))
            self.fs.move(tmp, self._file(name))

    def remove(self, name: str) -> None:
        """Delete file ``name`` if it exists."""
        try:
            self.fs.delete_file(self._file(name))
        except FileNotFoundError:
            pass


def _webhdfs_client(fs: pafs.FileSystem) -> WebHdfs | None:
    """The WebHDFS client behind ``fs`` (``None`` for any other file system)."""
    if not fs.type_name.startswith("py::fsspec+webhdfs"):
        return None
    from streaming.webhdfs import WebHdfs

    client = getattr(getattr(fs, "handler", None), "fs", None)
    return client if isinstance(client, WebHdfs) else None


def _write_local(path: Path, data: bytes, durable: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if not durable:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_file(location: str | Path, data: bytes, durable: bool = True) -> None:
    """Write the file at ``location`` (a URI or path) atomically (see :meth:`Directory.write`)."""
    uri = to_uri(location)
    parent, _, name = uri.rpartition("/")
    Directory(parent).write(name, data, durable)
