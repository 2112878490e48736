"""Small seeded workloads for the service's unit tests (subscriptions, events, Kafka rows)."""

from __future__ import annotations

import pickle
import random

import orjson
import pyarrow as pa

from matchers.expr import And, Not, Or, Subscription, pred
from streaming.kafka.client_config import KafkaClientConfig

NUM_ATTRS = ("price", "volume", "x")
WORDS = ("IBM", "IBMX", "MSFT", "ORCL", "AAPL", "apple", "")
NUM_OPS = ("=", "!=", "<", "<=", ">", ">=", "between", "not between", "in", "not in")
STR_OPS = ("=", "!=", "in", "not in", "like", "not like", "<", ">=", "matches")
NO_KAFKA = KafkaClientConfig.create("unused.invalid:9092")
"""The client configuration of a batch context whose tests pass their own ``produce``."""


def random_pred(rng: random.Random):
    if rng.random() < 0.6:
        attr, op = rng.choice(NUM_ATTRS), rng.choice(NUM_OPS)
        if op in ("between", "not between"):
            lo = rng.randint(0, 10)
            return pred(attr, op, (lo, lo + rng.randint(0, 5)))
        if op in ("in", "not in"):
            return pred(attr, op, rng.sample(range(10), rng.randint(1, 3)))
        return pred(attr, op, rng.randint(0, 10))
    if rng.random() < 0.15:
        return pred("flag", rng.choice(("=", "!=")), rng.random() < 0.5)
    op = rng.choice(STR_OPS)
    if op in ("in", "not in"):
        return pred("symbol", op, rng.sample(WORDS, 2))
    if op in ("like", "not like"):
        return pred("symbol", op, rng.choice(("IBM%", "%L", "%B%", "A_PL")))
    if op == "matches":
        return pred("symbol", op, rng.choice(("^I", "S.T", "pp")))
    return pred("symbol", op, rng.choice(WORDS))


def random_expr(rng: random.Random, depth: int = 2):
    if depth == 0 or rng.random() < 0.4:
        return random_pred(rng)
    kind = rng.random()
    children = tuple(random_expr(rng, depth - 1) for _ in range(rng.randint(2, 3)))
    if kind < 0.5:
        return And(children)
    if kind < 0.85:
        return Or(children)
    return Not(children[0])


def random_subscriptions(rng: random.Random, n: int, prefix: str = "s") -> list[Subscription]:
    return [Subscription.of(f"{prefix}{i}", random_expr(rng)) for i in range(n)]


def random_event(rng: random.Random) -> dict:
    event: dict = {}
    for attr in NUM_ATTRS:
        if rng.random() < 0.8:
            event[attr] = rng.choice((rng.randint(0, 12), rng.randint(0, 12) + 0.5, str(rng.randint(0, 3))))
    if rng.random() < 0.9:
        event["symbol"] = rng.choice((*WORDS, 7))
    if rng.random() < 0.5:
        event["flag"] = rng.random() < 0.5
    return event


def kafka_batch(values: list[bytes | None], topic: str = "events", partition: int = 0, first_offset: int = 0,
                timestamp_us: int = 1_700_000_000_000_000) -> pa.RecordBatch:
    """Arrow batch with the Kafka source's columns."""
    n = len(values)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([None] * n, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([topic] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array(range(first_offset, first_offset + n), pa.int64()),
            pa.array([timestamp_us] * n, pa.timestamp("us", tz="UTC")),
        ],
        names=["key", "value", "topic", "partition", "offset", "timestamp"],
    )


def dumps(obj) -> bytes:
    return orjson.dumps(obj)


class LocalBroadcast:
    """A stand-in for a pyspark ``Broadcast``: pickled once, loaded on first use into ``_value``."""

    made: list[LocalBroadcast] = []

    def __init__(self, value) -> None:
        self.data = pickle.dumps(value)
        self.destroyed = False
        LocalBroadcast.made.append(self)

    @property
    def value(self):
        assert not self.destroyed, "a destroyed broadcast was used"
        if not hasattr(self, "_value"):
            self._value = pickle.loads(self.data)
        return self._value

    def destroy(self) -> None:
        self.destroyed = True
