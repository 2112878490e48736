"""One-pass evaluation of the static edge predicates of every automaton edge.

Each static predicate is a conjunction of atoms ``(attribute, operator, constant)`` over
the raw event, registered under an integer id. Conjunctions are clustered by an *access
atom* (Fabret et al.): an equality, found through a hash on ``(attribute, value)``; else
a numeric range, found through the constants kept sorted per ``(attribute, operator)``;
else the conjunction is checked for every event of its stream. Candidates found through
their access atom are then checked atom by atom. Semantics are the algebra's: a missing
attribute or a type mismatch makes an atom false.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from typing import Any

from .algebra import compare

Atom = tuple[str, str, Any]


def tag(value: Any) -> Any:
    """Hash key of a value under the algebra's equality (``True`` is not ``1``)."""
    if isinstance(value, bool):
        return ("\x00bool", value)
    return value


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def holds(atom: Atom, attrs: dict[str, Any]) -> bool:
    """Whether one static atom holds on an event's attributes."""
    attr, op, c = atom
    v = attrs.get(attr)
    if op == "contains":
        return isinstance(v, str) and c in v
    return compare(op, v, c) is True


def atom_fn(atom: Atom):
    """A closure testing one static atom on an event's attributes (same as :func:`holds`)."""
    attr, op, c = atom
    if op == "contains":
        return lambda attrs: isinstance(v := attrs.get(attr), str) and c in v
    if _is_num(c):
        if op == "=":
            return lambda attrs: type(v := attrs.get(attr)) in _NUM and v == c
        if op == "!=":
            return lambda attrs: type(v := attrs.get(attr)) in _NUM and v != c
        if op == "<":
            return lambda attrs: type(v := attrs.get(attr)) in _NUM and v < c
        if op == "<=":
            return lambda attrs: type(v := attrs.get(attr)) in _NUM and v <= c
        if op == ">":
            return lambda attrs: type(v := attrs.get(attr)) in _NUM and v > c
        return lambda attrs: type(v := attrs.get(attr)) in _NUM and v >= c
    if isinstance(c, str) and op != "contains":
        cmp = _OPS[op]
        return lambda attrs: isinstance(v := attrs.get(attr), str) and cmp(v, c)
    return lambda attrs: holds(atom, attrs)


_NUM = (int, float)
_OPS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def conj_fn(atoms: tuple[Atom, ...]):
    """A closure testing a conjunction of static atoms."""
    fns = tuple(atom_fn(a) for a in atoms)
    if len(fns) == 1:
        return fns[0]
    if len(fns) == 2:
        f, g = fns
        return lambda attrs: f(attrs) and g(attrs)
    return lambda attrs: all(fn(attrs) for fn in fns)


class _StreamIndex:
    def __init__(self) -> None:
        self.eq_attrs: dict[str, int] = {}
        self.eq: dict[tuple[str, Any], set[int]] = {}
        # the same, with each conjunction's check of its other atoms (in the set's order)
        self.eq_checks: dict[tuple[str, Any], tuple[tuple[int, Any], ...]] = {}
        self.rng: dict[tuple[str, str], tuple[list, list]] = {}  # sorted constants, ids
        self.scan: set[int] = set()

    def __len__(self) -> int:
        return len(self.scan) + sum(len(s) for s in self.eq.values()) + sum(len(v[0]) for v in self.rng.values())


class StaticFilters:
    """Static conjunctions of all edges, matched against one event at a time."""

    def __init__(self) -> None:
        self._atoms: dict[int, tuple[Atom, ...]] = {}
        self._fns: dict[int, Any] = {}
        self._where: dict[int, tuple[str, str, Any]] = {}
        self._streams: dict[str, _StreamIndex] = {}

    def __len__(self) -> int:
        return len(self._atoms)

    def add(self, cid: int, stream: str, atoms: tuple[Atom, ...]) -> None:
        """Register conjunction ``cid`` over events of ``stream``."""
        if cid in self._atoms:
            raise ValueError(f"static conjunction {cid} is already registered")
        idx = self._streams.setdefault(stream, _StreamIndex())
        self._atoms[cid] = atoms
        access = next((a for a in atoms if a[1] == "="), None)
        if access is None:
            # a NaN constant satisfies no range atom: it cannot be a sorted key
            access = next((a for a in atoms if a[1] in ("<", "<=", ">", ">=") and _is_num(a[2]) and a[2] == a[2]), None)
        # the access atom holds for every candidate found through it: check the others
        rest = tuple(a for a in atoms if a is not access)
        self._fns[cid] = conj_fn(rest) if rest else None
        if access is not None and access[1] == "=":
            key = (access[0], tag(access[2]))
            idx.eq_attrs[access[0]] = idx.eq_attrs.get(access[0], 0) + 1
            idx.eq.setdefault(key, set()).add(cid)
            idx.eq_checks[key] = tuple((c, self._fns[c]) for c in idx.eq[key])
            self._where[cid] = (stream, "eq", key)
            return
        if access is not None:
            key = (access[0], access[1])
            consts, ids = idx.rng.setdefault(key, ([], []))
            i = bisect_right(consts, access[2])
            consts.insert(i, access[2])
            ids.insert(i, cid)
            self._where[cid] = (stream, "rng", (key, access[2]))
            return
        idx.scan.add(cid)
        self._where[cid] = (stream, "scan", None)

    def remove(self, cid: int) -> None:
        """Forget conjunction ``cid`` (unknown ids are ignored)."""
        if self._atoms.pop(cid, None) is None:
            return
        del self._fns[cid]
        stream, kind, key = self._where.pop(cid)
        idx = self._streams[stream]
        if kind == "eq":
            idx.eq_attrs[key[0]] -= 1
            if not idx.eq_attrs[key[0]]:
                del idx.eq_attrs[key[0]]
            ids = idx.eq[key]
            ids.discard(cid)
            if not ids:
                del idx.eq[key], idx.eq_checks[key]
            else:
                idx.eq_checks[key] = tuple((c, self._fns[c]) for c in ids)
        elif kind == "rng":
            (rkey, c) = key
            consts, rids = idx.rng[rkey]
            i = bisect_left(consts, c)
            while rids[i] != cid:
                i += 1
            del consts[i], rids[i]
            if not consts:
                del idx.rng[rkey]
        else:
            idx.scan.discard(cid)

    def match(self, stream: str, attrs: dict[str, Any]) -> set[int]:
        """Ids of the conjunctions of ``stream`` that the event satisfies."""
        idx = self._streams.get(stream)
        if idx is None:
            return set()
        fns = self._fns
        out: set[int] = set()
        candidates: list = []
        eq = idx.eq_checks
        for name in idx.eq_attrs:
            value = attrs.get(name)
            if value is not None:
                hit = eq.get((name, ("\x00bool", value) if value.__class__ is bool else value))  # tag(value)
                if hit:
                    for cid, fn in hit:
                        if fn is None or fn(attrs):
                            out.add(cid)
        for (name, op), (consts, ids) in idx.rng.items():
            v = attrs.get(name)
            if not _is_num(v) or v != v:  # NaN satisfies no range atom (and would break bisect)
                continue
            if op == ">":  # v > c
                candidates.append(ids[: bisect_left(consts, v)])
            elif op == ">=":
                candidates.append(ids[: bisect_right(consts, v)])
            elif op == "<":  # v < c
                candidates.append(ids[bisect_right(consts, v):])
            else:
                candidates.append(ids[bisect_left(consts, v):])
        if idx.scan:
            candidates.append(idx.scan)
        for group in candidates:
            for cid in group:
                fn = fns[cid]
                if fn is None or fn(attrs):
                    out.add(cid)
        return out


STREAM_ATTR = "$stream"
"""Attribute carrying the stream name when static conjunctions go to a project matcher
(CEL names cannot start with ``$``, so it never clashes with an event attribute)."""

_OP_NAMES = {"=": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "contains": "contains"}


class MatcherFilters:
    """The same conjunctions evaluated by one of the project's matchers, a batch at a time.

    Each conjunction becomes a subscription (its atoms and the stream name); a batch of
    events is encoded and matched in one call, which is where the compiled kernels pay.

    Parameters
    ----------
    name : a matcher registered in :mod:`matchers.base` (``"counting"``, ...).
    """

    def __init__(self, name: str):
        from matchers import catalog

        self.name = name
        self._matcher = catalog.create(name)
        self._never: set[int] = set()

    def __len__(self) -> int:
        return len(self._matcher) + len(self._never)

    def add(self, cid: int, stream: str, atoms: tuple[Atom, ...]) -> None:
        from matchers import expr as E
        from matchers.errors import SubscriptionError

        try:
            preds = [E.pred(STREAM_ATTR, "=", stream)]
            preds += [E.pred(a, _OP_NAMES[op], c) for a, op, c in atoms]
        except SubscriptionError:
            self._never.add(cid)  # e.g. booleans ordered: the conjunction can never hold
            return
        self._matcher.add([E.Subscription.of(str(cid), E.And(tuple(preds)))])

    def remove(self, cid: int) -> None:
        self._never.discard(cid)
        self._matcher.remove([str(cid)])

    def match(self, stream: str, attrs: dict[str, Any]) -> set[int]:
        return self.match_batch([(stream, attrs)])[0]

    def match_batch(self, events: list[tuple[str, dict[str, Any]]]) -> list[set[int]]:
        """Satisfied conjunction ids of each ``(stream, attributes)``."""
        if not len(self._matcher):
            return [set() for _ in events]
        flat = [{**attrs, STREAM_ATTR: stream} for stream, attrs in events]
        return [set(map(int, ids)) for ids in self._matcher.match_events(flat)]
