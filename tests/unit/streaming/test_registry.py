"""The versioned registry: appends, replay idempotency, snapshots, pruning, reload, net changes."""

from __future__ import annotations

import os
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.expr import Subscription, pred
from streaming.records import DELETE, UPSERT, Change
from streaming.registry import (
    DELTAS,
    SNAPSHOTS,
    Delta,
    Registry,
    apply_deltas,
    load_state,
    net_changes,
    read_deltas,
)
from tests.strategies import random_subscriptions


def up(sub_id: str, value: float = 1.0, expires: float | None = None) -> Change:
    return Change(UPSERT, sub_id, Subscription.of(sub_id, pred("a", "=", value), expires=expires))


def rm(sub_id: str) -> Change:
    return Change(DELETE, sub_id, None)


def test_versions_and_reload(tmp_path):
    reg = Registry(tmp_path, snapshot_every=100)
    assert reg.version == 0 and len(reg) == 0
    d1 = reg.append(0, [up("s1"), up("s2")], 10.0)
    assert d1.version == 1 and d1.batch_id == 0 and d1.time == 10.0
    assert reg.append(1, [], 11.0) is None and reg.version == 1
    d2 = reg.append(2, [rm("s1"), up("s2", 5.0), up("s3")], 12.0)
    assert d2.version == 2 and set(reg.subscriptions) == {"s2", "s3"}
    again = Registry(tmp_path)
    assert again.version == 2 and again.batch_id == 2
    assert again.subscriptions == reg.subscriptions
    assert again.subscriptions["s2"].expr == pred("a", "=", 5.0)
    assert load_state(tmp_path, 1).subscriptions.keys() == {"s1", "s2"}


def test_replayed_batch_does_not_double_apply(tmp_path):
    reg = Registry(tmp_path)
    d = reg.append(5, [up("s1")], 1.0)
    assert reg.append(5, [up("s1"), up("s9")], 2.0) == d
    assert reg.version == 1 and set(reg.subscriptions) == {"s1"}
    assert reg.append(3, [up("s7")], 3.0) is None  # an older batch without a version of its own
    restarted = Registry(tmp_path)
    assert restarted.is_replay(5) and restarted.delta_of_batch(5) == d
    assert restarted.append(5, [up("s1")], 4.0) == d and restarted.version == 1
    assert restarted.append(6, [up("s2")], 5.0).version == 2


def test_snapshots_and_pruning(tmp_path):
    reg = Registry(tmp_path, snapshot_every=3, snapshots_kept=2, recent=2)
    expected = {}
    for b in range(10):
        changes = [up(f"s{b}", b), rm(f"s{b - 2}")]
        reg.append(b, changes, float(b))
        apply_deltas(expected, [Delta(0, b, 0.0, tuple(changes))])
    snaps = sorted(int(n[:-4]) for n in os.listdir(tmp_path / SNAPSHOTS))
    deltas = sorted(int(n[:-4]) for n in os.listdir(tmp_path / DELTAS))
    assert snaps == [6, 9]
    assert deltas == [7, 8, 9, 10]
    assert not [n for n in os.listdir(tmp_path / DELTAS) if n.endswith(".tmp")]
    assert reg.subscriptions == expected
    state = load_state(tmp_path)
    assert state.version == 10 - 0 and state.subscriptions == expected
    assert load_state(tmp_path, 8).subscriptions.keys() == {"s6", "s7"}
    reloaded = Registry(tmp_path, snapshot_every=3, recent=2)
    assert reloaded.version == 10 and reloaded.subscriptions == expected
    assert [d.version for d in reloaded.recent] == [10]  # version 10 is after snapshot 9
    assert reloaded.deltas_since(9) == reloaded.recent and reloaded.deltas_since(5) is None


def test_expiry_heap(tmp_path):
    reg = Registry(tmp_path)
    reg.append(0, [up("a", expires=100.0), up("b", expires=200.0), up("c")], 1.0)
    reg.append(1, [up("a", expires=300.0)], 2.0)  # re-registered with a later expiry
    assert reg.expired(150.0) == []
    assert reg.expired(250.0) == ["b"]
    assert Registry(tmp_path).expired(1000.0) == ["b", "a"]


def test_read_deltas_reports_a_gap(tmp_path):
    reg = Registry(tmp_path, snapshot_every=2, snapshots_kept=1)
    for b in range(4):
        reg.append(b, [up(f"s{b}")], 0.0)
    import pytest

    from streaming.registry import RegistryError

    with pytest.raises(RegistryError):
        read_deltas(tmp_path, 0, 4)


ops = st.lists(st.tuples(st.sampled_from(["u", "d"]), st.integers(0, 5), st.integers(0, 3)), max_size=30)


@settings(max_examples=60, deadline=None)
@given(st.lists(ops, min_size=1, max_size=5))
def test_net_changes_equal_sequential_application(batches):
    start = {f"s{i}": Subscription.of(f"s{i}", pred("a", "=", -1)) for i in range(0, 6, 2)}
    deltas = [
        Delta(v + 1, v, 0.0, tuple(up(f"s{i}", x) if o == "u" else rm(f"s{i}") for o, i, x in batch))
        for v, batch in enumerate(batches)
    ]
    expected = apply_deltas(dict(start), deltas)
    deletes, upserts = net_changes(deltas)
    got = dict(start)
    for i in deletes:
        got.pop(i, None)
    got.update({s.id: s for s in upserts})
    assert got == expected
    assert {s.id: s.expr for s in got.values()} == {s.id: s.expr for s in expected.values()}


def test_random_workload_round_trip(tmp_path):
    rng = random.Random(3)
    subs = random_subscriptions(rng, 200)
    reg = Registry(tmp_path, snapshot_every=2)
    reg.append(0, [Change(UPSERT, s.id, s) for s in subs[:100]], 0.0)
    reg.append(1, [Change(UPSERT, s.id, s) for s in subs[100:]], 0.0)
    reg.append(2, [rm(s.id) for s in subs[::3]], 0.0)
    state = load_state(tmp_path)
    assert {i: s.expr for i, s in state.subscriptions.items()} == {
        s.id: s.expr for i, s in enumerate(subs) if i % 3
    }
    assert all(s.conjunctions for s in state.subscriptions.values())


def test_packed_subscriptions_round_trip():
    import pickle

    from streaming.registry import Snapshot, pack_subscription, unpack_subscription

    rng = random.Random(5)
    subs = random_subscriptions(rng, 300)
    subs.append(Subscription.of("e", pred("a", "in", ["x", "y"]), expires=12.5))
    for s in subs:
        back = unpack_subscription(pack_subscription(s))
        assert back == s and back.conjunctions == s.conjunctions and back.expires == s.expires
    snap = Snapshot(3, 2, 1.0, {s.id: s for s in subs})
    again = pickle.loads(pickle.dumps(snap))
    assert again == snap
    assert all(again.subscriptions[i].conjunctions == s.conjunctions for i, s in snap.subscriptions.items())
