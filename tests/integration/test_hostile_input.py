"""Hostile input through the real broker into the running service: the stream stays up.

A corpus of bad events and subscriptions, interleaved with good ones, goes through the
match query and the patterns queries (run as ``streaming.__main__.pattern_starters`` starts
them) in the test's Spark session. Every good event gets exactly its oracle
notifications, every bad input exactly one error record (deterministic id, reason,
stage), and every query is still active at the end. Run with ``-s`` for the table
input -> stage -> reason.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pytest

from matchers.expr import Subscription, pred, to_text
from streaming.__main__ import pattern_starters
from streaming.kafka.client_config import KafkaClientConfig
from streaming.match import MatchJob
from streaming.notifications import notification_id
from tests.integration.kafka_helpers import consume_all, produce
from tests.integration.service_fixtures import (
    expected_pairs,
    make_topics,
    notification_docs,
    pairs,
    service_settings,
)
from tests.strategies import random_event, random_subscriptions

pytestmark = pytest.mark.integration

BIG = {"max_request_size": 20_000_000}
"""Producer options for the 5 MB event (the producer's default bound is 1 MB)."""


class Case(NamedTuple):
    label: str
    value: bytes
    stage: str | None  # the expected error record's stage, None: a good input
    reason: str = ""  # a part of the expected reason


def nested(depth: int) -> bytes:
    return b'{"n":' + b'{"a":' * depth + b"1" + b"}" * (depth + 1)


def five_mb_event() -> bytes:
    return orjson.dumps({"price": 1, "symbol": "IBM", "blob": "x" * 5_000_000})


def bad_events() -> list[Case]:
    many = orjson.dumps({f"k{i}": i for i in range(10_000)})
    return [
        Case("depth 10,000", nested(10_000), "event", "limits.depth"),
        Case("depth 100,000", nested(100_000), "event", "limits.depth"),
        Case("depth 40", nested(40), "event", "the nesting depth (41) exceeds limits.depth = 32"),
        Case("5 MB event (matches 'big')", five_mb_event(), "event", "limits.event_bytes"),
        Case("NaN", b'{"price": NaN}', "event", "NaN and Infinity"),
        Case("Infinity", b'{"price": -Infinity, "x": 1}', "event", "NaN and Infinity"),
        Case("1e400", b'{"price": 1e400}', "event", "64-bit float range"),
        Case("not UTF-8", b'{"symbol": "\xff\xfe"}', "event", "not UTF-8"),
        Case("encoded surrogate bytes", b'{"symbol": "\xed\xa0\x80"}', "event", "not UTF-8"),
        Case("lone surrogate escape", b'{"symbol": "\\ud800"}', "event", "surrogate"),
        Case("raw control character", b'{"symbol": "a\x01b"}', "event", "control character"),
        Case("dotted key collides", b'{"a.b": 1, "a": {"b": 2}}', "event", "appears twice"),
        Case("10,000 attributes", many, "event", "limits.attributes"),
        Case("1 MB string", orjson.dumps({"symbol": "y" * 1_000_000}), "event", "limits.event_bytes"),
        Case("100 kB string", orjson.dumps({"symbol": "y" * 100_000}), "event", "limits.string_length"),
        Case("not an object", b"[1, 2]", "event", "JSON object"),
        Case("truncated JSON", b'{"price": ', "event", "malformed JSON"),
        Case("arrays past limits.array_rows", orjson.dumps({"a": list(range(40)), "b": list(range(40))}), "event",
             "limits.array_rows"),
    ]


def good_events() -> list[Case]:
    return [
        Case("escaped control character", b'{"symbol": "a\\u0001b", "price": 2}', None),
        Case("duplicate keys (last wins)", b'{"price": 100, "price": 1, "symbol": "IBM"}', None),
        Case("empty key", b'{"": 1, "price": 4}', None),
        Case("null only", b'{"x": null}', None),  # null is a value
        Case("arrays and null", b'{"price": [300, 1], "symbol": "IBM", "tags": [1, 2], "gone": null, '
             b'"a": [0, 9], "t": [{"u": "ab"}, {"u": "b"}]}', None),  # "big" matches (price 1)
        Case("dotted key", b'{"a.b": 1, "price": 5}', None),
        Case("regex bait (no match)", orjson.dumps({"symbol": "a" * 5_000 + "!"}), None),
        Case("regex bait (match)", orjson.dumps({"symbol": "b" + "a" * 5_000}), None),
    ]


def bad_subscriptions() -> list[tuple[str, Case]]:
    many = " AND ".join(f"x = {i}" for i in range(10_000))
    some = " AND ".join(f"x = {i}" for i in range(1_500))
    return [
        ("p10k", Case("10,000 predicates", orjson.dumps({"id": "p10k", "expr": many}), "subscription",
                      "limits.subscription_bytes")),
        ("p1500", Case("1,500 predicates", orjson.dumps({"id": "p1500", "expr": some}), "subscription",
                       "limits.predicates")),
        ("deep", Case("subscription depth 10,000", b'{"id": "deep", "json": ' + b'{"all": [' * 10_000 + b"]}" * 10_000
                      + b"}", "subscription", "limits.subscription_bytes")),
        ("deep3k", Case("subscription depth 3,000", b'{"id": "deep3k", "json": ' + b'{"all": [' * 3_000
                        + b"]}" * 3_000 + b"}", "subscription", "1024 levels")),
        ("nan", Case("subscription NaN", b'{"id": "nan", "expr": "x = 1", "expires": NaN}', "subscription",
                     "NaN and Infinity")),
        ("bad-op", Case("pattern record, unknown op", b'{"op": "bogus", "id": "bad-op", "pattern": "S"}',
                        "subscription", "unknown op")),
        ("bad-cel", Case("pattern record, bad pattern", b'{"id": "bad-cel", "pattern": "S NEXT{x = 1} S"}',
                         "pattern", "bad-cel")),
    ]


def sub_record(sub: Any) -> tuple[str, bytes]:
    return sub.id, orjson.dumps({"op": "upsert", "id": sub.id, "expr": to_text(sub.expr)})


def run_queries(queries: list[Any]) -> None:
    for q in queries:
        q.processAllAvailable()


def print_table(rows: list[tuple[str, str, str]]) -> None:
    width = max(len(r[0]) for r in rows)
    print(f"\n{'input':<{width}} | stage         | reason")
    for label, stage, reason in rows:
        print(f"{label:<{width}} | {stage:<13} | {reason[:150]}")


def test_hostile_corpus_one_error_per_bad_input(spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any,
                                                tmp_path: Path):
    rng = random.Random(7)
    topics = make_topics(topic_factory)
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers)
    job = MatchJob(settings, spark, kafka_config)
    subs = random_subscriptions(rng, 60)
    subs += [Subscription.of("big", pred("price", "<", 2)), Subscription.of("regex", pred("symbol", "matches", "(a+)+$"))]
    bad_subs = bad_subscriptions()
    sub_rows = [sub_record(s) for s in subs]
    produce(kafka_config, topics.subscriptions,
            sub_rows[:30] + [(k, c.value) for k, c in bad_subs] + sub_rows[30:], linger_ms=100)
    queries = [job.start(), *(start() for start in pattern_starters(settings, spark, kafka_config))]
    try:
        run_queries(queries)  # every subscription is registered before the events arrive
        cases = bad_events() + good_events()
        randoms = [Case(f"good {i}", orjson.dumps(random_event(rng)), None) for i in range(300)]
        stream = list(randoms)
        for k, case in enumerate(cases):
            stream.insert(k * 15, case)
        for start in range(0, len(stream), 100):  # several producer batches, bad inputs amid good ones
            produce(KafkaClientConfig.create(kafka_config.bootstrap_servers, BIG), topics.events, [c.value for c in stream[start:start + 100]], linger_ms=100)
        run_queries(queries)
        run_queries(queries)  # the patterns queries see the registry, then the events
        for q in queries:
            assert q.isActive and q.exception() is None, q.name
    finally:
        for q in queries:
            q.stop()

    by_value = {c.value: c for c in cases}
    located = []  # (partition, offset, case)
    for r in consume_all(kafka_config, topics.events):
        located.append((r.partition, r.offset, by_value.get(r.body) or Case("good", r.body, None)))
    assert len(located) == len(stream)
    matched = [(p, o, orjson.loads(c.value)) for p, o, c in located if c.stage is None]
    want = expected_pairs(subs, matched)
    docs = notification_docs(kafka_config, topics.notifications, min_records=len(want))
    assert pairs(docs) == want and len(docs) == len(want)
    regex = {(p, o) for s, p, o in want if s == "regex"}
    assert len(regex) == 1  # only "baaa...a" ends in a run of a's

    reported = [c for c in cases if c.stage] + [c for _, c in bad_subs]
    errors = notification_docs(kafka_config, topics.errors, min_records=len(reported))
    by_position: dict[tuple[str, int, int], list[dict]] = {}
    for e in errors:
        by_position.setdefault((e["topic"], e["partition"], e["offset"]), []).append(e)
    table = []
    for p, o, case in located:
        got = by_position.pop((topics.events, p, o), [])
        if case.stage is None:
            assert got == [], (case.label, got)
            if case in cases:
                table.append((case.label, "(none)", "accepted: notified exactly as the oracle says"))
            continue
        assert len(got) == 1, (case.label, got)
        e = got[0]
        assert e["stage"] == case.stage and case.reason in e["reason"], (case.label, e["reason"])
        assert e["id"] == notification_id(e["stage"], topics.events, p, o)
        assert e["raw_bytes"] == len(case.value) and len(orjson.dumps(e)) < 200_000
        table.append((case.label, e["stage"], e["reason"]))
    subs_at = {(r.key or b"").decode(): r for r in consume_all(kafka_config, topics.subscriptions)}
    for key, case in bad_subs:
        r = subs_at[key]
        got = by_position.pop((topics.subscriptions, r.partition, r.offset), [])
        assert len(got) == 1, (case.label, got)
        e = got[0]
        assert e["stage"] == case.stage and case.reason in e["reason"], (case.label, e["reason"])
        assert e["id"] == notification_id(e["stage"], topics.subscriptions, r.partition, r.offset)
        table.append((case.label, e["stage"], e["reason"]))
    assert by_position == {}  # nothing else was reported
    assert len(job.registry) == len(subs)
    table.append(("MATCHES '(a+)+$' subscription", "(none)",
                  f"accepted (RE2 is linear): matched {len(regex)} event of 5,001 characters, as the oracle"))
    order = [c.label for c in cases] + [c.label for _, c in bad_subs]
    print_table(sorted(table, key=lambda row: order.index(row[0]) if row[0] in order else len(order)))


def test_oversized_notification_goes_id_only(spark: Any, kafka_config: KafkaClientConfig, topic_factory: Any, tmp_path: Path):
    """With the event limits raised, the 5 MB event matches; its notification is id-only with a note."""
    topics = make_topics(topic_factory, event_partitions=1)
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers).replace(
        limits={"event_bytes": 10_000_000, "string_length": 10_000_000})
    job = MatchJob(settings, spark, kafka_config)
    produce(kafka_config, topics.subscriptions, [("big", orjson.dumps({"id": "big", "expr": "price < 2"}))])
    query = job.start()
    try:
        query.processAllAvailable()
        produce(KafkaClientConfig.create(kafka_config.bootstrap_servers, BIG), topics.events,
                [orjson.dumps({"id": "small", "price": 1}), five_mb_event()], partition=0, linger_ms=0)
        query.processAllAvailable()
        assert query.isActive and query.exception() is None
    finally:
        query.stop()
    docs = {d["offset"]: d for d in notification_docs(kafka_config, topics.notifications, min_records=2)}
    assert sorted(docs) == [0, 1]
    assert docs[0]["event"] == {"id": "small", "price": 1} and "note" not in docs[0]
    slim = docs[1]
    assert "event" not in slim and "limits.message_bytes" in slim["note"]
    assert slim["id"] == notification_id("big", topics.events, 0, 1) and slim["event_id"] == f"{topics.events}/0/1"
    assert consume_all(kafka_config, topics.errors, timeout=5) == []
    print(f"\n5 MB event, limits raised -> notification without the event: note {slim['note']!r}")
