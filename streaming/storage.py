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
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import uuid
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

import pyarrow.fs as pafs

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_S3_ALIASES = ("s3a://", "s3n://")
OBJECT_STORES = frozenset({"s3", "gcs", "abfs"})


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
    for alias in _S3_ALIASES:
        if uri.startswith(alias):
            uri = "s3://" + uri[len(alias):]
    return pafs.FileSystem.from_uri(uri)


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
        """The content of file ``name``.

        Raises
        ------
        FileNotFoundError
            If there is no such file.
        """
        with self.fs.open_input_stream(self._file(name)) as f:
            return f.read()

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
        if kind == "local":
            _write_local(Path(self._file(name)), data, durable)
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
