"""AMKH simulation (Wu & Yu, Section 3, Fig. 1) on this machine.

Workload (:func:`scripts.workloads.amkh`): 10 equality-only attributes ``e0..e9`` and 10
general ones ``g0..g9``; each subscription is ``e0 = v AND ej = v AND g0 op v`` with ``j``
uniform in 1..9, ``op`` ``=`` half of the time else ``>`` or ``<``; predicate values
uniform in ``[6, x]``, ``x`` from 15 to 95; event values uniform in ``[6, 95]`` on all 20
attributes.  For MKH (Eq. 1: every attribute hashed, clause IDs as they are), AMKH(0,-)
(equality-only attributes hashed), AMKH(1,2) (plus one general attribute, IDs folded
mod 2) and AMKH with its adaptive choice, it reports per event the unmatched
subscriptions examined (Fig. 1's measure): the entries of the probed collision lists that
had the probed coordinate and failed the final check (the lists store each entry's 64-bit
coordinate hash, so an entry of another coordinate costs one comparison, no check); next
to it, all the entries of the probed lists that were not a match, which is what an
implementation without stored coordinates would check (``M`` is the power of two at or
above twice the number of subscriptions); the candidate coordinates probed; the matching
time, next to the counting matcher's in the same run.
Times are CPU time of the process (``time.process_time``) over all events of the run.

Results: ``docs/bench/amkh.json`` (``amkh-quick.json`` for ``--quick``), the results
section of ``docs/amkh.md`` (full runs) and ``docs/img/amkh-fig1.png``
(``amkh-quick-fig1.png``).

Usage::

    python -m scripts.bench.amkh [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from matchers.amkh import AmkhMatcher
from matchers.catalog import create
from scripts.bench import kit
from scripts.workloads import amkh as amkh_workload

VARIANTS: dict[str, dict[str, Any]] = {
    "MKH": dict(mkh=True),
    "AMKH(0,-)": dict(G=0),
    "AMKH(1,2)": dict(G=1, B=2),
    "AMKH(adaptive)": dict(),
}
FULL: dict[str, Any] = dict(xs=list(range(15, 96, 10)), n_subs=100_000, n_events=1000)
QUICK: dict[str, Any] = dict(xs=[15, 35, 55, 75, 95], n_subs=10_000, n_events=300)
SUB_BATCH = 10_000


def run_one(name: str, subs, events) -> dict:
    """Build one matcher and match every event once; its counters and CPU times."""
    matcher = create("counting") if name == "counting" else AmkhMatcher(**VARIANTS[name])
    c0 = time.process_time()
    for lo in range(0, len(subs), SUB_BATCH):
        matcher.add(subs[lo:lo + SUB_BATCH])
    load_s = time.process_time() - c0
    batch = matcher.encode(events)
    matcher.match(matcher.encode(events[:10]))  # compile / warm up
    if isinstance(matcher, AmkhMatcher):
        matcher.counters[:] = 0
    c0 = time.process_time()
    result = matcher.match(batch)
    match_s = time.process_time() - c0
    n = len(events)
    row = dict(matcher=name, load_s=load_s, match_us=match_s / n * 1e6, matches=result.total / n)
    if isinstance(matcher, AmkhMatcher):
        probes, examined, unmatched, same = (int(v) for v in matcher.counters)
        row.update(candidates=probes / n, examined=examined / n, unmatched=unmatched / n,
                   unmatched_same_coordinate=same / n,
                   hashed=[matcher.dictionary.attr_names[a] for a in matcher.config.hashed],
                   folds=list(matcher.config.folds))
    return row


def table(res: dict) -> str:
    xs = res["xs"]
    rows = res["rows"]
    by = {(r["matcher"], r["x"]): r for r in rows}
    names = list(VARIANTS)
    head = (f"n={res['n_subs']:,} subscriptions, {res['n_events']} events; per event: unmatched subscriptions "
            "examined (final check failed) / unmatched entries in the probed lists / candidate coordinates, "
            "matching µs; counting in the same run")
    lines = [head, "", "| x | matches | " + " | ".join(f"{n} unmatched / in lists / cands" for n in names) + " | "
             + " | ".join(f"{n} µs" for n in names) + " | counting µs | AMKH(adaptive) / counting |",
             "|---" * (4 + 2 * len(names)) + "|"]
    for x in xs:
        cnt = by[("counting", x)]
        cells = [f"{by[(n, x)]['unmatched_same_coordinate']:.2f} / {by[(n, x)]['unmatched']:.1f} / "
                 f"{by[(n, x)]['candidates']:.1f}" for n in names]
        times = [f"{by[(n, x)]['match_us']:.1f}" for n in names]
        ratio = by[("AMKH(adaptive)", x)]["match_us"] / cnt["match_us"]
        lines.append(f"| {x} | {cnt['matches']:.2f} | " + " | ".join(cells) + " | " + " | ".join(times)
                     + f" | {cnt['match_us']:.1f} | {ratio:.2f}x |")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for name in VARIANTS:
        rows = [r for r in res["rows"] if r["matcher"] == name]
        line, = ax1.plot([r["x"] for r in rows], [r["unmatched_same_coordinate"] for r in rows], marker="o",
                         label=name)
        ax1.plot([r["x"] for r in rows], [r["unmatched"] for r in rows], ls=":", color=line.get_color(),
                 label=f"{name}, all entries of the probed lists")
        ax2.plot([r["x"] for r in rows], [r["match_us"] for r in rows], marker="o", label=name)
    rows = [r for r in res["rows"] if r["matcher"] == "counting"]
    ax2.plot([r["x"] for r in rows], [r["match_us"] for r in rows], marker="s", ls="--", label="counting")
    ax1.set(xlabel="upper range of predicate values x", ylabel="unmatched subscriptions examined per event",
            title=f"Fig. 1 (n={res['n_subs']:,})")
    ax2.set(xlabel="upper range of predicate values x", ylabel="µs per event (CPU)", yscale="log",
            title="matching time")
    ax1.set_yscale("symlog", linthresh=0.1)
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 subscriptions, 5 values of x")
    parser.add_argument("--render", action="store_true", help="only redo the docs and plot from the saved JSON")
    args = parser.parse_args(argv)
    prefix = "amkh-quick" if args.quick else "amkh"
    if args.render:
        _publish(json.loads((kit.DOCS / "bench" / f"{prefix}.json").read_text()), prefix)
        return 0
    kit.one_thread()
    cfg = QUICK if args.quick else FULL
    res: dict = dict(environment=kit.environment(), quick=args.quick, xs=cfg["xs"], n_subs=cfg["n_subs"],
                     n_events=cfg["n_events"], rows=[])
    started = time.time()
    todo = [(x, name) for x in cfg["xs"] for name in (*VARIANTS, "counting")]
    workloads: dict[int, Any] = {}
    for x, name in tqdm(todo, desc="amkh fig1", file=sys.stderr):
        if x not in workloads:
            workloads.clear()
            workloads[x] = amkh_workload(n_subs=cfg["n_subs"], n_events=cfg["n_events"], x=x, seed=x)
        subs, events = workloads[x]
        row = run_one(name, subs, events)
        row["x"] = x
        res["rows"].append(row)
    res["seconds"] = round(time.time() - started, 1)
    res["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(table(res))
    (kit.DOCS / "bench").mkdir(parents=True, exist_ok=True)
    out = kit.DOCS / "bench" / f"{prefix}.json"
    out.write_text(json.dumps(res, indent=1))
    _publish(res, prefix)
    print(f"wrote {out} and docs/img/{prefix}-fig1.png")
    return 0


def _publish(res: dict, prefix: str) -> None:
    """The plot, and for a full run the results section of ``docs/amkh.md``."""
    plot(res, kit.DOCS / "img" / f"{prefix}-fig1.png")
    if not res["quick"]:
        env = res["environment"]
        kit.write_section(kit.DOCS / "amkh.md", f"Run of {res.get('date', '?')}; load average at the start {env['load_avg']}.\n\n"
                      + table(res) + "\n\n![Fig. 1](img/amkh-fig1.png)\n")


if __name__ == "__main__":
    sys.exit(main())
