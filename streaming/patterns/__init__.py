"""Stateful (Cayuga) subscriptions as part of the service: the "patterns" queries.

* :mod:`.registry`: the versioned pattern registry and the worker's compiled engines;
* :mod:`.keyed`: event records to rows keyed by the patterns' partition attribute;
* :mod:`.operator`: the keyed-state operator (lifecycle, state schema);
* :mod:`.census`: the attributes each stream carries, and the patterns reading one that none has;
* :mod:`.queries`: the two streaming queries, started by ``python -m streaming run``.

Settings: ``[patterns]`` (:class:`streaming.config.PatternsSettings`); notifications:
:func:`streaming.notifications.pattern` (``kind = "pattern"``); errors: one record per bad
input across the match and patterns queries (see :mod:`.keyed`).
"""

from streaming.patterns.queries import start_patterns_query, start_subscriptions_query, starters

__all__ = ["start_patterns_query", "start_subscriptions_query", "starters"]
