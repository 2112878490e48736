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
    sorted by their new attribute id. Returns the six arrays."""
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
    n_keys = len(str_keys)
    k = 0
    for i in range(n):
        ns = 0
        ordered = True
        for j in range(offsets[i], offsets[i + 1]):
            a = attr_map[attrs[j]]
            if a >= 0:
                if ns and new[ns - 1] > a:
                    ordered = False
                sel[ns] = j
                new[ns] = a
                ns += 1
        if not ordered:  # the ids of a row are distinct: any sort will do
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
