"""``emit_keys`` (:mod:`matchers.bitmark.emit`) against a plain reference: random slot bitmaps
over keys that run on by one per word or not (deleted slots, keys with several slots, an
unordered tail, a last partial word), in both the ordered and the unordered ways."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.bitmark.emit import _word_starts, emit_keys, emit_positions, gather_keys, tile_bases


def keys_of(rng: np.random.Generator, n_slots: int, kind: str) -> np.ndarray:
    """Slot keys, non-decreasing with the slot for the ordered kinds (``ordered_*``)."""
    key = np.arange(n_slots, dtype=np.int32) + 7
    if kind == "ordered_deleted":
        key[rng.random(n_slots) < 0.05] = -1
    elif kind == "ordered_shared":  # a key with several slots, across word edges too
        key = np.sort(rng.integers(0, n_slots // 2 + 1, n_slots)).astype(np.int32)
    elif kind == "ordered_tail":  # the indexed slots in order, then a tail in any order
        cut = n_slots * 3 // 4
        key[cut:] = rng.permutation(n_slots + 50)[: n_slots - cut]
        key[:cut] = np.arange(cut) + n_slots + 50
    elif kind == "unordered":
        key = rng.permutation(n_slots).astype(np.int32)
    return key


def check_emit(seed: int, n_slots: int, n_events: int, share: float, kind: str, tile: int) -> None:
    rng = np.random.default_rng(seed)
    key = keys_of(rng, n_slots, kind)
    n_keys = int(key.max()) + 1
    words = (n_slots + 63) // 64
    tiles = (words + tile - 1) // tile
    bits = (rng.random((n_events, words * 64)) < share) & np.concatenate(
        [key >= 0, np.zeros(words * 64 - n_slots, dtype=bool)])
    surv = np.packbits(bits, axis=1, bitorder="little").view(np.uint64).copy()
    hit = np.zeros((n_events, tiles), dtype=np.bool_)
    for e in range(n_events):
        for g in range(tiles):
            hit[e, g] = surv[e, g * tile:(g + 1) * tile].any()
    counts = bits.sum(axis=1).astype(np.int64)
    out = np.full(int(counts.sum()) + 4, -99, dtype=np.int32)
    offsets, found = emit_keys(surv, hit, counts, key, n_keys, tile, kind != "unordered", out)
    assert not surv.any() and not hit.any()
    assert offsets[0] == 0 and offsets[-1] == len(found)
    for e in range(n_events):
        want = np.unique(key[np.flatnonzero(bits[e, :n_slots])])
        assert found[offsets[e]:offsets[e + 1]].tolist() == want.tolist()


@pytest.mark.parametrize("kind", ["contiguous", "ordered_deleted", "ordered_shared", "ordered_tail", "unordered"])
@pytest.mark.parametrize("n_slots, share", [(64 * 9, 0.6), (64 * 9 + 17, 0.03), (1000, 0.0), (130, 1.0)])
def test_emit_matches_reference(kind, n_slots, share):
    check_emit(len(kind) + n_slots, n_slots, 12, share, kind, tile=2)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 700), st.integers(1, 6), st.floats(0.0, 1.0),
       st.sampled_from(["contiguous", "ordered_deleted", "ordered_shared", "ordered_tail", "unordered"]),
       st.integers(1, 4))
def test_emit_matches_reference_hypothesis(seed, n_slots, n_events, share, kind, tile):
    check_emit(seed, n_slots, n_events, share, kind, tile)


def test_word_starts():
    """A word whose keys run on by one gives its first key; others -1; words past the keys
    count as running on; ``increasing`` only when all run on and grow across the words."""
    key = np.arange(200, dtype=np.int32)
    start, increasing = _word_starts(key, 5)
    assert start.tolist()[:4] == [0, 64, 128, 192] and increasing
    key[70] = -1
    start, increasing = _word_starts(key, 4)
    assert start.tolist() == [0, -1, 128, 192] and not increasing
    key = np.arange(128, dtype=np.int32)
    key[64:] -= 10  # runs on within each word, but the second word's keys overlap the first's
    start, increasing = _word_starts(key, 2)
    assert start.tolist() == [0, 54] and not increasing


def check_gather(seed: int, n_events: int, tiles: int, tail: bool, kind: str, tile_slots: int) -> None:
    """:func:`gather_keys` against a plain reference: random tile-major positions (empty segments
    too) over keys that run on by one per tile or not (``keys_of``'s kinds), and tail keys."""
    rng = np.random.default_rng(seed)
    n_slots = tiles * tile_slots - int(rng.integers(0, tile_slots))
    key = keys_of(rng, n_slots, kind)
    base, increasing = tile_bases(key, tile_slots)
    live = [np.flatnonzero(key[g * tile_slots:(g + 1) * tile_slots] >= 0) for g in range(tiles)]
    parts = [[np.sort(rng.choice(live[g], min(len(live[g]), int(rng.integers(0, 6))), replace=False))
              for e in range(n_events)] for g in range(tiles)]
    seg = np.zeros(tiles * n_events + 1, dtype=np.int64)
    for i, (g, e) in enumerate((g, e) for g in range(tiles) for e in range(n_events)):
        seg[i + 1] = seg[i] + len(parts[g][e])
    flat = [x for g in range(tiles) for e in range(n_events) for x in parts[g][e]]
    buf = np.array(flat + [9] * 4, dtype=np.uint16 if tile_slots <= 1 << 16 else np.int32)
    tails = [rng.integers(0, 5000, rng.integers(0, 3)) if tail else np.zeros(0, dtype=np.int64) for _ in range(n_events)]
    tail_off = np.concatenate([[0], np.cumsum([len(t) for t in tails])]).astype(np.int64)
    tail_key = np.concatenate([np.zeros(0), *tails]).astype(np.int32)
    out = np.full(len(flat) + len(tail_key), -9, dtype=np.int32)
    offsets, found = gather_keys(buf, seg, n_events, base, key, tile_slots, tail_off, tail_key, increasing, out)
    assert offsets[0] == 0 and offsets[-1] == len(found)
    for e in range(n_events):
        slots = [g * tile_slots + parts[g][e] for g in range(tiles)]
        want = np.unique(np.concatenate([np.zeros(0, dtype=np.int64), key[np.concatenate(slots).astype(np.int64)],
                                         tails[e]]))
        assert found[offsets[e]:offsets[e + 1]].tolist() == want.astype(int).tolist()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 7), st.integers(1, 5), st.booleans(),
       st.sampled_from(["contiguous", "ordered_deleted", "ordered_shared", "ordered_tail", "unordered"]),
       st.sampled_from([64, 128, 1 << 16, (1 << 16) + 64]))
def test_gather_matches_reference(seed, n_events, tiles, tail, kind, tile_slots):
    check_gather(seed, n_events, tiles, tail, kind, tile_slots)


def test_tile_bases():
    """A tile whose live slots' keys run on by one from its first slot gives that base (deleted
    slots skipped, a tile of deleted slots only 0); others -1; ``increasing`` only when every tile
    is so and their keys grow across the tiles."""
    key = np.arange(300, dtype=np.int32) + 5
    base, increasing = tile_bases(key, 128)
    assert base.tolist() == [5, 133, 261] and increasing
    key[0] = key[140] = -1
    key[256:] = -1
    base, increasing = tile_bases(key, 128)
    assert base.tolist() == [5, 133, 0] and increasing
    key[1] = 0  # the first live slot's key is below its position: no base
    assert tile_bases(key, 128)[0].tolist() == [-1, 133, 0]
    key = np.arange(256, dtype=np.int32)
    key[128:] -= 10  # runs on within each tile, but the second tile's keys overlap the first's
    base, increasing = tile_bases(key, 128)
    assert base.tolist() == [0, 118] and not increasing
    key[130] = 7
    base, increasing = tile_bases(key, 128)
    assert base.tolist() == [0, -1] and not increasing


@pytest.mark.parametrize("share", [0.0, 0.03, 0.5, 1.0])
def test_emit_positions(share):
    """:func:`emit_positions`: the set bits' positions in order, writing at most the 4 places after them."""
    rng = np.random.default_rng(int(share * 100))
    bits = rng.random(64 * 7) < share
    words = np.packbits(bits, bitorder="little").view(np.uint64)
    out = np.full(len(bits) + 4 + 5, 7777, dtype=np.uint16)
    k = emit_positions(words, out, 5)
    assert k - 5 == bits.sum() and out[5:k].tolist() == np.flatnonzero(bits).tolist()
    assert out[:5].tolist() == [7777] * 5 and (out[k + 4:] == 7777).all()
