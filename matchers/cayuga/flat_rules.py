"""Which subscriptions the flat store runs, and its exported rows as the Python store's.

A subscription is *flat* (:func:`flat_chain`), and runs in :class:`.flat.FlatStore`, when it
is one chain whose start edge is the stream itself or a conjunction of static atoms on it,
whose operators are ``NEXT`` or (at most one) ``FOLD`` without aggregates and with a
``TRUE`` iteration condition, over the right stream itself, with input predicates made of at most three equalities between the
event and the instance's current record and of static atoms, and with only ``DUR`` tests
after each operator; it has no after-match skip, publishes nothing and reads no stream a
subscription publishes. Static atoms compare with a number constant, or test a string or
boolean constant with ``=`` or ``!=``.

Exported instance rows of flat nodes name them ``FLAT_PREFIX`` + the node id without its
``n`` (:func:`plain_rows`, :func:`flat_rows`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import algebra as A
from . import flat_layout as L
from .automaton import Node, dur_tests
from .compiler import Chain, node_preds, view_is_static, view_static_atoms

FLAT_PREFIX = "f"


def flat_chain(c: Chain) -> bool:
    """Whether chain ``c`` can run in the flat engine (see the module's docstring)."""
    if not c.ops or sum(spec.kind == "fold" for spec, _ in c.ops) > 1:
        return False  # two FOLDs: two derivations may give one witness (the engine reports it once)
    if c.start.steps and not (view_is_static(c.start) and view_static_atoms(c.start)):
        return False
    if not all(map(kernel_atom, view_static_atoms(c.start))):
        return False
    for spec, post in c.ops:
        if spec.kind not in ("next", "fold") or spec.right.steps:
            return False
        if spec.kind == "fold" and (spec.cont != A.TRUE or spec.aggs):
            return False
        preds = node_preds(spec)
        if preds.rest or len(preds.eq) > L.MAX_KEY or not all(map(kernel_atom, preds.static)):
            return False
        if not all(isinstance(t, A.Attr) and t.scope == A.LAST for _, t in preds.eq):
            return False
        durs = dur_tests(post)
        if durs is None or len(durs) > L.MAX_DUR_TESTS:
            return False
    return True


def kernel_atom(atom: tuple[str, str, Any]) -> bool:
    """Whether the kernels check static atom ``(attribute, operator, constant)``: a number
    constant with any comparison, a string or boolean one with ``=`` or ``!=``."""
    _, op, c = atom
    if type(c) in (int, float):
        return op in L.OPS
    return type(c) in (str, bool) and op in ("=", "!=")


def plain_rows(rows: Iterable[tuple]) -> list[tuple]:
    """Exported rows of flat nodes with their node ids as the Python store's."""
    return [("n" + r[0][len(FLAT_PREFIX):], *r[1:]) for r in rows]


def flat_rows(rows: list[tuple], nodes: dict[str, Node]) -> list[tuple]:
    """The rows of an engine's export for the flat store holding ``nodes``, as
    :meth:`FlatStore.load_rows` takes them: those of flat nodes, or when there are none (an
    engine without a flat store exported them) those of the node ids it holds."""
    old = not any(r[0] is not None and r[0].startswith(FLAT_PREFIX) for r in rows)
    out = []
    for r in rows:
        nid = r[0]
        if nid is None:
            continue
        if nid.startswith(FLAT_PREFIX):
            out.append(("n" + nid[len(FLAT_PREFIX):], *r[1:7], r[7] if len(r) > 7 else 0))
        elif old and nid in nodes:
            out.append((*r[:7], r[7] if len(r) > 7 else 0))
    return out
