"""One index per executor: matchers published to files that every Python worker of the machine maps.

A matcher pickles (protocol 5) into a small in-band header and its arrays out of band
(the subscriptions too, see :class:`~matchers.base.SubscriptionTable`).  :func:`publish`
writes the arrays aligned after the header into one file per (application, registry,
matcher, version) in :func:`directory` (under ``/dev/shm`` when present), under a temporary
name renamed into place, and removes the older versions and other applications' files of
the same registry (a worker that still maps one keeps its pages: unlinking a mapped file
is safe); the driver removes its application's files as it stops
(:func:`remove_application`).  :func:`load` maps a file privately,
copy on write, and unpickles the header with views of the mapped pages as the buffers:
the pages stay shared between the workers until one writes into them (a kernel's scratch
array, a catch-up by deltas), and then only the written pages become its own.

File layout: ``MAGIC``, the length and CRC-32 of the metadata, the metadata (a pickle of
the header, each buffer's offset and length, the file size and the CRC-32 of header and
buffers), then the buffers, each on a page (a cache line for small ones).  A file whose
size or checksums do not match raises :class:`CorruptIndex` and is never served.
"""

from __future__ import annotations

import ctypes
import fcntl
import gc
import hashlib
import logging
import mmap
import os
import pickle
import re
import shutil
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from matchers.base import Matcher
from matchers.errors import PubSubError

log = logging.getLogger("streaming.shared_index")

MAGIC = b"PSINDEX1"
_PREFIX = struct.Struct("<8sQI")  # magic, metadata length, metadata CRC-32
_LINE = 64


class CorruptIndex(PubSubError):
    """A shared index file that is truncated or does not match its checksums."""


class SharedKey(NamedTuple):
    """Which index a file holds: the Spark application, the registry's location, the matcher."""

    app_id: str
    registry_dir: str
    matcher: str

    def folder(self, create: bool = True) -> Path:
        """The directory of every application's versions of this registry's index (made unless ``create`` is false)."""
        digest = hashlib.sha256(self.registry_dir.encode("utf-8")).hexdigest()[:16]
        path = directory() / f"{digest}.{self.matcher}"
        if create:
            path.mkdir(mode=0o700, exist_ok=True)
        return path

    def path(self, version: int) -> Path:
        return self.folder() / f"{_SAFE.sub('_', self.app_id)}.{version:012d}.index"


_SAFE = re.compile(r"[^A-Za-z0-9_-]")


def directory() -> Path:
    """This machine's directory of shared index files for this user: under ``/dev/shm`` when
    present, else the temp dir."""
    base = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else Path(tempfile.gettempdir())
    path = base / f"pubsub-index-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _aligned(offset: int, size: int) -> int:
    step = mmap.PAGESIZE if size >= mmap.PAGESIZE else _LINE
    return -(-offset // step) * step


def _layout(header: bytes, views: list[memoryview]) -> tuple[bytes, int]:
    """The metadata and the file size, each buffer placed after room for the metadata."""
    room = len(header) + 32 * len(views) + 256
    while True:
        offset, layout, crc = _PREFIX.size + room, [], zlib.crc32(header)
        for view in views:
            offset = _aligned(offset, view.nbytes)
            layout.append((offset, view.nbytes))
            crc = zlib.crc32(view, crc)
            offset += view.nbytes
        meta = pickle.dumps((header, layout, offset, crc), protocol=5)
        if len(meta) <= room:
            return meta, offset
        room = 2 * len(meta)


def publish(matcher: Matcher, key: SharedKey, version: int) -> Path:
    """Write ``matcher`` as version ``version`` of ``key`` and remove the older versions.

    The matcher matches one empty event first, so that what it builds lazily on its first
    match (k-index, pending folds) is in the file rather than built again by every worker.
    """
    matcher.match(matcher.encode([{}]))
    buffers: list[pickle.PickleBuffer] = []
    header = pickle.dumps(matcher, protocol=5, buffer_callback=buffers.append)
    views = [b.raw() for b in buffers]
    meta, size = _layout(header, views)
    path = key.path(version)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_PREFIX.pack(MAGIC, len(meta), zlib.crc32(meta)) + meta)
            for (start, _), view in zip(pickle.loads(meta)[1], views, strict=True):
                f.seek(start)
                f.write(view)
            f.truncate(size)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    remove_older(key, version)
    return path


def load(path: Path) -> Matcher:
    """The matcher in a published file, its arrays views of a private copy-on-write mapping.

    Raises ``FileNotFoundError`` if there is no such file and :class:`CorruptIndex` if it
    is not a whole, intact index.
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < _PREFIX.size:
            raise CorruptIndex(f"{path.name}: {size} bytes is too short for an index")
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    magic, meta_len, meta_crc = _PREFIX.unpack_from(mm)
    meta = mm[_PREFIX.size:_PREFIX.size + meta_len]
    if magic != MAGIC or len(meta) != meta_len or zlib.crc32(meta) != meta_crc:
        raise CorruptIndex(f"{path.name}: bad magic or metadata checksum")
    header, layout, expected, crc = pickle.loads(meta)
    if size != expected:
        raise CorruptIndex(f"{path.name}: {size} bytes, expected {expected}")
    whole = memoryview(mm)
    views = [whole[start:start + n] for start, n in layout]
    check = zlib.crc32(header)
    for view in views:
        check = zlib.crc32(view, check)
    if check != crc:
        raise CorruptIndex(f"{path.name}: checksum mismatch")
    matcher = pickle.loads(header, buffers=views)
    if not isinstance(matcher, Matcher):
        raise CorruptIndex(f"{path.name}: holds a {type(matcher).__name__}, not a matcher")
    return matcher


def remove_older(key: SharedKey, version: int) -> None:
    """Unlink this application's files of ``key`` older than ``version``, other applications'
    files of the same registry and matcher (a registry serves one application at a time),
    and temporary files a crashed maker left (called under the maker's lock)."""
    keep = key.path(version)
    mine, _, newest_name = keep.name.partition(".")
    for path in keep.parent.iterdir():
        app, _, rest = path.name.partition(".")
        if path.suffix == ".tmp" or (path.suffix == ".index" and (app != mine or rest < newest_name)):
            path.unlink(missing_ok=True)


def remove_application(app_id: str) -> None:
    """Unlink every file of an application on this machine (its driver calls this as it stops),
    and the folders left without an index."""
    for path in directory().glob(f"*/{_SAFE.sub('_', app_id)}.*.index"):
        path.unlink(missing_ok=True)
        if not any(path.parent.glob("*.index")):
            shutil.rmtree(path.parent, ignore_errors=True)


def touch(key: SharedKey) -> None:
    """Mark ``key``'s index as in use on this machine (its folder's modification time; see :func:`drop_idle`)."""
    try:
        os.utime(key.folder(create=False))
    except FileNotFoundError:
        pass


def drop_idle(key: SharedKey, idle_s: float, now: float) -> bool:
    """Unlink this application's files of ``key`` if no process of the machine used it for
    ``idle_s`` seconds before ``now`` (wall time): its folder was neither touched (:func:`touch`)
    nor written since. Whether any file was removed (a process that maps one keeps its pages)."""
    folder = key.folder(create=False)
    try:
        if now - folder.stat().st_mtime <= idle_s:
            return False
    except FileNotFoundError:
        return False
    found = list(folder.glob(f"{_SAFE.sub('_', key.app_id)}.*.index"))
    for path in found:
        path.unlink(missing_ok=True)
    return bool(found)


@contextmanager
def _exclusive(key: SharedKey, wait: bool = True) -> Iterator[bool]:
    """Hold the builder's lock of ``key`` (one process of the machine at a time); without
    ``wait``, only if no other process holds it. Whether it is held."""
    with open(key.folder() / "builder.lock", "a+b") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _try_load(path: Path) -> Matcher | None:
    try:
        return load(path)
    except FileNotFoundError:
        return None


def newest(key: SharedKey, after: int, upto: int) -> tuple[int, Matcher] | None:
    """The newest intact version of ``key`` published in ``(after, upto]``, mapped, if any."""
    mine = key.path(upto)
    stem = mine.name.split(".")[0]
    versions = sorted((int(p.name.split(".")[1]) for p in mine.parent.glob(f"{stem}.*.index")), reverse=True)
    for version in versions:
        if after < version <= upto:
            try:
                found = _try_load(key.path(version))
            except CorruptIndex:
                continue
            if found is not None:
                return version, found
    return None


def obtain(key: SharedKey, version: int, make: Callable[[], Matcher], wait: bool = True) -> tuple[Matcher, bool] | None:
    """Version ``version`` of ``key`` mapped from this machine's file, made and published first
    if no process has yet; ``(matcher, whether this call made it)``.

    One maker at a time per key: the others wait for its lock and then map what it
    published (without ``wait``, they get ``None`` while another process makes it).  A corrupt
    file is removed and made again.  If the file cannot be written (no space left), the made
    matcher is returned, this process's own.
    """
    path = key.path(version)
    try:
        found = _try_load(path)
    except CorruptIndex:
        found = None
    if found is not None:
        return found, False
    with _exclusive(key, wait) as held:
        if not held:
            return None
        try:
            found = _try_load(path)
        except CorruptIndex:
            path.unlink(missing_ok=True)
            found = None
        if found is not None:
            return found, False
        made = make()
        try:
            publish(made, key, version)
        except OSError as exc:
            log.warning("index %s version %d not shared: %s", key.matcher, version, exc)
            return made, True
        del made
        _give_back()
        return load(path), True


def _give_back() -> None:
    """Return the memory the maker freed to the system (glibc keeps freed heap pages otherwise)."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
