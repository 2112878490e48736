"""``auto``: a matcher that picks the index for its subscription set and its recent events.

It holds one inner matcher (sharing its dictionary) chosen by :func:`choose` from the
set's :class:`Shape` (predicates per conjunction, operator mix, attributes) and the
:class:`Events` it matched lately (attributes per event, the share of the constrained
attributes they carry, rows and matches per event), and nothing else of the
subscriptions: adds, removals, matching and the keys are the inner matcher's (its keys
change when it is rebuilt).  The shape is kept up to date incrementally, the events'
summary from each matched batch (decayed over :data:`HALF_LIFE` events).  The next
``match`` decides again once the set has changed by :data:`DRIFT` of its size at the last
decision, or once :data:`MIN_EVENTS` events on, the events' coverage has moved by
:data:`EVENT_DRIFT` from the one decided on; if the choice differs, it rebuilds the inner
matcher with the new index.  A set growing from empty is rebuilt a logarithmic number of
times; events re-decide at most once per :data:`MIN_EVENTS` events, and only after a move
of :data:`EVENT_DRIFT` (hysteresis: noise around a rule's threshold does not flip it).

A shard's packed rows (:meth:`AutoMatcher.add_packed`) are counted from
:func:`matchers.packed.decode`'s columns, without an object per subscription, and handed to
the inner matcher's ``add_packed`` with those columns (decoded once).

:meth:`AutoMatcher.describe` says what was chosen and why (logged at each decision).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from itertools import chain, combinations
from typing import Any

import numpy as np

from matchers.auto import kernels as K
from matchers.base import Matcher, Matches, SubscriptionTable, register
from matchers.catalog import create
from matchers.collector import no_cyclic_gc
from matchers.events import Dictionary, EventBatch
from matchers.expr import INDEXED_OPS, ORDER_OPS, STRING_OPS, Kind, Op, Pred, Subscription
from matchers.packed import Decoded, decode

log = logging.getLogger(__name__)

MAX_PAIRED = 8
"""Equality attributes of a conjunction whose pairs are counted (the first, sorted)."""
CHOICES = ("bitmark", "static", "dynamic", "propagation", "vci", "opindex", "counting")
"""The indexes :func:`choose` picks from."""
DYNAMIC_FROM = 30_000
"""Subscriptions from which an equality-heavy set without a shared pair of attributes gets
``dynamic`` rather than ``propagation`` (Fabret W3, W4: propagation ahead at 10,000
subscriptions, 0.86 against 1.47 us/event, dynamic at 100,000, 5.1 against 6.9)."""
PLAIN = 0.1
"""Largest fraction of string patterns (of the predicates) and of presence tests (of the
subscriptions, ``anything-but`` included) for which an equality-heavy set gets a clustering
index (``dynamic``, ``propagation``): past it, ``counting``.  EventBridge-like rules (23%
prefixes and case-folded tests, 26% of the rules with ``exists`` or ``anything-but``, 2.3
predicates per rule), CPU us/event (``python -m scripts.bench.auto --workloads eventbridge``):
1,000 rules counting 53.5, vci 53.7, static 64.1, propagation 71.8, dynamic 75.5; 10,000
counting 93.8, vci 105, static 134, dynamic 169, propagation 170; 100,000 (2026-11-29)
counting 1,107, static 1,450, vci 1,536, propagation 1,700, dynamic 1,803 (docs/auto.md)."""
FEW_ATTRIBUTES = 64
"""Attributes up to which a set with some equalities gets ``static``: every event holds most
of them, so OpIndex's per-attribute lists are long (stock at 100,000 subscriptions: static
680 us/event, opindex 1,434; at 10,000 within 1.01x of each other)."""
DRIFT = 0.5
"""Changes (inserts and removals), as a fraction of the set's size at the last decision,
after which the choice is made again."""
COVERED_ATTRIBUTES = 80
"""A range-only set of conjunctions gets ``bitmark`` once its events carry at least
``attributes / COVERED_ATTRIBUTES`` of its constrained attributes: bitmark's pass costs per
constrained attribute, counting's per satisfied predicate of the attributes an event carries.
Measured on OpIndex Table 3 with ranges only (``theta1=0``, 1 to 4 ranges per
conjunction), 20,000 subscriptions, CPU us/event bitmark against the best other: 20
attributes, events carrying 1 of them 15.4 against counting 11.0, 2: 17.9 / 16.5, 5: 30.4 /
opindex 35.9, 10: 65.5 / 114, 20: 172 / counting 327; 40 attributes, events carrying 4:
31.6 / counting 20.3, 10: 67.8 / 59.0, 20: 144 / 160, 40: 276 / 353; 200 attributes,
events carrying all: 1,414 / opindex 440."""
HALF_LIFE = 1_000
"""Events after which a batch's weight in the events' summary has halved."""
MIN_EVENTS = 500
"""Events matched since the last decision before the events may cause another one; a
decision looks at the summary once it holds half as many (decayed)."""
EVENT_DRIFT = 0.1
"""Move of the events' coverage (share of the constrained attributes an event carries)
since the last decision after which the choice is made again."""

_EQ, _IN, _RANGE, _PATTERN, _OTHER = range(5)
_CLASS = [[_EQ if op is Op.EQ else _IN if op is Op.IN
           else _RANGE if op in ORDER_OPS | {Op.BETWEEN} and kind is Kind.NUM
           else _PATTERN if op in STRING_OPS - {Op.EQ_ICASE, Op.IN_ICASE} else _OTHER for kind in Kind] for op in Op]
"""What a predicate counts as in a :class:`Shape`, by operator and operand kind: ``=`` (an
equality whose attribute and value are counted), ``IN``, a numeric range, a string pattern."""
_OUTSIDE = [op not in INDEXED_OPS for op in Op]
"""By operator: a test of presence (the subscription counts in :attr:`Shape.residual`)."""


@dataclass(frozen=True)
class Shape:
    """What the choice looks at: sizes and fractions over the subscriptions' DNF."""

    subscriptions: int
    conjunctions: int
    predicates: int
    attributes: int
    """Distinct attributes constrained."""
    per_conjunction: float
    """Mean predicates per conjunction."""
    ranges: float
    """Fraction of the predicates that are numeric ranges (``< <= > >= BETWEEN``)."""
    equalities: float
    """Fraction that are ``=`` or ``IN``."""
    patterns: float
    """Fraction that are string patterns (``LIKE``, prefixes, ``MATCHES``, their negations ...)."""
    residual: float
    """Fraction of the subscriptions testing presence (``EXISTS``, ``IS NULL`` ...: tests of
    presence states, :mod:`matchers.presence`)."""
    shared_pair: float
    """Fraction of the conjunctions holding ``=`` on the most common pair of attributes."""
    value_skew: float
    """Largest share of one value among the ``=`` predicates on an attribute (one in ten
    conjunctions or more constrain it so)."""


class _Tally:
    """Counts behind a :class:`Shape`, updated per subscription inserted or removed."""

    def __init__(self) -> None:
        self.subs = self.conjs = self.preds = self.ranges = self.equalities = self.patterns = self.residual = 0
        self.attrs: Counter[str] = Counter()
        self.pairs: Counter[tuple[str, str]] = Counter()
        self.eq_attrs: Counter[str] = Counter()
        self.eq_values: Counter[tuple[str, Any]] = Counter()

    def update(self, subs: list[Subscription], sign: int) -> None:
        """Count ``subs`` in (``sign`` 1) or out (-1), in bulk: each predicate object looked at
        once with the number of times it occurs (a bulk read repeats them), each key counted once."""
        conjs = [conj for sub in subs for conj in sub.conjunctions]
        preds = list(chain.from_iterable(conjs))
        times = Counter(map(id, preds))
        pairs: list[tuple[str, str]] = []
        for conj in conjs:
            pairs.extend(combinations(sorted([p.attr for p in conj if p.op is Op.EQ])[:MAX_PAIRED], 2))
        distinct = dict(zip(map(id, preds), preds, strict=True))
        residual = 0
        if any(_OUTSIDE[p.op] for p in distinct.values()):
            residual = sum(any(_OUTSIDE[p.op] for c in sub.conjunctions for p in c) for sub in subs)
        self._add(len(subs), len(conjs), [(p, times[key]) for key, p in distinct.items()], residual,
                  Counter(pairs), sign)

    def update_columns(self, rows: Decoded, sign: int) -> None:
        """:meth:`update` of the subscriptions that :func:`matchers.packed.decode` read as ``rows``
        (those it kept; not its ``skipped`` ones), from the columns: no object per subscription."""
        n_rows, sizes, flat = len(rows.entries) - 1, rows.sizes, rows.flat
        n_conjs = len(sizes)
        times = np.bincount(flat, minlength=len(rows.preds))
        outside = np.fromiter((_OUTSIDE[p.op] for p in rows.preds), dtype=bool, count=len(rows.preds))
        residual = 0
        if outside.any():
            conj_row = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(rows.entries))
            residual = len(np.unique(np.repeat(conj_row, sizes)[outside[flat]]))
        preds = [(p, n) for p, n in zip(rows.preds, times.tolist(), strict=True) if n]
        self._add(n_rows - len(rows.skipped), n_conjs, preds, residual, _pairs(rows), sign)

    def _add(self, subs: int, conjs: int, preds: list[tuple[Pred, int]], residual: int,
             pairs: Counter[tuple[str, str]], sign: int) -> None:
        """Count in (``sign`` 1) or out (-1) ``subs`` subscriptions of ``conjs`` conjunctions whose
        predicates are ``preds`` (each with its occurrences), ``residual`` of them testing presence."""
        kinds: Counter[int] = Counter()
        attrs: Counter[str] = Counter()
        eq_attrs: Counter[str] = Counter()
        eq_values: Counter[tuple[str, Any]] = Counter()
        for p, n in preds:
            kinds[_CLASS[p.op][p.kind]] += n
            attrs[p.attr] += n
            if p.op is Op.EQ:
                eq_attrs[p.attr] += n
                eq_values[(p.attr, p.operand)] += n
        self.subs += sign * subs
        self.conjs += sign * conjs
        self.preds += sign * sum(n for _, n in preds)
        self.ranges += sign * kinds[_RANGE]
        self.equalities += sign * (kinds[_EQ] + kinds[_IN])
        self.patterns += sign * kinds[_PATTERN]
        self.residual += sign * residual
        _count(self.attrs, attrs, sign)
        _count(self.eq_attrs, eq_attrs, sign)
        _count(self.eq_values, eq_values, sign)
        _count(self.pairs, pairs, sign)

    def shape(self) -> Shape:
        preds, conjs = max(self.preds, 1), max(self.conjs, 1)
        pair = max(self.pairs.values(), default=0) / conjs
        skew = max((n / self.eq_attrs[a] for (a, _), n in self.eq_values.items() if self.eq_attrs[a] >= conjs / 10),
                   default=0.0)
        return Shape(self.subs, self.conjs, self.preds, len(self.attrs),
                     round(self.preds / max(self.conjs, 1), 3), round(self.ranges / preds, 3),
                     round(self.equalities / preds, 3), round(self.patterns / preds, 3),
                     round(self.residual / max(self.subs, 1), 3), round(pair, 3), round(skew, 3))


def _pairs(rows: Decoded) -> Counter[tuple[str, str]]:
    """The pairs of :class:`_Tally` (of the first :data:`MAX_PAIRED` ``=`` attributes of each
    conjunction, sorted) counted over ``rows``' conjunctions, by array operations."""
    eq = np.fromiter((p.op is Op.EQ for p in rows.preds), dtype=bool, count=len(rows.preds))
    names = sorted({p.attr for p in rows.preds if p.op is Op.EQ})
    rank = {a: i for i, a in enumerate(names)}
    ranks = np.fromiter((rank.get(p.attr, -1) for p in rows.preds), dtype=np.int64, count=len(rows.preds))
    elem_conj = np.repeat(np.arange(len(rows.sizes), dtype=np.int64), rows.sizes)
    mine = eq[rows.flat]
    conj, r = elem_conj[mine], ranks[rows.flat[mine]]
    order = np.lexsort((r, conj))
    conj, r = conj[order], r[order]
    per_conj = np.bincount(conj, minlength=len(rows.sizes))
    start = np.cumsum(per_conj) - per_conj
    codes: list[np.ndarray] = []
    for k in range(2, MAX_PAIRED + 1):
        at = np.flatnonzero(np.minimum(per_conj, MAX_PAIRED) == k)
        if len(at):
            m = r[start[at][:, None] + np.arange(k)]  # each such conjunction's ranks, sorted
            codes.extend(m[:, i] * len(names) + m[:, j] for i, j in combinations(range(k), 2))
    if not codes:
        return Counter()
    code, n = np.unique(np.concatenate(codes), return_counts=True)
    return Counter({(names[c // len(names)], names[c % len(names)]): k for c, k in
                    zip(code.tolist(), n.tolist(), strict=True)})


def _count(counts: Counter, keys: Counter, sign: int) -> None:
    """Add ``sign`` times each key's count in ``keys``, dropping the counts that fall to zero (only
    theirs are looked at: a pass over every count would cost what the whole set holds)."""
    for key, n in keys.items():
        if total := counts[key] + sign * n:
            counts[key] = total
        else:
            del counts[key]


@dataclass(frozen=True)
class Events:
    """What the choice looks at in the recent events: means over the matched batches, each
    batch weighted by its events and decayed by half every :data:`HALF_LIFE` events."""

    events: float
    """Decayed number of events behind the means."""
    attributes: float
    """Mean attributes per event (per row for events with arrays)."""
    coverage: float
    """Mean share of the subscriptions' constrained attributes that an event (row) carries."""
    rows: float
    """Mean rows per event (above 1 with arrays)."""
    matches: float
    """Mean matches per event."""


class _EventTally:
    """Decayed sums behind :class:`Events`, updated per matched batch (a numba pass over the
    entries, no per-event Python)."""

    def __init__(self) -> None:
        self.n = self.rows = self.entries = self.covered = self.matches = 0.0

    def update(self, batch: EventBatch, matches: Matches, constrained: np.ndarray, n_constrained: int) -> None:
        attrs = batch.attrs
        keep = 0.5 ** (batch.n / HALF_LIFE)
        covered = K.covered(attrs, constrained)
        self.n = self.n * keep + batch.n
        self.rows = self.rows * keep + len(batch.offsets) - 1
        self.entries = self.entries * keep + len(attrs)
        self.covered = self.covered * keep + covered / max(n_constrained, 1)
        self.matches = self.matches * keep + matches.total

    def coverage(self) -> float:
        return self.covered / max(self.rows, 1e-9)

    def events(self) -> Events:
        per_row, per_event = 1 / max(self.rows, 1e-9), 1 / max(self.n, 1e-9)
        return Events(round(self.n, 1), round(self.entries * per_row, 3), round(self.coverage(), 3),
                      round(self.rows * per_event, 3), round(self.matches * per_event, 3))


def choose(shape: Shape, events: Events | None = None) -> tuple[str, str]:
    """The index for a subscription set of this shape whose recent events are ``events``
    (``None``: none seen yet), and why."""
    if shape.equalities >= 0.3 and shape.shared_pair >= 0.6 and shape.value_skew < 0.2:
        return "static", (f"equalities ({shape.equalities:.0%} = or IN), {shape.shared_pair:.0%} of the "
                          f"conjunctions on one pair of attributes, values spread: multi-attribute hash tables")
    if shape.per_conjunction >= 3 and shape.ranges >= 0.5:
        return "bitmark", (f"dense interval conjunctions ({shape.per_conjunction:g} predicates per conjunction, "
                           f"{shape.ranges:.0%} numeric ranges)")
    if (shape.equalities >= 0.5 and shape.value_skew < 0.2 and shape.subscriptions >= DYNAMIC_FROM
            and shape.patterns < PLAIN and shape.residual < PLAIN):
        return "dynamic", (f"equality-heavy ({shape.equalities:.0%} = or IN), no shared pair of attributes, "
                           f"values spread, {shape.subscriptions:,} subscriptions: clusters grown from the events")
    if shape.equalities >= 0.5 and (shape.patterns >= PLAIN or shape.residual >= PLAIN):
        return "counting", (f"equality-heavy ({shape.equalities:.0%} = or IN) with string patterns "
                            f"({shape.patterns:.0%}) or presence tests ({shape.residual:.0%} of the subscriptions), "
                            f"{shape.per_conjunction:g} predicates per conjunction: counted, not clustered")
    if shape.equalities >= 0.5:
        return "propagation", (f"equality-heavy ({shape.equalities:.0%} = or IN), no shared pair of attributes "
                               f"or skewed values: clustered on single equality access predicates")
    if (events is not None and shape.ranges >= 0.9
            and events.coverage * COVERED_ATTRIBUTES >= max(shape.attributes, 1)):
        return "bitmark", (f"numeric ranges ({shape.ranges:.0%}) over {shape.attributes} attributes, events "
                           f"carrying {events.coverage:.0%} of them: marking beats counting satisfied predicates")
    if shape.per_conjunction < 1.5 and shape.ranges >= 0.9:
        return "vci", (f"one numeric range per conjunction ({shape.ranges:.0%} ranges, "
                       f"{shape.per_conjunction:g} predicates per conjunction): interval index")
    if shape.equalities >= 0.3 and shape.attributes <= FEW_ATTRIBUTES:
        return "static", (f"equalities ({shape.equalities:.0%} = or IN) over few attributes "
                          f"({shape.attributes}): multi-attribute hash tables")
    if shape.equalities >= 0.3 and shape.patterns < 0.25:
        return "opindex", (f"equalities to pivot on ({shape.equalities:.0%} = or IN), "
                           f"few string patterns ({shape.patterns:.0%})")
    return "counting", (f"few equalities to pivot on ({shape.equalities:.0%} = or IN), "
                        f"{shape.patterns:.0%} string patterns")


@register("auto")
class AutoMatcher(Matcher):
    """Delegates to the index :func:`choose` picks for the current subscription set.

    Every public method goes to the inner matcher, so the subscriptions are held (and
    pickled) once; the insert, delete and match steps of :class:`Matcher` are the inner
    matcher's own and never called here.
    """

    def __init__(self, dictionary: Dictionary | None = None, **params: Any):
        super().__init__(dictionary, **params)
        self._tally = _Tally()
        self._shape = self._tally.shape()
        self._choice, self._reason = choose(self._shape)
        self._inner = create(self._choice, self.dictionary)
        self._decided_at = 0
        self._changes = 0
        self._seen = _EventTally()
        self._events: Events | None = None  # decided on (None: too few events then)
        self._since = 0  # events matched since the last decision
        self._constrained = np.zeros(0, dtype=np.bool_)  # by attribute id; rebuilt after changes
        self._n_constrained = 0
        self._stale = True

    @property
    def choice(self) -> str:
        """Name of the index in use."""
        return self._choice

    def describe(self) -> dict[str, Any]:
        """The index chosen (``matcher``), by ``auto``, the reason, and the shape and the events'
        summary it was decided on (``events``: ``None`` before :data:`MIN_EVENTS` events)."""
        return dict(matcher=self._choice, chosen_by=self.name, reason=self._reason, shape=asdict(self._shape),
                    events=None if self._events is None else asdict(self._events))

    # -- Matcher: all to the inner matcher ---------------------------------------------
    def add(self, subscriptions: Iterable[Subscription]) -> None:
        with no_cyclic_gc():  # as Matcher.add: the subscriptions made here are long-lived
            self._add_all(subscriptions)

    def _add_all(self, subscriptions: Iterable[Subscription]) -> None:
        subs = list({s.id: s for s in subscriptions}.values())
        self._count_out(s.id for s in subs)
        self._tally.update(subs, +1)
        self._grow(len(subs), lambda: self._inner.add(subs))

    def add_packed(self, table: SubscriptionTable, rows: Decoded | None = None) -> None:
        """:meth:`Matcher.add_packed` by the inner matcher, the shape counted from the rows'
        columns (:func:`matchers.packed.decode`; the rows it skips, ``ANYTHING BUT``, unpacked
        and counted as objects); a table with changes or repeated ids goes to :meth:`add`."""
        ids = table.ids()
        if table._changed or len(set(ids)) < len(ids):
            self.add(list(table))
            return
        with no_cyclic_gc():
            if (np.diff(table.sub_offsets) == 0).any():
                raise EOFError("an empty row: not a packed subscription")
            if rows is None:  # all read before anything changes
                rows = decode(table.sub_offsets, table.sub_bytes)
            elif len(rows.entries) != len(ids) + 1:
                raise ValueError(f"{len(rows.entries) - 1} decoded rows for a table of {len(ids)}")
            apart = [sub for i in rows.skipped.tolist() if (sub := table[i]) is not None]
            self._count_out(ids)
            self._tally.update_columns(rows, +1)
            self._tally.update(apart, +1)
            self._grow(len(ids), lambda: self._inner.add_packed(table, rows))  # decoded once

    def _count_out(self, ids: Iterable[str]) -> None:
        """Count the subscriptions held under ``ids`` (those of them held) out of the tally: from
        their packed rows' columns where the inner matcher holds a table (:meth:`Matcher.packed_at`,
        no object but for the rows :func:`matchers.packed.decode` skips), else as objects."""
        inner = self._inner
        keys = [inner.key_of(i) for i in ids if i in inner]
        table = inner.packed_at(keys) if keys else None
        if table is None:
            self._tally.update([inner.subscription(key) for key in keys], -1)
            return
        rows = decode(table.sub_offsets, table.sub_bytes)
        self._tally.update_columns(rows, -1)
        self._tally.update([sub for i in rows.skipped.tolist() if (sub := table[i]) is not None], -1)

    def _grow(self, n: int, insert: Callable[[], None]) -> None:
        """Run ``insert`` of ``n`` subscriptions, counted in the tally already (into an empty
        set: decided on first)."""
        first = not len(self._inner)
        if first:  # decide on the new set's shape before building anything
            self._redecide()
        try:
            insert()
        except BaseException:
            self._recount()  # the replaced subscriptions may be gone
            raise
        self._changes += n
        self._stale = True
        if first:
            self._decided_at, self._changes = len(self), 0

    def remove(self, ids: Iterable[str]) -> int:
        """:meth:`Matcher.remove` by the inner matcher, the removed subscriptions counted out of the
        tally first (:meth:`_count_out`: from their packed rows where it holds a table)."""
        with no_cyclic_gc():
            ids = list(dict.fromkeys(ids))
            self._count_out(ids)
            try:
                n = self._inner.remove(ids)
            except BaseException:
                self._recount()
                raise
        self._changes += n
        self._stale = True
        return n

    def pop(self, ids: Iterable[str]) -> list[Subscription]:
        with no_cyclic_gc():
            gone = self._inner.pop(ids)  # each removed subscription read once, by the inner matcher
            self._tally.update(gone, -1)
        self._changes += len(gone)
        self._stale = True
        return gone

    def hold(self, table: SubscriptionTable) -> None:
        self._inner.hold(table)

    def held_table(self) -> SubscriptionTable | None:
        return self._inner.held_table()

    def match(self, batch: EventBatch) -> Matches:
        if self._changes > DRIFT * max(self._decided_at, 1) or self._events_drifted():
            self._redecide()
        matches = self._inner.match(batch)
        self._observe(batch, matches)
        return matches

    def id_of(self, key: int) -> str:
        return self._inner.id_of(key)

    def ids_of(self, keys: np.ndarray) -> list[str]:
        return self._inner.ids_of(keys)

    def key_of(self, sub_id: str) -> int:
        return self._inner.key_of(sub_id)

    def subscription(self, key: int) -> Subscription:
        return self._inner.subscription(key)

    def subscriptions(self) -> Iterable[tuple[int, Subscription]]:
        return self._inner.subscriptions()

    def indexed(self) -> Iterable[tuple[int, Subscription]]:
        return self._inner.subscriptions()

    def __len__(self) -> int:
        return len(self._inner)

    def __contains__(self, sub_id: object) -> bool:
        return sub_id in self._inner

    @property
    def capacity(self) -> int:
        return self._inner.capacity

    def memory_bytes(self) -> int:
        return self._inner.memory_bytes()

    def _insert(self, entries: list[tuple[int, Subscription]]) -> None:
        raise AssertionError("auto inserts through its inner matcher")  # add is overridden

    _delete = _insert

    def _match(self, batch: EventBatch) -> Matches:
        raise AssertionError("auto matches through its inner matcher")  # match is overridden

    # -- the choice -----------------------------------------------------------------
    def _observe(self, batch: EventBatch, matches: Matches) -> None:
        """Add a matched batch to the events' summary."""
        if self._stale:  # the subscriptions changed (ids past the end: names only events use)
            ids = [self.dictionary.attr(a, create=False) for a in self._tally.attrs]
            self._constrained = np.zeros(self.dictionary.n_attrs, dtype=np.bool_)
            self._constrained[[i for i in ids if i >= 0]] = True
            self._n_constrained, self._stale = len(self._tally.attrs), False
        self._seen.update(batch, matches, self._constrained, self._n_constrained)
        self._since += batch.n

    def _events_drifted(self) -> bool:
        """Whether the events moved enough since the last decision to decide again."""
        if self._since < MIN_EVENTS:
            return False
        if self._events is None:
            return True
        return abs(self._seen.coverage() - self._events.coverage) >= EVENT_DRIFT

    def _recount(self) -> None:
        self._tally = _Tally()
        self._tally.update([sub for _, sub in self._inner.subscriptions()], +1)

    def _redecide(self) -> None:
        """Choose again; a new inner matcher of the chosen index holds every subscription
        when the choice differs."""
        self._shape = self._tally.shape()
        events = self._seen.events()
        self._events = events if events.events >= MIN_EVENTS / 2 else None
        choice, reason = choose(self._shape, self._events)
        if choice != self._choice:
            inner = create(choice, self.dictionary)
            inner.add(sub for _, sub in self._inner.subscriptions())
            self._inner = inner
        self._choice, self._reason = choice, reason
        self._decided_at, self._changes, self._since = len(self), 0, 0
        log.info("auto matcher: %s", self.describe())
