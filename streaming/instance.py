"""One running instance per directory, and child processes that die with it.

* :class:`DirLock`: an exclusive ``flock`` on a lock file. The kernel releases it when
  its holder dies, however it dies, so a lock that can be taken means no live owner.
* :func:`spawn`: start a helper binary (broker, storage server) in its own session,
  so that a Ctrl-C in the terminal reaches only the service, which stops it in order,
  and with ``PR_SET_PDEATHSIG`` so that it gets SIGTERM when the service dies, even by
  SIGKILL.
* :class:`PidRecord`: the children of a data directory written down with their start
  times, so that the next owner of the lock ends any that outlived their owner (a child
  whose parent died before it could ask for the signal), and never a process that merely
  reuses a recorded pid.
* :class:`ChildServer`: what a helper server run as a child (the embedded broker, the
  tests' storage servers) shares: its log file, and ``with`` starting and stopping it.
* :func:`free_ports`: ports for such a server's listeners, all different.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Self

from matchers.errors import PubSubError

_PR_SET_PDEATHSIG = 1


class InUseError(PubSubError, RuntimeError):
    """A directory is locked by another live process."""


def free_ports(n: int, host: str = "127.0.0.1", taken: Collection[int] = ()) -> list[int]:
    """``n`` TCP ports free on ``host`` right now, all different and none in ``taken`` (each
    is held while the next is chosen, so the kernel cannot give the same one twice)."""
    socks: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < n:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
            if port not in taken:
                ports.append(port)
    finally:
        for sock in socks:
            sock.close()
    return ports


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (:func:`free_ports` of one)."""
    return free_ports(1, host)[0]

class DirLock:
    """Exclusive lock on ``path`` (created if missing) holding the owner's pid.

    Parameters
    ----------
    path : str or Path
        The lock file.
    what : str
        What the lock protects, for the error message ("the checkpoint var/checkpoint").
    """

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        self.path = Path(path)
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> DirLock:
        """Take the lock.

        Raises
        ------
        InUseError
            If another process holds it; the message names that process.
        """
        if self._fd is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by children
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise InUseError(
                f"{self.what} is in use by another running instance (pid {holder}, lock {self.path}); "
                "stop that one first"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Give the lock up (idempotent); the file stays."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor releases the flock

    def __enter__(self) -> DirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class ChildServer:
    """A server run as a child process that writes to a log file of its own, opened by
    :meth:`start` into ``_log``; a context manager (``with`` starts it, and stops it after).

    A subclass implements :meth:`start` (it returns the server) and :meth:`stop`
    (idempotent; it closes the log with :meth:`_close_log`).
    """

    _log: IO[bytes] | None = None

    def start(self) -> ChildServer:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def _close_log(self) -> None:
        log, self._log = self._log, None
        if log is not None:
            log.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _die_with(parent: int, prctl: Any) -> None:
    """``preexec_fn``: SIGTERM when ``parent`` dies; exit now if it already has."""
    prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def spawn(
    argv: Sequence[str], log: IO[bytes], env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session, output to ``log``, ended by SIGTERM when we die.

    The death signal follows the thread that calls this (Linux ties it to the forking
    thread): call it from a thread that lives as long as the child should.
    """
    parent = os.getpid()
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before the fork: no loader lock in the child
    return subprocess.Popen(
        list(argv),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=None if env is None else dict(env),
        start_new_session=True,
        preexec_fn=lambda: _die_with(parent, prctl),
    )


def start_time(pid: int) -> int | None:
    """Start time of process ``pid`` in clock ticks since boot, ``None`` if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])  # zombies count as gone


class PidRecord:
    """The children of a data directory, written down in a JSON file at ``path``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def read(self) -> dict[str, tuple[int, int]]:
        """``name -> (pid, start time)`` as recorded (empty when there is no record)."""
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return {name: (int(pid), int(ticks)) for name, (pid, ticks) in doc.items()}

    def add(self, name: str, pid: int) -> None:
        """Record child ``name``."""
        ticks = start_time(pid)
        if ticks is None:
            return
        doc = {k: list(v) for k, v in self.read().items()} | {name: [pid, ticks]}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(self.path)

    def alive(self) -> dict[str, int]:
        """The recorded children still running (same pid and start time): ``name -> pid``."""
        return {name: pid for name, (pid, ticks) in self.read().items() if start_time(pid) == ticks}

    def end_stale(self, timeout_s: float = 10.0) -> list[int]:
        """SIGKILL every recorded child still running, wait for them, forget them.

        Call it only while holding the directory's lock: the recorded owner is dead.
        Returns the pids that were ended.
        """
        stale = list(self.alive().values())
        for pid in stale:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout_s
        while any(start_time(pid) is not None for pid in stale) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.clear()
        return stale

    def clear(self) -> None:
        """Forget every child."""
        self.path.unlink(missing_ok=True)
