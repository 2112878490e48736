"""The confluent read loop of :mod:`streaming.kafka.fetch` on a scripted consumer: the columns
taken at once (a clean batch) equal those of the per-message loop (a batch with an event)."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, Message

from streaming.kafka import fetch
from streaming.kafka.offsets import OffsetRange


class _Consumer:
    def __init__(self, batches: list[list[Message]]) -> None:
        self.batches = batches

    def assign(self, _parts: Any) -> None:
        pass

    def unassign(self) -> None:
        pass

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        return self.batches.pop(0) if self.batches else []


class _Cache:
    def __init__(self, consumer: _Consumer) -> None:
        self.consumer = consumer

    def get(self, _conf: Any, _client: str) -> tuple[str, _Consumer]:
        return "k", self.consumer

    def drop(self, _key: str) -> None:
        pass


def _msg(offset: int) -> Message:
    return Message(topic="t", partition=0, offset=offset, key=None if offset % 3 == 0 else b"k%d" % offset,
                   value=b'{"v":%d}' % offset, timestamp=(1, 1_700_000_000_000 + offset))


def _eof(offset: int) -> Message:
    return Message(topic="t", partition=0, offset=offset, error=KafkaError(KafkaError._PARTITION_EOF))


def _read(mp: pytest.MonkeyPatch, batches: list[list[Message]], start: int, end: int, batch_rows: int) -> pa.Table:
    with mp.context() as m:
        m.setattr(fetch, "_CONSUMERS", _Cache(_Consumer(batches)))
        got = list(fetch._read_confluent({}, OffsetRange("t", 0, start, end), 5.0, True, batch_rows))
    return pa.Table.from_batches(got, schema=fetch.ARROW_SCHEMA)


def _want(offsets: list[int]) -> pa.Table:
    ms = [_msg(o) for o in offsets]
    return pa.Table.from_batches([fetch.to_batch("t", 0, [m.key() for m in ms], [m.value() for m in ms], offsets,
                                                 [m.timestamp()[1] for m in ms])], schema=fetch.ARROW_SCHEMA)


@pytest.mark.parametrize("seed", range(20))
def test_clean_and_eventful_batches_give_the_same_records(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    start = rng.randrange(0, 50)
    end = start + rng.randrange(1, 200)
    present = [o for o in range(max(0, start - 5), end + 5) if rng.random() > 0.2]  # gaps (compaction), before and past
    batches, at = [], 0
    while at < len(present):
        k = rng.randrange(1, 40)
        batch = [_msg(o) for o in present[at:at + k]]
        if rng.random() < 0.3:
            batch.insert(rng.randrange(len(batch) + 1), _eof(present[at]))  # an event: the per-message loop
        batches.append(batch)
        at += k
    batches.append([_eof(end + 10)])
    got = _read(monkeypatch, batches, start, end, rng.choice([7, 10_000]))
    want = _want([o for o in present if start <= o < end])
    assert got.equals(want)
    clean = [[_msg(o) for o in present if start <= o < end]]  # one batch, all in the range: columns at once
    assert _read(monkeypatch, clean + [[_eof(end)]], start, end, 10_000).equals(want)
