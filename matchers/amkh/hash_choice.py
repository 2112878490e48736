"""AMKH's adaptive choice of what to hash (Wu & Yu, Section 2).

* Every equality-only attribute (one whose clauses are all ``=``) is hashed with its
  clause IDs as they are (Eq. 2, second case).
* ``G``, the number of general attributes hashed: 0 when subscriptions carry more than
  3 clauses on equality-only attributes on average, 2 when they carry at most 2 from a
  small set (at most 3) of equality-only attributes, else 1.
* Which general attributes: the most selective ones, i.e. those whose non-equality
  clauses an event matches the smallest fraction of (measured on the events matched so
  far, 0.5 before any), among those used by at least 5% of the conjunctions.
* ``B`` for each of them: 2 when an event is expected to match more than 2 of its
  non-equality clauses (low selectivity: fold them into 2 residues), otherwise no
  folding (``B`` larger than any clause ID, written 0).

Re-evaluations are sticky, so that a configuration does not flip back and forth (each
change re-hashes every conjunction): a hashed general attribute is replaced only by one at
least 20% more selective, and its ``B`` changes only when the expected matches leave
``[1.5, 3]``.
"""

from __future__ import annotations

from typing import NamedTuple

from matchers.amkh.kernels import MAX_HASHED


class Config(NamedTuple):
    """What the hash function covers: attribute ids, and per attribute ``B`` (0: no folding)."""

    hashed: tuple[int, ...]
    folds: tuple[int, ...]


class Stats:
    """Counts the choice is made from, kept up to date by the matcher."""

    def __init__(self) -> None:
        self.n_conj = 0
        self.eq_occ: dict[int, int] = {}  # attribute -> equality clauses in live conjunctions
        self.neq_occ: dict[int, int] = {}  # attribute -> other clauses in live conjunctions
        self.cover: dict[int, int] = {}  # attribute -> conjunctions with a clause on it
        self.neq_pids: dict[int, int] = {}  # attribute -> distinct non-equality predicates
        self.sel_num: dict[int, float] = {}  # attribute -> non-equality clauses matched
        self.sel_den: dict[int, float] = {}  # attribute -> (events with it) x (its non-eq predicates)

    def selectivity(self, attr: int) -> float:
        den = self.sel_den.get(attr, 0.0)
        return self.sel_num.get(attr, 0.0) / den if den > 0 else 0.5


def choose(stats: Stats, G: int | None = None, B: int | None = None, hash_all: bool = False,
           current: Config | None = None) -> Config:
    """The configuration for the current subscriptions (``G``, ``B`` fixed when given).

    ``hash_all`` gives plain multiple key hashing (MKH, Eq. 1): every attribute, no folding.
    ``current``, the configuration in use, makes the choice sticky (see the module).
    """
    attrs = [a for a, c in stats.cover.items() if c > 0]
    eq_only = sorted(a for a in attrs if stats.neq_occ.get(a, 0) == 0)
    general = [a for a in attrs if stats.neq_occ.get(a, 0) > 0]
    if hash_all:
        chosen = sorted(attrs, key=lambda a: -stats.cover[a])[:MAX_HASHED]
        return Config(tuple(chosen), tuple(0 for _ in chosen))
    n = max(stats.n_conj, 1)
    if G is None:
        eq_clauses = sum(stats.eq_occ.get(a, 0) for a in eq_only) / n
        G = 0 if eq_clauses > 3 else (2 if eq_clauses <= 2 and len(eq_only) <= 3 else 1)
    eq_only = sorted(eq_only, key=lambda a: -stats.cover[a])[:MAX_HASHED - G]
    candidates = [a for a in general if stats.cover[a] >= 0.05 * n]
    candidates.sort(key=lambda a: (stats.selectivity(a), -stats.cover[a], a))
    previous = dict(zip(current.hashed, current.folds, strict=True)) if current is not None else {}
    picked = [a for a in candidates if a in previous][:G]
    for a in candidates:
        if a in picked:
            continue
        if len(picked) < G:
            picked.append(a)
            continue
        if not picked:
            break
        worst = max(picked, key=stats.selectivity)
        if stats.selectivity(a) < 0.8 * stats.selectivity(worst):
            picked[picked.index(worst)] = a
    picked.sort(key=lambda a: (stats.selectivity(a), -stats.cover[a], a))
    folds = []
    for a in picked:
        if B is not None:
            folds.append(B)
            continue
        expected = stats.selectivity(a) * stats.neq_pids.get(a, 0)
        fold = 2 if expected > 2 else 0
        if a in previous and 1.5 <= expected <= 3:
            fold = previous[a]
        folds.append(fold)
    return Config(tuple(eq_only) + tuple(picked), tuple(0 for _ in eq_only) + tuple(folds))
