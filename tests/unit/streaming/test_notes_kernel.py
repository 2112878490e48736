"""The notification kernels (:mod:`streaming.notes_kernel`) against ``hashlib`` and the
record formula they replace."""

from __future__ import annotations

import hashlib
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming import notes_kernel


@settings(max_examples=600, deadline=None)
@given(st.binary(min_size=0, max_size=300))
def test_blake2b_128_equals_hashlib(data):
    assert notes_kernel.blake2b_128_hex(data) == hashlib.blake2b(data, digest_size=16).hexdigest()


def test_blake2b_128_every_length_to_three_blocks():
    """Every length from 0 to 300 (one, two and three blocks, full blocks at 128 and 256) and larger ones."""
    rng = random.Random(3)
    for n in [*range(301), 383, 384, 385, 1000, 4096, 70_000]:
        data = rng.randbytes(n)
        assert notes_kernel.blake2b_128_hex(data) == hashlib.blake2b(data, digest_size=16).hexdigest(), n


def test_pack():
    items = [b"", b"a", b"\x00\xff" * 70, b"", "\u00e9".encode()]
    packed = notes_kernel.pack(items)
    assert packed.bounds.dtype == np.int64 and packed.data.dtype == np.uint8
    assert [packed.data[a:b].tobytes() for a, b in zip(packed.bounds[:-1], packed.bounds[1:], strict=True)] == items
    assert notes_kernel.pack([]).bounds.tolist() == [0]


_BYTES = st.binary(max_size=12) | st.binary(min_size=100, max_size=400)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_BYTES, _BYTES), min_size=1, max_size=6),
       st.lists(st.tuples(_BYTES, _BYTES, st.lists(st.integers(0, 50), max_size=5)), max_size=6))
def test_write_values_equals_the_formula(subs, events):
    """Record ``k``: ``{"id":"<hex of hashed[w] + position[j]>","subscription":`` + json[w] + tail[j],
    in the order of ``which`` event by event; hash inputs across block bounds included."""
    bounds, which = [0], []
    for *_, picks in events:
        which += [p % len(subs) for p in picks]
        bounds.append(len(which))
    data, ends = notes_kernel.write_values(
        notes_kernel.pack([h for h, _ in subs]), notes_kernel.pack([j for _, j in subs]),
        notes_kernel.pack([p for p, _, _ in events]), notes_kernel.pack([t for _, t, _ in events]), bounds, which)
    want = []
    for j, (position, tail, _) in enumerate(events):
        for w in which[bounds[j]:bounds[j + 1]]:
            hashed, js = subs[w]
            nid = hashlib.blake2b(hashed + position, digest_size=16).hexdigest().encode()
            want.append(b'{"id":"%s","subscription":%s%s' % (nid, js, tail))
    assert ends.tolist()[0] == 0 and len(ends) == len(which) + 1
    assert [data[a:b].tobytes() for a, b in zip(ends[:-1], ends[1:], strict=True)] == want


def test_warm():
    notes_kernel.warm()  # the service's start-up call: compiles or loads the kernels, raises nothing


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=20) | st.text(min_size=100, max_size=300), max_size=8))
def test_hash_inputs_and_quoted(ids):
    """``hash_inputs``: ``b"%d:%s" % (len(id), utf8)``; ``quoted``: ``b'"%s"' % utf8``."""
    utf8 = [s.encode("utf-8", "surrogatepass") for s in ids]
    packed = notes_kernel.pack(utf8)
    hashed, quoted = notes_kernel.hash_inputs(packed, [len(s) for s in ids]), notes_kernel.quoted(packed)

    def listed(strings):
        return [strings.data[a:b].tobytes() for a, b in zip(strings.bounds[:-1], strings.bounds[1:], strict=True)]

    assert listed(hashed) == [b"%d:%s" % (len(s), u) for s, u in zip(ids, utf8, strict=True)]
    assert listed(quoted) == [b'"%s"' % u for u in utf8]
    assert notes_kernel.hash_inputs(packed, [10**12] * len(ids)).bounds[-1] == sum(map(len, utf8)) + 14 * len(ids)


_INT64 = st.integers(-2**63, 2**63 - 1) | st.sampled_from([-2**63, 2**63 - 1, -1, 0, 9, 10, -10, 99, 100])
_PADDED = st.builds(lambda a, body, b: a + body + b, st.text(" \t\n\r\x0b\x0c", max_size=3).map(str.encode),
                    _BYTES, st.text(" \t\n\r\x0b\x0c", max_size=3).map(str.encode))


def _listed(strings):
    return [strings.data[a:b].tobytes() for a, b in zip(strings.bounds[:-1], strings.bounds[1:], strict=True)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_BYTES, _BYTES), min_size=1, max_size=3),
       st.lists(st.tuples(st.integers(0, 2), _BYTES, _INT64, _INT64, st.none() | _INT64, _PADDED), max_size=8),
       st.booleans(), _BYTES)
def test_event_parts_equal_the_format(topics, events, embed, mid):
    """Per event: ``,"kind":"match","event_id":ID,"topic":T,"partition":%d,"offset":%d,"event_time_ms":%d|null``
    + mid (+ ``,"event":`` + the raw stripped as ``bytes.strip``) + ``}``, its head up to ``mid``'s end,
    and ``|topic|partition|offset``; every 64-bit integer in decimal."""
    events = [(t % len(topics), *rest) for t, *rest in events]
    n = len(events)
    got = notes_kernel.event_parts(
        np.array([e[0] for e in events], dtype=np.int64), notes_kernel.pack([j for j, _ in topics]),
        notes_kernel.pack([h for _, h in topics]), notes_kernel.pack([e[1] for e in events]),
        np.array([e[2] for e in events], dtype=np.int64).reshape(n), np.array([e[3] for e in events], dtype=np.int64).reshape(n),
        np.array([0 if e[4] is None else e[4] for e in events], dtype=np.int64).reshape(n),
        np.array([e[4] is not None for e in events], dtype=np.bool_).reshape(n),
        notes_kernel.pack([e[5] for e in events]) if embed else None, mid)
    heads = [b',"kind":"match","event_id":%s,"topic":%s,"partition":%d,"offset":%d,"event_time_ms":%s%s' % (
        ident, topics[t][0], p, o, b"null" if ms is None else b"%d" % ms, mid) for t, ident, p, o, ms, _ in events]
    tails = [b'%s,"event":%s}' % (h, e[5].strip()) if embed else h + b"}" for h, e in zip(heads, events, strict=True)]
    assert _listed(got.tails) == tails
    assert [t[:h] for t, h in zip(tails, got.heads.tolist(), strict=True)] == heads
    assert _listed(got.positions) == [b"%s|%d|%d" % (topics[t][1], p, o) for t, _, p, o, _, _ in events]
