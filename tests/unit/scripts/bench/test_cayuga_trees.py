"""The in-process A/B of the Cayuga engine: each tree in its own process, same matches."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.bench import cayuga_trees

ROOT = Path(__file__).resolve().parents[4]


def test_two_runs_of_one_tree_report_the_same_matches(tmp_path: Path, capsys) -> None:
    out = tmp_path / "runs.json"
    argv = ["--tree", f"a={ROOT}", "--tree", f"b={ROOT}", "--subscriptions", "20", "--events", "600",
            "--warmup", "100", "--symbols", "5", "--rounds", "2", "--json", str(out)]
    assert cayuga_trees.main(argv) == 0
    runs = json.loads(out.read_text())["runs"]
    assert [(r["round"], r["tree"]) for r in runs] == [(0, "a"), (0, "b"), (1, "b"), (1, "a")]
    assert len({r["matches"] for r in runs}) == 1 and runs[0]["matches"] > 0
    assert all(r["events"] == 500 and r["events_per_s"] > 0 and len(r["load"]) == 3 for r in runs)
    assert "matches equal: True" in capsys.readouterr().out


def test_batches_and_engine_arguments_give_the_same_matches(tmp_path: Path) -> None:
    """``--batch`` feeds ``process_batch``; ``--engine`` runs one tree with the flat engine."""
    out = tmp_path / "runs.json"
    argv = ["--tree", f"flat={ROOT}", "--tree", f"python={ROOT}", "--engine", 'flat={"flat": true}',
            "--subscriptions", "20", "--events", "600", "--warmup", "100", "--symbols", "5", "--rounds", "1",
            "--batch", "7", "--json", str(out)]
    assert cayuga_trees.main(argv) == 0
    runs = json.loads(out.read_text())["runs"]
    assert [r["engine"] for r in runs] == [{"flat": True}, {}]
    assert len({r["matches"] for r in runs}) == 1 and runs[0]["matches"] > 0
