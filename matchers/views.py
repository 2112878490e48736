"""Views of values: how every index evaluates EventBridge's ``anything-but`` as one test.

``ANYTHING BUT (inner)`` (:attr:`~matchers.expr.Op.ANYTHING_BUT`) holds on a present value
that ``inner`` does not hold on, a value of another kind (``null`` included) too.  An index
evaluates only predicates that are false on a value of another kind, and expanding the
other kinds into a disjunction multiplies a subscription's conjunctions by four per field.
So each attribute ``x`` that some ``anything-but`` tests gets a *view* attribute (its name
starts with a NUL, which no subscription can name) whose value, in every row where ``x`` is
present, is a string that carries the kind of ``x``'s value:

========  =====================  =====================
value     head view              tail view
========  =====================  =====================
string    ``"s" + text``         ``text + "s"``
number    ``"n" + repr(float)``  ``repr(float) + "n"``
boolean   ``"t"`` / ``"f"``      ``"t"`` / ``"f"``
null      ``"z"``                ``"z"``
========  =====================  =====================

and the ``anything-but`` becomes one negated string test of a view, false where ``x`` is
missing (as ``anything-but`` is), which every index evaluates:

=================================  =========================================
``ANYTHING BUT (x IN V)``          ``head NOT IN (tag(v) for v in V)``
``ANYTHING BUT (x PREFIX p)``      ``head NOT PREFIX "s" + p``
``ANYTHING BUT (x SUFFIX q)``      ``tail NOT SUFFIX q + "s"``
``ANYTHING BUT (x LIKE l)``        ``head NOT LIKE "s" + l``
``... IGNORE CASE``                the same with the ``IGNORE CASE`` operator
=================================  =========================================

Only strings start (head) or end (tail) with ``s``, and the tag is one character that case
folding keeps, so each test holds exactly where ``anything-but`` does.
:func:`with_views` adds the views' values to a batch.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from matchers.events import BOOL, NULL, NUM, STR, Dictionary, EventArrays, EventBatch
from matchers.expr import COMPLEMENT, Kind, Op, Pred, pred
from matchers.operands import like_escape

VIEW_PREFIX = "\x00view:"
"""Start of a view attribute's name (then ``^`` for a head view or ``$`` for a tail view, and the attribute)."""

_TAIL_OPS = frozenset({Op.SUFFIX, Op.SUFFIX_ICASE})


def view_name(attr: str, tail: bool) -> str:
    """The name of the head (or tail) view of ``attr``."""
    return VIEW_PREFIX + ("$" if tail else "^") + attr


def is_view(name: str) -> bool:
    return name.startswith(VIEW_PREFIX)


def source_of(name: str) -> tuple[str, bool]:
    """``(attribute, tail)`` of a view's name."""
    return name[len(VIEW_PREFIX) + 1:], name[len(VIEW_PREFIX)] == "$"


def tag(value: object, kind: Kind, tail: bool) -> str:
    """The view of a value of ``kind`` (``None`` for null)."""
    if kind is Kind.STR:
        return f"{value}s" if tail else f"s{value}"
    if kind is Kind.NUM:
        text = repr(float(value) + 0.0)  # type: ignore[arg-type]  # kind NUM: a number; + 0.0: -0.0 is 0.0
        return f"{text}n" if tail else f"n{text}"
    if kind is Kind.BOOL:
        return "t" if value else "f"
    return "z"


def view_of(p: Pred) -> str:
    """The name of the view an ``ANYTHING BUT`` predicate tests."""
    return view_name(p.attr, p.operand.op in _TAIL_OPS)


def view_pred(p: Pred) -> Pred:
    """The negated string test of a view that holds where ``ANYTHING BUT`` ``p`` does."""
    test = _view_test(p.operand)
    return Pred(view_of(p), test.op, test.operand, test.kind)


def _view_test(inner: Pred) -> Pred:
    """The test of :func:`view_pred`, on a stand-in name (:func:`~matchers.expr.pred` refuses a view's)."""
    op, operand, kind = inner.op, inner.operand, inner.kind
    name = "view"
    if op in (Op.EQ, Op.IN, Op.EQ_ICASE, Op.IN_ICASE):
        values = operand if isinstance(operand, tuple) else (operand,)
        negated = Op.NOT_IN if op in (Op.EQ, Op.IN) else Op.NOT_IN_ICASE
        return pred(name, negated, [tag(v, kind, False) for v in values])
    if op in (Op.PREFIX, Op.PREFIX_ICASE):
        return pred(name, COMPLEMENT[op], "s" + operand)
    if op in _TAIL_OPS:
        return pred(name, COMPLEMENT[op], operand + "s")
    if op is Op.CONTAINS:
        return pred(name, Op.NOT_LIKE, "s%" + like_escape(operand) + "%")
    if op is Op.LIKE:
        return pred(name, Op.NOT_LIKE, "s" + operand)
    raise AssertionError(f"ANYTHING BUT of {op!r}")  # anything_but admits BUT_OPS only


VIEW_OPS = frozenset({Op.NE, Op.NOT_IN, Op.NE_ICASE, Op.NOT_IN_ICASE, Op.NOT_PREFIX, Op.NOT_SUFFIX,
                      Op.NOT_PREFIX_ICASE, Op.NOT_SUFFIX_ICASE, Op.NOT_LIKE})
"""The operators of the view tests: an index evaluating all of them evaluates ``ANYTHING BUT``."""


def with_views(batch: EventBatch, sources: np.ndarray, views: np.ndarray, tails: np.ndarray,
               dictionary: Dictionary) -> EventBatch:
    """The batch (without rows) with a value of view ``views[j]`` (a string: tail view if
    ``tails[j]``) in each row holding attribute ``sources[j]``; a row's own values under a
    view's id are left out.  Entries stay sorted by attribute id."""
    strings = list(batch.strings)
    position: dict[str, int] = {}
    rows = np.repeat(np.arange(batch.n, dtype=np.int64), np.diff(batch.offsets))
    parts: list[tuple[np.ndarray, int, np.ndarray, np.ndarray]] = []
    for source, view, tail in zip(sources.tolist(), views.tolist(), tails.tolist(), strict=True):
        sel = np.flatnonzero(batch.attrs == source)
        if not len(sel):
            continue
        table = dictionary.strings[view]
        kinds = batch.kinds[sel]
        value = np.where(kinds == STR, batch.texts[sel], -1 - np.arange(len(sel)))  # a string once per batch
        _, first, inverse = np.unique(value, return_index=True, return_inverse=True)
        sel_first = sel[first]
        texts = np.empty(len(first), dtype=batch.texts.dtype)
        codes = np.empty(len(first), dtype=batch.codes.dtype)
        for i, (k, num, t) in enumerate(zip(batch.kinds[sel_first].tolist(), batch.nums[sel_first].tolist(),
                                            batch.texts[sel_first].tolist(), strict=True)):
            if k == STR:
                text = f"{strings[t]}s" if tail else f"s{strings[t]}"
            elif k == NUM:
                text = f"{num + 0.0!r}n" if tail else f"n{num + 0.0!r}"
            elif k == BOOL:
                text = "t" if num else "f"
            else:
                assert k == NULL
                text = "z"
            at = position.get(text)
            if at is None:
                at = position[text] = len(strings)
                strings.append(text)
            texts[i], codes[i] = at, table.get(text, -1)
        parts.append((rows[sel], view, codes[inverse.reshape(-1)], texts[inverse.reshape(-1)]))
    if not parts and not np.isin(batch.attrs, views).any():
        return batch
    new_rows = np.concatenate([p[0] for p in parts]) if parts else rows[:0]
    new_attrs = np.concatenate([np.full(len(p[0]), p[1], dtype=batch.attrs.dtype) for p in parts]) \
        if parts else batch.attrs[:0]
    order = np.lexsort((new_attrs, new_rows))  # a few per row: one per view of an attribute it holds
    added = EventArrays(new_rows[order], new_attrs[order], np.full(len(order), STR, dtype=batch.kinds.dtype),
                        np.full(len(order), np.nan, dtype=batch.nums.dtype),
                        np.concatenate([p[2] for p in parts])[order] if parts else batch.codes[:0],
                        np.concatenate([p[3] for p in parts])[order] if parts else batch.texts[:0])
    drop = np.zeros(int(max(batch.attrs.max(initial=0), views.max(initial=0))) + 1, dtype=np.bool_)
    drop[views] = True
    offsets, attrs, kinds, nums, codes, texts = insert_entries(batch.arrays, drop, added)
    return EventBatch(offsets, attrs, kinds, nums, codes, texts, strings)


@njit(cache=True, nogil=True)
def insert_entries(batch, drop, added):
    """The rows of ``batch`` (an :class:`~matchers.events.EventArrays`) without their entries of
    an attribute ``a`` with ``drop[a]`` and with the ``added`` entries (an ``EventArrays`` whose
    ``offsets`` are the rows the entries go to, sorted by row and attribute) among theirs, in
    attribute order: an ``EventArrays`` (a row's entries before those added under the same attribute)."""
    offsets, attrs, kinds, nums, codes, texts = batch
    rows, a_attrs, a_kinds, a_nums, a_codes, a_texts = added
    n, size = len(offsets) - 1, len(attrs) + len(rows)
    out = EventArrays(np.zeros(n + 1, offsets.dtype), np.empty(size, attrs.dtype), np.empty(size, kinds.dtype),
                      np.empty(size, nums.dtype), np.empty(size, codes.dtype), np.empty(size, texts.dtype))
    pos = 0
    q = 0
    for r in range(n):
        for j in range(offsets[r], offsets[r + 1] + 1):
            last = j == offsets[r + 1]
            a = 0 if last else attrs[j]
            while q < len(rows) and rows[q] == r and (last or a_attrs[q] < a):
                _put_entry(out, pos, a_attrs[q], a_kinds[q], a_nums[q], a_codes[q], a_texts[q])
                pos += 1
                q += 1
            if not last and not (a < len(drop) and drop[a]):
                _put_entry(out, pos, a, kinds[j], nums[j], codes[j], texts[j])
                pos += 1
        out.offsets[r + 1] = pos
    return out.offsets, out.attrs[:pos], out.kinds[:pos], out.nums[:pos], out.codes[:pos], out.texts[:pos]


@njit(cache=True, nogil=True, inline="always")
def _put_entry(out, pos, attr, kind, num, code, text):
    out.attrs[pos] = attr
    out.kinds[pos] = kind
    out.nums[pos] = num
    out.codes[pos] = code
    out.texts[pos] = text
