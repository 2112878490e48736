"""Register or cancel subscriptions: records keyed by subscription id on the subscriptions topic.

Examples::

    python -m scripts.subscribe add --id cheap-ibm --expr "symbol = 'IBM' AND price < 100"
    python -m scripts.subscribe add --id rising --pattern "SELECT * FROM FILTER{price > 100}(Stock)"
    python -m scripts.subscribe add --file subs.jsonl          # {"id": ..., "expr"|"json"|"pattern": ..., "expires"?}
    python -m scripts.subscribe add --workload stock --n-subs 100000
    python -m scripts.subscribe cancel --id cheap-ibm other-id
    python -m scripts.subscribe cancel --file subs.jsonl       # cancels the ids of the file

Records are validated here with the same parser the service uses, so mistakes are
reported at once (``--no-check`` sends them anyway: the service then rejects them to
the errors topic).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence

import orjson
from kafka import KafkaProducer
from tqdm import tqdm

from matchers.errors import PubSubError
from scripts.workloads import WORKLOADS
from streaming.cli import exit_with
from streaming.config import ConfigError
from streaming.config_sources import add_arguments, from_arguments
from streaming.kafka.refusals import kafka_python_refusals
from streaming.tenants import topic_of


def records_from_file(path: str) -> Iterator[dict]:
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                obj = orjson.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError(f"{path}:{number}: a subscription record must be a JSON object")
                yield obj


def records_from_workload(name: str, n_subs: int, seed: int) -> Iterator[dict]:
    from matchers.expr import to_text
    from scripts.workloads import generate

    for sub in generate(name, n_subs=n_subs, n_events=1, seed=seed).subscriptions:
        yield {"id": sub.id, "expr": to_text(sub.expr)}


def check_record(rec: dict, max_terms: int) -> None:
    """Raise :class:`PubSubError` unless the service would accept the record.

    A record with a ``"pattern"`` is a stateful (Cayuga) subscription; any other is boolean.
    """
    if "pattern" in rec:
        from matchers.cayuga.compiler import chains
        from matchers.cayuga.language import parse

        if not isinstance(rec.get("id"), str) or not rec["id"]:
            raise PubSubError("a pattern record needs a non-empty string id")
        if not isinstance(rec["pattern"], str):
            raise PubSubError(f"subscription {rec['id']!r}: \"pattern\" must be a string (a CEL expression)")
        try:
            chains(parse(rec["pattern"]))
        except PubSubError as exc:
            raise PubSubError(f"subscription {rec['id']!r}: {exc}") from None
        return
    from matchers.language import parse_record

    parse_record(rec, max_terms=max_terms)


def upserts(records: Iterator[dict], check: bool, max_terms: int) -> Iterator[tuple[bytes, bytes]]:
    for rec in records:
        rec = {k: v for k, v in rec.items() if k != "op"}
        if check:
            check_record(rec, max_terms)
        yield str(rec.get("id")).encode("utf-8"), orjson.dumps({"op": "upsert", **rec})


def deletes(ids: Iterator[str]) -> Iterator[tuple[bytes, bytes]]:
    for sub_id in ids:
        yield sub_id.encode("utf-8"), orjson.dumps({"op": "delete", "id": sub_id})


def send(producer: KafkaProducer, topic: str, items: Iterator[tuple[bytes, bytes]], total: int | None) -> int:
    n = 0
    for key, value in tqdm(items, total=total, unit="sub", desc=f"-> {topic}", file=sys.stderr,
                           disable=total is not None and total < 1000):
        producer.send(topic, key=key, value=value)
        n += 1
    producer.flush()
    return n


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.subscribe", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--topic", default=None, help="default: the configured subscriptions topic")
    parser.add_argument("--tenant", default=None, help="write to this tenant's subscriptions topic (<topic>.<tenant>)")
    sub = parser.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="register (or replace) subscriptions")
    src = add.add_mutually_exclusive_group(required=True)
    src.add_argument("--file", help="JSONL of subscription records")
    src.add_argument("--expr", help="text form of one subscription (with --id)")
    src.add_argument("--json", help="JSON form of one subscription (with --id)")
    src.add_argument("--pattern", help="Cayuga (CEL) expression of one stateful subscription (with --id)")
    src.add_argument("--workload", choices=sorted(WORKLOADS), help="generator name from scripts.workloads")
    add.add_argument("--id", help="subscription id (with --expr, --json or --pattern)")
    add.add_argument("--expires", default=None, help="expiry: epoch seconds or ISO-8601 time")
    add.add_argument("--n-subs", type=int, default=1000, help="subscriptions to generate (--workload)")
    add.add_argument("--seed", type=int, default=0)
    add.add_argument("--no-check", action="store_true", help="send without validating here")
    cancel = sub.add_parser("cancel", help="cancel subscriptions")
    csrc = cancel.add_mutually_exclusive_group(required=True)
    csrc.add_argument("--id", nargs="+", dest="ids", help="subscription ids")
    csrc.add_argument("--file", help="JSONL of records whose ids to cancel")
    args = parser.parse_args(argv)
    try:
        settings, client = from_arguments(args)
    except ConfigError as exc:
        parser.error(str(exc))
    topic = args.topic or settings.kafka.subscriptions_topic
    if args.tenant:
        topic = topic_of(topic, args.tenant)
    total: int | None = None
    if args.action == "add":
        if args.file:
            records: Iterator[dict] = records_from_file(args.file)
        elif args.workload:
            records, total = records_from_workload(args.workload, args.n_subs, args.seed), args.n_subs
        else:
            if not args.id:
                parser.error("--id is required with --expr, --json or --pattern")
            one: dict = {"id": args.id}
            if args.pattern:
                one["pattern"] = args.pattern
            else:
                one.update({"expr": args.expr} if args.expr else {"json": orjson.loads(args.json)})
            if args.expires is not None:
                one["expires"] = float(args.expires) if args.expires.replace(".", "", 1).isdigit() else args.expires
            records, total = iter([one]), 1
        items = upserts(records, not args.no_check, settings.match.max_terms)
    else:
        ids = args.ids if args.ids else [str(r["id"]) for r in records_from_file(args.file)]
        items, total = deletes(iter(ids)), len(ids)
    with kafka_python_refusals(client):
        producer = KafkaProducer(**client.kafka_python("producer"), acks="all", linger_ms=5)
        try:
            n = send(producer, topic, items, total)
        except PubSubError as exc:
            print(f"rejected: {exc}", file=sys.stderr)
            return 1
        finally:
            producer.close(timeout=30)
    print(f"{'registered' if args.action == 'add' else 'cancelled'} {n} subscription(s) on {topic}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    exit_with(main)
