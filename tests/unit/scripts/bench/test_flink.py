"""The Flink side-by-side benchmark's own logic, without Flink: the workload it writes,
the patterns it gives both sides, and how it reads and compares their matches."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from matchers.cayuga import algebra as A
from scripts.bench import flink


def _rising_in_a_row(events: list[A.Event], ps: list[float]) -> Counter:
    """What ``MATCH_RECOGNIZE ... PATTERN (A B C)`` partitioned by symbol reports with
    ``SKIP TO NEXT ROW``: every three consecutive trades of a symbol, rising, the first
    above the pattern's threshold."""
    by_symbol: dict[str, list[A.Event]] = {}
    for e in events:
        by_symbol.setdefault(e.attrs["name"], []).append(e)
    out: Counter = Counter()
    for trades in by_symbol.values():
        for a, b, c in zip(trades, trades[1:], trades[2:], strict=False):
            for i, p in enumerate(ps):
                if a.attrs["price"] > p and b.attrs["price"] > a.attrs["price"] and c.attrs["price"] > b.attrs["price"]:
                    out[(i, a.t0, b.t0, c.t0)] += 1
    return out


def _stock(*rows: tuple[str, float]) -> list[A.Event]:
    return [A.Event(f"e{t}", "Stock", t, t, {"name": n, "price": p}) for t, (n, p) in enumerate(rows)]


def test_thresholds_are_distinct_and_spread():
    ps = flink.thresholds(100)
    assert len(set(ps)) == 100 and ps[0] == 80.0 and ps[-1] == 120.0 and ps == sorted(ps)
    assert flink.thresholds(1) == [100.0]


def test_the_cayuga_pattern_is_three_rising_trades_in_a_row():
    # S0 rises 101, 102, 103 with S1 trades in between (other symbols do not break a run);
    # then 99 breaks it: 102, 103 are followed by 99, and 99, 100, 104 rise again
    events = _stock(("S0", 101.0), ("S1", 200.0), ("S0", 102.0), ("S1", 100.0), ("S0", 103.0), ("S0", 99.0),
                    ("S0", 100.0), ("S0", 104.0))
    mine, r = flink.run_engine(events, [100.0, 98.0])
    assert mine == Counter({(0, 0, 2, 4): 1, (1, 0, 2, 4): 1, (1, 5, 6, 7): 1})
    assert r["cpu_s"] >= 0 and len(r["load"]) == 3


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_engine_reports_what_match_recognize_would(seed):
    events = flink.make_events(1500, 20, seed)
    ps = flink.thresholds(7)
    mine, _ = flink.run_engine(events, ps)
    assert mine == _rising_in_a_row(events, ps) and sum(mine.values()) > 0


def test_the_flink_query_names_the_pattern_and_its_threshold():
    q = flink.sql(3, 97.5)
    assert q.startswith("SELECT 3 AS pid,") and "A.price > 97.5" in q
    assert "PATTERN (A B C)" in q and "AFTER MATCH SKIP TO NEXT ROW" in q and "PARTITION BY name" in q


def test_written_events_and_read_matches(tmp_path: Path):
    events = _stock(("S0", 101.0), ("S1", 7.5), ("S0", 102.25))
    path = tmp_path / "events.csv"
    flink.write_csv(events, path)
    assert path.read_text().splitlines() == ["0,S0,101.0", "1,S1,7.5", "2,S0,102.25"]
    out = tmp_path / "out" / "dt=x"
    out.mkdir(parents=True)
    (out / "part-0").write_text("0,1,2,3\n1,1,2,3\n")
    (out / "part-1").write_text("0,1,2,3\n\n")
    (out / ".part-2.inprogress").write_text("9,9,9,9\n")  # a hidden file Flink still writes: not read
    assert flink.read_matches(tmp_path / "out") == Counter({(0, 1, 2, 3): 2, (1, 1, 2, 3): 1})


def test_compare_counts_per_pattern():
    mine = Counter({(0, 1, 2, 3): 1, (1, 4, 5, 6): 1})
    assert flink.compare(mine, Counter(mine), 2) == {
        "equal": True, "engine_matches": 2, "flink_matches": 2, "patterns_with_different_counts": [],
        "only_engine": 0, "only_flink": 0}
    theirs = Counter({(0, 1, 2, 3): 1, (0, 7, 8, 9): 1})
    got = flink.compare(mine, theirs, 2)
    assert not got["equal"] and got["patterns_with_different_counts"] == [0, 1]
    assert got["only_engine"] == 1 and got["only_flink"] == 1
    # the same counts per pattern, different matches
    got = flink.compare(Counter({(0, 1, 2, 3): 1}), Counter({(0, 2, 3, 4): 1}), 1)
    assert not got["equal"] and got["patterns_with_different_counts"] == []


def test_without_flink_it_is_skipped(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    assert flink.main(["--out", str(tmp_path)]) == 0
    assert "skipped" in capsys.readouterr().out
    assert not list(tmp_path.iterdir())


def test_the_table_goes_between_its_markers(tmp_path: Path):
    doc = tmp_path / "cayuga.md"
    doc.write_text("# Cayuga\n\nbefore\n<!-- bench:flink -->\nold\n<!-- /bench:flink -->\nafter\n")
    row = {"patterns": 100, "engine_events_per_s": 5000.0, "flink_events_per_s": 250.0, "flink_total_cpu_s": 90.0,
           "check": {"equal": True, "engine_matches": 1234}, "load": (3.0, 2.0, 1.0)}
    params = {"events": 20000, "symbols": 1000, "seed": 7, "rounds": 2, "flink": "2.3.0"}
    flink.write_table(doc, params, [row])
    text = doc.read_text()
    assert "old" not in text and text.startswith("# Cayuga\n\nbefore\n") and text.endswith("after\n")
    assert "| 100 | 5,000 | 250 | 20.0x | 90.0 | 1,234 (equal) | 3.0 |" in text

