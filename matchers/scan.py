"""Kernels of the JSON path: a batch of JSON events scanned straight to encoded rows.

:func:`scan_records` (kernel :func:`scan`) reads the bytes of a batch of events once and writes, per row, the
entries :class:`matchers.events.EventBatch` holds: attribute ids and string codes come
from one open-addressing table (:func:`table_insert`) of the dictionary's attribute
names (tag ``-1``) and of each attribute's strings (tag = attribute id), looked up by
the bytes themselves.  Attributes absent from the table are left out (no subscription
uses them).  The scanner takes the common case only and marks every other event
*slow* (the caller then takes the general path, which gives the exact reason of a
refusal): escapes, bytes past ASCII, control characters, numbers that do not convert
exactly (more than 15 digits or a power of ten past 1e22), malformed JSON, a root
that is not an object, duplicate keys or flattened names, an array inside an array, more
than one array of two or more elements, and anything past the limits.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from matchers.arrays import enlarged
from matchers.scan_types import NO_BOUND, ScanLimits, ScanOut, ScanTable

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
ATTR_TAG = -1
"""Tag of attribute names in the table (strings carry their attribute's id)."""

OK, SLOW = 0, 1
NUM, STR, BOOL, NULL = 0, 1, 2, 3  # matchers.expr.Kind (checked in matchers.events)
_POW10 = np.array([10.0 ** i for i in range(23)])


@njit(cache=True, nogil=True)
def fnv(h, data, lo, hi):
    """FNV-1a of ``data[lo:hi]`` continued from ``h``."""
    for i in range(lo, hi):
        h = (h ^ np.uint64(data[i])) * FNV_PRIME
    return h


@njit(cache=True, nogil=True)
def _slot_hash(h, tag):
    return h ^ (np.uint64(tag + 2) * _GOLDEN)


@njit(cache=True, nogil=True)
def _find(t_hash, t_tag, t_start, t_len, blob, h, tag, pre, n_pre, data, lo, hi):
    """Slot of ``(tag, pre[:n_pre] + data[lo:hi])`` in the table (``h`` the hash of those
    bytes), or of the empty slot where it would go. A name's lookup takes its parents' path
    and its key's bytes apart: copying each key after the path cost the W1 scan 13 %.
    The kernels unpack their :class:`ScanTable` once: passing it whole on each lookup made
    the scan 1.2x slower (1.7x inlined)."""
    mask = len(t_hash) - 1
    s = np.int64(_slot_hash(h, tag) & np.uint64(mask))
    n = n_pre + hi - lo
    while True:
        if t_len[s] < 0:
            return s
        if t_hash[s] == h and t_tag[s] == tag and t_len[s] == n:
            start = t_start[s]
            same = True
            for k in range(n_pre):
                if blob[start + k] != pre[k]:
                    same = False
                    break
            if same:
                start += n_pre
                for k in range(hi - lo):
                    if blob[start + k] != data[lo + k]:
                        same = False
                        break
            if same:
                return s
        s = (s + 1) & mask


@njit(cache=True, nogil=True)
def table_insert(table, tags, starts, ends, values):
    """Insert ``(tags[i], table.blob[starts[i]:ends[i]]) -> values[i]`` (the table has room)."""
    t_hash, t_tag, t_start, t_len, t_val, blob = table
    for i in range(len(tags)):
        h = fnv(FNV_OFFSET, blob, starts[i], ends[i])
        s = _find(t_hash, t_tag, t_start, t_len, blob, h, tags[i], blob, 0, blob, starts[i], ends[i])
        t_hash[s] = h
        t_tag[s] = tags[i]
        t_start[s] = starts[i]
        t_len[s] = ends[i] - starts[i]
        t_val[s] = values[i]


@njit(cache=True, nogil=True)
def _lookup(t_hash, t_tag, t_start, t_len, t_val, blob, h, tag, pre, n_pre, data, lo, hi):
    """The value of ``(tag, pre[:n_pre] + data[lo:hi])``, or -1."""
    s = _find(t_hash, t_tag, t_start, t_len, blob, h, tag, pre, n_pre, data, lo, hi)
    return t_val[s] if t_len[s] >= 0 else -1


@njit(cache=True, nogil=True)
def _ws(buf, p, end):
    while p < end and (buf[p] == 32 or buf[p] == 10 or buf[p] == 13 or buf[p] == 9):
        p += 1
    return p


@njit(cache=True, nogil=True)
def _string_hash(buf, p, end, h):
    """``(index of the closing quote, FNV-1a of the string continued from h)`` of the string
    opened before ``p``; the index is ``-1`` if the string is not plain ASCII."""
    while p < end:
        c = buf[p]
        if c == 34:
            return p, h
        if c == 92 or c < 32 or c >= 128:
            return -1, h
        h = (h ^ np.uint64(c)) * FNV_PRIME
        p += 1
    return -1, h


@njit(cache=True, nogil=True)
def _number(buf, p, end):
    """``(value, end, is_plain_int)`` of the number at ``p``; ``end == -1`` when not exact or not JSON."""
    neg = False
    if p < end and buf[p] == 45:
        neg = True
        p += 1
    if p >= end or buf[p] < 48 or buf[p] > 57:
        return 0.0, -1, False
    m = np.int64(0)
    digits = 0
    if buf[p] == 48:
        p += 1
        if p < end and 48 <= buf[p] <= 57:
            return 0.0, -1, False
    else:
        while p < end and 48 <= buf[p] <= 57:
            m = m * 10 + (buf[p] - 48)
            digits += 1
            p += 1
            if digits > 15:
                return 0.0, -1, False
    exp = 0
    plain = True
    if p < end and buf[p] == 46:
        plain = False
        p += 1
        if p >= end or buf[p] < 48 or buf[p] > 57:
            return 0.0, -1, False
        while p < end and 48 <= buf[p] <= 57:
            if m == 0 and buf[p] == 48:
                exp -= 1
            else:
                m = m * 10 + (buf[p] - 48)
                digits += 1
                exp -= 1
                if digits > 15:
                    return 0.0, -1, False
            p += 1
    if p < end and (buf[p] == 101 or buf[p] == 69):
        plain = False
        p += 1
        eneg = False
        if p < end and (buf[p] == 43 or buf[p] == 45):
            eneg = buf[p] == 45
            p += 1
        if p >= end or buf[p] < 48 or buf[p] > 57:
            return 0.0, -1, False
        e = 0
        while p < end and 48 <= buf[p] <= 57:
            e = e * 10 + (buf[p] - 48)
            p += 1
            if e > 400:
                return 0.0, -1, False
        exp += -e if eneg else e
    if m == 0:
        value = 0.0
    elif exp > 22 or exp < -22:
        return 0.0, -1, False
    elif exp >= 0:
        value = float(m) * _POW10[exp]
    else:
        value = float(m) / _POW10[-exp]
    if neg and not (plain and m == 0):  # "-0" is the integer 0; "-0.0" keeps its sign
        value = -value
    return value, p, plain


@njit(cache=True, nogil=True)
def _has_duplicate(values, n, seen, stamps, stamp):
    """Whether ``values[:n]`` (hashes) holds a value twice: an open-addressing set ``seen`` whose
    slots are live where ``stamps`` holds ``stamp`` (a value not used before; ``len(seen)`` a
    power of two past ``2 * n``).  Sorting them by insertion cost the scan 6 %."""
    mask = len(seen) - 1
    for i in range(n):
        v = values[i]
        s = np.int64((v ^ (v >> np.uint64(29))) & np.uint64(mask))
        while stamps[s] == stamp:
            if seen[s] == v:
                return True
            s = (s + 1) & mask
        stamps[s] = stamp
        seen[s] = v
    return False


@njit(cache=True, nogil=True)
def _eq(buf, lo, hi, key):
    if len(key) != hi - lo:
        return False
    for k in range(hi - lo):
        if buf[lo + k] != key[k]:
            return False
    return True


@njit(cache=True, nogil=True)
def scan(buf, starts, ends, table, limits, key0, key1, drop0):
    """Scan events ``buf[starts[i]:ends[i]]`` to encoded rows, a :class:`ScanOut`
    (``key0`` is left out of the attributes when ``drop0``); ``limits`` is a
    :class:`ScanLimits` whose ``string_length`` is at most the longest event."""
    max_bytes, max_depth, max_attrs = limits.event_bytes, limits.depth, limits.attributes
    max_string, max_rows = limits.string_length, limits.array_rows
    t_hash, t_tag, t_start, t_len, t_val, blob = table
    n = len(starts)
    status = np.zeros(n, np.int8)
    key_spans = np.full((n, 4), -1, np.int64)
    row_event = np.empty(1024, np.int64)
    row_offsets = np.zeros(1025, np.int64)
    ecap = 4096
    attrs = np.empty(ecap, np.int32)
    kinds = np.empty(ecap, np.int8)
    nums = np.empty(ecap, np.float64)
    codes = np.empty(ecap, np.int32)
    texts = np.empty(ecap, np.int32)
    n_rows = 0
    n_ent = 0
    s_mask = 1023  # distinct strings of the batch: open addressing over spans of buf
    s_slot = np.full(s_mask + 1, -1, np.int64)
    s_hash = np.zeros(s_mask + 1, np.uint64)
    text_spans = np.empty((256, 2), np.int64)
    n_texts = 0
    path = np.empty(max_string + 2, np.uint8)
    m = 2
    for ev in range(n):
        m = max(m, (ends[ev] - starts[ev]) // 2 + 2)  # at most one scalar (or key) per two bytes
    e_attr = np.empty(m, np.int32)
    e_kind = np.empty(m, np.int8)
    e_num = np.empty(m, np.float64)
    e_code = np.empty(m, np.int32)
    e_text = np.empty(m, np.int32)
    e_elem = np.empty(m, np.int32)  # element of its array (-1 outside arrays)
    e_arr = np.empty(m, np.int32)  # its array (-1 outside arrays)
    e_leaf = np.empty(m, np.uint64)  # hash of its name
    k_hash = np.empty(m, np.uint64)  # key occurrences, mixed with their array element
    arr_len = np.zeros(m, np.int32)
    leaves = np.empty(m, np.uint64)
    pair = np.empty(m, np.uint64)
    sel = np.empty(m, np.int64)
    d_size = 16
    while d_size < 2 * m:
        d_size *= 2
    d_seen = np.empty(d_size, np.uint64)  # the set of _has_duplicate, live slots stamped with its call
    d_stamp = np.zeros(d_size, np.int64)
    d_call = 0
    st_kind = np.empty(max_depth + 1, np.int8)  # containers: object 0 / array 1,
    st_plen = np.empty(max_depth + 1, np.int64)  # path length and hash before their members
    st_hash = np.empty(max_depth + 1, np.uint64)
    for ev in range(n):
        lo, hi = starts[ev], ends[ev]
        n_e = 0
        n_k = 0
        n_arr = 0
        cur_arr = -1
        cur_elem = -1
        slow = False
        p = _ws(buf, lo, hi)
        if p >= hi or buf[p] != 123 or hi - lo > max_bytes:
            status[ev] = SLOW
            continue
        st_kind[0] = 0
        st_plen[0] = 0
        st_hash[0] = FNV_OFFSET
        depth = 1
        p += 1
        first = True  # right after an opening bracket (else right after a value)
        while True:
            p = _ws(buf, p, hi)
            if p >= hi:
                slow = True
                break
            c = buf[p]
            kind = st_kind[depth - 1]
            if c == 125 or c == 93:  # } or ]
                if (c == 125) != (kind == 0):
                    slow = True
                    break
                depth -= 1
                p += 1
                if kind == 1:
                    cur_arr = -1
                    cur_elem = -1
                if depth == 0:
                    break
                first = False
                continue
            if not first:
                if c != 44:
                    slow = True
                    break
                p = _ws(buf, p + 1, hi)
                if p >= hi:
                    slow = True
                    break
                c = buf[p]
            first = False
            top_key = -1  # 0/1 when the value is that of the top-level key0/key1
            if kind == 0:
                if c != 34:
                    slow = True
                    break
                q, h = _string_hash(buf, p + 1, hi, st_hash[depth - 1])
                plen = st_plen[depth - 1]
                if q < 0 or plen + (q - p - 1) > max_string:
                    slow = True
                    break
                k_lo, k_hi = p + 1, q  # the key's bytes: copied after path[:plen] only for a container
                scope = np.uint64(0) if cur_arr < 0 else np.uint64(cur_arr * 65536 + cur_elem + 1)
                k_hash[n_k] = h ^ (scope * _GOLDEN)
                n_k += 1
                if depth == 1:
                    if _eq(buf, p + 1, q, key0):
                        top_key = 0
                    elif _eq(buf, p + 1, q, key1):
                        top_key = 1
                p = _ws(buf, q + 1, hi)
                if p >= hi or buf[p] != 58:
                    slow = True
                    break
                p = _ws(buf, p + 1, hi)
                if p >= hi:
                    slow = True
                    break
                c = buf[p]
            else:
                plen = st_plen[depth - 1]
                k_lo, k_hi = 0, 0
                h = st_hash[depth - 1]
                cur_elem = arr_len[cur_arr]
                arr_len[cur_arr] += 1
            # a value at p, named path[:plen] + buf[k_lo:k_hi] with hash h
            if c == 123 or c == 91:  # { or [
                if depth >= max_depth or top_key >= 0 or (c == 91 and cur_arr >= 0):
                    slow = True  # too deep, a container id, or an array inside an array
                    break
                for k in range(k_hi - k_lo):
                    path[plen + k] = buf[k_lo + k]
                plen += k_hi - k_lo
                if c == 91:
                    cur_arr = n_arr
                    n_arr += 1
                    arr_len[cur_arr] = 0
                    st_kind[depth] = 1
                    st_plen[depth] = plen
                    st_hash[depth] = h
                else:
                    path[plen] = 46
                    st_kind[depth] = 0
                    st_plen[depth] = plen + 1
                    st_hash[depth] = (h ^ np.uint64(46)) * FNV_PRIME
                depth += 1
                p += 1
                first = True
                continue
            v_kind = NUM
            v_num = np.nan
            s_lo = -1
            s_hi = -1
            v_start = p
            sh = FNV_OFFSET
            if c == 34:
                q, sh = _string_hash(buf, p + 1, hi, FNV_OFFSET)
                if q < 0 or q - p - 1 > max_string:
                    slow = True
                    break
                v_kind = STR
                s_lo, s_hi = p + 1, q
                p = q + 1
            elif c == 116 and hi - p >= 4 and buf[p + 1] == 114 and buf[p + 2] == 117 and buf[p + 3] == 101:
                v_kind, v_num, p = BOOL, 1.0, p + 4
            elif c == 102 and hi - p >= 5 and buf[p + 1] == 97 and buf[p + 2] == 108 and buf[p + 3] == 115 and buf[p + 4] == 101:
                v_kind, v_num, p = BOOL, 0.0, p + 5
            elif c == 110 and hi - p >= 4 and buf[p + 1] == 117 and buf[p + 2] == 108 and buf[p + 3] == 108:
                v_kind, p = NULL, p + 4
            else:
                q = p  # a plain integer of at most 15 digits here, inline: the call to _number cost W1 0.5 µs
                iv = np.int64(0)
                while q < hi and 48 <= buf[q] <= 57 and q - p < 15:
                    iv = iv * 10 + (buf[q] - 48)
                    q += 1
                if q == p or (c == 48 and q > p + 1) or (q < hi and (48 <= buf[q] <= 57 or buf[q] == 46
                                                                      or buf[q] == 101 or buf[q] == 69)):
                    v_num, q, _plain = _number(buf, p, hi)  # a sign, a fraction, an exponent, a leading 0, or long
                    if q < 0:
                        slow = True
                        break
                else:
                    v_num = float(iv)
                p = q
            if p < hi and not (buf[p] == 44 or buf[p] == 125 or buf[p] == 93 or buf[p] == 32
                               or buf[p] == 10 or buf[p] == 13 or buf[p] == 9):
                slow = True  # e.g. "truex", "1x"
                break
            if top_key >= 0:
                key_spans[ev, 2 * top_key] = v_start - lo
                key_spans[ev, 2 * top_key + 1] = p - lo
                if top_key == 0 and drop0:
                    continue
            aid = _lookup(t_hash, t_tag, t_start, t_len, t_val, blob, h, ATTR_TAG, path, plen, buf, k_lo, k_hi)
            e_leaf[n_e] = h
            e_elem[n_e] = cur_elem
            e_arr[n_e] = cur_arr
            e_attr[n_e] = aid
            e_kind[n_e] = v_kind
            e_num[n_e] = v_num
            e_code[n_e] = -1
            e_text[n_e] = -1
            if aid >= 0 and v_kind == STR:
                e_code[n_e] = _lookup(t_hash, t_tag, t_start, t_len, t_val, blob, sh, aid, buf, 0, buf, s_lo, s_hi)
                s = np.int64(sh & np.uint64(s_mask))
                while True:
                    t = s_slot[s]
                    if t < 0:
                        if n_texts == len(text_spans):
                            grown = np.empty((2 * n_texts, 2), np.int64)
                            grown[:n_texts] = text_spans
                            text_spans = grown
                        text_spans[n_texts, 0] = s_lo
                        text_spans[n_texts, 1] = s_hi
                        t = n_texts
                        n_texts += 1
                        s_slot[s] = t
                        s_hash[s] = sh
                        if 2 * n_texts > s_mask:  # keep the table at most half full
                            s_mask = 2 * s_mask + 1
                            s_slot = np.full(s_mask + 1, -1, np.int64)
                            s_hash = np.zeros(s_mask + 1, np.uint64)
                            for j in range(n_texts):
                                hj = fnv(FNV_OFFSET, buf, text_spans[j, 0], text_spans[j, 1])
                                sj = np.int64(hj & np.uint64(s_mask))
                                while s_slot[sj] >= 0:
                                    sj = (sj + 1) & s_mask
                                s_slot[sj] = j
                                s_hash[sj] = hj
                        break
                    if s_hash[s] == sh and _eq(buf, s_lo, s_hi, buf[text_spans[t, 0]:text_spans[t, 1]]):
                        break
                    s = (s + 1) & s_mask
                e_text[n_e] = t
            n_e += 1
        d_call += 1
        if slow or depth != 0 or _ws(buf, p, hi) != hi or _has_duplicate(k_hash, n_k, d_seen, d_stamp, d_call):
            status[ev] = SLOW  # malformed, past a limit, or duplicate keys / colliding names
            continue
        dropped = 1 if drop0 and key_spans[ev, 0] >= 0 else 0  # check_shape counts the dropped key
        if n_e + dropped > max_attrs and len(np.unique(e_leaf[:n_e])) + dropped > max_attrs:
            status[ev] = SLOW  # more distinct attribute names than the limit
            continue
        multi = -1  # the one array of two or more elements: one row per element
        for a in range(n_arr):
            if arr_len[a] >= 2:
                if multi >= 0:
                    slow = True
                multi = a
        k_rows = 1 if multi < 0 else arr_len[multi]
        if slow or k_rows > max_rows:
            status[ev] = SLOW
            continue
        nb = 0  # the names of each row's leaves must be distinct
        for j in range(n_e):
            if e_arr[j] != multi or multi < 0:
                leaves[nb] = e_leaf[j]
                nb += 1
        d_call += 1
        if _has_duplicate(leaves, nb, d_seen, d_stamp, d_call):
            status[ev] = SLOW
            continue
        if multi >= 0:
            for r in range(k_rows):
                pair[:nb] = leaves[:nb]
                nx = nb
                for j in range(n_e):
                    if e_arr[j] == multi and e_elem[j] == r:
                        pair[nx] = e_leaf[j]
                        nx += 1
                d_call += 1
                if _has_duplicate(pair, nx, d_seen, d_stamp, d_call):
                    slow = True
                    break
            if slow:
                status[ev] = SLOW
                continue
        for r in range(k_rows):  # emit the rows: known attributes only, sorted by attribute id
            ns = 0
            for j in range(n_e):
                if e_attr[j] >= 0 and (multi < 0 or e_arr[j] != multi or e_elem[j] == r):
                    a = e_attr[j]
                    k = ns - 1
                    while k >= 0 and e_attr[sel[k]] > a:  # insertion by attribute id
                        sel[k + 1] = sel[k]
                        k -= 1
                    sel[k + 1] = j
                    ns += 1
            if n_rows == len(row_event):
                row_event = enlarged(row_event, n_rows, n_rows + 1)
                g2 = np.zeros(2 * n_rows + 1, np.int64)
                g2[:n_rows + 1] = row_offsets
                row_offsets = g2
            if n_ent + ns > len(attrs):
                c2 = n_ent + ns
                attrs = enlarged(attrs, n_ent, c2)
                kinds = enlarged(kinds, n_ent, c2)
                nums = enlarged(nums, n_ent, c2)
                codes = enlarged(codes, n_ent, c2)
                texts = enlarged(texts, n_ent, c2)
            for o in range(ns):
                j = sel[o]
                attrs[n_ent] = e_attr[j]
                kinds[n_ent] = e_kind[j]
                nums[n_ent] = e_num[j]
                codes[n_ent] = e_code[j]
                texts[n_ent] = e_text[j]
                n_ent += 1
            row_event[n_rows] = ev
            n_rows += 1
            row_offsets[n_rows] = n_ent
    return ScanOut(status, row_event[:n_rows], row_offsets[:n_rows + 1], attrs[:n_ent], kinds[:n_ent],
                   nums[:n_ent], codes[:n_ent], texts[:n_ent], text_spans[:n_texts], key_spans)


def scan_records(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, table: ScanTable, limits: ScanLimits,
                 keys: tuple[str, str] = ("", ""), drop_first: bool = False) -> ScanOut:
    """Scan events ``buf[starts[i]:ends[i]]`` against ``table`` within ``limits`` (:func:`scan`):
    the spans of the top-level values of ``keys`` are wanted, the first left out of the
    attributes with ``drop_first``."""
    longest = int((ends - starts).max()) if len(starts) else 0
    bounded = ScanLimits(int(limits.depth), int(min(limits.attributes, NO_BOUND)),
                         int(min(limits.string_length, longest)), int(min(limits.array_rows, NO_BOUND)),
                         int(limits.event_bytes))
    if buf.flags.writeable:  # one type of buffer whoever calls (bytes are read-only): one compilation
        buf = buf.view()
        buf.flags.writeable = False
    return scan(buf, starts, ends, table, bounded, np.frombuffer(keys[0].encode("utf-8"), np.uint8),
                np.frombuffer(keys[1].encode("utf-8"), np.uint8), bool(drop_first))


_name_tables: dict[tuple[str, ...], ScanTable] = {}


def name_table(names: tuple[str, ...]) -> ScanTable:
    """The table of the attribute ``names`` (ids 0, 1, ...; no strings), kept for the next call."""
    table = _name_tables.get(names)
    if table is None:
        chunks = [n.encode("utf-8") for n in names]
        lengths = np.array([len(c) for c in chunks], np.int64)
        ends = np.cumsum(lengths)
        size = 16
        while size < 2 * len(names):
            size *= 2
        table = ScanTable.empty(size, np.frombuffer(b"".join(chunks) + b"\0", np.uint8).copy())
        table_insert(table, np.full(len(names), ATTR_TAG, np.int64), ends - lengths, ends,
                     np.arange(len(names), dtype=np.int32))
        if len(_name_tables) >= 32:  # the names change as patterns come and reads resolve
            _name_tables.clear()
        _name_tables[names] = table
    return table
