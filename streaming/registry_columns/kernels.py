"""Numba kernels over Arrow string buffers (``offsets``, ``data``): id hashes, last occurrences,
and the open-addressing id table of :mod:`streaming.registry_columns.columns`.

An id table is ``slots`` (``int32``, a power of two long, ``-1`` empty) of row numbers into
columns ``row_hash`` (``uint64``) and the rows' id bytes (``row_off``, ``row_data``); probing is
linear from ``hash & (len(slots) - 1)``, and two ids are the same when their hashes and bytes
are. Kernels assume valid input (callers check) and never allocate the caller's columns.
"""

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

EMPTY = -1
_POLY = 0xEDB88320


def _crc_table() -> np.ndarray:
    table = np.zeros(256, np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table[i] = c
    return table


CRC_TABLE = _crc_table()
"""The byte table of CRC-32 (the reflected IEEE polynomial, as :func:`zlib.crc32`)."""


def string_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets as int64, data as uint8)`` of a string or binary array without nulls (no copy of the data)."""
    arr = arr.cast(pa.large_binary()) if arr.type in (pa.string(), pa.binary()) else arr
    if arr.type == pa.large_string():
        arr = arr.cast(pa.large_binary())
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, np.int64)[arr.offset: arr.offset + len(arr) + 1] if off_buf else np.zeros(1, np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return offsets, data


@numba.njit(cache=True, nogil=True)
def hash_ids(offsets, data, table):
    """``(64-bit hash, CRC-32)`` of each string: FNV-1a with the splitmix64 finaliser, and zlib's CRC."""
    n = len(offsets) - 1
    out = np.empty(n, np.uint64)
    crcs = np.empty(n, np.uint32)
    for i in range(n):
        x = np.uint64(0xCBF29CE484222325)
        crc = np.uint32(0xFFFFFFFF)
        for j in range(offsets[i], offsets[i + 1]):
            b = data[j]
            x = (x ^ np.uint64(b)) * np.uint64(0x100000001B3)
            crc = table[(crc ^ np.uint32(b)) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
        out[i] = x
        crcs[i] = crc ^ np.uint32(0xFFFFFFFF)
    return out, crcs


@numba.njit(cache=True, nogil=True, inline="always")
def _same(a_data, a_lo, a_hi, b_data, b_lo, b_hi):
    if a_hi - a_lo != b_hi - b_lo:
        return False
    for k in range(a_hi - a_lo):
        if a_data[a_lo + k] != b_data[b_lo + k]:
            return False
    return True


def table_size(rows: int) -> int:
    """Slots for ``rows`` ids: a power of two at least twice as many (at least 16)."""
    return max(16, 1 << int(2 * max(rows, 1) - 1).bit_length())


@numba.njit(cache=True, nogil=True)
def last_occurrences(hashes, offsets, data, size):
    """Whether each string is the last occurrence of its value (``size`` slots, > ``len(hashes)``)."""
    n = len(hashes)
    slots = np.full(size, EMPTY, np.int64)
    mask = np.uint64(size - 1)
    keep = np.zeros(n, np.bool_)
    for i in range(n):
        s = np.int64(hashes[i] & mask)
        while True:
            j = slots[s]
            if j == EMPTY:
                slots[s] = i
                keep[i] = True
                break
            if hashes[j] == hashes[i] and _same(data, offsets[j], offsets[j + 1], data, offsets[i], offsets[i + 1]):
                keep[j] = False
                keep[i] = True
                slots[s] = i
                break
            s = (s + 1) & (size - 1)
    return keep


@numba.njit(cache=True, nogil=True)
def find_or_add(slots, row_hash, row_off, row_data, nrows, q_hash, q_off, q_data, add):
    """Rows of query ids (``-1`` when absent), appending an absent id where ``add`` says.

    The caller made room: ``row_hash`` and ``row_off`` for ``nrows + len(q_hash)`` rows,
    ``row_data`` for their bytes, ``slots`` at most half full afterwards. Returns the rows and
    the new row count.
    """
    size = len(slots)
    mask = np.uint64(size - 1)
    rows = np.empty(len(q_hash), np.int64)
    for i in range(len(q_hash)):
        h = q_hash[i]
        lo, hi = q_off[i], q_off[i + 1]
        s = np.int64(h & mask)
        while True:
            r = slots[s]
            if r == EMPTY:
                if add[i]:
                    start = row_off[nrows]
                    for k in range(hi - lo):
                        row_data[start + k] = q_data[lo + k]
                    row_off[nrows + 1] = start + hi - lo
                    row_hash[nrows] = h
                    slots[s] = nrows
                    rows[i] = nrows
                    nrows += 1
                else:
                    rows[i] = EMPTY
                break
            if row_hash[r] == h and _same(row_data, row_off[r], row_off[r + 1], q_data, lo, hi):
                rows[i] = r
                break
            s = (s + 1) & (size - 1)
    return rows, nrows


@numba.njit(cache=True, nogil=True)
def fill_slots(slots, row_hash, nrows):
    """Put rows ``0 .. nrows - 1`` (distinct ids) into empty ``slots``."""
    mask = np.uint64(len(slots) - 1)
    for r in range(nrows):
        s = np.int64(row_hash[r] & mask)
        while slots[s] != EMPTY:
            s = (s + 1) & (len(slots) - 1)
        slots[s] = r


@numba.njit(cache=True, nogil=True)
def gather_strings(offsets, data, rows):
    """The strings at ``rows`` packed: ``(offsets, data)``."""
    out_off = np.empty(len(rows) + 1, np.int64)
    out_off[0] = 0
    for i in range(len(rows)):
        r = rows[i]
        out_off[i + 1] = out_off[i] + offsets[r + 1] - offsets[r]
    out = np.empty(out_off[-1], np.uint8)
    for i in range(len(rows)):
        r = rows[i]
        lo = offsets[r]
        base = out_off[i]
        for k in range(offsets[r + 1] - lo):
            out[base + k] = data[lo + k]
    return out_off, out
