"""The string side path's per-entry hits agree with its per-value evaluation."""

import numpy as np

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


def test_entry_hits_is_the_csr_of_pids_for_and_satisfied_expands_it():
    d = Dictionary()
    ev = _evaluator(d)
    events = [{"w": "kalo", "v": "atrium", "n": 3}, {"u": "kalo", "w": 5}, {}, {"v": "xtri", "w": "zz"},
              {"w": "kab", "v": "y"}]
    batch = encode(events, d)
    offsets, pids = ev.entry_hits(batch)
    assert len(offsets) == len(batch.attrs) + 1 and offsets[-1] == len(pids)
    for j in range(len(batch.attrs)):
        got = pids[offsets[j]:offsets[j + 1]].tolist()
        if batch.texts[j] >= 0:
            assert got == ev.pids_for(int(batch.attrs[j]), batch.strings[batch.texts[j]]).tolist()
        else:
            assert got == []
    assert len(pids) > 0
    event_idx, pair_pids = ev.satisfied(batch)
    entry_event = np.searchsorted(batch.offsets, np.arange(len(batch.attrs)), side="right") - 1
    assert event_idx.tolist() == np.repeat(entry_event, np.diff(offsets)).tolist()
    assert pair_pids.tolist() == pids.tolist()


def test_no_side_path_predicates_no_hits():
    d = Dictionary()
    batch = encode([{"w": "kalo"}], d)
    offsets, pids = StringEvaluator().entry_hits(batch)
    assert offsets.tolist() == [0, 0] and len(pids) == 0
    assert all(len(a) == 0 for a in StringEvaluator().satisfied(batch))
