"""Dynamic clustering (Fabret et al., Section 4): hash tables created and deleted online.

The maintenance algorithm runs whenever the statistics are refreshed: after
``refresh_changes`` subscription insertions or deletions, or after ``refresh_events``
matched events.  It

1. deletes every multi-attribute hash table whose benefit ``B(H) = |H|`` (subscriptions
   in it) fell below ``b_delete``, redistributing its subscriptions to the best
   remaining access predicates;
2. computes the benefit margin of every cluster, ``BM(c) = nu(p_c) * m(c)`` where
   ``m(c)`` counts the subscriptions of ``c`` having more equality attributes than the
   schema of ``p_c`` (those that another table could hold; the paper's first
   approximation ``nu(p_c) |c|`` restricted to them), and calls ``cluster_distribute``
   on every cluster above ``bm_max``;
3. creates, while one exists, the potential table of highest benefit ``B(H) >=
   b_create`` and redistributes its candidate clusters.

The benefit of a potential table is the paper's "average number of checks saved" rather
than its first approximation ``|H|``: each subscription credits it with the probability
``nu(p_c)`` that its current cluster is checked (what the table would save, almost all
of it, since ``nu`` of the wider access predicate is far smaller), so ``b_create`` is in
checks per event and can be set against the cost of a probe.

``cluster_distribute(c)`` moves each subscription of ``c`` to the existing table that
minimises ``nu`` of its access predicate; if the margin stays at or above ``bm_max``,
each unmarked subscription adds ``nu(p_c)`` to the benefit of every potential table wider than
``p_c`` over a subset of its equality attributes (``PH & GA(s)``), ``c`` becomes one of
their candidate clusters, and the subscription is marked.  A marked subscription that
moves or leaves takes its contribution back.  Insertion picks the best existing table
(:meth:`ClusterStore.choose`); deletion finds the row through the entry's ``(cluster,
row)`` in O(1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from matchers.arrays import grown
from matchers.base import register
from matchers.events import Dictionary
from matchers.fabret.clusters import subsets
from matchers.fabret.twophase import TwoPhaseMatcher, schema_bound


@register("dynamic")
class DynamicMatcher(TwoPhaseMatcher):
    """Two-phase matching with dynamically maintained multi-attribute hash tables.

    Parameters
    ----------
    bm_max : cluster benefit margin (expected checks per event) above which a cluster
        is redistributed.  The default reflects that a table probe costs about as much as
        a hundred sequential row checks on current hardware.
    b_create : benefit (expected checks saved per event) at which a potential table is
        created; the default is about the cost of one probe, in row checks.
    b_delete : subscriptions under which a table is deleted.
    max_schema : most attributes in a table's schema (at most ``MAX_SCHEMA``).
    refresh_changes, refresh_events : statistics refresh (and maintenance) period.
    adapt : ``False`` freezes the set of tables (the paper's "no change" strategy).
    decay : ageing of the event statistics at each refresh.
    """

    def __init__(self, dictionary: Dictionary | None = None, *, bm_max: float = 2.0,
                 b_create: float = 200, b_delete: float = 100, max_schema: int = 4,
                 refresh_changes: int = 20_000, refresh_events: int = 20_000, adapt: bool = True,
                 decay: float = 0.5, **params: Any):
        super().__init__(dictionary, decay=decay, **params)
        self.bm_max = bm_max
        self.b_create = b_create
        self.b_delete = b_delete
        self.max_schema = schema_bound(max_schema)
        self.refresh_changes = refresh_changes
        self.refresh_events = refresh_events
        self.adapt = adapt
        self.benefit = np.zeros(64)
        """``B(H)`` of each potential table, by schema id (see :attr:`schemas`)."""
        self.schemas: list[tuple[int, ...]] = []
        self.schema_id: dict[tuple[int, ...], int] = {}
        self.schema_len = np.zeros(64, dtype=np.int64)
        self.schema_is_table = np.zeros(64, dtype=bool)
        self.mark_width = np.zeros(64, dtype=np.int8)
        """Per entry: 0 if unmarked, else 1 + the access width it was marked at."""
        self.mark_nu = np.zeros(64)
        """Per marked entry: the benefit it credited to each potential table."""
        self._group_sids: dict[int, np.ndarray] = {}
        self.checked = np.full(64, -1, dtype=np.int64)
        """Per entry: the table-set version it was last placed or checked against; only
        entries checked against an older set of tables are considered for a move."""
        self._changes = 0
        self._events = 0
        self.tables_created = 0
        self.tables_deleted = 0
        self.moves = 0
        self.maintenance_runs = 0

    # -- hooks ------------------------------------------------------------------------
    def _changed(self, n: int) -> None:
        self._changes += n
        if self._changes >= self.refresh_changes:
            self.maintain()

    def _matched(self, n: int) -> None:
        self._events += n
        if self._events >= self.refresh_events:
            self.maintain()

    def _removing(self, entries: np.ndarray) -> None:
        self._unmark(entries)

    # -- maintenance ------------------------------------------------------------------
    def maintain(self) -> None:
        """Refresh the statistics and run the maintenance algorithm."""
        self._changes = 0
        self._events = 0
        log_nu = self.log_nu(refresh=True)
        self.stats.age()
        if not self.adapt or self.store.n_entries == 0:
            return
        self.maintenance_runs += 1
        store = self.store
        for schema, t in sorted(store.table_of.items()):
            if store.t_size[t] < self.b_delete:
                ents = store.drop_table(t)
                if schema in self.schema_id:
                    self.schema_is_table[self.schema_id[schema]] = False
                self._unmark(ents)
                store.place(ents, log_nu)
                self.moves += len(ents)
                self.tables_deleted += 1
        clusters = store.live_clusters()
        if len(clusters):
            margin = np.exp(store.access_log_nu(store.c_access[clusters], log_nu)) * store.c_movable[clusters]
            over = np.argsort(-margin)
            for c in clusters[over[margin[over] > self.bm_max]].tolist():
                self._distribute(c, log_nu)
        while len(self.schemas):
            n = len(self.schemas)
            open_benefit = np.where(self.schema_is_table[:n], -np.inf, self.benefit[:n])
            sid = int(open_benefit.argmax())
            if open_benefit[sid] < self.b_create:
                break
            self.benefit[sid] = 0.0
            self.schema_is_table[sid] = True
            schema = self.schemas[sid]
            store.create_table(schema)
            self.tables_created += 1
            for c in self._candidates(schema).tolist():
                if store.c_access[c] >= 0:
                    self._distribute(c, log_nu)

    def _candidates(self, schema: tuple[int, ...]) -> np.ndarray:
        """Clusters holding marked subscriptions that credited ``schema`` (``H.candidate``)."""
        store = self.store
        self.mark_width = grown(self.mark_width, store.e_top, 0)
        ents = store.live_entries()
        widths = self.mark_width[ents].astype(np.int64)
        ents = ents[(widths > 0) & (widths - 1 < len(schema))]
        if len(ents) == 0:
            return np.zeros(0, dtype=np.int64)
        groups = np.unique(store.e_group[ents])
        wanted = set(schema)
        inside = np.asarray([wanted.issubset(store.groups[g]) for g in groups.tolist()], dtype=bool)
        ok = np.isin(store.e_group[ents], groups[inside])
        return np.unique(store.e_cluster[ents[ok]]).astype(np.int64)

    def _distribute(self, c: int, log_nu: np.ndarray) -> None:
        """``cluster_distribute(c)``: move subscriptions to better existing tables, then
        credit potential tables if the margin is still excessive."""
        store = self.store
        a = int(store.c_access[c])
        version = self.tables_created + self.tables_deleted
        self.checked = grown(self.checked, store.e_top, -1)
        ents = store.cluster_entries(c)
        ents = ents[self.checked[ents] != version]
        self.checked[ents] = version
        current = float(store.access_log_nu(np.asarray([a]), log_nu)[0])
        tables, options, scores = store.choose(ents, log_nu)
        move = scores < current - 1e-9
        if move.any():
            moving = ents[move]
            self._unmark(moving)
            store.unplace(moving)
            store.place(moving, log_nu, tables[move], options[move])
            self.moves += len(moving)
        if store.c_access[c] != a:  # emptied (the id may even be reused)
            return
        width = int(store.a_width[a])
        if np.exp(current) * store.c_movable[c] < self.bm_max:
            return
        ents = store.cluster_entries(c)
        self.mark_width = grown(self.mark_width, store.e_top, 0)
        fresh = ents[(self.mark_width[ents] == 0) & (store.e_k[ents] > width)]
        if len(fresh) == 0:
            return
        groups, counts = np.unique(store.e_group[fresh], return_counts=True)
        nu = float(np.exp(current))
        self._credit(groups, counts * nu, np.full(len(groups), width))
        self.mark_nu = grown(self.mark_nu, store.e_top, 0.0)
        self.mark_width[fresh] = width + 1
        self.mark_nu[fresh] = nu

    def _credit(self, groups: np.ndarray, amounts: np.ndarray, widths: np.ndarray) -> None:
        """Add ``amount`` to ``B(H)`` of every potential table of each group wider than its width."""
        parts, weights = [], []
        for g, n, w in zip(groups.tolist(), amounts.tolist(), widths.tolist(), strict=True):
            sids = self._sids(g)
            sids = sids[(self.schema_len[sids] > w) & ~self.schema_is_table[sids]]
            parts.append(sids)
            weights.append(np.full(len(sids), n))
        if parts:
            np.add.at(self.benefit, np.concatenate(parts), np.concatenate(weights))

    def _sids(self, g: int) -> np.ndarray:
        """Schema ids of the subsets (2 to ``max_schema`` attributes) of group ``g``."""
        sids = self._group_sids.get(g)
        if sids is None:
            out = []
            for schema in subsets(self.store.groups[g], self.max_schema):
                sid = self.schema_id.get(schema)
                if sid is None:
                    sid = self.schema_id[schema] = len(self.schemas)
                    self.schemas.append(schema)
                out.append(sid)
            self.benefit = grown(self.benefit, len(self.schemas), 0.0)
            self.schema_len = grown(self.schema_len, len(self.schemas), 0)
            self.schema_is_table = grown(self.schema_is_table, len(self.schemas), False)
            self.schema_len[out] = [len(self.schemas[i]) for i in out]
            sids = self._group_sids[g] = np.asarray(out, dtype=np.int64)
        return sids

    def _unmark(self, entries: np.ndarray) -> None:
        """Take back the benefit contributions of marked entries."""
        if len(entries) == 0:
            return
        self.mark_width = grown(self.mark_width, self.store.e_top, 0)
        widths = self.mark_width[entries]
        marked = widths > 0
        if not marked.any():
            return
        ents = entries[marked]
        # (group, width - 1) pairs once each, as one int64 key (group, then width order: np.unique's of the pairs)
        keys, inverse = np.unique((self.store.e_group[ents].astype(np.int64) << 32) | (widths[marked].astype(np.int64) - 1),
                                  return_inverse=True)
        amounts = np.bincount(inverse.ravel(), self.mark_nu[ents], minlength=len(keys))
        self._credit(keys >> 32, -amounts, keys & 0xFFFFFFFF)
        self.mark_width[ents] = 0
        self.mark_nu[ents] = 0.0
