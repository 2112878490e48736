"""scripts.bench.stages: the ``--wide`` builds of both code paths agree, and the tables."""

from __future__ import annotations

import types

import orjson
import pyarrow as pa

from scripts.bench import stages
from streaming import notifications


def test_wide_build_is_the_same_records_either_way():
    """This tree's path (build_records, notes_batches) and a baseline's (match_records, out_batch)."""
    raws = [orjson.dumps({"id": f"e{i}", "x": i}) for i in range(7)]
    fan = stages._Wide(raws, 40, 5, 3, lambda w: f"sub-\u00e9{w}")
    old = types.SimpleNamespace(EventColumns=notifications.EventColumns, match_records=notifications.match_records)
    new = fan.build(notifications, 17)
    assert pa.Table.from_batches(new).equals(pa.Table.from_batches(fan.build(old, 17)))
    assert sum(b.num_rows for b in new) == 35


def test_render_with_wide():
    best = {s: 1.0 for s in stages.STAGES} | {"limit read": 0.5, "limit scan": 0.5, "limit produce": 0.5}
    rec = {"results": {"us_per_event": best, "matches_per_event": 1.2, "record_bytes": 280.0,
                       "us_per_notification": {"wide_build": 1.3, "wide_produce": 1.9, "baseline_build": 3.4,
                                               "baseline_produce": 2.6}},
           "params": {"events": 10, "subs": 20, "rounds": 1, "wide": 120, "baseline": "old at abc1234"},
           "date": "2026-11-30", "time_utc": "06:00", "load_avg": [1.0, 1.0, 1.0], "command": "x"}
    text = stages.render(rec)
    assert "| this tree | 1.30 | 1.90 |" in text and "| baseline | 3.40 | 2.60 |" in text and "old at abc1234" in text
    rec["results"]["us_per_notification"] = {}
    assert "per notification" not in stages.render(rec)
