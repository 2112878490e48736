"""Subscriptions routed to shards by an attribute's value (``match.route_by``, issue 29): a routed
registry's shards hold each expression where its route value (or, unrouted, its id) says, ids
move between shards as their expressions change, and the shards, built at any version or caught
up from an older one, matched only on the events whose route value hashes into them (shards of
routed subscriptions only), notify what the oracle says of all subscriptions, for 1 to 8 shards
and spreads 1 to 3; the routes the parse tasks find give the keys the driver computes."""

from __future__ import annotations

import pickle
import random
import zlib

import numpy as np
import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers import oracle
from matchers.catalog import create
from matchers.events import encode, flatten
from matchers.expr import Kind
from matchers.packed import pack
from matchers.translate import Translation, common_dictionary
from streaming import routing
from streaming.errors import RegistryError
from streaming.match.changes import RECORD_SCHEMA, parse_subscription_records
from streaming.records import default_parser
from streaming.registry_columns import (
    DELETE,
    EXPRESSION,
    PATTERN,
    UPSERT,
    ChangeBatch,
    ColumnRegistry,
    read_shard,
    view,
)
from streaming.registry_columns import files as rfiles
from streaming.registry_columns.admit import admit
from streaming.registry_columns.columns import ChangeBatchError
from streaming.registry_columns.shards import build_shard, catch_up, expressions
from tests.strategies import random_subscriptions

PARSE = default_parser()
ATTR = "region"
EU, US, ONE_STR = (int(Kind.STR), "eu"), (int(Kind.STR), "us"), (int(Kind.STR), "1")
ONE, ZERO, TRUE = (int(Kind.NUM), 1.0), (int(Kind.NUM), 0.0), (int(Kind.BOOL), 1.0)
TEMPLATES: list[tuple[dict, tuple | None]] = [
    ({"expr": "region = 'eu' AND price > {n}"}, EU),
    ({"expr": "region = 'us'"}, US),
    ({"expr": "region = 1 AND price < {n}"}, ONE),
    ({"expr": "region = 1.0 OR (region = 1 AND price > {n})"}, ONE),
    ({"expr": "region = '1' AND price >= {n}"}, ONE_STR),
    ({"expr": "region = true"}, TRUE),
    ({"expr": "region = -0.0 OR region = 0"}, ZERO),
    ({"expr": "(region = 'eu' AND price > {n}) OR (price < 2 AND region = 'eu')"}, EU),
    ({"expr": "region = 'eu' AND region = 'us'"}, EU),  # never matches: routed by the least value
    ({"rule": {"region": ["us"], "price": [{"anything-but": [3]}]}}, US),
    ({"expr": "region = 'eu' OR region = 'us'"}, None),
    ({"expr": "region = 'eu' OR price > {n}"}, None),
    ({"expr": "price > {n}"}, None),
    ({"expr": "region != 'eu'"}, None),
    ({"rule": {"region": ["eu", "us"]}}, None),
]
IDS = [f"s{i}" for i in range(12)] + ["t1:s1"]
REGIONS: list = ["eu", "us", 1, 1.0, "1", True, False, 0, -0.0, None, ["eu", "us"], ["1", 2]]


def _record(rnd: random.Random) -> tuple[bytes, tuple | None]:
    template, value = rnd.choice(TEMPLATES)
    n = rnd.randrange(6)
    body = {k: (v.replace("{n}", str(n)) if isinstance(v, str) else v) for k, v in template.items()}
    return orjson.dumps(body), value


def _history(seed: int, batches: int = 10) -> list[list[tuple]]:
    """Batches of ``(id, op, kind, record, route value)``: ids move between values, routed and
    unrouted expressions, patterns and deletes; an id may change twice in a batch."""
    rnd = random.Random(seed)
    out = []
    for _ in range(batches):
        batch: list[tuple] = []
        for _ in range(rnd.randrange(1, 10)):
            sub_id = rnd.choice(IDS)
            roll = rnd.random()
            if roll < 0.2:
                batch.append((sub_id, DELETE, 0, None, None))
            elif roll < 0.28:
                batch.append((sub_id, UPSERT, PATTERN, orjson.dumps({"pattern": "SELECT * FROM FILTER{price > 1}(S)"}),
                              None))
            else:
                record, value = _record(rnd)
                batch.append((sub_id, UPSERT, EXPRESSION, record, value))
        out.append(batch)
    return out


def _sub(sub_id: str, record: bytes):
    return PARSE({**orjson.loads(record), "id": sub_id}, 4096)


def batch_of(changes: list[tuple]) -> ChangeBatch:
    ids, ops, kinds, records, _ = (list(c) for c in zip(*changes, strict=True))
    packed = [None if op != UPSERT else pack(_sub(i, r)) if k == EXPRESSION else
              view.packed(orjson.loads(r)["pattern"], None) for i, op, k, r in zip(ids, ops, kinds, records, strict=True)]
    return ChangeBatch.of(ids, ops, kinds, records, packed=packed)


def _live(history: list[list[tuple]], upto: int) -> dict[str, tuple[bytes, tuple | None]]:
    """``{id: (record, route value)}`` of the expressions live after ``upto`` batches."""
    live: dict[str, tuple] = {}
    for batch in history[:upto]:
        for sub_id, op, kind, record, value in batch:
            if op == UPSERT:
                live[sub_id] = (kind, record, value)
            else:
                live.pop(sub_id, None)
    return {i: (r, v) for i, (k, r, v) in live.items() if k == EXPRESSION}


def _key(sub_id: str, value: tuple | None, spread: int) -> int:
    """The shard key the model gives an id (the module's docstring, from the template's value)."""
    crc = zlib.crc32(sub_id.encode())
    return crc if value is None else int(routing.value_hashes([value])[0]) + crc % spread


EVENTS = [{"price": p, ATTR: r} for p in (0, 2, 4) for r in REGIONS] + [{"price": 4}, {"price": 1, "other": "eu"}]


class Shards:
    """The shards of one registry version as an executor holds them: built or caught up, one
    common dictionary, each shard matched through :func:`streaming.routing.match_routed`."""

    def __init__(self, matchers: list, spread: int):
        self.matchers, self.spread = matchers, spread

    def notified(self, events: list[dict]) -> tuple[list[set[str]], int]:
        """The ids each event notifies, and how many (shard, event) matchings routing saved."""
        common = common_dictionary()
        translations = [Translation(common, m.dictionary) for m in self.matchers]
        for t in translations:
            t.update()
        batch = encode([flatten(e) for e in events], common, known_only=True)
        routes = routing.EventRoutes.of(batch, common.attr_ids.get(ATTR, -1))
        got: list[set[str]] = [set() for _ in events]
        saved = 0
        for shard, (m, t) in enumerate(zip(self.matchers, translations, strict=True)):
            res = routing.match_routed(m, batch, t.apply, routes, shard, len(self.matchers), self.spread)
            assert len(res.offsets) == len(events) + 1
            if routing.routed_only(m):
                saved += len(events) - len(routes.events_of(shard, len(self.matchers), self.spread))
            for i in range(len(events)):
                got[i].update(m.id_of(int(k)) for k in res.keys[res.offsets[i]:res.offsets[i + 1]])
        return got, saved


def _counting():
    return create("counting")


def _run(tmp_path, seed: int, spread: int, shard_counts=range(1, 9), matcher=_counting) -> int:
    history = _history(seed)
    route = routing.Routing(ATTR, spread)
    registry = ColumnRegistry(tmp_path / f"reg{seed}-{spread}", shards=3, snapshot_every=3, snapshots_kept=100,
                              routing=route)
    versions = [0]
    for batch_id, batch in enumerate(history):
        versions.append(registry.apply(batch_id, batch_of(batch), 1000.0 + batch_id).version)
    snaps = rfiles.snapshot_versions(registry.directory)
    oldest = snaps[0] if snaps else 0  # versions below the oldest snapshot are pruned
    saved = 0
    for step, version in enumerate(versions):
        if 0 < version < oldest:
            continue
        live = _live(history, step)
        subs = [_sub(i, r) for i, (r, _) in live.items()]
        want = [set(oracle.match(subs, flatten(e))) for e in EVENTS]
        keys = {i: _key(i, v, spread) for i, (_, v) in live.items()}
        assert {i: registry.columns.crc[registry.columns.find(pa.array([i]))[0]] for i in keys} == keys \
            if step == len(versions) - 1 else True
        for shards in shard_counts:
            tables = [expressions(read_shard(registry.directory, version, s, shards)) for s in range(shards)]
            held = {i: s for s, t in enumerate(tables) for i in t.column("id").to_pylist()}
            assert held == {i: k % shards for i, k in keys.items()}, (seed, step, shards)
            built = [build_shard(registry.directory, version, s, shards, matcher, routing=route) for s in range(shards)]
            got, n = Shards(built, spread).notified(EVENTS)
            assert got == want, (seed, spread, step, shards, "built")
            saved += n
            older = min(max(versions[max(0, step - 3)], oldest), version)  # 3 batches before, if kept
            caught = [build_shard(registry.directory, older, s, shards, matcher, routing=route) for s in range(shards)]
            for s, m in enumerate(caught):
                catch_up(m, registry.directory, older, version, s, shards, route)
                assert getattr(m, routing.UNROUTED) == getattr(built[s], routing.UNROUTED)
            got, _ = Shards(caught, spread).notified(EVENTS)
            assert got == want, (seed, spread, step, shards, "caught up")
    return saved


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("spread", [1, 2, 3])
def test_routed_shards_notify_as_the_oracle(tmp_path, seed, spread):
    assert _run(tmp_path, seed, spread) > 0  # some shard skipped some events


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), spread=st.integers(1, 3), shards=st.integers(1, 8),
       matcher=st.sampled_from(["counting", "dynamic", "auto"]))
def test_routed_shards_notify_as_the_oracle_hypothesis(tmp_path_factory, seed, spread, shards, matcher):
    _run(tmp_path_factory.mktemp("r"), seed, spread, [shards], lambda: create(matcher))


def test_moves_are_a_delete_under_the_old_key_then_the_upsert(tmp_path):
    route = routing.Routing(ATTR, 1)
    registry = ColumnRegistry(tmp_path / "reg", shards=4, routing=route)
    eu, us = b'{"expr": "region = \'eu\'"}', b'{"expr": "region = \'us\'"}'
    registry.apply(0, batch_of([("a", UPSERT, EXPRESSION, eu, None), ("b", UPSERT, EXPRESSION, eu, None)]), 1.0)
    registry.apply(1, batch_of([("a", UPSERT, EXPRESSION, us, None), ("b", UPSERT, EXPRESSION, eu, None)]), 2.0)
    delta, _ = rfiles.read_delta(registry.directory, 2)
    h_eu, h_us = (int(h) for h in routing.value_hashes([EU, US]))
    assert delta.select(["id", "op", "crc"]).to_pylist() == [
        {"id": "a", "op": DELETE, "crc": h_eu}, {"id": "a", "op": UPSERT, "crc": h_us},
        {"id": "b", "op": UPSERT, "crc": h_eu}]
    registry.apply(2, batch_of([("a", DELETE, 0, None, None)]), 3.0)
    delta, _ = rfiles.read_delta(registry.directory, 3)
    assert delta.select(["id", "op", "crc"]).to_pylist() == [{"id": "a", "op": DELETE, "crc": h_us}]
    again = ColumnRegistry(tmp_path / "reg", shards=4, routing=route)  # loaded from the files
    assert again.live().sort_by("id").select(["id", "crc"]).to_pylist() == [{"id": "b", "crc": h_eu}]


def test_the_routing_of_an_existing_registry_cannot_change(tmp_path):
    where = tmp_path / "reg"
    ColumnRegistry(where, routing=routing.Routing(ATTR, 2))  # no version yet: another routing may come
    plain = ColumnRegistry(where)
    plain.apply(0, batch_of([("a", UPSERT, EXPRESSION, b'{"expr": "price > 1"}', None)]), 1.0)
    with pytest.raises(RegistryError, match="written with no match.route_by; this configuration has "
                                            "match.route_by = 'region', match.route_spread = 2"):
        ColumnRegistry(where, routing=routing.Routing(ATTR, 2))
    other = tmp_path / "other"
    ColumnRegistry(other, routing=routing.Routing(ATTR, 2)).apply(
        0, batch_of([("a", UPSERT, EXPRESSION, b'{"expr": "price > 1"}', None)]), 1.0)
    ColumnRegistry(other, shards=5, routing=routing.Routing(ATTR, 2))  # the shards may change: keys stay
    for changed in (None, routing.Routing(ATTR, 3), routing.Routing("country", 2)):
        with pytest.raises(RegistryError, match="the routing cannot change on an existing checkpoint"):
            ColumnRegistry(other, routing=changed)


def test_bulk_route_values_equal_one_by_one():
    """:func:`required_hashes` (bulk, :func:`matchers.packed.decode`) against reading each
    subscription's conjunctions, over the whole language with the route attribute among its names."""
    rng = random.Random(5)
    subs = random_subscriptions(rng, 600, extended=True)
    names = sorted({p.attr for s in subs for c in s.conjunctions for p in c})
    blobs = [pack(s) for s in subs]
    for attr in names[:6]:
        bulk = routing.required_hashes(pa.array(blobs, pa.binary()), attr)
        assert bulk.tolist() == [routing._required_one(b, attr) for b in blobs]
    assert (routing.required_hashes(pa.array(blobs, pa.binary()), names[0]) >= 0).any()


def test_event_routes_hash_as_the_subscriptions_do():
    """An event's value of the attribute gets the hash a subscription requiring it gets: numbers
    by value (1 and 1.0, 0 and -0.0), strings and booleans apart; arrays give one per element."""
    common = common_dictionary()
    common.attr(ATTR)
    events = [{ATTR: 1}, {ATTR: 1.0}, {ATTR: "1"}, {ATTR: True}, {ATTR: -0.0}, {ATTR: None}, {"x": 1},
              {ATTR: ["eu", "us"], "y": [1, 2]}]
    batch = encode([flatten(e) for e in events], common, known_only=True)
    routes = routing.EventRoutes.of(batch, common.attr_ids.get(ATTR, -1))
    h = dict(zip(["eu", "us", "1", "one", "true", "zero"],
                 routing.value_hashes([EU, US, ONE_STR, ONE, TRUE, ZERO]).tolist(), strict=True))
    pairs = sorted(set(zip(routes.events.tolist(), routes.hashes.tolist(), strict=True)))
    assert pairs == sorted([(0, h["one"]), (1, h["one"]), (2, h["1"]), (3, h["true"]), (4, h["zero"]),
                            (7, h["eu"]), (7, h["us"])])
    shards = 5
    for s in range(shards):
        want = [e for e, hv in pairs if (s - hv) % shards < 2]
        assert routes.events_of(s, shards, 2).tolist() == sorted(set(want))


def test_shard_keys_put_a_value_in_spread_consecutive_shards():
    crcs = np.array([zlib.crc32(f"id{i}".encode()) for i in range(200)], np.uint32)
    hashes = np.where(np.arange(200) % 3 == 0, routing.NO_ROUTE, 12345)
    keys = routing.shard_keys(crcs, hashes, 3)
    assert (keys[hashes < 0] == crcs[hashes < 0]).all()
    assert set((keys[hashes >= 0] % np.uint32(7)).tolist()) == {12345 % 7, (12345 + 1) % 7, (12345 + 2) % 7}


def test_an_index_keeps_its_unrouted_ids_when_pickled(tmp_path):
    """The shared index file holds a pickled matcher: its unrouted ids go with it."""
    route = routing.Routing(ATTR, 1)
    registry = ColumnRegistry(tmp_path / "reg", routing=route)
    registry.apply(0, batch_of([("a", UPSERT, EXPRESSION, b'{"expr": "region = \'eu\'"}', EU),
                                ("b", UPSERT, EXPRESSION, b'{"expr": "price > 1"}', None)]), 1.0)
    built = build_shard(registry.directory, 1, 0, 1, lambda: create("dynamic"), packed=True, routing=route)
    assert getattr(pickle.loads(pickle.dumps(built)), routing.UNROUTED) == {"b"}
    assert not routing.routed_only(built)
    plain = build_shard(registry.directory, 1, 0, 1, lambda: create("dynamic"))
    assert not routing.routed_only(plain)  # built without a routing: matched on every event


FAST_VALUES: list = ["eu", "us", 1, 1.0, -0.0, 0, "1", 2.5]


def _route_records(seed: int, n: int) -> pa.Table:
    """Subscription records of :func:`_history`'s kinds plus the common JSON form (the fast
    parse: none, one or two values of the attribute), keyed by id, some bad."""
    rnd = random.Random(seed)
    values: list[bytes] = []
    for _ in range(n):
        sub_id, roll = rnd.choice(IDS), rnd.random()
        if roll < 0.15:
            values.append(orjson.dumps({"op": "delete", "id": sub_id}))
        elif roll < 0.2:
            values.append(orjson.dumps({"id": sub_id, "pattern": "SELECT * FROM FILTER{price > 1}(S)"}))
        elif roll < 0.25:
            values.append(orjson.dumps({"id": sub_id, "expr": "region ="}))
        elif roll < 0.6:
            values.append(orjson.dumps({"id": sub_id, **orjson.loads(_record(rnd)[0])}))
        else:
            items: list = [[ATTR, "=", rnd.choice(FAST_VALUES)] for _ in range(rnd.choice([0, 1, 1, 2]))]
            items += [["price", rnd.choice([">", "=", "<="]), rnd.randrange(5)], [ATTR, "!=", "eu"]][:rnd.randrange(1, 3)]
            values.append(orjson.dumps({"op": "upsert", "id": sub_id, "json": {"all": rnd.sample(items, len(items))}}))
    keys = [orjson.loads(v)["id"].encode() for v in values]
    return pa.table({"key": keys, "value": values, "topic": ["subs"] * n, "partition": [0] * n,
                     "offset": list(range(n))}, schema=RECORD_SCHEMA)


@pytest.mark.parametrize("seed", range(6))
def test_routes_found_in_the_parse_give_the_drivers_keys(tmp_path, seed):
    """Records parsed with the routing attribute (the parse tasks' ``route`` column, both parse
    paths) give the registry the deltas and keys it computes itself from records parsed without."""
    spread = 1 + seed % 3
    route = routing.Routing(ATTR, spread)
    tasks = ColumnRegistry(tmp_path / "tasks", shards=3, routing=route)
    driver = ColumnRegistry(tmp_path / "driver", shards=3, routing=route)
    routed = 0
    for batch_id in range(8):
        records = _route_records(seed * 100 + batch_id, 12)
        with_routes = parse_subscription_records(records, route_by=ATTR)
        without = parse_subscription_records(records)
        assert without.column("route").null_count == without.num_rows
        assert with_routes.column("route").null_count == 0
        assert with_routes.drop_columns(["route"]).equals(without.drop_columns(["route"]))
        a = admit(with_routes, tasks, batch_id, None, lambda t: True, 1000.0 + batch_id)
        b = admit(without, driver, batch_id, None, lambda t: True, 1000.0 + batch_id)
        expressions = (a.changes.ops == UPSERT) & (a.changes.kinds == EXPRESSION)
        assert (a.changes.routes[expressions] != routing.UNSET).all()
        routed += int(np.count_nonzero(a.changes.routes >= 0))
        assert (b.changes.routes == routing.UNSET).all()
        va, vb = tasks.apply(batch_id, a.changes, a.now).version, driver.apply(batch_id, b.changes, b.now).version
        assert va == vb
        if va:
            _same(rfiles.read_delta(tasks.directory, va)[0], rfiles.read_delta(driver.directory, vb)[0])
    _same(tasks.live().sort_by("id"), driver.live().sort_by("id"))
    assert tasks.live().num_rows > 0 and routed > 0


def _same(a: pa.Table, b: pa.Table) -> None:
    """Equal tables (NaN expiry times equal)."""
    assert a.drop_columns(["expires"]).equals(b.drop_columns(["expires"]))
    assert np.array_equal(a.column("expires").to_numpy(), b.column("expires").to_numpy(), equal_nan=True)


def test_change_batches_check_their_routes():
    with pytest.raises(ChangeBatchError, match="routes"):
        ChangeBatch.of(["a"], [UPSERT], [EXPRESSION], [b"{}"], packed=[b"x"], routes=[-3])
    with pytest.raises(ChangeBatchError, match="routes"):
        ChangeBatch.of(["a", "b"], [UPSERT, UPSERT], [EXPRESSION] * 2, [b"{}"] * 2, packed=[b"x"] * 2, routes=[1])
    got = ChangeBatch.of(["a", "b", "c"], [UPSERT, DELETE, UPSERT], [EXPRESSION, 0, PATTERN], [b"{}", None, b"{}"],
                         packed=[b"x", None, b"y"], routes=[7, 8, 9])
    assert got.routes.tolist() == [7, routing.UNSET, routing.UNSET]  # kept for expression upserts only
    assert got.take(np.array([0])).routes.tolist() == [7]
