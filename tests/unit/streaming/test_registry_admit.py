"""The columnar path's quotas and expiry (issue 29, step 2) judge every batch as the rules say:
micro-batches of subscription records of both kinds, with tenants and quotas that are hit, go
(a) through a plain model of the match query's gate (:class:`tests.unit.streaming.gate_model.GateModel`,
a dict of subscriptions) and through the earlier release's pattern registry
(:class:`tests.unit.streaming.pattern_model.PatternModel`), and (b)
through ``parse_records``, ``admit`` and ``ColumnRegistry.apply``; after every batch the live ids
and kinds, the error records and the counts are the same, and a replayed batch gives what it gave
the first time.

The generator leaves out what the new path does on purpose differently (see
:mod:`streaming.registry_columns.admit`): a bad or refused record of one kind meeting the other
kind's subscription of its id. Ids a tenant's records use are either expressions' or patterns';
only the operator's (no quotas, no targets) change kind, and only by sound records.
"""

from __future__ import annotations

import random

import numpy as np
import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.patterns.registry import current
from streaming.records import default_parser
from streaming.registry_columns import EXPRESSION, PATTERN, ColumnRegistry
from streaming.registry_columns.admit import admit, warm
from streaming.registry_columns.parse import parse_records
from streaming.tenants import Tenants
from tests.unit.streaming.gate_model import GateModel
from tests.unit.streaming.pattern_model import PatternModel

PARSE = default_parser()
TENANTS = Tenants(("t1", "t2"), "subs", "notes", "errs",
                  {"t1": {"subscriptions": 2, "predicates": 5, "patterns": 1}, "t2": {"subscriptions": 3, "predicates": 5,
                                                                         "patterns": 2}},
                  {"t1": "notes.t1.", "t2": "notes.t2."},
                  frozenset({"events", "subs", "notes", "errs", "notes.t1", "notes.t2", "errs.t1", "errs.t2"}))
EXISTING = frozenset({"notes.t1.a", "notes.t1.b", "notes.t2.a", "notes.t2"})
GOOD_PATTERN = "SELECT * FROM FILTER{price > 10}(Stock)"


def topic_exists(topic: str) -> bool:
    return topic in EXISTING


def expression(rng: random.Random, sub_id: str, now: float, targets: list[str | None]) -> dict:
    record: dict = {"id": sub_id, "expr": " AND ".join(f"p{j} = {j}" for j in range(rng.randint(1, 3)))}
    expires = rng.choice([None, None, None, now - 5, now, now + 15, now + 1000])
    if expires is not None:
        record["expires"] = expires
    target = rng.choice(targets)
    if target is not None:
        record["target"] = target
    return record


def record(rng: random.Random, topic: str, now: float, tenants: bool) -> tuple[bytes | None, bytes | None]:
    """One subscription record ``(key, value)`` for ``topic`` (see the module docstring)."""
    tenant = topic.partition(".")[2]
    roll = rng.random()
    if roll < 0.08:  # malformed: the match query reports it, the patterns query ignores it
        return rng.choice([(None, b"{not json"), (b"k", orjson.dumps({"id": "other", "expr": "a = 1"})),
                           (None, orjson.dumps({"expr": "a = 1"})), (None, orjson.dumps({"id": "m", "op": "merge"})),
                           (None, None), (None, orjson.dumps([1]))])
    if not tenant and roll < 0.4:  # the operator's ids that change kind, by sound records only
        sub_id = rng.choice(["a", "b", "c:d"])
        obj = rng.choice([expression(rng, sub_id, now, [None]), {"id": sub_id, "pattern": GOOD_PATTERN},
                          {"op": "delete", "id": sub_id}, None])
    elif roll < 0.7:  # expressions' ids
        sub_id = rng.choice(["e", "x:y"] if not tenant else ["v", "w", "x", "y", "z"])
        named = ["notes.t1.a", "notes.t1.b", "notes.t2.a", "notes.t1.missing", "elsewhere", "notes.t1", "notes.t2"]
        targets: list[str | None] = [None] * 5 + named if tenants else [None]  # most named ones are refused
        obj = rng.choice([*(expression(rng, sub_id, now, targets) for _ in range(5)), {"id": sub_id, "expr": "price >"},
                          {"op": "delete", "id": sub_id}, None])
    else:  # patterns' ids
        sub_id = rng.choice(["f"] if not tenant else ["p", "q", "r"])
        obj = rng.choice([{"id": sub_id, "pattern": GOOD_PATTERN}, {"id": sub_id, "pattern": GOOD_PATTERN},
                          {"id": sub_id, "pattern": "SELECT * FROM ("}, {"id": sub_id, "pattern": 7},
                          {"id": sub_id, "pattern": GOOD_PATTERN, "target": "notes.t1.a"},
                          {"op": "delete", "id": sub_id}, None])
    key = sub_id.encode() if obj is None or rng.random() < 0.5 else None
    return key, None if obj is None else orjson.dumps(obj)


def in_order(routed: tuple[str, dict]) -> tuple:
    """An error record's order: where it goes, its record's position and its stage."""
    topic, e = routed
    return topic, e["topic"], e["partition"], e["offset"], e["stage"]


class Reference:
    """The reference: the match query's gate as a dict (:class:`GateModel`), and the pattern registry."""

    def __init__(self, tmp, tenants: Tenants | None):
        self.tenants = tenants
        self.model = GateModel(PARSE, tenants, topic_exists)
        self.patterns = PatternModel()

    def batch(self, batch_id: int, rows: list[tuple], now: float) -> tuple:
        outcome = self.model.batch(batch_id, rows, now)
        ordered = sorted(rows, key=lambda r: (r[2], r[3], r[4]))
        pattern_errors = self.patterns.apply(batch_id, ordered, self.tenants)
        expressions, patterns = set(self.model.subscriptions), set(self.patterns.latest())
        assert not expressions & patterns
        live = {i: EXPRESSION for i in expressions} | {i: PATTERN for i in patterns}
        route = self.tenants.errors_topic_of if self.tenants is not None else lambda t: "errors"
        errors = sorted(((route(e.position.topic), orjson.loads(e.to_json())) for e in outcome.errors + pattern_errors),
                        key=in_order)
        # each pattern record the patterns query refused is a delete the match query accepted
        return live, errors, outcome.accepted - len(pattern_errors), outcome.expired


class Columns:
    """The columnar path: records parsed in tasks (chunks, any order), admitted, applied."""

    def __init__(self, tmp, tenants: Tenants | None):
        self.tenants = tenants
        self.registry = ColumnRegistry(tmp / "columns", shards=2, snapshot_every=3)

    def batch(self, batch_id: int, rows: list[tuple], now: float, rng: random.Random) -> tuple:
        got = self.admitted(batch_id, rows, now, rng)
        self.registry.apply(batch_id, got.changes, got.now)
        live = {r["id"]: r["kind"] for r in self.registry.live().to_pylist()}
        return (live, self.errors(got), got.accepted, got.expired), got

    def admitted(self, batch_id: int, rows: list[tuple], now: float, rng: random.Random):
        cuts = sorted(rng.sample(range(len(rows) + 1), min(2, len(rows) + 1)))
        tasks = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True) if b > a]
        rng.shuffle(tasks)
        parsed = [parse_records(pa.RecordBatch.from_pylist(
            [dict(zip(("key", "value", "topic", "partition", "offset"), r, strict=True)) for r in task],
            schema=pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                              ("partition", pa.int32()), ("offset", pa.int64())])),
            PARSE, targets=self.tenants is not None) for task in tasks]
        return admit(parsed, self.registry, batch_id, self.tenants, topic_exists, now)

    @staticmethod
    def errors(got) -> list:
        return sorted(((t, orjson.loads(v)) for t, v in zip(*got.errors.to_pydict().values(), strict=True)),
                      key=in_order)


def run(tmp, rng: random.Random, batches: int, tenants: Tenants | None) -> None:
    reference, columns = Reference(tmp, tenants), Columns(tmp, tenants)
    topics = ["subs", "subs.t1", "subs.t2"] if tenants is not None else ["subs"]
    offsets: dict[tuple[str, int], int] = {}
    batch_id = 0
    for b in range(batches):
        batch_id += rng.randint(1, 2)
        now = 1000.0 + 10 * b
        rows = []
        for _ in range(rng.randint(0, 14)):
            topic, partition = rng.choice(topics), rng.randint(0, 1)
            offset = offsets[(topic, partition)] = offsets.get((topic, partition), -1) + 1
            rows.append((*record(rng, topic, now, tenants is not None), topic, partition, offset))
        rng.shuffle(rows)
        want = reference.batch(batch_id, rows, now)
        got, first = columns.batch(batch_id, rows, now, rng)
        assert got == want, (b, rows)
        view = columns.registry.pattern_view()  # the view the patterns query reads: the model's texts
        assert {i: e[0] for i, e in view.items()} == reference.patterns.latest()
        assert current(str(columns.registry.directory.uri)).patterns == view
        if rng.random() < 0.25:  # Spark runs the batch again after a crash, later
            recorded = columns.registry.batch_id == batch_id
            # (a batch that recorded nothing is not known as a replay: judged again at the same time,
            # it changes nothing again; later, an expiry could)
            later = now + 100 if recorded else now
            again = columns.admitted(batch_id, rows, later, rng)
            assert (again.replay, again.now) == (recorded, now)
            assert same_changes(again.changes, first.changes) and again.errors.equals(first.errors)
            assert (again.accepted, again.expired) == (first.accepted, first.expired)
            replayed = reference.batch(batch_id, rows, later)
            assert replayed[:3] == want[:3] and replayed[3] == 0  # a replay counts no expiry
            assert columns.registry.apply(batch_id, again.changes, again.now).replay == recorded
            assert {r["id"]: r["kind"] for r in columns.registry.live().to_pylist()} == want[0]


class Sorted(Columns):
    """The columnar path given each batch's rows in record order, as one table (a twin registry)."""

    def admitted(self, batch_id: int, rows: list[tuple], now: float, rng: random.Random):
        ordered = sorted(rows, key=lambda r: (r[2], r[3], r[4]))
        return super().admitted(batch_id, ordered, now, random.Random(0)) if not ordered else admit(
            pa.Table.from_batches([parse_records(pa.RecordBatch.from_pylist(
                [dict(zip(RECORD_COLUMNS, r, strict=True)) for r in ordered], schema=RECORD_SCHEMA), PARSE,
                targets=self.tenants is not None)]), self.registry, batch_id, self.tenants, topic_exists, now)


RECORD_COLUMNS = ("key", "value", "topic", "partition", "offset")
RECORD_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                           ("partition", pa.int32()), ("offset", pa.int64())])


def run_twins(tmp, rng: random.Random, batches: int, tenants: Tenants | None) -> None:
    """``admit`` gives the same changes, errors and counts whatever the rows' order and chunks."""
    tasks, ordered = Columns(tmp / "tasks", tenants), Sorted(tmp / "ordered", tenants)
    topics = ["subs", "subs.t1", "subs.t2"] if tenants is not None else ["subs"]
    offsets: dict[tuple[str, int], int] = {}
    for b in range(batches):
        now = 1000.0 + 10 * b
        rows = []
        for _ in range(rng.randint(0, 40)):
            topic, partition = rng.choice(topics), rng.randint(0, 2)
            offset = offsets[(topic, partition)] = offsets.get((topic, partition), -1) + 1
            rows.append((*record(rng, topic, now, tenants is not None), topic, partition, offset))
        rng.shuffle(rows)
        (got, a), (want, z) = tasks.batch(b, rows, now, rng), ordered.batch(b, rows, now, rng)
        assert got == want and same_changes(a.changes, z.changes) and a.errors.equals(z.errors), (b, rows)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("with_tenants", [True, False])
def test_any_order_and_chunks_are_judged_alike(tmp_path, seed, with_tenants):
    run_twins(tmp_path, random.Random(seed), 20, TENANTS if with_tenants else None)


@settings(max_examples=20, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 8))
def test_any_order_and_chunks_any_batches(tmp_path_factory, rng, batches):
    run_twins(tmp_path_factory.mktemp("twins"), rng, batches, TENANTS)


def test_warm_leaves_nothing_behind(tmp_path, monkeypatch):
    """The kernels' warm-up admits and applies one record in a scratch registry it removes."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    warm()
    warm()
    assert not list(tmp_path.iterdir())


def same_changes(a, b) -> bool:
    return all(x.equals(y) if isinstance(x, pa.Array) else np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
               for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("with_tenants", [True, False])
def test_batches_are_judged_as_today(tmp_path, seed, with_tenants):
    run(tmp_path, random.Random(seed), 30, TENANTS if with_tenants else None)


@settings(max_examples=25, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 12))
def test_any_batches_are_judged_as_today(tmp_path_factory, rng, batches):
    run(tmp_path_factory.mktemp("admit"), rng, batches, TENANTS)


def test_a_bad_or_refused_record_changes_nothing(tmp_path):
    """Where the new path differs from today's on purpose: a record of one kind that is bad or
    refused leaves the other kind's subscription of its id (today, the other query deletes it)."""
    tenants = Tenants(("t1",), "subs", "notes", "errs", {"t1": {"patterns": 1, "subscriptions": 1}}, {"t1": "notes.t1."})
    columns = Columns(tmp_path, tenants)
    rng = random.Random(0)
    up = [(b"x", orjson.dumps({"id": "x", "expr": "a = 1"}), "subs.t1", 0, 0),
          (b"p", orjson.dumps({"id": "p", "pattern": GOOD_PATTERN}), "subs.t1", 0, 1),
          (b"o", orjson.dumps({"id": "o", "pattern": GOOD_PATTERN}), "subs", 0, 0)]
    columns.batch(0, up, 1.0, rng)
    bad = [(b"x", orjson.dumps({"id": "x", "pattern": GOOD_PATTERN}), "subs.t1", 0, 2),  # past the patterns quota
           (b"p", orjson.dumps({"id": "p", "expr": "a = 1", "target": "elsewhere"}), "subs.t1", 0, 3),
           (b"o", orjson.dumps({"id": "o", "expr": "a >"}), "subs", 0, 1)]
    (live, errors, accepted, expired), _ = columns.batch(1, bad, 2.0, rng)
    assert live == {"t1:x": EXPRESSION, "t1:p": PATTERN, "o": PATTERN} and (accepted, expired) == (0, 0)
    assert [(t, e["stage"], e["offset"]) for t, e in errors] == [("errs", "subscription", 1),
                                                                 ("errs.t1", "pattern", 2), ("errs.t1", "subscription", 3)]
