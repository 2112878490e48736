"""A batch's matches (:class:`Matches`, CSR by event) and the steps :class:`matchers.base.Matcher`
takes on them and on the batch around an index: ``null`` values left out, chunks joined, the
rows of events with arrays merged per event."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from matchers import rows as rows_kernels
from matchers.events import EventBatch
from matchers.expr import Kind


class Matches(NamedTuple):
    """Matches of a batch as CSR: event ``i`` matched keys ``keys[offsets[i]:offsets[i+1]]``.

    Keys are the matcher's subscription keys, sorted and distinct within each event.
    """

    offsets: np.ndarray
    keys: np.ndarray

    @property
    def total(self) -> int:
        return int(self.offsets[-1])


def no_matches(n: int) -> Matches:
    return Matches(np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int32))


def without_nulls(batch: EventBatch) -> EventBatch:
    """The batch without its ``null`` values (what an index sees: no predicate it
    evaluates holds on one)."""
    keep = batch.kinds != int(Kind.NULL)
    if keep.all():
        return batch
    event_of = np.repeat(np.arange(batch.n, dtype=np.int64), np.diff(batch.offsets))
    offsets = np.zeros(batch.n + 1, dtype=np.int64)
    np.cumsum(np.bincount(event_of[keep], minlength=batch.n), out=offsets[1:])
    return EventBatch(offsets, batch.attrs[keep], batch.kinds[keep], batch.nums[keep], batch.codes[keep],
                      batch.texts[keep], batch.strings)


def concat(parts: Sequence[Matches]) -> Matches:
    """The matches of consecutive chunks of a batch as the batch's."""
    if len(parts) == 1:
        return parts[0]
    starts = np.cumsum([0] + [p.total for p in parts[:-1]])
    offsets = np.concatenate([parts[0].offsets[:1], *(p.offsets[1:] + s for p, s in zip(parts, starts, strict=True))])
    return Matches(offsets, np.concatenate([p.keys for p in parts]))


def merge_rows(matches: Matches, rows: np.ndarray, capacity: int) -> Matches:
    """Matches of rows merged per event (event ``i`` owns rows ``rows[i]:rows[i+1]``;
    keys below ``capacity``)."""
    return Matches(*rows_kernels.merge_rows(rows, matches.offsets, matches.keys, max(capacity, 1)))
