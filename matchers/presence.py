"""Existence and null tests evaluated by the indexes themselves, through *presence states*.

``EXISTS``, ``NOT EXISTS``, ``IS NULL`` and ``IS NOT NULL`` (and so ``anything-but``,
which holds on a ``null``) look at whether an attribute is there, which an index that
only sees the values an event has cannot tell: ``NOT EXISTS`` is the one predicate true
on a missing attribute.  So each attribute ``x`` some subscription tests this way gets a
*state attribute* (:func:`state_name`) that every event has, a number: ``0`` when ``x``
is missing, ``1`` when it is ``null``, ``2`` when it has another value
(:func:`matchers.states.with_states` adds it to a batch).  A test of ``x`` becomes an
equality test of its state (:func:`rewrite`), an operator every index evaluates:

=================  ===================
``EXISTS x``       ``state IN (1, 2)``
``NOT EXISTS x``   ``state = 0``
``x IS NULL``      ``state = 1``
``x IS NOT NULL``  ``state = 2``
=================  ===================

An event of several rows (arrays) has the states of each row, as the oracle reads them.
:class:`Presence` counts the live subscriptions testing each attribute, so that only the
attributes some subscription tests get a state.  It counts the *views* that ``ANYTHING BUT``
predicates test the same way (:mod:`matchers.views`): :func:`rewrite` turns each into a
negated string test of a view, and a batch gets the views' values before the states.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from matchers.events import Dictionary
from matchers.expr import PRESENCE_OPS, And, Expr, Kind, Op, Or, Pred, Subscription, nnf
from matchers.views import is_view, source_of, view_of, view_pred

STATE_PREFIX = "\x00state:"
"""Start of a state attribute's name (no subscription can name it: attribute names hold no NUL)."""

ABSENT, NULL, PRESENT = 0.0, 1.0, 2.0
"""The states of an attribute in an event."""

_STATE_TEST: dict[Op, tuple[Op, object]] = {
    Op.EXISTS: (Op.IN, (NULL, PRESENT)),
    Op.NOT_EXISTS: (Op.EQ, ABSENT),
    Op.IS_NULL: (Op.EQ, NULL),
    Op.IS_NOT_NULL: (Op.EQ, PRESENT),
}


def state_name(attr: str) -> str:
    """The name of the state attribute of ``attr``."""
    return STATE_PREFIX + attr


def tested(sub: Subscription) -> set[str]:
    """The attributes whose presence ``sub`` tests, and the names of the views it tests."""
    return {view_of(p) if p.op is Op.ANYTHING_BUT else p.attr for conj in sub.conjunctions for p in conj
            if p.op in PRESENCE_OPS or p.op is Op.ANYTHING_BUT}


def _state_pred(p: Pred) -> Pred:
    if p.op is Op.ANYTHING_BUT:
        return view_pred(p)
    if p.op not in PRESENCE_OPS:
        return p
    op, operand = _STATE_TEST[p.op]
    return Pred(state_name(p.attr), op, operand, Kind.NUM)


def _state_expr(expr: Expr) -> Expr:
    """An expression without NOT (:func:`matchers.expr.nnf`) with its presence tests on states."""
    if isinstance(expr, Pred):
        return _state_pred(expr)
    return (And if isinstance(expr, And) else Or)(tuple(_state_expr(c) for c in expr.children))  # type: ignore[union-attr]  # NOT-free: an And or an Or


def rewrite(sub: Subscription) -> Subscription:
    """``sub`` with its presence tests as tests of states, its ``ANYTHING BUT`` as tests of views
    (same id and meaning).

    The NOT of a presence test is its complement first (``NOT x IS NULL`` is
    ``x IS NOT NULL``, false on a missing ``x``), then a state test.
    """
    conjunctions = tuple(tuple(sorted(map(_state_pred, conj), key=Pred.sort_key)) for conj in sub.conjunctions)
    return Subscription(sub.id, _state_expr(nnf(sub.expr)), conjunctions, sub.expires)


_NO_VIEWS = (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=bool))


class Presence:
    """The attributes with a state: how many live subscriptions test each, and the arrays
    :func:`matchers.states.with_states` reads (built again after a change).

    ``slot[a]`` is, for a tested attribute id ``a``, the index of its state in ``states``
    (state attribute ids, sorted); ``-2`` for a state attribute's id (an event's own value
    under that name is dropped); ``-1`` otherwise.
    """

    _views: tuple[np.ndarray, np.ndarray, np.ndarray] = _NO_VIEWS  # class default: trackers pickled before views

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._views = _NO_VIEWS

    def __bool__(self) -> bool:
        return bool(self.counts)

    def add(self, attrs: set[str], dictionary: Dictionary) -> None:
        """Count a subscription testing ``attrs`` (attributes and views, :func:`tested`); give
        each and its state (a view: its attribute) an id."""
        for attr in attrs:
            if attr not in self.counts:
                for name in (attr, source_of(attr)[0] if is_view(attr) else state_name(attr)):
                    if dictionary.attr(name) < 0:
                        raise MemoryError(f"attribute dictionary is full ({dictionary.max_attributes} names)")
        for attr in attrs:
            if attr not in self.counts:
                self._arrays = None
            self.counts[attr] += 1

    def remove(self, attrs: set[str]) -> None:
        """Forget a subscription testing ``attrs``."""
        for attr in attrs:
            self.counts[attr] -= 1
            if not self.counts[attr]:
                del self.counts[attr]
                self._arrays = None

    def arrays(self, dictionary: Dictionary) -> tuple[np.ndarray, np.ndarray]:
        """``(slot, states)`` (see the class)."""
        if self._arrays is None:
            pairs = sorted((dictionary.attr_ids[state_name(a)], dictionary.attr_ids[a]) for a in self.counts
                           if not is_view(a))
            states = np.array([s for s, _ in pairs], dtype=np.int32)
            slot = np.full(max((max(p) for p in pairs), default=-1) + 1, -1, dtype=np.int32)
            for j, (state, attr) in enumerate(pairs):
                slot[attr], slot[state] = j, -2
            self._arrays = slot, states
            views = sorted((dictionary.attr_ids[source_of(a)[0]], dictionary.attr_ids[a], source_of(a)[1])
                           for a in self.counts if is_view(a))
            self._views = (np.array([v[0] for v in views], dtype=np.int32),
                           np.array([v[1] for v in views], dtype=np.int32), np.array([v[2] for v in views], dtype=bool))
        return self._arrays

    @property
    def views(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(sources, views, tails)`` of :func:`matchers.views.with_views`, as of the last :meth:`arrays`."""
        return self._views
