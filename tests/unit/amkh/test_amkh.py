"""AMKH against the oracle: every configuration, every operator, insert / delete / re-insert."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers.amkh import AmkhMatcher
from matchers.amkh.hash_choice import Config, Stats, choose
from matchers.expr import And, Subscription, pred
from tests.differential import check_pickled, insert_delete, no_regex
from tests.strategies import random_event, random_subscriptions


def _paper_workload(rng: random.Random, n: int, x: int = 40):
    """Section 3: e0 = v, ej = v, g0 (= | > | <) v; values in [6, x]."""
    subs = []
    for i in range(n):
        op = rng.choice(("=", "=", ">", "<"))
        subs.append(Subscription.of(f"p{i}", And((pred("e0", "=", rng.randint(6, 9)),
                                                  pred(f"e{rng.randint(1, 9)}", "=", rng.randint(6, 9)),
                                                  pred("g0", op, rng.randint(6, x))))))
    events = [{**{f"e{j}": rng.randint(6, 9) for j in range(10)}, **{f"g{j}": rng.randint(6, 95) for j in range(10)}}
              for _ in range(60)]
    return subs, events


def _run(matcher, subs, events, rng, steps=4) -> None:
    live = insert_delete(matcher, subs, events, rng, steps=steps, batch=len(subs) // 3, gone=lambda step, n: n // 3)
    assert len(matcher) == len(live)
    matcher.remove(list(live))
    assert all(ids == [] for ids in matcher.match_events(events))


CONFIGS = [dict(), dict(G=0), dict(G=1, B=2), dict(G=2, B=0), dict(G=3, B=3)]
"""MKH (``mkh=True``) only runs on the paper's workload: on random subscriptions with many
general attributes its candidate coordinates multiply (the problem AMKH solves)."""


@pytest.mark.parametrize("params", CONFIGS, ids=str)
@pytest.mark.parametrize("seed", [1, 2])
def test_random_subscriptions_every_operator(params, seed):
    rng = random.Random(seed)
    subs = random_subscriptions(rng, 300)
    events = [random_event(rng) for _ in range(80)]
    _run(AmkhMatcher(**params), subs, events, rng)


@pytest.mark.parametrize("params", CONFIGS + [dict(mkh=True)], ids=str)
def test_paper_workload(params):
    rng = random.Random(7)
    subs, events = _paper_workload(rng, 400)
    m = AmkhMatcher(**params)
    _run(m, subs, events, rng, steps=3)
    assert m.counters[0] > 0


def test_adaptive_choice_follows_section_2():
    rng = random.Random(3)
    subs, events = _paper_workload(rng, 600)
    m = AmkhMatcher()
    m.add(subs)
    names = [m.dictionary.attr_names[a] for a in m.config.hashed]
    # two equality clauses per subscription from ten equality-only attributes: G = 1, the general g0
    assert names[-1] == "g0" and set(names[:-1]) == {f"e{j}" for j in range(10)}
    m.match_events(events * 400)  # measured selectivity of g0's non-equality clauses: about a half
    assert m.config.folds[-1] == 2
    # more than 3 equality-only clauses per subscription: G = 0
    st_ = Stats()
    st_.n_conj = 10
    st_.eq_occ = {0: 10, 1: 10, 2: 10, 3: 10}
    st_.cover = {0: 10, 1: 10, 2: 10, 3: 10, 4: 10}
    st_.neq_occ = {4: 10}
    assert choose(st_).hashed == (0, 1, 2, 3)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.sampled_from(CONFIGS))
def test_hypothesis_sequences(seed, params):
    rng = random.Random(seed)
    subs = random_subscriptions(rng, 60)
    events = [random_event(rng) for _ in range(20)]
    _run(AmkhMatcher(**params), subs, events, rng, steps=2)


def test_rejects_bad_parameters():
    with pytest.raises(ValueError):
        AmkhMatcher(B=1)
    with pytest.raises(ValueError):
        AmkhMatcher(G=-1)


def test_pickles_and_keeps_answering():
    rng = random.Random(9)
    subs = no_regex(random_subscriptions(rng, 150))
    check_pickled(AmkhMatcher(), subs, [random_event(rng) for _ in range(40)], 50)


def test_choice_is_sticky():
    st_ = Stats()
    st_.n_conj = 100
    st_.eq_occ = {0: 100}
    st_.neq_occ = {1: 100, 2: 100}
    st_.cover = {0: 100, 1: 100, 2: 100}
    st_.neq_pids = {1: 10, 2: 10}
    st_.sel_num, st_.sel_den = {1: 0.30, 2: 0.28}, {1: 1.0, 2: 1.0}
    first = choose(st_, G=1)
    assert first.hashed == (0, 2) and first.folds == (0, 2)
    st_.sel_num = {1: 0.27, 2: 0.30}  # attribute 1 now a little more selective: keep 2
    assert choose(st_, G=1, current=first) == first
    st_.sel_num = {1: 0.10, 2: 0.30}  # much more selective: switch
    assert choose(st_, G=1, current=first).hashed == (0, 1)
    st_.sel_num = {1: 0.30, 2: 0.25}  # 2.5 expected matches: B stays as it was
    assert choose(st_, G=1, current=Config((0, 2), (0, 0))).folds == (0, 0)
    assert choose(st_, G=1).folds == (0, 2)
