"""The pattern operator as a Spark stateful processor (``transformWithStateInPandas``).

The grouping key is the state key ``gkey`` (:mod:`streaming.patterns.keyed`: ``attr#bucket``,
a bounded number per partition attribute, or :data:`~streaming.patterns.registry.ALL_KEY`),
so a batch makes one Python call per key it touches. Under a key, each partition value (the
value of ``attr`` the events carry, :func:`~streaming.patterns.keyed.value_key`; one value
under ``ALL_KEY``) has its own :class:`~streaming.patterns.operator.KeyState` in the MapState
``values`` (:data:`STATE_SCHEMA`, declared once: instances and pending events pickled, a NaN
or an infinity in a record stays one), so a batch reads and writes only the values its
events or due timers touch, and Spark's state store (RocksDB with changelog checkpointing,
:func:`streaming.patterns.queries.start_patterns_query`) writes only those. A partitioned
pattern runs on each value's events separately (:func:`matchers.cayuga.compiler.partition_attribute`):
its instances never meet another value's events, so a value's engine sees what it saw when
the key held all its values in one engine, except the after-match skips, now per partition
value (as docs/cayuga.md has them; one engine per key made them per key).

Per key, the ValueState ``bucket`` (:data:`BUCKET_SCHEMA`) holds the end of the last event
processed for any of its values (``clock``: an event ending before it is late, as before)
and the count of values with state; the MapState ``wakes`` lists the values per wake time,
with one event-time timer per distinct wake (next pending event, ``UNLESS`` deadline,
``DUR`` or ``patterns.state_timeout`` expiry), so a value that receives no more events still
completes, fires and expires when the watermark passes its timer, across restarts.

Time is Spark's: the event-time watermark (``withWatermark`` on the end of each event, minus
``patterns.watermark_delay``). A key's visit (:meth:`PatternProcessor._step`) takes the
values with new events and all those whose timer the watermark passed, so that their
pending events go through together, in order, against the key's clock.

Lifecycle, in :class:`PatternProcessor`:

* :meth:`~PatternProcessor.init`: the state and the operator; the tenants at their
  ``pattern_instances`` quota after the last recorded batch (:mod:`streaming.patterns.live`)
  start no new instances;
* :meth:`~PatternProcessor.handleInputRows`: the keying tasks' marks (:data:`~streaming.patterns.keyed.NO_KEY`,
  one group per batch) are dropped, having moved the watermark on their way; each value's new
  events through :meth:`PatternOperator.visit <streaming.patterns.operator.PatternOperator.visit>`
  at the current watermark; the :data:`~streaming.patterns.census.CENSUS_KEY` rows (the keying tasks'
  attribute tallies) are passed on to the driver, stateless;
* :meth:`~PatternProcessor.handleExpiredTimer`: the same visit without events;
* after either, each visited value's new state is written (or removed: nothing left), the
  timers moved, and the output rows returned (:data:`OUT_DDL`): the records to send
  (``kind`` = ``record``) and the key's change of live instances per tenant (``live``, JSON).

Events are not dropped by Spark for being behind the watermark
(the event-time column is not an input of the operator): the operator reports an event
ending before the last one its key processed (``pattern-late``), as it always did.
"""

from __future__ import annotations

import math
import pickle
from collections import Counter
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
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from matchers.collector import long_lived
from streaming.config import Settings
from streaming.patterns.census import CENSUS_KEY
from streaming.patterns.keyed import NO_KEY, value_key
from streaming.patterns.operator import PENDING, KeyState, PatternOperator, key_live
from streaming.patterns.registry import ALL_KEY, engines_for

if TYPE_CHECKING:
    from pyspark.sql.streaming.stateful_processor import MapState, ValueState

BUCKET_NAME, VALUES_NAME, WAKES_NAME = "bucket", "values", "wakes"
BUCKET_SCHEMA = StructType([StructField("clock", LongType(), True), StructField("values", LongType(), False)])
"""A state key's own (``bucket``, a ValueState): ``clock``, the end of the last event processed
for any of its partition values (an event ending before it is late, as when the key held them
as one), and how many partition values hold state."""
VALUE_KEY = StructType([StructField("value", StringType(), False)])
"""A partition value (:func:`~streaming.patterns.keyed.value_key`; ``""`` for :data:`~streaming.patterns.registry.ALL_KEY`)."""
STATE_SCHEMA = StructType([
    StructField("instances", BinaryType(), False), StructField("pending", BinaryType(), False),
    StructField("wake", LongType(), True),
])
"""One partition value's :class:`~streaming.patterns.operator.KeyState` (``values``, a MapState
from :data:`VALUE_KEY`): ``instances`` (``{tenant: rows}``) and ``pending`` (columns) pickled,
``wake`` as it is; the clock is the state key's (:data:`BUCKET_SCHEMA`)."""
WAKE_KEY = StructType([StructField("wake", LongType(), False)])
WAKE_SCHEMA = StructType([StructField("values", BinaryType(), False)])
"""The partition values whose ``wake`` is a timer's (``wakes``, a MapState from :data:`WAKE_KEY`),
pickled: one event-time timer per distinct wake of a state key."""
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
    """A partition value's state as a :data:`STATE_SCHEMA` row (its clock is the state key's)."""
    return (pickle.dumps(ks.instances, protocol=5), pickle.dumps(ks.pending, protocol=5), ks.wake)


def from_row(row: tuple[Any, ...] | None, clock: int | None = None) -> KeyState | None:
    """A :data:`STATE_SCHEMA` row back to the partition value's state at the state key's
    ``clock`` (None: none)."""
    if row is None:
        return None
    instances, pending, wake = row
    return KeyState(clock, pickle.loads(instances), pickle.loads(pending), None if wake is None else int(wake))


class PatternProcessor(StatefulProcessor):
    """The ``patterns`` query's stateful processor (see the module docstring).

    Parameters
    ----------
    registry_dir : the registry's URI, whose pattern view the executors read (made on the driver).
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
        self.bucket: ValueState = handle.getValueState(BUCKET_NAME, BUCKET_SCHEMA)
        self.values: MapState = handle.getMapState(VALUES_NAME, VALUE_KEY, STATE_SCHEMA)
        self.wakes: MapState = handle.getMapState(WAKES_NAME, WAKE_KEY, WAKE_SCHEMA)
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
        rows_of: dict[str, list[int]] = {}
        attr = None if gkey == ALL_KEY else gkey.rsplit("#", 1)[0]
        for i, blob in enumerate(events.get("attrs", ())):
            rows_of.setdefault(self._value(attr, blob), []).append(i)
        out = self._step(gkey, events, rows_of, wm)
        self.op.parsed.clear()  # an event still pending is read again when the watermark passes it
        if len(out):
            yield out

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[pd.DataFrame]:
        out = self._step(key[0], {}, {}, max(0, timerValues.getCurrentWatermarkInMs()),
                         fired=expiredTimerInfo.getExpiryTimeInMs())
        if len(out):
            yield out

    def _value(self, attr: str | None, blob: bytes) -> str:
        """The partition value of an event (its record ``blob``) under state key attribute ``attr``."""
        if attr is None:
            return ""
        attrs = self.op.parsed[blob] = self.op.attributes(blob)  # read once: the operator takes them
        return value_key(attrs[attr]).decode("utf-8") if attr in attrs else ""

    def _step(self, gkey: str, events: dict[str, list], rows_of: dict[str, list[int]], wm: int,
              fired: int | None = None) -> pd.DataFrame:
        """One state key's visit: the partition values with new events (``rows_of``: their rows
        of ``events``) and those whose timer the watermark passed (all of them, and ``fired``,
        the timer Spark has removed: their pending events then go through in the same step
        as the new ones, as when the key held them as one); their state and timers out. The
        output rows."""
        due: set[str] = set()
        for w in sorted({*(w for w in self.handle.listTimers() if w <= wm), *([] if fired is None else [fired])}):
            held = self.wakes.getValue((w,))
            if held is not None:
                due.update(pickle.loads(held[0]))
                self.wakes.removeKey((w,))
            if w != fired:
                self.handle.deleteTimer(w)
        visit = sorted(rows_of.keys() | due)
        if not visit:
            return pd.DataFrame(columns=_COLUMNS)
        row = self.bucket.get()  # None: none
        clock, count = (None, 0) if row is None else (None if row[0] is None else int(row[0]), int(row[1]))
        latest = clock
        engines = engines_for(self.registry_dir, gkey, self.op.unit)  # once per visit: it lists the registry
        before: Counter[str] = Counter()
        after: Counter[str] = Counter()
        moved: dict[int, tuple[set[str], set[str]]] = {}  # wake -> (values in, values out)
        out: list = []
        for v in visit:
            old = from_row(self.values.getValue((v,)), clock)
            ks = old if old is not None or clock is None else KeyState(clock, {}, {c: [] for c in PENDING}, None)
            new, rows, ended = self.op.visit(gkey, ks, events, rows_of.get(v, ()), wm, self.blocked, engines)
            out += rows
            if ended is not None and (latest is None or ended > latest):
                latest = ended
            if new is not None and new.wake is not None:  # a timer is whole ms (an engine deadline may be a float)
                new = replace(new, wake=math.ceil(new.wake) if math.isfinite(new.wake) else None)
            was, will = (None if old is None else old.wake), (None if new is None else new.wake)
            if was is not None and was > wm and was != will:
                moved.setdefault(was, (set(), set()))[1].add(v)
            if will is not None and will != was:
                moved.setdefault(will, (set(), set()))[0].add(v)
            if new is None:
                if old is not None:
                    self.values.removeKey((v,))
                    count -= 1
            else:
                self.values.updateValue((v,), to_row(new))
                count += old is None
            before.update(key_live(old))
            after.update(key_live(new))
        for w, (into, leaving) in moved.items():
            held = self.wakes.getValue((w,))
            listed = set() if held is None else set(pickle.loads(held[0]))
            now_listed = (listed - leaving) | into
            if now_listed:
                self.wakes.updateValue((w,), (pickle.dumps(sorted(now_listed), protocol=5),))
                if held is None:
                    self.handle.registerTimer(w)
            elif held is not None:
                self.wakes.removeKey((w,))
                self.handle.deleteTimer(w)
        if count == 0:  # nothing left under the key: its clock goes, as its whole state did
            if row is not None:
                self.bucket.clear()
        elif row is None or latest != clock or count != int(row[1]):
            self.bucket.update((latest, count))
        change = {t: after[t] - before[t] for t in before.keys() | after.keys() if after[t] != before[t]}
        kinds = [RECORD] * len(out) + ([LIVE] if change else [])
        keys = [r[0] for r in out] + ([None] if change else [])
        values = [r[1] for r in out] + ([orjson.dumps(change)] if change else [])
        topics = [r[2] for r in out] + ([None] if change else [])
        return pd.DataFrame({"kind": kinds, "key": keys, "value": values, "topic": topics,
                             "watermark": [wm] * len(kinds)}, columns=_COLUMNS)

    def close(self) -> None:
        self._collector.close()
