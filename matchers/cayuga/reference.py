"""Reference evaluator of the Cayuga algebra over a finite list of events.

Written for clarity, not speed: every operator is computed from its definition, bottom
up, over the whole list. It is the oracle the automaton engine is tested against.

Each output record comes with its *position*: the index of the event by which an online
engine reports it. Internally positions are finer, tuples ordered as an engine works:
``(i,)`` for the records completed by event ``i``; ``(i - 0.5, D)`` for the ``UNLESS``
records with deadline ``D`` known just before the first event ``i`` ending after ``D``
(``i = len(events)`` when the evaluation runs ``until`` a time at or after ``D``), by
order of deadline; and ``p + (subscription, witness, t0, attributes)`` for a record
published at ``p`` and fed back as an event (right after what produced it, in that
order). Events must arrive in temporal order of ``t1``; among candidates for "the
first event after", this order decides.
"""

from __future__ import annotations

import math
from typing import Any

from . import algebra as A

Positioned = tuple[int, A.Record]
Fine = tuple[tuple, A.Record]


def evaluate(expr: A.Expr, events: list[A.Event], until: int | None = None) -> list[Positioned]:
    """All records of ``expr`` over ``events``, ordered by position (``PUBLISH``
    ignored: :func:`evaluate_all` feeds published records to other subscriptions).

    Parameters
    ----------
    expr : an algebra expression.
    events : the input, in temporal order.
    until : the time passed after the last event (``None``: it stops at the last event).

    Returns
    -------
    ``(position, record)`` pairs; an operator's output is a set: a record (same
    attributes, interval and witness) appears once however many ways it is derived.
    """
    return evaluate_all({"": expr}, events, until)[""]


def evaluate_all(subs: dict[str, A.Expr], events: list[A.Event], until: int | None = None) -> dict[str, list[Positioned]]:
    """The records of several subscriptions, those they ``PUBLISH`` fed back as events
    of the stream they name to the others (a subscription after those it reads).

    Raises
    ------
    ValueError
        When the events are out of order or publications form a cycle.
    """
    for a, b in zip(events, events[1:], strict=False):
        if b.t1 < a.t1:
            raise ValueError("events must arrive in temporal order of t1")
    parts = {}
    for sub, expr in subs.items():
        publish = None
        if isinstance(expr, A.Publish):
            publish, expr = expr.name, expr.src
        mode = None
        if isinstance(expr, A.Skip):
            mode, expr = expr.mode, expr.src
        parts[sub] = (expr, mode, publish)
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(sub: str) -> None:  # depth first: publishers before their readers
        if state.get(sub) == 2:
            return
        if state.get(sub) == 1:
            raise ValueError(f"publications form a cycle through {sub!r}")
        state[sub] = 1
        reads = _streams(parts[sub][0])
        for other, (_, _, publish) in sorted(parts.items()):
            if publish is not None and publish in reads:
                visit(other)
        state[sub] = 2
        order.append(sub)

    for sub in sorted(parts):
        visit(sub)
    start_of = {e.id: (i,) for i, e in enumerate(events)}
    published: dict[str, list[Fine]] = {}
    out: dict[str, list[Positioned]] = {}
    for sub in order:
        expr, mode, publish = parts[sub]
        fine = _Eval(events, until, published)(expr)
        if mode is not None:
            fine = _skip(mode, fine, start_of)
        out[sub] = [(math.ceil(pos[0]), r) for pos, r in fine]
        if publish is not None:
            feed = published.setdefault(publish, [])
            feed += [(pos + (sub, r.witness, r.t0, repr(sorted(r.attrs.items()))), r) for pos, r in fine]
            feed.sort(key=lambda pr: pr[0])
    return out


def _streams(expr: A.Expr) -> set[str]:
    if isinstance(expr, A.Stream):
        return {expr.name}
    if isinstance(expr, (A.Filter, A.Select, A.Skip, A.Publish)):
        return _streams(expr.src)
    return _streams(expr.left) | _streams(expr.right)


def _skip(mode: str, records: list[Fine], start_of: dict[str, tuple]) -> list[Fine]:
    """The records an after-match skip keeps. A record's run started at its first
    witness event; the records of one position are decided together (from the marks
    left by earlier positions), then they leave their marks: ``past_last`` the
    position (later records need a run started after it), ``to_next`` their start
    events (later records need another start event)."""
    after: tuple = (-1,)
    used: set[tuple] = set()
    out: list[Fine] = []
    i = 0
    while i < len(records):
        pos = records[i][0]
        group = []
        while i < len(records) and records[i][0] == pos:
            group.append(records[i])
            i += 1
        kept = [(p, r) for p, r in group
                if (start_of[r.witness[0]] > after if mode == "past_last" else start_of[r.witness[0]] not in used)]
        if kept and mode == "past_last":
            after = pos
        used.update(start_of[r.witness[0]] for _, r in kept)
        out.extend(kept)
    return out


class _Eval:
    """Evaluation of expressions over one list of events."""

    def __init__(self, events: list[A.Event], until: int | None, published: dict[str, list[Fine]]):
        self.events = events
        self.until = until
        self.published = published

    def __call__(self, expr: A.Expr) -> list[Fine]:
        events = self.events
        if isinstance(expr, A.Stream):
            base = [((i,), A.Record(dict(e.attrs), e.t0, e.t1, (e.id,))) for i, e in enumerate(events) if e.stream == expr.name]
            return sorted(base + self.published.get(expr.name, []), key=lambda pr: pr[0])
        if isinstance(expr, A.Filter):
            out = []
            for pos, r in self(expr.src):
                if A.eval_pred(expr.pred, {A.BARE: r.attrs}, A.duration(r.t0, r.t1)) is True:
                    out.append((pos, r))
            return out
        if isinstance(expr, A.Select):
            out = []
            for pos, r in self(expr.src):
                attrs = A.select_attrs(expr.items, {A.BARE: r.attrs}, r.attrs, A.duration(r.t0, r.t1))
                out.append((pos, A.Record(attrs, r.t0, r.t1, r.witness)))
            return _distinct(out)
        if isinstance(expr, A.Union):
            return _distinct(self(expr.left) + self(expr.right))
        if isinstance(expr, A.Next):
            rights = self(expr.right)
            out = []
            for _, r in self(expr.left):
                ctx = {A.FIRST: r.attrs, A.LAST: r.attrs}
                for qpos, s in rights:
                    if s.t0 <= r.t1:
                        continue
                    ctx[A.SECOND] = s.attrs
                    if A.eval_pred(expr.pred, ctx, A.duration(r.t0, s.t1)) is True:
                        out.append((qpos, _combine(r, s, {**r.attrs, **s.attrs})))
                        break
            return _distinct(out)
        if isinstance(expr, A.Unless):
            rights = self(expr.right)
            out = []
            for _, r in self(expr.left):
                deadline = r.t1 + expr.window
                ctx = {A.FIRST: r.attrs, A.LAST: r.attrs}
                killed = False
                for _, s in rights:
                    if r.t1 < s.t0 and s.t1 <= deadline:
                        ctx[A.SECOND] = s.attrs
                        if A.eval_pred(expr.pred, ctx, A.duration(r.t0, s.t1)) is True:
                            killed = True
                            break
                if killed:
                    continue
                at = next((i for i, e in enumerate(events) if e.t1 > deadline), None)
                if at is None and self.until is not None and deadline <= self.until:
                    at = len(events)
                if at is not None:
                    out.append(((at - 0.5, deadline), A.Record(dict(r.attrs), r.t0, deadline, r.witness)))  # type: ignore[arg-type]  # deadline is fractional after a fractional window
            return _distinct(out)
        if isinstance(expr, A.Fold):
            rights = self(expr.right)
            out = []
            for _, r0 in self(expr.left):
                cur = r0
                while True:
                    found = None
                    for qpos, s in rights:
                        if s.t0 <= cur.t1:
                            continue
                        ctx = {A.FIRST: r0.attrs, A.LAST: cur.attrs, A.SECOND: s.attrs}
                        if A.eval_pred(expr.pred, ctx, A.duration(cur.t0, s.t1)) is True:
                            found = (qpos, s, ctx)
                            break
                    if found is None:
                        break
                    qpos, s, ctx = found
                    dur = A.duration(cur.t0, s.t1)
                    if A.eval_pred(expr.cont, ctx, dur) is not True:
                        break
                    cur = _combine(cur, s, _accumulate(expr.aggs, ctx, {**cur.attrs, **s.attrs}, dur))
                    out.append((qpos, cur))
            return _distinct(out)
        raise TypeError(f"not a stream expression: {expr!r}")


def _distinct(records: list[Fine]) -> list[Fine]:
    """Records ordered by position, each once: operators produce sets (two derivations
    of the same record, e.g. through both operands of a union or through different
    iterations of nested FOLDs, are one record)."""
    seen: set = set()
    out = []
    for pos, r in sorted(records, key=lambda pr: pr[0]):
        k = r.key()
        if k not in seen:
            seen.add(k)
            out.append((pos, r))
    return out


def _combine(left: A.Record, right: A.Record, attrs: dict[str, Any]) -> A.Record:
    return A.Record(attrs, left.t0, right.t1, left.witness + right.witness)


def _accumulate(aggs, ctx, attrs: dict[str, Any], dur: int) -> dict[str, Any]:
    return A.assign(attrs, [(item.name, A.eval_value(item.expr, ctx, dur)) for item in aggs])
