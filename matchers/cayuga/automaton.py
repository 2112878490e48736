"""The merged automaton: start edges, nodes, forward edges, instance buckets, and
:class:`Automaton`, the subscriptions' chains linked into them.

Both instance stores (:mod:`.store`) hold one :class:`Automaton` and are told by it when a
start edge or a node comes or goes; the Python store's nodes hold compiled closures and
buckets of :class:`Inst`, the flat store's only their atoms (its instances are rows).
Plain Python objects, rebuilt from the subscription texts (never pickled). Instances are
the only state that moves (see :meth:`matchers.cayuga.engine.Engine.export_instances`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

from . import algebra as A
from .closures import items_fn, pred_fn, value_fn
from .compiler import (
    Chain,
    OpSpec,
    Step,
    View,
    dur_bound,
    leading_filters,
    node_key,
    node_preds,
    start_key,
)
from .rules import OPS
from .static import conj_fn


class Match(NamedTuple):
    """A completed pattern: the subscription, the output record and its witness."""

    sub_id: str
    attrs: dict[str, Any]
    t0: int
    t1: int
    witness: tuple[str, ...]


new = tuple.__new__  # ``new(Match, (...))`` builds a Match without its keyword handling

StepsFn = Callable[[dict, int, int], "dict | None"]


@lru_cache(maxsize=65536)
def steps_fn(steps: tuple[Step, ...]) -> StepsFn:
    """Closure applying filters and projections to a record's attributes (``None``: filtered out).

    Equal steps give the same closure, so its result on an event can be shared.
    """
    compiled: list[tuple[bool, Callable]] = []
    for kind, arg in steps:
        if kind == "filter":
            compiled.append((True, pred_fn(arg)))
        else:
            compiled.append((False, items_fn(arg)))
    if not compiled:
        return lambda attrs, t0, t1: attrs
    if len(compiled) == 1 and compiled[0][0]:
        fn = compiled[0][1]
        return lambda attrs, t0, t1: attrs if fn(attrs, attrs, attrs, t1 - t0 + 1) is True else None

    def apply(attrs, t0, t1):
        dur = t1 - t0 + 1
        for is_filter, fn in compiled:
            if is_filter:
                if fn(attrs, attrs, attrs, dur) is not True:
                    return None
            else:
                attrs = fn(attrs, attrs, attrs, dur, attrs)
        return attrs

    return apply


DurTest = tuple[int, Any]  # (index in :data:`.rules.OPS`, constant)


def dur_tests(steps: tuple[Step, ...]) -> tuple[DurTest, ...] | None:
    """``steps`` as ``(operator index, constant)`` tests on the duration when they are only
    filters comparing ``DUR`` with a number (``()``: no steps); ``None`` otherwise.

    ``DUR`` is an integer, so each test is the plain comparison the compiled predicate
    makes (a NaN constant fails every one of them, as it does there). Plain values: the
    cyclic collector does not track them.
    """
    out: list[DurTest] = []
    for kind, arg in steps:
        if kind != "filter":
            return None
        for part in A.split_and(arg):
            if not isinstance(part, A.Cmp):
                return None
            left, right, op = part.left, part.right, part.op
            if isinstance(left, A.Const):
                left, right, op = right, left, A.FLIP[op]
            if not (isinstance(left, A.Dur) and isinstance(right, A.Const) and type(right.value) in (int, float)):
                return None
            out.append((OPS.index(op), right.value))
    return tuple(out)


class Out:
    """Forward edges sharing their unary operators (``post``): destinations and accepts.

    ``dests`` maps to the subscriptions using them (reference counts); ``accept`` maps
    the subscriptions it completes to the epoch from which they see instances. ``durs``:
    ``post`` as tests on the duration (:func:`dur_tests`; ``None``: apply ``fn``).
    ``targets``: the nodes of ``dests``, in its order (the engine sets them when ``dests``
    changes: no lookup of node ids per record).
    """

    __slots__ = ("post", "fn", "durs", "dests", "targets", "accept")

    def __init__(self, post: tuple[Step, ...]):
        self.post = post
        self.fn = steps_fn(post)
        self.durs = dur_tests(post)
        self.dests: dict[str, set[str]] = {}
        self.targets: tuple[Node, ...] = ()
        self.accept: dict[str, int] = {}

    def empty(self) -> bool:
        return not self.dests and not self.accept


class Start:
    """A start edge: events of a view create records."""

    __slots__ = ("id", "view", "fn", "cid", "out", "subs")

    def __init__(self, sid: str, view: View, closures: bool = True):
        self.id = sid
        self.view = view
        # None: the event's attributes as they are (or no closures: the flat engine's rows)
        self.fn: StepsFn | None = steps_fn(view.steps) if closures else None
        self.cid = -1  # static conjunction id, -1 when there is none
        self.out = Out(())
        self.subs: set[str] = set()


class Bucket:
    """Instances of one node sharing the values bound by the node's equality predicates.

    Instances with a numeric range bound are kept sorted by it; the others are in
    ``plain``, those with a NaN bound in ``never`` (no value compares with NaN: the
    range predicate cannot hold, and a NaN in the sorted list would break ``bisect``).
    ``never``, ``bounds`` and ``insts`` are made on first use (``None`` before): buckets
    come and go with their instances, and most hold plain ones only.
    """

    __slots__ = ("node", "plain", "never", "bounds", "insts")

    def __init__(self, node: Node) -> None:
        self.node = node
        self.plain: dict[Inst, None] = {}
        self.never: dict[Inst, None] | None = None
        self.bounds: list | None = None
        self.insts: list[Inst] | None = None

    def __len__(self) -> int:
        return len(self.plain) + len(self.never or ()) + len(self.insts or ())

    def all(self) -> list[Inst]:
        """Every instance of the bucket."""
        return [*self.plain, *(self.never or ()), *(self.insts or ())]

    def add(self, inst: Inst, sorted_bound: bool) -> None:
        b = inst.bound
        if not sorted_bound:
            self.plain[inst] = None
        elif b != b:
            if self.never is None:
                self.never = {}
            self.never[inst] = None
        else:
            if self.bounds is None or self.insts is None:
                self.bounds, self.insts = [], []
            i = bisect_right(self.bounds, b)
            self.bounds.insert(i, b)
            self.insts.insert(i, inst)

    def discard(self, inst: Inst) -> None:
        if inst in self.plain:
            del self.plain[inst]
            return
        if self.never and inst in self.never:
            del self.never[inst]
            return
        bounds, insts = self.bounds, self.insts
        if bounds is None or insts is None:
            raise KeyError("instance not in its bucket")
        i = bisect_left(bounds, inst.bound)
        while insts[i] is not inst:
            i += 1
        del bounds[i], insts[i]

    def candidates(self, op: str | None, v: Any) -> list[Inst]:
        """Instances whose range predicate ``v op bound`` can hold (all plain ones)."""
        out = list(self.plain)
        insts = self.insts
        if op is None:
            return out + list(self.never or ()) + (insts or [])
        if not insts or not (isinstance(v, (int, float)) and not isinstance(v, bool)) or v != v:
            return out
        b = self.bounds or []  # made with insts
        if op == ">":
            return out + insts[: bisect_left(b, v)]
        if op == ">=":
            return out + insts[: bisect_right(b, v)]
        if op == "<":
            return out + insts[bisect_right(b, v):]
        return out + insts[bisect_left(b, v):]


class Inst:
    """An automaton instance: the records it holds and where it is indexed."""

    __slots__ = ("node", "first", "cur", "t0", "t1", "wit", "born", "seq", "key", "bound", "alive")

    def __init__(self, node: Node, first: dict, cur: dict, t0: int, t1: int, wit: tuple, born: int, seq: int):
        self.node = node
        self.first = first
        self.cur = cur
        self.t0 = t0
        self.t1 = t1
        self.wit = wit
        self.born = born
        self.seq = seq  # the engine's sequence number of the event that started the run
        self.key: tuple | None = ()  # None: an UNLESS instance no event looks up
        self.bound: Any = None
        self.alive = False


def _uncompiled(*_args: Any) -> Any:
    raise RuntimeError("a node made without closures (the flat engine's) was stepped by the Python store")


class Node:
    """An automaton node: the operator its instances wait on, its edges and instances.

    Parameters
    ----------
    nid : stable id (see :func:`.compiler.node_key`).
    spec : the operator.
    indexed : use the static, equality and range indexes (else every instance of the
        node's stream is checked against every event).
    closures : compile the predicates (the flat engine's nodes, whose step is a kernel
        over rows, keep only the attributes and atoms: fewer objects for the collector).
    """

    def __init__(self, nid: str, spec: OpSpec, indexed: bool, closures: bool = True):
        self.id = nid
        self.spec = spec
        self.kind = spec.kind
        self.window = spec.window  # UNLESS: an instance fires at its t1 + window unless an event kills it
        self.stream = spec.right.stream
        preds = node_preds(spec)
        self.static_atoms = preds.static if indexed else ()
        self.eq_attrs = tuple(a for a, _ in preds.eq) if indexed else ()
        self.view_fn: StepsFn | None = None  # None: the event itself
        self.theta: Callable | None = None  # None: nothing to check
        self.cont: Callable = _uncompiled
        self.aggs: Callable = _uncompiled
        self.static_fn: Callable | None = None
        self.eq_fns: tuple[Callable, ...] = ()
        if closures:
            self.view_fn = steps_fn(spec.right.steps) if spec.right.steps else None
            # with the indexes, the static atoms are checked once per event and the
            # equalities hold by the bucket: an affected instance checks the rest
            theta = A.conj(list(preds.rest)) if indexed else spec.pred
            self.theta = None if theta == A.TRUE else pred_fn(theta)
            self.cont = pred_fn(spec.cont)
            self.aggs = items_fn(spec.aggs, overlay=True)
            self.static_fn = conj_fn(self.static_atoms) if self.static_atoms else None
            self.eq_fns = tuple(value_fn(t) for _, t in preds.eq) if indexed else ()
        # the bound values when each is an attribute of the instance's current record (None: use eq_fns)
        self.eq_names: tuple[str, ...] | None = None
        if all(isinstance(t, A.Attr) and t.scope != A.FIRST for _, t in preds.eq) or not indexed:
            self.eq_names = tuple(t.name for _, t in preds.eq) if indexed else ()  # type: ignore[union-attr]  # all Attr (checked above)
        self.rng_attr: str | None = None
        self.rng_op: str | None = None
        self.rng_fn: Callable | None = None
        if indexed and preds.rng is not None:
            self.rng_attr, self.rng_op, rng_term = preds.rng
            self.rng_fn = value_fn(rng_term) if closures else None
        self.outs: dict[tuple[Step, ...], Out] = {}
        self.subs: set[str] = set()
        self.buckets: dict[tuple | None, Bucket] = {}
        self.deadline: float | None = None
        self.group: Any = None  # the engine's index group of (stream, eq_attrs)

    def update_deadline(self) -> None:
        """The largest duration any forward edge of the node allows (``None``: unbounded).

        Durations only grow along a path and a rebind edge emits nothing, so an instance
        older than every forward edge allows can never contribute to a match. An
        ``UNLESS`` instance waits for its own deadline instead.
        """
        if self.kind == "unless":
            self.deadline = None
            return
        base = A.split_and(self.spec.pred)
        if self.kind == "fold":
            base = base + A.split_and(self.spec.cont)
        bounds = []
        for post in self.outs:
            bounds.append(dur_bound(base + leading_filters(post)))
        if not bounds or any(b is None for b in bounds):
            self.deadline = None
        else:
            self.deadline = max(bounds)  # type: ignore[type-var]  # no bound is None (checked above)


class Builder(Protocol):
    """What an instance store does when its :class:`Automaton` gains or loses an edge or node."""

    def new_start(self, sid: str, c: Chain) -> Start: ...

    def new_node(self, nid: str, spec: OpSpec) -> Node: ...

    def delete_start(self, start: Start) -> None: ...

    def delete_node(self, node: Node) -> None: ...


class Automaton:
    """Subscriptions' chains linked into start edges, nodes and forward edges (shared by
    chains with equivalent prefixes when ``merge``); ``builder`` makes and drops them."""

    def __init__(self, merge: bool, builder: Builder):
        self.merge = merge
        self.builder = builder
        self.starts: dict[str, Start] = {}
        self.nodes: dict[str, Node] = {}
        self.subs: dict[str, tuple[tuple, ...]] = {}  # sub -> links of its chains (see _link)

    def link(self, sub: str, chs: list[Chain], since: int) -> tuple[tuple, ...]:
        """Link the chains of ``sub`` (seeing the instances born at epoch ``since`` or later)."""
        owner = None if self.merge else sub
        links = self.subs[sub] = tuple(self._link(sub, c, owner, since) for c in chs)
        return links

    def unlink(self, sub: str) -> tuple[tuple, ...] | None:
        """Unlink ``sub``; edges and nodes no other subscription uses are dropped. Its links
        (``None``: unknown)."""
        links = self.subs.pop(sub, None)
        for link in links or ():
            self._unlink_chain(sub, *link)
        return links

    def chain_of(self, sub: str) -> tuple[Chain, int]:
        """The chain of a one-chain subscription with operators, rebuilt from its edges and
        nodes, and the epoch from which it sees instances."""
        ((sid, path),) = self.subs[sub]
        chain = Chain(self.starts[sid].view, tuple((self.nodes[nid].spec, post) for nid, post in path))
        return chain, self.nodes[path[-1][0]].outs[path[-1][1]].accept[sub]

    def _link(self, sub: str, c: Chain, owner: str | None, since: int) -> tuple:
        """Link one chain of ``sub``; what unlinking it needs: ``(start id, ((node id, post), ...))``."""
        sid = start_key(c.start, owner)
        start = self.starts.get(sid)
        if start is None:
            start = self.starts[sid] = self.builder.new_start(sid, c)
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
                node = self.nodes[ids[k]] = self.builder.new_node(ids[k], spec)
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
                self.builder.delete_start(start)
                del self.starts[sid]
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
                self.builder.delete_node(node)
                del self.nodes[node.id]
            else:
                node.update_deadline()


def _drop(out: Out, dest: str | None, sub: str) -> None:
    if dest is None:
        out.accept.pop(sub, None)
        return
    subs = out.dests.get(dest)
    if subs is not None:
        subs.discard(sub)
        if not subs:
            del out.dests[dest]
