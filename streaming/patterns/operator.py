"""The pattern operator: the automaton instances of one state key, through its lifecycle.

Spark's keyed state (:mod:`streaming.patterns.processor`) holds a :class:`KeyState` per
partition value of each state key (:mod:`streaming.patterns.keyed`); :meth:`PatternOperator.run`
holds one per state key (in memory: tests, benchmarks; its after-match skips are then per
key). Per micro-batch, the states with new events and those whose timer (``wake``) the
watermark has reached go through :meth:`PatternOperator.step` (:meth:`~PatternOperator.visit`),
the lifecycle:

1. :meth:`~PatternOperator.restore`: the key's state into the worker's compiled engines (one
   per registry version, partition attribute and tenant, shared by the keys,
   :func:`~streaming.patterns.registry.engines_for`); the engine of a tenant at its
   ``pattern_instances`` quota starts no new instances (:meth:`Tenants.at_instance_quota
   <streaming.tenants.Tenants.at_instance_quota>`);
2. :meth:`~PatternOperator.on_events`: the new events join the key's pending events;
3. :meth:`~PatternOperator.on_watermark`: the pending events the event-time watermark
   has passed go through the engine in order of ``(t1, partition, offset)`` (Kafka
   partitions interleave freely up to ``patterns.watermark_delay``); completed patterns
   are notifications (:func:`streaming.notifications.pattern`); an event ending before
   one already processed for its key is late (an error record, stage ``pattern-late``);
4. :meth:`~PatternOperator.advance`: event time passes to the watermark: ``UNLESS``
   patterns whose deadline it passed fire (notifications without a completing event:
   ``partition`` and ``offset`` null), instances whose ``DUR`` bound (or
   ``patterns.state_timeout``) it passed are dropped;
5. :meth:`~PatternOperator.snapshot`: the instances and pending events as the key's new
   :class:`KeyState`, with its timer at the next pending event or expiry, so a key that
   receives no more events still completes and expires; a key with neither has no state.

:func:`key_live` counts a key's live instances per tenant; the processor reports each key's
change, the driver sums them for the next batch's quota decision. :meth:`PatternOperator.run`
runs the same lifecycle over keys held in memory (tests, benchmarks).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from matchers.cayuga.algebra import Event
from matchers.cayuga.engine import Engine
from streaming import notifications
from streaming.config import Settings
from streaming.patterns.keyed import NO_KEY, event_attributes, event_time_ms
from streaming.patterns.registry import engines_for
from streaming.records import Position, error
from streaming.tenants import OPERATOR, Tenants

PATTERN_LATE = "pattern-late"
"""Stage of an event that arrived after a later one of its key was processed."""

_FEW = 32
PENDING = ("t1", "partition", "offset", "t0", "eid", "stream", "attrs")
"""The columns of a key's pending events (``attrs`` the event record's value)."""
Row = tuple[bytes | None, bytes, str]
"""An output record: ``(key, value, topic)``."""


@dataclass(frozen=True)
class KeyState:
    """The state of one key between micro-batches.

    ``clock``: the end time of the last event processed (None: none yet); ``instances``: each
    tenant's engine's automaton instances (``{tenant: rows}``, the operator's under ``""``;
    :meth:`Engine.export_instances <matchers.cayuga.engine.Engine.export_instances>`: records
    keep their floats, NaN and infinities included; a snapshot written before tenants had
    their own engines holds one list of rows); ``pending``: the events waiting for the
    watermark, as columns (:data:`PENDING`); ``wake``: the watermark (ms) at which the key must be visited even
    without new events (its next pending event, ``DUR`` expiry or state timeout), or None.
    """

    clock: int | None
    instances: dict[str, list]
    pending: dict[str, list]
    wake: int | None


KeyStates = dict[str, KeyState]
"""Keys' states held in memory (:meth:`PatternOperator.run`)."""


@dataclass
class OpenKey:
    """One key while the operator holds it: its engines (one per tenant, holding its instances), the
    end time of the last event processed and its pending events."""

    key: str
    engines: dict[str, Engine]
    clock: int | None = None
    pending: dict[str, list] = field(default_factory=lambda: {c: [] for c in PENDING})


class PatternOperator:
    """The pattern operator of a task's state keys (see the module docstring).

    Parameters
    ----------
    registry_dir : the registry's URI (its pattern view, :func:`~streaming.patterns.registry.current`).
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
        self.attributes = partial(event_attributes, settings=settings)
        self.parsed: dict[bytes, dict[str, Any]] = {}
        """Events' attributes a caller already read (:meth:`attributes`), by record: each taken once."""

    def route(self, sub_id: str) -> tuple[str, str]:
        """``(notifications topic, the subscription id it names)`` of a pattern (its tenant's, with tenants)."""
        return (self.notifications_topic, sub_id) if self.tenants is None else self.tenants.route(sub_id)

    def run(self, state: KeyStates, events: dict[str, Sequence], watermark_ms: int,
            blocked: Collection[str] = ()) -> tuple[KeyStates, list[Row]]:
        """One micro-batch over the keys of ``state`` held in memory (what the stateful
        processor does key by key, :mod:`streaming.patterns.processor`): the new ``events``
        (columns ``gkey`` and :data:`PENDING`; rows of :data:`~streaming.patterns.keyed.NO_KEY`
        are ignored) at event-time watermark ``watermark_ms``, the tenants ``blocked`` starting
        no new instances. Visits the keys with events and those whose timer (``wake``) the
        watermark reached. Returns the new states (``state`` is not changed) and the output records."""
        rows_of: dict[str, list[int]] = {}
        for i, gkey in enumerate(events.get("gkey", ())):
            if gkey != NO_KEY:
                rows_of.setdefault(gkey, []).append(i)
        due = {k for k, ks in state.items() if ks.wake is not None and ks.wake <= watermark_ms}
        new, out = dict(state), []
        for gkey in sorted(rows_of.keys() | due):
            kept, rows = self.step(gkey, state.get(gkey), events, rows_of.get(gkey, ()), watermark_ms, blocked)
            out += rows
            if kept is None:
                new.pop(gkey, None)
            else:
                new[gkey] = kept
        return new, out

    def step(self, gkey: str, ks: KeyState | None, events: Mapping[str, Sequence], rows: Sequence[int],
             watermark_ms: int, blocked: Collection[str] = ()) -> tuple[KeyState | None, list[Row]]:
        """The whole lifecycle of one key in one micro-batch: its state ``ks`` (None: none yet), its
        new events (``rows`` of the columns ``events``), the event-time watermark. Returns its new
        state (None: nothing left to keep) and the output records."""
        new, out, _ = self.visit(gkey, ks, events, rows, watermark_ms, blocked)
        return new, out

    def visit(self, gkey: str, ks: KeyState | None, events: Mapping[str, Sequence], rows: Sequence[int],
              watermark_ms: int, blocked: Collection[str] = (),
              engines: dict[str, Engine] | None = None) -> tuple[KeyState | None, list[Row], int | None]:
        """:meth:`step`, and the end of the last event processed (``ks.clock`` when none), kept
        when nothing else is (the processor holds it per state key, the instances per partition
        value); ``engines``: the key's (:func:`~streaming.patterns.registry.engines_for`), when
        the caller visits several states of one key."""
        now = watermark_ms // self.unit - 1  # the last tick the watermark has passed
        key = self.restore(gkey, ks, blocked, engines)
        try:
            if rows:
                self.on_events(key, events, rows)
            out = self.on_watermark(key, now)
            out += self.advance(key, now)
            return self.snapshot(key, watermark_ms), out, key.clock
        finally:
            for eng in key.engines.values():
                eng.clear_instances()

    # -- lifecycle -------------------------------------------------------------------------
    def restore(self, gkey: str, ks: KeyState | None, blocked: Collection[str] = (),
                engines: dict[str, Engine] | None = None) -> OpenKey:
        """The key's engines (``engines``, else the registry's) holding their tenants' instances
        (those of ``blocked`` tenants starting none), and its pending events."""
        key = OpenKey(gkey, engines if engines is not None else engines_for(self.registry_dir, gkey, self.unit))
        held: dict[str, list] = {} if ks is None else ks.instances
        if ks is not None:
            key.clock = ks.clock
            key.pending = {c: list(v) for c, v in ks.pending.items()}
        for tenant, eng in key.engines.items():
            eng.starting = tenant not in blocked
            # an older snapshot's one list: each engine takes the rows of its own nodes (ids are content hashes)
            eng.load_instances(held.get(tenant, ()) if isinstance(held, dict) else held, key.clock)
        return key

    def on_events(self, key: OpenKey, events: Mapping[str, Sequence], rows: Sequence[int]) -> None:
        """Add the key's new events (``rows`` of ``events``) to its pending events."""
        for c in PENDING:
            column = events[c]
            key.pending[c].extend(column[i] for i in rows)

    def on_watermark(self, ks: OpenKey, now: int) -> list[Row]:
        """Process the pending events ending at or before ``now``, in order; the output rows."""
        p = ks.pending
        if not p["t1"]:
            return []
        if len(p["t1"]) <= _FEW:  # a partition value's few events: numpy costs more than it saves
            t1, part, off = p["t1"], p["partition"], p["offset"]
            order_list = sorted(range(len(t1)), key=lambda i: (t1[i], part[i], off[i]))
            ready = sum(1 for i in order_list if t1[i] <= now)
        else:
            t1s = np.asarray(p["t1"], dtype=np.int64)
            order = np.lexsort((np.asarray(p["offset"], dtype=np.int64), np.asarray(p["partition"], dtype=np.int64), t1s))
            ready = int(np.searchsorted(t1s[order], now, side="right"))
            order_list = order.tolist()
        if ready == 0:
            return []
        engines, gkey, unit = ks.engines.values(), ks.key, self.unit
        rows: list[Row] = []
        matched_ms = int(time.time() * 1000)
        t0s, eids, streams, attrs, parts, offs = (p[c] for c in ("t0", "eid", "stream", "attrs", "partition", "offset"))
        parsed = self.parsed
        for i in order_list[:ready]:
            t1 = p["t1"][i]
            if ks.clock is not None and t1 < ks.clock:
                err = error(PATTERN_LATE, attrs[i], Position(self.events_topic, parts[i], offs[i]),
                            f"late event {eids[i]!r} for key {gkey}: ends at {t1}, before the last processed ({ks.clock})")
                rows.append((None, err.to_json(), self.errors_topic))
                continue
            ks.clock = t1
            a = parsed.pop(attrs[i], None) if parsed else None
            event = Event(eids[i], streams[i], t0s[i], t1, self.attributes(attrs[i]) if a is None else a)
            for eng in engines:
                for m in eng.process(event):
                    if m.t1 < t1:  # an UNLESS deadline this event's time passed: no event completed it
                        rows.append(self._row(m, gkey, matched_ms))
                        continue
                    topic, sub_id = self.route(m.sub_id)
                    value = notifications.pattern(sub_id, m.witness, m.attrs, m.t0, m.t1, gkey, self.events_topic,
                                                  parts[i], offs[i], t1 * unit, matched_ms)
                    rows.append((sub_id.encode("utf-8"), value, topic))
        rest = order_list[ready:]
        ks.pending = {c: [v[i] for i in rest] for c, v in p.items()}
        return rows

    def advance(self, ks: OpenKey, now: int) -> list[Row]:
        """Let event time pass to ``now``: ``UNLESS`` patterns whose deadline passed fire (their
        notification rows), instances that can no longer complete are dropped."""
        matched_ms = int(time.time() * 1000)
        return [self._row(m, ks.key, matched_ms) for eng in ks.engines.values() for m in eng.advance(now)]

    def _row(self, m: Any, gkey: str, matched_ms: int) -> Row:
        """The notification row of a pattern completed by the passing of time, not by an event."""
        topic, sub_id = self.route(m.sub_id)
        value = notifications.pattern(sub_id, m.witness, m.attrs, m.t0, m.t1, gkey, self.events_topic,
                                      None, None, m.t1 * self.unit, matched_ms)
        return sub_id.encode("utf-8"), value, topic

    def snapshot(self, key: OpenKey, watermark_ms: int) -> KeyState | None:
        """The key's instances and pending events as its state, with its timer; None when it has neither."""
        now = watermark_ms // self.unit - 1
        instances: dict[str, list] = {}
        wake = [event_time_ms(min(key.pending["t1"]), self.unit)] if key.pending["t1"] else []
        for tenant, eng in key.engines.items():
            rows = eng.export_instances()
            if self.state_timeout:
                rows = [i for i in rows if i[0] is None or i[3] + self.state_timeout > now]  # None: skip marks
            if not rows:
                continue
            instances[tenant] = rows
            nxt = eng.next_expiry()
            if nxt is not None:
                wake.append(event_time_ms(nxt + 1, self.unit))
            starts = [i[3] for i in rows if i[0] is not None]
            if self.state_timeout and starts:
                wake.append(event_time_ms(min(starts) + self.state_timeout, self.unit))
        if not instances and not key.pending["t1"]:
            return None
        wake = [w for w in wake if w > watermark_ms]
        return KeyState(key.clock, instances, key.pending, min(wake) if wake else None)


def live_instances(state: KeyStates) -> Counter[str]:
    """``{tenant: live instances}`` of keys' states (the skip marks are not instances)."""
    counts: Counter[str] = Counter()
    for ks in state.values():
        counts.update(key_live(ks))
    return counts


def key_live(ks: KeyState | None) -> Counter[str]:
    """``{tenant: live instances}`` of one key's state (None: none)."""
    counts: Counter[str] = Counter()
    if ks is not None:
        for tenant, rows in (ks.instances.items() if isinstance(ks.instances, dict) else [(OPERATOR, ks.instances)]):
            counts[tenant] += sum(1 for r in rows if r[0] is not None)
    return counts
