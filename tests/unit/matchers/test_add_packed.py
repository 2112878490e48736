"""Matcher.add_packed (a shard's packed rows to the index, columns where the index takes them)
against Matcher.add of the same subscriptions as objects and the oracle: matches, ``len``, ids,
held subscriptions, then deletes, replaces and inserts (packed or not) and a pickled copy, for
every matcher (those without columns take the unpacked path); matchers.packed.decode against
the subscriptions' own conjunctions."""

from __future__ import annotations

import marshal
import pickle
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers.catalog import create, names
from matchers.events import Dictionary
from matchers.expr import Op, Subscription
from matchers.language import parse_subscription
from matchers.packed import decode, pack, to_tuples
from matchers.subtable import SubscriptionTable
from tests.differential import check, subscriptions_of
from tests.strategies import (
    events,
    exprs,
    extended_events,
    extended_exprs,
    random_event,
    random_subscriptions,
)

MATCHERS = names()
COLUMNAR = ["dynamic", "static", "propagation", "counting"]


def rows(subs: list[Subscription]) -> SubscriptionTable:
    """``subs`` as a registry shard's rows (ids and packed bytes; no changes)."""
    return SubscriptionTable.pack(subs)


def same(packed, plain, live: dict[str, Subscription], evs: list[dict]) -> None:
    """Both matchers hold ``live`` (their ids read one by one and in bulk) and match ``evs`` as the oracle does."""
    assert len(packed) == len(plain) == len(live)
    assert {s.id: s for _, s in packed.subscriptions()} == {s.id: s for _, s in plain.subscriptions()} == live
    assert all(packed.subscription(packed.key_of(i)) == s for i, s in live.items())
    assert sorted(map(packed.id_of, (packed.key_of(i) for i in live))) == sorted(live)
    for m in (packed, plain):  # in bulk, as the notifications read them, in any order
        keys = [m.key_of(i) for i in live][::-1]
        assert m.ids_of(np.asarray(keys, dtype=np.int64)) == list(map(m.id_of, keys))
    check(packed, live, evs)
    check(plain, live, evs)


@pytest.mark.parametrize("name", MATCHERS)
@pytest.mark.parametrize(("seed", "extended"), [(1, False), (2, False), (3, True), (4, True)])
def test_packed_rows_build_the_matcher_that_subscriptions_build(name, seed, extended):
    rng = random.Random(seed)
    subs = random_subscriptions(rng, 260, extended=extended)
    evs = [random_event(rng, extended) for _ in range(80)]
    packed, plain = create(name), create(name)
    packed.add_packed(rows(subs[:200]))
    plain.add(subs[:200])
    live = {s.id: s for s in subs[:200]}
    same(packed, plain, live, evs)
    for step in range(3):  # deletes, then replaces and new ids as packed rows (a catch-up), or as objects
        gone = [s.id for s in rng.sample(list(live.values()), 25)] + ["never-added"]
        for m in (packed, plain):
            m.remove(gone)
        for i in gone[:-1]:
            del live[i]
        replaced = [Subscription.of(i, s.expr) for i, s in zip(rng.sample(list(live), 10), subs[200 + 20 * step:], strict=False)]
        fresh = [Subscription.of(f"n{step}.{i}", s.expr) for i, s in enumerate(rng.sample(subs, 10))]
        change = replaced + fresh
        (packed.add_packed(rows(change)) if step != 1 else packed.add(change))
        plain.add(change)
        live.update({s.id: s for s in change})
        same(packed, plain, live, evs)
    copy = pickle.loads(pickle.dumps(packed, protocol=5))
    check(copy, live, evs)
    copy.add_packed(rows(subs[:5]))
    check(copy, {**live, **{s.id: s for s in subs[:5]}}, evs)
    for m in (packed, plain):
        assert m.remove(list(live)) == len(live)
        assert len(m) == 0 and all(ids == [] for ids in m.match_events(evs))


@pytest.mark.parametrize("name", [*COLUMNAR, "auto"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees=st.lists(exprs | extended_exprs, min_size=1, max_size=14),
       evs=st.lists(events | extended_events, min_size=1, max_size=8), data=st.data())
def test_hypothesis_packed_rows_match_the_oracle(name, trees, evs, data):
    subs = subscriptions_of(trees)
    packed, plain = create(name, Dictionary()), create(name, Dictionary())
    packed.add_packed(rows(subs))
    plain.add(subs)
    live = {s.id: s for s in subs}
    same(packed, plain, live, evs)
    gone = data.draw(st.lists(st.sampled_from([s.id for s in subs]), max_size=len(subs)), "gone")
    again = data.draw(st.lists(st.sampled_from(subs), max_size=len(subs), unique_by=lambda s: s.id), "again")
    for m in (packed, plain):
        m.remove(gone)
    for i in gone:
        live.pop(i, None)
    packed.add_packed(rows(again))
    plain.add(again)
    live.update({s.id: s for s in again})
    same(packed, plain, live, evs)


def test_a_matcher_holding_objects_or_rows_repeating_an_id_takes_the_unpacked_path():
    rng = random.Random(9)
    subs = random_subscriptions(rng, 40)
    evs = [random_event(rng) for _ in range(40)]
    held = create("dynamic")
    held.add(subs[:20])
    held.add_packed(rows(subs[20:]))
    assert isinstance(held._subs, list)
    check(held, subs, evs)
    twice = create("dynamic")
    later = Subscription.of(subs[0].id, subs[1].expr)
    twice.add_packed(rows([subs[0], *subs[2:10], later]))
    assert len(twice) == 9 and twice.subscription(twice.key_of(later.id)) == later
    check(twice, [later, *subs[2:10]], evs)


def test_a_fresh_matcher_keeps_the_rows_as_its_table_and_the_others_apart():
    """Rows the index evaluates keep their row as key; a presence test or an ANYTHING BUT (a
    row left out of the columns) is added as an object, under a key freed for it."""
    subs = random_subscriptions(random.Random(5), 120, extended=True)
    table = rows(subs)
    m = create("dynamic")
    m.add_packed(table)
    assert m._subs is table
    own = m.indexed_ops
    native = [i for i, s in enumerate(subs) if all(p.op in own for c in s.conjunctions for p in c)
              and all(f[1] != Op.ANYTHING_BUT for f in to_tuples(s)[1])]
    assert 0 < len(native) < len(subs)
    assert all(m.key_of(subs[i].id) == i for i in native)
    assert m.capacity == len(subs)
    check(m, subs, [random_event(random.Random(6), True) for _ in range(60)])


@pytest.mark.parametrize("name", [*COLUMNAR, "auto"])
@pytest.mark.parametrize("seed", [1, 2])
def test_rows_decoded_by_the_caller_build_what_the_table_alone_builds(name, seed):
    """add_packed given the table's decode (as auto passes its own) equals add_packed decoding
    itself, through replaces and removes; decoded rows of another table are refused, nothing
    changed."""
    rng = random.Random(seed)
    subs = random_subscriptions(rng, 160, extended=True)
    evs = [random_event(rng, True) for _ in range(60)]
    given_rows, alone = create(name), create(name)
    live: dict[str, Subscription] = {}
    for chunk in (subs[:100], [Subscription.of(s.id, t.expr) for s, t in zip(subs[:30], subs[100:], strict=False)] + subs[130:]):
        table = rows(chunk)
        given_rows.add_packed(table, decode(table.sub_offsets, table.sub_bytes))
        alone.add_packed(rows(chunk))
        live.update({s.id: s for s in chunk})
        same(given_rows, alone, live, evs)
        assert given_rows.match_events(evs) == alone.match_events(evs)
        gone = [s.id for s in rng.sample(list(live.values()), 20)]
        for m in (given_rows, alone):
            m.remove(gone)
        for i in gone:
            del live[i]
    other = rows(subs[140:145])
    with pytest.raises(ValueError, match="decoded rows for a table of"):
        given_rows.add_packed(rows(subs[150:]), decode(other.sub_offsets, other.sub_bytes))
    same(given_rows, alone, live, evs)


def test_auto_decodes_the_rows_once(monkeypatch):
    import matchers.auto
    import matchers.base

    calls: list[int] = []
    for module in (matchers.auto, matchers.base):
        monkeypatch.setattr(module, "decode", lambda offsets, data, real=module.decode: calls.append(1) or real(offsets, data))
    subs = random_subscriptions(random.Random(3), 50)
    m = create("auto")
    m.add_packed(rows(subs))
    assert m.choice in COLUMNAR and len(calls) == 1
    check(m, subs, [random_event(random.Random(4)) for _ in range(40)])


@pytest.mark.parametrize("name", COLUMNAR)
def test_an_unreadable_row_changes_nothing(name):
    subs = random_subscriptions(random.Random(7), 10)
    m = create(name)
    m.add_packed(rows(subs[:5]))
    good = rows(subs[5:])
    for bad in (b"not packed", b"", pack(subs[0])[:-3], b"(\x01\x00\x00\x00i\x01\x00\x00\x00"):
        blobs = [pack(subs[5]), bad]
        table = SubscriptionTable(good.id_offsets[:3], good.id_bytes[:int(good.id_offsets[2])],
                                  _offsets(blobs), _bytes(blobs))
        with pytest.raises((ValueError, EOFError, TypeError, IndexError)):
            m.add_packed(table)
        assert len(m) == 5 and {s.id for _, s in m.subscriptions()} == {s.id for s in subs[:5]}


def _offsets(blobs: list[bytes]):
    import numpy as np

    return np.concatenate([[0], np.cumsum([len(b) for b in blobs])]).astype(np.int64)


def _bytes(blobs: list[bytes]):
    import numpy as np

    return np.frombuffer(b"".join(blobs), dtype=np.uint8)


@settings(max_examples=60, deadline=None)
@given(trees=st.lists(exprs | extended_exprs, min_size=1, max_size=10))
def test_decode_gives_each_subscriptions_conjunctions(trees):
    subs = subscriptions_of(trees)
    table = rows(subs)
    got = decode(table.sub_offsets, table.sub_bytes)
    skipped = {int(i) for i in got.skipped}
    assert skipped == {i for i, s in enumerate(subs) if any(f[1] == Op.ANYTHING_BUT for f in to_tuples(s)[1])}
    starts = got.entries
    bounds = [0, *list(_cumsum(got.sizes))]
    for i, sub in enumerate(subs):
        conjs = [tuple(got.preds[j] for j in got.flat[bounds[e]:bounds[e + 1]]) for e in range(starts[i], starts[i + 1])]
        assert conjs == ([] if i in skipped else [tuple(c) for c in sub.conjunctions])


def _cumsum(sizes):
    total = 0
    for s in sizes.tolist():
        total += s
        yield total


def test_decode_reads_every_value_marshal_writes_and_refuses_what_is_not_a_row():
    """Operands of every type version 2 writes (long ints, negative ones, booleans, None, tuples,
    non-ASCII text), an expiry time; a truncated row, trailing bytes or another shape are refused."""
    fields = (("é", 0, 2**70, 0), ("b", 6, (1.0, -2.0), 0), ("c", 0, True, 2), ("d", 0, -3, 0), ("e", 16, None, 3),
              ("f", 0, "x\u00e9y", 1), ("g", 0, -(2**40), 0))
    row = marshal.dumps((1.5e9, fields, (1, (0, 0, 1), 2), ((0, 1), (2, 3, 4), (5, 6), ())), 2)
    other = marshal.dumps((None, fields[:2], (0, 0, 1), ((1, 0),)), 2)
    table = SubscriptionTable(np.array([0, 2, 4], dtype=np.int64), np.frombuffer(b"s0s1", dtype=np.uint8),
                              np.array([0, len(row), len(row) + len(other)], dtype=np.int64),
                              np.frombuffer(row + other, dtype=np.uint8))
    got = decode(table.sub_offsets, table.sub_bytes)
    assert [(p.attr, int(p.op), p.operand, int(p.kind)) for p in got.preds] == list(fields)
    assert got.entries.tolist() == [0, 4, 5] and got.sizes.tolist() == [2, 3, 2, 0, 2]
    assert got.flat.tolist() == [0, 1, 2, 3, 4, 5, 6, 1, 0] and len(got.skipped) == 0
    for bad in [row[:cut] for cut in range(1, len(row))] + [row + b"N", marshal.dumps((None, fields), 2),
                                                          marshal.dumps((None, fields, 0, ((7,),)), 2)]:
        with pytest.raises(ValueError, match="row 0 is not a packed subscription"):
            decode(np.array([0, len(bad)], dtype=np.int64), np.frombuffer(bad, dtype=np.uint8))


def test_counting_refuses_an_oversized_conjunction_of_packed_rows_naming_it(monkeypatch):
    from matchers.counting import kernels
    from matchers.errors import SubscriptionError

    monkeypatch.setattr(kernels, "MAX_SIZE", 2)
    subs = [parse_subscription(text, i) for i, text in (("ok", "a = 1 AND b = 1"), ("big", "a = 1 AND b = 1 AND c = 1"))]
    m = create("counting")
    with pytest.raises(SubscriptionError, match="big"):
        m.add_packed(rows(subs))
