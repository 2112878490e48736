"""The two-phase matching algorithm of Fabret et al. (Fig. 2), shared by the three matchers.

Phase 1 (predicate testing) is :class:`matchers.phase1.PredicateIndex`: every distinct
predicate has one id, the predicate bit vector has one entry per id, and phase 1
returns the satisfied ids of each event.  Phase 2 sets the bit vector, collects the
clusters of the satisfied access predicates (single predicates directly, conjunctions
of equality predicates through the multi-attribute hash tables) and runs the
cluster-matching loop (:mod:`matchers.fabret.kernels`).

A subscription is in DNF: each conjunction is one clustered *entry*; an event's matches
are the distinct keys of its matched entries.  The matchers differ only in which
multi-attribute hash tables exist and when they change: none (propagation), computed
by the greedy algorithm (static), or maintained online (dynamic).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from matchers.arrays import grown
from matchers.base import Matcher, Matches
from matchers.events import Dictionary, EventBatch
from matchers.expr import Op, Subscription
from matchers.fabret.clusters import ClusterStore
from matchers.fabret.cost import EventStats
from matchers.fabret.kernels import MAX_SCHEMA
from matchers.packed import Decoded


def _default_phase1(dictionary: Dictionary):
    from matchers.phase1 import PredicateIndex

    return PredicateIndex(dictionary)


def schema_bound(max_schema: int) -> int:
    """``max_schema`` (the most attributes in a hash table's schema), checked: 2 to
    :data:`~matchers.fabret.kernels.MAX_SCHEMA`."""
    if not 2 <= max_schema <= MAX_SCHEMA:
        raise ValueError(f"max_schema must be 2..{MAX_SCHEMA}, not {max_schema}")
    return max_schema


class TwoPhaseMatcher(Matcher):
    """Base of the Fabret et al. matchers.

    Parameters
    ----------
    dictionary : shared attribute and string dictionaries.
    predicate_index : factory ``dictionary -> PredicateIndex`` for phase 1 (default:
        :class:`matchers.phase1.PredicateIndex`).
    prior_weight, decay : see :class:`~matchers.fabret.cost.EventStats`.
    """

    def __init__(self, dictionary: Dictionary | None = None, *,
                 predicate_index: Callable[[Dictionary], Any] | None = None,
                 prior_weight: float = 20.0, decay: float = 1.0, **params: Any):
        super().__init__(dictionary, **params)
        self.phase1 = (predicate_index or _default_phase1)(self.dictionary)
        self.store = ClusterStore()
        self.stats = EventStats(prior_weight, decay)
        self.bits = np.zeros(64, dtype=np.uint8)
        self.pid_refs = np.zeros(64, dtype=np.int32)
        self.key_entry = np.full(64, -1, dtype=np.int64)
        self.e_sibling = np.full(64, -1, dtype=np.int64)
        self.checks = 0
        """Rows checked by the cluster-matching loop since creation (for benchmarks)."""
        self._log_nu: np.ndarray | None = None
        self._log_nu_events = -1.0

    # -- Matcher ----------------------------------------------------------------------
    def _insert(self, entries: list[tuple[int, Subscription]]) -> None:
        conjs = [(key, conj) for key, sub in entries for conj in sub.conjunctions]
        keys = [key for key, _ in conjs]
        lengths = np.fromiter(map(len, (conj for _, conj in conjs)), dtype=np.int64, count=len(conjs))
        flat = self.phase1.acquire_many([p for _, conj in conjs for p in conj]).astype(np.int64)
        self._insert_entries(keys, flat, lengths, len(entries))

    def _insert_columns(self, keys: np.ndarray, rows: Decoded) -> None:
        pids = self.phase1.acquire_counted(rows.preds, np.bincount(rows.flat, minlength=len(rows.preds)))
        entry_keys = np.repeat(keys, np.diff(rows.entries)).tolist()
        self._insert_entries(entry_keys, pids[rows.flat].astype(np.int64), rows.sizes, len(keys))

    def _insert_entries(self, keys: list[int], flat: np.ndarray, lengths: np.ndarray, n: int) -> None:
        """Cluster the entries of ``n`` new subscriptions: ``keys[j]``'s conjunction ``j`` of
        predicate ids ``flat`` (``lengths[j]`` of them in turn)."""
        self._track_pids(flat)
        ents = self.store.new_entries(keys, flat, lengths)
        self._link(ents, keys)
        self.store.place(ents, self.log_nu())
        self._changed(n)

    def _delete_keys(self, keys: np.ndarray) -> None:
        ents = self.entries_of(keys)
        distinct, counts = np.unique(self.store.pids_of(ents), return_counts=True)
        self._removing(ents)
        self.pid_refs[distinct] -= counts.astype(self.pid_refs.dtype)
        self.store.unplace(ents)
        self.store.free_entries(ents)
        self.key_entry[keys] = -1
        self.phase1.release_counted(distinct, counts)
        self._changed(len(keys))

    def _match(self, batch: EventBatch) -> Matches:
        offsets, pids = self.phase1.satisfied(batch)
        cap = max(int(self.phase1.capacity), len(self.store.pid_eq_attr))
        if len(self.bits) < cap:
            self.bits = grown(self.bits, cap, 0)
        n_attrs = max(self.dictionary.n_attrs, 1)
        self.stats.reserve(cap, n_attrs)
        out_off, keys, checks = self.store.match(
            np.ascontiguousarray(offsets, dtype=np.int64), np.ascontiguousarray(pids, dtype=np.int32),
            n_attrs, self.bits, self.stats.pid_hits, self.stats.attr_hits)
        self.stats.seen(batch.n)
        self.checks += int(checks)
        self._matched(batch.n)
        return Matches(out_off, keys)

    def memory_bytes(self) -> int:
        own = self.bits.nbytes + self.pid_refs.nbytes + self.key_entry.nbytes + self.e_sibling.nbytes
        return int(self.store.memory_bytes() + self.phase1.memory_bytes() + self.stats.memory_bytes() + own)

    # -- hooks for the clustering strategies --------------------------------------------
    def _changed(self, n: int) -> None:
        """Called after ``n`` subscriptions were inserted or deleted."""

    def _matched(self, n: int) -> None:
        """Called after a batch of ``n`` events was matched."""

    def _removing(self, entries: np.ndarray) -> None:
        """Called before entries of deleted subscriptions leave their clusters."""

    # -- helpers ----------------------------------------------------------------------
    def log_nu(self, refresh: bool = False) -> np.ndarray:
        """``log(nu)`` of every predicate id, recomputed when events were seen since the
        last call (or when ``refresh``)."""
        if refresh or self._log_nu is None or self._log_nu_events != self.stats.events_total \
                or len(self._log_nu) < len(self.store.pid_eq_attr):
            n = len(self.store.pid_eq_attr)
            self.pid_refs = grown(self.pid_refs, n, 0)
            live = self.pid_refs[:n] > 0
            self._log_nu = self.stats.log_nu(self.store.pid_eq_attr, live)
            self._log_nu_events = self.stats.events_total
        return self._log_nu

    def entries_of(self, keys: np.ndarray | list[int]) -> np.ndarray:
        """Entry ids of the conjunctions of subscription keys (key by key, each key's
        entries newest first)."""
        head = self.key_entry[np.asarray(keys, dtype=np.int64)]
        at = np.arange(len(head), dtype=np.int64)
        parts, where, depth = [], [], []
        d = 0
        while len(head):
            live = head >= 0
            head, at = head[live], at[live]
            parts.append(head)
            where.append(at)
            depth.append(np.full(len(head), d, dtype=np.int64))
            head = self.e_sibling[head]
            d += 1
        if not parts:
            return np.zeros(0, dtype=np.int64)
        ents, at_, deep = np.concatenate(parts), np.concatenate(where), np.concatenate(depth)
        return ents[np.lexsort((deep, at_))].astype(np.int64)

    def _link(self, ents: np.ndarray, keys: list[int]) -> None:
        self.key_entry = grown(self.key_entry, max(keys) + 1, -1)
        self.e_sibling = grown(self.e_sibling, int(ents.max()) + 1, -1)
        order = np.argsort(np.asarray(keys, dtype=np.int64), kind="stable")  # each key's entries in turn
        by_key, ents = np.asarray(keys, dtype=np.int64)[order], ents[order]
        first = np.r_[True, by_key[1:] != by_key[:-1]]
        last = np.r_[by_key[1:] != by_key[:-1], True]
        before = np.empty_like(ents)  # each entry links to the one before it, the first to the key's head
        before[1:] = ents[:-1]
        before[first] = self.key_entry[by_key[first]]
        self.e_sibling[ents] = before
        self.key_entry[by_key[last]] = ents[last]

    def _track_pids(self, pids: np.ndarray) -> None:
        """Take references on acquired predicate ids and record which are equalities (of which attribute)."""
        if len(pids) == 0:
            return
        top = int(pids.max()) + 1
        self.store.reserve_pids(top)
        distinct = np.unique(pids)
        attr_of, predicate = self.dictionary.attr_ids, self.phase1.predicate
        self.store.pid_eq_attr[distinct] = [attr_of[p.attr] if p.op is Op.EQ else -1
                                            for p in map(predicate, distinct.tolist())]
        self.pid_refs = grown(self.pid_refs, top, 0)
        np.add.at(self.pid_refs, pids, 1)
