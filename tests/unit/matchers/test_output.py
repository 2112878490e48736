"""``match_lines`` writes what a line per event built in Python gives: the event's id, then
the ids of its matched keys in sorted order, for keys in any order and any id table."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.output import LINE_PARTS, id_table, match_lines


def _lines(event_ids: list[object], per_event: list[list[int]], keyed: list[tuple[str, int]], capacity: int) -> bytes:
    chunks = [json.dumps(e, separators=(",", ":")).encode() for e in event_ids]
    event_offsets = np.zeros(len(chunks) + 1, np.int64)
    np.cumsum([len(c) for c in chunks], out=event_offsets[1:])
    offsets = np.zeros(len(per_event) + 1, np.int64)
    np.cumsum([len(k) for k in per_event], out=offsets[1:])
    keys = np.array([k for ks in per_event for k in ks], np.int32)
    return match_lines(np.frombuffer(b"".join(chunks), np.uint8), event_offsets, offsets, keys,
                       id_table(keyed, capacity), *LINE_PARTS).tobytes()


def _expected(event_ids: list[object], per_event: list[list[int]], keyed: list[tuple[str, int]]) -> list[dict]:
    id_of = {key: sub_id for sub_id, key in keyed}
    return [{"event": e, "subscriptions": sorted(id_of[k] for k in ks)} for e, ks in zip(event_ids, per_event, strict=True)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("n_subs", "per"), [(5, 3), (1000, 48), (3000, 400)])
def test_lines_equal_python(seed, n_subs, per):
    rng = random.Random(seed)
    capacity = n_subs + rng.randrange(50)
    keys = rng.sample(range(capacity), n_subs)
    keyed = [(rng.choice(["r", "sub-", "é", ""]) + str(rng.randrange(10**6)) + f"/{i}", k) for i, k in enumerate(keys)]
    event_ids = [rng.choice([i, f"e{i}", {"a": i}]) for i in range(30)]
    per_event = [rng.sample(keys, rng.randrange(min(per, n_subs) + 1)) for _ in event_ids]
    out = _lines(event_ids, per_event, keyed, capacity)
    assert [json.loads(line) for line in out.splitlines()] == _expected(event_ids, per_event, keyed)


@settings(max_examples=100, deadline=None)
@given(ids=st.lists(st.text(max_size=6), unique=True, min_size=1, max_size=80), data=st.data())
def test_lines_equal_python_for_any_ids(ids, data):
    keys = data.draw(st.permutations(range(len(ids))))
    keyed = list(zip(ids, keys, strict=True))
    per_event = data.draw(st.lists(st.lists(st.sampled_from(keys), unique=True), max_size=5))
    event_ids = list(range(len(per_event)))
    out = _lines(event_ids, per_event, keyed, len(ids))
    assert [json.loads(line) for line in out.splitlines()] == _expected(event_ids, per_event, keyed)


def test_ids_each_side_of_one_word_and_events_without_matches():
    """Ids whose JSON with its comma takes 3 to 13 bytes (one word up to 8: ``WORD``), events
    matching none, one or all of them."""
    keyed = [("x" * n, n) for n in range(12)] + [('q"\\', 12)]
    per_event = [[], list(range(13)), [7], [6, 5], [11, 0], []]
    event_ids = ["a", 1, {"b": 2}, None, "e", 5]
    out = _lines(event_ids, per_event, keyed, 13)
    assert [json.loads(line) for line in out.splitlines()] == _expected(event_ids, per_event, keyed)
    assert _lines([], [], keyed, 13) == b""
