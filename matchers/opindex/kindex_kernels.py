"""Numba kernels of the k-index baseline (:mod:`.kindex`)."""

from __future__ import annotations

import numba
import numpy as np

from matchers.arrays import lower_bound
from matchers.opindex.kernels import RADIX_BITS, push, sort_unique

# -- k-index (Whang et al., VLDB 2009), counting variant ------------------------------


@numba.njit(cache=True, nogil=True)
def kindex_tokens(ev_off, ev_attr, ev_kind, ev_val, ev_soff, ev_spid, tok_cells, n_cells, bp_off, bp, spid_base):
    """Tokens of each event: per value its presence token (the typed attribute), its
    domain cell, and its satisfied string predicates.  Returns ``(offsets, tokens)``."""
    n = len(ev_off) - 1
    nnz = len(ev_attr)
    tok = np.empty(2 * nnz + len(ev_spid), dtype=np.int64)
    off = np.zeros(n + 1, dtype=np.int64)
    nt = 0
    for i in range(n):
        for j in range(ev_off[i], ev_off[i + 1]):
            kind = ev_kind[j]
            ta = ev_attr[j] * 3 + kind
            if ta >= len(tok_cells):
                continue
            tok[nt] = ta
            nt += 1
            base = tok_cells[ta]
            if base >= 0:
                if kind == 0:
                    lo = bp_off[ta]
                    hi = bp_off[ta + 1]
                    v = ev_val[j]
                    a = lower_bound(bp, lo, hi, v)
                    cell = 2 * (a - lo)
                    if a < hi and bp[a] == v:
                        cell += 1
                    tok[nt] = base + cell
                    nt += 1
                else:
                    c = np.int64(ev_val[j])
                    if 0 <= c < n_cells[ta]:
                        tok[nt] = base + c
                        nt += 1
            for q in range(ev_soff[j], ev_soff[j + 1]):
                tok[nt] = spid_base + ev_spid[q]
                nt += 1
        off[i + 1] = nt
    return off, tok[:nt]


@numba.njit(cache=True, nogil=True)
def kindex_match(ev_off, ev_tok_off, ev_tok, postings, entries, epoch, touched, out_keys):
    """Match a batch on the k-index: each event token's posting list raises (``∈``) or
    rejects (``∉``) its conjunctions, skipping the size partitions larger than the
    event; a conjunction of K predicates matches when K of its ``∈`` postings are hit
    and none of its ``∉`` ones.  ``postings`` and ``entries`` are
    :class:`~matchers.opindex.layout.Postings` and :class:`~matchers.opindex.layout.KEntries`.
    Returns ``(offsets, keys, epoch)``.
    """
    post_off, post_entry, post_in, post_size = postings
    e_need, e_key, acc, e_stamp, e_bad = entries
    n = len(ev_off) - 1
    offsets = np.zeros(n + 1, dtype=np.int64)
    n_out = 0
    count = np.empty((1 << RADIX_BITS) + 1, dtype=np.int64)
    for i in range(n):
        epoch += 1
        nt = 0
        m = ev_off[i + 1] - ev_off[i]
        for t in range(ev_tok_off[i], ev_tok_off[i + 1]):
            tok = ev_tok[t]
            for p in range(post_off[tok], post_off[tok + 1]):
                if post_size[p] > m:
                    break
                en = post_entry[p]
                if e_stamp[en] != epoch:
                    e_stamp[en] = epoch
                    acc[en] = 0
                    e_bad[en] = False
                    touched[nt] = en
                    nt += 1
                if post_in[p]:
                    acc[en] += 1
                else:
                    e_bad[en] = True
        first = n_out
        for t in range(nt):
            en = touched[t]
            if acc[en] == e_need[en] and not e_bad[en]:
                out_keys, n_out = push(out_keys, n_out, e_key[en])
        out_keys, n_out = sort_unique(out_keys, first, n_out, count)
        offsets[i + 1] = n_out
    return offsets, out_keys, epoch

