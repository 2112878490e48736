"""Adaptive multiple key hashing (Wu & Yu, "Monitoring Web-Based Subscription Services").

Every distinct predicate (clause) has a non-zero ID (its phase-1 predicate id plus one).
A DNF conjunction is a point whose coordinate on attribute ``A_i`` is the ID of its
clause on ``A_i`` (0 if none); it is stored in the collision list of the bucket of

    ``sum_i h_i(C_i) mod M``  with  ``h_i(C) = w_i (C mod B_i)`` (non-equality clause of a
    hashed general attribute), ``w_i C`` (equality clause of a hashed attribute), ``0``
    (attribute not hashed)  -- Eq. (2).

An event's satisfied clauses (phase 1, :class:`~matchers.phase1.PredicateIndex`) give
the matched IDs of each hashed attribute; every candidate coordinate they form (per
subscription schema, i.e. set of hashed attributes a conjunction uses, so that the
zero coordinates need no enumeration) is hashed, and the conjunctions of its bucket
get the final check: all their predicates satisfied.  Which attributes are hashed and
with which ``B`` is chosen adaptively (:mod:`matchers.amkh.hash_choice`) and re-chosen as
subscriptions change and as clause selectivities are measured on the events; a change
re-hashes the conjunctions.  ``mkh=True`` gives plain MKH (Eq. 1).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from matchers.amkh import kernels as K
from matchers.amkh.hash_choice import Config, Stats, choose
from matchers.amkh.layout import Buckets, Conjunctions, Marks, Predicates, Satisfied
from matchers.arrays import grown
from matchers.base import Matcher, Matches, register
from matchers.events import EventBatch
from matchers.expr import Op, Subscription
from matchers.phase1 import PredicateIndex
from matchers.vci.slabs import Slabs

CHUNK_EVENTS = 2048
RECHOOSE_EVENTS = 20_000
"""Events between re-evaluations of the configuration from the measured selectivities."""


@register("amkh")
class AmkhMatcher(Matcher):
    """AMKH matcher.

    Parameters
    ----------
    G : number of general attributes hashed (``None``: adaptive).
    B : fold of the non-equality clause IDs of hashed general attributes (``None``:
        adaptive, ``0``: no folding, else at least 2).
    mkh : plain multiple key hashing (Eq. 1): every attribute hashed, no folding.  Its
        candidate coordinates multiply with the matched non-equality clauses of every
        general attribute: a baseline for the simulation, not for general workloads.
    seed : of the random weights ``w_i``.
    """

    def __init__(self, dictionary=None, G: int | None = None, B: int | None = None, mkh: bool = False,
                 seed: int = 0, **params):
        super().__init__(dictionary, **params)
        if G is not None and not 0 <= G <= K.MAX_HASHED:
            raise ValueError(f"G must be in [0, {K.MAX_HASHED}], not {G}")
        if B is not None and (B < 0 or B == 1):
            raise ValueError(f"B must be 0 (no folding) or at least 2, not {B}")
        self.G, self.B, self.mkh = G, B, mkh
        self.phase1 = PredicateIndex(self.dictionary)
        self.stats = Stats()
        self._rng = np.random.default_rng(seed)
        self._weights: dict[int, int] = {}  # attribute id -> odd 63-bit weight
        self.config = Config((), ())
        self._hashed_slot: dict[int, int] = {}  # attribute id -> position in config.hashed
        # predicates
        self.pid_attr_id = np.zeros(0, dtype=np.int64)
        self.pid_eq = np.zeros(0, dtype=np.bool_)
        self.pid_attr = np.zeros(0, dtype=np.int64)  # hashed attribute slot or -1
        self.pid_hash = np.zeros(0, dtype=np.int64)
        self._pid_refs = np.zeros(0, dtype=np.int64)
        # conjunction slots
        self.slot_key = np.zeros(0, dtype=np.int32)
        self.slot_size = np.zeros(0, dtype=np.int32)
        self.slot_pids = np.zeros((0, 4), dtype=np.int32)
        self.slot_hash = np.zeros(0, dtype=np.int64)
        self.slot_schema = np.zeros(0, dtype=np.int64)
        self._free_slots: list[int] = []
        self._n_slot_ids = 0
        self._slots_of: dict[int, list[int]] = {}
        self._schemas: Counter[int] = Counter()
        self._schema_array = np.zeros(0, dtype=np.int64)
        self._shift = 64 - 6
        self.buckets = Slabs(1 << 6)
        # scratch
        self._pid_mark = np.zeros(0, dtype=np.int64)
        self._key_mark = np.zeros(0, dtype=np.int64)
        self._stamp = np.zeros(1, dtype=np.int64)
        self._events_since_choice = 0
        self.counters = np.zeros(4, dtype=np.int64)
        """Since creation: candidate coordinates probed, collision-list entries examined, those
        not matched, those with the probed coordinate failing the final check."""

    # -- updates ----------------------------------------------------------------------
    def _insert(self, entries: list[tuple[int, Subscription]]) -> None:
        acquire = self.phase1.acquire
        st = self.stats
        new_slots = []
        for key, sub in entries:
            slots = []
            for conj in sub.conjunctions:
                pids = [acquire(p) for p in conj]
                self._note_pids(pids, conj)
                slot = self._new_slot(len(pids))
                self.slot_key[slot] = key
                self.slot_size[slot] = len(pids)
                self.slot_pids[slot, : len(pids)] = pids
                st.n_conj += 1
                seen = set()
                for p in conj:
                    aid = self.dictionary.attr(p.attr)
                    occ = st.eq_occ if p.op is Op.EQ else st.neq_occ
                    occ[aid] = occ.get(aid, 0) + 1
                    if aid not in seen:
                        seen.add(aid)
                        st.cover[aid] = st.cover.get(aid, 0) + 1
                slots.append(slot)
                new_slots.append(slot)
            self._slots_of[key] = slots
        if not self._rechoose():
            self._place(np.asarray(new_slots, dtype=np.int64))

    def _delete(self, entries: list[tuple[int, Subscription]]) -> None:
        st = self.stats
        gone = []
        for key, sub in entries:
            slots = self._slots_of.pop(key)
            gone.extend(slots)
            for slot, conj in zip(slots, sub.conjunctions, strict=True):
                st.n_conj -= 1
                seen = set()
                for p in conj:
                    aid = self.dictionary.attr(p.attr)
                    occ = st.eq_occ if p.op is Op.EQ else st.neq_occ
                    occ[aid] -= 1
                    if aid not in seen:
                        seen.add(aid)
                        st.cover[aid] -= 1
                for p, pid in zip(conj, self.slot_pids[slot, : self.slot_size[slot]].tolist(), strict=True):
                    self._pid_refs[pid] -= 1
                    if self._pid_refs[pid] == 0 and p.op is not Op.EQ:
                        aid = int(self.pid_attr_id[pid])
                        st.neq_pids[aid] -= 1
                    self.phase1.release(p)
        gone_slots = np.asarray(gone, dtype=np.int64)
        self._unplace(gone_slots)
        self.slot_size[gone_slots] = 0
        self._free_slots.extend(gone)
        self._rechoose()

    def _note_pids(self, pids: list[int], conj) -> None:
        cap = self.phase1.capacity
        self.pid_attr_id = grown(self.pid_attr_id, cap, -1)
        self.pid_eq = grown(self.pid_eq, cap)
        self.pid_attr = grown(self.pid_attr, cap, -1)
        self.pid_hash = grown(self.pid_hash, cap)
        self._pid_refs = grown(self._pid_refs, cap)
        self._pid_mark = grown(self._pid_mark, cap)
        for pid, p in zip(pids, conj, strict=True):
            if self._pid_refs[pid] == 0:
                aid = self.dictionary.attr(p.attr)
                self.pid_attr_id[pid] = aid
                self.pid_eq[pid] = p.op is Op.EQ
                if p.op is not Op.EQ:
                    self.stats.neq_pids[aid] = self.stats.neq_pids.get(aid, 0) + 1
                self._set_pid_hash(pid)
            self._pid_refs[pid] += 1

    def _set_pid_hash(self, pid: int) -> None:
        aid = int(self.pid_attr_id[pid])
        slot = self._hashed_slot.get(aid, -1)
        self.pid_attr[pid] = slot
        if slot < 0:
            self.pid_hash[pid] = 0
            return
        clause_id = pid + 1
        fold = self.config.folds[slot]
        if fold and not self.pid_eq[pid]:
            clause_id %= fold
        self.pid_hash[pid] = np.int64((self._weight(aid) * clause_id) & 0x7FFFFFFFFFFFFFFF)

    def _weight(self, aid: int) -> int:
        w = self._weights.get(aid)
        if w is None:
            w = self._weights[aid] = int(self._rng.integers(1, 1 << 62)) | 1
        return w

    def _new_slot(self, size: int) -> int:
        if self._free_slots:
            slot = self._free_slots.pop()
        else:
            slot = self._n_slot_ids
            self._n_slot_ids += 1
            self.slot_key = grown(self.slot_key, slot + 1)
            self.slot_size = grown(self.slot_size, slot + 1)
            self.slot_hash = grown(self.slot_hash, slot + 1)
            self.slot_schema = grown(self.slot_schema, slot + 1)
            self.slot_pids = grown(self.slot_pids, slot + 1)
        if size > self.slot_pids.shape[1]:
            wider = np.zeros((len(self.slot_pids), max(size, 2 * self.slot_pids.shape[1])), dtype=np.int32)
            wider[:, : self.slot_pids.shape[1]] = self.slot_pids
            self.slot_pids = wider
        return slot

    # -- configuration and buckets ------------------------------------------------------
    def _rechoose(self) -> bool:
        """Re-evaluate the configuration; on a change re-hash everything. Returns whether it did."""
        config = choose(self.stats, self.G, self.B, self.mkh, self.config)
        live = self.stats.n_conj
        size = len(self.buckets.start)
        resize = live > size or (size > 64 and 8 * live < size)
        if config == self.config and not resize:
            return False
        self.config = config
        self._hashed_slot = {aid: i for i, aid in enumerate(config.hashed)}
        live_pids = np.flatnonzero(self._pid_refs > 0)
        self.pid_attr[:] = -1
        for pid in live_pids.tolist():
            self._set_pid_hash(pid)
        n_buckets = 64  # M: a power of two, at least twice the conjunctions
        while n_buckets < 2 * live:
            n_buckets *= 2
        self._shift = 64 - (n_buckets.bit_length() - 1)
        self.buckets = Slabs(n_buckets)
        self._schemas = Counter()
        slots = np.flatnonzero(self.slot_size[: self._n_slot_ids] > 0)
        self._place(slots)
        return True

    def _place(self, slots: np.ndarray) -> None:
        if len(slots) == 0:
            return
        hashes = np.empty(len(slots), dtype=np.int64)
        schemas = np.empty(len(slots), dtype=np.int64)
        K.coordinates(slots, self._conjunctions(), self._predicates(), len(self.config.hashed), hashes, schemas)
        self.slot_hash[slots] = hashes
        self.slot_schema[slots] = schemas
        buckets = K.buckets_of(hashes, self._shift)
        b = self.buckets
        first, extra = 0, 0
        while first < len(slots):
            before = first
            first = K.bucket_insert(slots, buckets, first, b.start, b.count, b.cap, b.pool, b.top)
            if first < len(slots):
                extra = 2 * extra + 1024 if first == before else 0
                b.grow(extra)
        self._schemas.update(schemas.tolist())
        self._schema_array = np.asarray(sorted(s for s, c in self._schemas.items() if c > 0), dtype=np.int64)

    def _unplace(self, slots: np.ndarray) -> None:
        buckets = K.buckets_of(self.slot_hash[slots], self._shift)
        b = self.buckets
        missing = K.bucket_remove(slots, buckets, b.start, b.count, b.cap, b.pool, b.top)
        if missing:
            raise AssertionError(f"AMKH buckets lost {missing} conjunction slots")
        self._schemas.subtract(self.slot_schema[slots].tolist())
        self._schema_array = np.asarray(sorted(s for s, c in self._schemas.items() if c > 0), dtype=np.int64)
        b.maybe_compact()

    def _predicates(self) -> Predicates:
        return Predicates(self.pid_attr, self.pid_eq, self.pid_hash)

    def _conjunctions(self) -> Conjunctions:
        return Conjunctions(self.slot_key, self.slot_size, self.slot_pids, self.slot_hash)

    # -- matching -------------------------------------------------------------------------
    def _match(self, batch: EventBatch) -> Matches:
        self._key_mark = grown(self._key_mark, self.capacity)
        self._pid_mark = grown(self._pid_mark, self.phase1.capacity)
        out_off = np.zeros(batch.n + 1, dtype=np.int64)
        out_keys = np.empty(max(1024, batch.n), dtype=np.int32)
        k = 0
        b = self.buckets
        preds, conj = self._predicates(), self._conjunctions()
        buckets = Buckets(b.start, b.count, b.pool, self._shift)
        marks = Marks(self._pid_mark, self._key_mark, self._stamp)
        for lo in range(0, batch.n, CHUNK_EVENTS):
            hi = min(lo + CHUNK_EVENTS, batch.n)
            chunk = batch.slice(lo, hi)
            sat = Satisfied(*self.phase1.satisfied(chunk))
            self._measure(chunk, sat.pid)
            off = np.empty(hi - lo + 1, dtype=np.int64)
            off[0] = k
            out_keys, k = K.match_events(
                sat, preds, conj, buckets, self._schema_array, len(self.config.hashed), marks, off, out_keys, k,
                self.counters,
            )
            out_off[lo + 1:hi + 1] = off[1:]
        self._events_since_choice += batch.n
        if self._events_since_choice >= RECHOOSE_EVENTS and (self.G is None or self.B is None):
            self._events_since_choice = 0
            self._rechoose()
        return Matches(out_off, out_keys[:k].copy())

    def _measure(self, chunk: EventBatch, sat_pid: np.ndarray) -> None:
        """Accumulate the matched fraction of each attribute's non-equality clauses."""
        if len(sat_pid) == 0:
            return
        pids = sat_pid[~self.pid_eq[sat_pid]]
        attrs = self.pid_attr_id[pids]
        n_attr = max(int(attrs.max(initial=-1)), int(chunk.attrs.max(initial=-1))) + 1
        matched = np.bincount(attrs, minlength=n_attr)
        present = np.bincount(chunk.attrs, minlength=n_attr)
        st = self.stats
        for aid in np.flatnonzero(matched | present).tolist():
            n_neq = st.neq_pids.get(aid, 0)
            if n_neq:
                st.sel_num[aid] = st.sel_num.get(aid, 0.0) + float(matched[aid])
                st.sel_den[aid] = st.sel_den.get(aid, 0.0) + float(present[aid]) * n_neq

    def memory_bytes(self) -> int:
        arrays = (self.pid_attr_id, self.pid_eq, self.pid_attr, self.pid_hash, self._pid_refs, self.slot_key,
                  self.slot_size, self.slot_pids, self.slot_hash, self.slot_schema, self._key_mark,
                  self._pid_mark)
        return sum(a.nbytes for a in arrays) + self.buckets.memory_bytes() + self.phase1.memory_bytes()

