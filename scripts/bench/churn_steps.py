"""The driver's steps for a batch of subscription changes (issue 29, churn), in CPU µs per change.

A registry of ``--subs`` Fabret W1 subscriptions (applied in batches of 100,000, in a temporary
directory), then ``--rounds`` batches of ``--changes`` churn records (``scripts.bench.e2e``'s
:func:`~scripts.bench.e2e.churn_records`: a third each re-given, cancelled, new; ids repeat),
each driven through the real functions the match query's driver runs, without Spark or Kafka
(the records as the driver's read gives them, :func:`~streaming.match.changes.records_table`):

* ``parse``: :func:`~streaming.match.changes.parse_subscription_records` (the fast parse);
* ``admit``: :func:`~streaming.registry_columns.admit.admit`;
* ``apply``: :meth:`ColumnRegistry.apply` (the delta file written, the columns updated);
  ``snapshot``: :meth:`ColumnRegistry.snapshot` (one in ``snapshot_every`` batches pays it);
* ``new_subscriptions`` and ``retro_notifications`` with ``--valid`` still-valid events
  (the e2e run has none: its events carry no validity end, so the driver skips both).

Each figure is the best of the rounds (CPU time, ``time.process_time``), per change of the batch.

    PYTHONPATH=. .venv/bin/python -m scripts.bench.churn_steps --subs 100000 --changes 10000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pyarrow as pa


def _cpu(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    t0 = time.process_time()
    out = fn(*args)
    return out, time.process_time() - t0


def _any_topic(topic: str) -> bool:
    return True


def _records(pairs: list[tuple[bytes, bytes]], start: int) -> pa.Table:
    """``(key, value)`` records as :func:`~streaming.match.changes.read_records` gives them."""
    from streaming.match.changes import records_table

    n = len(pairs)
    return records_table(pa.table({"key": [k for k, _ in pairs], "value": [v for _, v in pairs],
                                   "topic": ["subs"] * n, "partition": [0] * n,
                                   "offset": list(range(start, start + n))}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subs", type=int, default=100_000)
    ap.add_argument("--changes", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--valid", type=int, default=1_000, help="still-valid events for the retro matching")
    args = ap.parse_args(argv)

    from scripts.bench.e2e import churn_records
    from scripts.bench.feed import subscription_records, workload_events, workload_subscriptions
    from streaming.match.changes import (
        new_subscriptions,
        parse_subscription_records,
        retro_notifications,
    )
    from streaming.registry_columns import ColumnRegistry
    from streaming.registry_columns.admit import admit
    from streaming.validity import ValidEvent

    with tempfile.TemporaryDirectory() as tmp:
        registry = ColumnRegistry(tmp, 1, 10**9)
        offset, batch_id = 0, 0
        subs = workload_subscriptions(args.subs, 0)
        while offset < args.subs:
            pairs = list(subscription_records(sub for _, sub in zip(range(100_000), subs, strict=False)))
            parsed = parse_subscription_records(_records(pairs, offset))
            got = admit(parsed, registry, batch_id, None, _any_topic, 1.0)
            registry.apply(batch_id, got.changes, got.now)
            offset, batch_id = offset + len(pairs), batch_id + 1
        events = [ValidEvent("events", 0, i, None, 1e12, None, orjson.dumps(e))
                  for i, e in zip(range(args.valid), workload_events(args.valid, 3), strict=False)]
        print(f"registry of {len(registry):,} subscriptions, {args.changes:,} changes a batch, "
              f"{len(events):,} valid events; load {os.getloadavg()}")
        steps: dict[str, list[float]] = {}
        for rnd in range(args.rounds):
            pairs, _ = churn_records(args.subs, args.changes, 100 + rnd)
            records = _records(pairs, offset)
            offset += len(pairs)
            parsed, t = _cpu(parse_subscription_records, records)
            steps.setdefault("parse", []).append(t)
            got, t = _cpu(admit, parsed, registry, batch_id, None, _any_topic, 2.0 + rnd)
            steps.setdefault("admit", []).append(t)
            applied, t = _cpu(registry.apply, batch_id, got.changes, got.now)
            steps.setdefault("apply", []).append(t)
            steps.setdefault("snapshot", []).append(_cpu(registry.snapshot)[1])
            new, t = _cpu(new_subscriptions, registry.directory, applied.version)
            steps.setdefault("new_subscriptions", []).append(t)
            steps.setdefault("retro_notifications", []).append(
                _cpu(retro_notifications, "auto", new, events, batch_id, "id")[1])
            batch_id += 1
        print(f"CPU µs per change, best of {args.rounds} (a batch of {args.changes:,}); load {os.getloadavg()}")
        for name, times in steps.items():
            best = float(np.min(times))
            print(f"  {name:<20} {best / args.changes * 1e6:8.1f} µs  ({best:.3f} s a batch)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
