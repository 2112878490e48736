"""One encoding for several shards (:mod:`matchers.translate`) against each shard's own encoding and the oracle.

Each shard is a matcher with its own dictionary (different subscriptions, names registered
in different orders); a batch encoded once against the common dictionary and translated
must equal, field by field, the shard's own :func:`~matchers.events.encode_json` of it
(without the entries of names only events gave the shard, which no subscription uses),
and match as it and as the oracle do, also after the shards gained subscriptions (new
names, new strings, names that only events had used so far).
"""

from __future__ import annotations

import math
import random
from functools import partial

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers import oracle
from matchers.catalog import create
from matchers.events import Dictionary, EventBatch, encode, encode_json
from matchers.expr import Subscription, anything_but, pred
from matchers.translate import Translation, common_dictionary
from tests.strategies import random_event, random_subscriptions
from tests.unit.matchers.test_json_path import EVENTS, _text, general_path

MATCHERS = ("dynamic", "counting", "brute", "auto")
KEYS = ("id", "until")


def _slow(raws: list[bytes], i: int):
    """The general path of record ``i`` (:func:`~tests.unit.matchers.test_json_path.general_path`)."""
    return general_path(raws[i])


def _own(raws: list[bytes], matcher):
    """Today's path: the batch encoded against the shard's own dictionary."""
    return encode_json(raws, matcher.dictionary, partial(_slow, raws), keys=KEYS, encode_flat=matcher.encode)


def _common(raws: list[bytes], common: Dictionary):
    """The executor's path: the batch encoded once against the common dictionary."""
    return encode_json(raws, common, partial(_slow, raws), keys=KEYS,
                       encode_flat=partial(encode, dictionary=common, known_only=True))


def _subscribed(batch: EventBatch, d: Dictionary) -> EventBatch:
    """``batch`` without the entries of names only events gave ``d`` (no subscription uses them)."""
    keep = np.array([not d.event_only(a) for a in batch.attrs.tolist()], dtype=np.bool_)
    rows = np.repeat(np.arange(len(batch.offsets) - 1), np.diff(batch.offsets))
    offsets = np.zeros(len(batch.offsets), np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=len(batch.offsets) - 1), out=offsets[1:])
    return EventBatch(offsets, batch.attrs[keep], batch.kinds[keep], batch.nums[keep], batch.codes[keep],
                      batch.texts[keep], batch.strings, batch.rows)


def _texts(batch: EventBatch) -> list[str | None]:
    return [batch.strings[t] if t >= 0 else None for t in batch.texts.tolist()]


def _assert_same(got: EventBatch, want: EventBatch) -> None:
    """Field by field (the strings by value: each batch numbers its own)."""
    assert got.offsets.dtype == want.offsets.dtype and got.attrs.dtype == want.attrs.dtype
    assert got.kinds.dtype == want.kinds.dtype and got.codes.dtype == want.codes.dtype
    assert got.texts.dtype == want.texts.dtype and got.nums.dtype == want.nums.dtype
    assert got.offsets.tolist() == want.offsets.tolist()
    assert got.attrs.tolist() == want.attrs.tolist()
    assert got.kinds.tolist() == want.kinds.tolist()
    assert np.array_equal(got.nums, want.nums, equal_nan=True)
    assert got.codes.tolist() == want.codes.tolist()
    assert _texts(got) == _texts(want)
    assert (None if got.rows is None else got.rows.tolist()) == (None if want.rows is None else want.rows.tolist())


def _shards(rng: random.Random, n: int, subs: list[Subscription], names: list[str]) -> list:
    """``n`` matchers of different kinds, each with its own dictionary (the ``names`` first, in
    its own order) and a share of ``subs``."""
    out = []
    for k in range(n):
        d = Dictionary()
        for name in rng.sample(names, len(names)):
            d.attr(name)
        matcher = create(MATCHERS[k % len(MATCHERS)], d)
        matcher.add([s for i, s in enumerate(subs) if i % n == k])
        out.append(matcher)
    return out


def _check(raws: list[bytes], common: Dictionary, shards: list, translations: list[Translation]) -> None:
    """One common encoding of ``raws``, translated, against each shard's own and the oracle."""
    for t in translations:
        t.update()
    jb = _common(raws, common)
    flats = {i: _slow(raws, i) for i in jb.events.tolist()}
    for matcher, t in zip(shards, translations, strict=True):
        got = t.apply(jb.batch)
        own = _own(raws, matcher)
        assert jb.events.tolist() == own.events.tolist()
        assert jb.spans.tolist() == own.spans.tolist() and jb.fast.tolist() == own.fast.tolist()
        _assert_same(got, _subscribed(own.batch, matcher.dictionary))
        for r in range(len(got.offsets) - 1):
            row = got.attrs[got.offsets[r]:got.offsets[r + 1]].tolist()
            assert row == sorted(row)
        result, before = matcher.match(got), matcher.match(own.batch)
        live = [s for _, s in matcher.subscriptions()]
        for k, i in enumerate(jb.events.tolist()):
            ids = matcher.ids(result.keys[result.offsets[k]:result.offsets[k + 1]].tolist())
            assert ids == oracle.match(live, flats[i]), (matcher.name, raws[i])
            assert ids == matcher.ids(before.keys[before.offsets[k]:before.offsets[k + 1]].tolist())


def _raw_event(rng: random.Random, late: bool) -> bytes:
    """A random event as JSON: some values in arrays, ``t.u`` nested, names no subscription uses
    yet (``late``), now and then an escape (the general path) or broken JSON (refused)."""
    e = random_event(rng, extended=True)
    for name in list(e):
        if rng.random() < 0.1:
            e[name] = [e[name], rng.choice((1.0, "ab", "zz"))]
    if "t.u" in e and rng.random() < 0.5:
        e["t"] = {"u": e.pop("t.u")}
    if late:
        e["late"] = rng.choice((1.0, 3.0, "late-x", "late-y", None))
        e["late.s"] = rng.choice(("ab", "new", "zz"))
    e["id"] = f"e{rng.randrange(1000)}"
    raw = orjson.dumps(e)
    r = rng.random()
    if r < 0.1:
        raw = raw.replace(b'"a"', b'"\\u0061"')  # the same event through the general path
    elif r < 0.13:
        raw = raw[:-1]
    return raw


@pytest.mark.parametrize(("seed", "n_shards"), [(1, 1), (2, 2), (3, 3), (4, 5)])
def test_one_encoding_translated_equals_each_shards_own_and_the_oracle(seed, n_shards):
    rng = random.Random(seed)
    subs = random_subscriptions(rng, 240, extended=True)
    shards = _shards(rng, n_shards, subs[:160], ["zz", "a", "s", "q"])
    common = common_dictionary()
    translations = [Translation(common, m.dictionary) for m in shards]
    for _ in range(2):
        _check([_raw_event(rng, rng.random() < 0.5) for _ in range(120)], common, shards, translations)
    late = [Subscription.of(f"l{i}", p) for i, p in enumerate(
        [pred("late", "=", "late-x"), pred("late", ">", 2), pred("late.s", "=", "new"), pred("s", "=", "zz"),
         pred("s", "=", "brand-new"), pred("late", "is null", None), anything_but(pred("late.s", "prefix", "a"))])]
    for k, matcher in enumerate(shards):  # the dictionaries grow: subscriptions after the first batches
        matcher.add(subs[160 + k::n_shards][:20] + late[k::n_shards] + late[:1])
    for _ in range(2):
        _check([_raw_event(rng, True) for _ in range(120)], common, shards, translations)
    assert all(m.dictionary.attr("late", create=False) >= 0 for m in shards)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EVENTS, max_size=6), st.integers(0, 3), st.integers(0, 2**32 - 1))
def test_hostile_events_translated_equal_each_shards_own(events, style, seed):
    rng = random.Random(seed)
    raws = [_text(e, style) for e in events] + [b"[1]", b"{", b""]
    subs = [Subscription.of(f"h{i}", pred(rng.choice(["a", "b", "c", "a.b", "k k", "é", "c.a.b"]), op,
                                          rng.choice(["x", "y", "é", "\u2028", 'a"b']) if op == "=" else
                                          None if op == "exists" else rng.choice([0, 1.5])))
            for i, op in enumerate(rng.choice(["=", "<", "exists"]) for _ in range(12))]
    shards = _shards(rng, 3, subs, ["c", "a"])
    common = common_dictionary()
    translations = [Translation(common, m.dictionary) for m in shards]
    _check(raws, common, shards, translations)
    shards[1].add([Subscription.of("late", pred("b", "=", "y"))])
    _check(raws, common, shards, translations)


def test_a_name_only_events_used_is_translated_once_a_subscription_uses_it():
    own = create("dynamic")
    own.add([Subscription.of("s", pred("a", "<", 5))])
    common = common_dictionary()
    t = Translation(common, own.dictionary)
    t.update()
    own.encode([{"b": "x"}])  # an event gives the shard's dictionary the name b
    t.update()
    assert common.attr("b", create=False) < 0  # no subscription uses it: not in the common dictionary
    own.add([Subscription.of("t", pred("b", "=", "x"))])
    raws = [b'{"a": 1, "b": "x"}']
    _check(raws, common, [own], [t])
    got = t.apply(_common(raws, common).batch)
    assert got.attrs.tolist() == [0, own.dictionary.attr("b")] and got.codes.tolist() == [-1, 0]
    assert own.match_ids(got) == [["s", "t"]]
    assert t.memory_bytes() > 0 and not math.isnan(got.nums[0])


@pytest.mark.parametrize("width", [3, 20, 40, 300])
def test_wide_rows_in_any_order(width):
    """Rows of every width, the shards' ids in orders of their own, dense or sparse among them."""
    rng = random.Random(width)
    names = [f"n{i}" for i in range(width)]
    shards = []
    for k in range(3):
        d = Dictionary()
        for name in rng.sample(names + [f"other{k}.{i}" for i in range(5 * width * k)], 5 * width * k + width):
            d.attr(name)
        m = create("dynamic", d)
        m.add([Subscription.of(f"{k}-{i}", pred(name, "=", rng.choice([1, "x"])))
               for i, name in enumerate(rng.sample(names, max(1, width // (k + 1))))])
        shards.append(m)
    raws = [orjson.dumps({name: rng.choice([1, 2, "x", "y", None]) for name in rng.sample(names, rng.randint(0, width))})
            for _ in range(50)]
    common = common_dictionary()
    _check(raws, common, shards, [Translation(common, m.dictionary) for m in shards])


def test_one_shard_whose_dictionary_is_the_common_one_gets_the_batch_itself():
    """With one shard the common dictionary is the shard's: the batch is not translated, until
    another shard's names or strings make them differ."""
    one, two = create("dynamic"), create("counting")
    one.add([Subscription.of("s", pred("a", "<", 5)), Subscription.of("t", pred("s", "=", "x"))])
    two.add([Subscription.of("u", pred("s", "=", "y")), Subscription.of("v", pred("b", "=", 1))])
    common = common_dictionary()
    t1 = Translation(common, one.dictionary)
    t1.update()
    raws = [b'{"a": 1, "s": "x", "b": 1}', b'{"s": "y", "a": 9}']
    batch = _common(raws, common).batch
    assert t1.apply(batch) is batch
    _check(raws, common, [one], [t1])
    t2 = Translation(common, two.dictionary)
    t2.update()  # common gains b and the string y: one's batch is translated again
    batch = _common(raws, common).batch
    assert t1.apply(batch) is not batch and t2.apply(batch) is not batch
    _check(raws, common, [one, two], [t1, t2])
