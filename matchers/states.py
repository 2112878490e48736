"""Kernel giving a batch the presence states of the tested attributes (see :mod:`matchers.presence`)."""

from __future__ import annotations

import numpy as np
from numba import njit

from matchers.events import EventArrays, EventBatch
from matchers.expr import Kind
from matchers.presence import ABSENT, NULL, PRESENT

_NULL = int(Kind.NULL)
_NUM = int(Kind.NUM)


def with_states(batch: EventBatch, slot: np.ndarray, states: np.ndarray, drop_nulls: bool) -> EventBatch:
    """The batch (without rows) with one state value per row for each of ``states``,
    kept sorted by attribute id; its ``null`` values left out if ``drop_nulls``."""
    out = _with_states(batch.arrays, slot, states, drop_nulls)
    return EventBatch(out.offsets, out.attrs, out.kinds, out.nums, out.codes, out.texts, batch.strings)


@njit(cache=True, nogil=True)
def _with_states(events, slot, states, drop_nulls):
    """The :class:`~matchers.events.EventArrays` ``events`` with the states; ``slot[a]``: the
    index in ``states`` of attribute ``a``'s state, ``-2`` for a state attribute (a row's
    own value under that id is dropped), ``-1`` otherwise."""
    offsets, attrs, kinds, nums, codes, texts = events
    n, k, top = len(offsets) - 1, len(states), len(slot)
    size = len(attrs) + n * k
    o_offsets = np.zeros(n + 1, np.int64)
    o_attrs = np.empty(size, attrs.dtype)
    o_kinds = np.empty(size, kinds.dtype)
    o_nums = np.empty(size, nums.dtype)
    o_codes = np.empty(size, codes.dtype)
    o_texts = np.empty(size, texts.dtype)
    state = np.empty(k, np.float64)
    pos = 0
    for e in range(n):
        state[:] = ABSENT
        for i in range(offsets[e], offsets[e + 1]):
            a = attrs[i]
            if a < top and slot[a] >= 0:
                state[slot[a]] = NULL if kinds[i] == _NULL else PRESENT
        j = 0
        for i in range(offsets[e], offsets[e + 1]):
            a = attrs[i]
            if (a < top and slot[a] == -2) or (drop_nulls and kinds[i] == _NULL):
                continue
            while j < k and states[j] < a:
                o_attrs[pos], o_kinds[pos], o_nums[pos], o_codes[pos], o_texts[pos] = states[j], _NUM, state[j], -1, -1
                pos += 1
                j += 1
            o_attrs[pos], o_kinds[pos], o_nums[pos], o_codes[pos], o_texts[pos] = a, kinds[i], nums[i], codes[i], texts[i]
            pos += 1
        while j < k:
            o_attrs[pos], o_kinds[pos], o_nums[pos], o_codes[pos], o_texts[pos] = states[j], _NUM, state[j], -1, -1
            pos += 1
            j += 1
        o_offsets[e + 1] = pos
    return EventArrays(o_offsets, o_attrs[:pos], o_kinds[:pos], o_nums[:pos], o_codes[:pos], o_texts[:pos])
