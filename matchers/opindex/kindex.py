"""The k-index (Whang et al., VLDB 2009): the baseline of the OpIndex experiments.

Conjunctions are partitioned by size and their predicates by (attribute, value):
every predicate is rewritten into ``∈``/``∉`` memberships over a discrete domain, so
a range predicate becomes one posting per domain cell it covers (the blow-up the
OpIndex paper measures, Section 3 and Fig. 8).  The domain of a numeric attribute is
made discrete by its operands: the distinct operands ``x0 < ... < xn-1`` cut the line
into ``2n + 1`` cells (each operand, and the open gaps around them), and an event
value falls into exactly one cell.  Strings are cells by dictionary code, booleans by
value; string operators other than equality are one token per string predicate,
evaluated by :class:`matchers.strings.StringEvaluator`.  ``!=`` and ``NOT IN`` are a
presence posting (``∈``, the attribute must be there: SQL's NULL rule) and ``∉``
postings that reject the conjunction.

A conjunction of K predicates matches when K of its ``∈`` postings are hit and none
of its ``∉`` ones (Whang's algorithm walks the size partitions with sorted posting
cursors; here each posting list is sorted by size partition and a partition larger
than the event is skipped, and hits are counted).  Like the original, the index is
static: an add or remove marks it stale and the next match rebuilds it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from matchers.base import Matcher, Matches, register
from matchers.events import Dictionary, EventBatch
from matchers.expr import Kind, Op, Pred, Subscription
from matchers.opindex import kindex_kernels as K
from matchers.opindex.layout import KEntries, Postings, event_values
from matchers.strings import StringEvaluator

_EMPTY = np.zeros(0, dtype=np.int64)


@register("kindex", baseline=True)
class KIndex(Matcher):
    """The k-index baseline (DNF conjunctions; rebuilt lazily after changes)."""

    def __init__(self, dictionary: Dictionary | None = None, **params: Any) -> None:
        super().__init__(dictionary, **params)
        self._stale = True
        self._built: dict[str, Any] = {}
        self.strings = StringEvaluator()
        self._spids: dict[Pred, int] = {}
        self._epoch = 0
        self.postings = 0
        """Postings in the built index (the size measure of the paper's Fig. 8)."""

    def _insert(self, entries: list[tuple[int, Subscription]]) -> None:
        self._stale = True

    def _delete(self, entries: list[tuple[int, Subscription]]) -> None:
        self._stale = True

    # -- build ------------------------------------------------------------------
    def build(self) -> None:
        """Rebuild the index from the live subscriptions."""
        attr = self.dictionary.attr
        conjs: list[tuple[int, tuple[Pred, ...]]] = [
            (key, conj) for key, sub in self.indexed() for conj in sub.conjunctions]
        nta = 3 * self.dictionary.n_attrs
        points: dict[int, set[float]] = {}
        self.strings = StringEvaluator()
        self._spids = {}
        for _, conj in conjs:
            for p in conj:
                aid = attr(p.attr)
                if p.kind is Kind.NUM:
                    vals = p.operand if isinstance(p.operand, tuple) else (p.operand,)
                    points.setdefault(aid * 3, set()).update(vals)
                elif p.kind is Kind.STR and StringEvaluator.owns(p) and p not in self._spids:
                    spid = self._spids[p] = len(self._spids)
                    self.strings.add(spid, p, aid)
        tok_cells = np.full(nta, -1, dtype=np.int64)
        n_cells = np.zeros(nta, dtype=np.int64)
        pres_tok = np.arange(nta, dtype=np.int64)  # token t < nta: presence of typed attribute t
        bp_off = np.zeros(nta + 1, dtype=np.int64)
        bps: dict[int, np.ndarray] = {}
        next_tok = nta
        for aid in range(self.dictionary.n_attrs):
            for kind in (Kind.NUM, Kind.STR, Kind.BOOL):
                ta = aid * 3 + int(kind)
                if kind is Kind.NUM:
                    if ta not in points:
                        continue
                    bps[ta] = np.asarray(sorted(points[ta]), dtype=np.float64)
                    count = 2 * len(bps[ta]) + 1
                else:
                    count = len(self.dictionary.strings[aid]) if kind is Kind.STR else 2
                tok_cells[ta] = next_tok
                n_cells[ta] = count
                next_tok += count
        for ta in range(nta):
            bp_off[ta + 1] = bp_off[ta] + (len(bps[ta]) if ta in bps else 0)
        bp = np.concatenate([bps[ta] for ta in sorted(bps)]) if bps else np.zeros(0, np.float64)
        spid_base = next_tok
        n_tokens = next_tok + len(self._spids)

        toks: list[np.ndarray] = []
        flags: list[np.ndarray] = []
        owners: list[np.ndarray] = []
        e_need = np.zeros(len(conjs), dtype=np.int32)
        e_size = np.zeros(len(conjs), dtype=np.int32)
        e_key = np.zeros(len(conjs), dtype=np.int32)
        for entry, (key, conj) in enumerate(conjs):
            e_key[entry] = key
            e_need[entry] = len(conj)
            e_size[entry] = len({p.attr for p in conj})
            for p in conj:
                aid = attr(p.attr)
                ta = aid * 3 + int(p.kind)
                members, rejects = self._expand(p, ta, tok_cells, bps, spid_base)
                toks.append(members)
                flags.append(np.ones(len(members), dtype=np.bool_))
                if rejects is not None:
                    toks.append(rejects)
                    flags.append(np.zeros(len(rejects), dtype=np.bool_))
                owners.append(np.full(len(members) + (0 if rejects is None else len(rejects)), entry, np.int32))
        tok = np.concatenate(toks) if toks else _EMPTY
        flag = np.concatenate(flags) if flags else np.zeros(0, np.bool_)
        owner = np.concatenate(owners) if owners else np.zeros(0, np.int32)
        order = np.lexsort((owner, e_size[owner], tok))
        post_off = np.zeros(n_tokens + 1, dtype=np.int64)
        np.cumsum(np.bincount(tok, minlength=n_tokens), out=post_off[1:])
        self._built = dict(
            tok_cells=tok_cells, n_cells=n_cells, pres_tok=pres_tok, bp_off=bp_off, bp=bp,
            spid_base=np.int64(spid_base),
            postings=Postings(post_off, owner[order], flag[order], e_size[owner][order]),
            entries=KEntries(e_need, e_key, np.zeros(len(conjs), np.int32), np.full(len(conjs), -1, np.int64),
                             np.zeros(len(conjs), np.bool_)))
        self.postings = len(tok)
        self._stale = False

    def _expand(self, p: Pred, ta: int, tok_cells: np.ndarray, bps: dict[int, np.ndarray],
                spid_base: int) -> tuple[np.ndarray, np.ndarray | None]:
        """``(∈ tokens, ∉ tokens or None)`` of a predicate."""
        op, x = p.op, p.operand
        if p.kind is Kind.STR and StringEvaluator.owns(p):
            return np.asarray([spid_base + self._spids[p]], dtype=np.int64), None
        base = int(tok_cells[ta])
        pres = np.asarray([ta], dtype=np.int64)
        if p.kind is Kind.NUM:
            pts = bps[ta]

            def point(v: float) -> int:
                return 2 * int(np.searchsorted(pts, v)) + 1

            def cells(lo: int, hi: int) -> np.ndarray:
                return base + np.arange(lo, hi + 1, dtype=np.int64)

            top = 2 * len(pts)
            if op is Op.LT:
                return cells(0, point(x) - 1), None
            if op is Op.LE:
                return cells(0, point(x)), None
            if op is Op.GT:
                return cells(point(x) + 1, top), None
            if op is Op.GE:
                return cells(point(x), top), None
            if op is Op.BETWEEN:
                return cells(point(x[0]), point(x[1])), None
            if op is Op.NOT_BETWEEN:
                return np.concatenate([cells(0, point(x[0]) - 1), cells(point(x[1]) + 1, top)]), None
            code = point
        elif p.kind is Kind.BOOL:
            def code(v) -> int:
                return 1 if v else 0
        else:
            aid = ta // 3

            def code(v) -> int:
                return self.dictionary.code(aid, v, create=False)
        vals = x if isinstance(x, tuple) else (x,)
        tokens = np.asarray([base + code(v) for v in vals], dtype=np.int64)
        if op in (Op.EQ, Op.IN):
            return tokens, None
        if op in (Op.NE, Op.NOT_IN):
            return pres, tokens
        raise AssertionError(f"operator {op!r} on {p.kind!r} has no k-index encoding")

    # -- match -------------------------------------------------------------------------
    def _match(self, batch: EventBatch) -> Matches:
        if self._stale:
            self.build()
        b = self._built
        ev_val = event_values(batch)
        soff, spid = self.strings.entry_hits(batch)
        tok_off, tok = K.kindex_tokens(batch.offsets, batch.attrs, batch.kinds, ev_val, soff, spid,
                                       b["tok_cells"], b["n_cells"], b["bp_off"], b["bp"], b["spid_base"])
        offsets, keys, self._epoch = K.kindex_match(
            batch.offsets, tok_off, tok, b["postings"], b["entries"], self._epoch,
            np.empty(max(1, len(b["entries"].need)), np.int32), np.empty(max(16, batch.n), np.int32))
        return Matches(offsets, keys[: offsets[-1]].copy())

    def memory_bytes(self) -> int:
        if self._stale and len(self):
            self.build()
        arrays = [a for v in self._built.values() for a in (v if isinstance(v, tuple) else (v,))]
        return int(sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))
                   + self.strings.memory_bytes())
