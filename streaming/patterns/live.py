"""The driver's record of the ``patterns`` query after each batch: the watermark and each
tenant's live instances.

The instances live in Spark's keyed state (:mod:`streaming.patterns.processor`); each key
the batch touched reports its change of live instances per tenant, and the driver adds them
to the totals after the previous batch and writes ``<dir>/b<b>`` (JSON ``{"watermark": ms,
"instances": {tenant: n}}``). A replayed batch starts from the same previous record, so its
totals and its ``pattern-quota`` records are the same. The newest record is what the
processor's tasks read for the quota (tenants at it start no new instances) and what the
service's status shows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import orjson

from matchers.errors import PubSubError
from streaming.storage import Directory

KEPT = 3
"""Records kept (the newest ones); older ones are deleted."""
_RECORD = re.compile(r"^b(\d{12})$")


class StateError(PubSubError, RuntimeError):
    """The pattern state a batch needs cannot be read, or is of a layout this version does not read."""


def _name(batch_id: int) -> str:
    return f"b{batch_id:012d}"


class LiveRecord:
    """The per-batch records under a URI or path (see the module docstring)."""

    def __init__(self, location: str):
        self.dir = Directory(location)

    def before(self, batch_id: int) -> tuple[int, dict[str, int]]:
        """The watermark (ms) and each tenant's live instances after the newest batch before
        ``batch_id`` that has a record (``(0, {})``: none; a batch with no record is one the
        query ran before this record was kept, or lost: the next totals start from what is there)."""
        try:
            names = sorted((n for n in self.dir.names() if _RECORD.match(n) and int(n[1:]) < batch_id), reverse=True)
        except FileNotFoundError:
            return 0, {}
        for n in names:
            try:
                return _record(self.dir.read(n))
            except FileNotFoundError:
                continue
        return 0, {}

    def latest(self) -> dict[str, int]:
        """Each tenant's live instances after the newest batch recorded (``{}``: none yet)."""
        return self.before(2**62)[1]

    def write(self, batch_id: int, watermark_ms: int, live: Mapping[str, int]) -> None:
        """Record the watermark and the live instances after batch ``batch_id`` (and delete older records)."""
        self.dir.make()
        self.dir.write(_name(batch_id), orjson.dumps({"watermark": watermark_ms, "instances": dict(live)}))
        for n in self.dir.names():
            if _RECORD.match(n) and int(n[1:]) <= batch_id - KEPT:
                self.dir.remove(n)


def add_changes(live: Mapping[str, int], changes: Iterable[bytes]) -> dict[str, int]:
    """``live`` plus the keys' changes (JSON ``{tenant: change}``); tenants at 0 are left out."""
    out = dict(live)
    for blob in changes:
        for tenant, n in orjson.loads(blob).items():
            out[tenant] = out.get(tenant, 0) + int(n)
    return {t: n for t, n in out.items() if n}


def _record(blob: bytes) -> tuple[int, dict[str, int]]:
    obj = orjson.loads(blob)
    return int(obj["watermark"]), {str(t): int(n) for t, n in obj["instances"].items()}
