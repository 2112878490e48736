"""Tenants on the real broker and Spark: ids, notification and error topics kept apart, quotas;
the service and each tenant as principals of their own, held by Kafka's authorizer to the
ACLs docs/service.md lists ("Tenants and access")."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import TopicAuthorizationFailedError

from streaming.config import Settings
from streaming.kafka.admin import ensure_topics
from streaming.kafka.broker import EmbeddedBroker
from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.watermarks import Watermarks
from streaming.match import MatchJob
from streaming.match.job import tenant_usage
from streaming.metrics import read_status
from streaming.patterns import start_patterns_query
from streaming.tenants import Tenants, topic_of
from tests.integration.kafka_helpers import consume_all, produce
from tests.integration.kafka_security import Acl, SecuredKafka, reader_group
from tests.integration.service_fixtures import (
    drain,
    make_topics,
    notification_docs,
    service_settings,
)
from tests.integration.test_patterns import event_json, heartbeat
from tests.unit.cayuga.helpers import reference_matches
from tests.unit.cayuga.streams import TABLE1, stock_ticks

pytestmark = pytest.mark.integration


def upsert(sub_id: str, expr: str) -> tuple[str, bytes]:
    return sub_id, orjson.dumps({"id": sub_id, "expr": expr})


def pattern(sub_id: str, text: str) -> tuple[str, bytes]:
    return sub_id, orjson.dumps({"id": sub_id, "pattern": text})


# -- principals and their ACLs (docs/service.md, "Tenants and access") ----------------------------

def service_acls(settings: Settings) -> list[Acl]:
    """The ACLs docs/service.md lists for the service's principal, on the topics of ``settings``
    (created by the operator beforehand, so no CREATE)."""
    k, tenants = settings.kafka, Tenants.of(settings)
    acls = [Acl("read", "topic", k.events_topic),
            Acl("read", "topic", k.subscriptions_topic, "prefixed"),
            Acl("write", "topic", k.notifications_topic, "prefixed"),
            Acl("write", "topic", k.errors_topic, "prefixed")]
    prefixes = sorted(set(tenants.targets.values())) if tenants is not None else []
    acls += [Acl("describe", "topic", prefix, "prefixed") for prefix in prefixes]
    # the group id of the librdkafka readers: never joined, but librdkafka looks up its
    # coordinator (FindCoordinator: DESCRIBE on the group)
    assert reader_group() == "kafka-py-reader-unused", "docs/service.md names the group"
    return [*acls, Acl("describe", "group", reader_group())]


def tenant_acls(settings: Settings, tenant: str) -> list[Acl]:
    """The ACLs docs/service.md lists for tenant ``tenant``'s principal."""
    k = settings.kafka
    subscriptions, notifications, errors = (topic_of(base, tenant) for base in (
        k.subscriptions_topic, k.notifications_topic, k.errors_topic))
    return [Acl("write", "topic", subscriptions), Acl("describe", "topic", subscriptions),
            *(Acl(op, "topic", topic) for topic in (notifications, errors) for op in ("read", "describe")),
            *(Acl(op, "topic", f"{notifications}.", "prefixed") for op in ("read", "describe")),
            Acl("read", "group", f"{tenant}-", "prefixed")]


class Principals(NamedTuple):
    """The client configurations of the service, of each tenant and of an events producer
    (SCRAM-SHA-512, SASL_PLAINTEXT)."""

    service: KafkaClientConfig
    tenants: dict[str, KafkaClientConfig]
    producer: KafkaClientConfig
    names: dict[str, str]
    """``"service"`` and each tenant -> its principal (``User:...``)."""
    since: int
    """Where the broker's log ended when they were made."""

    def service_refusals(self, kafka: SecuredKafka | None) -> list[str]:
        """The authorizer's refusals of the service's principal since it was made (none
        without the embedded broker's security)."""
        return kafka.refusals(self.since, self.names["service"]) if kafka is not None else []


@pytest.fixture
def security(kafka_broker: Any, request: pytest.FixtureRequest) -> SecuredKafka | None:
    """The embedded broker's security; ``None`` on a broker named by ``PUBSUB_BOOTSTRAP_SERVERS``:
    the tests taking it then run the service and the tenants as the tests' own client (no
    principals, no refusals to check)."""
    if not isinstance(kafka_broker, EmbeddedBroker):
        return None
    security: SecuredKafka = request.getfixturevalue("kafka_security")
    return security


def principals(kafka: SecuredKafka | None, settings: Settings, operator: KafkaClientConfig | None = None) -> Principals:
    """New SCRAM users for the service, every tenant of ``settings`` and an events producer,
    each granted exactly its ACLs (:func:`service_acls`, :func:`tenant_acls`, WRITE on the
    events topic), none a super user. Without ``kafka`` (another broker) all of them are
    ``operator``."""
    tenants = Tenants.of(settings)
    assert tenants is not None
    if kafka is None:
        assert operator is not None
        return Principals(operator, dict.fromkeys(tenants.names, operator), operator, {}, 0)
    suffix = uuid.uuid4().hex[:8]
    configs, names = {}, {}
    for who, acls in [("service", service_acls(settings)), ("producer", [Acl("write", "topic", settings.kafka.events_topic)]),
                      *((t, tenant_acls(settings, t)) for t in tenants.names)]:
        user = kafka.add_user(f"{who}-{suffix}")
        kafka.grant(user.principal, acls)
        assert kafka.acls_of(user.principal) == {(a.operation.upper(), a.resource.upper(), a.name, a.pattern.upper())
                                                 for a in acls}
        configs[who] = kafka.config("SASL_PLAINTEXT", user, "SCRAM-SHA-512", "confluent")
        names[who] = user.principal
    service, producer = configs.pop("service"), configs.pop("producer")
    return Principals(service, configs, producer, names, kafka.log_size())


def read_refusal(config: KafkaClientConfig, topic: str) -> Exception:
    """What a kafka-python consumer of ``config`` is told asking where ``topic`` starts (a
    consumer assigned the partition, or a group member given it, gets no record and only logs
    the refusal: kafka-python raises it from offset lookups)."""
    consumer = KafkaConsumer(**config.kafka_python("consumer"))
    try:
        with pytest.raises(TopicAuthorizationFailedError) as refused:
            consumer.beginning_offsets([TopicPartition(topic, 0)])
        return refused.value
    finally:
        consumer.close()


def rdkafka_read_refusal(config: KafkaClientConfig, topic: str, group: str) -> str:
    """The error a librdkafka consumer of ``config`` subscribing to ``topic`` as a member of
    ``group`` is told (assigned the partition instead, it gets no record and no error)."""
    from confluent_kafka import Consumer, KafkaError

    consumer = Consumer({**config.rdkafka("consumer"), "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        for _ in range(30):
            message = consumer.poll(1.0)
            error = message.error() if message is not None else None
            if error is not None:
                assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
                return str(error)
            assert message is None, f"read {message.value()!r} from {topic}"
        raise AssertionError(f"no refusal reading {topic}")
    finally:
        consumer.close()


def end_offset(config: KafkaClientConfig, topic: str) -> int:
    watermarks = Watermarks(config.kafka_python("consumer"))
    try:
        return int(watermarks.latest([(topic, 0)])[(topic, 0)])
    finally:
        watermarks.close()


def test_tenants_are_kept_apart_and_held_to_their_quotas(
    spark: Any, kafka_config: KafkaClientConfig, kafka_security: SecuredKafka, topic_factory: Any, tmp_path: Path,
    connector: str,
):
    """The service, acme, beta and an events producer each a principal holding only the ACLs
    docs/service.md lists: the service and the producer need no more (the broker refuses them
    nothing, with either connector); the broker keeps each tenant off the other's topics,
    whatever the service does."""
    topics = make_topics(topic_factory, event_partitions=1)  # the operator's (a super user) topics
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers, connector).replace(
        tenants={"names": "acme,beta", "subscriptions": 2})
    tenants = Tenants.of(settings)
    assert tenants is not None
    ensure_topics(kafka_config, tenants.topic_partitions(settings))
    who = principals(kafka_security, settings)
    as_acme, as_beta = who.tenants["acme"], who.tenants["beta"]
    since = kafka_security.log_size()
    acme, beta = (f"{topics.subscriptions}.{t}" for t in ("acme", "beta"))
    # acme and beta both name a subscription "x"; acme's third subscription is past its quota of 2
    produce(as_acme, acme, [upsert("x", "price < 5"), upsert("a2", "price = 100"), upsert("a3", "price < 50")])
    produce(as_beta, beta, [upsert("x", "price > 5")])
    # beta, without WRITE on acme's subscriptions topic, cannot register anything as acme
    with pytest.raises(TopicAuthorizationFailedError):
        produce(as_beta, acme, [upsert("planted", "price > 0")])
    assert end_offset(kafka_config, acme) == 3  # the record never reached the topic
    job = MatchJob(settings, spark, who.service)
    query = job.start()
    try:
        query.processAllAvailable()
        produce(who.producer, topics.events, [b'{"price": 3}', b'{"price": 8}'], partition=0)
        query.processAllAvailable()
        # acme deletes its "x" (by record and by tombstone): beta's "x" goes on matching
        produce(as_acme, acme, [("x", orjson.dumps({"op": "delete", "id": "x"})), ("x", None)])
        query.processAllAvailable()
        produce(who.producer, topics.events, [b'{"price": 2}', b'{"price": 9}'], partition=0)
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()

    def seen(config: KafkaClientConfig, topic: str, n: int) -> set[tuple[str, int]]:
        return {(d["subscription"], d["offset"]) for d in notification_docs(config, topic, n)}

    assert seen(as_acme, f"{topics.notifications}.acme", 1) == {("x", 0)}
    assert seen(as_beta, f"{topics.notifications}.beta", 2) == {("x", 1), ("x", 3)}
    assert consume_all(kafka_config, topics.notifications) == []  # the operator's topic: nobody's
    errors = notification_docs(as_acme, f"{topics.errors}.acme", 1)
    assert len(errors) == 1 and "a3" in errors[0]["reason"] and "quota of 2" in errors[0]["reason"]
    assert errors[0]["topic"] == acme
    assert consume_all(as_beta, f"{topics.errors}.beta") == []
    assert consume_all(kafka_config, topics.errors) == []
    assert sorted(job.registry.live().column("id").to_pylist()) == ["acme:a2", "beta:x"]  # nothing "planted"
    usage = (read_status(settings.status.status_file) or {})["tenants"]
    assert usage["acme"]["subscriptions"] == 1 and usage["beta"] == {
        "subscriptions": 1, "predicates": 1, "patterns": 0, "pattern_instances": 0,
        "quotas": {"subscriptions": 2, "predicates": 0, "patterns": 0, "pattern_instances": 0}}
    # acme's consumers, both clients, are refused beta's notifications and subscriptions by the broker
    for topic in (f"{topics.notifications}.beta", beta):
        assert isinstance(read_refusal(as_acme, topic), TopicAuthorizationFailedError)
        assert "TOPIC_AUTHORIZATION_FAILED" in rdkafka_read_refusal(as_acme, topic, "acme-reader")
    assert who.service_refusals(kafka_security) == []  # the ACLs of docs/service.md are all it needs
    assert kafka_security.refusals(since, who.names["producer"]) == []
    # the service reads every subscriptions topic but writes none: it cannot forge a subscription
    with pytest.raises(TopicAuthorizationFailedError):
        produce(who.service, acme, [upsert("forged", "price > 0")])
    assert end_offset(kafka_config, acme) == 5  # acme's three and its delete and tombstone
    refused = kafka_security.refusals(since)

    def denied(who: str, operation: str, topic: str, request: str) -> bool:
        return any(f"Principal = {who} is Denied operation = {operation} " in line
                   and f"on resource = Topic:LITERAL:{topic} for request = {request} " in line for line in refused)

    # beta may not even see acme's topic (no DESCRIBE): its metadata request is refused
    assert denied(who.names["beta"], "DESCRIBE", acme, "Metadata"), refused
    assert denied(who.names["service"], "WRITE", acme, "Produce"), refused
    for topic in (f"{topics.notifications}.beta", beta):
        assert denied(who.names["acme"], "DESCRIBE", topic, "Metadata"), refused


def test_a_tenant_added_by_a_restart_is_read_from_its_first_record(
    spark: Any, kafka_config: KafkaClientConfig, security: SecuredKafka | None, topic_factory: Any, tmp_path: Path
):
    topics = make_topics(topic_factory, event_partitions=1)
    first = service_settings(topics, tmp_path, kafka_config.bootstrap_servers).replace(tenants={"names": "acme"})
    both = first.replace(tenants={"names": "acme,beta"})
    tenants = Tenants.of(both)
    assert tenants is not None
    ensure_topics(kafka_config, tenants.topic_partitions(both))
    who = principals(security, both, kafka_config)
    produce(kafka_config, f"{topics.subscriptions}.acme", [upsert("x", "price < 5")])
    produce(kafka_config, f"{topics.subscriptions}.beta", [upsert("x", "price > 5")])  # before beta is served
    for settings, event in ((first, b'{"price": 8}'), (both, b'{"price": 9}')):
        query = MatchJob(settings, spark, who.service).start()
        try:
            query.processAllAvailable()
            produce(kafka_config, topics.events, [event], partition=0)
            query.processAllAvailable()
            assert query.exception() is None
        finally:
            query.stop()
    assert {d["offset"] for d in notification_docs(kafka_config, f"{topics.notifications}.beta", 1)} == {1}
    assert consume_all(kafka_config, f"{topics.notifications}.acme") == []
    assert who.service_refusals(security) == []


def test_a_tenants_patterns_notify_its_topic_within_its_quota(
    spark: Any, kafka_config: KafkaClientConfig, security: SecuredKafka | None, topic_factory: Any, tmp_path: Path
):
    topics = make_topics(topic_factory, event_partitions=1)
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers).replace(
        tenants={"names": "acme,beta", "patterns": 1})
    tenants = Tenants.of(settings)
    assert tenants is not None
    ensure_topics(kafka_config, tenants.topic_partitions(settings))
    who = principals(security, settings, kafka_config)
    s3 = TABLE1["S3"]
    acme, beta = (f"{topics.subscriptions}.{t}" for t in ("acme", "beta"))
    # the same id "p" for acme, beta and the operator; acme's "q" is past its quota of 1 pattern
    produce(kafka_config, acme, [pattern("p", s3), pattern("q", s3)])
    produce(kafka_config, beta, [pattern("p", s3)])
    produce(kafka_config, topics.subscriptions, [pattern("p", s3)])
    drain(MatchJob(settings, spark, who.service).start())  # the match query registers the patterns
    events = stock_ticks(60, 2)
    produce(kafka_config, topics.events, [event_json(e) for e in events] + [heartbeat(events[-1].t1)], partition=0)
    expected = {w for sub, w in ((k[1], k[5]) for k in reference_matches({"p": s3}, events)) if sub == "p"}
    assert expected
    query = start_patterns_query(spark, settings, who.service)
    try:
        query.processAllAvailable()
        got = {t: notification_docs(kafka_config, f"{topics.notifications}{t}", len(expected), timeout=240)
               for t in (".acme", ".beta", "")}
        assert query.exception() is None
    finally:
        query.stop()
    for docs in got.values():  # each notified on its own topic, naming its own id
        assert {(d["subscription"], tuple(d["witness"]["events"])) for d in docs} == {("p", w) for w in expected}
    errors = notification_docs(kafka_config, f"{topics.errors}.acme", 1)
    assert len(errors) == 1 and "subscription 'q' refused: tenant 'acme' would hold 2 patterns" in errors[0]["reason"]
    assert consume_all(kafka_config, f"{topics.errors}.beta") == []
    usage = tenant_usage(tenants, {}, MatchJob(settings, spark, who.service).pattern_ids())
    assert usage["acme"]["patterns"] == 1 and usage["beta"]["patterns"] == 1
    assert who.service_refusals(security) == []  # the patterns query needs no more ACLs either


def test_a_tenant_at_its_pattern_instances_quota_starts_no_new_instances_and_is_told_once(
    spark: Any, kafka_config: KafkaClientConfig, security: SecuredKafka | None, topic_factory: Any, tmp_path: Path
):
    """acme (quota: 2 live instances) and beta hold the same pattern. Three runs in flight put
    acme past its quota: one error record on errors.acme; in the next batch acme's runs in
    flight complete but its new opens start none, while beta matches them all; once acme's
    runs are done it starts again."""
    topics = make_topics(topic_factory, event_partitions=1)
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers).replace(
        tenants={"names": "acme,beta", "quotas": {"acme.pattern_instances": 2}})
    tenants = Tenants.of(settings)
    assert tenants is not None
    ensure_topics(kafka_config, tenants.topic_partitions(settings))
    who = principals(security, settings, kafka_config)
    for t in ("acme", "beta"):
        produce(kafka_config, f"{topics.subscriptions}.{t}", [pattern("p", "Open NEXT{$2.name = $1.name} Close")])
    drain(MatchJob(settings, spark, who.service).start())  # the match query registers the patterns

    def ev(kind: str, name: str, ts: int) -> bytes:
        return orjson.dumps({"id": f"{kind}-{name}", "stream": kind, "ts": ts, "name": name})

    phases = [
        [ev("Open", n, ts) for ts, n in enumerate("abc", 1)] + [heartbeat(3)],  # 3 runs each: acme at its quota
        [ev("Open", "d", 10), ev("Open", "e", 11)] + [ev("Close", n, ts) for ts, n in enumerate("abcde", 12)],
        [ev("Open", "f", 20), ev("Close", "f", 21)],  # acme's runs are done: it starts again
    ]
    query = start_patterns_query(spark, settings, who.service)
    try:
        for events in phases:
            produce(kafka_config, topics.events, events, partition=0)
            query.processAllAvailable()
        beta = notification_docs(kafka_config, f"{topics.notifications}.beta", 6, timeout=120)
        assert query.exception() is None
    finally:
        query.stop()
    assert {d["witness"]["events"][0] for d in beta} == {f"Open-{n}" for n in "abcdef"}
    acme = notification_docs(kafka_config, f"{topics.notifications}.acme")
    assert sorted(d["witness"]["events"][0] for d in acme) == [f"Open-{n}" for n in "abcf"]
    (err,) = notification_docs(kafka_config, f"{topics.errors}.acme", 1)  # one, not one per refused run
    assert err["stage"] == "pattern-quota"
    assert "tenant 'acme' holds 3 live pattern instances, at or past its quota of 2" in err["reason"]
    assert consume_all(kafka_config, f"{topics.errors}.beta") == [] and consume_all(kafka_config, topics.errors) == []
    assert who.service_refusals(security) == []


def test_a_subscription_notifies_the_target_topic_it_names_within_its_tenants_prefix(
    spark: Any, kafka_config: KafkaClientConfig, security: SecuredKafka | None, topic_factory: Any, tmp_path: Path
):
    topics = make_topics(topic_factory, event_partitions=1)
    settings = service_settings(topics, tmp_path, kafka_config.bootstrap_servers).replace(
        tenants={"names": "acme,beta"})
    tenants = Tenants.of(settings)
    assert tenants is not None
    orders, beta_topic = f"{topics.notifications}.acme.orders", f"{topics.notifications}.beta"
    ensure_topics(kafka_config, {**tenants.topic_partitions(settings), orders: 1})
    who = principals(security, settings, kafka_config)
    acme = f"{topics.subscriptions}.acme"
    produce(kafka_config, acme, [
        ("x", orjson.dumps({"id": "x", "expr": "price < 5", "target": orders})),
        ("y", orjson.dumps({"id": "y", "expr": "price < 5", "target": beta_topic})),  # beta's topic: refused
        ("z", orjson.dumps({"id": "z", "expr": "price < 5", "target": f"{orders}-missing"})),  # no such topic
        ("w", orjson.dumps({"id": "w", "expr": "price > 5"})),
    ])
    job = MatchJob(settings, spark, who.service)
    query = job.start()
    try:
        query.processAllAvailable()
        produce(kafka_config, topics.events, [b'{"price": 3}', b'{"price": 8}'], partition=0)
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    # acme reads its target topic through its PREFIXED ACL on notifications.acme.
    assert [(d["subscription"], d["offset"]) for d in notification_docs(who.tenants["acme"], orders, 1)] == [("x", 0)]
    assert [(d["subscription"], d["offset"]) for d in notification_docs(
        kafka_config, f"{topics.notifications}.acme", 1)] == [("w", 1)]
    assert consume_all(kafka_config, beta_topic) == [] and consume_all(kafka_config, topics.notifications) == []
    reasons = {d["key"]: d["reason"] for d in notification_docs(kafka_config, f"{topics.errors}.acme", 2)}
    assert set(reasons) == {"y", "z"}
    assert "not allowed to tenant 'acme'" in reasons["y"] and "does not exist" in reasons["z"]
    assert sorted(job.registry.live().column("id").to_pylist()) == ["acme:w", f"acme>{orders}:x"]
    assert who.service_refusals(security) == []  # it saw the target topic, and wrote to it
