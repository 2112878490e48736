"""The pattern operator as a Spark stateful processor (``transformWithStateInPandas``).

The grouping key is the state key ``gkey`` (:mod:`streaming.patterns.keyed`: ``attr#bucket``,
a bounded number per partition attribute, or :data:`~streaming.patterns.registry.ALL_KEY`),
so a batch makes one Python call per key it touches, and Spark's state store (RocksDB with
changelog checkpointing, :func:`streaming.patterns.queries.start_patterns_query`) writes only
the keys that changed. Each key's state is one value of :data:`STATE_SCHEMA` (declared once):
the :class:`~streaming.patterns.operator.KeyState` with its instances and pending events
pickled (a NaN or an infinity in a record stays one).

Time is Spark's: the event-time watermark (``withWatermark`` on the end of each event, minus
``patterns.watermark_delay``) and one event-time timer per key at its ``wake`` (next pending
event, ``UNLESS`` deadline, ``DUR`` or ``patterns.state_timeout`` expiry), so a key that
receives no more events still completes, fires and expires when the watermark passes its
timer, across restarts (timers live in the state store too).

Lifecycle, in :class:`PatternProcessor`:

* :meth:`~PatternProcessor.init`: the state and the operator; the tenants at their
  ``pattern_instances`` quota after the last recorded batch (:mod:`streaming.patterns.live`)
  start no new instances;
* :meth:`~PatternProcessor.handleInputRows`: the keying tasks' marks (:data:`~streaming.patterns.keyed.NO_KEY`,
  one group per batch) are dropped, having moved the watermark on their way; the key's new events through
  :meth:`PatternOperator.step <streaming.patterns.operator.PatternOperator.step>` at the
  current watermark; the :data:`~streaming.patterns.census.CENSUS_KEY` rows (the keying tasks'
  attribute tallies) are passed on to the driver, stateless;
* :meth:`~PatternProcessor.handleExpiredTimer`: the same step without events;
* after either, the new state is written (or cleared: nothing left), the timer moved, and
  the output rows returned (:data:`OUT_DDL`): the records to send (``kind`` = ``record``) and
  the key's change of live instances per tenant (``live``, JSON).

Events are not dropped by Spark for being behind the watermark (the event-time column is
not an input of the operator): the operator reports an event ending before the last one
its key processed (``pattern-late``), as it always did.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import orjson
import pandas as pd
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from matchers.collector import long_lived
from streaming.config import Settings
from streaming.patterns.census import CENSUS_KEY
from streaming.patterns.keyed import NO_KEY
from streaming.patterns.operator import PENDING, KeyState, PatternOperator, key_live

if TYPE_CHECKING:
    from pyspark.sql.streaming.stateful_processor import ValueState

STATE_NAME = "key"
STATE_SCHEMA = StructType([
    StructField("clock", LongType(), True), StructField("instances", BinaryType(), False),
    StructField("pending", BinaryType(), False), StructField("wake", LongType(), True),
])
"""One state key's :class:`~streaming.patterns.operator.KeyState`: ``clock`` and ``wake`` as
they are, ``instances`` (``{tenant: rows}``) and ``pending`` (columns) pickled."""
OUT_DDL = "kind string, key binary, value binary, topic string, watermark long"
"""The processor's output rows: ``record`` (to ``topic``), ``live`` (``value``: JSON
``{tenant: change of live instances}``) or ``census`` (``value``: a keying task's tally);
``watermark``: the watermark (ms) the row was made at."""
RECORD, LIVE, CENSUS = "record", "live", "census"
_COLUMNS = ["kind", "key", "value", "topic", "watermark"]
_INTS = ("t0", "t1", "partition", "offset")
"""Never null in an event's row, but a nullable column reaches pandas as floats when it has any
null in the Arrow batch: back to ints (times, timers, notification ids)."""


def to_row(ks: KeyState) -> tuple[Any, ...]:
    """A key's state as a :data:`STATE_SCHEMA` row."""
    return (ks.clock, pickle.dumps(ks.instances, protocol=5), pickle.dumps(ks.pending, protocol=5), ks.wake)


def from_row(row: tuple[Any, ...] | None) -> KeyState | None:
    """A :data:`STATE_SCHEMA` row back to the key's state (None: none)."""
    if row is None:
        return None
    clock, instances, pending, wake = row
    return KeyState(None if clock is None else int(clock), pickle.loads(instances), pickle.loads(pending),
                    None if wake is None else int(wake))


class PatternProcessor(StatefulProcessor):
    """The ``patterns`` query's stateful processor (see the module docstring).

    Parameters
    ----------
    registry_dir : the pattern registry's URI (made on the driver).
    live_dir : the URI of the driver's per-batch record of live instances
        (:class:`streaming.patterns.live.LiveRecord`), read for the quota decision.
    settings : the service's settings.
    """

    def __init__(self, registry_dir: str, live_dir: str, settings: Settings):
        self.registry_dir, self.live_dir, self.settings = registry_dir, live_dir, settings

    def init(self, handle: StatefulProcessorHandle) -> None:
        from streaming.patterns.live import LiveRecord
        from streaming.tenants import Tenants

        self._collector = ExitStack()  # the collector paused for the task (streaming.patterns.queries)
        self._collector.enter_context(long_lived())
        self.handle = handle
        self.state: ValueState = handle.getValueState(STATE_NAME, STATE_SCHEMA)
        self.op = PatternOperator(self.registry_dir, self.settings)
        tenants = Tenants.of(self.settings)
        self.blocked = frozenset() if tenants is None else tenants.at_instance_quota(LiveRecord(self.live_dir).latest())

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        gkey = key[0]
        if gkey == NO_KEY:  # the keying tasks' marks: they moved the watermark on their way here
            for _ in rows:
                pass
            return
        frames = [f for f in rows if len(f)]
        frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else (frames[0] if frames else None)
        wm = max(0, timerValues.getCurrentWatermarkInMs())
        if gkey == CENSUS_KEY:
            if frame is not None:
                yield pd.DataFrame({"kind": CENSUS, "key": None, "value": frame["attrs"].tolist(), "topic": None,
                                    "watermark": wm}, columns=_COLUMNS)
            return
        events = {} if frame is None else {c: (frame[c].astype("int64") if c in _INTS else frame[c]).tolist()
                                           for c in PENDING}
        out = self._step(gkey, events, range(len(frame)) if frame is not None else range(0), wm)
        if len(out):
            yield out

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[pd.DataFrame]:
        out = self._step(key[0], {}, range(0), max(0, timerValues.getCurrentWatermarkInMs()),
                         fired=expiredTimerInfo.getExpiryTimeInMs())
        if len(out):
            yield out

    def _step(self, gkey: str, events: dict[str, list], rows: range, wm: int, fired: int | None = None) -> pd.DataFrame:
        """One key's lifecycle: its state in, the step, its state and timer out (Spark has
        removed the timer that ``fired``); the output rows."""
        old = from_row(self.state.get()) if self.state.exists() else None
        new, out = self.op.step(gkey, old, events, rows, wm, self.blocked)
        if new is not None and new.wake is not None:  # a timer is whole ms (an engine deadline may be a float)
            new = replace(new, wake=math.ceil(new.wake) if math.isfinite(new.wake) else None)
        if old is not None and old.wake is not None and old.wake != fired and (new is None or new.wake != old.wake):
            self.handle.deleteTimer(old.wake)
        if new is None:
            if old is not None:
                self.state.clear()
        else:
            self.state.update(to_row(new))
            if new.wake is not None and (old is None or old.wake != new.wake):
                self.handle.registerTimer(new.wake)
        before, after = key_live(old), key_live(new)
        change = {t: after[t] - before[t] for t in before.keys() | after.keys() if after[t] != before[t]}
        kinds = [RECORD] * len(out) + ([LIVE] if change else [])
        keys = [r[0] for r in out] + ([None] if change else [])
        values = [r[1] for r in out] + ([orjson.dumps(change)] if change else [])
        topics = [r[2] for r in out] + ([None] if change else [])
        return pd.DataFrame({"kind": kinds, "key": keys, "value": values, "topic": topics,
                             "watermark": [wm] * len(kinds)}, columns=_COLUMNS)

    def close(self) -> None:
        self._collector.close()
