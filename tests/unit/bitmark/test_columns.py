"""Bit-marking built from columns (:meth:`BitMarkMatcher.add_intervals`) against the same
subscriptions built from objects and against the oracle: open and closed edges, equal
bounds, repeated attributes, inserts and deletes after a columnar build."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers import oracle
from matchers.bitmark import BitMarkMatcher
from matchers.bitmark.ids import LazyKeys
from matchers.bitmark.layout import Intervals
from matchers.expr import And, Subscription, pred
from scripts.workloads import dense_arrays, dense_events, dense_subscriptions

NAMES = ("a", "b", "c")
VALUES = [0.0, 1.0, 2.0, 3.0]
EVENT_VALUES = [*VALUES, 0.5, 2.5, -1.0, 4.0, math.nextafter(1.0, math.inf), math.nextafter(2.0, -math.inf)]

# one interval: attribute, low, high, low open, high open, as BETWEEN (when both closed and ordered)
interval = st.tuples(st.integers(0, len(NAMES) - 1), st.sampled_from(VALUES), st.sampled_from(VALUES),
                     st.booleans(), st.booleans(), st.booleans())
conjunction = st.lists(interval, min_size=1, max_size=4)
event = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(EVENT_VALUES), max_size=len(NAMES))


def as_subscription(sub_id: str, conj: list) -> Subscription:
    """The conjunction as predicates (``>``/``>=`` and ``<``/``<=``, or BETWEEN)."""
    preds = []
    for a, lo, hi, lo_open, hi_open, between in conj:
        if between and not lo_open and not hi_open and lo <= hi:
            preds.append(pred(NAMES[a], "between", (lo, hi)))
        else:
            preds += [pred(NAMES[a], ">" if lo_open else ">=", lo), pred(NAMES[a], "<" if hi_open else "<=", hi)]
    return Subscription.of(sub_id, preds[0] if len(preds) == 1 else And(tuple(preds)))


def as_columns(conjs: list[list]) -> Intervals:
    """The conjunctions as closed float intervals (an open bound moved one float inward)."""
    flat = [x for conj in conjs for x in conj]
    off = np.zeros(len(conjs) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in conjs], out=off[1:])
    lo = [math.nextafter(x[1], math.inf) if x[3] else x[1] for x in flat]
    hi = [math.nextafter(x[2], -math.inf) if x[4] else x[2] for x in flat]
    return Intervals(off, np.array([x[0] for x in flat], dtype=np.int64), np.array(lo, dtype=np.float64),
                     np.array(hi, dtype=np.float64), NAMES)


def small() -> BitMarkMatcher:
    matcher = BitMarkMatcher()
    matcher.tail_min = 8  # rebuilds after few changes
    return matcher


def agree(columnar: BitMarkMatcher, objects: BitMarkMatcher, subs: dict[str, Subscription], evs: list[dict]):
    got = columnar.match_events(evs)
    assert got == objects.match_events(evs)
    assert got == [sorted(oracle.match(subs.values(), e)) for e in evs]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(conjs=st.lists(conjunction, min_size=1, max_size=40), more=st.lists(conjunction, max_size=20),
       evs=st.lists(event, min_size=1, max_size=8), drop=st.integers(0, 2**32 - 1))
def test_columns_match_objects_and_oracle(conjs, more, evs, drop):
    ids = [f"s{i}" for i in range(len(conjs))]
    subs = {i: as_subscription(i, c) for i, c in zip(ids, conjs, strict=True)}
    columnar, objects = small(), small()
    columnar.add_intervals(ids, as_columns(conjs))
    objects.add(subs.values())
    agree(columnar, objects, subs, evs)
    gone = [i for j, i in enumerate(ids) if drop >> (j % 32) & 1]  # deletes after a columnar build
    assert columnar.remove(gone) == objects.remove(gone) == len(gone)
    for i in gone:
        del subs[i]
    agree(columnar, objects, subs, evs)
    half = len(more) // 2  # inserts: as columns (one replacing a present id) and as objects
    new_ids = [f"t{i}" for i in range(half)] + ([ids[-1]] if ids[-1] in subs and half else [])
    new = more[:half] + ([more[0]] if len(new_ids) > half else [])
    columnar.add_intervals(new_ids, as_columns(new)) if new else None
    objects.add(as_subscription(i, c) for i, c in zip(new_ids, new, strict=True))
    subs.update((i, as_subscription(i, c)) for i, c in zip(new_ids, new, strict=True))
    late = {f"u{i}": as_subscription(f"u{i}", c) for i, c in enumerate(more[half:])}
    columnar.add(late.values())
    objects.add(late.values())
    subs.update(late)
    agree(columnar, objects, subs, evs)
    for key, sub in columnar.subscriptions():  # made from the slots: the same subscription to the oracle
        assert columnar.id_of(key) == sub.id
        assert [oracle.satisfies(sub.expr, e) for e in evs] == [oracle.satisfies(subs[sub.id].expr, e) for e in evs]


@pytest.mark.parametrize("seed", [0, 1])
def test_dense_workload_from_columns_matches_objects(seed):
    arrays = dense_arrays(3000, 60, d=8, k=4, width=0.3, seed=seed)
    subs = dense_subscriptions(arrays)
    columnar, objects = BitMarkMatcher(), BitMarkMatcher()
    columnar.add_intervals([s.id for s in subs], Intervals.of_rows(arrays.attrs, arrays.lo, arrays.hi,
                                                                   tuple(f"a{j}" for j in range(8))))
    objects.add(subs)
    evs = dense_events(arrays)
    assert columnar.match_events(evs) == objects.match_events(evs)
    assert sum(map(len, objects.match_events(evs))) > 0
    columnar.remove([s.id for s in subs[::3]])
    objects.remove([s.id for s in subs[::3]])
    assert columnar.match_events(evs) == objects.match_events(evs)


def test_bad_columns_are_refused():
    matcher = BitMarkMatcher()
    one = Intervals(np.array([0, 1]), np.array([0]), np.array([1.0]), np.array([2.0]), ("a",))
    with pytest.raises(ValueError):
        matcher.add_intervals(["x", "y"], one)
    with pytest.raises(ValueError):
        matcher.add_intervals(["x"], one._replace(attr=np.array([1])))
    with pytest.raises(ValueError):
        matcher.add_intervals(["x"], one._replace(lo=np.array([math.nan])))
    with pytest.raises(ValueError):
        matcher.add_intervals(["x"], one._replace(off=np.array([0, 0])))
    assert len(matcher) == 0


@settings(max_examples=40, deadline=None, derandomize=True)
@given(n=st.integers(0, 30), start=st.integers(0, 5),
       ops=st.lists(st.tuples(st.sampled_from(["get", "in", "pop", "set", "del", "len", "items"]),
                              st.integers(0, 40)), max_size=12))
def test_lazy_keys_behave_as_their_dict(n, start, ops):
    ids = [f"s{i}" for i in range(n)]
    lazy, plain = LazyKeys(np.array(ids, dtype=object), start), dict(zip(ids, range(start, start + n), strict=True))
    assert len(lazy) == len(plain) and bool(lazy) == bool(plain)  # (before the dict is made)
    for op, i in ops:
        sub_id = f"s{i}"
        if op == "get":
            assert lazy.get(sub_id) == plain.get(sub_id)
        elif op == "in":
            assert (sub_id in lazy) == (sub_id in plain)
        elif op == "pop":
            assert lazy.pop(sub_id, None) == plain.pop(sub_id, None)
        elif op == "set":
            lazy[sub_id] = plain[sub_id] = i
        elif op == "del" and sub_id in plain:
            del lazy[sub_id], plain[sub_id]
        elif op == "len":
            assert len(lazy) == len(plain)
        else:
            assert dict(lazy.items()) == plain
    assert dict(lazy) == plain and len(lazy) == len(plain)


@pytest.mark.parametrize("pickled", [False, True])
def test_ids_after_a_columnar_load_are_found_by_id(pickled):
    arrays = dense_arrays(500, 20, d=6, k=3, width=0.3, seed=3)
    subs = dense_subscriptions(arrays)
    columnar, objects = BitMarkMatcher(), BitMarkMatcher()
    columnar.add_intervals([s.id for s in subs], Intervals.of_rows(arrays.attrs, arrays.lo, arrays.hi,
                                                                   tuple(f"a{j}" for j in range(6))))
    objects.add(subs)
    evs = dense_events(arrays)
    assert columnar.match_events(evs) == objects.match_events(evs)  # (no lookup by id made the dict)
    if pickled:  # as the shared index file does: protocol 5, the arrays out of band
        buffers: list[pickle.PickleBuffer] = []
        header = pickle.dumps(columnar, protocol=5, buffer_callback=buffers.append)
        columnar = pickle.loads(header, buffers=[b.raw() for b in buffers])
    assert len(columnar) == 500 and "s7" in columnar and "t7" not in columnar
    assert columnar.key_of("s7") == 7 and columnar.ids_of(np.array([3, 7])) == ["s3", "s7"]
    gone = [s.id for s in subs[::4]] + ["absent"]
    assert columnar.remove(gone) == objects.remove(gone) == 125
    with pytest.raises(ValueError):  # repeated ids: refused, nothing changed
        columnar.add_intervals(["s1", "s1"], Intervals.of_rows(arrays.attrs[:2], arrays.lo[:2], arrays.hi[:2],
                                                                 tuple(f"a{j}" for j in range(6))))
    again = [subs[1], subs[4]]  # one present, one removed: both (re)added as columns
    columnar.add_intervals([s.id for s in again], Intervals.of_rows(arrays.attrs[[1, 4]], arrays.lo[[1, 4]],
                                                                     arrays.hi[[1, 4]], tuple(f"a{j}" for j in range(6))))
    objects.remove([subs[1].id])
    objects.add(again)
    assert len(columnar) == len(objects) == 376
    assert columnar.match_events(evs) == objects.match_events(evs)
