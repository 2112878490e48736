"""Kernel of the command line's output: one JSON line of subscription ids per event."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from matchers.keysort import sort_distinct

_HEAD = np.frombuffer(b'{"event":', np.uint8)
_MIDDLE = np.frombuffer(b',"subscriptions":[', np.uint8)
_TAIL = np.frombuffer(b"]}\n", np.uint8)
WORD = 8
"""An id whose JSON with a comma before it takes at most this many bytes is written as one word."""


class IdTable(NamedTuple):
    """The subscriptions' ids as JSON, by rank (position in sorted order), for :func:`match_lines`."""

    rank: np.ndarray  # int64[capacity]: the rank of a key's id (-1: no subscription)
    ids: np.ndarray  # uint8: the JSON of the id of rank r is ids[id_offsets[r]:id_offsets[r + 1]]
    id_offsets: np.ndarray  # int64[ids + 1]
    words: np.ndarray  # uint64[ids]: "," and the JSON of the id, little-endian, zero-padded (when it fits)
    word_len: np.ndarray  # int64[ids]: its bytes (0: longer than WORD, copied from ids)


@njit(cache=True, nogil=True, inline="always")
def _put(out, pos, data, lo, hi):
    for j in range(lo, hi):
        out[pos] = data[j]
        pos += 1
    return pos


@njit(cache=True, nogil=True, inline="always")
def _put_word(out, pos, w):
    """Write the 8 bytes of ``w`` (little-endian) from ``pos`` on (one store once compiled)."""
    for b in range(WORD):
        out[pos + b] = np.uint8((w >> np.uint64(8 * b)) & np.uint64(255))


@njit(cache=True, nogil=True)
def match_lines(event_ids, event_offsets, offsets, keys, table, head, middle, tail):
    """``{"event":E,"subscriptions":[...]}\\n`` per event, as one byte array.

    ``event_ids[event_offsets[i]:event_offsets[i+1]]`` is event ``i``'s id as JSON; its
    matched keys (distinct) are ``keys[offsets[i]:offsets[i+1]]``; ``table`` is an
    :class:`IdTable`.  Each id is written after a comma (the first over the ``[`` of
    ``middle``, written again after), as one word when it fits.
    """
    rank, ids, id_offsets, words, word_len = table
    n = len(event_offsets) - 1
    size = n * (len(head) + len(middle) + len(tail)) + event_offsets[n] + WORD
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
        pos = _put(out, pos, middle, 0, len(middle) - 1)
        first = pos
        sort_distinct(ranks, offsets[i], offsets[i + 1], bits)
        for j in range(offsets[i], offsets[i + 1]):
            r = ranks[j]
            length = word_len[r]
            if length:
                _put_word(out, pos, words[r])
                pos += length
            else:
                out[pos] = 44
                pos = _put(out, pos + 1, ids, id_offsets[r], id_offsets[r + 1])
        if pos == first:
            pos += 1
        out[first] = middle[len(middle) - 1]
        pos = _put(out, pos, tail, 0, len(tail))
    return out[:pos]


def id_table(keyed: list[tuple[str, int]], capacity: int) -> IdTable:
    """The :class:`IdTable` of ``(id, key)`` pairs (keys below ``capacity``)."""
    import orjson

    live = sorted(keyed)
    rank = np.full(max(capacity, 1), -1, np.int64)
    rank[np.asarray([key for _, key in live], np.int64)] = np.arange(len(live))
    chunks = [orjson.dumps(sub_id) for sub_id, _ in live]
    offsets = np.zeros(len(chunks) + 1, np.int64)
    np.cumsum([len(c) for c in chunks], out=offsets[1:])
    word_len = np.array([len(c) + 1 if len(c) < WORD else 0 for c in chunks], np.int64)
    padded = b"".join(b"," + c + bytes(WORD - 1 - len(c)) if len(c) < WORD else bytes(WORD) for c in chunks)
    words = np.frombuffer(padded, "<u8").astype(np.uint64) if chunks else np.zeros(0, np.uint64)
    return IdTable(rank, np.frombuffer(b"".join(chunks), np.uint8), offsets, words, word_len)


LINE_PARTS = (_HEAD, _MIDDLE, _TAIL)
"""The fixed parts of a line, for :func:`match_lines`."""
