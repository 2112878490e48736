"""The JSON path (:func:`matchers.events.encode_json`) against the general one (orjson, flatten, encode)."""

from __future__ import annotations

import json
import random

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers import oracle
from matchers.catalog import create
from matchers.errors import PubSubError, TooManyRows
from matchers.events import (
    ARRAY_ROWS,
    NO_LIMITS,
    Dictionary,
    Rows,
    ScanLimits,
    decode,
    encode,
    encode_json,
    flatten,
)
from matchers.language import parse_record
from streaming.config import LimitsSettings
from streaming.records import read_event

KEYS = ["a", "b", "c", "id", "a.b", "é", "k k", ""]
TEXTS = ["x", "y", "", "é", "ß", "\u2028", "a\"b", "a\\b", "\x01", "10.0.0.1", "\U0001f600"]
NUMBER_TEXTS = st.from_regex(r"\A-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?\Z")
SCALARS = st.one_of(st.none(), st.booleans(), st.sampled_from(TEXTS), st.text(max_size=6),
                    st.integers(-2**64, 2**64), st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from([0.0, -0.0, 1e22, 1e23, 5e-324, 1.7976931348623157e308, 0.1, 2**53, 2**53 + 1]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)),
                      max_leaves=12)
EVENTS = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6)


def _text(obj: dict, style: int) -> bytes:
    """The event as JSON, in one of several spellings."""
    if style == 0:
        try:
            return orjson.dumps(obj)
        except TypeError:  # an integer past 64 bits
            return json.dumps(obj).encode()
    if style == 1:
        return json.dumps(obj, ensure_ascii=False).encode()
    if style == 2:
        return json.dumps(obj, indent=1).encode()  # \\u escapes, new lines
    return b"  " + json.dumps(obj, separators=(" , ", " : "), ensure_ascii=False).encode() + b"\t"


def _dictionary(names: list[str], strings: list[tuple[str, str]]) -> Dictionary:
    d = Dictionary()
    for name in names:
        d.attr(name)
    for name, text in strings:
        d.code(d.attr(name), text)
    return d


def _rows(flat: dict | Rows, known: Dictionary) -> list[str]:
    rows = list(flat) if isinstance(flat, Rows) else [flat]
    return sorted(repr(sorted((k, float(v) if type(v) is int else v) for k, v in row.items() if k in known.attr_ids))
                  for row in rows)


def general_path(raw: bytes, max_rows: int | None = ARRAY_ROWS) -> dict | Rows | None:
    """The general path of a test: orjson and flatten (``None``: refused)."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    try:
        return flatten(obj, max_rows=max_rows)
    except TooManyRows:
        return None


def _check(raws: list[bytes], d: Dictionary, limits: ScanLimits = NO_LIMITS, **kw) -> np.ndarray:
    """encode_json's batch holds what the general path gives, with consistent codes; returns ``fast``."""
    general: dict[int, dict | Rows] = {}

    def slow(i: int):
        flat = general_path(raws[i], limits.array_rows)
        if flat is not None:
            general[i] = flat
        return flat

    known = Dictionary()  # the attributes before: those the general path adds are unknown to the scan
    for aid, name in enumerate(d.attr_names):
        if not d.event_only(aid):
            known.attr(name)
    jb = encode_json(raws, d, slow, limits, **kw)
    b = jb.batch
    assert b.n == len(jb.events) and list(jb.events) == sorted(jb.events)
    rows = b.rows if b.rows is not None else np.arange(b.n + 1)
    for k, i in enumerate(jb.events.tolist()):
        if jb.fast[i]:
            obj = orjson.loads(raws[i])
            if kw.get("drop_first"):
                obj.pop(kw["keys"][0], None)
            want = flatten(obj, max_rows=limits.array_rows)
        else:
            want = general[i]
        got = [decode(b, d, r) for r in range(rows[k], rows[k + 1])]
        assert _rows(Rows(got), known if jb.fast[i] else d) == _rows(want, known if jb.fast[i] else d), raws[i]
        for r in range(rows[k], rows[k + 1]):
            assert list(b.attrs[b.offsets[r]:b.offsets[r + 1]]) == sorted(b.attrs[b.offsets[r]:b.offsets[r + 1]])
    for j in range(len(b.attrs)):
        text = b.strings[b.texts[j]] if b.texts[j] >= 0 else None
        assert b.codes[j] == (d.strings[b.attrs[j]].get(text, -1) if text is not None else -1)
    assert not set(np.flatnonzero(jb.fast)) - set(jb.events.tolist())  # a fast event is never refused
    return jb.fast


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EVENTS, max_size=6), st.integers(0, 3), st.data())
def test_json_path_matches_the_general_path(events, style, data):
    raws = [_text(e, style) for e in events]
    names = data.draw(st.lists(st.sampled_from(KEYS + ["a.a", "a.b", "b.c", "c.a.b", "é.é"]), max_size=8))
    strings = data.draw(st.lists(st.tuples(st.sampled_from(names or ["a"]), st.sampled_from(TEXTS)), max_size=8))
    _check(raws, _dictionary(names, strings))


@settings(max_examples=150)
@given(st.lists(st.tuples(st.sampled_from(KEYS), NUMBER_TEXTS), min_size=1, max_size=4))
def test_numbers_at_the_edges(members):
    raw = ("{" + ",".join(f'"{k}{i}": {v}' for i, (k, v) in enumerate(members)) + "}").encode()
    names = [f"{k}{i}" for i, (k, _) in enumerate(members)]
    fast = _check([raw], _dictionary(names, []))
    if fast[0]:  # exactly the float orjson reads
        nums = [float(v) for v in orjson.loads(raw).values()]
        jb = encode_json([raw], _dictionary(names, []), lambda i: None)
        assert sorted(jb.batch.nums.tolist()) == sorted(nums)


@pytest.mark.parametrize("raw", [
    b'{"a": 1', b'{"a": 1}}', b'{"a": 1,}', b'{"a" 1}', b'{"a": tru}', b'{"a": truex}', b'{"a": 01}', b'{"a": 1.}',
    b'{"a": .5}', b'{"a": 1e}', b'{"a": -}', b'{"a": [1,]}', b'{"a": [1 2]}', b'{"a": "x}', b'{"a": "\x01"}',
    b'{"a": NaN}', b'{"a": Infinity}', b'{"a": 1e400}', b'[{"a": 1}]', b'"a"', b"", b"   ", b'{"a": "\xff"}',
    b'{"a": "\xed\xa0\x80"}', b'{"a": "\\ud800"}', b'{"a": 1} x', b'{a: 1}', b"{'a': 1}", b'{"a": [1}', b'{"a": {]}',
])
def test_malformed_events_take_the_general_path(raw):
    d = _dictionary(["a"], [])
    fast = _check([raw, b'{"a": 2}'], d)
    assert not fast[0] and fast[1]


def test_plain_events_take_the_fast_path():
    raws = [b'{"a": "x", "b": {"c": [1, 2, 3], "d": null}, "e": true, "f": -1.5e-3, "g": [{"h": 1}]}',
            b'{"a": [], "b": {}, "c": [{"x": [{}]}]}', b'{ "a" : [ "x" ] , "b" : [ { "c" : false } ], "c": [] }',
            b'{"g": [{"h": 1, "i": {"j": 2}}, {"h": 2}, {}], "a": "x"}']
    fast = _check(raws, _dictionary(["a", "b.c", "b.d", "e", "f", "g.h", "g.i.j", "c.x"], [("a", "x")]))
    assert fast.tolist() == [True, False, True, True]  # an array inside an array: the general path


@pytest.mark.parametrize("raw", [
    b'{"a": 1, "a": 2}', b'{"a": {"b": 1}, "a": {"c": 2}}', b'{"a": {"b": 1}, "a.b": 2}',
    b'{"a": [{"b": 1}], "a.b": 2}', b'{"a": [1, 2], "b": [3, 4]}', b'{"a": [[1], 2]}', b'{"a": [{"b": [1, 2]}, 3]}',
])
def test_duplicates_and_row_products_take_the_general_path(raw):
    fast = _check([raw], _dictionary(["a", "a.b", "a.c", "b"], []))
    assert not fast[0]


def test_ids_and_validity_fields():
    raws = [b'{"id": "e1", "n": 1, "until": 5}', b'{"n": 2, "id": 7.50}', b'{"id": {"x": 1}, "n": 3}', b'{"n": 4}']
    d = _dictionary(["id", "n", "until"], [])
    jb = encode_json(raws, d, lambda i: flatten(orjson.loads(raws[i])), keys=("id", "until"), drop_first=True)
    spans = jb.spans.tolist()
    assert [raws[i][s[0]:s[1]] if s[0] >= 0 else None for i, s in enumerate(spans)] == [b'"e1"', b"7.50", None, None]
    assert raws[0][spans[0][2]:spans[0][3]] == b"5"
    assert jb.fast.tolist() == [True, True, False, True]  # an id that is not a scalar goes the general way
    assert [decode(jb.batch, d, i) for i in range(3)][:2] == [{"n": 1.0, "until": 5.0}, {"n": 2.0}]


LIMITS = st.builds(LimitsSettings, depth=st.integers(1, 4), attributes=st.integers(1, 6), event_bytes=st.integers(2, 80),
                   string_length=st.integers(0, 8), array_rows=st.integers(1, 4))


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EVENTS, min_size=1, max_size=5), LIMITS, st.integers(0, 3))
def test_fast_events_are_within_the_service_limits(events, limits, style):
    """An event the scanner takes is one read_event admits, without problems, with the same rows."""
    raws = [_text(e, style) for e in events]
    scan_limits = limits.scan()
    d = _dictionary(KEYS + ["a.a", "a.b", "b.a"], [])
    jb = encode_json(raws, d, lambda i: None, scan_limits)
    for i in np.flatnonzero(jb.fast).tolist():
        read = read_event(raws[i], limits)
        assert read.obj is not None and read.problem is None, (raws[i], read.problem)
        assert len(raws[i]) <= limits.event_bytes


def _attributes(obj: dict) -> int:
    """What ``limits.attributes`` bounds: the distinct names of the flattened event's rows."""
    flat = flatten(obj, max_rows=None)
    return len(set().union(*flat) if type(flat) is Rows else flat)


LOOSE = LimitsSettings(attributes=10_000, array_rows=10_000)


def _fast(raw: bytes, attributes: int, drop_id: bool = False) -> bool:
    limits = LOOSE.scan()._replace(attributes=attributes)
    keys = ("id", "") if drop_id else ("", "")
    return bool(encode_json([raw], Dictionary(), lambda i: None, limits, keys=keys, drop_first=drop_id).fast[0])


@pytest.mark.parametrize(("obj", "n"), [
    ({"a": 1, "b": None, "c": "x"}, 3),  # nulls count
    ({"a": 1, "tags": [1, 2, 3, 4, 5]}, 2),  # an array's elements share its name
    ({"a": 1, "items": [{"x": 1, "y": 2}, {"x": 3, "z": None}]}, 4),  # a, items.x, items.y, items.z
    ({"a": 1, "o": {"b": 1, "c": {"d": True}}}, 3),
    ({"a": 1, "empty": []}, 1),  # an empty array is an absent attribute
    ({"id": "e1", "a": 1, "b": 2}, 3),  # the event id too
])
def test_the_attributes_limit_counts_the_names_after_flattening_on_both_paths(obj, n):
    """Both readers bound the same thing: the names the flattened event's rows hold."""
    raw = orjson.dumps(obj)
    assert _attributes(obj) == n
    assert read_event(raw, LimitsSettings(attributes=n, array_rows=10_000)).obj is not None
    refused = read_event(raw, LimitsSettings(attributes=n - 1, array_rows=10_000))
    assert refused.obj is None and "limits.attributes" in (refused.problem or "")
    for drop_id in (False, True):
        assert _fast(raw, n, drop_id) and not _fast(raw, n - 1, drop_id)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS)
def test_random_events_meet_the_attributes_limit_at_their_names_after_flattening(obj):
    raw = _text(obj, 0)
    if read_event(raw, LOOSE).obj is None:  # refused for another reason (names that collide)
        return
    n = _attributes(obj)
    assert read_event(raw, LimitsSettings(attributes=n, array_rows=10_000)).obj is not None
    if n:
        assert read_event(raw, LimitsSettings(attributes=n - 1, array_rows=10_000)).obj is None
        assert not _fast(raw, n - 1)
    assert _fast(raw, n) == _fast(raw, 10_000)


def _eventbridge(seed: int) -> tuple[list, list[bytes]]:
    from scripts.rules import make_events, make_rules

    rules = make_rules(300, seed)
    subs = []
    for rule in rules:
        try:
            subs.append(parse_record(rule))
        except PubSubError:
            pass
    return subs, make_events(200, seed)


@pytest.mark.parametrize("name", ["counting", "brute", "opindex"])
def test_matches_agree_with_the_oracle(name):
    subs, raws = _eventbridge(7)
    matcher = create(name)
    matcher.add(subs)
    jb = encode_json(raws, matcher.dictionary, lambda i: flatten(orjson.loads(raws[i])))
    assert jb.fast.all() and list(jb.events) == list(range(len(raws)))
    result = matcher.match(jb.batch)
    got = [matcher.ids(result.keys[result.offsets[i]:result.offsets[i + 1]]) for i in range(len(raws))]
    want = [oracle.match(subs, flatten(orjson.loads(raw))) for raw in raws]
    assert got == want and sum(map(len, want)) > len(raws)  # and they match something


def test_attributes_only_events_named_stay_out():
    d = _dictionary(["a"], [])
    encode([{"a": 1.0, "b": 2.0}], d)  # the general path names b
    raw = b'{"a": 1, "b": 2}'
    assert decode(encode_json([raw], d, lambda i: None).batch, d, 0) == {"a": 1.0}
    d.attr("b")  # a subscription uses it now
    assert decode(encode_json([raw], d, lambda i: None).batch, d, 0) == {"a": 1.0, "b": 2.0}
    assert not d.event_only(d.attr("b"))


def test_table_grows_with_the_dictionary():
    d = Dictionary()
    rng = random.Random(3)
    raw = b'{"a": "v5", "b": "w"}'
    for step in range(40):
        for _ in range(50):
            d.code(d.attr(rng.choice("abc")), f"v{rng.randrange(10_000)}")
        jb = encode_json([raw], d, lambda i: None)
        assert decode(jb.batch, d, 0) == {"a": "v5", "b": "w"} or step < 40
        assert jb.batch.codes.tolist() == [d.strings[0].get("v5", -1), d.strings[1].get("w", -1)]


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(0, 2**64 - 1) | st.sampled_from([0, 16, 32, 2**40, 2**40 + 16, 2**63]), max_size=40),
       stamp=st.integers(1, 5))
def test_has_duplicate_is_a_set_test(values, stamp):
    """The scan's duplicate test (keys of an object, names of a row): hashes that collide in
    their low bits and stale slots of earlier calls (other stamps) included."""
    from matchers.scan import _has_duplicate

    arr = np.array(values, np.uint64)
    size = 16
    while size <= 2 * len(values):
        size *= 2
    seen = np.array([v for v in values[::-1]] + [7] * (size - len(values)), np.uint64)[:size]
    stamps = np.array([(i % 5) + 1 for i in range(size)], np.int64)
    stamps[stamps == stamp] = 0  # an earlier call's slots, left in the set
    assert _has_duplicate(arr, len(values), seen, stamps, stamp) == (len(set(values)) != len(values))


def test_many_keys_with_a_duplicate_at_the_end_take_the_general_path():
    members = [f'"k{i}": {i}' for i in range(300)]
    raws = [("{" + ", ".join(members) + "}").encode(), ("{" + ", ".join(members + ['"k7": 1']) + "}").encode(),
            ("{" + ", ".join(members + ['"k299": {"x": 1}']) + "}").encode()]
    fast = _check(raws, _dictionary([f"k{i}" for i in range(300)] + ["k299.x"], []))
    assert fast.tolist() == [True, False, False]


@settings(max_examples=200)
@given(st.lists(st.tuples(st.from_regex(r"\A-?0*[0-9]{0,18}\Z"), st.sampled_from(["", ".5", "e1", "E-2", "x", "0"]),
                          st.booleans()), min_size=1, max_size=4),
       st.sampled_from(["", " ", "\n", "]", "}}"]))
def test_integers_of_the_short_path_and_their_neighbours(members, tail):
    """Integers up to 15 digits are read inline (:func:`matchers.scan.scan`); longer ones, leading zeros, signs,
    fractions, exponents, junk after the digits, in arrays or truncated, as before (the general parse or the general path)."""
    parts = [f'"k{i}": ' + (f"[{digits}{rest}]" if in_array else f"{digits}{rest}")
             for i, (digits, rest, in_array) in enumerate(members)]
    raw = ("{" + ", ".join(parts) + tail.rstrip("}") + ("}" if tail != "}}" else "}}")).encode()
    _check([raw, raw[:-1]], _dictionary([f"k{i}" for i in range(len(members))], []))
