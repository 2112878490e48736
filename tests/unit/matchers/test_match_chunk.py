"""The command line's ``match_chunk``: the JSON of each good event's id (copied from its line,
or written by orjson) and its matches are those of the event read alone (orjson, ``flatten``,
the oracle), for ids of every type, events without one, bad lines and arrays; the lines
written from them are those a line per event in Python gives."""

from __future__ import annotations

import io
import json
import random

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers import oracle
from matchers.__main__ import match_chunk
from matchers.catalog import create
from matchers.events import flatten
from matchers.language import parse_record
from matchers.output import LINE_PARTS, id_table, match_lines

RULES = [{"id": "a", "rule": {"k": ["x", "y"]}}, {"id": "b", "rule": {"n": [{"numeric": [">", 2]}]}},
         {"id": "c", "rule": {"k": [{"anything-but": ["x"]}], "t": [{"exists": True}]}},
         {"id": "d", "rule": {"t": [{"exists": False}]}}, {"id": "é", "rule": {"l": ["p"]}}]
IDS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False),
                st.text(max_size=5), st.sampled_from(["e1", "r-2", "é", 'q"uote', "a\\b"]),
                st.lists(st.integers(0, 3), max_size=2), st.dictionaries(st.sampled_from(["u", "v"]), st.integers(0, 3)))
VALUES = st.one_of(st.sampled_from(["x", "y", "z", "p"]), st.integers(0, 5), st.none(),
                   st.lists(st.sampled_from(["x", "y", "p", 3]), max_size=3))
EVENT = st.dictionaries(st.sampled_from(["k", "n", "t", "l"]), VALUES)


def _line(rng_id: object, has_id: bool, body: dict, style: int) -> bytes:
    obj = ({"id": rng_id} if has_id else {}) | body
    if style == 0:
        return orjson.dumps(obj) + b"\n"
    return json.dumps(obj, ensure_ascii=style == 1).encode() + b"\n"  # spaces; escapes of non-ASCII


def _check(lines: list[bytes]) -> None:
    subs = [parse_record(dict(r)) for r in RULES]
    matcher = create("counting")
    matcher.add(subs)
    chunk = list(enumerate(lines, 1))
    err = io.StringIO()
    result, ids, offsets = match_chunk(matcher, "-", chunk, err)
    expected = []
    for number, line in chunk:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        event_id = obj.pop("id", number)
        expected.append((event_id, sorted(oracle.match(subs, flatten(obj)))))
    got_ids = [orjson.loads(ids[offsets[i]:offsets[i + 1]].tobytes()) for i in range(len(offsets) - 1)]
    got_subs = [sorted(matcher.ids(result.keys[result.offsets[i]:result.offsets[i + 1]]))
                for i in range(len(offsets) - 1)]
    assert list(zip(got_ids, got_subs, strict=True)) == expected
    table = id_table([(s.id, matcher.key_of(s.id)) for s in subs], matcher.capacity)
    out = match_lines(ids, offsets, result.offsets, result.keys, table, *LINE_PARTS).tobytes()
    assert [json.loads(x) for x in out.splitlines()] == [{"event": e, "subscriptions": s} for e, s in expected]


@pytest.mark.parametrize("seed", range(10))
def test_ids_and_matches_equal_the_events_read_alone(seed):
    rng = random.Random(seed)
    lines = []
    for i in range(200):
        body = {k: rng.choice(["x", "y", "z", "p", 3, None, ["x", "p"], [1, 2]]) for k in rng.sample("kntl", rng.randrange(5))}
        event_id = rng.choice([f"e{i}", i, i + 0.5, 1e20, "é", {"u": i}, None, True])
        lines.append(_line(event_id, rng.random() < 0.8, body, rng.randrange(3)))
        if rng.random() < 0.05:
            lines.append(rng.choice([b"{bad\n", b"[1, 2]\n", b'"s"\n']))
    _check(lines)


@settings(max_examples=60, deadline=None)
@given(events=st.lists(st.tuples(IDS, st.booleans(), EVENT, st.integers(0, 2)), max_size=20),
       bad=st.lists(st.sampled_from([b"{\n", b"3\n", b"[]\n"]), max_size=2))
def test_ids_and_matches_for_any_events(events, bad):
    _check([_line(*e) for e in events] + bad)
