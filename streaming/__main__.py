"""Command line of the service: ``python -m streaming run|status|config``.

``run`` starts the embedded broker when no bootstrap servers are configured (and stops
it on exit), creates the topics with the configured partitions, and runs the match
query (and, unless disabled, the Cayuga patterns queries) until SIGINT or SIGTERM, which
stop them after the running micro-batch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from streaming.config import ConfigError, Settings, load
from streaming.metrics import read_status
from streaming.storage import join

log = logging.getLogger("streaming")

GRACE_S = 60.0
"""How long a stop request waits for the running micro-batch to finish."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m streaming", description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=None, help="TOML settings (default conf/pubsub.toml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a setting (repeatable), e.g. --set match.matcher=counting")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="run the match query (embedded broker when no bootstrap servers are set)")
    st = sub.add_parser("status", help="print the running job's status")
    st.add_argument("--json", action="store_true", help="the whole status document as JSON")
    sub.add_parser("config", help="print the effective settings (secrets redacted)")
    return parser


@contextlib.contextmanager
def kafka_endpoint(settings: Settings) -> Iterator[str]:
    """The configured bootstrap servers, or an embedded broker's for the duration."""
    if settings.kafka.bootstrap_servers:
        yield settings.kafka.bootstrap_servers
        return
    from streaming.kafka.broker import EmbeddedBroker

    log_path = Path(settings.status.status_file).parent / "tansu.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with EmbeddedBroker(log_path=log_path) as broker:
        log.info("embedded broker on %s (log %s); it keeps data in memory only", broker.bootstrap_servers, log_path)
        yield broker.bootstrap_servers


class StopRequest:
    """Set by SIGINT/SIGTERM; a second signal stops at once."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.event.is_set():
            raise KeyboardInterrupt
        log.info("%s received: stopping after the running micro-batch", signal.Signals(signum).name)
        self.event.set()


def run(settings: Settings, stop: threading.Event | None = None, handle_signals: bool = False) -> int:
    """Run the match query until ``stop`` is set or the query fails; returns an exit code.

    With ``handle_signals``, SIGINT and SIGTERM set ``stop`` (installed after the Spark
    session, whose own SIGINT handler would otherwise cancel the running batch).
    """
    from streaming.kafka.admin import ensure_topics
    from streaming.match_job import MatchJob
    from streaming.spark import get_session

    request = StopRequest()
    if stop is not None:
        request.event = stop
    stop = request.event
    with kafka_endpoint(settings) as servers:
        client = settings.kafka.client_config(servers)
        counts = ensure_topics(client, settings.kafka.topic_partitions())
        log.info("topics %s on %s", counts, servers)
        spark = get_session(settings.spark.app_name, settings.spark.master, dict(settings.spark.conf))
        if handle_signals:
            request.install()
        job = MatchJob(settings, spark, client)
        log.info("registry %s", dict(job.registry.describe()))
        queries = [job.start(), *start_patterns(settings, spark, client)]
        try:
            while all(q.isActive for q in queries) and not stop.is_set():
                queries[0].awaitTermination(1)
            failed = [q for q in queries if q.exception() is not None]
            if failed:
                reason = "; ".join(f"{q.name}: {q.exception()}" for q in failed)
                log.error("a query failed: %s", reason)
                job.status.write("failed", error=reason, registry=dict(job.registry.describe()))
                return 1
            deadline = time.monotonic() + GRACE_S
            while (any(q.isActive and q.status.get("isTriggerActive") for q in queries)
                   and time.monotonic() < deadline):
                time.sleep(0.2)
        finally:
            for q in queries:
                q.stop()
            spark.stop()
        job.status.write("stopped", registry=dict(job.registry.describe()))
        log.info("stopped after %d batches at registry version %d", job.batches, job.registry.version)
    return 0


def start_patterns(settings: Settings, spark: Any, client: dict) -> list:
    """The Cayuga queries (pattern registry and keyed-state matching), when enabled."""
    if not settings.patterns.enabled:
        return []
    from streaming.patterns import start_patterns_query, start_subscriptions_query

    k, root = settings.kafka, join(settings.checkpoint, "patterns")
    trigger = settings.spark.trigger_interval
    return [
        start_subscriptions_query(spark, client, k.subscriptions_topic, k.errors_topic, root, trigger),
        start_patterns_query(spark, client, k.events_topic, k.notifications_topic, k.errors_topic, root,
                             trigger=trigger, max_per_trigger=k.max_offsets_per_trigger or None),
    ]


def status(settings: Settings, as_json: bool) -> int:
    doc = read_status(settings.status.status_file)
    if doc is None:
        print(f"no status at {settings.status.status_file}: the job has not run with these settings")
        return 1
    if as_json:
        print(json.dumps(doc, indent=1))
        return 0
    age = time.time() - doc["updated_at"]
    print(f"state: {doc['state']} (pid {doc['pid']}, updated {age:.0f} s ago)")
    reg = doc.get("registry") or {}
    if reg:
        print(f"registry: version {reg.get('version')}, {reg.get('subscriptions')} subscriptions, "
              f"snapshots {reg.get('snapshots')}")
    totals = doc.get("totals") or {}
    if totals:
        print("totals: " + ", ".join(f"{k}={int(v)}" for k, v in totals.items()))
    from streaming.metrics import BatchMetrics

    for row in doc.get("batches", [])[-5:]:
        print("  " + BatchMetrics(**row).log_line())
    if doc.get("error"):
        print(f"error: {doc['error']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load(args.config, args.overrides)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.status.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("kafka", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.command == "config":
        print(json.dumps(settings.describe(), indent=1))
        return 0
    if args.command == "status":
        return status(settings, args.json)
    return run(settings, handle_signals=True)


if __name__ == "__main__":
    sys.exit(main())
