"""HDFS over WebHDFS (the name node's HTTP interface) for :mod:`streaming.storage`.

fsspec's ``webhdfs`` client, with what the service's files need on top: a timeout on every
request, modification times (what :meth:`streaming.storage.Directory.stamp` compares), a
whole file read with one ``OPEN`` and written with one ``CREATE`` under a temporary name and renamed over the old one
in one step (``RENAME`` with ``renameoptions=OVERWRITE``, HDFS's atomic ``rename2``), and
a rename that fails loudly (plain ``RENAME`` answers ``false`` and changes nothing when it
cannot rename).
"""

from __future__ import annotations

import uuid
from typing import Any

import requests
from fsspec.implementations.webhdfs import WebHDFS
from requests.adapters import HTTPAdapter


class _TimeoutAdapter(HTTPAdapter):
    """Requests that time out (a name node or data node that does not answer is an error)."""

    def __init__(self, timeout: float) -> None:
        super().__init__()
        self.timeout = timeout

    def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = self.timeout
        return super().send(request, *args, **kwargs)


class WebHdfs(WebHDFS):
    """fsspec's WebHDFS client (same arguments) plus ``timeout`` (seconds per request)."""

    protocol = "webhdfs"  # pyarrow's type name: "py::fsspec+webhdfs" (a tuple would be spelled out)

    def __init__(self, *args: Any, timeout: float = 60.0, **kwargs: Any) -> None:
        self.timeout = timeout
        super().__init__(*args, **kwargs)

    def _connect(self) -> None:
        super()._connect()
        session: requests.Session = getattr(self, "session")  # noqa: B009 - fsspec's, untyped
        adapter = _TimeoutAdapter(self.timeout)
        session.mount("http://", adapter)
        session.mount("https://", adapter)

    @staticmethod
    def _process_info(info: dict[str, Any]) -> dict[str, Any]:
        info = WebHDFS._process_info(info)
        if info.get("modificationTime") is not None:
            info["mtime"] = info["modificationTime"] / 1000.0  # seconds, as pyarrow's FileInfo takes them
        return info

    def mv(self, path1: str, path2: str, **kwargs: Any) -> None:
        out = self._call("RENAME", method="put", path=path1, destination=path2)
        if not out.json().get("boolean", False):
            raise OSError(f"WebHDFS could not rename {path1} to {path2} (missing, or the target exists)")

    def read_whole(self, path: str) -> bytes:
        """The whole content of file ``path`` with one ``OPEN`` (one version of it, even while it is
        renamed over: fsspec's reader asks for the size first, then for that many bytes).

        Raises
        ------
        FileNotFoundError
            If there is no such file.
        """
        return bytes(self._call("OPEN", path=path).content)

    def write_replacing(self, path: str, data: bytes) -> None:
        """Write file ``path`` whole or not at all: to a temporary name beside it, then renamed
        over it (the parent directory is created)."""
        parent, _, name = path.rstrip("/").rpartition("/")
        tmp = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"
        self.mkdir(parent or "/")
        first = self._call("CREATE", method="put", path=tmp, redirect=False, overwrite="false")
        try:
            if "Location" in first.headers:  # the name node sends the data to a data node
                done = self.session.put(self._apply_proxy(first.headers["Location"]), data=data,
                                        headers={"content-type": "application/octet-stream"})
                done.raise_for_status()
            self._call("RENAME", method="put", path=tmp, destination=path, renameoptions="OVERWRITE")
        except BaseException:
            try:
                self.rm(tmp)
            except Exception:  # noqa: BLE001 - the first error is the one to report
                pass
            raise
