"""Tenants: ids namespaced by the topic a record came from, routing, quotas (streaming.tenants)."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest

from streaming.config import ConfigError, Settings
from streaming.config_sources import load
from streaming.executor_cache import IndexSpec
from streaming.match import BatchContext, match_partition, retro_notifications
from streaming.match.changes import RECORD_SCHEMA, records_table
from streaming.match.job import tenant_usage
from streaming.records import default_parser
from streaming.registry_columns import EXPRESSION, PATTERN, ColumnRegistry, read_shard
from streaming.registry_columns.shards import subscriptions
from streaming.tenants import Tenants, topic_of
from streaming.validity import ValidEvent

from .helpers import NO_KAFKA, kafka_batch, record_batch

PARSE = default_parser()
EXISTS = {"notifications.acme.orders", "notifications.acme.audit", "notifications.beta.x", "elsewhere"}.__contains__
"""The topics the broker of these tests has (besides the tenants' own)."""


pytestmark = pytest.mark.usefixtures("empty_cache")


def settings_for(tmp_path, **tenants):
    return Settings().replace(spark={"checkpoint_dir": str(tmp_path)},
                              tenants={"names": "acme,beta", **tenants})


def rows_of(*records):
    """Subscription records (the driver's Arrow columns) of ``(topic, record)`` pairs (offsets per topic)."""
    rows, offsets = [], {}
    for topic, record in records:
        offset = offsets[topic] = offsets.get(topic, -1) + 1
        rows.append((record["id"].encode(), orjson.dumps(record), topic, 0, offset))
    return pa.table(list(zip(*rows, strict=True)), schema=RECORD_SCHEMA)


def tombstone(topic, key, offset):
    """A record with a key and no value on ``topic``."""
    return pa.table([[key], [None], [topic], [0], [offset]], schema=RECORD_SCHEMA)


def test_layout_and_ids(tmp_path):
    t = Tenants.of(settings_for(tmp_path))
    assert Tenants.of(Settings()) is None  # the single-tenant layout by default
    assert t.subscription_topics == ("subscriptions", "subscriptions.acme", "subscriptions.beta")
    assert t.tenant_of_topic("subscriptions.acme") == "acme" and t.tenant_of_topic("subscriptions.zeta") == ""
    assert t.errors_topic_of("subscriptions.beta") == "errors.beta" and t.errors_topic_of("subscriptions") == "errors"
    for tenant, sub_id in [("acme", "x"), ("acme", "a:b"), ("", "x"), ("", "acme:x"), ("", ":y")]:
        internal = t.internal(tenant, sub_id)
        assert t.split(internal) == (tenant, sub_id)
    assert t.internal("", "x") == "x"  # the operator's ids are those of the single-tenant layout
    assert t.internal("", "acme:x") != t.internal("acme", "x")
    assert t.route(t.internal("beta", "x")) == ("notifications.beta", "x")
    assert t.topic_partitions(settings_for(tmp_path))["notifications.acme"] == 2
    assert topic_of("errors", "acme") == "errors.acme" and topic_of("errors", "") == "errors"


def test_config_quotas_and_names():
    s = load(None, ["tenants.names=acme,beta", "tenants.subscriptions=5", "tenants.quotas.beta.predicates=7"],
             environ={"PUBSUB_TENANTS_QUOTAS_ACME_SUBSCRIPTIONS": "3"})
    assert s.tenants.quota_table() == {
        "acme": {"subscriptions": 3, "predicates": 0, "patterns": 0, "pattern_instances": 0},
        "beta": {"subscriptions": 5, "predicates": 7, "patterns": 0, "pattern_instances": 0}}
    s = load(None, ["tenants.names=acme,beta", "tenants.pattern_instances=100"],
             environ={"PUBSUB_TENANTS_QUOTAS_ACME_PATTERN_INSTANCES": "3", "PUBSUB_TENANTS_QUOTAS_ACME_PATTERNS": "2"})
    assert [s.tenants.quota_table()[t]["pattern_instances"] for t in ("acme", "beta")] == [3, 100]
    assert s.tenants.quota_table()["acme"]["patterns"] == 2
    s = load(None, ["tenants.names=acme,beta", "tenants.patterns=2", "tenants.targets.beta=beta-out."], environ={})
    assert s.tenants.quota_table()["acme"]["patterns"] == 2
    assert s.tenants.target_prefixes("notifications") == {"acme": "notifications.acme.", "beta": "beta-out."}
    with pytest.raises(ConfigError, match="tenants.names"):
        load(None, ["tenants.names=a.b"], environ={})
    with pytest.raises(ConfigError, match="tenants.quotas"):
        load(None, ["tenants.names=acme", "tenants.quotas.zeta.subscriptions=1"], environ={})
    with pytest.raises(ConfigError, match="tenants.quotas"):
        load(None, ["tenants.names=acme", "tenants.quotas.acme.instances=1"], environ={})
    with pytest.raises(ConfigError, match="tenants.targets"):
        load(None, ["tenants.names=acme", "tenants.targets.zeta=z."], environ={})
    with pytest.raises(ConfigError, match="tenants.targets.acme"):
        load(None, ["tenants.names=acme", "tenants.targets.acme=a:b"], environ={})
    with pytest.raises(ConfigError, match="covers tenant 'beta'"):
        load(None, ["tenants.names=acme,beta", "tenants.targets.acme=notifications."], environ={})


def live(registry):
    return set(registry.live().column("id").to_pylist())


def errors_of(admitted):
    """The error records of a batch, decoded, each with the errors topic it goes to."""
    return [{**orjson.loads(v), "to": t} for v, t in zip(admitted.errors.column("value").to_pylist(),
                                                          admitted.errors.column("topic").to_pylist(), strict=True)]


def stored(registry):
    """The expressions of the registry's latest version, parsed back from its files."""
    return {s.id: s for s in subscriptions(read_shard(registry.directory, registry.version))}


def test_a_tenant_cannot_touch_another_tenants_subscription_of_the_same_id(tmp_path):
    settings = settings_for(tmp_path)
    t, reg = Tenants.of(settings), ColumnRegistry(settings.registry_columns_dir)
    _, _, out = record_batch(reg, 0, rows_of(("subscriptions.acme", {"id": "x", "expr": "price < 5"}),
                                             ("subscriptions.beta", {"id": "x", "expr": "price > 5"}),
                                             ("subscriptions", {"id": "x", "expr": "price = 5"})), 1.0, t, EXISTS)
    assert out.errors.num_rows == 0 and live(reg) == {"acme:x", "beta:x", "x"}
    # acme replaces and then deletes its x: beta's x and the operator's x stay as they were
    record_batch(reg, 1, rows_of(("subscriptions.acme", {"id": "x", "expr": "price < 1"}),
                                 ("subscriptions.acme", {"op": "delete", "id": "x"})), 2.0, t, EXISTS)
    assert live(reg) == {"beta:x", "x"}
    assert str(stored(reg)["beta:x"].expr) == str(PARSE({"id": "x", "expr": "price > 5"}, 256).expr)
    # a tombstone on acme's topic deletes acme's id only
    record_batch(reg, 2, tombstone("subscriptions.acme", b"x", 9), 3.0, t, EXISTS)
    assert live(reg) == {"beta:x", "x"}


def test_quotas_refuse_one_tenant_and_leave_the_others_alone(tmp_path):
    settings = settings_for(tmp_path, subscriptions=2, quotas={"beta.predicates": 3})
    t, reg = Tenants.of(settings), ColumnRegistry(settings.registry_columns_dir)
    records = [("subscriptions.acme", {"id": f"a{i}", "expr": "price < 5"}) for i in range(4)]
    records += [("subscriptions.beta", {"id": "b0", "expr": "price < 5 AND qty > 1"}),
                ("subscriptions.beta", {"id": "b1", "expr": "price < 5 AND qty > 1"})]  # 4 predicates > 3
    records += [("subscriptions", {"id": f"op{i}", "expr": "price < 5"}) for i in range(3)]
    _, _, out = record_batch(reg, 0, rows_of(*records), 1.0, t, EXISTS)
    refused = {(e["topic"], e["offset"]): e for e in errors_of(out)}
    assert set(refused) == {("subscriptions.acme", 2), ("subscriptions.acme", 3), ("subscriptions.beta", 1)}
    assert "past its quota of 2" in refused[("subscriptions.acme", 2)]["reason"]
    assert "4 predicates" in refused[("subscriptions.beta", 1)]["reason"]
    assert refused[("subscriptions.beta", 1)]["to"] == "errors.beta"
    assert live(reg) == {"acme:a0", "acme:a1", "beta:b0", "op0", "op1", "op2"}
    assert tenant_usage(t, reg.held(), ["acme:p", "beta:p", "p"], {"acme": 4, "": 9})["acme"] == {
        "subscriptions": 2, "predicates": 2, "patterns": 1, "pattern_instances": 4,
        "quotas": {"subscriptions": 2, "predicates": 0, "patterns": 0, "pattern_instances": 0}}
    # replacing a held subscription is no new one; a delete frees room for the next
    second = rows_of(("subscriptions.acme", {"id": "a1", "expr": "price < 6"}),
                     ("subscriptions.acme", {"op": "delete", "id": "a0"}),
                     ("subscriptions.acme", {"id": "a2", "expr": "price < 5"}),
                     ("subscriptions.acme", {"id": "a3", "expr": "price < 5"}))
    _, _, out = record_batch(reg, 1, second, 2.0, t, EXISTS)
    assert [e["offset"] for e in errors_of(out)] == [3]
    assert {i for i in live(reg) if i.startswith("acme:")} == {"acme:a1", "acme:a2"}
    # a replay (after a restart) refuses what it refused the first time; the registry's columns count
    again, _, out = record_batch(ColumnRegistry(settings.registry_columns_dir), 1, second, 9.0, t, EXISTS)
    assert again.replay and out.replay and [e["offset"] for e in errors_of(out)] == [3]
    fresh = ColumnRegistry(settings.registry_columns_dir)
    _, _, out = record_batch(fresh, 2, rows_of(("subscriptions.acme", {"id": "a4", "expr": "price < 5"})), 3.0, t,
                             EXISTS)
    assert len(errors_of(out)) == 1 and fresh.held()[("acme", EXPRESSION)] == (2, 2)


def test_a_tenants_pattern_record_replaces_its_boolean_subscription_only(tmp_path):
    settings = settings_for(tmp_path)
    t, reg = Tenants.of(settings), ColumnRegistry(settings.registry_columns_dir)
    record_batch(reg, 0, rows_of(("subscriptions.acme", {"id": "p", "expr": "price < 5"}),
                                 ("subscriptions.beta", {"id": "p", "expr": "price < 5"})), 1.0, t, EXISTS)
    _, _, out = record_batch(reg, 1, rows_of(("subscriptions.acme", {"id": "p", "pattern": "x"})), 2.0, t, EXISTS)
    assert out.errors.num_rows == 0 and live(reg) == {"acme:p", "beta:p"}
    assert reg.lookup(["acme:p", "beta:p"]).tolist() == [PATTERN, EXPRESSION] and list(reg.pattern_view()) == ["acme:p"]


def test_notifications_go_to_the_tenants_topic_with_its_own_id(tmp_path):
    settings = settings_for(tmp_path)
    t, reg = Tenants.of(settings), ColumnRegistry(settings.registry_columns_dir)
    record_batch(reg, 0, rows_of(("subscriptions.acme", {"id": "x", "expr": "price < 5"}),
                                 ("subscriptions.beta", {"id": "x", "expr": "price > 5"}),
                                 ("subscriptions", {"id": "x", "expr": "price > 0"})), 1.0, t, EXISTS)
    ctx = BatchContext.of(settings, 1, 1.0, IndexSpec(reg.directory.uri, "counting", reg.version), NO_KAFKA)
    sent: list[dict] = []
    list(match_partition(iter([kafka_batch([b'{"price": 3}', b'{"price": 8}', b"nope"])]), ctx,
                         lambda out: sent.extend(r for rb in out for r in rb.to_pylist()) or 0))
    got = sorted((r["topic"], r["key"], orjson.loads(r["value"]).get("offset")) for r in sent)
    assert got == [("errors", None, 2), ("notifications", b"x", 0), ("notifications", b"x", 1),
                   ("notifications.acme", b"x", 0), ("notifications.beta", b"x", 1)]
    assert all(orjson.loads(r["value"]).get("subscription") in (None, "x") for r in sent)
    retro, _ = retro_notifications("counting", list(stored(reg).values()),
                                   [ValidEvent("events", 0, 5, None, 9.0, "e", b'{"price": 3}')], 2, "event",
                                   tenants=t)
    assert sorted(sid for sid, _ in retro) == ["acme:x", "x"]
    assert {orjson.loads(v)["subscription"] for _, v in retro} == {"x"}


def test_target_topics_within_the_tenants_prefix(tmp_path):
    settings = settings_for(tmp_path, subscriptions=2)
    t, reg = Tenants.of(settings), ColumnRegistry(settings.registry_columns_dir)
    records = [("subscriptions.acme", {"id": "x", "expr": "price < 5", "target": "notifications.acme.orders"}),
               ("subscriptions.beta", {"id": "x", "expr": "price < 5"}),
               ("subscriptions.acme", {"id": "b", "expr": "price < 5", "target": "notifications.beta.x"}),  # beta's
               ("subscriptions.acme", {"id": "c", "expr": "price < 5", "target": "elsewhere"}),
               ("subscriptions.acme", {"id": "d", "expr": "price < 5", "target": "notifications.acme.gone"}),
               ("subscriptions.acme", {"id": "e", "expr": "price < 5", "target": "notifications.acme."}),
               ("subscriptions.acme", {"id": "f", "expr": "price < 5", "target": 3}),
               ("subscriptions", {"id": "g", "expr": "price < 5", "target": "notifications.acme.orders"})]
    _, _, out = record_batch(reg, 0, rows_of(*records), 1.0, t, EXISTS)
    reasons = {e["key"]: e["reason"] for e in errors_of(out)}
    assert set(reasons) == {"b", "c", "d", "e", "f", "g"}
    assert "not allowed to tenant 'acme'" in reasons["b"] and "'notifications.acme.'" in reasons["c"]
    assert "does not exist" in reasons["d"] and "must be a topic name" in reasons["f"]
    assert "operator's subscriptions name no target" in reasons["g"]
    assert live(reg) == {"acme>notifications.acme.orders:x", "beta:x"}
    assert t.route("acme>notifications.acme.orders:x") == ("notifications.acme.orders", "x")
    assert t.split("acme>notifications.acme.orders:x") == ("acme", "x")
    # the same id with another target, then none, is one subscription; a delete reaches it wherever it notifies
    record_batch(reg, 1, rows_of(("subscriptions.acme", {"id": "x", "expr": "price < 6",
                                                         "target": "notifications.acme.audit"})), 2.0, t, EXISTS)
    assert live(reg) == {"acme>notifications.acme.audit:x", "beta:x"}
    record_batch(reg, 2, rows_of(("subscriptions.acme", {"id": "x", "expr": "price < 6"})), 3.0, t, EXISTS)
    assert live(reg) == {"acme:x", "beta:x"}
    record_batch(reg, 3, rows_of(("subscriptions.acme", {"id": "x", "expr": "price < 6",
                                                         "target": "notifications.acme.orders"}),
                                 ("subscriptions.acme", {"id": "y", "expr": "price < 6"})), 4.0, t, EXISTS)
    assert reg.held()[("acme", EXPRESSION)] == (2, 2) and "acme>notifications.acme.orders:x" in live(reg)
    fresh = ColumnRegistry(settings.registry_columns_dir)  # a restart finds the target in the registry's ids
    _, _, out = record_batch(fresh, 4, pa.concat_tables([
        tombstone("subscriptions.acme", b"x", 0),
        records_table(kafka_batch([b'{"id": "z", "expr": "price < 6"}'], "subscriptions.acme", first_offset=1))]),
        5.0, t, EXISTS)
    assert out.errors.num_rows == 0 and live(fresh) == {"acme:y", "acme:z", "beta:x"}
    # the notifications of a targeted subscription go to its target, naming the tenant's id
    record_batch(fresh, 5, rows_of(("subscriptions.acme", {"id": "y", "expr": "price < 5",
                                                           "target": "notifications.acme.orders"})), 6.0, t, EXISTS)
    spec = IndexSpec(fresh.directory.uri, "counting", fresh.version)
    sent: list[dict] = []
    list(match_partition(iter([kafka_batch([b'{"price": 3}'])]), BatchContext.of(settings, 6, 6.0, spec, NO_KAFKA),
                         lambda out: sent.extend(r for rb in out for r in rb.to_pylist()) or 0))
    assert sorted((r["topic"], r["key"]) for r in sent) == [
        ("notifications.acme", b"z"), ("notifications.acme.orders", b"y"), ("notifications.beta", b"x")]


def test_single_tenant_layout_refuses_a_target_as_before(tmp_path):
    reg = ColumnRegistry(Settings().replace(spark={"checkpoint_dir": str(tmp_path)}).registry_columns_dir)
    _, _, out = record_batch(reg, 0, rows_of(("subscriptions", {"id": "x", "expr": "price < 5", "target": "t"})), 1.0)
    errors = errors_of(out)
    assert len(errors) == 1 and "unknown field 'target'" in errors[0]["reason"] and len(reg) == 0


def pattern_rows(*records):
    return [(r["id"].encode(), orjson.dumps(r), topic, 0, offset) for offset, (topic, r) in enumerate(records)]


def test_a_tenants_patterns_are_its_own_held_to_its_quota_and_notify_its_topic(tmp_path, monkeypatch):
    from streaming.match.changes import records_of, register_records
    from streaming.patterns.operator import PatternOperator
    from streaming.patterns.queries import registry_dir
    from tests.unit.cayuga.streams import TABLE1, stock_ticks
    from tests.unit.streaming.patterns.test_patterns import Part, _keyed, event_bytes, feed
    from tests.unit.streaming.patterns.test_patterns import event_time_ms as tick_ms

    settings = settings_for(tmp_path, quotas={"acme.patterns": 1})
    t, reg = Tenants.of(settings), ColumnRegistry(registry_dir(settings))
    s3 = TABLE1["S3"]
    rows = pattern_rows(("subscriptions.acme", {"id": "p", "pattern": s3}),
                        ("subscriptions.beta", {"id": "p", "pattern": s3}),
                        ("subscriptions.acme", {"id": "q", "pattern": s3}),  # past acme's quota of 1
                        ("subscriptions.acme", {"id": "p", "pattern": s3}),  # a replacement is no new pattern
                        ("subscriptions.beta", {"id": "r", "pattern": "("}),
                        ("subscriptions.beta", {"id": "s", "pattern": s3, "target": "notifications.beta.x"}),
                        ("subscriptions", {"id": "p", "pattern": s3}))
    applied, admitted = register_records(reg, 0, records_of(rows), 1.0, t)
    assert sorted(reg.pattern_view()) == ["acme:p", "beta:p", "p"]
    errors = admitted.errors.to_pylist()
    where = {(e["topic"], orjson.loads(e["value"])["key"]): orjson.loads(e["value"]) for e in errors}
    assert set(where) == {("errors.acme", "q"), ("errors.beta", "r"), ("errors.beta", "s")}
    assert {e["stage"] for e in where.values()} == {"pattern"}
    assert "subscription 'q' refused: tenant 'acme' would hold 2 patterns, past its quota of 1" in \
        where[("errors.acme", "q")]["reason"]
    assert "names no target" in where[("errors.beta", "s")]["reason"]
    again, replayed = register_records(reg, 0, records_of(rows), 5.0, t)  # a replay: the same refusals
    assert (again.version, again.replay) == (applied.version, True) and replayed.errors.equals(admitted.errors)
    # acme deletes its p (beta's stays); then q fits its quota
    register_records(reg, 1, records_of(pattern_rows(("subscriptions.acme", {"op": "delete", "id": "p"}),
                                                     ("subscriptions.acme", {"id": "q", "pattern": s3}))), 2.0, t)
    assert sorted(reg.pattern_view()) == ["acme:q", "beta:p", "p"]
    events = stock_ticks(60, 4)
    keyed, _ = _keyed([event_bytes(e) for e in events], settings, monkeypatch)
    out = feed(PatternOperator(registry_dir(settings), settings), Part(), keyed, tick_ms(events[-1].t1 + 1, 1000))
    got = {(r.topic, r.key, orjson.loads(r.value)["subscription"]) for r in out}
    assert got == {("notifications.acme", b"q", "q"), ("notifications.beta", b"p", "p"), ("notifications", b"p", "p")}


def test_each_tenant_counts_its_own_pattern_instances_and_one_at_its_quota_starts_none(tmp_path, monkeypatch):
    """acme and beta hold the same pattern: each has its own instances (never shared). With acme
    blocked (at its pattern_instances quota) for the second batch, acme's runs in flight complete
    and expire but none starts; beta's matches are the reference's, as if nothing happened."""
    from streaming.match.changes import records_of, register_records
    from streaming.patterns.operator import PatternOperator, live_instances
    from streaming.patterns.queries import registry_dir
    from tests.unit.cayuga.helpers import reference_matches
    from tests.unit.cayuga.streams import TABLE1, stock_ticks
    from tests.unit.streaming.patterns.test_patterns import _keyed, event_bytes
    from tests.unit.streaming.patterns.test_patterns import event_time_ms as tick_ms

    settings = settings_for(tmp_path, quotas={"acme.pattern_instances": 1})
    t = Tenants.of(settings)
    s3 = TABLE1["S3"]
    register_records(ColumnRegistry(registry_dir(settings)), 0, records_of(pattern_rows(
        ("subscriptions.acme", {"id": "p", "pattern": s3}), ("subscriptions.beta", {"id": "p", "pattern": s3}))),
        1.0, t)
    events = stock_ticks(80, 5)
    first, second = events[:40], events[40:]
    op, state = PatternOperator(registry_dir(settings), settings), {}
    got: dict[str, set] = {"notifications.acme": set(), "notifications.beta": set()}
    for batch, blocked in ((first, frozenset()), (second, frozenset({"acme"}))):
        keyed, _ = _keyed([event_bytes(e) for e in batch], settings, monkeypatch)
        events_of = {c: keyed[c].tolist() for c in keyed.columns}
        state, out = op.run(state, events_of, tick_ms(batch[-1].t1 + 1, 1000), blocked)
        for _, value, topic in out:
            got[topic].add(tuple(orjson.loads(value)["witness"]["events"]))
        live = live_instances(state)
        if batch is first:
            assert live["acme"] == live["beta"] > 1  # one instance each per symbol seen, not one shared
            assert t.at_instance_quota(live) == {"acme"}
    ref = {k[5] for k in reference_matches({"p": s3}, events)}
    started_first = {e.id for e in first}
    assert got["notifications.beta"] == ref
    assert got["notifications.acme"] == {w for w in ref if w[0] in started_first} != ref
    assert live["acme"] == 0 < live["beta"]  # every symbol came again: acme's runs all ended, none started
    assert t.at_instance_quota(live) == frozenset()  # so acme starts again in the next batch


def test_instance_quota_decision_and_one_error_per_crossing(tmp_path):
    from streaming.patterns.queries import PATTERN_QUOTA, instance_quota_errors

    t = Tenants.of(settings_for(tmp_path, pattern_instances=10, quotas={"beta.pattern_instances": 0}))
    assert t.quotas["acme"]["pattern_instances"] == 10 and t.quotas["beta"]["pattern_instances"] == 0
    assert t.at_instance_quota({"acme": 9, "beta": 10**9, "": 10**9}) == frozenset()  # beta: no bound
    assert t.at_instance_quota({"acme": 10}) == t.at_instance_quota({"acme": 11}) == {"acme"}
    # acme reaches it in batch 7: one record on its errors topic, naming the quota and the count
    (crossing,) = instance_quota_errors(t, "events", 7, frozenset(), {"acme": 12, "beta": 50})
    topic, err = crossing
    assert topic == "errors.acme" and err.stage == PATTERN_QUOTA
    assert "tenant 'acme' holds 12 live pattern instances, at or past its quota of 10" in err.reason
    assert "pattern_instances" in err.reason
    # the same batch replayed: the same record (same id); the next batches, still at it: none
    assert instance_quota_errors(t, "events", 7, frozenset(), {"acme": 12}) == [crossing]
    assert instance_quota_errors(t, "events", 8, frozenset({"acme"}), {"acme": 15}) == []
    # below it again, then at it again: a new crossing, a new record
    assert t.at_instance_quota({"acme": 3}) == frozenset()
    (again,) = instance_quota_errors(t, "events", 12, frozenset(), {"acme": 10})
    assert again[1].id != err.id


def test_the_live_instances_are_recorded_with_the_watermark_for_a_replay(tmp_path):
    from streaming.patterns.live import LiveRecord, add_changes

    store = LiveRecord(str(tmp_path / "live"))
    assert store.before(0) == (0, {}) and store.latest() == {}
    store.write(0, 5000, {"acme": 3, "": 7})
    store.write(1, 6000, add_changes({"acme": 3, "": 7}, [b'{"acme": 2, "": -7}', b'{"acme": -1}']))
    assert store.before(1) == (5000, {"acme": 3, "": 7})  # what batch 1 (first run or replay) decides from
    assert store.before(2) == (6000, {"acme": 4}) and store.latest() == {"acme": 4}
    for b in range(2, 6):
        store.write(b, 7000 + b, {"acme": b})
    assert sorted(store.dir.names()) == ["b000000000003", "b000000000004", "b000000000005"]  # the newest 3
    assert store.before(9) == (7005, {"acme": 5})
