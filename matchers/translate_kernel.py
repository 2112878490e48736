"""Kernel of :mod:`matchers.translate`: a batch encoded against one dictionary, re-keyed to another."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def translate(offsets, attrs, kinds, nums, codes, texts, attr_map, str_keys, str_codes):
    """The rows ``offsets`` / ``attrs .. texts`` (an :class:`~matchers.events.EventBatch`'s
    arrays) with attribute ``a`` as ``attr_map[a]`` (an entry whose ``attr_map`` is ``-1`` is left
    out) and the string code ``c`` of attribute ``a`` as ``str_codes[k]`` where
    ``str_keys[k] == a << 32 | c`` (``str_keys`` sorted; ``-1`` when absent); each row's entries
    sorted by their new attribute id (when the map changed their order: through a slot per id
    when the row's ids are dense, by insertion when it has few, else by ``argsort``). Returns
    the six arrays."""
    n = len(offsets) - 1
    out_off = np.zeros(n + 1, np.int64)
    out_attrs = np.empty(len(attrs), np.int32)
    out_kinds = np.empty(len(attrs), np.int8)
    out_nums = np.empty(len(attrs), np.float64)
    out_codes = np.empty(len(attrs), np.int32)
    out_texts = np.empty(len(attrs), np.int32)
    width = 0
    for i in range(n):
        width = max(width, offsets[i + 1] - offsets[i])
    sel = np.empty(width, np.int64)
    new = np.empty(width, np.int32)
    slot = np.full(max(1, attr_map.max() + 1) if len(attr_map) else 1, -1, np.int64)  # own id -> entry
    n_keys = len(str_keys)
    k = 0
    for i in range(n):
        ns = 0
        ordered = True
        lo = np.int32(1 << 30)
        hi = np.int32(-1)
        for j in range(offsets[i], offsets[i + 1]):
            a = attr_map[attrs[j]]
            if a >= 0:
                if ns and new[ns - 1] > a:
                    ordered = False
                sel[ns] = j
                new[ns] = a
                ns += 1
                lo = min(lo, a)
                hi = max(hi, a)
        if not ordered:  # the ids of a row are distinct
            if hi - lo < 4 * ns:  # dense among the own ids: by their slots
                for o in range(ns):
                    slot[new[o]] = sel[o]
                o = 0
                for a in range(lo, hi + 1):
                    if slot[a] >= 0:
                        sel[o] = slot[a]
                        new[o] = a
                        slot[a] = -1
                        o += 1
            elif ns <= 32:  # few: by insertion
                for o in range(1, ns):
                    a, j = new[o], sel[o]
                    p = o - 1
                    while p >= 0 and new[p] > a:
                        new[p + 1] = new[p]
                        sel[p + 1] = sel[p]
                        p -= 1
                    new[p + 1] = a
                    sel[p + 1] = j
            else:
                order = np.argsort(new[:ns])
                sel[:ns] = sel[:ns][order]
                new[:ns] = new[:ns][order]
        for o in range(ns):
            j = sel[o]
            out_attrs[k] = new[o]
            out_kinds[k] = kinds[j]
            out_nums[k] = nums[j]
            out_texts[k] = texts[j]
            code = -1
            if codes[j] >= 0 and n_keys:
                key = (np.int64(attrs[j]) << 32) | np.int64(codes[j])
                p = np.searchsorted(str_keys, key)
                if p < n_keys and str_keys[p] == key:
                    code = str_codes[p]
            out_codes[k] = code
            k += 1
        out_off[i + 1] = k
    return out_off, out_attrs[:k], out_kinds[:k], out_nums[:k], out_codes[:k], out_texts[:k]
