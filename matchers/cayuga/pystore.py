"""The Python instance store: every kind of subscription, instances as Python objects.

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
passing without events does the same through :meth:`PythonStore.fire`.

Instances created by an event are only visible to later events. A subscription added
while instances are in flight only sees instances started after it was added, exactly as
if it had its own automaton. The flat store's kernels (:mod:`.flat_kernels`) apply the
same rule to rows; the comparisons both make are :mod:`.rules`'.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Sequence

from . import algebra as A
from .automaton import Automaton, Bucket, Inst, Match, Node, Out, Start, new
from .compiler import Chain, view_is_static, view_static_atoms
from .rules import compare
from .static import MatcherFilters, StaticFilters, tag
from .store import Row


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


class PythonStore:
    """An :class:`~.store.InstanceStore` of Python objects; see the module's docstring.

    ``indexed``: use the static-predicate index and the affected-instance index (without
    them every start edge and every instance of the event's stream is checked);
    ``static``: the static predicates' index (the engine's own, or a project matcher's).
    """

    def __init__(self, merge: bool, indexed: bool, static: StaticFilters | MatcherFilters):
        self.indexed = indexed
        self.static = static
        self.graph = Automaton(merge, self)
        self.starts, self.nodes, self._subs = self.graph.starts, self.graph.nodes, self.graph.subs
        self._next_cid = 0
        self._cid_owner: dict[int, Start] = {}  # the start edge of each static conjunction
        self._always: dict[str, dict[str, Start]] = {}  # starts without static atoms
        self._groups: dict[tuple[str, tuple[str, ...]], _Group] = {}
        self._groups_of_stream: dict[str, list[_Group]] = {}
        # instances with a deadline by the last time they can fire (in order of insertion),
        # those times in a heap: one entry per time, not per instance
        self._expiry: dict[object, list[Inst]] = {}  # times are ticks, or floats from a fractional DUR bound
        self._deadlines: list = []
        self._ticket = itertools.count()  # tie-breakers of the timers (in order of insertion)
        self._timers: list = []  # (deadline, tie-breaker, instance) of the UNLESS instances
        self.epoch = 0  # of the runs the current step starts
        self.starting = True  # False: no start edge fires
        self.seq = -1  # sequence number of the latest event
        self._live = 0
        self._skips: dict[str, _Skip] = {}
        self._publishes: dict[str, str] = {}  # subscription -> the stream it publishes
        self._feed: list[tuple[Match, int]] = []  # records published by the current step, start sequence numbers
        self._slow = False  # some subscription skips or publishes: accepts look at each subscription
        self._hits: list[tuple[_Skip, int]] = []  # skip marks of the matches of the current step

    @property
    def instances(self) -> int:
        """Live instances."""
        return self._live

    # ------------------------------------------------------------ subscriptions
    def add(self, sub_id: str, chs: list[Chain], since: int, mode: str | None = None,
            publish: str | None = None) -> None:
        """Link a subscription's chains; ``mode``: its after-match skip, ``publish``: the
        stream its records are fed back to."""
        self.graph.link(sub_id, chs, since)
        if mode is not None:
            self._skips[sub_id] = _Skip(mode)
        if publish is not None:
            self._publishes[sub_id] = publish
        self._slow = bool(self._skips or self._publishes)

    def remove(self, sub_id: str) -> bool:
        if self.graph.unlink(sub_id) is None:
            return False
        self._skips.pop(sub_id, None)
        self._publishes.pop(sub_id, None)
        self._slow = bool(self._skips or self._publishes)
        return True

    def _new_cid(self, owner: Start, stream: str, atoms) -> int:
        if not atoms:
            return -1
        cid = self._next_cid
        self._next_cid += 1
        self.static.add(cid, stream, tuple(atoms))
        self._cid_owner[cid] = owner
        return cid

    def new_start(self, sid: str, c: Chain) -> Start:
        start = Start(sid, c.start)
        atoms = view_static_atoms(c.start) if self.indexed else []
        start.cid = self._new_cid(start, c.start.stream, atoms)
        if start.cid >= 0 and isinstance(self.static, StaticFilters) and view_is_static(c.start):
            start.fn = None  # the engine's own static index decides alone
        if start.cid < 0:
            self._always.setdefault(c.start.stream, {})[sid] = start
        return start

    def delete_start(self, start: Start) -> None:
        if start.cid >= 0:
            self.static.remove(start.cid)
            del self._cid_owner[start.cid]
        else:
            del self._always[start.view.stream][start.id]

    def new_node(self, nid: str, spec) -> Node:
        node = Node(nid, spec, self.indexed)
        gkey = (node.stream, node.eq_attrs)
        if gkey not in self._groups:
            self._groups[gkey] = _Group(node.eq_attrs)
            self._groups_of_stream.setdefault(node.stream, []).append(self._groups[gkey])
        node.group = self._groups[gkey]
        return node

    def delete_node(self, node: Node) -> None:
        for bucket in list(node.buckets.values()):
            for inst in bucket.all():
                self._unlink(inst)

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
        """The earliest time after which :meth:`fire` or :meth:`expire` has something to do: the last
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
        return out

    def fire(self, last: int, before: bool = False) -> list[Match]:
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
            out += self._finish(pending, outputs)

    def _schedule(self, inst: Inst, last: float) -> None:
        """Have :meth:`expire` look at ``inst`` after time ``last`` (a NaN never passes:
        the instance is never dropped for its age, as without a deadline)."""
        insts = self._expiry.get(last)
        if insts is None:
            if last != last:
                return
            self._expiry[last] = [inst]
            heapq.heappush(self._deadlines, last)
        else:
            insts.append(inst)

    def expire(self, now: int) -> None:
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
    def run(self, rows: Sequence[Row], epoch: int, starting: bool,
            sats: Sequence[set[int] | None] | None = None) -> list[tuple[int, Match]]:
        """Events in order; ``sats``: the static conjunctions each satisfies (else computed)."""
        out: list[tuple[int, Match]] = []
        for i, row in enumerate(rows):
            out.extend((i, m) for m in self.event(row, epoch, starting, sats[i] if sats else None))
        return out

    def event(self, row: Row, epoch: int, starting: bool, sat: set[int] | None = None) -> list[Match]:
        """One event: the ``UNLESS`` instances due before its end fire, the instances too
        old for it go, then its step; the patterns completed."""
        stream, attrs, t0, t1, ewit, seq = row
        self.epoch, self.starting = epoch, starting
        fired = None
        if self._timers:
            self.seq = seq - 1
            fired = self.fire(t1, before=True)
        self.seq = seq
        deadlines = self._deadlines
        if deadlines and deadlines[0] < t1:
            self.expire(t1)
        out = self._step(stream, attrs, t0, t1, ewit, seq, sat) if self._subs else []
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
        return self._finish(pending, outputs, root)

    def _finish(self, pending: list, outputs: dict, flat: bool = True) -> list[Match]:
        """End a step: insert the ``pending`` instances, leave the skip marks, feed back what
        was published, and return the matches in ``outputs`` (none unless ``flat``: a fed-back
        step leaves them to the step that published)."""
        for args in pending:
            self._insert(*args)
        if self._hits:
            self._mark(self.seq)
        if self._feed:
            self._publish(outputs)
        return [m for same in outputs.values() for ms in same.values() for m in ms] if flat else []

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
                    if not compare(op, dur, k):
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
                    outputs[key] = {sub: [new(Match, (sub, rec, t0, t1, wit))]
                                    for sub, since in out.accept.items() if born >= since}
                    continue
                for sub, since in out.accept.items():  # as below
                    if born < since:
                        continue
                    ms = same.get(sub)
                    if ms is None:
                        same[sub] = [new(Match, (sub, rec, t0, t1, wit))]
                    elif all(m.attrs is not rec and not A.same_attrs(m.attrs, rec) for m in ms):
                        ms.append(new(Match, (sub, rec, t0, t1, wit)))
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


    # ------------------------------------------------------------ state
    def export_instances(self) -> list[tuple]:
        """Every live instance ``(node id, first, cur, t0, t1, witness, born, start sequence
        number)``, then the marks of the subscriptions with an after-match skip that have
        any ``(None, subscription, after, used starts)``."""
        out: list[tuple] = []
        for node in self.nodes.values():
            for bucket in node.buckets.values():
                for inst in bucket.all():
                    out.append((node.id, inst.first, inst.cur, inst.t0, inst.t1, inst.wit, inst.born, inst.seq))
        for sub, sk in self._skips.items():
            if sk.after >= 0 or sk.used:
                out.append((None, sub, sk.after, sorted(sk.used)))
        return out

    def load_rows(self, rows: Iterable[tuple]) -> int:
        """Insert exported rows and skip marks; rows of unknown nodes (and marks of
        subscriptions without a skip) are skipped, rows without a sequence number (an
        older engine's) start at 0. ``self.seq`` becomes at least the latest one seen."""
        n = 0
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

    def merge_rows(self, rows: Iterable[tuple]) -> None:
        """Insert the rows of the nodes held here that no instance of theirs already holds
        (same witness and start): rows of another store whose subscriptions moved here."""
        held: dict[str, set] = {}
        for nid, first, cur, t0, t1, wit, born, seq in rows:
            node = self.nodes.get(nid)
            if node is None:
                continue
            if nid not in held:
                held[nid] = {(i.wit, i.t0) for b in node.buckets.values() for i in b.all()}
            if (wit, t0) not in held[nid]:
                held[nid].add((wit, t0))
                self._insert(node, first, cur, t0, t1, wit, born, seq)

    def clear_instances(self) -> None:
        for node in self.nodes.values():
            node.buckets.clear()
        for group in self._groups.values():
            group.active.clear()
        self._expiry.clear()
        self._deadlines.clear()
        self._timers.clear()
        self._live = 0
        self.seq = -1
        for sk in self._skips.values():
            sk.after, sk.used = -1, set()
