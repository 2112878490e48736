"""``supervise``: a query that failed on a loaded machine restarts, any other failure ends the run."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from streaming.__main__ import RESTARTS, Supervised, supervise

CONNECT_BACK = RuntimeError("Job aborted: org.apache.spark.SparkException: Python worker failed to connect back.")


@dataclass
class FakeQuery:
    name: str
    error: Exception | None = None
    isActive: bool = True

    def exception(self) -> Exception | None:
        return self.error


def starter(outcomes: list[FakeQuery], stop: threading.Event | None = None):
    """Starts the queries of ``outcomes`` in turn; sets ``stop`` once they are used up."""
    started: list[FakeQuery] = []

    def start() -> FakeQuery:
        query = outcomes[len(started)]
        started.append(query)
        if stop is not None and len(started) == len(outcomes):
            stop.set()
        return query

    return start, started


def test_transient_failure_restarts_the_query_from_its_checkpoint():
    stop = threading.Event()
    start, started = starter([FakeQuery("patterns", CONNECT_BACK, False), FakeQuery("patterns")], stop)
    other = FakeQuery("match")
    queries = [Supervised(lambda: other), Supervised(start)]
    assert supervise(queries, stop, poll_s=0.01) == []
    assert len(started) == 2 and queries[1].query is started[1] and queries[1].restarts == 1


def test_a_query_failing_transiently_again_and_again_fails_for_good():
    start, started = starter([FakeQuery("patterns", CONNECT_BACK, False)] * (RESTARTS + 1))
    queries = [Supervised(start)]
    assert supervise(queries, threading.Event(), poll_s=0.01) == queries
    assert len(started) == RESTARTS + 1


def test_other_failures_end_the_run_and_a_stopped_query_is_no_failure():
    broken = FakeQuery("match", ValueError("bad"), False)
    queries = [Supervised(lambda: broken), Supervised(lambda: FakeQuery("patterns"))]
    assert supervise(queries, threading.Event(), poll_s=0.01) == [queries[0]]
    assert supervise([Supervised(lambda: FakeQuery("match", None, False))], threading.Event(), poll_s=0.01) == []
