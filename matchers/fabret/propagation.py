"""Propagation (Fabret et al., Sections 5 and 6): single predicates as access predicates.

Each conjunction is clustered under one of its equality predicates, the one with the
lowest ``nu`` at insertion time (a conjunction without an equality predicate under its
most selective predicate of any operator); no multi-attribute hash table is used.
"""

from __future__ import annotations

from matchers.base import register
from matchers.fabret.twophase import TwoPhaseMatcher


@register("propagation")
class PropagationMatcher(TwoPhaseMatcher):
    """Two-phase matching with single-predicate access (the paper's "propagation")."""
