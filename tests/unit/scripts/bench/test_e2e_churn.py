"""The churn records of ``scripts.bench.e2e``: the subscription count they promise is what
applying them in order leaves, and ids repeat so one id changes several times."""

from collections import Counter

import orjson

from scripts.bench.e2e import churn_records


def test_expected_count_is_the_records_applied_in_order():
    n_subs = 50
    records, expected = churn_records(n_subs, 300, seed=3)
    live = {f"s{i}" for i in range(n_subs)}
    for key, value in records:
        doc = orjson.loads(value)
        assert key == doc["id"].encode()
        (live.discard if doc["op"] == "delete" else live.add)(doc["id"])
    assert expected == len(live)
    ops = Counter((orjson.loads(v)["op"], k.startswith(b"c")) for k, v in records)
    assert set(ops) == {("upsert", False), ("delete", False), ("upsert", True)}
    assert all(n > 60 for n in ops.values())
    assert max(Counter(k for k, _ in records if k.startswith(b"s")).values()) > 1
