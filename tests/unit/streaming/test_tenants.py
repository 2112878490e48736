"""Tenants: ids namespaced by the topic a record came from, routing, quotas (streaming.tenants)."""

from __future__ import annotations

import orjson
import pytest

from streaming import executor_cache
from streaming.config import ConfigError, Settings, load
from streaming.match_job import (
    BatchContext,
    RegistryBroadcast,
    apply_changes,
    match_partition,
    retro_notifications,
)
from streaming.records import default_parser
from streaming.registry import Registry
from streaming.tenants import Admission, Tenants, topic_of, usage_of
from streaming.validity import ValidEvent

from .helpers import NO_KAFKA, LocalBroadcast, kafka_batch

PARSE = default_parser()


@pytest.fixture(autouse=True)
def empty_cache():
    executor_cache.clear()
    yield
    executor_cache.clear()


def settings_for(tmp_path, **tenants):
    return Settings().replace(spark={"checkpoint_dir": str(tmp_path)},
                              tenants={"names": "acme,beta", **tenants})


def rows_of(*records):
    """``(key, value, topic, partition, offset)`` rows of ``(topic, record)`` pairs (offsets per topic)."""
    out, offsets = [], {}
    for topic, record in records:
        offset = offsets[topic] = offsets.get(topic, -1) + 1
        out.append((record["id"].encode(), orjson.dumps(record), topic, 0, offset))
    return out


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
    assert s.tenants.quota_table() == {"acme": {"subscriptions": 3, "predicates": 0},
                                       "beta": {"subscriptions": 5, "predicates": 7}}
    with pytest.raises(ConfigError, match="tenants.names"):
        load(None, ["tenants.names=a.b"], environ={})
    with pytest.raises(ConfigError, match="tenants.quotas"):
        load(None, ["tenants.names=acme", "tenants.quotas.zeta.subscriptions=1"], environ={})
    with pytest.raises(ConfigError, match="tenants.quotas"):
        load(None, ["tenants.names=acme", "tenants.quotas.acme.patterns=1"], environ={})


def test_a_tenant_cannot_touch_another_tenants_subscription_of_the_same_id(tmp_path):
    settings = settings_for(tmp_path)
    reg, gate = Registry(settings.registry_dir), Admission(Tenants.of(settings))
    out = apply_changes(reg, 0, rows_of(("subscriptions.acme", {"id": "x", "expr": "price < 5"}),
                                        ("subscriptions.beta", {"id": "x", "expr": "price > 5"}),
                                        ("subscriptions", {"id": "x", "expr": "price = 5"})),
                        PARSE, 256, 1.0, admission=gate)
    assert out.errors == [] and set(reg.subscriptions) == {"acme:x", "beta:x", "x"}
    # acme replaces and then deletes its x: beta's x and the operator's x stay as they were
    apply_changes(reg, 1, rows_of(("subscriptions.acme", {"id": "x", "expr": "price < 1"}),
                                  ("subscriptions.acme", {"op": "delete", "id": "x"})), PARSE, 256, 2.0,
                  admission=gate)
    assert set(reg.subscriptions) == {"beta:x", "x"}
    assert str(reg.subscriptions["beta:x"].expr) == str(PARSE({"id": "x", "expr": "price > 5"}, 256).expr)
    # a tombstone on acme's topic deletes acme's id only
    apply_changes(reg, 2, [(b"x", None, "subscriptions.acme", 0, 9)], PARSE, 256, 3.0, admission=gate)
    assert set(reg.subscriptions) == {"beta:x", "x"}


def test_quotas_refuse_one_tenant_and_leave_the_others_alone(tmp_path):
    settings = settings_for(tmp_path, subscriptions=2, quotas={"beta.predicates": 3})
    reg, gate = Registry(settings.registry_dir), Admission(Tenants.of(settings))
    records = [("subscriptions.acme", {"id": f"a{i}", "expr": "price < 5"}) for i in range(4)]
    records += [("subscriptions.beta", {"id": "b0", "expr": "price < 5 AND qty > 1"}),
                ("subscriptions.beta", {"id": "b1", "expr": "price < 5 AND qty > 1"})]  # 4 predicates > 3
    records += [("subscriptions", {"id": f"op{i}", "expr": "price < 5"}) for i in range(3)]
    out = apply_changes(reg, 0, rows_of(*records), PARSE, 256, 1.0, admission=gate)
    refused = {(e.position.topic, e.position.offset): e.reason for e in out.errors}
    assert set(refused) == {("subscriptions.acme", 2), ("subscriptions.acme", 3), ("subscriptions.beta", 1)}
    assert "past its quota of 2" in refused[("subscriptions.acme", 2)]
    assert "4 predicates" in refused[("subscriptions.beta", 1)]
    assert set(reg.subscriptions) == {"acme:a0", "acme:a1", "beta:b0", "op0", "op1", "op2"}
    assert gate.describe(reg)["acme"] == {"subscriptions": 2, "predicates": 2, "quotas": {"subscriptions": 2, "predicates": 0}} and gate.usage == usage_of(reg.subscriptions.items())
    # replacing a held subscription is no new one; a delete frees room for the next
    out = apply_changes(reg, 1, rows_of(("subscriptions.acme", {"id": "a1", "expr": "price < 6"}),
                                        ("subscriptions.acme", {"op": "delete", "id": "a0"}),
                                        ("subscriptions.acme", {"id": "a2", "expr": "price < 5"}),
                                        ("subscriptions.acme", {"id": "a3", "expr": "price < 5"})),
                        PARSE, 256, 2.0, admission=gate)
    assert [e.position.offset for e in out.errors] == [3]
    assert {i for i in reg.subscriptions if i.startswith("acme:")} == {"acme:a1", "acme:a2"}
    # a replay refuses what it refused the first time; a new gate (a restart) counts from the registry
    again = apply_changes(Registry(settings.registry_dir), 1, rows_of(
        ("subscriptions.acme", {"id": "a1", "expr": "price < 6"}), ("subscriptions.acme", {"op": "delete", "id": "a0"}),
        ("subscriptions.acme", {"id": "a2", "expr": "price < 5"}), ("subscriptions.acme", {"id": "a3", "expr": "price < 5"})),
        PARSE, 256, 9.0, admission=Admission(Tenants.of(settings)))
    assert again.replay and [e.position.offset for e in again.errors] == [3]
    fresh = Admission(Tenants.of(settings))
    out = apply_changes(reg, 2, rows_of(("subscriptions.acme", {"id": "a4", "expr": "price < 5"})), PARSE, 256, 3.0,
                        admission=fresh)
    assert len(out.errors) == 1 and fresh.usage["acme"] == [2, 2]


def test_a_tenants_pattern_record_is_refused(tmp_path):
    settings = settings_for(tmp_path)
    reg, gate = Registry(settings.registry_dir), Admission(Tenants.of(settings))
    out = apply_changes(reg, 0, rows_of(("subscriptions.acme", {"id": "p", "pattern": "x"})), PARSE, 256, 1.0,
                        admission=gate)
    assert len(out.errors) == 1 and "operator only" in out.errors[0].reason and out.delta is None


def test_notifications_go_to_the_tenants_topic_with_its_own_id(tmp_path):
    settings = settings_for(tmp_path)
    reg, gate = Registry(settings.registry_dir), Admission(Tenants.of(settings))
    apply_changes(reg, 0, rows_of(("subscriptions.acme", {"id": "x", "expr": "price < 5"}),
                                  ("subscriptions.beta", {"id": "x", "expr": "price > 5"}),
                                  ("subscriptions", {"id": "x", "expr": "price > 0"})), PARSE, 256, 1.0, admission=gate)
    spec = RegistryBroadcast(LocalBroadcast).spec(reg, "counting", reg.version, 20)
    ctx = BatchContext.of(settings, 1, 1.0, spec, NO_KAFKA)
    sent: list[dict] = []
    list(match_partition(iter([kafka_batch([b'{"price": 3}', b'{"price": 8}', b"nope"])]), ctx,
                         lambda out: sent.extend(r for rb in out for r in rb.to_pylist()) or 0))
    got = sorted((r["topic"], r["key"], orjson.loads(r["value"]).get("offset")) for r in sent)
    assert got == [("errors", None, 2), ("notifications", b"x", 0), ("notifications", b"x", 1),
                   ("notifications.acme", b"x", 0), ("notifications.beta", b"x", 1)]
    assert all(orjson.loads(r["value"]).get("subscription") in (None, "x") for r in sent)
    retro, _ = retro_notifications("counting", list(reg.subscriptions.values()),
                                   [ValidEvent("events", 0, 5, None, 9.0, "e", b'{"price": 3}')], 2, "event",
                                   tenants=Tenants.of(settings))
    assert sorted(sid for sid, _ in retro) == ["acme:x", "x"]
    assert {orjson.loads(v)["subscription"] for _, v in retro} == {"x"}
