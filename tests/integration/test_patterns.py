"""End to end through Kafka and Spark: Table 1 and AutQ as stateful subscriptions."""

from __future__ import annotations

import orjson
import pytest

from matchers.cayuga.algebra import Event
from streaming.config import Settings
from streaming.match import MatchJob
from streaming.patterns import start_patterns_query
from tests.unit.cayuga.helpers import reference_matches
from tests.unit.cayuga.streams import TABLE1, rss_posts, stock_ticks

from .kafka_helpers import consume_all, produce
from .service_fixtures import connector_settings, drain

pytestmark = pytest.mark.integration


def event_json(e: Event) -> bytes:
    return orjson.dumps({"id": e.id, "stream": e.stream, "ts": e.t1, "ts_start": e.t0, **e.attrs})


def heartbeat(after: int) -> bytes:
    """An event of no subscription's stream far ahead: it moves the watermark past the rest."""
    return orjson.dumps({"id": "heartbeat", "stream": "heartbeat", "ts": after + 1000})


def table1_events() -> list[Event]:
    stock = stock_ticks(250, 2)
    last = stock[-1].t1
    posts = [Event(e.id, e.stream, e.t0 + last + 1, e.t1 + last + 1, e.attrs) for e in rss_posts(120, 3)]
    return stock + posts


def witnesses(records) -> set[tuple[str, tuple[str, ...]]]:
    out = set()
    for r in records:
        n = orjson.loads(r.value)
        out.add((n["subscription"], tuple(n["witness"]["events"])))
    return out


def test_table1_through_kafka_and_spark(spark, kafka_config, topic_factory, tmp_path, connector):
    events_t, subs_t = topic_factory("pev", 2), topic_factory("psub")
    notes_t, errors_t = topic_factory("pnote"), topic_factory("perr")
    records = [(name, orjson.dumps({"op": "upsert", "id": name, "pattern": text})) for name, text in TABLE1.items()]
    records.append(("bad", orjson.dumps({"id": "bad", "pattern": "Stock NEXT{name = 1} Stock"})))
    records.append(("plain", orjson.dumps({"id": "plain", "expr": "price > 1"})))  # the match job's
    produce(kafka_config, subs_t, records)
    settings = Settings().replace(
        kafka={"events_topic": events_t, "subscriptions_topic": subs_t, "notifications_topic": notes_t,
               "errors_topic": errors_t, **connector_settings(connector)},
        spark={"checkpoint_dir": str(tmp_path), "trigger_interval": "0 seconds"})
    drain(MatchJob(settings, spark, kafka_config).start())  # the match query registers the patterns
    events = table1_events()
    payload = [(e.attrs.get("name") or e.attrs.get("website"), event_json(e)) for e in events]
    payload.insert(10, (None, b"not json"))
    payload.append((None, heartbeat(events[-1].t1)))
    produce(kafka_config, events_t, payload)
    expected = {(k[1], k[5]) for k in reference_matches(TABLE1, events)}
    q = start_patterns_query(spark, settings, kafka_config)
    try:
        q.processAllAvailable()
        got_records = consume_all(kafka_config, notes_t, timeout=240, min_records=len(expected))
    finally:
        q.stop()
    assert witnesses(got_records) == expected
    assert len(got_records) == len(expected)
    docs = [orjson.loads(r.value) for r in got_records]
    assert len({d["id"] for d in docs}) == len(got_records)
    assert all(d["kind"] == "pattern" and d["event_id"] == d["witness"]["events"][-1] for d in docs)
    errors = [orjson.loads(r.value) for r in consume_all(kafka_config, errors_t)]
    reasons = " | ".join(e["reason"] for e in errors)
    assert len(errors) == 1, reasons  # the event that is not JSON is the match query's to report
    assert "'bad'" in reasons and errors[0]["stage"] == "pattern"


def test_a_misspelt_attribute_is_reported_while_correct_patterns_match(spark, kafka_config, topic_factory, tmp_path,
                                                                      capsys):
    """A pattern reading ``prcie`` of Stock: once Stock has had ``unknown_attribute_events`` events,
    one WARNING, one record on the errors topic (none more after a restart) and a line of
    ``python -m streaming status``; the correct pattern matches as the reference says."""
    from streaming.__main__ import status

    from .service_fixtures import make_topics, service_settings

    topics = make_topics(topic_factory, event_partitions=2)
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers).replace(
        patterns={"unknown_attribute_events": 100})
    good = "FILTER{price > 20}(Stock) NEXT{$2.name = $1.name AND $2.price > $1.price} Stock"
    subs = {"good": good, "bad": good.replace("FILTER{price", "FILTER{prcie")}
    produce(kafka_config, topics.subscriptions, [(k, orjson.dumps({"id": k, "pattern": t})) for k, t in subs.items()])
    drain(MatchJob(settings, spark, kafka_config).start())  # the match query registers the patterns
    events = stock_ticks(300, 5)
    produce(kafka_config, topics.events, [(e.attrs["name"], event_json(e)) for e in events]
            + [(None, heartbeat(events[-1].t1))])
    expected = {(k[1], k[5]) for k in reference_matches({"good": good}, events)}
    assert expected
    q = start_patterns_query(spark, settings, kafka_config)
    try:
        q.processAllAvailable()
        got = consume_all(kafka_config, topics.notifications, timeout=240, min_records=len(expected))
    finally:
        q.stop()
    assert witnesses(got) == expected
    errors = [orjson.loads(r.value) for r in consume_all(kafka_config, topics.errors, min_records=1)]
    assert [(e["stage"], e["key"]) for e in errors] == [("pattern-attribute", "bad")]
    assert "reads prcie" in errors[0]["reason"] and "did you mean 'price'?" in errors[0]["reason"]
    # the status (written by the match query's batches) shows it
    job = MatchJob(settings, spark, kafka_config)
    drain(job.start())
    capsys.readouterr()
    status(settings, as_json=False)
    out = capsys.readouterr().out
    assert "warning: pattern 'bad' reads prcie, which no event of Stock has carried" in out, out
    assert "good" not in out.split("warning:", 1)[1].split("\n")[0]
    # a restart with more events: the same warning is not sent again
    more = [Event(f"m{i}", "Stock", events[-1].t1 + 2000 + i, events[-1].t1 + 2000 + i, e.attrs)
            for i, e in enumerate(stock_ticks(50, 6))]
    produce(kafka_config, topics.events, [(e.attrs["name"], event_json(e)) for e in more])
    drain(start_patterns_query(spark, settings, kafka_config))
    assert len(consume_all(kafka_config, topics.errors)) == 1
