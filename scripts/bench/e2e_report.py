"""The report of :mod:`scripts.bench.e2e`: its JSON record, the record's Markdown tables and plot."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from scripts.bench.feed import WORKLOAD

GOAL_EVENTS_PER_S = 20_000
GOAL_P99_S = 3.0


def registration_phases(batches: list[dict], started: float, seconds: float, warmup: list[dict]) -> dict:
    """Where registration's wall time went (seconds): from the query's start (wall clock
    ``started``) to its first batch, each phase of the batches' subscription changes (read +
    parse, admit, apply), the rest of those batches and between them (``seconds`` in all), and
    the first event batches after it (``warmup``: the tasks' index time, each worker building
    its shards from the registry's files, summed over the tasks)."""
    first = min((b["finished_at"] - b["batch_ms"] / 1e3 for b in batches), default=started + seconds)
    phases = {name: sum(b[f"{name}_ms"] for b in batches) / 1e3 for name in ("parse", "admit", "apply")}
    batch_s = sum(b["batch_ms"] for b in batches) / 1e3
    return {"start_s": first - started, **{f"{k}_s": v for k, v in phases.items()},
            "rest_of_batches_s": batch_s - sum(phases.values()), "between_s": seconds - (first - started) - batch_s,
            "batches": len(batches), "records": sum(b["subscription_records"] for b in batches),
            "first_index_s": sum(b["index_ms"] for b in warmup) / 1e3}


def registration_line(r: dict) -> str:
    """The registration figures of a run (:func:`registration_phases`) as one line."""
    p = r["register_phases"]
    return (f"registered {r['registered']:,} of {r['n_subs']:,} subscriptions in {r['register_s']:.1f} s ({r['n_subs'] / r['register_s']:,.0f}/s;"
            f" {p['batches']} batches): query start to first batch {p['start_s']:.1f} s, read + parse {p['parse_s']:.1f},"
            f" admit {p['admit_s']:.1f}, apply {p['apply_s']:.1f}, rest of the batches {p['rest_of_batches_s']:.1f},"
            f" between batches {p['between_s']:.1f}; then the first event batch {r['warmup_s']:.1f} s"
            f" (building the shards {p['first_index_s']:.1f} s of task time); load {r['register_load']:.1f}")


def render(record: dict, image: str) -> str:
    lines = [
        "# End-to-end benchmark of the match service",
        "",
        f"Run {record['date']} on {record['machine']} (`python -m scripts.bench.e2e{' --quick' if record['quick'] else ''}`,"
        f" {record['seconds']:.0f} s). Embedded Apache Kafka broker, Spark `local[2]`, matcher `{record['matcher']}`,"
        f" workload Fabret {WORKLOAD} (Table 1: 2 fixed `=`, 1 fixed `<=`, 1 free `=` per subscription;"
        " events of 32 attributes, values 1..35), events in 2 partitions, notifications carry the whole event.",
        "",
        f"Goal: >= {GOAL_EVENTS_PER_S:,} events/s with 100,000 subscriptions; p99 < {GOAL_P99_S:g} s at 5,000 events/s."
        f" Load average of the machine at the end of the run: {', '.join(f'{x:.1f}' for x in record['load_average'])}"
        " (2 cores shared with other jobs: absolute figures are slower than on an idle machine; the ratios"
        " to the Spark SQL baseline are measured in the same run).",
        "",
        "| subscriptions | connector | registration s | backlog events | per trigger | sustained events/s | events/s of batch time |"
        " steady events/s | batches | notifications | p50 s | p99 s | offered/s | Spark SQL events/s | service / SQL |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in record["runs"]:
        lat, sql = r["latency"], r.get("spark_sql")
        ratio = r["events_per_s"] / sql["events_per_s"] if sql and sql["events_per_s"] else float("nan")
        sql_cell = (f"{sql['events_per_s']:,.2f} ({sql['events']} ev"
                    f"{'' if sql['agrees_with_service_matcher'] else ', DISAGREES'})" if sql else "not run")
        lines.append(
            f"| {r['n_subs']:,} | {r.get('connector', 'kafka-py')} | {r['register_s']:.1f} | {r['drained_events']:,} | {r['per_trigger']:,} |"
            f" {r['events_per_s']:,.0f} | {r['events_per_batch_s']:,.0f} |"
            f" {r['steady']['events_per_s'] if 'steady' in r else float('nan'):,.0f} | {r['batches']} | {r['matches']:,} |"
            f" {lat['p50_s']:.2f} | {lat['p99_s']:.2f} | {lat['offered_per_s']:,.0f} |"
            f" {sql_cell} | {f'{ratio:,.0f}x' if sql else '-'} |"
        )
    lines += ["", "## Where the time goes", "",
              "Per event, measured in one process on the same events (what each executor task does), next to the"
              " plain read rate of the `kafka-py` source into Spark and the batch figures above.", "",
              "| subscriptions | parse µs | flatten µs | encode µs | match µs | notify µs | matches/event |"
              " executor total µs | source read records/s | task match s / batch s |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in record["runs"]:
        if "steps_us" not in r:
            continue
        s = r["steps_us"]
        total = s["parse_us"] + s["flatten_us"] + s["encode_us"] + s["match_us"] + s["notify_us"]
        lines.append(
            f"| {r['n_subs']:,} | {s['parse_us']:.1f} | {s['flatten_us']:.1f} | {s['encode_us']:.1f} |"
            f" {s['match_us']:.1f} | {s['notify_us']:.1f} | {s['matches_per_event']:.2f} | {total:.1f} |"
            f" {r['source_read_per_s']:,.0f} | {r['task_match_s_sum']:.1f} / {r['batch_s_sum']:.1f} |"
        )
    for r in record["runs"]:
        if "empty_job" in r:
            j = r["empty_job"]
            lines += ["", f"An empty job of 2 tasks as the match job runs them (the fixed cost of every micro-batch), {r['n_subs']:,}"
                      f" run: {j['wall_ms']:.0f} ms wall, {j['python_cpu_ms_per_task']:.0f} ms CPU per Python task,"
                      f" {j['jvm_cpu_ms']:.0f} ms JVM CPU per job (load {j['load']:.1f})."]
    lines += ["", "CPU per event during the drain, the steady drain and the latency run, all processes of the run (this process,"
              " Spark's JVM, its Python workers, the broker), in microseconds; load average (1 min) at the end of each:",
              "", "| subscriptions | phase | driver | JVM | Python workers | broker | other | total | load |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in record["runs"]:
        steady = r.get("steady", {})
        for phase, cpu, load in (("drain", r.get("drain_cpu_us_per_event"), r.get("drain_load_average")),
                                 ("steady", steady.get("cpu_us_per_event"), steady.get("load_average")),
                                 ("latency", r["latency"].get("cpu_us_per_event"), r["latency"].get("load_average"))):
            if cpu:
                lines.append(f"| {r['n_subs']:,} | {phase} | {cpu['driver']:.0f} | {cpu['jvm']:.0f} |"
                             f" {cpu['python workers']:.0f} | {cpu['broker']:.0f} | {cpu['other']:.0f} |"
                             f" {cpu['total']:.0f} | {load[0]:.1f} |")
    churned = [r for r in record["runs"] if "churn" in r]
    if churned:
        lines += ["", "Latency with subscription changes offered beside the events, next to the same run without:", "",
                  "| subscriptions | changes/s | applied | p50 s | p99 s | p99 without | p99 ratio | largest batch s |"
                  " largest driver step s | subscriptions after / expected | load |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in churned:
            c, q = r["churn"], r["latency"]
            lines.append(f"| {r['n_subs']:,} | {c['changes_per_s']:,.0f} | {c['changes_applied']:,} | {c['p50_s']:.2f} |"
                         f" {c['p99_s']:.2f} | {q['p99_s']:.2f} | {c['p99_s'] / q['p99_s']:.1f}x |"
                         f" {c['batch_ms_max'] / 1e3:.1f} | {c['changes_ms_max'] / 1e3:.1f} |"
                         f" {c['subscriptions_after']:,} / {c['expected_subscriptions']:,} | {c['load_average'][0]:.1f} |")
    lines += ["", f"![events per second]({image})", ""]
    return "\n".join(lines)


def plot(record: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = record["runs"]
    labels = [f"{r['n_subs']:,} subs" for r in runs]
    x = np.arange(len(runs))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(x - 0.2, [r["events_per_s"] for r in runs], 0.4, label="service (end to end)")
    ax.bar(x + 0.2, [r["spark_sql"]["events_per_s"] if "spark_sql" in r else 0 for r in runs], 0.4,
           label="Spark SQL exploded join")
    ax.axhline(GOAL_EVENTS_PER_S, color="grey", ls="--", lw=1, label="goal")
    ax.set_yscale("log")
    ax.set_xticks(x, labels)
    ax.set_ylabel("events / s (log)")
    ax.set_title(f"Fabret {WORKLOAD}, Spark local[2], 2-core machine")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def save(args: argparse.Namespace, runs: list[dict], started: float) -> None:
    """Write the JSON record (``--out``), its Markdown tables and its plot next to it (same name,
    ``.md`` and ``.png``); docs/e2e.md, written by hand from such runs, is left alone."""
    record = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "quick": args.quick, "matcher": args.matcher, "seconds": time.perf_counter() - started,
        "load_average": os.getloadavg(), "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    plot(record, args.out.with_suffix(".png"))
    args.out.with_suffix(".md").write_text(render(record, args.out.with_suffix(".png").name))
