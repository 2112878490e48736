"""The counting algorithm (Fabret et al., SIGMOD 2001, Section 5): the baseline matcher.

Phase 1 (:class:`~matchers.phase1.PredicateIndex`) finds the satisfied predicates of
an event; phase 2 raises a counter for every conjunction containing each of them, and
a conjunction matches when its counter reaches its size.  Each DNF conjunction of a
subscription is one counted entry; an event's matches are the distinct keys.

The predicate -> conjunction lists are a CSR ("main") plus a small CSR of the entries
added since ("pending"); deleted conjunctions get size 0 and are skipped.  Both are
folded into a new main, with dead entries dropped and slots renumbered, once the
pending part or the dead part grows past a fraction of the main part.
"""

from __future__ import annotations

import sys

import numpy as np

from matchers.base import Matcher, Matches, register
from matchers.counting import kernels as K
from matchers.events import EventBatch
from matchers.errors import SubscriptionError
from matchers.expr import Subscription
from matchers.phase1 import PredicateIndex

CHUNK_EVENTS = 2048
"""Events per phase-1 chunk (bounds the satisfied-predicate buffer)."""


def _grow(arr: np.ndarray, n: int, fill: int = 0) -> np.ndarray:
    if n <= len(arr):
        return arr
    out = np.full((max(n, 2 * len(arr), 64), *arr.shape[1:]), fill, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


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

    def __init__(self, dictionary=None, range_evaluator=None, **params):
        super().__init__(dictionary, **params)
        self.phase1 = PredicateIndex(self.dictionary, range_evaluator)
        self._n_slots = 0
        self._n_flat = 0
        self._slots = np.zeros((0, 2), dtype=np.int64)  # (stamp << 16 | count, key << 16 | size)
        self._slot_start = np.zeros(0, dtype=np.int64)  # into _flat
        self._flat = np.zeros(0, dtype=np.int32)  # pids of each slot, contiguous
        self._key_first = np.zeros(0, dtype=np.int64)  # first slot of a key
        self._key_count = np.zeros(0, dtype=np.int32)  # slots of a key (0: absent)
        self._main_off = np.zeros(1, dtype=np.int64)
        self._main_slot = np.zeros(0, dtype=np.int32)
        self._pend_pid: list[np.ndarray] = []
        self._pend_slot: list[np.ndarray] = []
        self._pend_pairs = 0
        self._pend_csr: tuple[np.ndarray, np.ndarray] | None = None
        self._dead_pairs = 0
        self._key_seen = np.zeros(0, dtype=np.int64)
        self._stamp = np.zeros(1, dtype=np.int64)

    # -- updates --------------------------------------------------------------------
    def _insert(self, entries: list[tuple[int, Subscription]]) -> None:
        acquire = self.phase1.acquire
        keys, firsts, counts_per_key = [], [], []
        sizes: list[int] = []
        pids: list[int] = []
        slot = self._n_slots
        for key, sub in entries:
            keys.append(key)
            firsts.append(slot)
            counts_per_key.append(len(sub.conjunctions))
            for conj in sub.conjunctions:
                if len(conj) > K.MAX_SIZE:
                    raise SubscriptionError(f"a conjunction has {len(conj)} predicates; the counting "
                                            f"matcher holds at most {K.MAX_SIZE}", sub.id)
                sizes.append(len(conj))
                pids.extend(acquire(p) for p in conj)
                slot += 1
        n_new, n_pids = slot - self._n_slots, len(pids)
        s0, f0 = self._n_slots, self._n_flat
        self._slots = _grow(self._slots, slot)
        self._slot_start = _grow(self._slot_start, slot)
        self._flat = _grow(self._flat, f0 + n_pids)
        size_arr = np.asarray(sizes, dtype=np.int32)
        slot_keys = np.repeat(np.asarray(keys, dtype=np.int64), counts_per_key)
        self._slots[s0:slot, 0] = 0
        self._slots[s0:slot, 1] = (slot_keys << K.SIZE_BITS) | size_arr
        self._slot_start[s0:slot] = f0 + np.r_[0, np.cumsum(size_arr)[:-1]]
        pid_arr = np.asarray(pids, dtype=np.int32)
        self._flat[f0:f0 + n_pids] = pid_arr
        cap = self.capacity
        self._key_first = _grow(self._key_first, cap)
        self._key_count = _grow(self._key_count, cap)
        key_arr = np.asarray(keys, dtype=np.int64)
        self._key_first[key_arr] = firsts
        self._key_count[key_arr] = counts_per_key
        self._n_slots, self._n_flat = slot, f0 + n_pids
        self._pend_pid.append(pid_arr)
        self._pend_slot.append(np.repeat(np.arange(s0, slot, dtype=np.int32), size_arr))
        self._pend_pairs += n_pids
        self._pend_csr = None
        if n_new and self._pend_pairs > max(self.pending_min, len(self._main_slot) // 8):
            self._rebuild()

    def _delete(self, entries: list[tuple[int, Subscription]]) -> None:
        release = self.phase1.release
        for key, sub in entries:
            first, count = int(self._key_first[key]), int(self._key_count[key])
            info = self._slots[first:first + count, 1]
            self._dead_pairs += int((info & K.SIZE_MASK).sum())
            info &= ~np.int64(K.SIZE_MASK)
            self._key_count[key] = 0
            for conj in sub.conjunctions:
                for p in conj:
                    release(p)
        if self._dead_pairs > max(self.dead_min, (len(self._main_slot) + self._pend_pairs) // 4):
            self._rebuild()

    def _rebuild(self) -> None:
        """Fold pending entries into main, drop dead slots and renumber the live ones."""
        n = self._n_slots
        sizes = (self._slots[:n, 1] & K.SIZE_MASK).astype(np.int32)
        live = np.flatnonzero(sizes > 0)
        new_of_old = np.full(n, -1, dtype=np.int64)
        new_of_old[live] = np.arange(len(live))
        lengths = sizes[live]
        flat = K.gather_segments(self._flat, self._slot_start[:n][live], lengths)
        total = len(flat)
        self._slots = self._slots[:n][live].copy()
        self._slots[:, 0] = 0
        self._slot_start = np.r_[0, np.cumsum(lengths)[:-1]].astype(np.int64)
        self._flat = flat
        self._n_slots, self._n_flat = len(live), total
        present = np.flatnonzero(self._key_count > 0)
        self._key_first[present] = new_of_old[self._key_first[present]]
        slot_of_pair = np.repeat(np.arange(len(live), dtype=np.int32), lengths)
        self._main_off, self._main_slot = K.csr_by_key(self.phase1.capacity, flat.astype(np.int64), slot_of_pair)
        self._pend_pid, self._pend_slot, self._pend_pairs, self._pend_csr = [], [], 0, None
        self._dead_pairs = 0

    def _pending(self) -> tuple[np.ndarray, np.ndarray]:
        if self._pend_csr is None:
            if self._pend_pairs:
                pid = np.concatenate(self._pend_pid).astype(np.int64)
                slot = np.concatenate(self._pend_slot)
                self._pend_csr = K.csr_by_key(self.phase1.capacity, pid, slot)
            else:
                self._pend_csr = (np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32))
        return self._pend_csr

    # -- matching -------------------------------------------------------------------
    def _match(self, batch: EventBatch) -> Matches:
        pend_off, pend_slot = self._pending()
        self._key_seen = _grow(self._key_seen, self.capacity)
        out_off = np.zeros(batch.n + 1, dtype=np.int64)
        out_keys = np.empty(max(1024, batch.n), dtype=np.int32)
        k = 0
        for lo in range(0, batch.n, CHUNK_EVENTS):
            hi = min(lo + CHUNK_EVENTS, batch.n)
            chunk = _slice(batch, lo, hi)
            sat_off, sat_pid = self.phase1.satisfied(chunk)
            off = np.empty(hi - lo + 1, dtype=np.int64)
            off[0] = k
            out_keys, k = K.count_matches(
                sat_off, sat_pid, self._main_off, self._main_slot, pend_off, pend_slot,
                self._slots, self._key_seen, self._stamp, off, out_keys, k,
            )
            out_off[lo + 1:hi + 1] = off[1:]
        return Matches(out_off, out_keys[:k].copy())

    def memory_bytes(self) -> int:
        arrays = (self._slots, self._slot_start, self._flat, self._key_first, self._key_count,
                  self._main_off, self._main_slot, self._key_seen, *self._pending())
        return (sum(a.nbytes for a in arrays) + self.phase1.memory_bytes()
                + sys.getsizeof(self.phase1._ids) + sum(a.nbytes for a in self._pend_pid + self._pend_slot))


def _slice(batch: EventBatch, lo: int, hi: int) -> EventBatch:
    """Events ``lo:hi`` of a batch (views; offsets rebased)."""
    if lo == 0 and hi == batch.n:
        return batch
    a, b = batch.offsets[lo], batch.offsets[hi]
    return EventBatch(batch.offsets[lo:hi + 1] - a, batch.attrs[a:b], batch.kinds[a:b], batch.nums[a:b],
                      batch.codes[a:b], batch.texts[a:b], batch.strings)
