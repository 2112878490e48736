"""Kernels of the match notifications: every value of a task's records written into one buffer.

:func:`streaming.notifications.match_records` packs what it writes once per subscription and
once per event into :class:`Strings` (one byte buffer and its bounds each) and
:func:`write_values` writes record ``k`` (event ``j``, subscription ``w = which[k]``) as

    ``{"id":"`` + hex(BLAKE2b-128(hashed[w] + positions[j])) + ``","subscription":`` + json[w] + tails[j]

into one ``uint8`` buffer with its ``int64`` bounds; each event's ``tails[j]`` (its fields as JSON,
the event's bytes in it) and ``positions[j]`` are written by :func:`event_parts`, from columns. The hash is RFC 7693's BLAKE2b with a
16-byte digest and no key, the same as ``hashlib.blake2b(data, digest_size=16)``
(:func:`blake2b_128_hex` is the check against it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numba
import numpy as np


class Strings(NamedTuple):
    """Byte strings in one buffer: string ``i`` is ``data[bounds[i]:bounds[i + 1]]``."""

    data: np.ndarray
    """``uint8``"""
    bounds: np.ndarray
    """``int64``, one more than the strings"""


def pack(items: Sequence[bytes]) -> Strings:
    """``items`` as :class:`Strings`."""
    bounds = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, items), dtype=np.int64, count=len(items)), out=bounds[1:])
    return Strings(np.frombuffer(b"".join(items), dtype=np.uint8), bounds)


_IV = np.array([0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
                0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179], dtype=np.uint64)
_PARAM_128 = np.uint64(0x01010010)
"""Parameter block word 0 of a 16-byte digest without a key (depth 1, fanout 1)."""
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8).copy()
_ID_OPEN = np.frombuffer(b'{"id":"', dtype=np.uint8).copy()
_ID_CLOSE = np.frombuffer(b'","subscription":', dtype=np.uint8).copy()


@numba.njit(cache=True, nogil=True)
def _rotr(x: np.uint64, n: int) -> np.uint64:
    return (x >> np.uint64(n)) | (x << np.uint64(64 - n))


@numba.njit(cache=True, nogil=True)
def _g(a: np.uint64, b: np.uint64, c: np.uint64, d: np.uint64, x: np.uint64,
       y: np.uint64) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    a = a + b + x
    d = _rotr(d ^ a, 32)
    c = c + d
    b = _rotr(b ^ c, 24)
    a = a + b + y
    d = _rotr(d ^ a, 16)
    c = c + d
    b = _rotr(b ^ c, 63)
    return a, b, c, d


@numba.njit(cache=True, nogil=True)
def _word(block: np.ndarray, at: int) -> np.uint64:
    """The little-endian 64-bit word at ``block[at:at + 8]``."""
    w = np.uint64(0)
    for b in range(8):
        w |= np.uint64(block[at + b]) << np.uint64(8 * b)
    return w


@numba.njit(cache=True, nogil=True)
def _compress(h: np.ndarray, block: np.ndarray, t: int, last: bool) -> None:
    """RFC 7693's F: ``h`` updated with the 128-byte ``block`` (``t`` bytes hashed so far with
    it), its twelve rounds written out (the message words in the order of RFC 7693's SIGMA).

    Written out on purpose: the same rounds as a loop over a 10-row SIGMA table with the message
    words in an array (two loads per word: its index, then the word) made :func:`write_values`
    5-8 % slower per record, best and median of 9-11 interleaved runs (2026-11-30, docs/e2e.md)."""
    m0 = _word(block, 0)
    m1 = _word(block, 8)
    m2 = _word(block, 16)
    m3 = _word(block, 24)
    m4 = _word(block, 32)
    m5 = _word(block, 40)
    m6 = _word(block, 48)
    m7 = _word(block, 56)
    m8 = _word(block, 64)
    m9 = _word(block, 72)
    m10 = _word(block, 80)
    m11 = _word(block, 88)
    m12 = _word(block, 96)
    m13 = _word(block, 104)
    m14 = _word(block, 112)
    m15 = _word(block, 120)
    v0, v1, v2, v3, v4, v5, v6, v7 = h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
    v8, v9, v10, v11, v12, v13, v14, v15 = _IV[0], _IV[1], _IV[2], _IV[3], _IV[4], _IV[5], _IV[6], _IV[7]
    v12 ^= np.uint64(t)
    if last:
        v14 = ~v14
    v0, v4, v8, v12 = _g(v0, v4, v8, v12, m0, m1)
    v1, v5, v9, v13 = _g(v1, v5, v9, v13, m2, m3)
    v2, v6, v10, v14 = _g(v2, v6, v10, v14, m4, m5)
    v3, v7, v11, v15 = _g(v3, v7, v11, v15, m6, m7)
    v0, v5, v10, v15 = _g(v0, v5, v10, v15, m8, m9)
    v1, v6, v11, v12 = _g(v1, v6, v11, v12, m10, m11)
    v2, v7, v8, v13 = _g(v2, v7, v8, v13, m12, m13)
    v3, v4, v9, v14 = _g(v3, v4, v9, v14, m14, m15)
    v0, v4, v8, v12 = _g(v0, v4, v8, v12, m14, m10)
    v1, v5, v9, v13 = _g(v1, v5, v9, v13, m4, m8)
    v2, v6, v10, v14 = _g(v2, v6, v10, v14, m9, m15)
    v3, v7, v11, v15 = _g(v3, v7, v11, v15, m13, m6)
    v0, v5, v10, v15 = _g(v0, v5, v10, v15, m1, m12)
    v1, v6, v11, v12 = _g(v1, v6, v11, v12, m0, m2)
    v2, v7, v8, v13 = _g(v2, v7, v8, v13, m11, m7)
    v3, v4, v9, v14 = _g(v3, v4, v9, v14, m5, m3)
    v0, v4, v8, v12 = _g(v0, v4, v8, v12, m11, m8)
    v1, v5, v9, v13 = _g(v1, v5, v9, v13, m12, m0)
    v2, v6, v10, v14 = _g(v2, v6, v10, v14, m5, m2)
    v3, v7, v11, v15 = _g(v3, v7, v11, v15, m15, m13)
    v0, v5, v10, v15 = _g(v0, v5, v10, v15, m10, m14)
    v1, v6, v11, v12 = _g(v1, v6, v11, v12, m3, m6)
    v2, v7, v8, v13 = _g(v2, v7, v8, v13, m7, m1)
    v3, v4, v9, v14 = _g(v3, v4, v9, v14, m9, m4)
    v0, v4, v8, v12 = _g(v0, v4, v8, v12, m7, m9)
    v1, v5, v9, v13 = _g(v1, v5, v9, v13, m3, m1)
    v2, v6, v10, v14 = _g(v2, v6, v10, v14, m13, m12)
    v3, v7, v11, v15 = _g(v3, v7, v11, v15, m11, m14)
    v0, v5, v10, v15 = _g(v0, v5, v10, v15, m2, m6)
    v1, v6, v11, v12 = _g(v1, v6, v11, v12, m5, m10)
    v2, v7, v8, v13 = _g(v2, v7, v8, v13, m4, m0)
    v3, v4, v9, v14 = _g(v3, v4, v9, v14, m15, m8)
    v0, v4, v8, v12 = _g(v0, v4, v8, v12, m9, m0)
    v1, v5, v9, v13 = _g(v1, v5, v9, v13, m5, m7)
    v2, v6, v10, v14 = _g(v2, v6, v10, v14, m2, m4)
    v3, v7, v11, v15 = _g(v3, v7, v11, v15, m10, m15)
    v0, v5, v10, v15 = _g(v0, v5, v10, v15, m14, m1)
    v1, v6, v11, v12 = _g(v1, v6, v11, v12, m11, m12)
    v2, v7, v8, v13 = _g(v2, v7, v8, v13, m6, m8)
    v3, v4, v9, v14 = _g(v3, v4, v9, v14, m3, m13)
    v0, v4, v8, v12 = _g(v0, v4, v8, v12, m2, m12)
    v1, v5, v9, v13 = _g(v1, v5, v9, v13, m6, m10)
    v2, v6, v10, v14 = _g(v2, v6, v10, v14, m0, m11)
    v3, v7, v11, v15 = _g(v3, v7, v11, v15, m8, m3)
    v0, v5, v10, v15 = _g(v0, v5, v10, v15, m4, m13)
    v1, v6, v11, v12 = _g(v1, v6, v11, v12, m7, m5)
    v2, v7, v8, v13 = _g(v2, v7, v8, v13, m15, m14)
    v3, v4, v9, v14 = _g(v3, v4, v9, v14, m1, m9)
    v0, v4, v8, v12 = _g(v0, v4, v8, v12, m12, m5)
    v1, v5, v9, v13 = _g(v1, v5, v9, v13, m1, m15)
    v2, v6, v10, v14 = _g(v2, v6, v10, v14, m14, m13)
    v3, v7, v11, v15 = _g(v3, v7, v11, v15, m4, m10)
    v0, v5, v10, v15 = _g(v0, v5, v10, v15, m0, m7)
    v1, v6, v11, v12 = _g(v1, v6, v11, v12, m6, m3)
    v2, v7, v8, v13 = _g(v2, v7, v8, v13, m9, m2)
    v3, v4, v9, v14 = _g(v3, v4, v9, v14, m8, m11)
    v0, v4, v8, v12 = _g(v0, v4, v8, v12, m13, m11)
    v1, v5, v9, v13 = _g(v1, v5, v9, v13, m7, m14)
    v2, v6, v10, v14 = _g(v2, v6, v10, v14, m12, m1)
    v3, v7, v11, v15 = _g(v3, v7, v11, v15, m3, m9)
    v0, v5, v10, v15 = _g(v0, v5, v10, v15, m5, m0)
    v1, v6, v11, v12 = _g(v1, v6, v11, v12, m15, m4)
    v2, v7, v8, v13 = _g(v2, v7, v8, v13, m8, m6)
    v3, v4, v9, v14 = _g(v3, v4, v9, v14, m2, m10)
    v0, v4, v8, v12 = _g(v0, v4, v8, v12, m6, m15)
    v1, v5, v9, v13 = _g(v1, v5, v9, v13, m14, m9)
    v2, v6, v10, v14 = _g(v2, v6, v10, v14, m11, m3)
    v3, v7, v11, v15 = _g(v3, v7, v11, v15, m0, m8)
    v0, v5, v10, v15 = _g(v0, v5, v10, v15, m12, m2)
    v1, v6, v11, v12 = _g(v1, v6, v11, v12, m13, m7)
    v2, v7, v8, v13 = _g(v2, v7, v8, v13, m1, m4)
    v3, v4, v9, v14 = _g(v3, v4, v9, v14, m10, m5)
    v0, v4, v8, v12 = _g(v0, v4, v8, v12, m10, m2)
    v1, v5, v9, v13 = _g(v1, v5, v9, v13, m8, m4)
    v2, v6, v10, v14 = _g(v2, v6, v10, v14, m7, m6)
    v3, v7, v11, v15 = _g(v3, v7, v11, v15, m1, m5)
    v0, v5, v10, v15 = _g(v0, v5, v10, v15, m15, m11)
    v1, v6, v11, v12 = _g(v1, v6, v11, v12, m9, m14)
    v2, v7, v8, v13 = _g(v2, v7, v8, v13, m3, m12)
    v3, v4, v9, v14 = _g(v3, v4, v9, v14, m13, m0)
    v0, v4, v8, v12 = _g(v0, v4, v8, v12, m0, m1)
    v1, v5, v9, v13 = _g(v1, v5, v9, v13, m2, m3)
    v2, v6, v10, v14 = _g(v2, v6, v10, v14, m4, m5)
    v3, v7, v11, v15 = _g(v3, v7, v11, v15, m6, m7)
    v0, v5, v10, v15 = _g(v0, v5, v10, v15, m8, m9)
    v1, v6, v11, v12 = _g(v1, v6, v11, v12, m10, m11)
    v2, v7, v8, v13 = _g(v2, v7, v8, v13, m12, m13)
    v3, v4, v9, v14 = _g(v3, v4, v9, v14, m14, m15)
    v0, v4, v8, v12 = _g(v0, v4, v8, v12, m14, m10)
    v1, v5, v9, v13 = _g(v1, v5, v9, v13, m4, m8)
    v2, v6, v10, v14 = _g(v2, v6, v10, v14, m9, m15)
    v3, v7, v11, v15 = _g(v3, v7, v11, v15, m13, m6)
    v0, v5, v10, v15 = _g(v0, v5, v10, v15, m1, m12)
    v1, v6, v11, v12 = _g(v1, v6, v11, v12, m0, m2)
    v2, v7, v8, v13 = _g(v2, v7, v8, v13, m11, m7)
    v3, v4, v9, v14 = _g(v3, v4, v9, v14, m5, m3)
    h[0] ^= v0 ^ v8
    h[1] ^= v1 ^ v9
    h[2] ^= v2 ^ v10
    h[3] ^= v3 ^ v11
    h[4] ^= v4 ^ v12
    h[5] ^= v5 ^ v13
    h[6] ^= v6 ^ v14
    h[7] ^= v7 ^ v15


@numba.njit(cache=True, nogil=True)
def _hash_hex(a: np.ndarray, a0: int, a1: int, b: np.ndarray, b0: int, b1: int, out: np.ndarray, at: int,
              h: np.ndarray, block: np.ndarray) -> None:
    """The hex BLAKE2b-128 of ``a[a0:a1] + b[b0:b1]`` written at ``out[at:at + 32]`` (``h``,
    ``block``: scratch of 8 words and 128 bytes)."""
    for i in range(8):
        h[i] = _IV[i]
    h[0] ^= _PARAM_128
    n = (a1 - a0) + (b1 - b0)
    fill = 0
    done = 0
    for k in range(n):
        if fill == 128:  # a full block with more to come
            done += 128
            _compress(h, block, done, False)
            fill = 0
        block[fill] = a[a0 + k] if k < a1 - a0 else b[b0 + k - (a1 - a0)]
        fill += 1
    for i in range(fill, 128):
        block[i] = 0
    _compress(h, block, n, True)
    for i in range(16):
        byte = (h[i >> 3] >> np.uint64(8 * (i & 7))) & np.uint64(0xFF)
        out[at + 2 * i] = _HEX[byte >> np.uint64(4)]
        out[at + 2 * i + 1] = _HEX[byte & np.uint64(0xF)]


@numba.njit(cache=True, nogil=True)
def _put(out: np.ndarray, at: int, src: np.ndarray, s0: int, s1: int) -> int:
    """``src[s0:s1]`` at ``out[at:]``; returns the end. A loop over two views from 0 (which LLVM
    vectorises): a slice assignment or a loop of offset indices was 4-20x slower (measured)."""
    o, s = out[at:at + s1 - s0], src[s0:s1]
    for i in range(s1 - s0):
        o[i] = s[i]
    return at + s1 - s0


@numba.njit(cache=True, nogil=True)
def _values(hashed: Strings, json: Strings, positions: Strings, tails: Strings, bounds: np.ndarray,
            which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = which.shape[0]
    ends = np.empty(n + 1, dtype=np.int64)
    ends[0] = 0
    fixed = _ID_OPEN.shape[0] + 32 + _ID_CLOSE.shape[0]
    for j in range(bounds.shape[0] - 1):
        tail = tails.bounds[j + 1] - tails.bounds[j]
        for k in range(bounds[j], bounds[j + 1]):
            w = which[k]
            ends[k + 1] = ends[k] + fixed + (json.bounds[w + 1] - json.bounds[w]) + tail
    out = np.empty(ends[n], dtype=np.uint8)
    h = np.empty(8, dtype=np.uint64)
    block = np.empty(128, dtype=np.uint8)
    for j in range(bounds.shape[0] - 1):
        p0, p1 = positions.bounds[j], positions.bounds[j + 1]
        t0, t1 = tails.bounds[j], tails.bounds[j + 1]
        for k in range(bounds[j], bounds[j + 1]):
            w = which[k]
            at = ends[k]
            for i in range(_ID_OPEN.shape[0]):
                out[at + i] = _ID_OPEN[i]
            at += _ID_OPEN.shape[0]
            _hash_hex(hashed.data, hashed.bounds[w], hashed.bounds[w + 1], positions.data, p0, p1, out, at,
                      h, block)
            at += 32
            for i in range(_ID_CLOSE.shape[0]):
                out[at + i] = _ID_CLOSE[i]
            at += _ID_CLOSE.shape[0]
            at = _put(out, at, json.data, json.bounds[w], json.bounds[w + 1])
            _put(out, at, tails.data, t0, t1)
    return out, ends


@numba.njit(cache=True, nogil=True)
def _framed(keys: Strings, chars: np.ndarray, counted: bool) -> tuple[np.ndarray, np.ndarray]:
    """With ``counted``, ``chars[i]`` in decimal and ``:`` before each key; else each key
    between double quotes."""
    n = keys.bounds.shape[0] - 1
    bounds = np.empty(n + 1, dtype=np.int64)
    bounds[0] = 0
    for i in range(n):
        extra = 2
        if counted:
            extra, c = 1, chars[i]
            while True:
                extra += 1
                c //= 10
                if c == 0:
                    break
        bounds[i + 1] = bounds[i] + extra + keys.bounds[i + 1] - keys.bounds[i]
    data = np.empty(bounds[n], dtype=np.uint8)
    for i in range(n):
        k0, k1, at, end = keys.bounds[i], keys.bounds[i + 1], bounds[i], bounds[i + 1]
        if counted:
            c = chars[i]
            colon = end - (k1 - k0) - 1
            data[colon] = 58  # ':'
            for d in range(colon - 1, at - 1, -1):
                data[d] = 48 + c % 10
                c //= 10
            data[colon + 1:end] = keys.data[k0:k1]
        else:
            data[at] = 34  # '"'
            data[at + 1:end - 1] = keys.data[k0:k1]
            data[end - 1] = 34
    return data, bounds


def hash_inputs(keys: Strings, chars: Sequence[int] | np.ndarray) -> Strings:
    """Each key (a subscription id's UTF-8) after its length in characters, ``chars[i]``, and a
    colon: the first part of the input of its notifications' id hash."""
    return Strings(*_framed(keys, np.asarray(chars, dtype=np.int64), True))


def quoted(keys: Strings) -> Strings:
    """Each key between double quotes: its JSON when it needs no escape."""
    return Strings(*_framed(keys, np.zeros(0, dtype=np.int64), False))


def write_values(hashed: Strings, json: Strings, positions: Strings, tails: Strings, bounds: Sequence[int] | np.ndarray,
                 which: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values of the records of event ``j`` to subscriptions ``which[bounds[j]:bounds[j + 1]]``,
    in that order, in one ``uint8`` buffer and their ``int64`` bounds (module docstring)."""
    return _values(hashed, json, positions, tails, np.asarray(bounds, dtype=np.int64),
                   np.asarray(which, dtype=np.int64))


_WHITESPACE = np.zeros(256, dtype=np.bool_)
_WHITESPACE[list(b" \t\n\r\x0b\x0c")] = True
"""What ``bytes.strip()`` strips."""
_HEAD = np.frombuffer(b',"kind":"match","event_id":', dtype=np.uint8).copy()
_TOPIC = np.frombuffer(b',"topic":', dtype=np.uint8).copy()
_PARTITION = np.frombuffer(b',"partition":', dtype=np.uint8).copy()
_OFFSET = np.frombuffer(b',"offset":', dtype=np.uint8).copy()
_EVENT_MS = np.frombuffer(b',"event_time_ms":', dtype=np.uint8).copy()
_NULL = np.frombuffer(b"null", dtype=np.uint8).copy()
_EVENT = np.frombuffer(b',"event":', dtype=np.uint8).copy()


@numba.njit(cache=True, nogil=True)
def _digits(x: int) -> int:
    """The length of ``x`` in decimal (``%d``'s)."""
    n = 1 if x >= 0 else 2
    m = np.uint64(x) if x >= 0 else np.uint64(-(x + 1)) + np.uint64(1)
    while m >= np.uint64(10):
        m //= np.uint64(10)
        n += 1
    return n


@numba.njit(cache=True, nogil=True)
def _decimal(x: int, out: np.ndarray, at: int) -> int:
    """``x`` in decimal at ``out[at:]``; returns the end."""
    end = at + _digits(x)
    m = np.uint64(x) if x >= 0 else np.uint64(-(x + 1)) + np.uint64(1)
    if x < 0:
        out[at] = 45  # '-'
    d = end - 1
    while True:
        out[d] = np.uint64(48) + m % np.uint64(10)
        m //= np.uint64(10)
        d -= 1
        if m == np.uint64(0):
            return end


@numba.njit(cache=True, nogil=True)
def _parts(topic_of: np.ndarray, topic_json: Strings, topic_hash: Strings, id_json: Strings, partitions: np.ndarray,
           offsets: np.ndarray, event_ms: np.ndarray, has_ms: np.ndarray, raws: Strings, embed: bool,
           mid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n = topic_of.shape[0]
    tail_ends = np.empty(n + 1, dtype=np.int64)
    head_ends = np.empty(n, dtype=np.int64)
    pos_ends = np.empty(n + 1, dtype=np.int64)
    tail_ends[0] = pos_ends[0] = 0
    r0s = np.empty(n, dtype=np.int64)
    r1s = np.empty(n, dtype=np.int64)
    fixed = _HEAD.shape[0] + _TOPIC.shape[0] + _PARTITION.shape[0] + _OFFSET.shape[0] + _EVENT_MS.shape[0] + mid.shape[0]
    for j in range(n):
        t = topic_of[j]
        t_json = topic_json.bounds[t + 1] - topic_json.bounds[t]
        ms = _digits(event_ms[j]) if has_ms[j] else _NULL.shape[0]
        head = (fixed + id_json.bounds[j + 1] - id_json.bounds[j] + t_json + _digits(partitions[j])
                + _digits(offsets[j]) + ms)
        head_ends[j] = tail_ends[j] + head
        tail = head + 1
        if embed:
            r0, r1 = raws.bounds[j], raws.bounds[j + 1]
            while r0 < r1 and _WHITESPACE[raws.data[r0]]:
                r0 += 1
            while r1 > r0 and _WHITESPACE[raws.data[r1 - 1]]:
                r1 -= 1
            r0s[j], r1s[j] = r0, r1
            tail += _EVENT.shape[0] + r1 - r0
        tail_ends[j + 1] = tail_ends[j] + tail
        pos_ends[j + 1] = (pos_ends[j] + topic_hash.bounds[t + 1] - topic_hash.bounds[t] + 2 + _digits(partitions[j])
                           + _digits(offsets[j]))
    tails = np.empty(tail_ends[n], dtype=np.uint8)
    positions = np.empty(pos_ends[n], dtype=np.uint8)
    for j in range(n):
        t = topic_of[j]
        at = _put(tails, tail_ends[j], _HEAD, 0, _HEAD.shape[0])
        at = _put(tails, at, id_json.data, id_json.bounds[j], id_json.bounds[j + 1])
        at = _put(tails, at, _TOPIC, 0, _TOPIC.shape[0])
        at = _put(tails, at, topic_json.data, topic_json.bounds[t], topic_json.bounds[t + 1])
        at = _put(tails, at, _PARTITION, 0, _PARTITION.shape[0])
        at = _decimal(partitions[j], tails, at)
        at = _put(tails, at, _OFFSET, 0, _OFFSET.shape[0])
        at = _decimal(offsets[j], tails, at)
        at = _put(tails, at, _EVENT_MS, 0, _EVENT_MS.shape[0])
        at = _decimal(event_ms[j], tails, at) if has_ms[j] else _put(tails, at, _NULL, 0, _NULL.shape[0])
        at = _put(tails, at, mid, 0, mid.shape[0])
        if embed:
            at = _put(tails, at, _EVENT, 0, _EVENT.shape[0])
            at = _put(tails, at, raws.data, r0s[j], r1s[j])
        tails[at] = 125  # '}'
        at = _put(positions, pos_ends[j], topic_hash.data, topic_hash.bounds[t], topic_hash.bounds[t + 1])
        positions[at] = 124  # '|'
        at = _decimal(partitions[j], positions, at + 1)
        positions[at] = 124
        _decimal(offsets[j], positions, at + 1)
    return tails, tail_ends, head_ends - tail_ends[:n], positions, pos_ends


class EventParts(NamedTuple):
    """What :func:`write_values` writes once per event."""

    tails: Strings
    """Per event, its fields after the subscription to the closing brace."""
    heads: np.ndarray
    """Per event, how many bytes of its tail are its fields before ``mid``'s end (before the event)."""
    positions: Strings
    """Per event, ``|topic|partition|offset``: the second part of its records' id hash input."""


def event_parts(topic_of: np.ndarray, topic_json: Strings, topic_hash: Strings, id_json: Strings,
                partitions: np.ndarray, offsets: np.ndarray, event_ms: np.ndarray, has_ms: np.ndarray,
                raws: Strings | None, mid: bytes) -> EventParts:
    """Per event ``j``, the tail ``,"kind":"match","event_id":`` + ``id_json[j]`` + ``,"topic":`` +
    ``topic_json[topic_of[j]]`` + ``,"partition":%d,"offset":%d,"event_time_ms":`` (``event_ms[j]``,
    or ``null`` where not ``has_ms[j]``) + ``mid`` (+ ``,"event":`` + ``raws[j].strip()``) + ``}``,
    and its hash position ``topic_hash[topic_of[j]]|partition|offset`` (all ``int64``)."""
    embed = raws is not None
    got = _parts(topic_of, topic_json, topic_hash, id_json, partitions, offsets, event_ms, has_ms,
                 raws if raws is not None else pack([]), embed, np.frombuffer(mid, dtype=np.uint8))
    return EventParts(Strings(got[0], got[1]), got[2], Strings(got[3], got[4]))


@numba.njit(cache=True, nogil=True)
def _one_hex(data: np.ndarray) -> np.ndarray:
    out = np.empty(32, dtype=np.uint8)
    _hash_hex(data, 0, data.shape[0], data, 0, 0, out, 0, np.empty(8, dtype=np.uint64),
              np.empty(128, dtype=np.uint8))
    return out


def blake2b_128_hex(data: bytes) -> str:
    """``hashlib.blake2b(data, digest_size=16).hexdigest()`` by this module's kernel."""
    return _one_hex(np.frombuffer(data, dtype=np.uint8)).tobytes().decode("ascii")


def warm() -> None:
    """Compile (or load from numba's cache) the kernels as the match tasks call them: about
    15 s the first time, which the service spends before it starts rather than in a batch."""
    one = pack([b"a"])
    ints = np.zeros(1, dtype=np.int64)
    event_parts(ints, one, one, one, ints, ints, ints, np.ones(1, dtype=np.bool_), one, b"")
    write_values(hash_inputs(one, [1]), quoted(one), one, one, [0, 1], np.zeros(1, dtype=np.int64))
