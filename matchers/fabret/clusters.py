"""Column-wise subscription clusters, access predicates and multi-attribute hash tables.

:class:`ClusterStore` holds the data structures of Section 2.2 of Fabret et al. as
contiguous arrays (the layout is described in :mod:`matchers.fabret.kernels`):

* **entries**: one per conjunction of a subscription's DNF, with its predicate ids
  (equality predicates of distinct attributes first, sorted by attribute, then the
  rest), its subscription key, its *group* (the attribute set ``A(s)`` of its equality
  predicates) and its place ``(cluster, row)``, so that a deletion finds its row in O(1)
  and swap-removes it;
* **access entries**: an access predicate is either a single predicate id (the
  "natural" clustering: one equality predicate, or, for a conjunction without any
  equality predicate, its most selective predicate) or a conjunction of equality
  predicates over the schema of a multi-attribute hash table;
* **clusters**: per access entry, one cluster per size (number of predicates left to
  check), each a slab of the pool with one column per predicate position plus the
  subscription line.

Placement (:meth:`ClusterStore.place`) puts each entry under the available access
predicate with the lowest probability ``nu`` of being satisfied by an event (the
cheapest checking cost of the cost model), and orders the columns of its row by
ascending ``nu`` so that the first column fails most often (early exit).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np

from matchers.arrays import grown, new_row
from matchers.fabret import kernels
from matchers.fabret.kernels import (
    CAP,
    EMPTY,
    FIRST,
    KEY,
    LEN,
    MAX_SCHEMA,
    NEXT,
    SIZE,
    START,
    TABLE,
)
from matchers.fabret.layout import Phase2

SINGLE = -1
"""Table id of access entries reached by a single predicate id (no hashing)."""


class ClusterStore:
    """Entries, clusters, access entries and multi-attribute hash tables of one matcher."""

    def __init__(self) -> None:
        # predicate ids
        self.pid_eq_attr = np.full(64, -1, dtype=np.int32)
        self.pid_access = np.full(64, -1, dtype=np.int32)
        # entries
        self.e_key = np.full(64, -1, dtype=np.int32)
        self.e_start = np.zeros(64, dtype=np.int64)
        self.e_len = np.zeros(64, dtype=np.int32)
        self.e_k = np.zeros(64, dtype=np.int32)
        self.e_group = np.full(64, -1, dtype=np.int32)
        self.e_cluster = np.full(64, -1, dtype=np.int32)
        self.e_row = np.full(64, -1, dtype=np.int32)
        self.e_top = 0
        self.e_free: list[int] = []
        self.n_entries = 0
        self.epool = np.zeros(1024, dtype=np.int32)
        self.epool_top = 0
        self.epool_garbage = 0
        # groups: attribute sets of the equality predicates of entries
        self.groups: list[tuple[int, ...]] = []
        self.group_of: dict[tuple[int, ...], int] = {}
        self._table_pos: dict[int, np.ndarray] = {}
        # cluster pool
        self.pool = np.zeros(4096, dtype=np.int32)
        self.top = 0
        self.garbage = 0
        # clusters
        self.cl = np.zeros((64, 5), dtype=np.int64)
        """Cluster metadata rows ``(start, cap, len, size, next)``."""
        self.c_access = np.full(64, -1, dtype=np.int32)
        self.c_movable = np.zeros(64, dtype=np.int32)
        self.c_top = 0
        self.c_free: list[int] = []
        self.cluster_of: dict[tuple[int, int], int] = {}
        # access entries
        self.acc = np.full((64, KEY + MAX_SCHEMA), -1, dtype=np.int32)
        """Access entry rows ``(first cluster, table, key pids...)``."""
        self.a_width = np.zeros(64, dtype=np.int32)
        self.a_count = np.zeros(64, dtype=np.int64)
        self.a_top = 0
        self.a_free: list[int] = []
        self.access_of: dict[tuple[int, ...], int] = {}
        # multi-attribute hash tables
        self.t_attrs = np.full((8, MAX_SCHEMA), -1, dtype=np.int32)
        self.t_k = np.zeros(8, dtype=np.int32)
        self.t_size = np.zeros(8, dtype=np.int64)
        self.t_hits = np.zeros(8, dtype=np.float64)
        self.t_top = 0
        self.t_free: list[int] = []
        self.table_of: dict[tuple[int, ...], int] = {}
        self.slots = np.full(1024, EMPTY, dtype=np.int32)
        self.slots_used = 0

    # column views of the packed metadata (reads and writes go to ``cl`` / ``acc``)
    c_start = property(lambda self: self.cl[:, START])
    c_cap = property(lambda self: self.cl[:, CAP])
    c_len = property(lambda self: self.cl[:, LEN])
    c_size = property(lambda self: self.cl[:, SIZE])
    c_next = property(lambda self: self.cl[:, NEXT])
    a_first = property(lambda self: self.acc[:, FIRST])
    a_table = property(lambda self: self.acc[:, TABLE])
    a_key = property(lambda self: self.acc[:, KEY:])

    # -- predicate ids ----------------------------------------------------------------
    def reserve_pids(self, n: int) -> None:
        """Make the per-predicate-id arrays cover ids ``0 .. n-1``."""
        if n > len(self.pid_eq_attr):
            self.pid_eq_attr = grown(self.pid_eq_attr, n, -1)
            self.pid_access = grown(self.pid_access, n, -1)

    # -- entries ----------------------------------------------------------------------
    def new_entries(self, keys: Sequence[int], pids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Create entries (not yet placed) for conjunctions given as their predicate ids one after
        the other (``lengths`` each), with their subscriptions' ``keys``."""
        n = len(keys)
        ids = np.empty(n, dtype=np.int64)
        need = self.e_top + n
        for name, fill in (("e_key", -1), ("e_start", 0), ("e_len", 0), ("e_k", 0), ("e_group", -1),
                           ("e_cluster", -1), ("e_row", -1)):
            setattr(self, name, grown(getattr(self, name), need, fill))
        total = int(lengths.sum())
        self.epool = grown(self.epool, self.epool_top + total, 0)
        seg = np.repeat(np.arange(n), lengths)
        ends = np.cumsum(lengths)
        pos = np.arange(total) - (ends - lengths)[seg]
        attr = self.pid_eq_attr[pids].astype(np.int64)
        eq = np.flatnonzero(attr >= 0)
        eq = eq[np.lexsort((pos[eq], attr[eq], seg[eq]))]  # by entry, attribute, position
        first = eq[np.r_[True, (seg[eq][1:] != seg[eq][:-1]) | (attr[eq][1:] != attr[eq][:-1])]] if len(eq) else eq
        chosen = np.zeros(total, dtype=bool)
        chosen[first] = True  # an attribute's first equality in its entry: the entry's group
        order = np.lexsort((np.where(chosen, attr, pos), ~chosen, seg))
        ks = np.bincount(seg[first], minlength=n)
        group_attrs = attr[order][chosen[order]].tolist()
        groups = np.empty(n, dtype=np.int32)
        at = 0
        for i, k in enumerate(ks.tolist()):
            g_attrs = tuple(group_attrs[at:at + k])
            at += k
            g = self.group_of.get(g_attrs)
            if g is None:
                g = self.group_of[g_attrs] = len(self.groups)
                self.groups.append(g_attrs)
            groups[i] = g
        reuse = min(len(self.e_free), n)
        ids[:reuse] = self.e_free[len(self.e_free) - reuse:][::-1]
        del self.e_free[len(self.e_free) - reuse:]
        ids[reuse:] = np.arange(self.e_top, self.e_top + n - reuse)
        self.e_top += n - reuse
        top = self.epool_top
        self.epool[top:top + total] = pids[order]
        self.epool_top = top + total
        self.e_key[ids] = keys
        self.e_start[ids] = top + ends - lengths
        self.e_len[ids] = lengths
        self.e_k[ids] = ks
        self.e_group[ids] = groups
        self.n_entries += n
        return ids

    def free_entries(self, entries: np.ndarray) -> None:
        """Forget unplaced entries."""
        self.epool_garbage += int(self.e_len[entries].sum())
        self.e_key[entries] = -1
        self.e_len[entries] = 0
        self.e_group[entries] = -1
        self.e_free.extend(entries.tolist())
        self.n_entries -= len(entries)
        if self.epool_garbage > max(65536, self.epool_top // 2):
            live = np.nonzero(self.e_key[: self.e_top] >= 0)[0]
            dst = np.zeros(max(1024, 2 * (self.epool_top - self.epool_garbage)), dtype=np.int32)
            self.epool_top = int(kernels.compact_segments(self.epool, self.e_start, self.e_len, live, dst))
            self.epool = dst
            self.epool_garbage = 0

    def entry_pids(self, e: int) -> np.ndarray:
        """Predicate ids of an entry (equality predicates of its group first)."""
        s = self.e_start[e]
        return self.epool[s : s + self.e_len[e]]

    def pids_of(self, entries: np.ndarray) -> np.ndarray:
        """Predicate ids of ``entries``, one entry's after the other's (int64)."""
        lens = self.e_len[entries].astype(np.int64)
        ends = np.cumsum(lens)
        at = np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64)
        at += np.repeat(self.e_start[entries].astype(np.int64) - (ends - lens), lens)
        return self.epool[at].astype(np.int64)

    def live_entries(self) -> np.ndarray:
        return np.nonzero(self.e_key[: self.e_top] >= 0)[0]

    # -- tables -----------------------------------------------------------------------
    def create_table(self, schema: tuple[int, ...]) -> int:
        """A new (empty) multi-attribute hash table over ``schema`` (sorted attribute ids)."""
        if not 2 <= len(schema) <= MAX_SCHEMA:
            raise ValueError(f"a hash table schema has 2 to {MAX_SCHEMA} attributes, not {schema}")
        if schema in self.table_of:
            return self.table_of[schema]
        t, self.t_top = new_row(self.t_free, self.t_top)
        self.t_attrs = grown(self.t_attrs, self.t_top, -1)
        self.t_k = grown(self.t_k, self.t_top, 0)
        self.t_size = grown(self.t_size, self.t_top, 0)
        self.t_hits = grown(self.t_hits, self.t_top, 0.0)
        self.t_attrs[t] = -1
        self.t_attrs[t, : len(schema)] = schema
        self.t_k[t] = len(schema)
        self.t_size[t] = 0
        self.t_hits[t] = 0.0
        self.table_of[schema] = t
        self._tables_changed()
        return t

    def drop_table(self, t: int) -> np.ndarray:
        """Remove table ``t``; returns its entries, unplaced (the caller places them again)."""
        entries = self.table_entries(t)
        self.unplace(entries)
        schema = tuple(int(a) for a in self.t_attrs[t, : self.t_k[t]])
        del self.table_of[schema]
        self.t_attrs[t] = -1
        self.t_k[t] = 0
        self.t_free.append(t)
        self._tables_changed()
        return entries

    def _tables_changed(self) -> None:
        self._table_pos = {t: v for t, v in self._table_pos.items() if t in self.table_of.values()}

    def live_tables(self) -> np.ndarray:
        return np.asarray(sorted(self.table_of.values()), dtype=np.int32)

    def schemas(self) -> list[tuple[int, ...]]:
        return sorted(self.table_of)

    def table_entries(self, t: int) -> np.ndarray:
        """Entries placed under table ``t``."""
        accesses = [a for key, a in self.access_of.items() if key[0] == t]
        return self._entries_of_accesses(accesses)

    def _entries_of_accesses(self, accesses: Sequence[int]) -> np.ndarray:
        parts = []
        for a in accesses:
            c = int(self.a_first[a])
            while c >= 0:
                parts.append(self.cluster_entries(c))
                c = int(self.c_next[c])
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def cluster_entries(self, c: int) -> np.ndarray:
        """Entry ids of the rows of cluster ``c``."""
        line = self.c_start[c] + self.c_size[c] * self.c_cap[c]
        return self.pool[line : line + self.c_len[c]].astype(np.int64)

    def access_log_nu(self, accesses: np.ndarray, log_nu: np.ndarray) -> np.ndarray:
        """``log(nu)`` of access entries (sum over their predicates)."""
        keys = self.a_key[accesses]
        return np.where(keys >= 0, log_nu[np.maximum(keys, 0)], 0.0).sum(axis=1)

    def live_clusters(self) -> np.ndarray:
        return np.sort(np.fromiter(self.cluster_of.values(), dtype=np.int64, count=len(self.cluster_of)))

    # -- placement --------------------------------------------------------------------
    def _positions(self, t: int) -> np.ndarray:
        """Position of each schema attribute of table ``t`` among the equality attributes of
        every group (``int8[n_groups, k]``, -1 where the group lacks it)."""
        cached = self._table_pos.get(t)
        n_groups = len(self.groups)
        if cached is not None and len(cached) == n_groups:
            return cached
        done = 0 if cached is None else len(cached)
        schema = self.t_attrs[t, : self.t_k[t]].tolist()
        rows = np.full((n_groups - done, len(schema)), -1, dtype=np.int8)
        for g in range(done, n_groups):
            where = {a: j for j, a in enumerate(self.groups[g]) if j < 63}
            for j, a in enumerate(schema):
                rows[g - done, j] = where.get(a, -1)
        out = rows if cached is None else np.concatenate([cached, rows])
        self._table_pos[t] = out
        return out

    def choose(self, entries: np.ndarray, log_nu: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Best access option of each entry: ``(table, option, log nu)``.

        The option minimises ``nu`` of the access predicate (independent attributes:
        the product of the predicates' ``nu``); ties go to the wider schema.  ``option``
        is, for a table, the bitmask of the equality positions forming its key, and for
        a single access predicate (``SINGLE``) the position of that equality predicate
        (an entry without any gets its most selective predicate, chosen by :meth:`place`).
        """
        n = len(entries)
        tables = np.full(n, SINGLE, dtype=np.int32)
        options = np.zeros(n, dtype=np.int64)
        scores = np.zeros(n)
        if n == 0:
            return tables, options, scores
        groups = self.e_group[entries]
        ks = self.e_k[entries].astype(np.int64)
        starts = self.e_start[entries]
        for has_eq in (True, False):
            sel = np.flatnonzero(ks > 0) if has_eq else np.flatnonzero(ks == 0)
            if len(sel) == 0:
                continue
            widths = ks[sel] if has_eq else self.e_len[entries[sel]].astype(np.int64)
            seg = np.repeat(np.arange(len(sel)), widths)
            seg_start = np.cumsum(widths) - widths
            off = np.arange(int(widths.sum())) - seg_start[seg]
            vals = log_nu[self.epool[starts[sel][seg] + off]]
            mins = np.minimum.reduceat(vals, seg_start)
            scores[sel] = mins
            if has_eq:
                hit = np.flatnonzero(vals == mins[seg])
                _, first = np.unique(seg[hit], return_index=True)
                options[sel] = off[hit[first]]
        ranked = scores - 1e-9
        for t in self.live_tables().tolist():
            pos = self._positions(t)[groups]
            ok = np.flatnonzero((pos >= 0).all(axis=1))
            if len(ok) == 0:
                continue
            p = pos[ok].astype(np.int64)
            actual = log_nu[self.epool[starts[ok][:, None] + p]].sum(axis=1)
            tie = actual - 1e-9 * p.shape[1]
            better = tie < ranked[ok]
            upd = ok[better]
            ranked[upd] = tie[better]
            scores[upd] = actual[better]
            tables[upd] = t
            options[upd] = (np.int64(1) << p[better]).sum(axis=1)
        return tables, options, scores

    def place(self, entries: np.ndarray, log_nu: np.ndarray,
              tables: np.ndarray | None = None, masks: np.ndarray | None = None) -> None:
        """Put unplaced entries into clusters (best access option unless given)."""
        if len(entries) == 0:
            return
        if tables is None or masks is None:
            tables, masks, _ = self.choose(entries, log_nu)
        n = len(entries)
        lens = self.e_len[entries].astype(np.int64)
        ks = self.e_k[entries].astype(np.int64)
        seg = np.repeat(np.arange(n), lens)
        pos = np.arange(int(lens.sum())) - (np.cumsum(lens) - lens)[seg]
        pids = self.epool[self.e_start[entries][seg] + pos]
        nu = log_nu[pids]
        single = tables == SINGLE
        where = masks.astype(np.int64)  # a single access predicate's position
        bare = np.flatnonzero(single & (ks == 0))  # no equality: the first of the most selective
        if len(bare):
            inside = np.isin(seg, bare)
            among = np.flatnonzero(inside)
            low = among[np.lexsort((pos[among], nu[among], seg[among]))]
            low = low[np.r_[True, seg[low][1:] != seg[low][:-1]]]
            where[seg[low]] = pos[low]
        shifted = np.right_shift(masks[seg].astype(np.int64), np.minimum(pos, 63)) & 1
        in_key = np.where(single[seg], pos == where[seg], (pos < ks[seg]) & (shifted == 1))
        rest = np.flatnonzero(~in_key)
        rest = rest[np.lexsort((pos[rest], nu[rest], seg[rest]))]  # by entry, ascending nu
        n_rest = np.bincount(seg[rest], minlength=n)
        accesses = np.empty(n, dtype=np.int64)
        keyed = np.flatnonzero(in_key)
        one = keyed[single[seg[keyed]]]  # single access predicates: found by predicate id
        access = self.pid_access[pids[one]].astype(np.int64)
        self._new_accesses([(SINGLE, pid) for pid in np.unique(pids[one][access < 0]).tolist()])
        accesses[seg[one]] = self.pid_access[pids[one]]
        hashed = np.flatnonzero(~single)
        if len(hashed):
            key_pids = pids[keyed[~single[seg[keyed]]]].tolist()
            widths = _popcount(masks[hashed].astype(np.int64)).tolist()
            keys: list[tuple[int, ...]] = []
            done = 0
            for t, w in zip(tables[hashed].tolist(), widths, strict=True):
                keys.append((t, *key_pids[done:done + w]))
                done += w
            new = self._new_accesses([k for k in dict.fromkeys(keys) if k not in self.access_of])
            accesses[hashed] = np.fromiter(map(self.access_of.__getitem__, keys), dtype=np.int64, count=len(keys))
            if len(new):
                self._hash_add(new.astype(np.int32))
        pairs, inverse = np.unique(accesses * (1 << 20) + n_rest, return_inverse=True)
        known = np.fromiter((self.cluster_of.get(divmod(pair, 1 << 20), -1) for pair in pairs.tolist()),
                            dtype=np.int64, count=len(pairs))
        missing = np.flatnonzero(known < 0)
        known[missing] = self._new_clusters(pairs[missing] >> 20, pairs[missing] & ((1 << 20) - 1))
        row_cluster = known[inverse.ravel()].astype(np.int32)
        row_off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(n_rest, out=row_off[1:])
        self._reserve(row_cluster)
        kernels.append_rows(self.pool, self.cl, row_cluster, row_off, pids[rest].astype(np.int32),
                            entries.astype(np.int32), self.e_cluster, self.e_row)
        self._count(entries, row_cluster, 1)

    def unplace(self, entries: np.ndarray) -> None:
        """Take entries out of their clusters (swap-remove); empty clusters and access
        entries are dropped. Entries already out of any cluster are left as they are (a
        static re-clustering unplaces every entry after dropping the tables, which unplaced
        theirs: their cluster ``-1`` would have named the last cluster's row)."""
        entries = entries[self.e_cluster[entries] >= 0]
        if len(entries) == 0:
            return
        clusters = self.e_cluster[entries]
        self._count(entries, clusters, -1)
        kernels.remove_rows(self.pool, self.cl, self.e_cluster, self.e_row, entries.astype(np.int64))
        clusters = np.unique(clusters)
        for c in clusters[self.c_len[clusters] == 0].tolist():
            self._drop_cluster(c)

    def _count(self, entries: np.ndarray, clusters: np.ndarray, sign: int) -> None:
        acc = self.c_access[clusters]
        movable = (self.e_k[entries] > self.a_width[acc]).astype(np.int32)
        np.add.at(self.c_movable, clusters, sign * movable)
        np.add.at(self.a_count, acc, sign)
        tabs = self.a_table[acc]
        hashed = tabs >= 0
        if hashed.any():
            np.add.at(self.t_size, tabs[hashed], sign)

    # -- access entries and clusters ----------------------------------------------------
    def _new_accesses(self, keys: list[tuple[int, ...]]) -> np.ndarray:
        """Access entries (ids) for new distinct keys ``(table, pid, ...)``, without clusters yet."""
        n = len(keys)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        rows, self.a_top = _rows(self.a_free, self.a_top, n)
        self.acc = grown(self.acc, self.a_top, -1)
        self.a_width = grown(self.a_width, self.a_top, 0)
        self.a_count = grown(self.a_count, self.a_top, 0)
        widths = np.fromiter(map(len, keys), dtype=np.int64, count=n) - 1
        tables = np.fromiter((k[0] for k in keys), dtype=np.int64, count=n)
        self.acc[rows] = -1  # no first cluster, no key predicates yet
        self.acc[rows, TABLE] = tables
        at = np.repeat(rows, widths)
        self.acc[at, KEY + np.arange(len(at)) - np.repeat(np.cumsum(widths) - widths, widths)] = \
            [p for k in keys for p in k[1:]]
        self.a_width[rows] = widths
        self.a_count[rows] = 0
        self.access_of.update(zip(keys, rows.tolist(), strict=True))
        single = rows[tables == SINGLE]
        self.pid_access[self.acc[single, KEY]] = single
        return rows

    def _drop_access(self, a: int) -> None:
        t = int(self.a_table[a])
        width = int(self.a_width[a])
        key = (t, *(int(p) for p in self.a_key[a, :width]))
        del self.access_of[key]
        if t == SINGLE:
            self.pid_access[key[1]] = -1
        else:
            kernels.hash_delete(self.slots, self.acc, self.t_k, np.asarray([a], dtype=np.int32))
        self.a_key[a] = -1
        self.a_free.append(a)

    def _new_clusters(self, accesses: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Empty clusters (ids) for new distinct ``(access entry, size)`` pairs, each put first in
        its access entry's list (in the order given).  One at a time: new clusters are few (one
        per access entry and size).  A vectorised version was replaced after a wrong match
        (``test_bulk_add_matches_one_by_one_and_the_oracle[static]``, seed 83) that was most
        likely :meth:`unplace`'s, fixed since (entries unplaced twice)."""
        made = np.empty(len(accesses), dtype=np.int64)
        for i, (a, n) in enumerate(zip(accesses.tolist(), sizes.tolist(), strict=True)):
            c, self.c_top = new_row(self.c_free, self.c_top)
            self.cl = grown(self.cl, self.c_top, 0)
            self.c_access = grown(self.c_access, self.c_top, -1)
            self.c_movable = grown(self.c_movable, self.c_top, 0)
            self.cl[c] = 0  # start, capacity, length
            self.c_size[c] = n
            self.c_access[c] = a
            self.c_movable[c] = 0
            self.c_next[c] = self.a_first[a]
            self.a_first[a] = c
            self.cluster_of[(a, n)] = c
            made[i] = c
        return made

    def _drop_cluster(self, c: int) -> None:
        a = int(self.c_access[c])
        prev, cur = -1, int(self.a_first[a])
        while cur != c:
            prev, cur = cur, int(self.c_next[cur])
        if prev < 0:
            self.a_first[a] = self.c_next[c]
        else:
            self.c_next[prev] = self.c_next[c]
        del self.cluster_of[(a, int(self.c_size[c]))]
        self.garbage += int((self.c_size[c] + 1) * self.c_cap[c])
        self.c_cap[c] = 0
        self.c_access[c] = -1
        self.c_free.append(c)
        if self.a_first[a] < 0:
            self._drop_access(a)

    def _reserve(self, row_cluster: np.ndarray) -> None:
        """Make room for the new rows: full clusters move to slabs of twice the capacity."""
        clusters, counts = np.unique(row_cluster, return_counts=True)
        need = self.c_len[clusters].astype(np.int64) + counts
        full = need > self.c_cap[clusters]
        if not full.any():
            return
        clusters, need = clusters[full], need[full]
        new_caps = np.maximum(np.maximum(need, 2 * self.c_cap[clusters].astype(np.int64)), 2)
        new_caps = new_caps.astype(np.int64)
        extra = int(((self.c_size[clusters] + 1).astype(np.int64) * new_caps).sum())
        old = int(((self.c_size[clusters] + 1).astype(np.int64) * self.c_cap[clusters]).sum())
        if self.garbage + old > max(1 << 20, self.top // 2):
            self._compact(extra)
            old = int(((self.c_size[clusters] + 1).astype(np.int64) * self.c_cap[clusters]).sum())
        self.pool = grown(self.pool, self.top + extra, 0)
        self.top = int(kernels.relocate(self.pool, self.cl, clusters.astype(np.int64), new_caps, self.top))
        self.garbage += old

    def _compact(self, extra: int) -> None:
        clusters = self.live_clusters()
        live = int(((self.c_size[clusters] + 1).astype(np.int64) * self.c_cap[clusters]).sum())
        new_pool = np.zeros(max(4096, int(1.5 * (live + extra))), dtype=np.int32)
        self.top = int(kernels.compact(self.pool, new_pool, self.cl, clusters))
        self.pool = new_pool
        self.garbage = 0

    def _hash_add(self, accesses: np.ndarray) -> None:
        if 2 * (self.slots_used + len(accesses)) > len(self.slots):
            live = np.asarray([a for key, a in self.access_of.items() if key[0] != SINGLE], dtype=np.int32)
            size = len(self.slots)
            while 2 * len(live) + 2 > size // 2:
                size *= 2
            self.slots = np.full(size, EMPTY, dtype=np.int32)
            kernels.hash_insert(self.slots, self.acc, self.t_k, live)
            self.slots_used = len(live)
            return
        reused = kernels.hash_insert(self.slots, self.acc, self.t_k, accesses)
        self.slots_used += len(accesses) - int(reused)

    # -- matching ---------------------------------------------------------------------
    def match(self, ev_off: np.ndarray, ev_pids: np.ndarray, n_attrs: int, bits: np.ndarray,
              pid_hits: np.ndarray, attr_hits: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Phase 2 over a batch (see :func:`kernels.match_batch`)."""
        store = Phase2(self.pid_eq_attr, self.pid_access, self.acc, self.cl, self.pool, self.e_key,
                       self.live_tables(), self.t_attrs, self.t_k, self.slots)
        return kernels.match_batch(ev_off, ev_pids, n_attrs, bits, store, pid_hits, attr_hits, self.t_hits)

    def memory_bytes(self) -> int:
        """Bytes of every array of the store plus a rough size of its Python maps."""
        arrays = sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray))
        maps = 100 * (len(self.access_of) + len(self.cluster_of) + len(self.group_of))
        return int(arrays + maps)


def _rows(free: list[int], top: int, n: int) -> tuple[np.ndarray, int]:
    """Rows of ``n`` new records, as :func:`~matchers.arrays.new_row` one after the other gives
    them (the last freed first, then from ``top``); and the top after them."""
    reuse = min(len(free), n)
    rows = np.empty(n, dtype=np.int64)
    rows[:reuse] = free[len(free) - reuse:][::-1]
    del free[len(free) - reuse:]
    rows[reuse:] = np.arange(top, top + n - reuse)
    return rows, top + n - reuse


def _popcount(masks: np.ndarray) -> np.ndarray:
    """Bits set in each of ``masks`` (non-negative int64)."""
    count = np.zeros(len(masks), dtype=np.int64)
    left = masks.copy()
    while left.any():
        count += left & 1
        left >>= 1
    return count


def subsets(attrs: tuple[int, ...], max_size: int) -> list[tuple[int, ...]]:
    """Schemas of 2 to ``max_size`` attributes contained in ``attrs`` (potential tables)."""
    return [s for k in range(2, min(max_size, len(attrs)) + 1) for s in combinations(attrs, k)]
