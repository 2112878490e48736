"""Subscription records parsed on the driver or in Spark tasks (issue 29, item 3): a batch of
Fabret W1 subscription records (the JSON form, or the text with ``--form expr``) in a Kafka topic, parsed by the driver
(:func:`~streaming.match.changes.read_records` then
:func:`~streaming.match.changes.parse_subscription_records`: what the match query did below
:data:`~streaming.match.changes.DRIVER_RECORDS` before the bound by cost), by
:func:`~streaming.match.changes.parse_in_tasks` as the service calls it (the bound by cost:
the fast parse on the driver, the general path in tasks past
:data:`~streaming.match.changes.GENERAL_RECORDS`) and with every record in tasks, on a
``local[2]`` session. Reported: the
driver's CPU (``time.process_time``), the wall time, and the CPU of every process of the
session (this one, the JVM, the Python workers; the broker left out) from ``/proc``; then a
small batch's job (the fixed cost a job adds to a batch's latency).

With ``--phases`` it breaks the registration of the records down instead (the match query's
path, :func:`~streaming.match.changes.parse_in_tasks` in tasks, then
:func:`~streaming.registry_columns.admit.admit` and :meth:`ColumnRegistry.apply`): jobs that
stop after reading, after parsing and after building the tasks' streams, then the whole job
with its collect, admit and apply; per phase the wall time and the CPU of the driver, the JVM
and the Python workers.

    PYTHONPATH=. .venv/bin/python -m scripts.bench.parse_tasks --records 100000 --partitions 1
    PYTHONPATH=. .venv/bin/python -m scripts.bench.parse_tasks --records 1000000 --phases
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any

from scripts.bench import kit
from streaming.kafka.offsets import OffsetRange


def _tree_cpu() -> float:
    """CPU seconds of this process and its descendants but the broker (:func:`kit.cpu_by_kind`)."""
    return sum(cpu for kind, cpu in kit.cpu_by_kind().items() if kind != "broker")


def measure(fn: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    c0, w0, t0 = time.process_time(), time.perf_counter(), _tree_cpu()
    out = fn()
    c1, w1, t1 = time.process_time(), time.perf_counter(), _tree_cpu()
    return out, {"driver_cpu_s": c1 - c0, "wall_s": w1 - w0, "all_cpu_s": t1 - t0}


def _read_rows(numbers: Iterable[int], kafka: Any, todo: Sequence[tuple[OffsetRange, ...]]) -> Iterator[int]:
    """A task that only reads its ranges: the records it read."""
    from streaming.kafka.fetch import read_range

    yield sum(rb.num_rows for i in numbers for rng in todo[i] for rb in read_range(kafka, rng))


def _parse_rows(numbers: Iterable[int], kafka: Any, todo: Sequence[tuple[OffsetRange, ...]]) -> Iterator[int]:
    """A task that reads and parses its ranges: the rows it made."""
    from streaming.kafka.fetch import read_range
    from streaming.registry_columns.parse import parse_partition

    batches = (rb for i in numbers for rng in todo[i] for rb in read_range(kafka, rng))
    yield sum(rb.num_rows for rb in parse_partition(batches))


def phases(sc: Any, kafka: Any, ranges: list[OffsetRange], rounds: int) -> None:
    """Print the registration's phases (the module's docstring, ``--phases``)."""
    from streaming.match.changes import TASK_RECORDS, parse_in_tasks, parse_ranges, parse_tasks

    todo = parse_tasks(ranges, sc.defaultParallelism, TASK_RECORDS)

    def job(fn: Callable[..., Iterator[Any]]) -> Callable[[], list[Any]]:
        return lambda: sc.parallelize(range(len(todo)), len(todo)).mapPartitions(
            partial(fn, kafka=kafka, todo=todo)).map(lambda x: x if isinstance(x, int) else len(x)).collect()

    for rnd in range(rounds):
        for name, fn in (("read", _read_rows), ("read + parse", _parse_rows), ("+ streams", parse_ranges)):
            _show(rnd, name, by_kind(job(fn))[1])
        parsed, m = by_kind(lambda: parse_in_tasks(sc, kafka, ranges, driver_records=0))
        _show(rnd, "whole job, collected", m)
        _admit_apply(rnd, parsed)
        print(f"round {rnd}: {parsed.num_rows} rows, {parsed.nbytes / 1e6:.0f} MB on the driver "
              f"({len(todo)} tasks)")


def _admit_apply(rnd: int, parsed: Any) -> None:
    """Admit and apply a batch's rows in a new registry (:func:`phases`)."""
    import tempfile

    from streaming.registry_columns import ColumnRegistry
    from streaming.registry_columns.admit import admit

    with tempfile.TemporaryDirectory() as where:
        registry = ColumnRegistry(where)
        admitted, m = by_kind(lambda: admit(parsed, registry, 0, None, lambda t: True, time.time()))
        _show(rnd, "admit", m)
        _show(rnd, "apply", by_kind(lambda: registry.apply(0, admitted.changes, admitted.now, False))[1])


def _show(rnd: int, name: str, m: dict[str, float]) -> None:
    print(f"round {rnd} {name:>20}: wall {m['wall']:.3f} s, CPU driver {m['driver']:.3f} s, "
          f"JVM {m['jvm']:.3f} s, workers {m['python workers']:.3f} s; load {os.getloadavg()[0]:.1f}", flush=True)


def by_kind(fn: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """``fn()`` and its wall time and CPU by kind of process (:func:`kit.cpu_by_kind`)."""
    c0, w0 = kit.cpu_by_kind(), time.perf_counter()
    out = fn()
    w1, c1 = time.perf_counter(), kit.cpu_by_kind()
    return out, {"wall": w1 - w0, **{k: c1[k] - c0[k] for k in c1}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--phases", action="store_true",
                    help="break the registration down by phase instead (the module's docstring)")
    ap.add_argument("--form", choices=("json", "expr"), default="json",
                    help="the records' form: json (the fast parse takes W1's) or expr (the text, the general path)")
    args = ap.parse_args(argv)

    import orjson

    from matchers.expr import to_text
    from scripts.bench.feed import produce_all, subscription_records, workload_subscriptions
    from streaming.kafka.admin import ensure_topics
    from streaming.kafka.broker import EmbeddedBroker
    from streaming.kafka.client_config import KafkaClientConfig
    from streaming.match.changes import parse_in_tasks, parse_subscription_records, read_records
    from streaming.spark import get_session

    with EmbeddedBroker() as broker:
        broker_pid = broker.pids.get("kafka")
        kafka = KafkaClientConfig.create(broker.bootstrap_servers)
        topic = "subs"
        ensure_topics(kafka, {topic: args.partitions})
        subs = workload_subscriptions(args.records, 0)
        records = (subscription_records(subs) if args.form == "json" else
                   ((s.id.encode(), orjson.dumps({"op": "upsert", "id": s.id, "expr": to_text(s.expr)})) for s in subs))
        produce_all(broker.bootstrap_servers, topic, records, "produce", args.records, progress=False)
        ensure_topics(kafka, {"one": 1})
        produce_all(broker.bootstrap_servers, "one", [(b"a", b'{"id": "a", "expr": "a1 = 1"}')], "one",
                    progress=False)
        from streaming.kafka.watermarks import Watermarks

        marks = Watermarks(kafka.kafka_python("consumer"))
        ends = marks.latest(marks.partitions([topic]))
        marks.close()
        ranges = [OffsetRange(t, p, 0, end) for (t, p), end in sorted(ends.items())]
        one = [OffsetRange("one", 0, 0, 1)]
        spark = get_session(app_name="parse-tasks-bench", master="local[2]",
                            conf={"spark.driver.memory": "6g"})  # as scripts.bench.e2e: 1,000,000 rows collected
        sc = spark.sparkContext
        sc.parallelize(range(2), 2).map(lambda x: x).collect()  # the JVM and the workers up
        print(f"{sum(r.end - r.start for r in ranges)} records ({args.form} form) in {len(ranges)} partition(s); "
              f"broker pid {broker_pid}; load {os.getloadavg()}")
        if args.phases:
            phases(sc, kafka, ranges, args.rounds)
        for rnd in range(0 if args.phases else args.rounds):
            driver, d = measure(lambda: parse_subscription_records(read_records(kafka, ranges)))
            service, b = measure(lambda: parse_in_tasks(sc, kafka, ranges))
            tasks, t = measure(lambda: parse_in_tasks(sc, kafka, ranges, driver_records=0))
            want = sorted(driver.to_pylist(), key=lambda r: (r["partition"], r["offset"]))
            for got in (service, tasks):
                assert sorted(got.to_pylist(), key=lambda r: (r["partition"], r["offset"])) == want
            _, small_job = measure(lambda: parse_in_tasks(sc, kafka, one, driver_records=0))
            _, small_driver = measure(lambda: parse_in_tasks(sc, kafka, one))
            for name, m in (("all on the driver", d), ("the service's", b), ("all in tasks", t),
                            ("1 record, job", small_job), ("1 record, driver", small_driver)):
                print(f"round {rnd} {name:>17}: driver CPU {m['driver_cpu_s']:.3f} s, wall {m['wall_s']:.3f} s, "
                      f"all processes' CPU {m['all_cpu_s']:.3f} s")
        print(f"load {os.getloadavg()}")
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
