"""The protocol of an instance store: one :class:`~.automaton.Automaton` and the instances
of its nodes, stepped over events.

Two stores implement it: :class:`.pystore.PythonStore` (instances as Python objects, every
subscription) and :class:`.flat.FlatStore` (instances as rows, the step in numba kernels,
the subscriptions :func:`.flat_rules.flat_chain` admits). :class:`.engine.Engine` routes each
subscription to one of them and merges their outputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from .automaton import Automaton, Match
from .compiler import Chain

# An event (or record) to step: stream, attributes, t0, t1, witness, sequence number.
Row = tuple[str, dict, int, int, tuple, int]


class InstanceStore(Protocol):
    """Subscriptions linked into an automaton and the instances of its nodes."""

    graph: Automaton

    @property
    def instances(self) -> int:
        """Live instances."""
        ...

    def add(self, sub_id: str, chs: list[Chain], since: int) -> None:
        """Link a subscription's chains (it sees the instances born at epoch ``since`` or later)."""
        ...

    def remove(self, sub_id: str) -> bool:
        """Unlink a subscription (its nodes that no other one uses go with their instances)."""
        ...

    def run(self, rows: Sequence[Row], epoch: int, starting: bool) -> list[tuple[int, Match]]:
        """Step events in order (their clock and sequence numbers checked by the caller);
        ``(index in rows, match)`` pairs. New runs are born at ``epoch``; none start
        unless ``starting``."""
        ...

    def expire(self, now: int) -> None:
        """Drop the instances that can no longer fire at time ``now`` or later."""
        ...

    def next_expiry(self) -> int | float | None:
        """The earliest time after which :meth:`expire` (or a timer) has something to do."""
        ...

    def export_instances(self) -> list[tuple]:
        """Every live instance as a plain row (see :meth:`.engine.Engine.export_instances`)."""
        ...

    def load_rows(self, rows: Iterable[tuple]) -> int:
        """Insert exported rows of this store's nodes (the others skipped); how many."""
        ...

    def clear_instances(self) -> None:
        """Drop every instance (the subscriptions stay)."""
        ...
