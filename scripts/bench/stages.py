"""Where an event's microseconds go in a match task, stage by stage, next to each stage's limit.

On the embedded Apache Kafka broker, one process runs a match task's stages in turn over
the same ``--events`` Fabret W1 event records (100,000 subscriptions, matcher ``dynamic``,
the notifications carrying the whole event, as :mod:`scripts.bench.e2e`), and times each
in CPU seconds of this process (librdkafka's threads included, the broker's CPU not):

* **read**: :func:`streaming.kafka.fetch.read_range`, the task's read of its offset range into
  Arrow batches; its limit: a bare confluent-kafka consumer taking the same records;
* **prepare**: :class:`~streaming.match.executor.PreparedBatch` (the batch's columns as lists);
* **scan**: the one pass over the JSON bytes into the matcher's encoding
  (:func:`matchers.events.encode_json`); its limit: ``orjson.loads`` of the same bytes alone
  (a parse, without the encoding);
* **event ids**: the rest of :func:`~streaming.match.executor.read_batch`, each event's id
  and validity read from its span;
* **match**: the batch translated to the matcher's dictionary (:mod:`matchers.translate`) and
  the matcher's kernels on it (this stage is its own limit);
* **notify**: :func:`~streaming.match.executor.notify`, the notification records of the matches
  (their Arrow batches);
* **produce**: :func:`streaming.kafka.sink.produce_batches` of those records, every one
  acknowledged; its limit: a bare confluent-kafka producer sending the same records.

Each figure is the best of ``--rounds`` rounds (after one round of warm-up) in µs per event; the per-micro-batch costs
(the Spark job, the trigger's steps) are :mod:`scripts.bench.e2e`'s. Results:
``docs/bench/stages.json`` and a section of ``docs/e2e.md``.

``--wide K`` also measures the notifications at ``K`` per event (as at 10,000,000 W1
subscriptions, where each event notifies about 120): every event's notifications to ``K``
subscriptions drawn from the index's (or, with ``--wide-ids N``, from ``N`` ids named
``w1-<i>``: at 10,000,000 nearly every notification has a subscription of its own), built (:func:`streaming.notifications.match_records`)
and produced (:func:`streaming.kafka.sink.produce_batches`), in µs of CPU per notification;
with ``--baseline TREE`` (a checkout of an older commit, e.g. a git worktree of main) the
same with that tree's ``streaming/notifications.py`` and ``streaming/kafka/sink.py``,
interleaved with these in every round.  ``--baseline`` also times the scan's kernel alone
(:func:`matchers.scan.scan_records`) of both trees on the same bytes, interleaved.

Run ``python -m scripts.bench.stages [--events 20000] [--subs 100000] [--rounds 3] [--quick]
[--wide 120 [--wide-ids 10000000] [--baseline TREE]]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from scripts.bench import kit
from scripts.bench.feed import produce_all, workload_events, workload_subscriptions

STAGES = ("read", "prepare", "scan", "event ids", "match", "notify", "produce")
LIMITS = {"read": "bare consumer", "scan": "orjson.loads alone", "match": "the kernels (this stage)",
          "produce": "bare producer"}


class _Clock:
    """Best µs of CPU per event of each named stage over the rounds (``with clock("read"): ...``)."""

    def __init__(self, n_events: int):
        self.n = n_events
        self.best: dict[str, float] = {}
        self.last: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t = time.process_time()
        yield
        self.note(name, 1e6 * (time.process_time() - t) / self.n)

    def note(self, name: str, us: float) -> None:
        self.last[name] = us
        self.best[name] = min(us, self.best.get(name, float("inf")))


def _bare_consume(bootstrap: str, topic: str, n: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    from streaming.kafka.client_config import KafkaClientConfig

    c = Consumer({**KafkaClientConfig.create(bootstrap).rdkafka("consumer"), "group.id": "stages",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    while got < n:
        for msg in c.consume(10_000, timeout=5.0):
            if msg.error() is None:
                got += 1
    c.close()
    return got


def _baseline(tree: Path) -> dict[str, ModuleType]:
    """The notification, sink and scan modules of the code ``tree`` (their other imports are this tree's);
    the scan from a copy, so that numba's cache of the tree's own module stays its own."""
    import atexit
    import shutil
    import tempfile

    where = tempfile.mkdtemp(prefix="stages-baseline-")
    atexit.register(shutil.rmtree, where, True)
    copy = Path(where) / "baseline_scan.py"
    shutil.copy(tree / "matchers/scan.py", copy)
    mods = {}
    for label, path in (("new", tree / "streaming/notifications.py"), ("produce", tree / "streaming/kafka/sink.py"),
                        ("scan", copy)):
        spec = importlib.util.spec_from_file_location(f"baseline_{label}", path)
        assert spec is not None and spec.loader is not None
        mods[label] = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up
        spec.loader.exec_module(mods[label])
    return mods


class _Wide:
    """The notifications of ``--wide K``: each event's to ``k`` subscriptions drawn from ``n_ids``
    (named by ``id_of``), prepared as :func:`~streaming.notifications.matched` gives them."""

    def __init__(self, raws: list[bytes], n_ids: int, k: int, seed: int, id_of: Any):
        rng = random.Random(seed)
        n = len(raws)
        self.raws = raws
        self.bounds = list(range(0, k * n + 1, k))
        picks = [w for _ in range(n) for w in sorted(rng.sample(range(n_ids), k))]
        unique = sorted(set(picks))
        where = {w: i for i, w in enumerate(unique)}
        self.ids, self.which = [id_of(w) for w in unique], [where[w] for w in picks]
        self.topics = ["notifications"] * len(unique)

    def build(self, notes: ModuleType, stamp: int) -> list[Any]:
        """The records' Arrow batches as a match task makes them with ``notes`` (this tree's
        ``build_records`` and ``notes_batches``; a baseline's ``match_records`` and ``out_batch``)."""
        from streaming.match.tasks import notes_batches, out_batch

        n = len(self.raws)
        events = notes.EventColumns(["events"] * n, [0] * n, list(range(n)), [f"e{i}" for i in range(n)], self.raws,
                                    [stamp] * n)
        if hasattr(notes, "build_records"):
            built = notes.build_records(events, self.bounds, self.ids, self.which, stamp, 0, 2**40)
            return notes_batches(built.values, built.subs, built.keys, self.topics)
        out: tuple[list, list, list] = ([], [], [])
        notes.match_records(events, self.bounds, self.ids, self.which, stamp, 0, 2**40, out, self.topics)
        return [out_batch(*out)]


def _scan_kernels(clock: _Clock, trees: dict[str, dict[str, ModuleType]], prepared: list, common: Any, r: int) -> None:
    """Time the scan's kernel (:func:`matchers.scan.scan_records`) of this tree and of the baseline's, interleaved,
    on the same bytes, each against its own table of the same dictionary; their outputs must be equal."""
    from matchers import scan
    from matchers.scan_types import ScanTable
    from streaming.records import DEFAULT_LIMITS

    table = common._scan.table
    live = np.flatnonzero(table.lengths >= 0)
    mods = {"wide": scan, "baseline": trees["baseline"]["scan"]}
    tables = {}
    for label, mod in mods.items():
        tables[label] = ScanTable.empty(len(table.hashes), table.blob)
        mod.table_insert(tables[label], table.tags[live], table.starts[live], table.starts[live] + table.lengths[live],
                         table.values[live])
    bufs = []
    for p in prepared:
        raws = [v or b"" for v in p.values]
        lengths = np.fromiter(map(len, raws), np.int64, len(raws))
        ends = np.cumsum(lengths)
        bufs.append((np.frombuffer(b"".join(raws), np.uint8), ends - lengths, ends))
    outs: dict[str, list] = {}
    for label in kit.interleaved(list(mods), r):
        with clock("scan kernel" if label == "wide" else "baseline scan kernel"):
            outs[label] = [mods[label].scan_records(b, lo, hi, tables[label], DEFAULT_LIMITS.scan(), ("id", "valid_until"))
                           for b, lo, hi in bufs]
    if r == 0:
        assert all(np.array_equal(x, y, equal_nan=True) for a, b in zip(outs["wide"], outs["baseline"], strict=True)
                   for x, y in zip(a, b, strict=True)), "the trees' scans differ"


def _named(w: int) -> str:
    """The id of ``--wide-ids``' subscription ``w``."""
    return f"w1-{w}"


def measure(bootstrap: str, n_events: int, n_subs: int, rounds: int, seed: int = 7, wide: int = 0,
            baseline: Path | None = None, wide_ids: int = 0) -> dict[str, Any]:
    """µs per event of each stage and limit, best of ``rounds``; also the events the scan left to
    the general path (``slow_path``, in one round); with ``wide``, µs per notification of
    ``wide_build`` and ``wide_produce`` (and ``baseline_build``, ``baseline_produce`` of the
    ``baseline`` tree)."""
    from matchers.catalog import create
    from matchers.events import encode, encode_json
    from matchers.translate import Translation, common_dictionary
    from streaming.kafka.admin import ensure_topics
    from streaming.kafka.client_config import KafkaClientConfig
    from streaming.kafka.fetch import read_range
    from streaming.kafka.offsets import OffsetRange
    from streaming.kafka.sink import produce_batches
    from streaming.match import executor
    from streaming.match.tasks import BatchContext
    from streaming.notifications import PAYLOAD_EVENT
    from streaming.records import DEFAULT_LIMITS

    kafka = KafkaClientConfig.create(bootstrap)
    ensure_topics(kafka, {"events": 1, "notifications": 1, "bare": 1})
    events = workload_events(n_events, seed)
    produce_all(bootstrap, "events", [(None, orjson.dumps({"id": f"e{i}", **e})) for i, e in enumerate(events)],
                "events", total=n_events)
    matcher = create("dynamic")
    matcher.add(list(workload_subscriptions(n_subs, seed)))
    common = common_dictionary()  # a worker's: the batch is encoded against it, then translated
    translation = Translation(common, matcher.dictionary)
    translation.update()
    ctx = BatchContext(0, time.time(), None, "notifications", "errors", PAYLOAD_EVENT, "id",  # type: ignore[arg-type]  # no index spec: the matcher is given
                       "valid_until", 3600.0, kafka, DEFAULT_LIMITS)
    rng = OffsetRange("events", 0, 0, n_events)
    clock = _Clock(n_events)
    matches = 0
    from streaming import notifications
    from streaming.kafka import sink

    trees = {"wide": {"new": notifications, "produce": sink}}
    if baseline is not None:
        trees["baseline"] = _baseline(baseline)
    fan = (_Wide([orjson.dumps({"id": f"e{i}", **e}) for i, e in enumerate(events)], wide_ids or n_subs, wide, seed,
                 _named if wide_ids else matcher.id_of) if wide else None)
    wide_clock = _Clock(n_events * wide) if wide else None
    for r in range(rounds + 1):  # round 0 warms up: clients connected, kernels compiled
        if r == 1:
            clock.best.clear()
        with clock("read"):
            batches = list(read_range(kafka, rng))
        with clock("limit read"):
            _bare_consume(bootstrap, "events", n_events)
        with clock("prepare"):
            prepared = [executor.PreparedBatch(rb, DEFAULT_LIMITS) for rb in batches]
        values = [v or b"" for p in prepared for v in p.values]
        with clock("limit scan"):
            for v in values:
                orjson.loads(v)
        slow: list[int] = []
        with clock("scan"):
            for p in prepared:
                encode_json([v or b"" for v in p.values], common, slow.append, DEFAULT_LIMITS.scan(),
                            ("id", "valid_until"), encode_flat=lambda flats: encode(flats, common, known_only=True))
        if "baseline" in trees:
            _scan_kernels(clock, trees, prepared, common, r)
        with clock("read events"):
            read = [executor.read_batch(p, ctx, common) for p in prepared]
        clock.note("event ids", clock.last["read events"] - clock.last["scan"])
        with clock("match"):
            results = [matcher.match(translation.apply(one.batch)) for one in read]
        matches = sum(res.total for res in results)
        outs = [executor.Out([], [], [], []) for _ in prepared]
        with clock("notify"):
            for p, one, res, out in zip(prepared, read, results, outs, strict=True):
                executor.notify(p, one.kept, res, matcher, ctx, out, [], [])
        sent_batches = [b for o in outs for b in o.notes]
        with clock("produce"):
            sent = produce_batches(kafka, None, iter(sent_batches))
        records = [(k, v) for o in sent_batches
                   for k, v in zip(o.column("key").to_pylist(), o.column("value").to_pylist(), strict=True)]
        with clock("limit produce"):
            produce_all(bootstrap, "bare", records, "bare", progress=False)
        if fan is not None and wide_clock is not None:
            if r == 1:
                wide_clock.best.clear()
            built = {}
            for label in kit.interleaved(list(trees), r):
                with wide_clock(f"{label}_build"):
                    built[label] = fan.build(trees[label]["new"], 1_700_000_000_000)
            if r == 0:
                assert all(pa.Table.from_batches(b).equals(pa.Table.from_batches(built["wide"]))
                           for b in built.values()), "the trees' notifications differ"
            for label in kit.interleaved(list(trees), r):
                with wide_clock(f"{label}_produce"):
                    trees[label]["produce"].produce_batches(kafka, None, iter(built[label]))
            del built
            print("  per notification at", wide, "per event:",
                  ", ".join(f"{k} {v:.2f}" for k, v in wide_clock.last.items()), flush=True)
        print(f"round {r}/{rounds}{' (warm-up)' if r == 0 else ''}: {sent} records, load {kit.load_avg()}", flush=True)
    best = clock.best
    return {"us_per_event": best, "matches_per_event": matches / n_events, "slow_path": len(slow),
            "record_bytes": sum(len(v) for v in values) / n_events,
            "us_per_notification": {} if wide_clock is None else wide_clock.best}


def render(rec: dict[str, Any]) -> str:
    """The stages' table of one record."""
    best = rec["results"]["us_per_event"]
    rows = []
    for s in STAGES:
        limit = best.get(f"limit {s}", best[s] if s == "match" else None)
        rows.append((s, f"{best[s]:.2f}", LIMITS.get(s, "-"), "-" if limit is None else f"{limit:.2f}",
                     "-" if limit is None or limit <= 0 else f"{best[s] / limit:.1f}x"))
    rows.append(("**all stages**", f"**{sum(best[s] for s in STAGES):.2f}**", "", "", ""))
    p = rec["params"]
    head = (f"{p['events']:,} events of {rec['results']['record_bytes']:.0f} bytes, {p['subs']:,} W1 subscriptions "
            f"(`dynamic`), {rec['results']['matches_per_event']:.2f} notifications per event, best of "
            f"{p['rounds']} rounds, {rec['date']} {rec['time_utc']} UTC, load {rec['load_avg']}; command "
            f"`{rec['command']}`.\n\n")
    text = head + kit.table(("stage", "µs of CPU per event", "its limit", "limit µs", "stage / limit"), rows, "lrlrr")
    if "scan kernel" in best:
        text += (f"\n\nThe scan's kernel alone (`matchers.scan.scan_records`, the same bytes and dictionary), µs of CPU "
                 f"per event: this tree {best['scan kernel']:.2f}, baseline {best['baseline scan kernel']:.2f} "
                 f"(`{p['baseline']}`, interleaved).")
    wide = rec["results"].get("us_per_notification") or {}
    if wide:
        labels = [label for label in ("wide", "baseline") if f"{label}_build" in wide]
        ids = f", subscriptions drawn from {p['wide_ids']:,} ids" if p.get("wide_ids") else ""
        text += (f"\n\nAt {p['wide']} notifications per event (`--wide`{ids}), µs of CPU per notification"
                 + (f" (baseline: `{p['baseline']}`, interleaved)" if "baseline" in labels else "") + ":\n\n")
        text += kit.table(("code", "build", "produce"), [
            ("this tree" if label == "wide" else "baseline", f"{wide[f'{label}_build']:.2f}",
             f"{wide[f'{label}_produce']:.2f}") for label in labels], "lrr")
    return text


def _described(tree: Path) -> str:
    """``tree`` and the commit it is at."""
    import subprocess

    got = subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%h"], capture_output=True, text=True)
    return f"{tree} at {got.stdout.strip() or 'an unknown commit'}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--subs", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="5,000 events, 20,000 subscriptions, one round")
    ap.add_argument("--bootstrap", help="a running broker (default: an embedded one for this run)")
    ap.add_argument("--no-record", action="store_true", help="print only; docs/ unchanged")
    ap.add_argument("--wide", type=int, default=0, help="also build and produce K notifications per event")
    ap.add_argument("--wide-ids", type=int, default=0, help="with --wide: draw from this many ids (default: the index's)")
    ap.add_argument("--baseline", type=Path, help="a code tree to compare the scan's kernel (and with --wide the "
                    "notifications) with (e.g. a git worktree)")
    args = ap.parse_args(argv)
    if args.quick:
        args.events, args.subs, args.rounds = 5_000, 20_000, 1
    kit.one_thread()
    params = {"events": args.events, "subs": args.subs, "rounds": args.rounds, "wide": args.wide,
              "wide_ids": args.wide_ids,
              "baseline": None if args.baseline is None else _described(args.baseline)}
    how = {"wide": args.wide, "baseline": args.baseline, "wide_ids": args.wide_ids}
    if args.bootstrap:
        results = measure(args.bootstrap, args.events, args.subs, args.rounds, **how)
    else:
        from streaming.kafka.broker import EmbeddedBroker

        with EmbeddedBroker() as broker:
            results = measure(broker.bootstrap_servers, args.events, args.subs, args.rounds, **how)
    rec = kit.record(params, results)
    text = render(rec)
    print(text)
    if not args.no_record:
        kit.save("stages", rec)
        kit.write_section(kit.DOCS / "e2e.md", text, "<!-- stages:begin -->", "<!-- stages:end -->")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
