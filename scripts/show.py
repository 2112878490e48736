"""Show the service's topics (partitions, records) and the state of both registries (the columnar one of the
match query, and the patterns').

Examples::

    python -m scripts.show --bootstrap 127.0.0.1:9092           # topics, registry, job status
    python -m scripts.show --no-topics --subscriptions 20         # registry only, 20 subscriptions
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence

from streaming.cli import exit_with
from streaming.config import ConfigError, Settings
from streaming.config_sources import add_arguments, bootstrap_servers, load
from streaming.kafka.client_config import KafkaClientConfig


def show_topics(settings: Settings, client: KafkaClientConfig) -> None:
    from streaming.kafka.watermarks import Watermarks

    marks = Watermarks(client.kafka_python("consumer"))
    try:
        names = [settings.kafka.events_topic, settings.kafka.subscriptions_topic,
                 settings.kafka.notifications_topic, settings.kafka.errors_topic]
        print("topics:")
        for name in names:
            tps = marks.partitions([name], refresh=True)
            if not tps:
                print(f"  {name:<24} (missing)")
                continue
            begin, end = marks.earliest(tps), marks.latest(tps)
            records = sum(end[tp] - begin[tp] for tp in tps)
            print(f"  {name:<24} partitions={len(tps)} records={records} ends={[end[tp] for tp in sorted(tps)]}")
    finally:
        marks.close()


def show_registry(settings, n_subs: int) -> None:
    """The columnar registry's latest version (read from its files, changing nothing) and its first
    ``n_subs`` expressions by id."""
    import pyarrow.compute as pc

    from matchers.expr import to_text
    from streaming.errors import RegistryError
    from streaming.registry_columns import EXPRESSION, files
    from streaming.registry_columns.shards import subscriptions
    from streaming.storage import Directory

    directory = Directory(settings.registry_columns_dir)
    if not directory.exists():
        print(f"registry: none at {directory.uri}")
        return
    try:
        table, stamp = files.shard_table(directory, files.latest_version(directory), 0, 1)
    except RegistryError as exc:
        print(f"registry: unreadable: {exc}")
        return
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp.time)) if stamp.time else "-"
    expressions = table.filter(pc.equal(table.column("kind"), EXPRESSION))
    print(f"registry: {directory.uri} version={stamp.version} subscriptions={table.num_rows} "
          f"expressions={expressions.num_rows} last batch={stamp.batch_id} at {when}")
    first = expressions.take(pc.sort_indices(expressions.column("id"))[:n_subs])
    for sub in subscriptions(first):
        expires = f" expires={sub.expires}" if sub.expires is not None else ""
        print(f"  {sub.id}: {to_text(sub.expr)}{expires}")


def show_patterns(settings, n_subs: int) -> None:
    """The registry's patterns (stateful Cayuga subscriptions) as the ``patterns`` query reads them (its pattern view)."""
    from streaming.errors import RegistryError
    from streaming.patterns.queries import registry_dir
    from streaming.patterns.registry import current

    if not settings.patterns.enabled:
        print("patterns: disabled (patterns.enabled = false)")
        return
    try:
        view = current(registry_dir(settings))
    except RegistryError:
        print(f"patterns: no registry at {registry_dir(settings)}")
        return
    patterns = view.patterns
    print(f"patterns: {registry_dir(settings)} version={view.version} patterns={len(patterns)} "
          f"last batch={view.batch_id}")
    for sub_id in sorted(patterns)[:n_subs]:
        print(f"  {sub_id}: {patterns[sub_id][0]}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.show", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--no-topics", action="store_true", help="skip the Kafka topics")
    parser.add_argument("--subscriptions", type=int, default=0, metavar="N", help="list N subscriptions")
    parser.add_argument("--json-status", action="store_true", help="print the job's status document")
    args = parser.parse_args(argv)
    try:
        settings = load(args.config, args.overrides)
    except ConfigError as exc:
        parser.error(str(exc))
    if not args.no_topics:
        servers = bootstrap_servers(args, settings)
        if servers:
            show_topics(settings, settings.kafka.client_config(servers))
        else:
            print("topics: no bootstrap servers configured (pass --bootstrap)")
    show_registry(settings, args.subscriptions)
    show_patterns(settings, args.subscriptions)
    from streaming.metrics import checked, read_status

    status = read_status(settings.status.status_file)
    if status is None:
        print(f"job: no status at {settings.status.status_file}")
        return 0
    status = checked(status)
    if args.json_status:
        print(json.dumps(status, indent=1))
    else:
        last = status.get("last_batch") or {}
        print(f"job: {status['state']} pid={status['pid']} batches={int(status.get('totals', {}).get('batches', 0))} "
              f"last batch={last.get('batch_id')} ({last.get('batch_ms', 0):.0f} ms)")
    return 0


if __name__ == "__main__":
    exit_with(main)
