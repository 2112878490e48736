"""Which event attributes a subscription reads, and of which streams (for the service's
warning about an attribute no event of its stream has ever carried).

A read is an attribute reference as written (``$2.prcie``, ``prcie`` in a ``FILTER``) with
its *sources*: the ``(stream, raw attribute)`` pairs whose events can supply it, following
projections (``SELECT price AS p`` makes ``p`` the ``price`` of its input) and the records
that ``NEXT``/``FOLD`` build (an attribute of the record so far comes from any stream before).
A reference to a computed value (``AS`` of an expression, an aggregate) has no sources and
is not a read here; nor is one that a projection dropped (it is never there, whatever the
events carry).

Examples
--------
>>> [(r.text, sorted(r.sources)) for r in reads("S NEXT{$2.prcie > $1.price} T")]
[('$.price', [('S', 'price')]), ('$2.prcie', [('T', 'prcie')])]
"""

from __future__ import annotations

from dataclasses import dataclass

from . import algebra as A
from .compiler import Chain, View, chains, top
from .language import parse

Sources = frozenset[tuple[str, str]] | None
"""``(stream, raw attribute)`` pairs an attribute can come from; ``None``: computed."""


@dataclass(frozen=True)
class Read:
    """An attribute reference (``text`` as written, scope prefix included) and its sources."""

    text: str
    sources: frozenset[tuple[str, str]]

    @property
    def streams(self) -> tuple[str, ...]:
        return tuple(sorted({s for s, _ in self.sources}))

    @property
    def raw(self) -> tuple[str, ...]:
        return tuple(sorted({a for _, a in self.sources}))


@dataclass(frozen=True)
class _Prov:
    """Where each attribute of a record comes from: ``explicit`` names, else the raw
    attribute of the same name of any ``passthrough`` stream."""

    explicit: dict[str, Sources]
    passthrough: frozenset[str]

    def resolve(self, name: str) -> Sources:
        if name in self.explicit:
            return self.explicit[name]
        return frozenset((s, name) for s in self.passthrough)


def _either(a: Sources, b: Sources) -> Sources:
    return None if a is None or b is None else a | b


def _combined(left: _Prov, right: _Prov, computed: frozenset[str] = frozenset()) -> _Prov:
    """The record of ``NEXT``/``FOLD``: the right event's attribute where it has one, else the
    left record's (so either may supply it); ``computed`` names (aggregates) come from neither."""
    names = set(left.explicit) | set(right.explicit)
    explicit = {n: _either(left.resolve(n), right.resolve(n)) for n in names}
    explicit.update(dict.fromkeys(computed))
    return _Prov(explicit, left.passthrough | right.passthrough)


def _selected(prov: _Prov, items: tuple[A.SelectItem, ...]) -> _Prov:
    explicit: dict[str, Sources] = {}
    star = any(i.expr is None for i in items)
    if star:
        explicit.update(prov.explicit)
    for item in items:
        if item.expr is None or item.name is None:
            continue
        expr = item.expr
        explicit[item.name] = prov.resolve(expr.name) if isinstance(expr, A.Attr) and expr.scope == A.BARE else None
    return _Prov(explicit, prov.passthrough if star else frozenset())


_PREFIX = {A.BARE: "", A.FIRST: "$1.", A.LAST: "$.", A.SECOND: "$2."}


class _Collector:
    def __init__(self) -> None:
        self.found: dict[str, set[tuple[str, str]]] = {}

    def term(self, term, scopes: dict[str, _Prov]) -> None:
        """The reads of a predicate or value, ``scopes`` mapping a scope to its record."""
        if isinstance(term, A.Attr):
            prov = scopes.get(term.scope)
            src = prov.resolve(term.name) if prov is not None else None
            if src:
                self.found.setdefault(_PREFIX[term.scope] + term.name, set()).update(src)
            return
        for child in _children(term):
            self.term(child, scopes)

    def view(self, view: View) -> _Prov:
        """The reads of a view's steps; its record's provenance."""
        return self.steps(_Prov({}, frozenset({view.stream})), view.steps)

    def steps(self, prov: _Prov, steps: tuple) -> _Prov:
        for kind, arg in steps:
            if kind == "filter":
                self.term(arg, {A.BARE: prov})
            else:
                for item in arg:
                    if item.expr is not None:
                        self.term(item.expr, {A.BARE: prov})
                prov = _selected(prov, arg)
        return prov

    def chain(self, c: Chain) -> None:
        left = self.view(c.start)
        for spec, post in c.ops:
            right = self.view(spec.right)
            comb = _combined(left, right, frozenset(i.name for i in spec.aggs if i.name is not None))
            if spec.kind == "fold":
                scopes = {A.FIRST: left, A.LAST: _combined(left, comb), A.SECOND: right}
            else:
                scopes = {A.FIRST: left, A.LAST: left, A.SECOND: right}
            for part in (spec.pred, spec.cont, *(i.expr for i in spec.aggs if i.expr is not None)):
                self.term(part, scopes)
            left = self.steps(left if spec.kind == "unless" else comb, post)


def _children(term) -> tuple:
    if isinstance(term, (A.Cmp, A.Arith)):
        return (term.left, term.right)
    if isinstance(term, A.Contains):
        return (term.text, term.pattern)
    if isinstance(term, (A.And, A.Or)):
        return tuple(term.parts)
    if isinstance(term, A.Not):
        return (term.operand,)
    if isinstance(term, A.Neg):
        return (term.operand,)
    if isinstance(term, A.Func):
        return tuple(term.args)
    return ()


def reads(text: str) -> list[Read]:
    """The attribute reads of a subscription written in CEL, ordered by their text.

    Raises
    ------
    SubscriptionError
        When the subscription does not compile (as :func:`.language.parse` and
        :func:`.compiler.chains`).
    """
    out = _Collector()
    for c in chains(top(parse(text))[0]):
        out.chain(c)
    return [Read(t, frozenset(src)) for t, src in sorted(out.found.items())]
