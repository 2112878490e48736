"""The ``auto`` matcher beside every matcher: one table over the workloads of a harness run.

A section of ``docs/bench.md`` (rendered by :func:`scripts.bench.harness.render_markdown`
from the newest harness results when they include ``auto``): per workload, the index
``auto`` chose (recomputed from the workload's subscriptions), its matching time over the
best servable matcher's (the service's candidates) and every matcher's CPU time per event.
"""

from __future__ import annotations

from matchers.auto import _Tally, choose
from matchers.base import names
from scripts.workloads import generate

GOAL = 1.25
"""Issue 14: ``auto`` within this factor of the best single matcher on every workload."""


def _choice(workload: dict) -> str:
    p = workload["parameters"]
    tally = _Tally()
    tally.update(generate(workload["workload"], n_subs=p["n_subs"], n_events=1, seed=p["seed"]).subscriptions, +1)
    return choose(tally.shape())[0]


def render(harness: dict) -> str:
    """The section, or "" when the run has no ``auto``."""
    rows = [(w, {r["matcher"]: r for r in w["runs"] if not r.get("failed")}) for w in harness["workloads"]]
    if not any("auto" in runs for _, runs in rows):
        return ""
    matchers = list(dict.fromkeys(m for _, runs in rows for m in runs if m != "auto"))
    servable = set(names(baselines=False)) - {"auto"}
    head = ["workload", "auto chose", "auto µs/ev", "best servable", "auto ÷ best servable", "best of all",
            *matchers]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * 2 + "---|" + "---:|" * len(matchers)]
    worst = 0.0
    for w, runs in rows:
        auto = runs.get("auto")
        cpu = {m: r["match_cpu_us"] for m, r in runs.items() if m != "auto" and r.get("match_cpu_us")}
        if auto is None or not cpu:
            continue
        best = min((m for m in cpu if m in servable), key=cpu.__getitem__)
        best_all = min(cpu, key=cpu.__getitem__)
        ratio = auto["match_cpu_us"] / cpu[best]
        worst = max(worst, ratio)
        cells = [f"**{cpu[m]:.2f}**" if m == best_all else f"{cpu[m]:.2f}" if m in cpu else "-" for m in matchers]
        lines.append("| " + " | ".join([w["workload"], _choice(w), f"{auto['match_cpu_us']:.2f}",
                                        f"{best} {cpu[best]:.2f}", f"{ratio:.2f}" + (" **over**" if ratio > GOAL else ""),
                                        best_all, *cells]) + " |")
    sizes = sorted({(w["n_subscriptions"], w["n_events"]) for w, _ in rows})
    return "\n".join([
        "## `auto` beside every matcher (issue 14)", "",
        f"From the harness run above ({harness['date']}; subscriptions, events: {sizes}; load average "
        f"{harness['environment'].get('load_avg')}). Matching CPU time per event (µs), one run per matcher; "
        f"the fastest in bold. `auto chose`: the index `auto` picks for the workload (docs/matchers.md); "
        f"`auto ÷ best servable`: its time over the fastest matcher the service may use (baselines excluded), "
        f"goal <= {GOAL}; worst here {worst:.2f}.", "",
        *lines, ""])
