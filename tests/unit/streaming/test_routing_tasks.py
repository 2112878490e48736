"""Match tasks with ``match.route_by`` (issue 29): the tasks of a batch, shards of routed
subscriptions matching only the events their route values hash into, send the oracle's
notifications, each error once, and shard 0 still counts every event and keeps every valid one;
the same after churn that moves ids between values (indexes caught up); the settings are checked."""

from __future__ import annotations

import random

import orjson
import pytest

from matchers.events import flatten
from matchers.oracle import match as oracle_match
from streaming import routing
from streaming.config import ConfigError, Settings
from streaming.config_sources import load
from streaming.kafka.offsets import OffsetRange
from streaming.match import BatchContext, match_ranges, plan_tasks
from streaming.match.tasks import TaskResult
from streaming.records import default_parser
from streaming.validity import decode
from tests.strategies import random_event, random_subscriptions

from .helpers import NO_KAFKA, ModelRegistry, kafka_batch

pytestmark = pytest.mark.usefixtures("empty_cache")
PARSE = default_parser()
REGIONS = ["eu", "us", "ap", 1, 2.0, "1", True]


def _routed(rng: random.Random, sub_id: str):
    region = rng.choice(REGIONS)
    lit = f"'{region}'" if isinstance(region, str) else str(region).lower()
    other = rng.choice(["", f" AND price > {rng.randrange(8)}", f" OR (region = {lit} AND price < 3)"])
    return PARSE({"id": sub_id, "expr": f"region = {lit}{other}"}, 256)


def _subscriptions(rng: random.Random, n: int, unrouted: int) -> list:
    plain = random_subscriptions(rng, unrouted)
    return [_routed(rng, f"r{i}") for i in range(n)] + [s.__class__(f"u{i}", s.expr, s.conjunctions, s.expires)
                                                         for i, s in enumerate(plain)]


def _events(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        e = random_event(rng)
        e["price"] = rng.randrange(10)
        if i % 7:
            e["region"] = rng.choice([*REGIONS, ["eu", 1]])
        if i % 4 == 0:
            e["valid_until"] = 500
        out.append(e)
    return out


def _run(tmp_path, monkeypatch, shards: int, spread: int, unrouted: int, steps: int = 3):
    from streaming.match import executor
    rng = random.Random(shards * 10 + spread + unrouted)
    route = routing.Routing("region", spread)
    settings = Settings().replace(spark={"checkpoint_dir": str(tmp_path)},
                                  match={"shards": shards, "route_by": "region", "route_spread": spread})
    reg = ModelRegistry(settings.registry_columns_dir, shards=shards, routing=route)
    subs = _subscriptions(rng, 80, unrouted)
    reg.apply(0, subs)
    selected: list[int] = []
    real_select = routing.select_events

    def select(batch, events):
        selected.append(len(events))
        return real_select(batch, events)

    monkeypatch.setattr(routing, "select_events", select)
    for step in range(steps):
        if step:  # churn: ids move between values, become unrouted or routed, leave
            live = sorted(reg.subscriptions)
            changes: list = [_routed(rng, rng.choice(live)) for _ in range(10)]
            changes += [rng.choice(live) for _ in range(3)]
            changes += [s.__class__(rng.choice(live), s.expr, s.conjunctions, s.expires)
                        for s in random_subscriptions(rng, 2)]
            reg.apply(step, changes)
        events = _events(rng, 120)
        raw = [orjson.dumps(e) for e in events]
        raw[5] = b"{broken"
        log = {("events", p): raw[p::2] for p in (0, 1)}
        monkeypatch.setattr(executor, "read_range", lambda consumer, r, log=log: iter([kafka_batch(
            log[r.topic, r.partition][r.start:r.end], r.topic, r.partition, r.start)]))
        ctx = BatchContext.of(settings, step + 1, 100.0, reg.spec(shards=shards, routing=route), NO_KAFKA)
        sent: list[dict] = []

        def produce(batches, sent=sent):
            before = len(sent)
            sent.extend(r for rb in batches for r in rb.to_pylist())
            return len(sent) - before

        todo = plan_tasks([OffsetRange("events", p, 0, 60) for p in (0, 1)], shards, 4, 20)
        out = [r for i in range(len(todo)) for r in match_ranges(iter([i]), ctx, todo, produce)]
        current = list(reg.subscriptions.values())
        got = [(r["key"].decode(), orjson.loads(r["value"])["partition"], orjson.loads(r["value"])["offset"])
               for r in sent if r["topic"] == "notifications"]
        want = {(sid, i % 2, i // 2) for i, e in enumerate(events) if i != 5
                for sid in oracle_match(current, flatten(e))}
        assert sorted(got) == sorted(want) and len(got) == len(set(got)), (shards, spread, step)
        assert [orjson.loads(r["value"])["offset"] for r in sent if r["topic"] == "errors"] == [2]
        results = [TaskResult.from_row(r) for r in out]
        assert sum(r.metrics.events for r in results) == 119 and sum(r.metrics.errors for r in results) == 1
        valid = [e for r in out for e in decode(r["valid_events"])]
        assert len(valid) == sum(1 for i, _ in enumerate(events) if i % 4 == 0 and i != 5)
    return selected


@pytest.mark.parametrize(("shards", "spread", "unrouted"), [(1, 1, 0), (4, 1, 2), (4, 2, 0), (8, 3, 3), (3, 1, 40)])
def test_routed_tasks_send_the_oracle_notifications(tmp_path, monkeypatch, shards, spread, unrouted):
    selected = _run(tmp_path, monkeypatch, shards, spread, unrouted)
    if unrouted < shards and spread < shards:
        assert selected  # some shard matched only some events


def test_route_settings_are_checked():
    s = load(None, ["match.route_by=region", "match.route_spread=2"], {})
    assert (s.match.route_by, s.match.route_spread) == ("region", 2)
    assert load(None, [], {}).match.route_by == "" and load(None, [], {}).match.route_spread == 1
    for bad in ("match.route_spread=0", "match.route_spread=x", "match.route_by= region"):
        with pytest.raises(ConfigError, match="route"):
            load(None, ["match.route_by=region", bad] if "spread" in bad else [bad], {})
    with pytest.raises(ConfigError, match="match.route_spread needs match.route_by"):
        load(None, ["match.route_spread=2"], {})
