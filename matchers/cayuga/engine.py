"""The Cayuga automaton engine: stateful subscriptions matched over an event stream.

For each event (Demers et al., Section 3):

1. instances whose ``DUR`` bound has passed are dropped;
2. the static predicates of all start edges are evaluated in one pass (:mod:`.static`);
3. the affected instances are found through the index on bound values: per
   ``(stream, attributes of the equality predicates)`` a hash from the bound values to
   the *active* nodes' buckets (the nodes holding instances with those values), and in
   a bucket the instances sorted by the bound of a range predicate; the static part of
   such a node's input predicate is checked once per event, and an instance is affected
   when the node's whole input predicate holds (Cayuga's active-node index: inactive
   nodes cost nothing, however many subscriptions there are);
4. affected instances traverse their rebind and forward edges (or are dropped), start
   edges create instances, and completed patterns are reported.

Before all that, the ``UNLESS`` instances whose deadline is before the event's end fire
(no killing event can come any more): their records go to their forward edges. Time
passing without events does the same through :meth:`Engine.advance`.

Instances created by an event are only visible to later events. A subscription added
while instances are in flight only sees instances started after it was added, exactly as
if it had its own automaton.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Iterable
from typing import Any, NamedTuple

from matchers.collector import no_cyclic_gc
from matchers.errors import SubscriptionError

from . import algebra as A
from .automaton import Bucket, Inst, Node, Out, Start
from .compiler import Chain, chains, node_key, start_key, top, view_is_static, view_static_atoms
from .language import TICK_MS, parse
from .static import MatcherFilters, StaticFilters, tag


class Match(NamedTuple):
    """A completed pattern: the subscription, the output record and its witness."""

    sub_id: str
    attrs: dict[str, Any]
    t0: int
    t1: int
    witness: tuple[str, ...]


_new = tuple.__new__  # builds a Match without its keyword handling
_DUR_OPS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
            ">=": operator.ge}


def _order_error(event: A.Event, clock: int | None) -> ValueError:
    """The error of an event with an empty interval or ending before the engine's clock."""
    if event.t1 < event.t0:
        return ValueError(f"event {event.id!r}: t1 ({event.t1}) is before t0 ({event.t0})")
    return ValueError(f"event {event.id!r} ends at {event.t1}, before the previous event ({clock})")


class _Skip:
    """The after-match skip of one subscription and the marks its matches left (see
    :class:`.algebra.Skip`); runs are told apart by the sequence number of their start
    event."""

    __slots__ = ("mode", "after", "used", "limit")

    def __init__(self, mode: str):
        self.mode = mode
        self.after = -1  # past last: runs started at this sequence number or before report nothing
        self.used: set[int] = set()  # to next: start events that reported
        self.limit = 64  # size of ``used`` at which starts without live runs are forgotten

    def admits(self, seq: int) -> bool:
        return seq > self.after if self.mode == "past_last" else seq not in self.used

    def mark(self, seq: int, after: int) -> None:
        if self.mode == "past_last":
            self.after = max(self.after, after)
        else:
            self.used.add(seq)


class _Group:
    """Nodes of one stream sharing the attributes of their equality predicates."""

    __slots__ = ("attrs", "active")

    def __init__(self, attrs: tuple[str, ...]):
        self.attrs = attrs
        self.active: dict[tuple | None, dict[str, Bucket]] = {}  # key -> node id -> the node's bucket


class Engine:
    """Stateful subscriptions compiled to one merged automaton.

    Parameters
    ----------
    merge : share nodes between subscriptions with equivalent prefixes.
    indexed : use the static-predicate index and the affected-instance index (without
        them every start edge and every instance of the event's stream is checked).
    static_matcher : name of a project matcher (``matchers.base.names()``) to evaluate
        the static predicates of a batch of events in one call (:meth:`process_batch`);
        ``None`` uses the engine's own access-predicate index, event by event.
    tick_ms : milliseconds per tick, for the durations with a unit in subscriptions' texts.
    flat : run the subscriptions that allow it (:func:`.flat.flat_chain`) in a
        :class:`.flat.FlatEngine` (instances as rows, the step compiled; only with the
        indexes and the engine's own static index). It pays with many subscriptions and
        events in batches (:meth:`process_batch`): a call costs it 10-15 µs before any
        matching, more than the Python engine spends on a whole event when there are few
        subscriptions.
    """

    closures = True  # nodes compile their predicates (the flat engine's kernels need none)

    def __init__(self, merge: bool = True, indexed: bool = True, static_matcher: str | None = None,
                 tick_ms: int = TICK_MS, flat: bool = False):
        self.tick_ms = tick_ms
        self.merge = merge
        self.indexed = indexed
        self.static: StaticFilters | MatcherFilters = (
            MatcherFilters(static_matcher) if static_matcher else StaticFilters()
        )
        self._next_cid = 0
        self._cid_owner: dict[int, Start] = {}  # the start edge of each static conjunction
        self.starts: dict[str, Start] = {}
        self.nodes: dict[str, Node] = {}
        self._always: dict[str, dict[str, Start]] = {}  # starts without static atoms
        self._groups: dict[tuple[str, tuple[str, ...]], _Group] = {}
        self._groups_of_stream: dict[str, list[_Group]] = {}
        self._subs: dict[str, tuple[tuple, ...]] = {}  # sub -> links of its chains (see _link)
        # instances with a deadline by the last time they can fire (in order of insertion),
        # those times in a heap: one entry per time, not per instance
        self._expiry: dict[Any, list[Inst]] = {}  # times are ticks, or floats from a fractional DUR bound
        self._deadlines: list = []
        self._ticket = itertools.count()  # tie-breakers of the timers (in order of insertion)
        self._timers: list = []  # (deadline, tie-breaker, instance) of the UNLESS instances
        self.epoch = 0
        self.clock: int | None = None
        self.seq = -1  # sequence number of the latest event
        self._live = 0  # instances of this engine's own nodes
        self._skips: dict[str, _Skip] = {}
        self._publishes: dict[str, str] = {}  # subscription -> the stream it publishes
        self._reads: dict[str, frozenset[str]] = {}  # subscription -> the streams it reads
        self._feed: list[tuple[Match, int]] = []  # records published by the current step, start sequence numbers
        self._slow = False  # some subscription skips or publishes: accepts look at each subscription
        self._hits: list[tuple[_Skip, int]] = []  # skip marks of the matches of the current step
        self.starting = True  # False: no start edge fires (no new run starts; those in flight go on)
        self.flat: Any = None  # made with the first flat subscription
        self._flat_on = flat and indexed and static_matcher is None
        self._flat_subs: dict[str, None] = {}  # the subscriptions the flat engine holds

    @property
    def instances(self) -> int:
        """Live instances."""
        return self._live + (self.flat.instances if self.flat is not None else 0)

    # ------------------------------------------------------------ subscriptions
    def __len__(self) -> int:
        return len(self._subs) + len(self._flat_subs)

    def __contains__(self, sub_id: object) -> bool:
        return sub_id in self._subs or sub_id in self._flat_subs

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
                and not reads & set(self._publishes.values())):
            from .flat import FlatEngine, flat_chain

            if flat_chain(chs[0]):
                if self.flat is None:
                    self.flat = FlatEngine(self.merge, self.tick_ms)
                self.flat.epoch = self.epoch
                self.flat.add(sub_id, expr, since)
                self._flat_subs[sub_id] = None
                return
        self._link_all(sub_id, chs, mode, since)
        if publish is not None:
            self._publishes[sub_id] = publish
            self._slow = True
            self._unflatten(publish)

    def _link_all(self, sub_id: str, chs: list[Chain], mode: str | None, since: int) -> None:
        owner = None if self.merge else sub_id
        self._subs[sub_id] = tuple(self._link(sub_id, c, owner, since) for c in chs)
        if mode is not None:
            self._skips[sub_id] = _Skip(mode)
        self._slow = bool(self._skips or self._publishes)

    def _unflatten(self, stream: str) -> None:
        """Move the flat subscriptions reading ``stream`` (now published by a subscription:
        its records are fed to this engine's nodes only) here, with their instances."""
        movers = [s for s in self._flat_subs if stream in self._reads[s]]
        if not movers:
            return
        from .flat import FLAT_PREFIX

        flat = self.flat
        rows = [("n" + r[0][len(FLAT_PREFIX):], *r[1:]) for r in flat.export_instances()]
        for sub in movers:
            ((sid, path),) = flat._subs[sub]  # one chain: rebuilt from its start edge and nodes
            chain = Chain(flat.starts[sid].view, tuple((flat.nodes[nid].spec, post) for nid, post in path))
            since = flat.nodes[path[-1][0]].outs[path[-1][1]].accept[sub]
            del self._flat_subs[sub]
            flat.remove(sub)
            self._link_all(sub, [chain], None, since)
        held: dict[str, set] = {}  # a node this engine had already: the instances it holds
        for nid, first, cur, t0, t1, wit, born, seq in rows:
            node = self.nodes.get(nid)
            if node is None:
                continue
            if nid not in held:
                held[nid] = {(i.wit, i.t0) for b in node.buckets.values() for i in b.all()}
            if (wit, t0) not in held[nid]:
                held[nid].add((wit, t0))
                self._insert(node, first, cur, t0, t1, wit, born, seq)

    def _check_cycle(self, sub: str, reads: frozenset[str], publish: str | None) -> None:
        """Raise when ``sub`` (reading ``reads``, publishing ``publish``) would read,
        through other subscriptions, what it publishes itself."""
        if publish is None:
            return
        publishes = {**self._publishes, sub: publish}
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
        links = self._subs.pop(sub_id, None)
        if links is None:
            return False
        self._skips.pop(sub_id, None)
        self._publishes.pop(sub_id, None)
        self._reads.pop(sub_id, None)
        self._slow = bool(self._skips or self._publishes)
        for link in links:
            self._unlink_chain(sub_id, *link)
        return True

    def _link(self, sub: str, c: Chain, owner: str | None, since: int) -> tuple:
        """Link one chain of ``sub``; what unlinking it needs: ``(start id, ((node id, post), ...))``."""
        sid = start_key(c.start, owner)
        start = self.starts.get(sid)
        if start is None:
            start = self._new_start(sid, c)
        start.subs.add(sub)
        if not c.ops:
            start.out.accept[sub] = since
            return sid, ()
        ids = [node_key(c, k, owner) for k in range(len(c.ops))]
        start.out.dests.setdefault(ids[0], set()).add(sub)
        path = []
        changed = [start.out]
        for k, (spec, post) in enumerate(c.ops):
            node = self.nodes.get(ids[k])
            if node is None:
                node = self._new_node(ids[k], spec)
            node.subs.add(sub)
            out = node.outs.get(post)
            if out is None:
                out = node.outs[post] = Out(post)
            if k + 1 < len(ids):
                out.dests.setdefault(ids[k + 1], set()).add(sub)
                changed.append(out)
            else:
                out.accept[sub] = since
            node.update_deadline()
            path.append((ids[k], out.post))  # the node's own post: subscriptions keep no expressions
        for out in changed:  # every destination exists now
            self._retarget(out)
        return sid, tuple(path)

    def _retarget(self, out: Out) -> None:
        """Set ``out.targets`` from ``out.dests`` (after a change of it)."""
        nodes = self.nodes
        out.targets = tuple(nodes[nid] for nid in out.dests)

    def _unlink_chain(self, sub: str, sid: str, path: tuple) -> None:
        ids = [nid for nid, _ in path]
        start = self.starts.get(sid)  # None: another chain of ``sub`` shared it and removed it
        if start is not None:
            _drop(start.out, ids[0] if ids else None, sub)
            self._retarget(start.out)
            start.subs.discard(sub)
            if not start.subs:
                self._delete_start(start)
        for k, (_nid, post) in enumerate(path):
            node = self.nodes.get(ids[k])
            if node is None:
                continue
            out = node.outs.get(post)
            if out is not None:
                _drop(out, ids[k + 1] if k + 1 < len(ids) else None, sub)
                self._retarget(out)
                if out.empty():
                    del node.outs[post]
            node.subs.discard(sub)
            if not node.subs:
                self._delete_node(node)
            else:
                node.update_deadline()

    def _new_cid(self, owner: Start, stream: str, atoms) -> int:
        if not atoms:
            return -1
        cid = self._next_cid
        self._next_cid += 1
        self.static.add(cid, stream, tuple(atoms))
        self._cid_owner[cid] = owner
        return cid

    def _new_start(self, sid: str, c: Chain) -> Start:
        start = Start(sid, c.start)
        atoms = view_static_atoms(c.start) if self.indexed else []
        start.cid = self._new_cid(start, c.start.stream, atoms)
        if start.cid >= 0 and isinstance(self.static, StaticFilters) and view_is_static(c.start):
            start.fn = None  # the engine's own static index decides alone
        if start.cid < 0:
            self._always.setdefault(c.start.stream, {})[sid] = start
        self.starts[sid] = start
        return start

    def _delete_start(self, start: Start) -> None:
        del self.starts[start.id]
        if start.cid >= 0:
            self.static.remove(start.cid)
            del self._cid_owner[start.cid]
        else:
            del self._always[start.view.stream][start.id]

    def _new_node(self, nid: str, spec) -> Node:
        node = Node(nid, spec, self.indexed, self.closures)
        gkey = (node.stream, node.eq_attrs)
        if gkey not in self._groups:
            self._groups[gkey] = _Group(node.eq_attrs)
            self._groups_of_stream.setdefault(node.stream, []).append(self._groups[gkey])
        node.group = self._groups[gkey]
        self.nodes[nid] = node
        return node

    def _delete_node(self, node: Node) -> None:
        for bucket in list(node.buckets.values()):
            for inst in bucket.all():
                self._unlink(inst)
        del self.nodes[node.id]

    # ------------------------------------------------------------ instances
    def _insert(self, node: Node, first: dict, cur: dict, t0: int, t1: int, wit: tuple, born: int, seq: int) -> None:
        key: tuple | None = None  # stays None for an UNLESS whose equality cannot hold
        names = node.eq_names
        if names is not None and len(names) == 1:
            v = cur.get(names[0])
            if v is None or v != v:  # the equality can never hold (unknown, NaN)
                if node.window is None:
                    return  # the instance could only loop
            else:
                key = (("\x00bool", v) if v.__class__ is bool else v,)  # tag(v)
        else:
            parts = []
            for fn in node.eq_fns:
                v = fn(first, cur, cur, None)
                if v is None or v != v:
                    if node.window is None:
                        return
                    break  # UNLESS: nothing can kill it, it waits in a bucket no event looks up
                parts.append(tag(v))
            else:
                key = tuple(parts)
        inst = Inst(node, first, cur, t0, t1, wit, born, seq)
        rng_fn = node.rng_fn
        sorted_bound = False
        if rng_fn is not None:
            b = rng_fn(first, cur, cur, None)
            if b is None and node.window is None:
                return
            inst.bound = b
            sorted_bound = isinstance(b, (int, float)) and not isinstance(b, bool)
        inst.key = key
        bucket = node.buckets.get(key)
        if bucket is None:
            bucket = node.buckets[key] = Bucket(node)
            active = node.group.active
            held = active.get(key)
            if held is None:
                held = active[key] = {}
            held[node.id] = bucket
        if sorted_bound:
            bucket.add(inst, True)
        else:
            bucket.plain[inst] = None
        inst.alive = True
        self._live += 1
        if node.deadline is not None:
            self._schedule(inst, t0 + node.deadline - 1)
        if node.window is not None:
            heapq.heappush(self._timers, (t1 + node.window, next(self._ticket), inst))

    def _unlink(self, inst: Inst) -> None:
        node = inst.node
        key = inst.key
        bucket = node.buckets[key]
        plain = bucket.plain
        if inst in plain:
            del plain[inst]
        else:
            bucket.discard(inst)
        inst.alive = False
        self._live -= 1
        if not plain and not bucket.insts and not bucket.never:
            del node.buckets[key]
            active = node.group.active
            nodes = active[key]
            del nodes[node.id]
            if not nodes:
                del active[key]

    def next_expiry(self) -> int | None:
        """The earliest time after which :meth:`advance` has something to do: the last
        time the oldest bounded instance can still fire, or the earliest ``UNLESS``
        deadline (``None``: none)."""
        out = None
        deadlines, expiry = self._deadlines, self._expiry
        while deadlines:
            insts = expiry[deadlines[0]]
            insts[:] = [inst for inst in insts if inst.alive]
            if insts:
                out = deadlines[0]
                break
            del expiry[heapq.heappop(deadlines)]
        timers = self._timers
        while timers and not timers[0][2].alive:
            heapq.heappop(timers)
        if timers and (out is None or timers[0][0] < out):
            out = timers[0][0]
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
        out = self._fire(now)
        self.expire(now)
        return out

    def _fire(self, last: int, before: bool = False) -> list[Match]:
        """Fire the ``UNLESS`` instances with a deadline at or before ``last`` (strictly
        before with ``before``): those of one deadline at a time, in order, each time
        leaving their skip marks and feeding back what they publish."""
        timers = self._timers
        out: list[Match] = []
        while True:
            while timers and not timers[0][2].alive:
                heapq.heappop(timers)
            if not timers or (timers[0][0] >= last if before else timers[0][0] > last):
                return out
            deadline = timers[0][0]
            outputs: dict = {}
            pending: list = []
            while timers and timers[0][0] == deadline:
                inst = heapq.heappop(timers)[2]
                if inst.alive:
                    self._unlink(inst)
                    self._forward(inst.node.outs.values(), inst.cur, inst.t0, deadline, inst.wit, inst.born, inst.seq,
                                  pending, outputs)
            for args in pending:
                self._insert(*args)
            if self._hits:
                self._mark(self.seq)
            if self._feed:
                self._publish(outputs)
            out += [m for same in outputs.values() for ms in same.values() for m in ms]

    def expire(self, now: int) -> None:
        """Drop the instances that can no longer fire at time ``now`` or later."""
        self._expire(now)
        if self._flat_subs:
            self.flat.expire(now)

    def _schedule(self, inst: Inst, last: float) -> None:
        """Have :meth:`_expire` look at ``inst`` after time ``last`` (a NaN never passes:
        the instance is never dropped for its age, as without a deadline)."""
        insts = self._expiry.get(last)
        if insts is None:
            if last != last:
                return
            self._expiry[last] = [inst]
            heapq.heappush(self._deadlines, last)
        else:
            insts.append(inst)

    def _expire(self, now: int) -> None:
        deadlines, expiry = self._deadlines, self._expiry
        while deadlines and deadlines[0] < now:
            for inst in expiry.pop(heapq.heappop(deadlines)):
                if not inst.alive:
                    continue
                d = inst.node.deadline  # may have changed with the subscriptions since
                if d is None:
                    continue
                if inst.t0 + d - 1 < now:
                    self._unlink(inst)
                else:
                    self._schedule(inst, inst.t0 + d - 1)

    # ------------------------------------------------------------ matching
    def process_batch(self, events: list[A.Event]) -> list[tuple[int, Match]]:
        """Process events in order, their static predicates evaluated in one pass first.

        Returns ``(index in events, match)`` pairs. Subscriptions must not change
        during the batch. The cyclic garbage collector is paused while the batch runs:
        a batch leaves no cyclic garbage, and most of what it allocates (records,
        matches of expired runs) is freed before it returns, so a collection in between
        would only traverse short-lived objects and the old ones they point to.
        """
        with no_cyclic_gc():
            return self._batch(events)

    def _batch(self, events: list[A.Event]) -> list[tuple[int, Match]]:
        if self._flat_subs and not self._subs and not self._timers:  # flat subscriptions only: one kernel call
            return self._flat_batch(events)
        sats: list[set[int] | None] = [None] * len(events)
        if isinstance(self.static, MatcherFilters) and self.indexed:
            sats = list(self.static.match_batch([(e.stream, e.attrs) for e in events]))
        out: list[tuple[int, Match]] = []
        for i, (e, sat) in enumerate(zip(events, sats, strict=True)):
            out.extend((i, m) for m in self.process(e, sat))
        return out

    def _flat_batch(self, events: list[A.Event]) -> list[tuple[int, Match]]:
        """:meth:`process_batch` when every subscription is flat: the events before one out of
        order run, then its error is raised."""
        rows = []
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
        out = self._run_flat(rows) if rows else []
        if bad is not None:
            raise bad
        return out

    def _advance_clock(self, event: A.Event) -> None:
        if event.t1 < event.t0 or (self.clock is not None and event.t1 < self.clock):
            raise _order_error(event, self.clock)
        self.clock = event.t1

    def _run_flat(self, rows: list[tuple]) -> list[tuple[int, Match]]:
        flat = self.flat
        flat.epoch, flat.starting = self.epoch, self.starting
        return flat.run_events(rows)

    def process(self, event: A.Event, sat: set[int] | None = None) -> list[Match]:
        """Advance every instance over one event; the patterns it completes.

        ``sat``, when given, is the set of static conjunctions the event satisfies.

        Raises
        ------
        ValueError
            When the event ends before the previous one (events must arrive in
            temporal order) or its interval is empty.
        """
        self._advance_clock(event)
        t0, t1 = event.t0, event.t1
        fired = self._fire(t1, before=True) if self._timers else None
        self.seq += 1
        deadlines = self._deadlines
        if deadlines and deadlines[0] < t1:
            self._expire(t1)
        out = self._step(event.stream, event.attrs, t0, t1, (event.id,), self.seq, sat) if self._subs else []
        if self._flat_subs:
            out += [m for _, m in self._run_flat([(event.stream, event.attrs, t0, t1, (event.id,), self.seq)])]
        return fired + out if fired else out

    def _step(self, stream: str, attrs: dict, t0: int, t1: int, ewit: tuple, seq: int,
              sat: set[int] | None = None, outputs: dict | None = None) -> list[Match]:
        """One event (or published record, ``ewit`` its witness, ``seq`` the start
        sequence number of the runs it starts) through the automaton; what it completes,
        and what the records it publishes complete. A published record is given the
        ``outputs`` of the step that published it (it adds to them and returns nothing):
        a record derived through two publications of one step is reported once."""
        if sat is None:
            sat = self.static.match(stream, attrs) if self.indexed else set()
        root = outputs is None
        if outputs is None:
            outputs = {}
        pending: list = []
        views: dict = {}
        # affected instances
        affected = []
        for group in self._groups_of_stream.get(stream, ()):
            names = group.attrs
            if len(names) == 1:
                v = attrs.get(names[0])
                if v is None:
                    continue
                key: tuple = (("\x00bool", v) if v.__class__ is bool else v,)  # tag(v)
            else:
                parts = []
                for a in names:
                    v = attrs.get(a)
                    if v is None:
                        break
                    parts.append(tag(v))
                if len(parts) < len(names):
                    continue
                key = tuple(parts)
            active = group.active.get(key)
            if not active:
                continue
            for bucket in active.values():  # nothing changes them before the transitions
                node = bucket.node
                if node.static_fn is not None and not node.static_fn(attrs):
                    continue
                vf = node.view_fn
                if vf is None:
                    v2: dict | None = attrs
                elif vf in views:
                    v2 = views[vf]
                else:
                    v2 = views[vf] = vf(attrs, t0, t1)
                if v2 is None:
                    continue
                theta = node.theta
                rng_op = node.rng_op
                # without a range predicate every instance is plain (see _insert)
                cands = bucket.plain if rng_op is None else bucket.candidates(rng_op, attrs.get(node.rng_attr))
                for inst in cands:
                    if inst.t1 >= t0:
                        continue
                    dur = t1 - inst.t0 + 1
                    if theta is None or theta(inst.first, inst.cur, v2, dur) is True:
                        affected.append((node, inst, v2, dur))
        # transitions
        for node, inst, v2, dur in affected:
            self._unlink(inst)
            if node.kind == "unless":  # killed: the absence did not happen
                continue
            wit = inst.wit + ewit
            combined = {**inst.cur, **v2}
            if node.kind == "fold":
                if node.cont(inst.first, inst.cur, v2, dur) is not True:
                    continue
                combined = node.aggs(inst.first, inst.cur, v2, dur, combined)
                pending.append((node, inst.first, combined, inst.t0, t1, wit, inst.born, inst.seq))
            self._forward(node.outs.values(), combined, inst.t0, t1, wit, inst.born, inst.seq, pending, outputs)
        # start edges
        if self.starting:
            starts: list[Start] = list(map(self._cid_owner.__getitem__, sat)) if sat else []
            always = self._always.get(stream)
            if always:
                starts.extend(always.values())
            epoch = self.epoch
            for start in starts:
                rec = attrs if start.fn is None else start.fn(attrs, t0, t1)
                if rec is None:
                    continue
                out = start.out
                if out.accept:
                    self._forward((out,), rec, t0, t1, ewit, epoch, seq, pending, outputs, raw=True)
                else:  # the same without the call
                    for node in out.targets:
                        pending.append((node, rec, rec, t0, t1, ewit, epoch, seq))
        for args in pending:
            self._insert(*args)
        if self._hits:
            self._mark(self.seq)
        if self._feed:
            self._publish(outputs)
        return [m for same in outputs.values() for ms in same.values() for m in ms] if root else []

    def _publish(self, outputs: dict) -> None:
        """Feed the records just published back as events of their streams, in order of
        subscription, witness, start and attributes, each followed by what it publishes;
        what they complete is added to ``outputs``, those of the step that published them."""
        feed = sorted(self._feed, key=lambda ms: (ms[0].sub_id, ms[0].witness, ms[0].t0, repr(sorted(ms[0].attrs.items()))))
        self._feed = []
        for m, seq in feed:
            self._step(self._publishes[m.sub_id], m.attrs, m.t0, m.t1, m.witness, seq, outputs=outputs)

    def _mark(self, after: int) -> None:
        """Leave the skip marks of the matches just reported (``after``: the sequence
        number of the last event at or before which they were reported)."""
        for sk, seq in self._hits:
            sk.mark(seq, after)
        self._hits.clear()
        for sk in self._skips.values():
            if len(sk.used) > sk.limit:  # forget the start events whose runs are all gone
                live = {inst.seq for node in self.nodes.values() for b in node.buckets.values() for inst in b.all()}
                live.update(seq for _, seq in self._feed)  # published records yet to start runs
                sk.used &= live
                sk.limit = 2 * len(sk.used) + 64

    def _forward(self, outs: Iterable[Out], attrs: dict, t0: int, t1: int, wit: tuple, born: int, seq: int,
                 pending: list, outputs: dict, raw: bool = False) -> None:
        slow = self._slow
        dur = t1 - t0 + 1
        rec: dict | None
        for out in outs:
            durs = out.durs
            if raw or durs == ():
                rec = attrs
            elif durs is None:
                rec = out.fn(attrs, t0, t1)
                if rec is None:
                    continue
            else:  # DUR tests only (see dur_tests)
                rec = attrs
                for op, k in durs:
                    if not (dur <= k if op == "<=" else _DUR_OPS[op](dur, k)):
                        rec = None
                        break
                if rec is None:
                    continue
            for node in out.targets:
                pending.append((node, rec, rec, t0, t1, wit, born, seq))
            if not out.accept:
                continue
            # subscriptions added after this instance started do not see it
            key = (wit, t0)
            same = outputs.get(key)
            if not slow:  # no skips, no publications
                if same is None:
                    outputs[key] = {sub: [_new(Match, (sub, rec, t0, t1, wit))]
                                    for sub, since in out.accept.items() if born >= since}
                    continue
                for sub, since in out.accept.items():  # as below
                    if born < since:
                        continue
                    ms = same.get(sub)
                    if ms is None:
                        same[sub] = [_new(Match, (sub, rec, t0, t1, wit))]
                    elif all(m.attrs is not rec and not A.same_attrs(m.attrs, rec) for m in ms):
                        ms.append(_new(Match, (sub, rec, t0, t1, wit)))
                continue
            if same is None:
                same = outputs[key] = {}
            skips, publishes = self._skips, self._publishes
            # a record is reported once (another derivation of the same witness may give an equal one)
            for sub, since in out.accept.items():
                if born < since:
                    continue
                sk = skips.get(sub)
                if sk is not None:
                    if not sk.admits(seq):
                        continue
                    self._hits.append((sk, seq))
                ms = same.get(sub)
                if ms is None:
                    m = Match(sub, rec, t0, t1, wit)
                    same[sub] = [m]
                elif all(m.attrs is not rec and not A.same_attrs(m.attrs, rec) for m in ms):
                    m = Match(sub, rec, t0, t1, wit)
                    ms.append(m)
                else:
                    continue
                if sub in publishes:
                    self._feed.append((m, seq))

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
        t1, witness, born, start sequence number)``, then the marks of the subscriptions
        with an after-match skip that have any ``(None, subscription, after, used starts)``."""
        out: list[tuple] = []
        for node in self.nodes.values():
            for bucket in node.buckets.values():
                for inst in bucket.all():
                    out.append((node.id, inst.first, inst.cur, inst.t0, inst.t1, inst.wit, inst.born, inst.seq))
        for sub, sk in self._skips.items():
            if sk.after >= 0 or sk.used:
                out.append((None, sub, sk.after, sorted(sk.used)))
        if self._flat_subs:
            out += self.flat.export_instances()
        return out

    def load_instances(self, instances: Iterable[tuple], clock: int | None) -> int:
        """Replace all instances by ``instances`` (from :meth:`export_instances`).

        Instances of nodes that no longer exist (and marks of subscriptions without a
        skip) are skipped; rows without a sequence number (an older engine's) start at 0.
        A flat node's rows (:data:`.flat.FLAT_PREFIX`) go to the flat engine; a row of a
        node id both engines hold goes to both when the rows come from an engine without a
        flat one (they evolved as one instance). Returns how many instances were loaded.
        """
        from .flat import FLAT_PREFIX

        self.clear_instances()
        self.clock = clock
        n = 0
        rows = instances if isinstance(instances, list) else list(instances)
        flat_rows: list[tuple] = []
        if self._flat_subs:
            old = not any(r[0] is not None and r[0].startswith(FLAT_PREFIX) for r in rows)
            fnodes = self.flat.nodes
            for r in rows:
                nid = r[0]
                if nid is None:
                    continue
                if nid.startswith(FLAT_PREFIX):
                    flat_rows.append(("n" + nid[len(FLAT_PREFIX):], *r[1:7], r[7] if len(r) > 7 else 0))
                elif old and nid in fnodes:
                    flat_rows.append((*r[:7], r[7] if len(r) > 7 else 0))
            if flat_rows:
                n += self.flat.load_rows(flat_rows)
                self.seq = max(self.seq, *(r[7] for r in flat_rows))
        for row in rows:
            if row[0] is None:
                _, sub, after, used = row
                sk = self._skips.get(sub)
                if sk is not None:
                    sk.after, sk.used = after, set(used)
                    self.seq = max(self.seq, after, *used)
                continue
            nid, first, cur, t0, t1, wit, born, *seq = row
            node = self.nodes.get(nid)
            if node is not None:
                s = seq[0] if seq else 0
                self._insert(node, first, cur, t0, t1, tuple(wit), born, s)
                self.seq = max(self.seq, s)
                n += 1
        return n

    def clear_instances(self) -> None:
        """Drop every instance (the subscriptions stay)."""
        if self._flat_subs:
            self.flat.clear_instances()
        for node in self.nodes.values():
            node.buckets.clear()
        for group in self._groups.values():
            group.active.clear()
        self._expiry.clear()
        self._deadlines.clear()
        self._timers.clear()
        self._live = 0
        self.clock = None
        self.seq = -1
        for sk in self._skips.values():
            sk.after, sk.used = -1, set()


def _drop(out: Out, dest: str | None, sub: str) -> None:
    if dest is None:
        out.accept.pop(sub, None)
        return
    subs = out.dests.get(dest)
    if subs is not None:
        subs.discard(sub)
        if not subs:
            del out.dests[dest]
