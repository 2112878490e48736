"""The counting algorithm (Fabret et al., SIGMOD 2001, Section 5): the baseline matcher.

Phase 1 (:class:`~matchers.phase1.PredicateIndex`) finds the satisfied predicates of
an event; phase 2 raises a counter for every conjunction containing each of them, and
a conjunction matches when its counter reaches its size.  Each DNF conjunction of a
subscription is one slot; an event's matches are the distinct keys.

Layout, chosen for memory latency (phase 2 is a random walk over the slots):

* the predicate -> conjunction lists are a CSR ("main") plus a small CSR of the
  entries added since ("pending"); predicate ids follow (attribute, operator,
  operand) order, so the runs of satisfied range predicates read "main" sequentially;
* a slot's counter is a uint16 counting down from its size, restored after each
  event by replaying the list of visits; its key is read only on a match;
* a conjunction of one predicate has no counter: "main" holds its key directly;
* a conjunction is not listed under its predicates that hold on nearly every event
  (:func:`~matchers.counting.layout.near_always`: negated tests, ``NOT EXISTS``; chosen as
  it is added), unless it has no other: these are checked once the others are all
  satisfied (most events would otherwise visit it for nothing).

Deleted slots get size 0 (their one-predicate entries in "main" a tombstone) and are
skipped.  Pending and dead entries are folded into a new main, dead slots dropped and
the live ones renumbered (and the predicates renumbered when many took ids out of
order), once either grows past a fraction of the main part.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from matchers.arrays import grown
from matchers.base import Matcher, Matches, register
from matchers.counting import kernels as K
from matchers.counting.layout import Conjunctions, near_always
from matchers.errors import SubscriptionError
from matchers.events import Dictionary, EventBatch
from matchers.expr import Subscription
from matchers.keysort import bitmap_for
from matchers.packed import Decoded
from matchers.phase1 import PredicateIndex

CHUNK_EVENTS = 2048
"""Most events per phase-1 chunk."""
SAT_BUDGET = 8 << 20
"""Satisfied predicates a phase-1 chunk aims at (bounds the memory of a batch): events per
chunk follow the satisfied predicates per event of the previous chunk, every predicate
at first (a dense workload satisfies millions per event)."""
STAMP_LIMIT = 2**31 - 2 * CHUNK_EVENTS
"""Event stamps (int32 in ``pid_seen``) restart from 0 past this."""


@register("counting")
class CountingMatcher(Matcher):
    """Counting matcher.

    Parameters
    ----------
    range_evaluator : phase-1 evaluator for numeric ranges (default: sorted operands).
    """

    pending_min = 4096
    """Pending entries tolerated before a fold into main, whatever the main size."""
    dead_min = 4096
    """Dead entries tolerated before a fold, whatever the main size."""
    unordered_min = 1024
    """Predicate ids given out of order tolerated at a fold before renumbering them."""

    def __init__(self, dictionary: Dictionary | None = None, range_evaluator: Any = None, **params: Any) -> None:
        super().__init__(dictionary, **params)
        self.phase1 = PredicateIndex(self.dictionary, range_evaluator)
        self._n_slots = 0
        self._n_flat = 0
        self._n_folded = 0  # slots below this are in main (the rest are pending)
        self._size = np.zeros(0, dtype=np.uint16)  # predicates of a slot (0: deleted)
        self._left = np.zeros(0, dtype=np.uint16)  # its triggers (0: deleted); a counter while matching
        self._n_def = np.zeros(0, dtype=np.uint16)  # its deferred pids, first in its part of _flat
        self._pid_seen = np.zeros(0, dtype=np.int32)  # per pid, while some slot defers one
        self._deferring = False  # whether some slot defers a pid
        self._slot_key = np.zeros(0, dtype=np.int32)  # its key
        self._slot_start = np.zeros(0, dtype=np.int32)  # into _flat
        self._flat = np.zeros(0, dtype=np.int32)  # pids of each slot, contiguous
        self._key_first = np.zeros(0, dtype=np.int32)  # first slot of a key
        self._key_count = np.zeros(0, dtype=np.int32)  # slots of a key (0: absent)
        self._main_off = np.zeros(1, dtype=np.int32)
        self._main_val = np.zeros(0, dtype=np.int32)
        self._pend_pid: list[np.ndarray] = []
        self._pend_slot: list[np.ndarray] = []
        self._pend_pairs = 0
        self._pend_csr: tuple[np.ndarray, np.ndarray] | None = None
        self._dead_pairs = 0
        self._stamp = np.zeros(1, dtype=np.int64)
        self._visited = np.zeros(1024, dtype=np.int32)
        self._out_keys = np.zeros(1024, dtype=np.int32)  # a batch's keys before they are copied out
        self._sat_per_event = 0.0  # satisfied predicates per event seen last (0: none yet; sizes phase-1 chunks)

    # -- updates --------------------------------------------------------------------
    def _register(self, subs: list[Subscription]) -> None:
        """Nothing: :meth:`_insert` registers the operands by :meth:`PredicateIndex.acquire_many`,
        with no Python call per predicate."""

    def _insert(self, entries: list[tuple[int, Subscription]]) -> None:
        keys = np.array([key for key, _ in entries], dtype=np.int64)
        conjunctions = [sub.conjunctions for _, sub in entries]
        n_conj = np.array(list(map(len, conjunctions)), dtype=np.int32)
        sizes = np.array([len(c) for cs in conjunctions for c in cs], dtype=np.int32)
        self._check_sizes(n_conj, sizes, lambda i: entries[i][1].id)
        self._insert_slots(keys, n_conj, sizes, self.phase1.acquire_many([p for cs in conjunctions for c in cs for p in c]))

    def _insert_columns(self, keys: np.ndarray, rows: Decoded) -> None:
        n_conj, sizes = np.diff(rows.entries).astype(np.int32), rows.sizes.astype(np.int32)
        self._check_sizes(n_conj, sizes, lambda i: self.id_of(int(keys[i])))
        pids = self.phase1.acquire_counted(rows.preds, np.bincount(rows.flat, minlength=len(rows.preds)))
        self._insert_slots(keys, n_conj, sizes, pids[rows.flat])

    @staticmethod
    def _check_sizes(n_conj: np.ndarray, sizes: np.ndarray, id_of: Callable[[int], str]) -> None:
        """Refuse (before any change) subscriptions with a conjunction longer than the counters count
        (``id_of(i)``: the id of the ``i``-th, which has ``n_conj[i]`` conjunctions)."""
        if len(sizes) and sizes.max() > K.MAX_SIZE:
            bad = int(np.searchsorted(np.cumsum(n_conj), np.flatnonzero(sizes > K.MAX_SIZE)[0], side="right"))
            raise SubscriptionError(f"a conjunction has {int(sizes.max())} predicates; the counting "
                                    f"matcher holds at most {K.MAX_SIZE}", id_of(bad))

    def _insert_slots(self, keys: np.ndarray, n_conj: np.ndarray, sizes: np.ndarray, pid_arr: np.ndarray) -> None:
        """Add the slots of subscriptions ``keys`` (``n_conj`` conjunctions each, of ``sizes``
        predicates, whose ids are ``pid_arr`` one conjunction after another)."""
        s0, f0 = self._n_slots, self._n_flat
        slot, n_pids = s0 + len(sizes), len(pid_arr)
        if f0 + n_pids >= 2**31:
            raise MemoryError("the counting matcher holds at most 2**31 - 1 predicate occurrences")
        self._size = grown(self._size, slot)
        self._left = grown(self._left, slot)
        self._n_def = grown(self._n_def, slot)
        self._slot_key = grown(self._slot_key, slot)
        self._slot_start = grown(self._slot_start, slot)
        self._flat = grown(self._flat, f0 + n_pids)
        lengths = sizes.astype(np.int64)
        pid_arr, n_def = K.deferred_first(pid_arr, np.cumsum(lengths) - lengths, lengths, self._near_always(pid_arr))
        triggers = (sizes - n_def).astype(np.int64)
        self._size[s0:slot] = sizes
        self._left[s0:slot] = triggers
        self._n_def[s0:slot] = n_def
        self._deferring |= bool(n_def.any())
        self._slot_key[s0:slot] = np.repeat(keys, n_conj)
        self._slot_start[s0:slot] = f0 + np.r_[0, np.cumsum(sizes)[:-1]]
        self._flat[f0:f0 + n_pids] = pid_arr
        cap = self.capacity
        self._key_first = grown(self._key_first, cap)
        self._key_count = grown(self._key_count, cap)
        self._key_first[keys] = s0 + np.r_[0, np.cumsum(n_conj)[:-1]]
        self._key_count[keys] = n_conj
        self._n_slots, self._n_flat = slot, f0 + n_pids
        self._pend_pid.append(pid_arr[_triggers(lengths, n_def)])
        self._pend_slot.append(np.repeat(np.arange(s0, slot, dtype=np.int32), triggers))
        self._pend_pairs += int(triggers.sum())
        self._pend_csr = None
        if self._pend_pairs > max(self.pending_min, len(self._main_val) // 8):
            self._rebuild()

    def _delete_keys(self, keys: np.ndarray) -> None:
        count = self._key_count[keys].astype(np.int64)
        ends = np.cumsum(count)
        slots = np.arange(int(ends[-1]), dtype=np.int64) + np.repeat(self._key_first[keys] - (ends - count), count)
        sizes = self._size[slots].astype(np.int64)
        pids = K.gather_segments(self._flat, self._slot_start[slots], sizes)  # the argument types _rebuild gives
        self._dead_pairs += int(sizes.sum())
        single = (sizes == 1) & (slots < self._n_folded)  # folded one-predicate slots: a main entry each
        values = K.encode_single(np.repeat(keys, count)[single])
        for pid, value in zip(self._flat[self._slot_start[slots[single]]], values, strict=True):  # int32 as before
            K.tombstone(self._main_off, self._main_val, pid, value)
        self._size[slots] = 0
        self._left[slots] = 0
        self._key_count[keys] = 0
        distinct, counts = np.unique(pids, return_counts=True)
        self.phase1.release_counted(distinct, counts)
        if self._dead_pairs > max(self.dead_min, (len(self._main_val) + self._pend_pairs) // 4):
            self._rebuild()

    def _rebuild(self) -> None:
        """Fold pending entries into main, drop dead slots and renumber the live ones."""
        n = self._n_slots
        sizes = self._size[:n].astype(np.int64)
        live = np.flatnonzero(sizes > 0)
        new_of_old = np.full(n, -1, dtype=np.int64)
        new_of_old[live] = np.arange(len(live))
        lengths = sizes[live]
        flat = K.gather_segments(self._flat, self._slot_start[:n][live], lengths)
        phase1 = self.phase1
        if phase1.unordered > max(self.unordered_min, len(phase1) // 8):
            pid_of_old = phase1.renumber()
            if pid_of_old is not None:
                flat = pid_of_old[flat]
        self._n_def = self._n_def[:n][live]
        self._deferring = bool(self._n_def.any())
        self._size = self._size[:n][live]
        self._left = self._size - self._n_def
        self._slot_key = self._slot_key[:n][live]
        self._slot_start = (np.cumsum(lengths) - lengths).astype(np.int32)
        self._flat = flat
        self._n_slots, self._n_flat = len(live), len(flat)
        present = np.flatnonzero(self._key_count > 0)
        self._key_first[present] = new_of_old[self._key_first[present]]
        single = lengths == 1
        value = np.arange(len(live), dtype=np.int32)
        value[single] = K.encode_single(self._slot_key[single])
        self._main_off, self._main_val = K.csr_by_key(phase1.capacity, flat[_triggers(lengths, self._n_def)],
                                                      np.repeat(value, self._left.astype(np.int64)))
        self._n_folded = len(live)
        self._pend_pid, self._pend_slot, self._pend_pairs, self._pend_csr = [], [], 0, None
        self._dead_pairs = 0

    def _near_always(self, flat: np.ndarray) -> np.ndarray:
        """Per pid (over the capacity), whether it is in ``flat`` and holds on nearly every event."""
        near = np.zeros(self.phase1.capacity, dtype=np.bool_)
        pids = np.unique(flat)
        predicate = self.phase1.predicate
        near[pids] = np.fromiter((near_always(predicate(pid)) for pid in pids.tolist()), dtype=np.bool_,
                                 count=len(pids))
        return near

    def _pending(self) -> tuple[np.ndarray, np.ndarray]:
        if self._pend_csr is None:
            if self._pend_pairs:
                pid = np.concatenate(self._pend_pid)
                slot = np.concatenate(self._pend_slot)
                self._pend_csr = K.csr_by_key(int(pid.max()) + 1, pid, slot)
            else:
                self._pend_csr = (np.zeros(1, dtype=np.int32), np.zeros(0, dtype=np.int32))
        return self._pend_csr

    # -- matching -------------------------------------------------------------------
    def _match(self, batch: EventBatch) -> Matches:
        deferring = self._deferring
        if deferring:
            self._pid_seen = grown(self._pid_seen, self.phase1.capacity)
        conj = Conjunctions(self._main_off, self._main_val, *self._pending(), self._left, self._slot_key, self._flat,
                            self._slot_start, self._n_def, self._pid_seen if deferring else self._pid_seen[:0])
        bits = bitmap_for(self.capacity)  # drops repeats of an event's keys and sorts them
        out_off = np.zeros(batch.n + 1, dtype=np.int64)
        out_keys = self._out_keys  # reused: the result is a copy
        k = 0
        lo = 0
        while lo < batch.n:
            per_event = self._sat_per_event or max(1, len(self.phase1))  # at first, the worst case
            chunk = int(min(CHUNK_EVENTS, max(1, SAT_BUDGET // per_event)))
            hi = min(lo + chunk, batch.n)
            if self._stamp[0] > STAMP_LIMIT:
                self._stamp[0] = 0
                self._pid_seen[:] = 0
            sat_off, sat_pid = self.phase1.satisfied(batch.slice(lo, hi), reuse=True)  # read before the next call
            self._sat_per_event = max(1.0, 1.25 * len(sat_pid) / (hi - lo))
            off = np.empty(hi - lo + 1, dtype=np.int64)
            off[0] = k
            out_keys, self._visited, k = K.count_matches(
                sat_off, sat_pid, conj, bits, self._stamp, self._visited, off, out_keys, k)
            out_off[lo + 1:hi + 1] = off[1:]
            lo = hi
        self._out_keys = out_keys
        return Matches(out_off, out_keys[:k].copy())

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "_out_keys": np.zeros(1024, dtype=np.int32),  # scratch: not shipped
                "_pid_seen": np.zeros(0, dtype=np.int32)}

    def memory_bytes(self) -> int:
        arrays: tuple[np.ndarray, ...] = (self._size, self._left, self._n_def, self._pid_seen, self._slot_key, self._slot_start, self._flat, self._key_first, self._key_count,
                  self._main_off, self._main_val, self._visited, self._out_keys, *self._pending(),
                  *self._pend_pid, *self._pend_slot)
        return sum(a.nbytes for a in arrays) + self.phase1.memory_bytes()


def _triggers(lengths: np.ndarray, n_def: np.ndarray) -> np.ndarray:
    """Mask over the slots' pids (``lengths[i]`` each, contiguous): those past a slot's ``n_def`` deferred ones."""
    starts = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum())) - np.repeat(starts, lengths) >= np.repeat(n_def, lengths)
