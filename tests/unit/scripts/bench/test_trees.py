"""Bench modules over several code trees: each tree's own code, rounds interleaved, best round per tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.bench import trees
from scripts.bench.kit import in_trees as run_in_trees

TOY = """import json, pathlib, sys
out = pathlib.Path("docs/bench/toy.json")
if "--fail" not in sys.argv:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"code": CODE, "argv": sys.argv[1:]}))
"""


def _tree(root: Path, code: str) -> Path:
    """A checkout holding ``scripts.bench.toy``, which writes its result with ``code`` in it."""
    bench = root / "scripts" / "bench"
    bench.mkdir(parents=True)
    (root / "scripts" / "__init__.py").write_text("")
    (bench / "__init__.py").write_text("")
    (bench / "toy.py").write_text(f"CODE = {code!r}\n" + TOY)
    return root


def test_each_tree_runs_its_own_code_in_alternating_order(tmp_path: Path) -> None:
    a, b = _tree(tmp_path / "a", "old"), _tree(tmp_path / "b", "new")
    runs = run_in_trees("toy", ["--x", "1"], {"before": a, "after": b}, "docs/bench/toy.json", rounds=3)
    assert [(r["round"], r["tree"]) for r in runs] == [
        (0, "before"), (0, "after"), (1, "after"), (1, "before"), (2, "before"), (2, "after")]
    assert all(r["result"] == {"code": "old" if r["tree"] == "before" else "new", "argv": ["--x", "1"]} for r in runs)
    assert all(r["cpu_s"] >= 0 and r["wall_s"] > 0 and len(r["load_avg"]) == 3 for r in runs)
    more = run_in_trees("toy", [], {"before": a, "after": b}, "docs/bench/toy.json", first_round=3)
    assert [(r["round"], r["tree"]) for r in more] == [(3, "after"), (3, "before")]
    both = run_in_trees("toy", [], {"before": a, "after": b}, "docs/bench/toy.json", parallel=True)
    assert [(r["tree"], r["result"]["code"], r["parallel"]) for r in both] == [("before", "old", True),
                                                                                ("after", "new", True)]


def test_a_stale_result_is_not_taken_for_a_run(tmp_path: Path) -> None:
    a = _tree(tmp_path / "a", "old")
    (a / "docs" / "bench").mkdir(parents=True)
    (a / "docs" / "bench" / "toy.json").write_text('{"code": "stale"}')
    with pytest.raises(RuntimeError, match="failed"):
        run_in_trees("toy", ["--fail"], {"before": a}, "docs/bench/toy.json")


def _counting_run(tree: str, rnd: int, events_per_s: float, build_s: float, matches: float) -> dict:
    row = {"n_subs": 1_000_000, "goal_met": {"events_per_s": events_per_s >= 31_000}, "events_per_s": events_per_s, "build_cpu_s": build_s, "bytes_per_pred": 96.0,
           "matches_per_event": matches, "satisfied_per_event": 900.0}
    return {"tree": tree, "round": rnd, "argv": ["--sizes", "1000000"], "load_avg": (2.0 + rnd, 1.0, 1.0),
            "result": {"rows": [row]}}


def test_summary_takes_each_trees_best_round_and_checks_the_matches() -> None:
    runs = [_counting_run("before", 0, 30_000, 9.0, 78.5), _counting_run("after", 0, 33_000, 9.5, 78.5),
            _counting_run("after", 1, 31_000, 8.5, 78.5), _counting_run("before", 1, 32_000, 9.2, 78.5)]
    s = trees.summary("counting", runs)
    assert s["best"]["events/CPU-s"] == {"before": 32_000, "after": 33_000}
    assert s["best"]["build CPU s"] == {"before": 9.0, "after": 8.5}
    assert s["matches_equal"] and s["rounds"] == 2 and s["command"] == "python -m scripts.bench.counting --sizes 1000000"
    assert s["met"] == {"before": [False, True], "after": [True, True]}
    table = trees.render([s])
    assert (f"| 2: {s['target']} | events/CPU-s | 32,000 ev/s | 33,000 ev/s | 1.03 | 1 of 2 rounds, yes | yes | 2 "
            "| 2.0-3.0 |") in table
    assert "|  | build CPU s | 9 s | 8.5 s | 0.94 |  |  |  |  |" in table
    assert "* issue 2: `python -m" in table  # no commits recorded: none named
    named = trees.render([s | {"commits": {"before": "abc1234", "after": "def5678"}}])
    assert "* issue 2 (before = abc1234, after = def5678): `python -m scripts.bench.counting" in named
    assert trees.commit_of(Path(__file__).parent) != "" and trees.commit_of(Path("/")) == ""
    runs[2]["result"]["rows"][0]["matches_per_event"] = 78.6
    assert not trees.summary("counting", runs)["matches_equal"]
