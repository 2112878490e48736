"""Vectorised brute-force matcher: every predicate evaluated on every event.

The speed baseline next to every index in the benchmarks, and a second oracle next to
:mod:`matchers.oracle`.  Matching a batch works on chunks of events:

1. the chunk's entries are scattered into dense ``(attributes x events)`` matrices, one
   per kind (numbers, booleans, string codes), NaN where an event lacks the attribute or
   has a value of another kind (only the attributes predicates use);
2. predicates are evaluated with numpy, one broadcast per (operator, kind) group over
   all attributes at once (a group gathers its attributes' rows), into an
   ``(events x predicates)`` truth matrix;
   string predicates other than ``=``/``!=``/``IN``/``NOT IN`` (prefix, suffix,
   contains, LIKE, MATCHES, string ordering) run :func:`matchers.oracle.holds` once per
   distinct string of their attribute in the batch, cached per (predicate, string), and
   are looked up per event; ``EXISTS``, ``NOT EXISTS``, ``IS NULL`` and ``IS NOT NULL``
   read a matrix of the kind of each attribute's value (-1 where absent);
3. a numba kernel ANDs each conjunction's columns and ORs the conjunctions of a
   subscription (numpy could only do it by materialising every conjunction's columns
   for every event).

Equal predicates share one column (reference-counted).  Index arrays are packed lazily
at the first match after a change.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

import numpy as np

from matchers.base import Matcher, Matches, register
from matchers.events import Dictionary, EventBatch
from matchers.expr import PRESENCE_OPS, Kind, Op, Pred, Subscription
from matchers.oracle import holds

from .kernels import match_conjunctions

CELL_BUDGET = 1 << 22
"""Upper bound on cells (events x predicate columns) of the truth matrix of one chunk."""

STRING_CACHE_LIMIT = 1_000_000
"""Cached (predicate, string) results kept before the cache is cleared."""

_DENSE_OPS = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.BETWEEN, Op.NOT_BETWEEN, Op.IN, Op.NOT_IN})
_CODE_OPS = frozenset({Op.EQ, Op.NE, Op.IN, Op.NOT_IN})


def _vectorised(p: Pred) -> bool:
    """Whether the predicate is evaluated in a numpy group (else on the presence or the
    string side path)."""
    if p.op in PRESENCE_OPS:
        return False
    if p.kind is Kind.STR:
        return p.op in _CODE_OPS
    return p.op in _DENSE_OPS


class _Group(NamedTuple):
    """Predicates of one (operator, kind), occupying columns ``start:start+len(attr)``."""

    op: Op
    kind: int
    start: int
    attr: np.ndarray  # int64[k], dense attribute column of each predicate
    x: np.ndarray  # float64[k] operand (number, 0/1, or string code), or low bound
    y: np.ndarray  # float64[k] high bound (BETWEEN), else empty
    set_owner: np.ndarray  # int64[nnz] IN / NOT IN: predicate (within the group) of each value
    set_values: np.ndarray  # float64[nnz] IN / NOT IN: the values
    set_starts: np.ndarray  # int64[k] IN / NOT IN: first value of each predicate


class _Packed(NamedTuple):
    n_cols: int
    attr_index: np.ndarray  # int64[n_attrs]: dense column of a dictionary attribute id, or -1
    n_dense: int
    groups: list[_Group]
    side: list[tuple[int, Pred, int]]  # (column, predicate, dense attribute column)
    presence: list[tuple[int, Op, int]]  # (column, operator, dense attribute column)
    conj_offsets: np.ndarray
    conj_cols: np.ndarray
    conj_keys: np.ndarray


@register("brute", baseline=True)
class BruteForceMatcher(Matcher):
    """Evaluate every predicate on every event, then every conjunction (see module docstring).

    It evaluates every operator, null values and presence included: it is the residual matcher
    of an index that leaves an operator out (:mod:`matchers.base`).

    Parameters
    ----------
    dictionary : attribute and string dictionaries to share (a new one if ``None``).
    cell_budget : cells of the per-chunk truth matrix (bounds memory, not results).
    """

    indexed_ops = frozenset(Op) - {Op.ANYTHING_BUT}  # through views (matchers.views), as every index
    sees_nulls = True

    def __init__(self, dictionary: Dictionary | None = None, cell_budget: int = CELL_BUDGET, **params):
        super().__init__(dictionary, **params)
        if cell_budget < 1:
            raise ValueError(f"cell_budget must be positive, got {cell_budget}")
        self.cell_budget = int(cell_budget)
        self._pid_of: dict[Pred, int] = {}
        self._preds: list[Pred | None] = []
        self._refs: list[int] = []
        self._free_pids: list[int] = []
        self._conjs_of: dict[int, list[tuple[int, ...]]] = {}
        self._packed: _Packed | None = None
        self._string_cache: dict[Pred, dict[str, bool]] = defaultdict(dict)
        self._cached = 0

    # -- maintenance ------------------------------------------------------------------
    def _acquire(self, p: Pred) -> int:
        pid = self._pid_of.get(p)
        if pid is None:
            if self._free_pids:
                pid = self._free_pids.pop()
                self._preds[pid] = p
                self._refs[pid] = 0
            else:
                pid = len(self._preds)
                self._preds.append(p)
                self._refs.append(0)
            self._pid_of[p] = pid
        self._refs[pid] += 1
        return pid

    def _release(self, pid: int) -> None:
        self._refs[pid] -= 1
        if self._refs[pid] == 0:
            p = self._preds[pid]
            del self._pid_of[p]  # type: ignore[arg-type]  # a referenced pid holds its predicate
            self._string_cache.pop(p, None)  # type: ignore[arg-type]  # as above
            self._preds[pid] = None
            self._free_pids.append(pid)

    def _insert(self, entries: list[tuple[int, Subscription]]) -> None:
        acquire = self._acquire
        for key, sub in entries:
            self._conjs_of[key] = [tuple(acquire(p) for p in conj) for conj in sub.conjunctions]
        self._packed = None

    def _delete(self, entries: list[tuple[int, Subscription]]) -> None:
        for key, _ in entries:
            for conj in self._conjs_of.pop(key):
                for pid in conj:
                    self._release(pid)
        self._packed = None

    # -- packing ------------------------------------------------------------------------
    def _pack(self) -> _Packed:
        dictionary = self.dictionary
        attr_index = np.full(max(dictionary.n_attrs, 1), -1, dtype=np.int64)
        by_group: dict[tuple[Op, int], list[int]] = defaultdict(list)
        side_pids: list[int] = []
        presence_pids: list[int] = []
        live: dict[int, Pred] = {pid: p for pid, p in enumerate(self._preds) if p is not None}
        for pid, p in live.items():
            aid = dictionary.attr(p.attr)
            if attr_index[aid] < 0:
                attr_index[aid] = 0
            if _vectorised(p):
                by_group[(p.op, int(p.kind))].append(pid)
            elif p.op in PRESENCE_OPS:
                presence_pids.append(pid)
            else:
                side_pids.append(pid)
        used = np.flatnonzero(attr_index >= 0)
        attr_index[used] = np.arange(len(used))
        col_of = np.full(len(self._preds), -1, dtype=np.int64)
        groups: list[_Group] = []
        start = 0
        for (op, kind), pids in sorted(by_group.items()):
            preds = [live[pid] for pid in pids]
            attr = np.array([attr_index[dictionary.attr(p.attr)] for p in preds], dtype=np.int64)
            x = np.zeros(0)
            y = np.zeros(0)
            owner = values = starts = np.zeros(0, dtype=np.int64)
            if op in (Op.IN, Op.NOT_IN):
                lists = [[self._operand_value(p, v) for v in p.operand] for p in preds]
                lengths = np.array([len(v) for v in lists], dtype=np.int64)
                owner = np.repeat(np.arange(len(preds), dtype=np.int64), lengths)
                values = np.array([v for vs in lists for v in vs], dtype=np.float64)
                starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
            elif op in (Op.BETWEEN, Op.NOT_BETWEEN):
                x = np.array([p.operand[0] for p in preds], dtype=np.float64)
                y = np.array([p.operand[1] for p in preds], dtype=np.float64)
            else:
                x = np.array([self._operand_value(p, p.operand) for p in preds], dtype=np.float64)
            groups.append(_Group(op, kind, start, attr, x, y, owner, values, starts))
            col_of[pids] = np.arange(start, start + len(pids))
            start += len(pids)
        side = []
        for pid in side_pids:
            p = live[pid]
            col_of[pid] = start
            side.append((start, p, int(attr_index[dictionary.attr(p.attr)])))
            start += 1
        presence = []
        for pid in presence_pids:
            p = live[pid]
            col_of[pid] = start
            presence.append((start, p.op, int(attr_index[dictionary.attr(p.attr)])))
            start += 1
        keys = sorted(self._conjs_of)
        conjs = [(key, conj) for key in keys for conj in self._conjs_of[key]]
        lengths = np.fromiter((len(c) for _, c in conjs), dtype=np.int64, count=len(conjs))
        conj_offsets = np.zeros(len(conjs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=conj_offsets[1:])
        flat = np.fromiter((pid for _, c in conjs for pid in c), dtype=np.int64, count=int(conj_offsets[-1]))
        conj_cols = col_of[flat].astype(np.int32)
        conj_keys = np.fromiter((k for k, _ in conjs), dtype=np.int32, count=len(conjs))
        return _Packed(start, attr_index, len(used), groups, side, presence, conj_offsets, conj_cols, conj_keys)

    def _operand_value(self, p: Pred, value) -> float:
        """Numeric form of an operand: the number, 1/0 for a boolean, the string's code."""
        if p.kind is Kind.STR:
            return float(self.dictionary.code(self.dictionary.attr(p.attr), value))
        return float(value)

    # -- matching -----------------------------------------------------------------------
    def _match(self, batch: EventBatch) -> Matches:
        if self._packed is None:
            self._packed = self._pack()
        packed = self._packed
        n = batch.n
        counts = np.diff(batch.offsets)
        entry_event = np.repeat(np.arange(n, dtype=np.int64), counts)
        attrs = batch.attrs.astype(np.int64)
        inside = attrs < len(packed.attr_index)
        entry_col = np.full(len(attrs), -1, dtype=np.int64)
        entry_col[inside] = packed.attr_index[attrs[inside]]
        keep = entry_col >= 0
        side = self._side_tables(packed, batch, entry_col)
        chunk = max(1, min(n, self.cell_budget // max(1, packed.n_cols, packed.n_dense)))
        offsets = [np.zeros(1, dtype=np.int64)]
        keys = []
        done = 0
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            a, b = batch.offsets[lo], batch.offsets[hi]
            sel = np.flatnonzero(keep[a:b]) + a
            sat = self._truth(packed, batch, hi - lo, entry_event[sel] - lo, entry_col[sel], sel, side)
            off, found = match_conjunctions(sat, packed.conj_offsets, packed.conj_cols, packed.conj_keys)
            offsets.append(off[1:] + done)
            keys.append(found)
            done += len(found)
        return Matches(np.concatenate(offsets), np.concatenate(keys) if keys else np.zeros(0, dtype=np.int32))

    def _truth(self, packed: _Packed, batch: EventBatch, n: int, rows: np.ndarray, cols: np.ndarray,
               sel: np.ndarray, side: tuple[dict[int, np.ndarray], list[np.ndarray]]) -> np.ndarray:
        """The ``(n, n_cols)`` truth matrix of a chunk whose kept entries are ``sel``."""
        shape = (n, max(1, packed.n_dense))
        if packed.side:
            text = np.full(shape, -1, dtype=np.int64)
            text[rows, cols] = batch.texts[sel]
        # one matrix per kind: the value where the entry has that kind, NaN elsewhere (absent or
        # another type), so that a comparison with NaN makes a positive predicate false
        kinds = batch.kinds[sel]
        dense: dict[int, np.ndarray] = {}  # (attributes x events): a group gathers whole rows
        needed = {g.kind for g in packed.groups}
        for kind, source in ((int(Kind.NUM), batch.nums), (int(Kind.BOOL), batch.nums), (int(Kind.STR), batch.codes)):
            if kind not in needed:
                continue
            mine = kinds == kind
            values = np.full(shape[::-1], np.nan)
            values[cols[mine], rows[mine]] = source[sel[mine]]
            dense[kind] = values
        sat = np.empty((n, max(1, packed.n_cols)), dtype=np.bool_)
        for g in packed.groups:
            values = dense[g.kind][g.attr]  # (predicates x events)
            op = g.op
            x = g.x[:, None]
            if op is Op.EQ:
                ok = values == x
            elif op is Op.NE:
                ok = (values != x) & ~np.isnan(values)
            elif op is Op.LT:
                ok = values < x
            elif op is Op.LE:
                ok = values <= x
            elif op is Op.GT:
                ok = values > x
            elif op is Op.GE:
                ok = values >= x
            elif op is Op.BETWEEN:
                ok = (values >= x) & (values <= g.y[:, None])
            elif op is Op.NOT_BETWEEN:
                ok = (values < x) | (values > g.y[:, None])
            else:
                hit = np.logical_or.reduceat(values[g.set_owner] == g.set_values[:, None], g.set_starts, axis=0)
                ok = hit if op is Op.IN else ~hit & ~np.isnan(values)
            sat[:, g.start:g.start + len(g.attr)] = ok.T
        if packed.presence:
            kind_at = np.full(shape, -1, dtype=np.int8)  # the kind of each value, -1 where absent
            kind_at[rows, cols] = kinds
            for col, op, attr in packed.presence:
                k = kind_at[:, attr]
                if op is Op.EXISTS:
                    sat[:, col] = k >= 0
                elif op is Op.NOT_EXISTS:
                    sat[:, col] = k < 0
                elif op is Op.IS_NULL:
                    sat[:, col] = k == int(Kind.NULL)
                else:
                    sat[:, col] = (k >= 0) & (k != int(Kind.NULL))
        if not packed.side:
            return sat
        positions, truths = side
        slots = {attr: pos[text[:, attr]] for attr, pos in positions.items()}  # -1 (absent) -> last slot
        for (col, _, attr), truth in zip(packed.side, truths, strict=True):
            sat[:, col] = truth[slots[attr]]
        return sat

    def _side_tables(self, packed: _Packed, batch: EventBatch,
                     entry_col: np.ndarray) -> tuple[dict[int, np.ndarray], list[np.ndarray]]:
        """Truth of each side-path predicate on the batch's distinct strings of its attribute.

        Returns ``positions`` (per dense attribute column: batch string index -> slot, with
        index ``-1`` mapping to the last slot) and, per side predicate, a bool array over
        the slots whose last entry (absent, or not a string) is false.
        """
        if not packed.side:
            return {}, []
        is_str = batch.kinds == int(Kind.STR)
        positions: dict[int, np.ndarray] = {}
        distinct: dict[int, list[str]] = {}
        for attr in {a for _, _, a in packed.side}:
            ids = np.unique(batch.texts[is_str & (entry_col == attr)])
            pos = np.full(len(batch.strings) + 1, len(ids), dtype=np.int64)
            pos[ids] = np.arange(len(ids))
            positions[attr] = pos
            distinct[attr] = [batch.strings[i] for i in ids.tolist()]
        if self._cached > STRING_CACHE_LIMIT:
            self._string_cache.clear()
            self._cached = 0
        truths = []
        for _, p, attr in packed.side:
            values = distinct[attr]
            cache = self._string_cache[p]
            truth = np.zeros(len(values) + 1, dtype=np.bool_)
            for i, value in enumerate(values):
                hit = cache.get(value)
                if hit is None:
                    hit = cache[value] = holds(p, {p.attr: value})
                    self._cached += 1
                truth[i] = hit
            truths.append(truth)
        return positions, truths

    def memory_bytes(self) -> int:
        """Packed arrays plus an estimate of the predicate and conjunction maps (~100 B a predicate)."""
        packed = self._packed if self._packed is not None else self._pack()
        self._packed = packed
        arrays = [packed.attr_index, packed.conj_offsets, packed.conj_cols, packed.conj_keys]
        for g in packed.groups:
            arrays += [g.attr, g.x, g.y, g.set_owner, g.set_values, g.set_starts]
        total = sum(a.nbytes for a in arrays)
        total += 100 * len(self._pid_of) + 16 * len(self._refs)
        total += sum(64 + 8 * len(c) for conjs in self._conjs_of.values() for c in conjs)
        return total
