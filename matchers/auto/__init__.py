"""``auto``: a matcher that picks the index for the shape of its subscription set.

It holds one inner matcher (sharing its dictionary) chosen by :func:`choose` from the
set's :class:`Shape` (predicates per conjunction, operator mix, attributes), and nothing
else of the subscriptions: adds, removals, matching and the keys are the inner matcher's
(its keys change when it is rebuilt).  The shape is kept up to date incrementally.  Once the set
has changed by :data:`DRIFT` of its size at the last decision, the next ``match``
decides again and, if the choice differs, rebuilds the inner matcher with the new
index: the choice is a function of the subscription set alone (deterministic), and
a set growing from empty is rebuilt a logarithmic number of times.

:meth:`AutoMatcher.describe` says what was chosen and why (logged at each decision).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from matchers.base import Matcher, Matches, create, register
from matchers.events import Dictionary, EventBatch
from matchers.expr import INDEXED_OPS, ORDER_OPS, STRING_OPS, Kind, Op, Subscription

log = logging.getLogger(__name__)

MAX_PAIRED = 8
"""Equality attributes of a conjunction whose pairs are counted (the first, sorted)."""
CHOICES = ("bitmark", "static", "dynamic", "propagation", "vci", "opindex", "counting")
"""The indexes :func:`choose` picks from."""
DYNAMIC_FROM = 30_000
"""Subscriptions from which an equality-heavy set without a shared pair of attributes gets
``dynamic`` rather than ``propagation`` (Fabret W3, W4: propagation ahead at 10,000
subscriptions, 0.86 against 1.47 us/event, dynamic at 100,000, 5.1 against 6.9)."""
FEW_ATTRIBUTES = 64
"""Attributes up to which a set with some equalities gets ``static``: every event holds most
of them, so OpIndex's per-attribute lists are long (stock at 100,000 subscriptions: static
680 us/event, opindex 1,434; at 10,000 within 1.01x of each other)."""
DRIFT = 0.5
"""Changes (inserts and removals), as a fraction of the set's size at the last decision,
after which the choice is made again."""

_EQUALITY = frozenset({Op.EQ, Op.IN})
_NUM_RANGE = ORDER_OPS | {Op.BETWEEN}
_PATTERNS = STRING_OPS - {Op.EQ_ICASE, Op.IN_ICASE}


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
        for sub in subs:
            self.subs += sign
            self.conjs += sign * len(sub.conjunctions)
            residual = False
            for conj in sub.conjunctions:
                self.preds += sign * len(conj)
                eq = sorted(p.attr for p in conj if p.op is Op.EQ)[:MAX_PAIRED]
                for i, a in enumerate(eq):
                    for b in eq[i + 1:]:
                        self.pairs[a, b] += sign
                for p in conj:
                    self.attrs[p.attr] += sign
                    if p.op in _NUM_RANGE and p.kind is Kind.NUM:
                        self.ranges += sign
                    elif p.op in _EQUALITY:
                        self.equalities += sign
                        if p.op is Op.EQ:
                            self.eq_attrs[p.attr] += sign
                            self.eq_values[p.attr, p.operand] += sign
                    elif p.op in _PATTERNS:
                        self.patterns += sign
                    residual = residual or p.op not in INDEXED_OPS
            self.residual += sign * residual
        if sign < 0:
            # drop what is no longer there
            self.attrs, self.pairs, self.eq_attrs, self.eq_values = \
                +self.attrs, +self.pairs, +self.eq_attrs, +self.eq_values

    def shape(self) -> Shape:
        preds, conjs = max(self.preds, 1), max(self.conjs, 1)
        pair = max(self.pairs.values(), default=0) / conjs
        skew = max((n / self.eq_attrs[a] for (a, _), n in self.eq_values.items() if self.eq_attrs[a] >= conjs / 10),
                   default=0.0)
        return Shape(self.subs, self.conjs, self.preds, len(self.attrs),
                     round(self.preds / max(self.conjs, 1), 3), round(self.ranges / preds, 3),
                     round(self.equalities / preds, 3), round(self.patterns / preds, 3),
                     round(self.residual / max(self.subs, 1), 3), round(pair, 3), round(skew, 3))


def choose(shape: Shape) -> tuple[str, str]:
    """The index for a subscription set of this shape, and why."""
    if shape.equalities >= 0.3 and shape.shared_pair >= 0.6 and shape.value_skew < 0.2:
        return "static", (f"equalities ({shape.equalities:.0%} = or IN), {shape.shared_pair:.0%} of the "
                          f"conjunctions on one pair of attributes, values spread: multi-attribute hash tables")
    if shape.per_conjunction >= 3 and shape.ranges >= 0.5:
        return "bitmark", (f"dense interval conjunctions ({shape.per_conjunction:g} predicates per conjunction, "
                           f"{shape.ranges:.0%} numeric ranges)")
    if shape.equalities >= 0.5 and shape.value_skew < 0.2 and shape.subscriptions >= DYNAMIC_FROM:
        return "dynamic", (f"equality-heavy ({shape.equalities:.0%} = or IN), no shared pair of attributes, "
                           f"values spread, {shape.subscriptions:,} subscriptions: clusters grown from the events")
    if shape.equalities >= 0.5:
        return "propagation", (f"equality-heavy ({shape.equalities:.0%} = or IN), no shared pair of attributes "
                               f"or skewed values: clustered on single equality access predicates")
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

    @property
    def choice(self) -> str:
        """Name of the index in use."""
        return self._choice

    def describe(self) -> dict[str, Any]:
        """The index chosen (``matcher``), by ``auto``, the reason and the shape it was decided on
        (at the last decision: computing the shape takes a pass over its counters)."""
        return dict(matcher=self._choice, chosen_by=self.name, reason=self._reason, shape=asdict(self._shape))

    # -- Matcher: all to the inner matcher ---------------------------------------------
    def add(self, subscriptions: Iterable[Subscription]) -> None:
        subs = list({s.id: s for s in subscriptions}.values())
        inner = self._inner
        replaced = [inner.subscription(inner.key_of(s.id)) for s in subs if s.id in inner]
        self._tally.update(replaced, -1)
        self._tally.update(subs, +1)
        first = not len(inner)
        if first:  # decide on the new set's shape before building anything
            self._redecide()
        try:
            self._inner.add(subs)
        except BaseException:
            self._recount()  # the replaced subscriptions may be gone
            raise
        self._changes += len(subs)
        if first:
            self._decided_at, self._changes = len(self), 0

    def remove(self, ids: Iterable[str]) -> int:
        inner = self._inner
        gone = [inner.subscription(inner.key_of(i)) for i in dict.fromkeys(ids) if i in inner]
        inner.remove(s.id for s in gone)
        self._tally.update(gone, -1)
        self._changes += len(gone)
        return len(gone)

    def match(self, batch: EventBatch) -> Matches:
        if self._changes > DRIFT * max(self._decided_at, 1):
            self._redecide()
        return self._inner.match(batch)

    def id_of(self, key: int) -> str:
        return self._inner.id_of(key)

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
    def _recount(self) -> None:
        self._tally = _Tally()
        self._tally.update([sub for _, sub in self._inner.subscriptions()], +1)

    def _redecide(self) -> None:
        """Choose again; a new inner matcher of the chosen index holds every subscription
        when the choice differs."""
        self._shape = self._tally.shape()
        choice, reason = choose(self._shape)
        if choice != self._choice:
            inner = create(choice, self.dictionary)
            inner.add(sub for _, sub in self._inner.subscriptions())
            self._inner = inner
        self._choice, self._reason = choice, reason
        self._decided_at, self._changes = len(self), 0
        log.info("auto matcher: %s", self.describe())
