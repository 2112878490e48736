"""The goal benchmarks of issues 2, 4, 5 and 6 over several code trees in one run.

Each goal is one bench module of this package at its goal size, run by
:func:`scripts.bench.kit.in_trees` over every tree given (``--tree label=PATH``,
checkouts of this project such as git worktrees of two commits), one process per run,
rounds interleaved.  From each run's JSON the goal's figures are read; per tree the best
round counts (highest rate, lowest time), next to the ratio of the last tree to the first
(``after / before``: above 1 is faster for a rate, slower for a time).  ``matches`` is
the run's match fingerprint (counts, or ids of a sample where the bench keeps them); it
must be equal across trees.  Raw runs go to ``docs/bench/trees-<goal>.json``; ``--render``
prints the markdown table of every saved goal.

Usage::

    python -m scripts.bench.trees --tree before=/path/a --tree after=/path/b --goal counting --rounds 2
    python -m scripts.bench.trees --render
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from scripts.bench import kit


class Figure(NamedTuple):
    value: float
    unit: str
    higher_is_better: bool


class Goal(NamedTuple):
    issue: int
    module: str
    argv: tuple[str, ...]
    result: str
    figures: Callable[[dict], dict[str, Figure]]
    matches: Callable[[dict], Any]
    met: Callable[[dict], bool | None]
    target: str


def _largest(rows: list[dict]) -> list[dict]:
    """The rows of the largest number of subscriptions (the goal's size in a goal run)."""
    top = max(x["n_subs"] for x in rows)
    return [x for x in rows if x["n_subs"] == top]


def _counting(r: dict) -> dict[str, Figure]:
    row = _largest(r["rows"])[0]
    return {"events/CPU-s": Figure(row["events_per_s"], "ev/s", True),
            "build CPU s": Figure(row["build_cpu_s"], "s", False),
            "bytes/predicate": Figure(row["bytes_per_pred"], "B", False)}


def _fabret(r: dict) -> dict[str, Figure]:
    by = {x["matcher"]: x for x in _largest(r["fig3"])}
    return {"dynamic events/CPU-s": Figure(by["dynamic"]["events_per_s"], "ev/s", True),
            "counting events/CPU-s": Figure(by["counting"]["events_per_s"], "ev/s", True),
            "dynamic / counting": Figure(r["goal"]["ratio"], "x", True),
            "dynamic load CPU s": Figure(by["dynamic"]["load_s"], "s", False)}


def _opindex(r: dict) -> dict[str, Figure]:
    res = r["results"]
    out = {f"{m} µs/event": Figure(res[m]["match_us_per_event_min"], "µs", False) for m in res}
    out |= {f"{k} (min)": Figure(g["min"], "x", True) for k, g in r["goals"].items()}
    return out | {"opindex build µs/sub": Figure(res["opindex"]["build_us_per_sub"], "µs", False)}


def _vci(r: dict) -> dict[str, Figure]:
    out = {}
    for part in ("fig6a", "fig6b"):
        by = {(x["index"], x["n"]): x for x in r[part]["rows"]}
        top = max(x["n"] for x in r[part]["rows"])
        out[f"{part} R={r[part]['R']:,} LCI-BV(DT) µs/search n={top:,}"] = Figure(
            by[("LCI-BV(DT)", top)]["count_us"], "µs", False)
        out[f"{part} tree / LCI-BV(DT) n={top:,}"] = Figure(
            by[("tree", top)]["count_us"] / by[("LCI-BV(DT)", top)]["count_us"], "x", True)
    return out


def _amkh(r: dict) -> dict[str, Figure]:
    def total(name: str) -> float:
        return sum(x["match_us"] for x in r["rows"] if x["matcher"] == name)

    names = dict.fromkeys(x["matcher"] for x in r["rows"])
    out = {f"{m} µs/event (sum over x)": Figure(total(m), "µs", False) for m in names}
    return out | {"counting / AMKH(adaptive)": Figure(total("counting") / total("AMKH(adaptive)"), "x", True)}


def _all(met: dict | None) -> bool | None:
    return None if met is None else all(met.values())


GOALS: dict[str, Goal] = {
    "counting": Goal(2, "counting", ("--sizes", "1000000", "--events", "5000"), "docs/bench/counting.json",
                     _counting, lambda r: [(x["n_subs"], x["matches_per_event"], x["satisfied_per_event"])
                                           for x in r["rows"]],
                     lambda r: _all(_largest(r["rows"])[0]["goal_met"]),
                     "N = 1M Table 3: >= 25,000 events/s, build < 10 s, < 100 B/predicate"),
    "fabret": Goal(4, "fabret", ("--only", "fig3", "--sizes", "1000000", "--matchers", "counting,dynamic"),
                   "docs/bench/fabret.json", _fabret,
                   lambda r: [(x["matcher"], x["matches_per_event"], x["ids_sample"]) for x in r["fig3"]],
                   lambda r: r["goal"]["met"] if r["goal"]["n_subs"] >= 1_000_000 else None,
                   "W0, N = 1M: dynamic >= 50 x counting"),
    "opindex": Goal(5, "opindex", ("--goal", "--n-subs", "1000000", "--rounds", "9"), "docs/bench/opindex-goal.json",
                    _opindex, lambda r: {m: x["matches_per_event"] for m, x in r["results"].items()},
                    lambda r: all(g["met"] for g in r["goals"].values()),
                    "Table 3 (goal at N = 1M): counting / opindex >= 3, kindex / opindex >= 10"),
    "vci": Goal(6, "vci", ("--only", "fig6"), "docs/bench/vci.json", _vci,
                lambda r: [(p, x["index"], x["n"], x["matches"]) for p in ("fig6a", "fig6b") for x in r[p]["rows"]],
                lambda r: all("meets" in g or g.endswith("yes") for g in r["goals"]),
                "LCI-BV(DT) < 2 µs per search at n = 1M, faster than the interval tree"),
    "amkh": Goal(6, "amkh", (), "docs/bench/amkh.json", _amkh,
                 lambda r: [(x["x"], x["matcher"], x["matches"], x.get("examined")) for x in r["rows"]],
                 lambda r: None,
                 "Fig. 1 simulation (100,000 subscriptions): examined subscriptions, matching time next to counting"),
}
"""Each issue's goal benchmark: bench module, arguments (the goal's size), result JSON."""


def summary(goal: str, runs: list[dict]) -> dict:
    """Best round per tree of each figure, the last tree over the first, matches equal."""
    g = GOALS[goal]._replace(argv=tuple(runs[0]["argv"]))
    trees = list(dict.fromkeys(r["tree"] for r in runs))
    figs = {t: [g.figures(r["result"]) for r in runs if r["tree"] == t] for t in trees}
    best: dict[str, dict[str, float]] = {}
    for name, f0 in figs[trees[0]][0].items():
        pick = max if f0.higher_is_better else min
        best[name] = {t: pick(f[name].value for f in figs[t]) for t in trees}
    matches = [json.dumps(g.matches(r["result"]), sort_keys=True) for r in runs]
    return {"goal": goal, "issue": g.issue, "target": g.target, "trees": trees, "best": best,
            "units": {k: v.unit for k, v in figs[trees[0]][0].items()},
            "higher_is_better": {k: v.higher_is_better for k, v in figs[trees[0]][0].items()},
            "met": {t: [g.met(r["result"]) for r in runs if r["tree"] == t] for t in trees},
            "matches_equal": len(set(matches)) == 1, "rounds": max(r["round"] for r in runs) + 1,
            "parallel": any(r.get("parallel") for r in runs),
            "load": [round(r["load_avg"][0], 1) for r in runs],
            "command": f"python -m scripts.bench.{g.module} {' '.join(g.argv)}".rstrip()}


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.3g}"


def _met(rounds: list[bool | None]) -> str:
    if None in rounds:
        return "–"
    met = sum(1 for m in rounds if m)
    return "yes" if met == len(rounds) else "**no**" if not met else f"{met} of {len(rounds)} rounds"


def render(summaries: list[dict]) -> str:
    """One markdown table: per goal and figure, each tree's best round and last / first; then the commands."""
    trees = summaries[0]["trees"]
    lines = ["| issue: goal | figure | " + " | ".join(trees) + f" | {trees[-1]} / {trees[0]} | goal met "
             f"({', '.join(trees)}) | matches equal | rounds | load |",
             "|---|---|" + "---:|" * (len(trees) + 1) + "---|---|---|---|"]
    for s in summaries:
        first = True
        for name, by in s["best"].items():
            ratio = by[trees[-1]] / by[trees[0]]
            cells = " | ".join(f"{_fmt(by[t])} {s['units'][name]}" for t in trees)
            goal = f"{s['issue']}: {s['target']}" if first else ""
            met = ", ".join(_met(s["met"][t]) for t in trees) if first else ""
            equal = ("yes" if s["matches_equal"] else "**no**") if first else ""
            load = f"{min(s['load'])}-{max(s['load'])}" if first else ""
            rounds = f"{s['rounds']}{' (parallel)' if s.get('parallel') else ''}" if first else ""
            lines.append(f"| {goal} | {name} | {cells} | {ratio:.2f} | {met} | {equal} | {rounds} | {load} |")
            first = False
    def code(s: dict) -> str:
        commits = s.get("commits") or {}
        return f" ({', '.join(f'{t} = {commits[t]}' for t in trees if t in commits)})" if commits else ""

    return "\n".join([*lines, "", *(f"* issue {s['issue']}{code(s)}: `{s['command']}`" for s in summaries)])


def commit_of(tree: Path) -> str:
    """The short commit a checkout is at ("" when it is not a git checkout)."""
    out = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


MARKERS = ("<!-- trees:begin -->", "<!-- trees:end -->")
SECTION = """## Goal benchmarks before and after a change

The goal benchmarks of issues 2, 4, 5 and 6 (sizes in the commands below) over two checkouts in one run
(`python -m scripts.bench.trees --tree before=PATH --tree after=PATH --goal G --rounds R`, each
bench in its own process per tree and round, rounds interleaved, or with `--parallel` both trees
at the same time, under the same load; CPU time of one thread). The commits compared are named
per goal under the table (each goal keeps its last run). Each figure is the tree's best round;
`after / before` above 1 is faster for a rate (ev/s, x), slower for a time. `goal met`: the
bench's own verdict, per tree (every round). `matches equal`: the runs' match counts (and, for
Fabret, the ids of 50 events) are the same in every run of both trees. `load`: 1-minute load
average at the end of each run (2 cores shared with other jobs). Raw runs:
`docs/bench/trees-<goal>.json`."""
"""The head of the section of ``docs/bench.md`` (written by ``--render``)."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=[], help="label=PATH of a checkout (repeatable, in order)")
    ap.add_argument("--goal", action="append", choices=sorted(GOALS), default=[], help="goal benchmark (repeatable)")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds per tree")
    ap.add_argument("--parallel", action="store_true", help="the trees of a round at the same time")
    ap.add_argument("--append", action="store_true", help="add the rounds to the goal's saved runs")
    ap.add_argument("--args", default=None, help="the bench's arguments instead of the goal's (a smaller size)")
    ap.add_argument("--render", action="store_true", help="the table of every saved goal, into docs/bench.md")
    args = ap.parse_args(argv)
    trees = {label: Path(path) for label, path in (t.split("=", 1) for t in args.tree)}
    for goal in args.goal:
        g = GOALS[goal]
        if args.args is not None:
            g = g._replace(argv=tuple(args.args.split()))
        path = kit.DOCS / "bench" / f"trees-{goal}.json"
        kept = json.loads(path.read_text())["runs"] if args.append and path.exists() else []
        first = max((r["round"] for r in kept), default=-1) + 1
        runs = kept + kit.in_trees(g.module, g.argv, trees, g.result, args.rounds, first_round=first,
                                   parallel=args.parallel)
        commits = {label: commit_of(tree) for label, tree in trees.items()}
        path.write_text(json.dumps({"commits": commits, "runs": runs}, indent=1) + "\n")  # kept if the summary fails
        s = summary(goal, runs) | {"commits": commits}
        path.write_text(json.dumps({"summary": s, "commits": commits, "runs": runs}, indent=1) + "\n")
        print(render([s]), flush=True)
    if args.render:
        files = {goal: json.loads((kit.DOCS / "bench" / f"trees-{goal}.json").read_text())
                 for goal in GOALS if (kit.DOCS / "bench" / f"trees-{goal}.json").exists()}
        saved = [summary(goal, f["runs"]) | {"commits": f.get("commits", {})} for goal, f in files.items()]
        print(render(saved))
        kit.write_section(kit.DOCS / "bench.md", f"{SECTION}\n\n{render(saved)}\n", *MARKERS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
