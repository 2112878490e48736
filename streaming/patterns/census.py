"""The attributes each stream's events carry, and the patterns reading one that none has.

A pattern reading ``$2.prcie`` of ``Stock`` when no ``Stock`` event has ever carried ``prcie``
matches nothing and says nothing; this module makes the service say it, without stopping
anything:

* the driver asks the keying tasks to watch the *open reads* (:meth:`Census.open_reads`: the reads
  of the registered patterns, :mod:`matchers.cayuga.reads`, that no event of their streams
  has carried yet) by passing their streams and attribute names (:class:`Watch`);
* each keying task tallies, for the watched streams only, the events and which watched names
  they carry (exact: the names are looked up by the batch's one JSON scan, no per-event
  Python on the fast path) and a sample of the other names (the first event of each stream
  in the batch; every event read one by one), and emits it as one :data:`CENSUS_KEY` row
  (:func:`census_row`), which the partition tasks hand back to the driver;
* the driver merges the tallies into the :class:`Census` (per stream: events seen and names
  carried, at most ``patterns.stream_attribute_names`` besides the watched ones) and, once
  every stream of a read has ``patterns.unknown_attribute_events`` events, reports the read
  (:meth:`Census.unknown`): a WARNING in the log and one record of stage
  :data:`ATTRIBUTE_WARNING` on the errors topic of the pattern's tenant, once per pattern
  version, stream and attribute (the census, warned keys included, is kept under the checkpoint, so a
  restart does not repeat them); ``python -m streaming status`` lists the reads unknown now
  (the match job reads them from that file when it changed, :class:`CurrentWarnings`).

Nothing is watched when every read is resolved: then keying does no census work at all.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson

from matchers.cayuga.reads import Read, reads
from matchers.errors import PubSubError
from streaming.records import ErrorRecord, Position, error
from streaming.storage import Directory

CENSUS_KEY = "?census"
"""State key of a keying task's census row (never a partition value's key: those hold ``#``)."""
ATTRIBUTE_WARNING = "pattern-attribute"
"""Stage of the error record of a pattern reading an attribute no event of its stream carries."""
SAMPLED_STREAMS = 32
"""Streams of one batch whose first event's names a keying task samples (the did-you-mean)."""
FILE = "census.json"


@dataclass(frozen=True)
class Watch:
    """What keying tasks tally: events of ``streams``, and which of ``names`` they carry."""

    streams: frozenset[str]
    names: tuple[str, ...]


@dataclass
class Tally:
    """One keying task's census of a batch: per watched stream, events and names seen."""

    watch: Watch
    cap: int
    events: dict[str, int] = field(default_factory=dict)
    names: dict[str, set[str]] = field(default_factory=dict)

    def add(self, stream: str, events: int, names: Iterable[str]) -> None:
        if stream not in self.watch.streams:
            return
        self.events[stream] = self.events.get(stream, 0) + events
        self.names.setdefault(stream, set()).update(names)

    def to_json(self) -> bytes:
        """``{stream: [events, names]}``: the watched names seen, then at most ``cap`` others."""
        watched = set(self.watch.names)
        out = {}
        for stream, n in sorted(self.events.items()):
            seen = self.names.get(stream, set())
            keep = sorted(seen & watched) + sorted(seen - watched)[:self.cap]
            out[stream] = [n, keep]
        return orjson.dumps(out)


@dataclass(frozen=True)
class Unknown:
    """The reads of pattern ``pattern`` (registered at registry version ``since``) with the same
    sources (``$1.prcie`` and ``$2.prcie`` of ``Stock``...: ``read.text`` lists them), that no
    event of their streams carries."""

    pattern: str
    since: int
    read: Read
    carried: dict[str, tuple[str, ...]]
    events: dict[str, int]

    @property
    def key(self) -> str:
        """Identifies the warning: once per pattern version, stream and attribute."""
        return f"{self.pattern}|{self.since}|" + ",".join(f"{s}.{a}" for s, a in sorted(self.read.sources))

    def reason(self, reserved: Mapping[str, str] = {}) -> str:
        """The warning's text: the pattern, the attribute, what its streams carry, a did-you-mean."""
        streams = ", ".join(self.read.streams)
        raw = self.read.raw
        written = {t.rsplit(".", 1)[-1] for t in self.read.text.split(", ")}
        seen = " and ".join(f"{s} ({self.events[s]:,} events)" for s in self.read.streams)
        head = (f"pattern {self.pattern!r} reads {self.read.text}"
                + (f" (attribute {', '.join(raw)})" if set(raw) != written else "")
                + f", which no event of {streams} has carried: {seen} seen")
        notes = []
        for a in raw:
            if a in reserved:
                notes.append(f"{a!r} is the {reserved[a]}, which patterns do not see as an attribute")
        carried = sorted({n for s in self.read.streams for n in self.carried.get(s, ())})
        close = sorted({m for a in raw for m in difflib.get_close_matches(a, carried, n=3, cutoff=0.6)})
        if close:
            notes.append("did you mean " + " or ".join(repr(c) for c in close) + "?")
        shown = ", ".join(carried[:20]) + (f", ... ({len(carried)} in all)" if len(carried) > 20 else "")
        notes.append(f"{streams} carries: {shown or 'no attribute'}")
        return head + "; " + "; ".join(notes)

    def describe(self, reserved: Mapping[str, str] = {}) -> dict[str, Any]:
        """The warning for the status file."""
        return {"pattern": self.pattern, "attribute": self.read.text, "streams": list(self.read.streams),
                "reason": self.reason(reserved)}


@lru_cache(maxsize=65536)
def pattern_reads(text: str) -> tuple[Read, ...]:
    """The reads of a pattern's text (none when it does not compile: the registry refused it)."""
    try:
        return tuple(reads(text))
    except (PubSubError, ValueError, TypeError, RecursionError):
        return ()


class Census:
    """Per stream, the events seen and the attribute names carried; the warnings given.

    Parameters
    ----------
    settle : events of a stream after which an attribute it has not carried is unknown.
    cap : names kept per stream besides those some pattern reads (the did-you-mean list).
    """

    def __init__(self, settle: int, cap: int):
        self.settle, self.cap = settle, cap
        self.events: dict[str, int] = {}
        self.names: dict[str, set[str]] = {}
        self.warned: set[str] = set()
        self._names_changed = 0
        self._open: tuple[tuple[int, int], list[tuple[str, int, Read]]] | None = None

    def carries(self, stream: str, name: str) -> bool:
        return name in self.names.get(stream, ())

    def open_reads(self, version: int, patterns: Mapping[str, list]) -> list[tuple[str, int, Read]]:
        """``(pattern, since, read)`` of each read of ``patterns`` (registry entries of registry
        ``version``) that no event of its sources has carried yet (cached until the version or
        the names carried change)."""
        key = (version, self._names_changed)
        if self._open is not None and self._open[0] == key:
            return self._open[1]
        out = []
        for pid, entry in sorted(patterns.items()):
            for r in pattern_reads(entry[0]):
                if not any(self.carries(s, a) for s, a in r.sources):
                    out.append((pid, int(entry[1]), r))
        self._open = (key, out)
        return out

    def watch(self, version: int, patterns: Mapping[str, list]) -> Watch | None:
        """What keying should tally for ``patterns`` (``None``: nothing is open)."""
        opened = self.open_reads(version, patterns)
        if not opened:
            return None
        streams = frozenset(s for _, _, r in opened for s, _ in r.sources)
        names = tuple(sorted({a for _, _, r in opened for _, a in r.sources}))
        return Watch(streams, names)

    def merge(self, tallies: Iterable[bytes], read_names: set[str]) -> bool:
        """Add keying tallies (:meth:`Tally.to_json`); ``read_names`` (the raw names patterns
        read) are kept whatever the cap. Whether anything changed."""
        changed = False
        for blob in tallies:
            for stream, (n, names) in orjson.loads(blob).items():
                before = self.events.get(stream, 0)
                if before < self.settle:  # counted up to the settle point only: the file stops changing
                    self.events[stream] = min(self.settle, before + int(n))
                    changed = True
                have = self.names.setdefault(stream, set())
                for name in names:
                    if name not in have and (name in read_names or len(have) < self.cap):
                        have.add(name)
                        changed = True
                        self._names_changed += 1
        return changed

    def unknown(self, version: int, patterns: Mapping[str, list]) -> list[Unknown]:
        """The open reads whose streams have all been seen for ``settle`` events."""
        grouped: dict[tuple[str, int, frozenset[tuple[str, str]]], list[str]] = {}
        for pid, since, r in self.open_reads(version, patterns):
            if all(self.events.get(s, 0) >= self.settle for s in r.streams):
                grouped.setdefault((pid, since, r.sources), []).append(r.text)
        out = []
        for (pid, since, sources), texts in grouped.items():
            r = Read(", ".join(sorted(texts)), sources)
            out.append(Unknown(pid, since, r, {s: tuple(sorted(self.names.get(s, ()))) for s in r.streams},
                               {s: self.events[s] for s in r.streams}))
        return out

    def to_json(self, current: Sequence[Unknown] = (), reserved: Mapping[str, str] = {}) -> bytes:
        return orjson.dumps({"events": self.events, "names": {s: sorted(n) for s, n in self.names.items()},
                             "warned": sorted(self.warned), "unknown": [u.describe(reserved) for u in current]})

    @classmethod
    def from_json(cls, blob: bytes | None, settle: int, cap: int) -> Census:
        census = cls(settle, cap)
        if blob:
            obj = orjson.loads(blob)
            census.events = {s: int(n) for s, n in obj.get("events", {}).items()}
            census.names = {s: set(n) for s, n in obj.get("names", {}).items()}
            census.warned = set(obj.get("warned", ()))
        return census


def census_dir(checkpoint: str) -> Directory:
    return Directory(checkpoint).sub("attribute-census")


def load(checkpoint: str, settle: int, cap: int) -> Census:
    """The census kept under ``checkpoint`` (empty when there is none yet)."""
    d = census_dir(checkpoint)
    try:
        blob = d.read(FILE)
    except FileNotFoundError:
        blob = None
    return Census.from_json(blob, settle, cap)


class CurrentWarnings:
    """The unknown reads the patterns query found at its last batch (for the status file), as
    kept in the census under ``checkpoint``: read again only when the file changed
    (:meth:`~streaming.storage.Directory.stamp`), so a call costs one ``stat`` otherwise.

    No file, or one that cannot be read or parsed, gives no warnings (never an exception).
    """

    def __init__(self, checkpoint: str):
        self.directory = census_dir(checkpoint)
        self._stamp: tuple[int, int, int] | None = None
        self._warnings: list[dict[str, Any]] = []

    def __call__(self) -> list[dict[str, Any]]:
        try:
            stamp = self.directory.stamp(FILE)
            if stamp is None:
                self._stamp, self._warnings = None, []
            elif stamp != self._stamp:
                blob = self.directory.read(FILE)
                self._stamp, self._warnings = stamp, _unknown(blob)
        except OSError:  # not kept: read again at the next call
            self._stamp, self._warnings = None, []
        return list(self._warnings)


def _unknown(blob: bytes) -> list[dict[str, Any]]:
    """The ``unknown`` list of a census file's content (none when it is not a census)."""
    try:
        obj = orjson.loads(blob)
    except orjson.JSONDecodeError:
        return []
    found = obj.get("unknown") if isinstance(obj, dict) else None
    return [w for w in found if isinstance(w, dict)] if isinstance(found, list) else []


def warning_record(u: Unknown, topic: str, reserved: Mapping[str, str], public_id: str) -> ErrorRecord:
    """The errors-topic record of ``u``: the position names the subscriptions ``topic`` (partition
    -1, no offset of its own) and the id is that of the warning's key, so a repeat is droppable."""
    rec = error(ATTRIBUTE_WARNING, None, Position(topic, -1, u.since), u.reason(reserved).replace(
        repr(u.pattern), repr(public_id), 1), public_id.encode("utf-8"))
    return rec._replace(ident=hashlib.blake2b(f"{ATTRIBUTE_WARNING}|{u.key}".encode(), digest_size=16).hexdigest())
