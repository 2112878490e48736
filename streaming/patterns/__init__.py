"""Stateful (Cayuga) subscriptions as part of the service: the "patterns" query.

* :mod:`.registry`: the judging of pattern records (the match query's registry stores them) and
  the worker's view of them (:mod:`streaming.registry_columns.view`): compiled engines, partition keys;
* :mod:`.keyed`: event records to rows keyed by the patterns' partition attribute;
* :mod:`.operator`: the keyed-state operator (lifecycle, state schema);
* :mod:`.census`: the attributes each stream carries, and the patterns reading one that none has;
* :mod:`.queries`: the streaming query, started by ``python -m streaming run``.

Settings: ``[patterns]`` (:class:`streaming.config.PatternsSettings`); notifications:
:func:`streaming.notifications.pattern` (``kind = "pattern"``); errors: one record per bad
input across the match and patterns queries (see :mod:`.keyed`); pattern records are the
match query's, like every subscription record.
"""

from streaming.patterns.queries import start_patterns_query, starters

__all__ = ["start_patterns_query", "starters"]
