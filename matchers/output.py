"""Kernel of the command line's output: one JSON line of subscription ids per event."""

from __future__ import annotations

import numpy as np
from numba import njit

from matchers.keysort import sort_distinct

_HEAD = np.frombuffer(b'{"event":', np.uint8)
_MIDDLE = np.frombuffer(b',"subscriptions":[', np.uint8)
_TAIL = np.frombuffer(b"]}\n", np.uint8)


@njit(cache=True, nogil=True, inline="always")
def _put(out, pos, data, lo, hi):
    for j in range(lo, hi):
        out[pos] = data[j]
        pos += 1
    return pos


@njit(cache=True, nogil=True)
def match_lines(event_ids, event_offsets, offsets, keys, rank, ids, id_offsets, head, middle, tail):
    """``{"event":E,"subscriptions":[...]}\\n`` per event, as one byte array.

    ``event_ids[event_offsets[i]:event_offsets[i+1]]`` is event ``i``'s id as JSON; its
    matched keys (distinct) are ``keys[offsets[i]:offsets[i+1]]``; ``rank[key]`` is the
    position of the key's id in sorted order and ``ids[id_offsets[r]:id_offsets[r+1]]`` the
    JSON of the id of rank ``r``.
    """
    n = len(event_offsets) - 1
    size = n * (len(head) + len(middle) + len(tail)) + event_offsets[n]
    ranks = np.empty(len(keys), np.int64)
    for j in range(len(keys)):
        r = rank[keys[j]]
        ranks[j] = r
        size += id_offsets[r + 1] - id_offsets[r] + 1
    bits = np.zeros((len(id_offsets) + 63) >> 6, np.uint64)
    out = np.empty(size, np.uint8)
    pos = 0
    for i in range(n):
        pos = _put(out, pos, head, 0, len(head))
        pos = _put(out, pos, event_ids, event_offsets[i], event_offsets[i + 1])
        pos = _put(out, pos, middle, 0, len(middle))
        sort_distinct(ranks, offsets[i], offsets[i + 1], bits)
        for j in range(offsets[i], offsets[i + 1]):
            if j > offsets[i]:
                out[pos] = 44
                pos += 1
            pos = _put(out, pos, ids, id_offsets[ranks[j]], id_offsets[ranks[j] + 1])
        pos = _put(out, pos, tail, 0, len(tail))
    return out[:pos]


def id_table(keyed: list[tuple[str, int]], capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rank, ids, id_offsets)`` for :func:`match_lines` from ``(id, key)`` pairs (keys below ``capacity``)."""
    import orjson

    live = sorted(keyed)
    rank = np.full(max(capacity, 1), -1, np.int64)
    rank[np.asarray([key for _, key in live], np.int64)] = np.arange(len(live))
    chunks = [orjson.dumps(sub_id) for sub_id, _ in live]
    offsets = np.zeros(len(chunks) + 1, np.int64)
    np.cumsum([len(c) for c in chunks], out=offsets[1:])
    return rank, np.frombuffer(b"".join(chunks), np.uint8), offsets


LINE_PARTS = (_HEAD, _MIDDLE, _TAIL)
"""The fixed parts of a line, for :func:`match_lines`."""
