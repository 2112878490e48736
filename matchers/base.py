"""The matcher interface (the registry of matchers by name is :mod:`matchers.catalog`).

Every index implements :class:`Matcher`: subscriptions are added and removed
incrementally (an ``add`` of a known id replaces it), a batch of encoded events is
matched at once, and memory is reported.  The base class maps subscription ids to
dense integer keys (reused after removal) that the kernels work with.

Existence and null tests (``EXISTS``, ``NOT EXISTS``, ``IS NULL``, ``IS NOT NULL``: the
operators outside :data:`~matchers.expr.INDEXED_OPS`, the first true on a missing
attribute) are handled here, in one place for every index, through *presence states*
(:mod:`matchers.presence`): the index is given the subscription with each such test
rewritten as an equality test of the attribute's state, and every event (row) a state
value for each attribute tested (``0`` missing, ``1`` null, ``2`` another value), so that
an index only ever evaluates its own operators on values an event has.  The index never
sees the ``null`` values of the events.

Any other operator an index does not evaluate itself (:meth:`Matcher.indexes`: one
outside its :attr:`Matcher.indexed_ops`) sends the subscription whole to the matcher's
*residual* matcher (a ``brute`` matcher on the same dictionary, which evaluates every
operator), under a key of the same key space; its matches are merged with the index's.

A batch is matched in chunks of events, also here: each chunk holds at most about
:data:`BATCH_BUDGET` bytes of working memory beyond the index and the matches, by the
bytes an event took in the chunk before (its matches, and its satisfied predicates when
the index has a phase 1, held as ``self.phase1``).

Events with arrays are also handled here: a batch of :class:`~matchers.events.Rows`
is matched row by row and the rows' matches are merged per event (an event matches
what one of its rows matches), so an index only ever sees flat rows.

A new index: set :attr:`Matcher.indexed_ops` to what it evaluates (the default,
:data:`~matchers.expr.INDEXED_OPS`, has the string operators of
:class:`matchers.strings.StringEvaluator`); override :meth:`Matcher._add` (not ``add``) to
insert in bulk, and :meth:`Matcher._insert_columns` to take packed rows without an object per
subscription (:meth:`Matcher.add_packed`), and :meth:`Matcher._delete_keys` (not ``_delete``) if it
deletes by key alone (:meth:`Matcher.remove` then reads no subscription object); rebuild from
:meth:`Matcher.indexed` (not ``subscriptions``).
"""

from __future__ import annotations

import importlib
import operator
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from matchers.arrays import stored
from matchers.collector import no_cyclic_gc
from matchers.events import Dictionary, EventBatch, FlatEvent, encode
from matchers.expr import INDEXED_OPS, PRESENCE_OPS, Kind, Op, Pred, Subscription, Value
from matchers.matches import Matches, concat, merge_rows, no_matches, without_nulls
from matchers.packed import Decoded, decode
from matchers.presence import Presence, rewrite, tested
from matchers.states import with_states
from matchers.subtable import Packed, SubscriptionTable
from matchers.views import VIEW_OPS, with_views

if TYPE_CHECKING:
    from matchers.phase1 import PredicateIndex

BATCH_BUDGET = 64 << 20
"""Bytes of working memory that matching a chunk of a batch aims at, beyond the index and
the matches (events per chunk follow the bytes an event took in the chunk before)."""
MATCH_BYTES = 16
"""Working bytes per match (output buffers grown by doubling, their copies)."""
SATISFIED_BYTES = 24
"""Working bytes per satisfied phase-1 predicate (event and id pairs, their CSR)."""
EVENT_BYTES = 256
"""Working bytes per event whatever it matches (its values, offsets, marks)."""


_OP = operator.attrgetter("op")


class Matcher(ABC):
    """A content-based matching index.

    Subclasses implement :meth:`_insert`, :meth:`_delete` (or :meth:`_delete_keys`), :meth:`_match` and
    :meth:`memory_bytes`, and are registered with :func:`register`.

    Parameters
    ----------
    dictionary : attribute and string dictionaries to share (a new one if ``None``).
    """

    name: ClassVar[str] = ""
    baseline: ClassVar[bool] = False
    """A baseline is kept for tests and benchmarks; the service refuses it."""
    indexed_ops: ClassVar[frozenset[Op]] = INDEXED_OPS
    """Operators this index evaluates itself (see the module docstring)."""
    sees_nulls: ClassVar[bool] = False
    """Whether :meth:`_match` is given the events' ``null`` values (else they are left out)."""
    _residual: Matcher | None = None  # class defaults: matchers pickled before the residual path
    _residual_keys: set[int] = frozenset()  # type: ignore[assignment]  # shared empty default; a set of its own once used
    _residual_outer: np.ndarray | None = None
    _presence: Presence | None = None  # attributes with a presence state (see the module docstring)
    _stated: set[int] = frozenset()  # type: ignore[assignment]  # shared empty default; a set of its own once used
    """Keys whose subscription tests presence: the index holds it rewritten (:func:`matchers.presence.rewrite`)."""
    _matches_per_event: float | None = None
    """Matches per event in the last chunk matched (``None`` before the first)."""

    def __init__(self, dictionary: Dictionary | None = None, **params: Any):
        if params:
            raise TypeError(f"{type(self).__name__} got unknown parameters: {sorted(params)}")
        self.dictionary = dictionary if dictionary is not None else Dictionary()
        self._key_of: MutableMapping[str, int] = {}  # (bitmark's LazyKeys after a bulk load)
        self._subs: list[Subscription | None] | SubscriptionTable = []
        self._free: list[int] = []

    def __getstate__(self) -> dict:
        """Every attribute, the subscriptions packed as arrays (:class:`SubscriptionTable`)."""
        return {**self.__dict__, "_subs": SubscriptionTable.pack(self._subs)}

    def hold(self, table: SubscriptionTable) -> None:
        """Hold the subscriptions as ``table`` from now on: the same subscriptions under the same
        keys (free keys empty), already packed (a shard's rows as the registry stores them),
        so that neither the objects are kept nor packing them costs anything when pickled.

        Raises
        ------
        ValueError
            If ``table`` does not cover exactly the keys used (:attr:`capacity`).
        """
        if len(table) != self.capacity:
            raise ValueError(f"a table of {len(table)} subscriptions for {self.capacity} keys")
        self._subs = table

    def held_table(self) -> SubscriptionTable | None:
        """The table the subscriptions are held as, if it is :meth:`hold`'s form already (packed
        rows without changes, row = key: every key live), else ``None``."""
        subs = self._subs
        return subs if isinstance(subs, SubscriptionTable) and not subs._changed else None

    # -- public API -------------------------------------------------------------
    def indexes(self, p: Pred) -> bool:
        """Whether this index evaluates ``p`` itself (its operator is in :attr:`indexed_ops`), or
        as a test of a presence state; a subscription with any predicate it does not goes to
        the residual matcher."""
        return p.op in self._stateable_ops()

    def _stateable_ops(self) -> frozenset[Op]:
        """The operators this index evaluates, itself or through presence states (an index
        that evaluates ``=`` and ``IN`` evaluates the state tests) and views (``ANYTHING BUT``:
        :mod:`matchers.views`)."""
        ops = self.indexed_ops
        ops = ops | PRESENCE_OPS if Op.EQ in ops and Op.IN in ops else ops
        return ops | {Op.ANYTHING_BUT} if VIEW_OPS <= ops else ops

    def add(self, subscriptions: Iterable[Subscription]) -> None:
        """Insert subscriptions; one whose id is already present is replaced."""
        with no_cyclic_gc():
            subs = list({s.id: s for s in subscriptions}.values())
            self.remove([s.id for s in subs if s.id in self._key_of])
            native: list[Subscription] = []
            stated: list[Subscription] = []
            residual: list[Subscription] = []
            indexed, stateable = self.indexed_ops.issuperset, self._stateable_ops().issuperset
            for sub in subs:  # C-level iteration: no Python call per predicate
                if indexed(map(_OP, chain.from_iterable(sub.conjunctions))):
                    native.append(sub)
                else:
                    (stated if stateable(map(_OP, chain.from_iterable(sub.conjunctions))) else residual).append(sub)
            if residual:
                self._add_residual(residual)
            if native or stated:
                self._add(native, stated)

    def add_packed(self, table: SubscriptionTable, rows: Decoded | None = None) -> None:
        """:meth:`add` of the subscriptions packed in ``table`` (rows with distinct ids, without
        changes: a shard's rows as the registry stores them), which the matcher may keep as it
        is to hold them (:meth:`hold`'s form). An index that takes columns
        (:meth:`_insert_columns`) is given the rows whose operators it evaluates itself as
        :func:`matchers.packed.decode` reads them (``rows``, if the caller has read them already),
        without an object per subscription; the other
        rows (presence tests, ``ANYTHING BUT``, an operator of the residual matcher), and every
        row for another index, a matcher holding subscription objects or a table with repeated
        ids, are unpacked and given to :meth:`add`.

        Raises
        ------
        ValueError, EOFError, TypeError, IndexError
            If a row is not :func:`matchers.packed.pack`'s (ValueError where read in bulk,
            EOFError for an empty one; nothing changes then).
        """
        if (np.diff(table.sub_offsets) == 0).any():
            raise EOFError("an empty row: not a packed subscription")
        ids = table.ids()
        if (type(self)._insert_columns is Matcher._insert_columns or table._changed or len(set(ids)) < len(ids)
                or len(self._subs) and not isinstance(self._subs, SubscriptionTable)):
            self.add(list(table))  # all read before anything changes (no free row: checked)
            return
        with no_cyclic_gc():
            if rows is None:
                rows = decode(table.sub_offsets, table.sub_bytes)
            elif len(rows.entries) != len(ids) + 1:
                raise ValueError(f"{len(rows.entries) - 1} decoded rows for a table of {len(ids)}")
            entry_row = np.repeat(np.arange(len(ids), dtype=np.int64), np.diff(rows.entries))
            elem_row = np.repeat(entry_row, rows.sizes)
            foreign = np.fromiter((p.op not in self.indexed_ops for p in rows.preds), dtype=bool, count=len(rows.preds))
            other = np.zeros(len(ids), dtype=bool)
            other[rows.skipped] = True
            other[elem_row[foreign[rows.flat]]] = True
            others = [sub for i in np.flatnonzero(other).tolist() if (sub := table[i]) is not None]  # read before any change
            self.remove([sub_id for sub_id in ids if sub_id in self._key_of])
            native = np.flatnonzero(~other)
            if len(native):
                used, flat = np.unique(rows.flat[~other[elem_row]], return_inverse=True)
                preds = [rows.preds[i] for i in used.tolist()]
                for p in preds:
                    self._register_operands(p)
                entries = np.zeros(len(native) + 1, dtype=np.int64)
                np.cumsum(np.diff(rows.entries)[native], out=entries[1:])
                mine = Decoded(preds, entries, rows.sizes[~other[entry_row]], flat.ravel().astype(np.int64),
                               rows.skipped[:0])
                keys = self._assign_packed(table, ids, native, np.flatnonzero(other))
                try:
                    self._insert_columns(keys, mine)
                except BaseException:
                    for key, sub_id in zip(keys.tolist(), map(ids.__getitem__, native.tolist()), strict=True):
                        del self._key_of[sub_id]
                        self._subs[key] = None
                        self._free.append(key)
                    raise
            if others:
                self.add(others)

    def _assign_packed(self, table: SubscriptionTable, ids: list[str], rows: np.ndarray,
                       others: np.ndarray) -> np.ndarray:
        """Keys for ``table``'s ``rows`` (the rest, ``others``, to be added apart), which hold them
        packed: a matcher that never held a subscription takes ``table`` as its own (row =
        key; the others' rows free), another keeps the rows' bytes as changes of its table."""
        if not len(self._subs):
            self._subs = table
            for key in others.tolist():
                table[key] = None
            self._free = others[::-1].tolist()
            keys = rows
        else:
            n_reuse = min(len(self._free), len(rows))
            reused = self._free[len(self._free) - n_reuse:][::-1]
            del self._free[len(self._free) - n_reuse:]
            start = len(self._subs)
            keys = np.asarray(reused + list(range(start, start + len(rows) - n_reuse)), dtype=np.int64)
            bounds, data = table.sub_offsets, table.sub_bytes
            self._subs.put(keys.tolist(), [Packed(ids[i], data[bounds[i]:bounds[i + 1]].tobytes()) for i in rows.tolist()])  # type: ignore[union-attr]  # a table: checked by add_packed
        self._key_of.update(zip(map(ids.__getitem__, rows.tolist()), keys.tolist(), strict=True))
        return keys

    def _assign(self, sub: Subscription) -> int:
        """Give ``sub`` a key (a free one first) and record it."""
        key = stored(self._subs, self._free, sub)
        self._key_of[sub.id] = key
        return key

    def _add(self, subs: list[Subscription], stated: Sequence[Subscription] = ()) -> None:
        """Insert new subscriptions (distinct ids, none present) into the index itself;
        ``stated`` ones test presence: the index is given them rewritten."""
        given = subs + [rewrite(s) for s in stated]
        self._register(given)
        keys = self._assign_many(subs + list(stated))
        entries = list(zip(keys, given, strict=True))
        try:
            if stated:
                self._state(keys[len(subs):], stated)
            self._insert(entries)
        except BaseException:
            self._unassign(entries)
            raise

    def _state(self, keys: list[int], subs: Sequence[Subscription]) -> None:
        """Record that the subscriptions under ``keys`` test presence."""
        if self._presence is None:
            self._presence, self._stated = Presence(), set()
        for key, sub in zip(keys, subs, strict=True):
            self._presence.add(tested(sub), self.dictionary)
            self._stated.add(key)

    def _unstate(self, key: int, sub: Subscription) -> Subscription:
        """What the index holds under ``key`` (``sub`` rewritten if it tests presence), forgetting
        that it tests presence."""
        if key not in self._stated:
            return sub
        self._stated.discard(key)
        self._presence.remove(tested(sub))  # type: ignore[union-attr]  # stated keys exist: so does the tracker
        return rewrite(sub)

    def _register(self, subs: list[Subscription]) -> None:
        """Give the attributes and string operands of ``subs`` their dictionary ids before
        :meth:`_insert` (an index that registers them while inserting overrides this)."""
        preds = list(chain.from_iterable(chain.from_iterable(sub.conjunctions for sub in subs)))
        for p in dict(zip(map(id, preds), preds, strict=True)).values():  # each object once: a bulk read repeats them
            self._register_operands(p)

    def _assign_many(self, subs: list[Subscription]) -> list[int]:
        """:meth:`_assign` for each of ``subs`` in turn, with list operations."""
        n_reuse = min(len(self._free), len(subs))
        reused = self._free[len(self._free) - n_reuse:][::-1]
        del self._free[len(self._free) - n_reuse:]
        for key, sub in zip(reused, subs, strict=False):
            self._subs[key] = sub
        start = len(self._subs)
        self._subs.extend(subs[n_reuse:])
        keys = reused + list(range(start, start + len(subs) - n_reuse))
        self._key_of.update(zip([s.id for s in subs], keys, strict=True))
        return keys

    def _add_residual(self, subs: list[Subscription]) -> None:
        """Insert new subscriptions into the residual matcher, under keys of this one."""
        if self._residual is None:
            self._residual = _registered("brute")(self.dictionary)
            self._residual_keys = set()
        self._residual.add(subs)
        for sub in subs:
            self._residual_keys.add(self._assign(sub))
        self._residual_outer = None

    def _unassign(self, entries: list[tuple[int, Subscription]]) -> None:
        """Give back the keys of an insert that failed (the index must be left unchanged by it)."""
        for key, sub in entries:
            if self._key_of.get(sub.id) == key:
                del self._key_of[sub.id]
            self._unstate(key, self._subs[key])  # type: ignore[arg-type]  # assigned just before: a subscription
            self._subs[key] = None
            self._free.append(key)

    def remove(self, ids: Iterable[str]) -> int:
        """Delete subscriptions by id; unknown ids are ignored. Returns how many were removed."""
        with no_cyclic_gc():  # a collection here would rescan every held subscription (3x the time at 100,000)
            return self._remove(ids)

    def pop(self, ids: Iterable[str]) -> list[Subscription]:
        """:meth:`remove`, returning the subscriptions removed (each read once)."""
        gone: list[Subscription] = []
        with no_cyclic_gc():
            self._remove(ids, gone)
        return gone

    def _remove(self, ids: Iterable[str], gone: list[Subscription] | None = None) -> int:
        """Delete subscriptions by id, appending each removed one to ``gone`` if given: the ids
        looked up at once, the index's own keys deleted in one call (:meth:`_delete_keys`, where
        the index deletes by key: no subscription read but those testing presence; else
        :meth:`_delete`, given each subscription, read once)."""
        pop, subs = self._key_of.pop, self._subs
        found = [(sub_id, key) for sub_id in dict.fromkeys(ids) if (key := pop(sub_id, None)) is not None]
        every = [key for _, key in found]
        read: dict[int, Subscription] = {}
        if gone is not None:
            read = dict(zip(every, map(subs.__getitem__, every), strict=True))  # type: ignore[arg-type]  # live keys hold subscriptions
            gone.extend(read.values())
        residual = self._residual_keys.intersection(every)
        if residual:
            self._residual_keys -= residual
            self._residual.remove([sub_id for sub_id, key in found if key in residual])  # type: ignore[union-attr]  # residual keys exist: so does the matcher
            self._residual_outer = None
        keys = [key for key in every if key not in residual]
        by_key = type(self)._delete_keys is not Matcher._delete_keys
        entries = [(key, self._unstate(key, read[key] if key in read else subs[key]))  # type: ignore[arg-type]  # live keys
                   for key in (self._stated.intersection(keys) if by_key else keys)]  # by key: the presence tests' only
        if isinstance(subs, SubscriptionTable):
            subs.free(every)
        else:
            for key in every:
                subs[key] = None
        self._free.extend(every)
        if keys:
            self._delete_keys(np.asarray(keys, dtype=np.int64)) if by_key else self._delete(entries)
        return len(found)

    def encode(self, events: Iterable[FlatEvent]) -> EventBatch:
        """Encode flat events with this matcher's dictionary."""
        return encode(events, self.dictionary)

    def match(self, batch: EventBatch) -> Matches:
        """Match a batch of events encoded with this matcher's dictionary."""
        if batch.n == 0 or not self._key_of:
            return no_matches(batch.n)
        if batch.rows is not None:
            return merge_rows(self.match(batch._replace(rows=None)), batch.rows, self.capacity)
        own_batch = self._own_batch(batch)
        if not self._residual_keys:
            return self._match_chunks(own_batch)
        own = self._match_chunks(own_batch) if len(self._key_of) > len(self._residual_keys) else None
        return self._merge(own, self._residual.match(batch))  # type: ignore[union-attr]  # residual keys exist: so does the matcher

    def _own_batch(self, batch: EventBatch) -> EventBatch:
        """The batch as the index sees it: with the presence states, without ``null`` values
        unless :attr:`sees_nulls`."""
        if self._presence:
            slot, states = self._presence.arrays(self.dictionary)
            sources, views, tails = self._presence.views
            if len(views):
                batch = with_views(batch, sources, views, tails, self.dictionary)
            return with_states(batch, slot, states, not self.sees_nulls)
        return batch if self.sees_nulls else without_nulls(batch)

    def _match_chunks(self, batch: EventBatch) -> Matches:
        """:meth:`_match` over chunks of the batch of :meth:`_chunk_events` events each."""
        parts = []
        lo = 0
        while lo < batch.n:
            hi = min(batch.n, lo + self._chunk_events())
            parts.append(self._match(batch.slice(lo, hi)))
            self._matches_per_event = parts[-1].total / (hi - lo)
            lo = hi
        return concat(parts)

    def _chunk_events(self) -> int:
        """Events per chunk: :data:`BATCH_BUDGET` over the bytes an event took in the last
        chunk, with a margin (before the first, every subscription matched and every phase-1
        predicate satisfied)."""
        matches = self.capacity if self._matches_per_event is None else self._matches_per_event
        per_event = MATCH_BYTES * matches
        phase1: PredicateIndex | None = getattr(self, "phase1", None)  # an index's phase 1, if it has one
        if phase1 is not None and len(phase1):
            satisfied = phase1.per_event
            per_event += SATISFIED_BYTES * (len(phase1) if satisfied is None else satisfied)
        return max(1, int(BATCH_BUDGET / (1.25 * per_event + EVENT_BYTES)))

    def _merge(self, own: Matches | None, residual: Matches) -> Matches:
        """The index's matches and the residual matcher's (keys mapped to this one's), per event."""
        if self._residual_outer is None:
            outer = np.full(max(self._residual.capacity, 1), -1, dtype=np.int32)  # type: ignore[union-attr]  # called with residual matches only
            for sub_id, key in self._residual._key_of.items():  # type: ignore[union-attr]  # as above
                outer[key] = self._key_of[sub_id]
            self._residual_outer = outer
        keys = self._residual_outer[residual.keys]
        n = len(residual.offsets) - 1
        events = np.repeat(np.arange(n, dtype=np.int64), np.diff(residual.offsets))
        if own is not None and own.total:
            keys = np.concatenate([own.keys.astype(np.int32), keys])
            events = np.concatenate([np.repeat(np.arange(n, dtype=np.int64), np.diff(own.offsets)), events])
        order = np.lexsort((keys, events))
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(events, minlength=n), out=offsets[1:])
        return Matches(offsets, keys[order])

    def describe(self) -> dict[str, Any]:
        """What this index is, for the log and ``status``: ``{"matcher": name}`` (an index that
        chooses its layout adds why)."""
        return {"matcher": self.name}

    def match_ids(self, batch: EventBatch) -> list[list[str]]:
        """Sorted subscription ids matched by each event of the batch."""
        result = self.match(batch)
        return [self.ids(result.keys[result.offsets[i]:result.offsets[i + 1]]) for i in range(batch.n)]

    def match_events(self, events: Iterable[Mapping[str, Value]]) -> list[list[str]]:
        """Encode and match flat events; sorted subscription ids per event."""
        return self.match_ids(self.encode(events))

    def ids(self, keys: Iterable[int]) -> list[str]:
        """Sorted subscription ids of keys."""
        return sorted(map(self.id_of, keys))

    def id_of(self, key: int) -> str:
        """The id of the subscription stored under a live ``key``."""
        subs = self._subs
        return subs.id_of(key) if isinstance(subs, SubscriptionTable) else subs[key].id  # type: ignore[union-attr]  # a live key holds a subscription

    def packed_at(self, keys: Sequence[int]) -> SubscriptionTable | None:
        """The subscriptions under the live ``keys`` as packed rows (row ``i``: ``keys[i]``'s,
        :meth:`SubscriptionTable.rows_at`) if held as a table, else ``None`` (objects held)."""
        subs = self._subs
        if isinstance(subs, SubscriptionTable) and type(self).subscription is Matcher.subscription:
            return subs.rows_at(keys)
        return None

    def ids_of(self, keys: np.ndarray) -> list[str]:
        """:meth:`id_of` of each of the live ``keys`` (int, in order), read in bulk from a held table."""
        subs = self._subs
        if isinstance(subs, SubscriptionTable) and type(self).id_of is Matcher.id_of:
            return subs.ids_at(keys)
        return list(map(self.id_of, np.asarray(keys).tolist()))

    def key_of(self, sub_id: str) -> int:
        """The key of a subscription id (``KeyError`` if absent)."""
        return self._key_of[sub_id]

    def subscription(self, key: int) -> Subscription:
        """The subscription stored under ``key``."""
        sub = self._subs[key]
        if sub is None:
            raise KeyError(key)
        return sub

    def subscriptions(self) -> Iterable[tuple[int, Subscription]]:
        """Every live ``(key, subscription)``."""
        return ((k, s) for k, s in enumerate(self._subs) if s is not None)

    def indexed(self) -> Iterable[tuple[int, Subscription]]:
        """Every live ``(key, subscription)`` of the index itself (not of its residual matcher)."""
        residual, stated = self._residual_keys, self._stated
        return ((k, rewrite(s) if k in stated else s) for k, s in enumerate(self._subs)
                if s is not None and k not in residual)

    def __len__(self) -> int:
        return len(self._key_of)

    def __contains__(self, sub_id: object) -> bool:
        return sub_id in self._key_of

    @property
    def capacity(self) -> int:
        """One more than the largest key ever used (size for per-key arrays)."""
        return len(self._subs)

    # -- to implement -------------------------------------------------------------
    @abstractmethod
    def _insert(self, entries: list[tuple[int, Subscription]]) -> None:
        """Index new subscriptions under their keys."""

    def _insert_columns(self, keys: np.ndarray, rows: Decoded) -> None:
        """Index new subscriptions under ``keys``, one per row of ``rows`` (their conjunctions, all
        of operators in :attr:`indexed_ops`), without an object per subscription
        (:meth:`add_packed`; an index that does not override this is given objects)."""
        raise NotImplementedError

    def _delete(self, entries: list[tuple[int, Subscription]]) -> None:
        """Forget subscriptions (their keys may be reused by a later insert). An index overrides
        this or, if it needs nothing but the keys, :meth:`_delete_keys`."""
        self._delete_keys(np.fromiter((key for key, _ in entries), dtype=np.int64, count=len(entries)))

    def _delete_keys(self, keys: np.ndarray) -> None:
        """:meth:`_delete` of the subscriptions under ``keys`` (int64, distinct), for an index that
        needs nothing else: :meth:`remove` then reads no subscription but those testing presence."""
        raise NotImplementedError

    @abstractmethod
    def _match(self, batch: EventBatch) -> Matches:
        """Match a non-empty batch against a non-empty index."""

    @abstractmethod
    def memory_bytes(self) -> int:
        """Bytes held by the index structures (not counting the subscription objects)."""

    # -- helpers ------------------------------------------------------------------
    def _register_operands(self, p: Pred) -> None:
        """Give the predicate's attribute an id and its string operands codes."""
        aid = self.dictionary.attr(p.attr)
        if aid < 0:
            raise MemoryError(f"attribute dictionary is full ({self.dictionary.max_attributes} names)")
        if p.kind is Kind.STR:
            values = p.operand if isinstance(p.operand, tuple) else (p.operand,)
            for v in values:
                self.dictionary.code(aid, v)


REGISTERED: dict[str, type[Matcher]] = {}
"""The matcher classes by name (filled by :func:`register`; read through :mod:`matchers.catalog`)."""


def register(name: str, *, baseline: bool = False):
    """Class decorator registering a :class:`Matcher` under ``name``.

    ``baseline``: the matcher is a comparison point (brute force, a paper's original
    layout) that tests and benchmarks use and the service refuses.
    """

    def wrap(cls: type[Matcher]) -> type[Matcher]:
        if name in REGISTERED and REGISTERED[name] is not cls:
            raise ValueError(f"matcher name {name!r} is registered twice")
        cls.name = name
        cls.baseline = baseline
        REGISTERED[name] = cls
        return cls

    return wrap


def _registered(name: str) -> type[Matcher]:
    """The matcher class registered as ``name``, importing its package (``matchers.<name>``) first."""
    if name not in REGISTERED:
        importlib.import_module(f"matchers.{name}")
    return REGISTERED[name]
