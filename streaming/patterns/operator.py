"""The keyed-state operator: one state key's automaton instances over its events.

:class:`PatternOperator` is the function of ``applyInPandasWithState`` (event-time
timeout). Per call, for one state key (:mod:`streaming.patterns.keyed`), its lifecycle:

1. :meth:`~PatternOperator.restore`: the key's state (:data:`STATE_SCHEMA`) into the
   worker's compiled engine (one per registry version and partition attribute, shared by
   the keys, :func:`~streaming.patterns.registry.engine_for`);
2. :meth:`~PatternOperator.on_events`: the new events join the key's pending events
   (none on a timeout call);
3. :meth:`~PatternOperator.on_watermark`: the pending events the event-time watermark
   has passed go through the engine in order of ``(t1, partition, offset)`` (Kafka
   partitions interleave freely up to ``patterns.watermark_delay``); completed patterns
   are notifications (:func:`streaming.notifications.pattern`); an event ending before
   one already processed for its key is late (an error record, stage ``pattern-late``);
4. :meth:`~PatternOperator.advance`: event time passes to the watermark: ``UNLESS``
   patterns whose deadline it passed fire (notifications without a completing event:
   ``partition`` and ``offset`` null), instances whose ``DUR`` bound (or
   ``patterns.state_timeout``) it passed are dropped;
5. :meth:`~PatternOperator.snapshot`: the instances and pending events back into the
   state, and the timer (event-time timeout) at the next pending event or expiry, so a
   key that receives no more events still completes and expires; a key with neither has
   no state.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pandas as pd
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from matchers.cayuga.algebra import Event
from matchers.cayuga.engine import Engine
from streaming import notifications
from streaming.config import Settings
from streaming.patterns.keyed import NO_KEY, event_time_ms
from streaming.patterns.registry import engine_for
from streaming.records import Position, error
from streaming.tenants import Tenants

PATTERN_LATE = "pattern-late"
"""Stage of an event that arrived after a later one of its key was processed."""

OUT_DDL = "key binary, value binary, topic string"
STATE_SCHEMA = StructType([
    StructField("clock", LongType()),
    StructField("instances", BinaryType(), False),
    StructField("pending", BinaryType(), False),
])
"""The state of one key, declared once: ``clock``, the end time of the last event processed
(null: none yet); ``instances``, the engine's automaton instances (:meth:`Engine.export_instances
<matchers.cayuga.engine.Engine.export_instances>`: the records ``first`` and ``cur``, the
interval, the ids of the witness' events, the registry version it was born at...);
``pending``, the events waiting for the watermark as columns (:data:`PENDING`; ``attrs`` the
event's JSON). Both are blobs (:func:`encode`). (Spark 4.3's Python worker cannot read a
state schema holding arrays: ``KeyError: 'elementType'`` in ``StructType.fromJson``.)"""
PENDING = ("t1", "partition", "offset", "t0", "eid", "stream", "attrs")


def encode(value: Any) -> bytes:
    """A state blob: a pickle, so that the records of instances keep their floats exactly (a
    NaN or an infinity from arithmetic stays one; JSON would write null) and their tuples."""
    return pickle.dumps(value, protocol=5)


def decode(blob: bytes) -> Any:
    """The value of a state blob (:func:`encode`); a JSON blob is state written before, with the
    pending events' JSON as text."""
    if blob[:1] == b"\x80":  # a pickle's PROTO opcode
        return pickle.loads(blob)  # the operator's own state, in its checkpoint
    value = orjson.loads(blob)
    if isinstance(value, dict):
        value["attrs"] = [a.encode() for a in value["attrs"]]
    return value


@dataclass
class KeyState:
    """One key's state while the operator holds it."""

    key: str
    engine: Engine
    pending: dict[str, list] = field(default_factory=lambda: {c: [] for c in PENDING})


class PatternOperator:
    """The ``applyInPandasWithState`` function (see the module docstring).

    Parameters
    ----------
    registry_dir : the pattern registry's URI.
    settings : the service's settings (``[patterns]``, the topics).
    """

    def __init__(self, registry_dir: str, settings: Settings):
        self.registry_dir = registry_dir
        self.unit = settings.patterns.time_unit_ms
        self.state_timeout = settings.patterns.state_timeout
        self.events_topic = settings.kafka.events_topic
        self.notifications_topic = settings.kafka.notifications_topic
        self.errors_topic = settings.kafka.errors_topic
        self.tenants = Tenants.of(settings)

    def route(self, sub_id: str) -> tuple[str, str]:
        """``(notifications topic, the subscription id it names)`` of a pattern (its tenant's, with tenants)."""
        return (self.notifications_topic, sub_id) if self.tenants is None else self.tenants.route(sub_id)

    def __call__(self, key: tuple, pdfs: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        gkey = key[0]
        if gkey == NO_KEY:  # events of no pattern's key: only the watermark needed them
            yield pd.DataFrame({"key": [], "value": [], "topic": []})
            return
        ks = self.restore(gkey, state)
        try:
            if not state.hasTimedOut:
                self.on_events(ks, pdfs)
            watermark_ms = state.getCurrentWatermarkMs()
            now = watermark_ms // self.unit - 1  # the last tick the watermark has passed
            rows = self.on_watermark(ks, now)
            rows += self.advance(ks, now)
            self.snapshot(ks, state, watermark_ms)
        finally:
            ks.engine.clear_instances()
        keys, values, topics = zip(*rows, strict=True) if rows else ((), (), ())
        yield pd.DataFrame({"key": keys, "value": values, "topic": topics})

    # -- lifecycle -------------------------------------------------------------------------
    def restore(self, gkey: str, state: Any) -> KeyState:
        """The key's engine holding its instances, and its pending events."""
        ks = KeyState(gkey, engine_for(self.registry_dir, gkey, self.unit))
        if state.exists:
            clock, instances, pending = state.get
            ks.engine.load_instances(decode(instances), clock)
            ks.pending = decode(pending)
        else:
            ks.engine.load_instances((), None)
        return ks

    def on_events(self, ks: KeyState, pdfs: Iterator[pd.DataFrame]) -> None:
        """Add the new events to the key's pending events."""
        pending = ks.pending
        for pdf in pdfs:
            for c in PENDING:
                pending[c].extend(pdf[c].tolist())

    def on_watermark(self, ks: KeyState, now: int) -> list[tuple[bytes | None, bytes, str]]:
        """Process the pending events ending at or before ``now``, in order; the output rows."""
        p = ks.pending
        if not p["t1"]:
            return []
        t1s = np.asarray(p["t1"], dtype=np.int64)
        order = np.lexsort((np.asarray(p["offset"], dtype=np.int64), np.asarray(p["partition"], dtype=np.int64), t1s))
        ready = int(np.searchsorted(t1s[order], now, side="right"))
        if ready == 0:
            return []
        eng, gkey, unit = ks.engine, ks.key, self.unit
        rows: list[tuple[bytes | None, bytes, str]] = []
        matched_ms = int(time.time() * 1000)
        t0s, eids, streams, attrs, parts, offs = (p[c] for c in ("t0", "eid", "stream", "attrs", "partition", "offset"))
        for i in order[:ready].tolist():
            t1 = p["t1"][i]
            if eng.clock is not None and t1 < eng.clock:
                err = error(PATTERN_LATE, attrs[i], Position(self.events_topic, parts[i], offs[i]),
                            f"late event {eids[i]!r} for key {gkey}: ends at {t1}, before the last processed ({eng.clock})")
                rows.append((None, err.to_json(), self.errors_topic))
                continue
            for m in eng.process(Event(eids[i], streams[i], t0s[i], t1, orjson.loads(attrs[i]))):
                if m.t1 < t1:  # an UNLESS deadline this event's time passed: no event completed it
                    rows.append(self._row(m, gkey, matched_ms))
                    continue
                topic, sub_id = self.route(m.sub_id)
                value = notifications.pattern(sub_id, m.witness, m.attrs, m.t0, m.t1, gkey, self.events_topic,
                                              parts[i], offs[i], t1 * unit, matched_ms)
                rows.append((sub_id.encode("utf-8"), value, topic))
        rest = order[ready:].tolist()
        ks.pending = {c: [v[i] for i in rest] for c, v in p.items()}
        return rows

    def advance(self, ks: KeyState, now: int) -> list[tuple[bytes | None, bytes, str]]:
        """Let event time pass to ``now``: ``UNLESS`` patterns whose deadline passed fire (their
        notification rows), instances that can no longer complete are dropped."""
        matched_ms = int(time.time() * 1000)
        return [self._row(m, ks.key, matched_ms) for m in ks.engine.advance(now)]

    def _row(self, m: Any, gkey: str, matched_ms: int) -> tuple[bytes | None, bytes, str]:
        """The notification row of a pattern completed by the passing of time, not by an event."""
        topic, sub_id = self.route(m.sub_id)
        value = notifications.pattern(sub_id, m.witness, m.attrs, m.t0, m.t1, gkey, self.events_topic,
                                      None, None, m.t1 * self.unit, matched_ms)
        return sub_id.encode("utf-8"), value, topic

    def snapshot(self, ks: KeyState, state: Any, watermark_ms: int) -> None:
        """Write the key's instances and pending events to ``state`` and set its timer."""
        eng = ks.engine
        instances = eng.export_instances()
        if self.state_timeout:
            now = watermark_ms // self.unit - 1
            instances = [i for i in instances if i[0] is None or i[3] + self.state_timeout > now]  # None: skip marks
        pending = ks.pending
        if not instances and not pending["t1"]:
            state.remove()
            return
        state.update((eng.clock, encode(instances), encode(pending)))
        wake = [event_time_ms(min(pending["t1"]), self.unit)] if pending["t1"] else []
        nxt = eng.next_expiry()
        if nxt is not None:
            wake.append(event_time_ms(nxt + 1, self.unit))
        starts = [i[3] for i in instances if i[0] is not None]
        if self.state_timeout and starts:
            wake.append(event_time_ms(min(starts) + self.state_timeout, self.unit))
        wake = [w for w in wake if w > watermark_ms]
        if wake:
            state.setTimeoutTimestamp(min(wake))
