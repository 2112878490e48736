"""Pivot attributes (Level 1, Eq. 1): the least frequent attribute in the event stream.

:class:`Frequencies` keeps the attribute frequencies of a sliding window of recently
matched events (whole batches, at least ``window`` events) and, as the fallback used
before any event is seen and to break ties, how many indexed entries use each
attribute (the paper's approximation from the subscription database).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from matchers.arrays import grown


class Frequencies:
    """Event-stream and subscription attribute frequencies.

    Parameters
    ----------
    window : number of recent events the event frequencies are measured over.
    """

    def __init__(self, window: int = 20_000):
        if window < 1:
            raise ValueError("window must be at least 1")
        self.window = window
        self._batches: deque[tuple[int, np.ndarray]] = deque()
        self._event_counts = np.zeros(0, dtype=np.int64)
        self._events = 0
        self.sub_counts = np.zeros(0, dtype=np.int64)
        self.seen_events = 0
        """Events observed in total (not only in the window)."""

    # -- subscriptions ------------------------------------------------------------
    def use(self, attrs: list[int], delta: int) -> None:
        """Count (``delta=1``) or uncount (``-1``) entries' attributes (one id per entry using it)."""
        if attrs:
            counts = np.bincount(np.asarray(attrs, dtype=np.int64))
            if len(counts) > len(self.sub_counts):
                self.sub_counts = grown(self.sub_counts, len(counts))
            self.sub_counts[: len(counts)] += delta * counts

    # -- events ---------------------------------------------------------------------
    def observe(self, attrs: np.ndarray, n_events: int) -> None:
        """Add a batch's attribute ids (one per event entry) to the window."""
        if n_events == 0:
            return
        counts = np.bincount(attrs, minlength=0).astype(np.int64) if len(attrs) else np.zeros(0, np.int64)
        if len(counts) > len(self._event_counts):
            self._event_counts = grown(self._event_counts, len(counts))
        self._event_counts[: len(counts)] += counts
        self._batches.append((n_events, counts))
        self._events += n_events
        self.seen_events += n_events
        while len(self._batches) > 1 and self._events - self._batches[0][0] >= self.window:
            old_n, old = self._batches.popleft()
            self._event_counts[: len(old)] -= old
            self._events -= old_n

    def event_frequency(self, attrs: np.ndarray) -> np.ndarray:
        """Fraction of the window's events carrying each attribute (0 before any event)."""
        out = np.zeros(len(attrs), dtype=np.float64)
        if self._events:
            known = attrs < len(self._event_counts)
            out[known] = self._event_counts[attrs[known]] / self._events
        return out

    def sub_frequency(self, attrs: np.ndarray) -> np.ndarray:
        out = np.zeros(len(attrs), dtype=np.float64)
        known = attrs < len(self.sub_counts)
        out[known] = self.sub_counts[attrs[known]]
        return out

    def ranking(self, attrs: list[int]) -> list[int]:
        """``attrs`` ordered best pivot first: least event frequency, then least used
        by subscriptions, then smallest id (deterministic)."""
        arr = np.asarray(attrs, dtype=np.int64)
        ev = self.event_frequency(arr)
        sub = self.sub_frequency(arr)
        order = np.lexsort((arr, sub, ev))
        return [int(a) for a in arr[order]]

    def choose(self, attrs: list[int], selectivity: list[float] | None = None) -> int:
        """The pivot of an entry over ``attrs`` (Eq. 1); same order as :meth:`ranking`.

        With ``selectivity`` (per attribute, the share of its values on which the entry's
        predicate holds), both counts are weighted by it: the expected number of events in
        which the entry is reached through that pivot's predicate.
        """
        if len(attrs) == 1:
            return attrs[0]
        ev, n_ev, sub, n_sub = self._event_counts, len(self._event_counts), self.sub_counts, len(self.sub_counts)
        if selectivity is None:
            return min(attrs, key=lambda a: (int(ev[a]) if a < n_ev else 0, int(sub[a]) if a < n_sub else 0, a))
        return min(zip(attrs, selectivity, strict=True),
                   key=lambda x: ((int(ev[x[0]]) if x[0] < n_ev else 0) * x[1],
                                  (int(sub[x[0]]) if x[0] < n_sub else 0) * x[1], x[0]))[0]

    def cost(self, attrs: list[int]) -> float:
        """Sum of event frequencies (the CNF tie-break of footnote 8)."""
        return float(self.event_frequency(np.asarray(attrs, dtype=np.int64)).sum() if self._events
                     else self.sub_frequency(np.asarray(attrs, dtype=np.int64)).sum())

    @property
    def events_in_window(self) -> int:
        return self._events

    def memory_bytes(self) -> int:
        return int(self._event_counts.nbytes + self.sub_counts.nbytes
                   + sum(c.nbytes + 64 for _, c in self._batches))
