"""Event statistics and the cost model of Section 3.1 of Fabret et al.

``nu(p)`` is the probability that an event satisfies predicate ``p`` and ``mu(H)`` the
probability that an event's schema includes the schema of hash table ``H``.  Both are
measured on events: the matching kernel counts, for every event, its satisfied
predicate ids and its attributes that carry a satisfied equality predicate.  Before
enough events were seen, a prior fills in: ``1 / (number of distinct equality operands
on the attribute)`` for an equality predicate, ``DEFAULT_NU`` for any other.  The
``nu`` of a conjunction of equality predicates over distinct attributes is the product
of the predicates' ``nu`` (attributes independent), as is ``mu`` of a schema.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from matchers.arrays import grown

DEFAULT_NU = 0.5
"""Prior ``nu`` of a predicate other than an equality."""

NU_FLOOR = 1e-9
"""Smallest ``nu`` used (keeps logarithms finite)."""


@dataclass(frozen=True)
class CostParams:
    """Constants of the matching cost (3.1), in units of one subscription check, and of
    the space cost, in bytes.

    Attributes
    ----------
    k_r : retrieving one hash table of the configuration, per event.
    c_h, k_h : hashing an event into a table: ``c_h + k_h * |schema|``, times ``mu``.
        Calibrated on the development machine (W0, 300,000 subscriptions): a probe
        (slot, access entry, cluster metadata: cache misses, some 0.2 us) is worth about
        a hundred sequential row checks (under 2 ns each).
    check : checking one subscription of an accessed cluster.
    i_space : an empty hash table.
    h_space : one access entry of a hash table.
    k_space : one predicate reference in a cluster.
    """

    k_r: float = 0.05
    c_h: float = 60.0
    k_h: float = 20.0
    check: float = 1.0
    i_space: float = 1024.0
    h_space: float = 64.0
    k_space: float = 4.0


class EventStats:
    """Counts of satisfied predicates and attributes over the events seen.

    Parameters
    ----------
    prior_weight : how many events the prior is worth.
    decay : factor applied to the counts at every :meth:`snapshot` (1.0 keeps all
        history; below 1 the statistics follow a changing event stream).
    """

    def __init__(self, prior_weight: float = 20.0, decay: float = 1.0):
        self.prior_weight = prior_weight
        self.decay = decay
        self.pid_hits = np.zeros(64, dtype=np.float64)
        self.attr_hits = np.zeros(16, dtype=np.float64)
        self.events = 0.0
        self.events_total = 0

    def reserve(self, n_pids: int, n_attrs: int) -> None:
        """Make the count arrays cover ``n_pids`` predicate ids and ``n_attrs`` attributes."""
        self.pid_hits = grown(self.pid_hits, n_pids, 0.0)
        self.attr_hits = grown(self.attr_hits, n_attrs, 0.0)

    def seen(self, n: int) -> None:
        """Record that ``n`` more events were counted."""
        self.events += n
        self.events_total += n

    def log_nu(self, pid_eq_attr: np.ndarray, live: np.ndarray) -> np.ndarray:
        """``log(nu)`` of every predicate id (``live``: boolean mask of predicate ids in use)."""
        n = len(pid_eq_attr)
        self.reserve(n, 1)
        eq_attr = pid_eq_attr[:n]
        is_eq = (eq_attr >= 0) & live[:n]
        per_attr = np.bincount(eq_attr[is_eq], minlength=1).astype(np.float64)
        prior = np.full(n, DEFAULT_NU)
        prior[is_eq] = 1.0 / np.maximum(per_attr[eq_attr[is_eq]], 1.0)
        w = self.prior_weight
        nu = (self.pid_hits[:n] + w * prior) / (self.events + w)
        return np.log(np.clip(nu, NU_FLOOR, 1.0))

    def attr_presence(self, n_attrs: int) -> np.ndarray:
        """Probability that an event has a satisfied equality predicate on each attribute."""
        self.reserve(1, n_attrs)
        if self.events <= 0:
            return np.ones(n_attrs)
        return np.clip(self.attr_hits[:n_attrs] / self.events, 0.0, 1.0)

    def age(self) -> None:
        """Apply the decay to the counts."""
        if self.decay < 1.0:
            self.pid_hits *= self.decay
            self.attr_hits *= self.decay
            self.events *= self.decay

    def memory_bytes(self) -> int:
        return int(self.pid_hits.nbytes + self.attr_hits.nbytes)
