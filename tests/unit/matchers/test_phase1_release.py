"""PredicateIndex.release_counted (references dropped by id, in bulk) against release of each
predicate object in turn: same live predicates, ids, reference counts and satisfied ids,
including a predicate shared by released and kept references and counts reaching zero."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.events import Dictionary, encode
from matchers.phase1 import PredicateIndex
from tests.strategies import random_event, random_subscriptions


def _preds(seed: int, n: int) -> list:
    rng = random.Random(seed)
    subs = random_subscriptions(rng, n)  # (extended ones hold presence tests, which phase 1 does not own)
    return [p for s in subs for conj in s.conjunctions for p in conj]


def _state(index: PredicateIndex, ids: bool) -> dict:
    """Each live predicate's reference count (and id if ``ids``)."""
    return {p: (index.id_of(p) if ids else 0, int(index._refs[index.id_of(p)])) for p in index._ids}


def _pair(preds: list, release: list) -> tuple[PredicateIndex, PredicateIndex]:
    """Two indexes holding ``preds``, ``release`` dropped from one per object, from the other by id."""
    d1, d2 = Dictionary(), Dictionary()
    one, bulk = PredicateIndex(d1), PredicateIndex(d2)
    one.acquire_many(preds)
    bulk.acquire_many(preds)
    for p in release:
        one.release(p)
    counts = Counter(bulk.id_of(p) for p in release)
    pids = np.fromiter(counts, dtype=np.int64, count=len(counts))
    bulk.release_counted(pids, np.fromiter(counts.values(), dtype=np.int64, count=len(counts)))
    return one, bulk


def _same(one: PredicateIndex, bulk: PredicateIndex, seed: int, ids: bool = True) -> None:
    """Same live predicates and counts (and ids: before freed ids are reused, in an order
    each way gives its own), same satisfied predicates of random events."""
    assert len(one) == len(bulk)
    assert _state(one, ids) == _state(bulk, ids)
    assert sorted(one._free) == sorted(bulk._free) or not ids
    rng = random.Random(seed)
    evs = [random_event(rng, True) for _ in range(60)]
    sat = [(ix, ix.satisfied(encode(evs, ix.dictionary))) for ix in (one, bulk)]
    (off_a, pid_a), (off_b, pid_b) = (s for _, s in sat)
    assert off_a.tolist() == off_b.tolist()
    for i in range(len(evs)):
        a = {one.predicate(int(p)) for p in pid_a[off_a[i]:off_a[i + 1]]}
        assert a == {bulk.predicate(int(p)) for p in pid_b[off_b[i]:off_b[i + 1]]}


@pytest.mark.parametrize("seed", range(6))
def test_release_counted_equals_release_of_each(seed):
    preds = _preds(seed, 150)
    rng = random.Random(seed)
    release = rng.sample(preds, len(preds) // 2)  # shared predicates keep some references, others reach zero
    one, bulk = _pair(preds, release)
    assert any(p not in one._ids for p in release) and any(p in one._ids for p in release)
    _same(one, bulk, seed)
    again = rng.sample(preds, 40)  # re-added after the release: freed ids are reused
    one.acquire_many(again)
    bulk.acquire_many(again)
    _same(one, bulk, seed, ids=False)


def test_release_counted_to_empty_and_checks_its_arguments():
    preds = _preds(7, 60)
    one, bulk = _pair(preds, preds)
    assert len(bulk) == 0 and _state(bulk, True) == {}
    _same(one, bulk, 7)
    index = PredicateIndex(Dictionary())
    pids = index.acquire_many(preds[:3] + preds[:1])
    with pytest.raises(ValueError):
        index.release_counted(np.array([pids[0]]), np.array([3]))
    with pytest.raises(ValueError):
        index.release_counted(np.array([pids[0], pids[0]]))
    with pytest.raises(ValueError):
        index.release_counted(np.array([index.capacity]))
    assert int(index._refs[pids[0]]) == 2  # nothing changed
    index.release_counted(np.zeros(0, dtype=np.int64))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), share=st.floats(0.0, 1.0))
def test_release_counted_equals_release_of_each_for_any_sample(seed, share):
    preds = _preds(seed, 40)
    release = random.Random(seed).sample(preds, int(share * len(preds)))
    _same(*_pair(preds, release), seed)
