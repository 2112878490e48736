"""Command line of the service: ``python -m streaming run|status|config``.

``run`` starts the embedded broker when no bootstrap servers are configured (and stops
it on exit), creates the topics with the configured partitions, and runs the match
query (and, unless disabled, the Cayuga patterns queries) until SIGINT or SIGTERM, which
stop them after the running micro-batch. One ``run`` per checkpoint: a second one is
refused. ``run --reset`` first moves the checkpoint aside and starts from the topics as
they are.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from streaming.config import ConfigError, Settings, load
from streaming.instance import DirLock, InUseError
from streaming.metrics import read_status

log = logging.getLogger("streaming")

GRACE_S = 60.0
"""How long a stop request waits for the running micro-batch to finish."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m streaming", description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=None, help="TOML settings (default conf/pubsub.toml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a setting (repeatable), e.g. --set match.matcher=counting")
    sub = parser.add_subparsers(dest="command", required=True)
    rn = sub.add_parser("run", help="run the match query (embedded broker when no bootstrap servers are set)")
    rn.add_argument("--reset", action="store_true",
                    help="move the checkpoint aside (renamed with the time) and start from the topics as they are")
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

    data_dir = settings.kafka.embedded_data_dir
    if data_dir:
        broker = EmbeddedBroker(data_dir=data_dir)
    else:
        settings.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        broker = EmbeddedBroker(log_path=settings.checkpoint.parent / "tansu.log")
    with broker:
        kept = f"topics kept in {data_dir}, address in {broker.address_file}" if data_dir else "topics in memory only"
        log.info("embedded broker on %s (%s; log %s)", broker.bootstrap_servers, kept, broker.log_path)
        yield broker.bootstrap_servers


def checkpoint_lock(settings: Settings) -> DirLock:
    """The lock that keeps a second ``run`` off the same checkpoint (``<checkpoint_dir>.lock``)."""
    ckpt = settings.checkpoint
    return DirLock(ckpt.with_name(ckpt.name + ".lock"), f"the checkpoint {ckpt}")


def reset_checkpoint(settings: Settings) -> Path | None:
    """Move the checkpoint aside to ``<checkpoint_dir>.reset-<UTC time>``; where it went."""
    ckpt = settings.checkpoint
    if not ckpt.exists():
        return None
    aside = ckpt.with_name(f"{ckpt.name}.reset-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    ckpt.rename(aside)
    log.warning("checkpoint moved aside to %s: starting from the topics as they are", aside)
    return aside


def data_loss_message(settings: Settings, failure: str) -> str | None:
    """What to tell the user when a query failed because the log lost what the checkpoint read."""
    found = re.search(r"DataLossError: ([^\n]*)", failure)
    if found is None:
        return None
    broker = settings.kafka.embedded_data_dir if not settings.kafka.bootstrap_servers else ""
    lost = f"the embedded broker's data directory {broker} was removed" if broker else "the broker lost its data"
    return (
        f"the topics no longer hold records that the checkpoint {settings.checkpoint} has already read "
        f"({found.group(1).split(';')[0].strip()}): a topic was deleted or recreated, or {lost}. The job cannot go on "
        "from this checkpoint. To start again from the topics as they are now (subscriptions re-read "
        "from the subscriptions topic, events from the start of the events topic), run "
        f"`python -m streaming run --reset`: it moves the checkpoint aside to {settings.checkpoint}.reset-<time>."
    )


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
    from pyspark.errors import StreamingQueryException

    from streaming.kafka.admin import ensure_topics
    from streaming.match_job import MatchJob
    from streaming.shared_index import remove_application
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
                with contextlib.suppress(StreamingQueryException):  # a failure: reported below
                    queries[0].awaitTermination(1)
            failed = [q for q in queries if q.exception() is not None]
            if failed:
                reason = "; ".join(f"{q.name}: {q.exception()}" for q in failed)
                lost = data_loss_message(settings, reason)
                if lost is not None:
                    reason = lost
                    log.error("stopped: %s", reason)
                else:
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
            remove_application(spark.sparkContext.applicationId)
            spark.stop()
        job.status.write("stopped", registry=dict(job.registry.describe()))
        log.info("stopped after %d batches at registry version %d", job.batches, job.registry.version)
    return 0


def start_patterns(settings: Settings, spark: Any, client: dict) -> list:
    """The Cayuga queries (pattern registry and keyed-state matching), when enabled."""
    if not settings.patterns.enabled:
        return []
    from streaming.patterns import start_patterns_query, start_subscriptions_query

    k, root = settings.kafka, settings.checkpoint / "patterns"
    trigger = settings.spark.trigger_interval
    return [
        start_subscriptions_query(spark, client, k.subscriptions_topic, k.errors_topic, root, trigger, settings.limits),
        start_patterns_query(spark, client, k.events_topic, k.notifications_topic, k.errors_topic, root,
                             trigger=trigger, max_per_trigger=k.max_offsets_per_trigger or None,
                             limits=settings.limits),
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
    try:
        with checkpoint_lock(settings):
            if args.reset:
                reset_checkpoint(settings)
            return run(settings, handle_signals=True)
    except InUseError as exc:
        print(f"not started: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
