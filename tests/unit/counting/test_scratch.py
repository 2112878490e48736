"""The buffers phase 1 and the counting matcher keep from call to call: what a call returns
is never overwritten by the next, the results are those of fresh buffers (and the oracle's),
and a pickled matcher carries none of them."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest

from matchers.counting import CountingMatcher
from matchers.events import encode
from matchers.phase1.layout import Scratch
from tests.differential import check
from tests.strategies import random_event, random_subscriptions


def _matcher(seed: int) -> tuple[CountingMatcher, list, random.Random]:
    rng = random.Random(seed)
    subs = random_subscriptions(rng, 400)
    matcher = CountingMatcher()
    matcher.add(subs)
    return matcher, subs, rng


@pytest.mark.parametrize("seed", range(4))
def test_results_survive_the_next_calls(seed):
    matcher, subs, rng = _matcher(seed)
    batches = [encode([random_event(rng) for _ in range(rng.choice([1, 30, 200]))], matcher.dictionary)
               for _ in range(6)]
    kept = [(matcher.match(b), matcher.phase1.satisfied(b)) for b in batches]  # each call reuses the buffers
    copies = [(m.offsets.copy(), m.keys.copy(), off.copy(), pid.copy()) for m, (off, pid) in kept]
    for b in reversed(batches):  # and again, in another order: other sizes in the same buffers
        matcher.match(b)
        matcher.phase1.satisfied(b)
        matcher.phase1.satisfied(b, reuse=True)
    for (m, (off, pid)), (m_off, m_keys, s_off, s_pid) in zip(kept, copies, strict=True):
        assert np.array_equal(m.offsets, m_off) and np.array_equal(m.keys, m_keys)
        assert np.array_equal(off, s_off) and np.array_equal(pid, s_pid)


@pytest.mark.parametrize("seed", range(4))
def test_reused_satisfied_equals_fresh(seed):
    matcher, _, rng = _matcher(seed)
    for size in (200, 1, 50, 300, 0, 7):
        batch = encode([random_event(rng) for _ in range(size)], matcher.dictionary)
        off, pid = matcher.phase1.satisfied(batch)
        r_off, r_pid = matcher.phase1.satisfied(batch, reuse=True)
        assert r_off.tolist() == off.tolist() and r_pid.tolist() == pid.tolist()


@pytest.mark.parametrize("seed", range(3))
def test_matches_equal_the_oracle_across_batch_sizes(seed):
    matcher, subs, rng = _matcher(seed)
    live = {s.id: s for s in subs}
    for size in (300, 2, 120, 1, 500):  # shrinking and growing batches in the kept buffers
        check(matcher, live, [random_event(rng) for _ in range(size)])


def test_a_pickled_matcher_carries_no_scratch():
    matcher, subs, rng = _matcher(9)
    evs = [random_event(rng) for _ in range(400)]
    before = matcher.match_events(evs)
    clone = pickle.loads(pickle.dumps(matcher))
    assert len(clone._out_keys) <= 1024
    assert all(len(a) == 0 for e in clone.phase1.evaluators if hasattr(e, "_out") for a in e._out.arrays)
    assert len(clone.phase1._merged.arrays[0]) == 0
    assert clone.match_events(evs) == before
    check(clone, subs, evs)


def test_scratch_grows_and_keeps_its_buffers():
    s = Scratch(2)
    a, b = s.take(10)
    assert len(a) >= 10 and len(b) >= 10 and a.dtype == np.int32
    assert s.take(5)[0] is a  # enough room: the same buffers
    c, _ = s.take(len(a) + 1)
    assert len(c) > len(a) and c is not a
    assert len(pickle.loads(pickle.dumps(s)).arrays[0]) == 0
