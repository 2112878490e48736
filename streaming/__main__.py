"""Command line of the service: ``python -m streaming run|status|config``.

``run`` starts the embedded broker when no bootstrap servers are configured (and stops
it on exit), creates the topics with the configured partitions, and runs the match
query (and, unless disabled, the Cayuga patterns query) until SIGINT or SIGTERM, which
stop them after the running micro-batch. One ``run`` per checkpoint: a second one is
refused. ``run --reset`` first moves the checkpoint aside and starts from the topics as
they are. It writes its state to the status file (``starting``, ``running``, then
``stopped`` or ``failed`` with the reason); ``status`` reads it and reports a process
that is gone without saying so as ``dead``. A failure is one paragraph on the console;
the whole trace goes to ``<status.log_dir>/service.log``.
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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from streaming.cli import exit_with
from streaming.config import ConfigError, Settings
from streaming.config_sources import load
from streaming.instance import DirLock, InUseError
from streaming.kafka.client_config import KafkaClientConfig
from streaming.metrics import StatusFile, checked, read_status
from streaming.storage import local_path

log = logging.getLogger("streaming")

GRACE_S = 60.0
"""How long a stop request waits for the running micro-batch to finish."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m streaming", description=__doc__.splitlines()[0])
    # --config and --set go before or after the command (`make run-stream ARGS="--set ..."`)
    settings = argparse.ArgumentParser(add_help=False)
    settings.add_argument("--config", type=Path, default=argparse.SUPPRESS,
                          help="TOML settings (default conf/pubsub.toml)")
    settings.add_argument("--set", dest="overrides_after", action="append", default=argparse.SUPPRESS,
                          metavar="SECTION.KEY=VALUE",
                          help="override a setting (repeatable), e.g. --set match.matcher=counting")
    parser.add_argument("--config", type=Path, default=None, help="TOML settings (default conf/pubsub.toml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a setting (repeatable), e.g. --set match.matcher=counting")
    sub = parser.add_subparsers(dest="command", required=True)
    rn = sub.add_parser("run", parents=[settings],
                        help="run the match query (embedded broker when no bootstrap servers are set)")
    rn.add_argument("--reset", action="store_true",
                    help="move the checkpoint aside (renamed with the time) and start from the topics as they are")
    st = sub.add_parser("status", parents=[settings], help="print the running job's status")
    st.add_argument("--json", action="store_true", help="the whole status document as JSON")
    st.add_argument("--status-file", type=Path, default=None,
                    help="status file of a service started with other settings (default status.status_file)")
    sub.add_parser("config", parents=[settings], help="print the effective settings (secrets redacted)")
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, with the ``--set`` given before and after the command in ``overrides``."""
    args = _parser().parse_args(argv)
    args.overrides = [*args.overrides, *getattr(args, "overrides_after", [])]
    return args


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
        log_path = Path(settings.status.status_file).parent / "kafka.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        broker = EmbeddedBroker(log_path=log_path)
    with broker:
        kept = f"topics kept in {data_dir}, address in {broker.address_file}" if data_dir else "topics in memory only"
        log.info("embedded broker on %s (%s; log %s)", broker.bootstrap_servers, kept, broker.log_path)
        yield broker.bootstrap_servers


def checkpoint_lock(settings: Settings) -> DirLock:
    """The lock that keeps a second ``run`` off the same checkpoint: ``<checkpoint_dir>.lock``
    for a checkpoint on this machine's disk, else ``<status_file>.lock``."""
    local = local_path(settings.checkpoint)
    base = local or Path(settings.status.status_file)
    return DirLock(base.with_name(base.name + ".lock"), f"the checkpoint {local or settings.checkpoint}")


def reset_checkpoint(settings: Settings) -> Path | None:
    """Move the checkpoint aside to ``<checkpoint_dir>.reset-<UTC time>``; where it went.

    Raises
    ------
    ConfigError
        If the checkpoint is not on this machine's disk (move it with the tools of its file system).
    """
    ckpt = local_path(settings.checkpoint)
    if ckpt is None:
        raise ConfigError(f"--reset moves a checkpoint on this machine's disk; move {settings.checkpoint} aside "
                          "with the tools of its file system, or set spark.checkpoint_dir to a new location")
    if not ckpt.exists():
        return None
    aside = ckpt.with_name(f"{ckpt.name}.reset-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    ckpt.rename(aside)
    log.warning("checkpoint moved aside to %s: starting from the topics as they are", aside)
    return aside


def data_loss_message(settings: Settings, failure: str) -> str | None:
    """What to tell the user when a query failed because the log lost what the checkpoint read
    (the ``kafka-py`` source's ``DataLossError``, or the ``KAFKA_DATA_LOSS`` of Spark's connector)."""
    found = (re.search(r"DataLossError: ([^\n]*)", failure)
             or re.search(r"Some data may have been lost because they are not available in Kafka any more.*?"
                          r"Reason:\s*([^\n]*)", failure, re.DOTALL))
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
    session, whose own SIGINT handler would otherwise cancel the running batch). Whatever
    ends the run, the status file says so: ``stopped``, or ``failed`` with the reason.
    """
    request = StopRequest()
    if stop is not None:
        request.event = stop
    service = Service(settings, request)
    try:
        service.serve(handle_signals)
    except KeyboardInterrupt:
        log.warning("interrupted: stopped without waiting for the running micro-batch")
        service.record("stopped", note="interrupted")
        return 130
    except Exception as exc:
        lost = data_loss_message(settings, str(exc))
        if lost is not None:
            log.error("stopped: %s", lost)
            service.record("failed", error=lost)
            return 1
        reason = f"{service.stage} failed: {first_line(exc)}"
        log.error("%s. The whole trace is in %s (Spark's own log: %s).", reason, log_file(settings),
                  Path(settings.status.log_dir) / "spark.log", exc_info=exc)
        service.record("failed", error=reason)
        return 1
    service.record("stopped")
    log.info("stopped after %d batches at registry version %d", service.job.batches, service.job.registry.version)
    return 0


class Service:
    """One run of the service: what it is doing (``stage``) and where that is recorded (``status``)."""

    def __init__(self, settings: Settings, request: StopRequest) -> None:
        self.settings = settings
        self.request = request
        self.status = StatusFile(settings.status.status_file, settings.status.history)
        self.stage = "start-up"
        self.job: Any = None
        self.record("starting")

    def record(self, state: str, **extra: Any) -> None:
        """Write ``state`` to the status file (with the registry, once the job has one)."""
        if self.job is not None:
            extra["registry"] = dict(self.job.registry.describe())
        self.status.write(state, **extra)

    def serve(self, handle_signals: bool) -> None:
        """Warm the matcher, start the broker (if embedded), Spark and the queries; run until stopped."""
        from matchers.warm import warm
        from streaming import notes_kernel
        from streaming.kafka.admin import ensure_topics
        from streaming.kafka.fetch import close_consumers
        from streaming.kafka.sink import close_producers
        from streaming.match import MatchJob
        from streaming.shared_index import remove_application
        from streaming.spark import get_session
        from streaming.tenants import Tenants

        settings, stop = self.settings, self.request.event
        warm(settings.match.matcher)
        notes_kernel.warm()
        with kafka_endpoint(settings) as servers:
            client = settings.kafka.client_config(servers)
            tenants = Tenants.of(settings)
            counts = ensure_topics(client, {**settings.kafka.topic_partitions(),
                                            **(tenants.topic_partitions(settings) if tenants else {})})
            log.info("topics %s on %s", counts, servers)
            spark = get_session(settings.spark.app_name, settings.spark.master, dict(settings.spark.conf),
                                log_dir=settings.status.log_dir, locations=[settings.checkpoint])
            if spark.sparkContext.uiWebUrl:
                log.info("Spark UI at %s (spark.conf \"spark.ui.enabled\" = \"false\" turns it off)",
                         spark.sparkContext.uiWebUrl)
            queries: list = []
            try:
                if handle_signals:
                    self.request.install()
                self.job = MatchJob(settings, spark, client)
                self.status = self.job.status
                log.info("registry %s", dict(self.job.registry.describe()))
                queries = [Supervised(start) for start in (self.job.start, *pattern_starters(settings, spark, client))]
                self.stage = "the service"
                self.record("running")  # queries up: a restart with nothing new to read runs no batch
                failed = supervise(queries, stop)
                if failed:
                    self.stage = "query " + " and ".join(q.name for q in failed)
                    raise failed[0].exception()
                deadline = time.monotonic() + GRACE_S
                while (any(q.query.isActive and q.query.status.get("isTriggerActive") for q in queries)
                       and time.monotonic() < deadline):
                    time.sleep(0.2)
            finally:
                for q in queries:
                    q.query.stop()
                remove_application(spark.sparkContext.applicationId)
                spark.stop()
                close_consumers()  # this process's Kafka clients go before an embedded broker does
                close_producers()


_PYTHON_ERROR = re.compile(r"^[\w.]+(Error|Exception|Exit|Interrupt)\b")


def first_line(exc: BaseException) -> str:
    """What ``exc`` says in one line: the first line of its message (for an error of Spark's
    JVM, the Java exception's), followed by the root cause when it wraps others: the
    error a wrapped Python traceback ends with, else the last ``Caused by:``."""
    text = str(exc).strip() or type(exc).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    head = lines[0]
    if head.startswith("An error occurred while calling") and len(lines) > 1:  # py4j: the Java error follows
        head = lines[1].lstrip(": ")
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by: ")]
    if "Traceback (most recent call last)" in text:
        causes += [line for line in lines if _PYTHON_ERROR.match(line)]
    if causes and causes[-1] not in head:
        head += f" (cause: {causes[-1]})"
    return head if len(head) <= 400 else head[:397] + "..."


def log_file(settings: Settings) -> Path:
    """The service's log file (whole records, traces included)."""
    return Path(settings.status.log_dir) / "service.log"


class _Brief(logging.Formatter):
    """Console records without their stack traces (the log file has them)."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            return super().format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


def setup_logging(settings: Settings, to_file: bool) -> None:
    """Console at ``status.log_level`` without stack traces; with ``to_file``, every INFO
    record whole (traces included) in ``<status.log_dir>/service.log`` as well."""
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    console = logging.StreamHandler()
    console.setFormatter(_Brief(fmt))
    console.setLevel(settings.status.log_level.upper())
    handlers: list[logging.Handler] = [console]
    if to_file:
        log_file(settings).parent.mkdir(parents=True, exist_ok=True)
        file = logging.FileHandler(log_file(settings), encoding="utf-8")
        file.setFormatter(logging.Formatter(fmt))
        file.setLevel(logging.INFO)
        handlers.append(file)
    logging.basicConfig(level=min(logging.INFO, console.level), handlers=handlers, force=True)
    for noisy in ("kafka", "py4j", "numba"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def pattern_starters(settings: Settings, spark: Any, client: KafkaClientConfig) -> list[Callable[[], Any]]:
    """How to start the Cayuga query (keyed-state matching of the registry's patterns), when enabled."""
    from streaming.patterns import starters

    return starters(settings, spark, client)


TRANSIENT = ("Python worker failed to connect back",)
"""Failures of a loaded machine rather than of a query. Spark 4.3 starts the runner of a
Python streaming source (``kafka-py``) with each query, and the driver-side process of a
Python stateful processor (the ``patterns`` query's state schema, ``TransformWithStateInPySparkPythonPreInitRunner``)
with each start of the query, outside the Python daemon, and gives it 10 s to connect back,
a limit no setting changes (``PythonWorkerFactory.createSimpleWorker``). At load 9 on the
2 cores, that process's imports alone took 10 to 11 s of wall clock (2.5 s of CPU)."""

RESTARTS = 5
"""How many times one query is restarted after a transient failure (the n-th after ``5 n`` polls)."""


class Supervised:
    """A streaming query and how to start it again (from its checkpoint)."""

    def __init__(self, start: Callable[[], Any]) -> None:
        self.start = start
        self.query = start()
        self.restarts = 0

    @property
    def name(self) -> str:
        return self.query.name

    def exception(self) -> Any:
        return self.query.exception()


def supervise(queries: list[Supervised], stop: threading.Event, poll_s: float = 1.0) -> list[Supervised]:
    """Wait until ``stop`` is set or a query ends; a query that failed transiently (:data:`TRANSIENT`)
    is restarted from its checkpoint, up to :data:`RESTARTS` times, each later than the one
    before (the load that made it fail may pass). Returns the queries that failed for good
    (empty when stopped)."""
    while not stop.wait(poll_s):
        ended = [q for q in queries if not q.query.isActive]
        for q in ended:
            exc = q.exception()
            if exc is None or not any(t in str(exc) for t in TRANSIENT) or q.restarts >= RESTARTS:
                return [q for q in ended if q.exception() is not None]
            q.restarts += 1
            log.warning("query %s failed (%s); restarting it from its checkpoint (%d of %d)",
                        q.name, first_line(exc), q.restarts, RESTARTS)
            if stop.wait(5 * poll_s * q.restarts):
                return []
            q.query = q.start()
    return []


def shard_lines(shards: dict) -> list[str]:
    """The ``status`` lines of the shards' placement (``MatchJob.describe_shards``)."""
    if shards.get("pinned"):
        made = shards.get("anchorings", 0)
        lines = [f"shards: {len(shards.get('groups', []))} group(s) pinned for {shards.get('executors')} "
                 f"executor(s) (placed {made} time{'s' if made != 1 else ''})"]
        lines += [f"  group {g['shards']}: anchored on {g['anchor']}" for g in shards.get("groups", [])]
    else:
        lines = ["shards: not pinned (a local master)"]
    for shard, where in shards.get("placement", {}).items():
        lines.append(f"  shard {shard} matched on " + ", ".join(f"{w} ({n} tasks)" for w, n in sorted(where.items())))
    return lines


def status(settings: Settings, as_json: bool, path: Path | None = None) -> int:
    """Print the status file; exit code 1 when there is none or the job failed or died."""
    path = path or Path(settings.status.status_file)
    doc = read_status(path)
    if doc is None:
        print(f"no status at {path}: the job has not run with these settings")
        return 1
    doc = checked(doc)
    code = 1 if doc["state"] in ("dead", "failed") else 0
    if as_json:
        print(json.dumps(doc, indent=1))
        return code
    age = time.time() - doc["updated_at"]
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(doc["updated_at"]))
    if doc["state"] == "dead":
        print(f"state: dead (was {doc['last_state']}; pid {doc['pid']} is gone, last seen {when}, "
              f"{age:.0f} s ago)")
    else:
        print(f"state: {doc['state']} (pid {doc['pid']}, updated {when}, {age:.0f} s ago)")
    reg = doc.get("registry") or {}
    if reg:
        print(f"registry: version {reg.get('version')}, {reg.get('subscriptions')} subscriptions, "
              f"snapshots {reg.get('snapshots')}")
    for index in doc.get("index") or ():
        print(f"index: {index['matcher']}"
              + (f" (chosen by {index['chosen_by']}: {index['reason']})" if index.get("chosen_by") else ""))
        if index.get("events"):
            ev = index["events"]
            print(f"  decided on events: {ev['attributes']:g} attributes ({ev['coverage']:.0%} of the constrained "
                  f"ones), {ev['rows']:g} rows, {ev['matches']:g} matches per event (about {ev['events']:,.0f} "
                  f"recent)")
    shards = doc.get("shards")
    if shards:
        for line in shard_lines(shards):
            print(line)
    for tenant, use in (doc.get("tenants") or {}).items():
        quota = {k: v for k, v in use["quotas"].items() if v}
        print(f"tenant {tenant}: {use['subscriptions']} subscriptions, {use['predicates']} predicates, "
              f"{use.get('patterns', 0)} patterns, {use.get('pattern_instances', 0)} live pattern instances"
              + (f" (quotas {quota})" if quota else ""))
    for w in doc.get("pattern_warnings") or ():
        print(f"warning: {w['reason']}")
    totals = doc.get("totals") or {}
    if totals:
        print("totals: " + ", ".join(f"{k}={int(v)}" for k, v in totals.items()))
    from streaming.metrics import BatchMetrics

    for row in doc.get("batches", [])[-5:]:
        print("  " + BatchMetrics(**row).log_line())
    if doc.get("error"):
        print(f"error: {doc['error']}")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        settings = load(args.config, args.overrides)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings, to_file=args.command == "run")
    if args.command == "config":
        print(json.dumps(settings.describe(), indent=1))
        return 0
    if args.command == "status":
        return status(settings, args.json, args.status_file)
    try:
        with checkpoint_lock(settings):
            if args.reset:
                reset_checkpoint(settings)
            return run(settings, handle_signals=True)
    except InUseError as exc:
        print(f"not started: {exc}", file=sys.stderr)
        return 3
    except ConfigError as exc:
        print(f"not started: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    exit_with(main)
