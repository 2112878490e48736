"""The Kafka clients a Python worker keeps between micro-batches (workers are reused): one
per client library and configuration, made on first use, closed when dropped (after an
error) and at the process's exit. Used for the readers (:mod:`.fetch`) and the writers
(:mod:`.sink`)."""

from __future__ import annotations

import atexit
import json
from collections.abc import Callable, Mapping
from typing import Any


class ClientCache:
    """This process's clients of one kind, by ``(client library, configuration)``.

    Parameters
    ----------
    make : ``make(key, client, conf)`` creates the client of library ``client``
        (``"confluent"`` or ``"kafka-python"``) for ``conf``, cached under ``key``.
    close : ``close(key, client)`` closes a client; what it raises is ignored (closing a
        broken client must not mask the error that broke it).
    """

    def __init__(self, make: Callable[[str, str, Mapping[str, Any]], Any], close: Callable[[str, Any], None]) -> None:
        self._clients: dict[str, Any] = {}
        self._make = make
        self._close = close
        atexit.register(self.close_all)

    def get(self, conf: Mapping[str, Any], client: str) -> tuple[str, Any]:
        """The key and the cached client for ``conf`` (created on first use)."""
        key = json.dumps([client, sorted((k, repr(v)) for k, v in conf.items())])
        found = self._clients.get(key)
        if found is None:
            found = self._clients[key] = self._make(key, client, conf)
        return key, found

    def drop(self, key: str) -> None:
        """Close the client of ``key`` (if there is one) and forget it."""
        found = self._clients.pop(key, None)
        if found is not None:
            try:
                self._close(key, found)
            except Exception:  # noqa: BLE001 - closing a broken client must not mask the error
                pass

    def close_all(self) -> None:
        """Close every client of this cache."""
        for key in list(self._clients):
            self.drop(key)
