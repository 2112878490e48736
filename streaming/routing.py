"""Subscriptions routed to shards by one attribute's value, and events to the shards that can
match them (``match.route_by``, ``match.route_spread``; issue 29).

A subscription is *routed* when every conjunction of its normal form requires ``attr == v`` for
one same literal ``v`` (a number, a string or a boolean: :func:`required_hashes`; ``1`` and
``1.0`` are one number, a number and a string are not). Its shard key is ``h(v) + crc32(id) %
spread`` (:func:`shard_keys`; ``h``, :func:`value_hashes`, is below ``2**31``), the key of
any other subscription (and of every pattern) its id's CRC-32; its shard is ``key % shards``
for any number of shards, so the registry stores the key (its ``crc`` column). The parse tasks
find each expression upsert's ``h(v)`` (:func:`expression_routes`, a column of their rows) and
the driver only adds the id's part (:func:`shard_keys`); changes parsed without the routing
(:data:`UNSET`: imports, tools) get theirs on the driver, by the same function.

An event can match a routed subscription of shard ``s`` only if it holds a value ``v`` of the
attribute with ``(s - h(v)) % shards < spread`` (:class:`EventRoutes`): a shard whose
subscriptions are all routed is matched on those events only (:func:`match_routed`), any other
shard on every event. Each index keeps the ids of its unrouted subscriptions
(:func:`track_build`, :func:`track_changes`, as the matcher's attribute :data:`UNROUTED`, so
that it travels with it through catch-ups and the shared index file).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from matchers.base import Matches
from matchers.events import EventBatch
from matchers.expr import Kind, Op
from matchers.packed import decode, unpack

NO_ROUTE = -1
"""The route hash of a subscription that is not routed."""
UNSET = -2
"""The route hash of a change whose route was not computed (parsed without a routing): the
registry computes it (:func:`expression_routes`)."""
UNROUTED = "routing_unrouted"
"""The matcher attribute holding the ids of its index's unrouted subscriptions (a set)."""
_NUM, _STR, _BOOL = int(Kind.NUM), int(Kind.STR), int(Kind.BOOL)
_TAGS = {_NUM: np.uint64(0x243F6A8885A308D3), _STR: np.uint64(0x13198A2E03707344),
         _BOOL: np.uint64(0xA4093822299F31D0)}
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


class Routing(NamedTuple):
    """The attribute subscriptions are routed by, and the shards each value spreads over."""

    attr: str
    spread: int = 1


def routing_of(route_by: str, spread: int) -> Routing | None:
    """The routing of ``match.route_by`` / ``match.route_spread`` (``None``: no attribute)."""
    return Routing(route_by, spread) if route_by else None


# -- value hashes ------------------------------------------------------------------------
def _finish(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser of uint64 ``x``, its top 31 bits as int64."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(33)).astype(np.int64)


def number_hashes(nums: np.ndarray, kind: int = _NUM) -> np.ndarray:
    """``h`` of numbers (``kind`` NUM) or booleans (BOOL, as ``1.0``/``0.0``): ``0.0`` and ``-0.0`` are one."""
    bits = (np.asarray(nums, np.float64) + 0.0).view(np.uint64)
    return _finish(bits ^ _TAGS[kind])


def string_hashes(strings: Iterable[str]) -> np.ndarray:
    """``h`` of strings (their UTF-8 bytes)."""
    out = []
    for s in strings:  # one per distinct string
        b = s.encode("utf-8")
        out.append(zlib.crc32(b) | ((len(b) & 0xFFFFFFFF) << 32))
    return _finish(np.array(out, np.uint64) ^ _TAGS[_STR])


def value_hashes(values: Sequence[tuple[int, Any]]) -> np.ndarray:
    """``h`` of ``(kind, value)`` pairs (:func:`canonical`'s)."""
    out = np.empty(len(values), np.int64)
    for i, (kind, value) in enumerate(values):
        out[i] = (string_hashes([value]) if kind == _STR else number_hashes(np.array([float(value)]), kind))[0]
    return out


def canonical(kind: int, value: Any) -> tuple[int, Any] | None:
    """A routable operand as one key per value: ``(kind, float)`` for a number or boolean,
    ``(kind, str)`` for a string (``None``: not routable)."""
    if kind == _STR:
        return (kind, value)
    if kind in (_NUM, _BOOL):
        return (kind, float(value) + 0.0)
    return None


# -- subscriptions ------------------------------------------------------------------------
def required_hashes(packed: pa.Array, attr: str) -> np.ndarray:
    """``h`` of the value of ``attr`` each packed expression (:func:`matchers.packed.pack`'s
    bytes, no nulls) requires in every conjunction, :data:`NO_ROUTE` where there is none (of
    several, the least by :func:`canonical` order). Read in bulk by :func:`matchers.packed.decode`."""
    n = len(packed)
    out = np.full(n, NO_ROUTE, np.int64)
    if not n:
        return out
    arr = packed.combine_chunks() if isinstance(packed, pa.ChunkedArray) else packed
    arr = arr.cast(pa.large_binary())
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, np.int64)[arr.offset: arr.offset + n + 1]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    d = decode(offsets, data)
    keys = [canonical(int(p.kind), p.operand) if p.attr == attr and p.op is Op.EQ else None for p in d.preds]
    values = sorted({k for k in keys if k is not None})
    if values:
        rank_of = {v: i for i, v in enumerate(values)}
        pred_rank = np.array([rank_of[k] if k is not None else -1 for k in keys], np.int64)
        n_conj = np.diff(d.entries)
        conj_row = np.repeat(np.arange(n, dtype=np.int64), n_conj)
        flat_conj = np.repeat(np.arange(len(d.sizes), dtype=np.int64), d.sizes)
        rank = pred_rank[d.flat]
        hit = rank >= 0
        width = len(values)
        pairs = np.unique(flat_conj[hit] * width + rank[hit])  # (conjunction, value) once each
        if len(pairs):
            row_val, counts = np.unique(conj_row[pairs // width] * width + pairs % width, return_counts=True)
            rows, ranks = row_val // width, row_val % width
            full = counts == n_conj[rows]  # the value is in every conjunction of its row
            best = np.full(n, width, np.int64)
            np.minimum.at(best, rows[full], ranks[full])
            routed = best < width
            out[routed] = value_hashes(values)[best[routed]]
    for r in d.skipped.tolist():  # rows decode leaves out (an ANYTHING BUT): read one by one
        out[r] = _required_one(arr[r].as_py(), attr)
    return out


def _required_one(blob: bytes, attr: str) -> int:
    sub = unpack(blob, "")
    common: set | None = None
    for conj in sub.conjunctions:
        vals = {canonical(int(p.kind), p.operand) for p in conj if p.attr == attr and p.op is Op.EQ} - {None}
        common = vals if common is None else common & vals
        if not common:
            return NO_ROUTE
    return int(value_hashes([min(common)])[0]) if common else NO_ROUTE


def expression_routes(packed: pa.Array, expressions: np.ndarray, attr: str) -> np.ndarray:
    """The route hash of each change: :func:`required_hashes` of the ``packed`` expressions where
    ``expressions`` (a mask: the expression upserts), :data:`NO_ROUTE` elsewhere."""
    out = np.full(len(expressions), NO_ROUTE, np.int64)
    if expressions.any():
        out[expressions] = required_hashes(packed.filter(pa.array(expressions)), attr)
    return out


def shard_keys(crcs: np.ndarray, routes: np.ndarray, spread: int) -> np.ndarray:
    """Shard keys (uint32): ``route + crc % spread`` where routed, else ``crc``."""
    crcs = np.asarray(crcs, np.uint32)
    routed = routes >= 0
    spread_part = (crcs % np.uint32(spread)).astype(np.int64)
    return np.where(routed, routes + spread_part, crcs.astype(np.int64)).astype(np.uint32)


# -- an index's unrouted subscriptions ----------------------------------------------------
def _unrouted_ids(rows: pa.Table, attr: str) -> list[str]:
    hashes = required_hashes(rows.column("packed"), attr)
    ids = rows.column("id").combine_chunks()
    return ids.filter(pa.array(hashes == NO_ROUTE)).to_pylist()


def track_build(matcher: Any, rows: pa.Table, routing: Routing | None) -> None:
    """Keep on ``matcher`` the ids of its unrouted expression ``rows`` (with a routing)."""
    if routing is not None:
        setattr(matcher, UNROUTED, set(_unrouted_ids(rows, routing.attr)))


def track_changes(matcher: Any, changed: Iterable[str], joining: pa.Table, routing: Routing | None) -> None:
    """Update the unrouted ids of ``matcher`` after a catch-up: the ``changed`` ids left, the
    expression rows ``joining`` joined."""
    held = getattr(matcher, UNROUTED, None)
    if routing is None or held is None:
        return
    held.difference_update(changed)
    held.update(_unrouted_ids(joining, routing.attr))


def routed_only(matcher: Any) -> bool:
    """Whether every subscription of ``matcher``'s index is routed (known only for an index
    built with a routing)."""
    held = getattr(matcher, UNROUTED, None)
    return held is not None and not held


# -- events -------------------------------------------------------------------------------
class EventRoutes(NamedTuple):
    """The values of the routing attribute in a batch of events: for each, its event and ``h``."""

    n: int
    events: np.ndarray
    hashes: np.ndarray

    @classmethod
    def of(cls, batch: EventBatch, attr_id: int) -> EventRoutes:
        """The routes of ``batch`` (``attr_id``: the attribute's id in the dictionary it was encoded
        against, ``-1`` if it has none: ``Dictionary.attr_ids.get``, which changes nothing)."""
        n = batch.n
        if attr_id < 0:
            return cls(n, np.zeros(0, np.int64), np.zeros(0, np.int64))
        kinds = batch.kinds
        at = np.flatnonzero((batch.attrs == attr_id) & ((kinds == _NUM) | (kinds == _STR) | (kinds == _BOOL)))
        row = np.searchsorted(batch.offsets, at, side="right") - 1
        event = row if batch.rows is None else np.searchsorted(batch.rows, row, side="right") - 1
        h = np.empty(len(at), np.int64)
        k = kinds[at]
        for kind in (_NUM, _BOOL):
            sel = k == kind
            h[sel] = number_hashes(batch.nums[at[sel]], kind)
        sel = k == _STR
        if sel.any():
            texts, inverse = np.unique(batch.texts[at[sel]], return_inverse=True)
            h[sel] = string_hashes(batch.strings[t] for t in texts.tolist())[inverse.reshape(-1)]
        return cls(n, event.astype(np.int64), h)

    def events_of(self, shard: int, shards: int, spread: int) -> np.ndarray:
        """The events (sorted) holding a value whose routed subscriptions may be in ``shard``."""
        hit = (shard - self.hashes) % shards < spread
        mask = np.zeros(self.n, np.bool_)
        mask[self.events[hit]] = True
        return np.flatnonzero(mask)


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenated ranges ``starts[i]:ends[i]``."""
    lengths = ends - starts
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    before = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.repeat(starts - before, lengths) + np.arange(total, dtype=np.int64)


def select_events(batch: EventBatch, events: np.ndarray) -> EventBatch:
    """The events ``events`` (sorted indices) of ``batch`` as a batch of their own."""
    rows = None
    picked = events
    if batch.rows is not None:
        lo, hi = batch.rows[events], batch.rows[events + 1]
        picked = _ranges(lo, hi)
        rows = np.concatenate([[0], np.cumsum(hi - lo)]).astype(batch.rows.dtype)
    lo, hi = batch.offsets[picked], batch.offsets[picked + 1]
    entries = _ranges(lo, hi)
    offsets = np.concatenate([[0], np.cumsum(hi - lo)]).astype(batch.offsets.dtype)
    return EventBatch(offsets, batch.attrs[entries], batch.kinds[entries], batch.nums[entries],
                      batch.codes[entries], batch.texts[entries], batch.strings, rows)


def expand(matches: Matches, events: np.ndarray, n: int) -> Matches:
    """Matches of the events ``events`` of a batch of ``n`` as the whole batch's (none elsewhere)."""
    counts = np.zeros(n, np.int64)
    counts[events] = np.diff(matches.offsets)
    return Matches(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), matches.keys)


def match_routed(matcher: Any, batch: EventBatch, translate: Any, routes: EventRoutes | None, shard: int,
                 shards: int, spread: int) -> Matches:
    """``matcher``'s matches of ``batch`` (``translate``: to its dictionary), matching only the
    events that can match it when its subscriptions are all routed (``routes`` given)."""
    if routes is None or not routed_only(matcher):
        return matcher.match(translate(batch))
    events = routes.events_of(shard, shards, spread)
    if len(events) == routes.n:
        return matcher.match(translate(batch))
    if not len(events):
        return Matches(np.zeros(routes.n + 1, np.int64), np.zeros(0, np.int32))
    return expand(matcher.match(translate(select_events(batch, events))), events, routes.n)
