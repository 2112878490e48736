"""The Cayuga automaton engine: stateful subscriptions matched over an event stream.

:class:`Engine` is a facade over two instance stores (:mod:`.store`), each holding one
merged automaton (:class:`.automaton.Automaton`) and the instances of its nodes:

* :class:`.pystore.PythonStore`: instances as Python objects; every kind of subscription
  (its module's docstring describes the step);
* :class:`.flat.FlatStore` (``flat=True``): instances as rows, the step in numba kernels;
  the subscriptions :func:`.flat_rules.flat_chain` admits.

The engine parses subscriptions, routes each to a store, keeps the clock, the sequence
numbers of events and the epoch, feeds every event to both stores and merges what they
report. The stores share nothing but the automaton's layout and the step's rules
(:mod:`.rules`): a flat subscription never reads a stream another one publishes (the
engine moves it to the Python store, with its instances, when one starts to).

Instances created by an event are only visible to later events. A subscription added
while instances are in flight only sees instances started after it was added, exactly as
if it had its own automaton.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from matchers.collector import no_cyclic_gc
from matchers.errors import SubscriptionError

from . import algebra as A
from .automaton import Match, Node, Start
from .compiler import chains, top
from .language import TICK_MS, parse
from .pystore import PythonStore
from .static import MatcherFilters, StaticFilters
from .store import Row

__all__ = ["Engine", "Match"]

if TYPE_CHECKING:  # both stores implement the protocol (checked by mypy; no import at run time)
    from .flat import FlatStore
    from .store import InstanceStore

    def _stores(py: PythonStore, flat: FlatStore) -> tuple[InstanceStore, InstanceStore]:
        return py, flat


def _order_error(event: A.Event, clock: int | None) -> ValueError:
    """The error of an event with an empty interval or ending before the engine's clock."""
    if event.t1 < event.t0:
        return ValueError(f"event {event.id!r}: t1 ({event.t1}) is before t0 ({event.t0})")
    return ValueError(f"event {event.id!r} ends at {event.t1}, before the previous event ({clock})")


class Engine:
    """Stateful subscriptions compiled to merged automata, their instances in two stores.

    Parameters
    ----------
    merge : share nodes between subscriptions with equivalent prefixes.
    indexed : use the static-predicate index and the affected-instance index (without
        them every start edge and every instance of the event's stream is checked).
    static_matcher : name of a project matcher (``matchers.base.names()``) to evaluate
        the static predicates of a batch of events in one call (:meth:`process_batch`);
        ``None`` uses the engine's own access-predicate index, event by event.
    tick_ms : milliseconds per tick, for the durations with a unit in subscriptions' texts.
    flat : run the subscriptions that allow it (:func:`.flat_rules.flat_chain`) in a
        :class:`.flat.FlatStore` (instances as rows, the step compiled; only with the
        indexes and the engine's own static index). It pays with many subscriptions and
        events in batches (:meth:`process_batch`): a call costs it 10-15 µs before any
        matching, more than the Python store spends on a whole event when there are few
        subscriptions.
    """

    def __init__(self, merge: bool = True, indexed: bool = True, static_matcher: str | None = None,
                 tick_ms: int = TICK_MS, flat: bool = False):
        self.tick_ms = tick_ms
        self.merge = merge
        self.indexed = indexed
        self.static: StaticFilters | MatcherFilters = (
            MatcherFilters(static_matcher) if static_matcher else StaticFilters()
        )
        self.py = PythonStore(merge, indexed, self.static)
        self.starts: dict[str, Start] = self.py.starts  # the Python store's automaton
        self.nodes: dict[str, Node] = self.py.nodes
        self.epoch = 0
        self.clock: int | None = None
        self.seq = -1  # sequence number of the latest event
        self.starting = True  # False: no start edge fires (no new run starts; those in flight go on)
        self._reads: dict[str, frozenset[str]] = {}  # subscription -> the streams it reads
        self.flat: Any = None  # the flat store, made with the first flat subscription
        self._flat_on = flat and indexed and static_matcher is None
        self._flat_subs: dict[str, None] = {}  # the subscriptions the flat store holds

    @property
    def _subs(self) -> dict[str, tuple[tuple, ...]]:
        """The Python store's subscriptions (their links)."""
        return self.py.graph.subs

    @property
    def instances(self) -> int:
        """Live instances."""
        return self.py.instances + (self.flat.instances if self.flat is not None else 0)

    # ------------------------------------------------------------ subscriptions
    def __len__(self) -> int:
        return len(self.py.graph.subs) + len(self._flat_subs)

    def __contains__(self, sub_id: object) -> bool:
        return sub_id in self.py.graph.subs or sub_id in self._flat_subs

    def add(self, sub_id: str, text: str | A.Expr, since: int | None = None) -> None:
        """Register (or replace) a stateful subscription.

        It sees the instances started at epoch ``since`` or later; by default the epoch
        advances and it sees only instances started from now on.

        Raises
        ------
        SubscriptionError
            When the text does not parse or the expression is not left-deep.
        """
        try:
            expr = parse(text, self.tick_ms) if isinstance(text, str) else text
            chs = chains(expr)
            _, mode, publish = top(expr)
            reads = frozenset(s for c in chs for s in (c.start.stream, *(spec.right.stream for spec, _ in c.ops)))
            self._check_cycle(sub_id, reads, publish)
        except SubscriptionError as exc:
            raise exc.with_id(sub_id) from None
        if sub_id in self:
            self.remove(sub_id)
        if since is None:
            self.epoch += 1
            since = self.epoch
        self._reads[sub_id] = reads
        if (self._flat_on and mode is None and publish is None and len(chs) == 1
                and not reads & set(self.py._publishes.values())):
            from .flat import FlatStore
            from .flat_rules import flat_chain

            if flat_chain(chs[0]):
                if self.flat is None:
                    self.flat = FlatStore(self.merge)
                self.flat.add(sub_id, chs, since)
                self._flat_subs[sub_id] = None
                return
        self.py.add(sub_id, chs, since, mode, publish)
        if publish is not None:
            self._unflatten(publish)

    def _unflatten(self, stream: str) -> None:
        """Move the flat subscriptions reading ``stream`` (now published by a subscription:
        its records are fed to the Python store only) there, with their instances."""
        movers = [s for s in self._flat_subs if stream in self._reads[s]]
        if not movers:
            return
        from .flat_rules import plain_rows

        flat = self.flat
        rows = plain_rows(flat.export_instances())
        for sub in movers:
            chain, since = flat.graph.chain_of(sub)
            del self._flat_subs[sub]
            flat.remove(sub)
            self.py.add(sub, [chain], since)
        self.py.merge_rows(rows)

    def _check_cycle(self, sub: str, reads: frozenset[str], publish: str | None) -> None:
        """Raise when ``sub`` (reading ``reads``, publishing ``publish``) would read,
        through other subscriptions, what it publishes itself."""
        if publish is None:
            return
        publishes = {**self.py._publishes, sub: publish}
        readers = {**self._reads, sub: reads}
        seen, todo = set(), [sub]
        while todo:
            cur = todo.pop()
            stream = publishes.get(cur)
            for other, rs in readers.items():
                if stream is not None and stream in rs:
                    if other == sub:
                        raise SubscriptionError(f"PUBLISH {publish}: the subscription would read its own records", expected="no cycle of publications")
                    if other not in seen:
                        seen.add(other)
                        todo.append(other)

    def remove(self, sub_id: str) -> bool:
        """Unregister a subscription; nodes no other subscription uses go with their instances."""
        if sub_id in self._flat_subs:
            del self._flat_subs[sub_id], self._reads[sub_id]
            return self.flat.remove(sub_id)
        if not self.py.remove(sub_id):
            return False
        self._reads.pop(sub_id, None)
        return True

    # ------------------------------------------------------------ time
    def next_expiry(self) -> int | None:
        """The earliest time after which :meth:`advance` has something to do: the last
        time the oldest bounded instance can still fire, or the earliest ``UNLESS``
        deadline (``None``: none)."""
        out = self.py.next_expiry()
        if self._flat_subs:
            t = self.flat.next_expiry()
            if t is not None and (out is None or t < out):
                out = t
        return out

    def advance(self, now: int) -> list[Match]:
        """Let time pass: every event ending at or before ``now`` has been processed.

        The ``UNLESS`` instances whose deadline is ``now`` or earlier fire (the patterns
        they complete are returned) and the instances that can no longer fire at ``now``
        or later are dropped. The service calls it from its event-time watermark.
        """
        py = self.py
        py.epoch, py.starting, py.seq = self.epoch, self.starting, self.seq
        out = py.fire(now)
        self.expire(now)
        return out

    def expire(self, now: int) -> None:
        """Drop the instances that can no longer fire at time ``now`` or later."""
        self.py.expire(now)
        if self._flat_subs:
            self.flat.expire(now)

    # ------------------------------------------------------------ matching
    def process(self, event: A.Event, sat: set[int] | None = None) -> list[Match]:
        """Advance every instance over one event; the patterns it completes.

        ``sat``, when given, is the set of static conjunctions the event satisfies.

        Raises
        ------
        ValueError
            When the event ends before the previous one (events must arrive in
            temporal order) or its interval is empty.
        """
        t1 = event.t1
        if t1 < event.t0 or (self.clock is not None and t1 < self.clock):
            raise _order_error(event, self.clock)
        self.clock = t1
        self.seq += 1
        row = (event.stream, event.attrs, event.t0, t1, (event.id,), self.seq)
        out = self.py.event(row, self.epoch, self.starting, sat)
        if self._flat_subs:
            out += [m for _, m in self.flat.run([row], self.epoch, self.starting)]
        return out

    def process_batch(self, events: list[A.Event]) -> list[tuple[int, Match]]:
        """Process events in order, their static predicates evaluated in one pass first.

        Returns ``(index in events, match)`` pairs. Subscriptions must not change
        during the batch. Events before one out of order are processed, then its error is
        raised. The cyclic garbage collector is paused while the batch runs: a batch
        leaves no cyclic garbage, and most of what it allocates (records, matches of
        expired runs) is freed before it returns, so a collection in between would only
        traverse short-lived objects and the old ones they point to.
        """
        with no_cyclic_gc():
            return self._batch(events)

    def _batch(self, events: list[A.Event]) -> list[tuple[int, Match]]:
        rows: list[Row] = []
        bad = None
        clock, seq = self.clock, self.seq
        for e in events:
            t1 = e.t1
            if t1 < e.t0 or (clock is not None and t1 < clock):
                bad = _order_error(e, clock)
                break
            clock = t1
            seq += 1
            rows.append((e.stream, e.attrs, e.t0, t1, (e.id,), seq))
        self.clock, self.seq = clock, seq
        out: list[tuple[int, Match]] = []
        py = self.py
        if rows and (py.graph.subs or py._timers or not self._flat_subs):
            sats = None
            if isinstance(self.static, MatcherFilters) and self.indexed:
                sats = list(self.static.match_batch([(r[0], r[1]) for r in rows]))
            out = py.run(rows, self.epoch, self.starting, sats)
        if rows and self._flat_subs:
            flat = self.flat.run(rows, self.epoch, self.starting)
            out = list(heapq.merge(out, flat, key=itemgetter(0))) if out else flat
        if bad is not None:
            raise bad
        return out

    def run(self, events: Iterable[A.Event], until: int | None = None) -> list[tuple[int, Match]]:
        """Process events in order, then :meth:`advance` to ``until`` when given;
        ``(index of the completing event, match)`` pairs (the number of events for the
        matches of the final advance)."""
        out: list[tuple[int, Match]] = []
        n = 0
        for n, e in enumerate(events, 1):
            out.extend((n - 1, m) for m in self.process(e))
        if until is not None:
            out.extend((n, m) for m in self.advance(until))
        return out

    # ------------------------------------------------------------ state
    def export_instances(self) -> list[tuple]:
        """The engine's state as plain rows: every live instance ``(node id, first, cur, t0,
        t1, witness, born, start sequence number)`` of the Python store, then the marks of
        the subscriptions with an after-match skip that have any ``(None, subscription,
        after, used starts)``, then the flat store's instances (node ids with
        :data:`.flat.FLAT_PREFIX`)."""
        out = self.py.export_instances()
        if self._flat_subs:
            out += self.flat.export_instances()
        return out

    def load_instances(self, instances: Iterable[tuple], clock: int | None) -> int:
        """Replace all instances by ``instances`` (from :meth:`export_instances`).

        Instances of nodes that no longer exist (and marks of subscriptions without a
        skip) are skipped; rows without a sequence number (an older engine's) start at 0.
        A flat node's rows (:data:`.flat.FLAT_PREFIX`) go to the flat store; a row of a
        node id both stores hold goes to both when the rows come from an engine without a
        flat one (they evolved as one instance). Returns how many instances were loaded.
        """
        self.clear_instances()
        self.clock = clock
        n = 0
        rows = instances if isinstance(instances, list) else list(instances)
        if self._flat_subs:
            from .flat_rules import flat_rows

            mine = flat_rows(rows, self.flat.nodes)
            if mine:
                n += self.flat.load_rows(mine)
                self.seq = max(self.seq, *(r[7] for r in mine))
        n += self.py.load_rows(rows)
        self.seq = max(self.seq, self.py.seq)
        return n

    def clear_instances(self) -> None:
        """Drop every instance (the subscriptions stay)."""
        if self._flat_subs:
            self.flat.clear_instances()
        self.py.clear_instances()
        self.clock = None
        self.seq = -1
