"""The string side path's per-entry hits agree with its per-value evaluation."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.events import Dictionary, encode
from matchers.expr import pred
from matchers.strings import StringEvaluator


def _evaluator(d: Dictionary) -> StringEvaluator:
    ev = StringEvaluator()
    preds = [pred("w", "prefix", "ka"), pred("w", "prefix", "kal"), pred("w", "suffix", "lo"),
             pred("v", "contains", "tri"), pred("v", "not prefix", "x")]
    for pid, p in enumerate(preds):
        ev.add(pid, p, d.attr(p.attr))
    return ev


def _check_entry_hits(events: list[dict]) -> int:
    """Checks the hits of every entry of ``events``; their number."""
    d = Dictionary()
    ev = _evaluator(d)
    batch = encode(events, d)
    offsets, pids = ev.entry_hits(batch)
    assert len(offsets) == len(batch.attrs) + 1 and offsets[-1] == len(pids)
    for j in range(len(batch.attrs)):
        got = pids[offsets[j]:offsets[j + 1]].tolist()
        if batch.texts[j] >= 0:
            assert got == ev.pids_for(int(batch.attrs[j]), batch.strings[batch.texts[j]]).tolist()
        else:
            assert got == []
    event_idx, pair_pids = ev.satisfied(batch)
    entry_event = np.searchsorted(batch.offsets, np.arange(len(batch.attrs)), side="right") - 1
    assert event_idx.tolist() == np.repeat(entry_event, np.diff(offsets)).tolist()
    assert pair_pids.tolist() == pids.tolist()
    return len(pids)


def test_entry_hits_is_the_csr_of_pids_for_and_satisfied_expands_it():
    events = [{"w": "kalo", "v": "atrium", "n": 3}, {"u": "kalo", "w": 5}, {}, {"v": "xtri", "w": "zz"},
              {"w": "kab", "v": "y"}, {"w": "kalo", "v": "kalo"}, {"v": "atrium", "w": "kalo"}]
    assert _check_entry_hits(events) > 0


_values = st.one_of(st.sampled_from(["kalo", "kal", "ka", "xtri", "atrium", "lo", ""]), st.integers(0, 3))


@settings(max_examples=100, deadline=None)
@given(events=st.lists(st.dictionaries(st.sampled_from(["w", "v", "u"]), _values), max_size=12))
def test_entry_hits_for_repeated_strings_across_entries_and_attributes(events):
    _check_entry_hits(events)


def test_no_side_path_predicates_no_hits():
    d = Dictionary()
    batch = encode([{"w": "kalo"}], d)
    offsets, pids = StringEvaluator().entry_hits(batch)
    assert offsets.tolist() == [0, 0] and len(pids) == 0
    assert all(len(a) == 0 for a in StringEvaluator().satisfied(batch))
