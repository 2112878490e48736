"""Static clustering (Fabret et al., Section 3): the greedy choice of multi-attribute hash tables.

The greedy algorithm starts from the natural configuration (single equality
predicates as access predicates, free since phase 1 hashes them anyway) and adds, one
at a time, the schema of highest matching benefit per unit of space, while the space
stays under the bound and some schema has a positive benefit.  Without a space bound
the schema of highest benefit is added (per unit of space, every W0 schema scores
about the same, and the ranking follows the noise of the sampled statistics).  The matching cost of a
configuration is formula (3.1): for each subscription the ``nu`` of its best access
predicate times the checking cost, plus per table ``k_r`` and ``mu(H) (c_h + k_h |H|)``.
The candidate schemas ``GA(S)`` are the subsets of 2 to ``max_schema`` attributes of
the subscriptions' equality attribute sets.

Benefits are computed on a uniform sample of at most ``sample_entries`` conjunctions,
scaled to the whole set (exact when the set is smaller); ``nu`` and ``mu`` come from a
sample of events (:meth:`StaticMatcher.optimize`), or, when the clustering is rebuilt
automatically, from the events matched so far.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from matchers.base import Matches, register
from matchers.events import Dictionary, EventBatch
from matchers.fabret.clusters import subsets
from matchers.fabret.cost import CostParams, EventStats
from matchers.fabret.twophase import TwoPhaseMatcher, schema_bound


@register("static")
class StaticMatcher(TwoPhaseMatcher):
    """Two-phase matching with hash tables chosen by the greedy cost-based algorithm.

    Parameters
    ----------
    space_bound : bytes the clusters and hash tables may take (``None``: no bound).
    max_schema : most attributes in a table's schema.
    max_tables : most tables the greedy algorithm adds.
    sample_entries : conjunctions sampled to estimate benefits.
    min_changes, rebuild_fraction : the clustering is recomputed from scratch before
        matching once at least ``max(min_changes, rebuild_fraction * len(self))``
        subscriptions changed since the last computation.
    cost : constants of the cost model.
    """

    def __init__(self, dictionary: Dictionary | None = None, *, space_bound: float | None = None,
                 max_schema: int = 4, max_tables: int = 64, sample_entries: int = 200_000,
                 min_changes: int = 10_000, rebuild_fraction: float = 0.5,
                 cost: CostParams | None = None, seed: int = 0, **params: Any):
        super().__init__(dictionary, **params)
        self.space_bound = space_bound
        self.max_schema = schema_bound(max_schema)
        self.max_tables = max_tables
        self.sample_entries = sample_entries
        self.min_changes = min_changes
        self.rebuild_fraction = rebuild_fraction
        self.cost = cost or CostParams()
        self.rng = np.random.default_rng(seed)
        self._pending = 0
        self.space = 0.0
        """Estimated space of the last computed configuration (cost-model bytes)."""

    def _changed(self, n: int) -> None:
        self._pending += n

    def _match(self, batch: EventBatch) -> Matches:
        if self._pending and self._pending >= max(self.min_changes, self.rebuild_fraction * len(self)):
            self.optimize(batch)
        return super()._match(batch)

    # -- the greedy algorithm ---------------------------------------------------------
    def optimize(self, sample: EventBatch | None = None) -> list[tuple[int, ...]]:
        """Recompute the configuration with the greedy algorithm and re-cluster every
        subscription; returns the chosen schemas.

        ``sample``: events to measure ``nu`` and ``mu`` on (default: the events seen).
        """
        self._pending = 0
        stats = self._sample_stats(sample) if sample is not None and sample.n else self.stats
        live = np.zeros(len(self.store.pid_eq_attr), dtype=bool)
        live[: min(len(live), len(self.pid_refs))] = self.pid_refs[: len(live)] > 0
        log_nu = stats.log_nu(self.store.pid_eq_attr, live)
        presence = stats.attr_presence(max(self.dictionary.n_attrs, 1))
        schemas = self._greedy(log_nu, presence)
        store = self.store
        for t in list(store.table_of.values()):
            store.drop_table(t)
        ents = store.live_entries()
        store.unplace(ents)
        for schema in schemas:
            store.create_table(schema)
        store.place(ents, log_nu)
        return schemas

    def _sample_stats(self, sample: EventBatch) -> EventStats:
        offsets, pids = self.phase1.satisfied(sample)
        stats = EventStats(self.stats.prior_weight)
        n = len(self.store.pid_eq_attr)
        stats.reserve(n, max(self.dictionary.n_attrs, 1))
        pids = np.asarray(pids, dtype=np.int64)
        np.add.at(stats.pid_hits, pids, 1.0)
        attrs = self.store.pid_eq_attr[pids]
        np.add.at(stats.attr_hits, attrs[attrs >= 0], 1.0)
        stats.seen(sample.n)
        return stats

    def _greedy(self, log_nu: np.ndarray, presence: np.ndarray) -> list[tuple[int, ...]]:
        store, cost = self.store, self.cost
        ents = store.live_entries()
        if len(ents) == 0:
            return []
        scale = 1.0
        if len(ents) > self.sample_entries:
            scale = len(ents) / self.sample_entries
            ents = self.rng.choice(ents, self.sample_entries, replace=False)
        ks = store.e_k[ents]
        # current (natural) configuration: the best single equality predicate
        cur = np.zeros(len(ents))
        width = np.ones(len(ents))
        for k in np.unique(ks).tolist():
            idx = np.flatnonzero(ks == k)
            if k == 0:
                cur[idx] = [log_nu[store.entry_pids(int(e))].min() for e in ents[idx].tolist()]
                width[idx] = 0
                continue
            cols = store.epool[store.e_start[ents[idx]][:, None] + np.arange(k)[None, :]]
            cur[idx] = log_nu[cols].min(axis=1)
        # (entry, candidate schema) pairs with the candidate's log nu on the entry
        schema_id: dict[tuple[int, ...], int] = {}
        pair_entry, pair_sid, pair_lnu = [], [], []
        groups = store.e_group[ents]
        order = np.argsort(groups, kind="stable")
        bounds = np.flatnonzero(np.diff(groups[order])) + 1
        for idx in np.split(order, bounds):
            attrs = store.groups[int(groups[idx[0]])]
            if len(attrs) < 2:
                continue
            cols = store.epool[store.e_start[ents[idx]][:, None] + np.arange(len(attrs))[None, :]]
            lnu = log_nu[cols]
            where = {a: j for j, a in enumerate(attrs)}
            for schema in subsets(attrs, self.max_schema):
                sid = schema_id.setdefault(schema, len(schema_id))
                pair_entry.append(idx)
                pair_sid.append(np.full(len(idx), sid))
                pair_lnu.append(lnu[:, [where[a] for a in schema]].sum(axis=1))
        if not schema_id:
            return []
        p_entry = np.concatenate(pair_entry)
        p_sid = np.concatenate(pair_sid)
        p_lnu = np.concatenate(pair_lnu)
        schemas = list(schema_id)
        n_s = len(schemas)
        s_len = np.asarray([len(s) for s in schemas], dtype=np.float64)
        log_presence = np.log(np.clip(presence, 1e-12, 1.0))
        mu = np.exp([log_presence[list(s)].sum() for s in schemas])
        table_cost = cost.k_r + mu * (cost.c_h + cost.k_h * s_len)
        space = cost.k_space * float((store.e_len[ents] - np.minimum(width, ks)).sum()) * scale
        chosen: list[tuple[int, ...]] = []
        open_ = np.ones(n_s, dtype=bool)
        p_nu = np.exp(p_lnu)
        while len(chosen) < self.max_tables and (self.space_bound is None or space < self.space_bound):
            saved = np.maximum(np.exp(cur[p_entry]) - p_nu, 0.0) * cost.check * scale
            moved = saved > 0
            benefit = np.bincount(p_sid, saved, minlength=n_s) - table_cost
            n_moved = np.bincount(p_sid, moved * scale, minlength=n_s)
            narrower = np.bincount(p_sid, moved * (s_len[p_sid] - width[p_entry]) * scale, minlength=n_s)
            delta = cost.i_space + cost.h_space * n_moved - cost.k_space * narrower
            ok = open_ & (benefit > 0)
            if not ok.any():
                break
            if self.space_bound is None:
                rank = benefit.copy()
            else:  # benefit per unit of space, infinite (then by benefit) when space is saved
                rank = np.where(delta > 0, benefit / np.maximum(delta, 1e-12), np.finfo(float).max / 2 + benefit)
            rank[~ok] = -np.inf
            best = int(np.argmax(rank))
            if self.space_bound is not None and space + max(float(delta[best]), 0.0) > self.space_bound:
                break
            chosen.append(schemas[best])
            open_[best] = False
            space += max(float(delta[best]), 0.0)
            mine = np.flatnonzero((p_sid == best) & (p_lnu < cur[p_entry]))
            cur[p_entry[mine]] = p_lnu[mine]
            width[p_entry[mine]] = s_len[best]
        self.space = space
        return chosen
