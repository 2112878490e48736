"""Comparison of the engine with the reference evaluator."""

from __future__ import annotations

import json

from matchers.cayuga.algebra import Event
from matchers.cayuga.engine import Engine, Match
from matchers.cayuga.language import TICK_MS, parse
from matchers.cayuga.reference import evaluate_all


def match_key(pos: int, m: Match) -> tuple:
    return (pos, m.sub_id, tuple(sorted(m.attrs.items())), m.t0, m.t1, m.witness)


def reference_matches(subs: dict[str, str], events: list[Event], until: int | None = None,
                      tick_ms: int = TICK_MS) -> list[tuple]:
    """The reference's matches of the subscriptions together (what they publish fed to the others)."""
    out = []
    for sub_id, records in evaluate_all({k: parse(v, tick_ms) for k, v in subs.items()}, events, until).items():
        out += [match_key(pos, Match(sub_id, r.attrs, r.t0, r.t1, r.witness)) for pos, r in records]
    return sorted(out, key=repr)


def engine_matches(subs: dict[str, str], events: list[Event], until: int | None = None, **kw) -> list[tuple]:
    eng = Engine(**kw)
    for sub_id, text in subs.items():
        eng.add(sub_id, text)
    return sorted((match_key(pos, m) for pos, m in eng.run(events, until)), key=repr)


def restarted_matches(subs: dict[str, str], events: list[Event], cut: int, until: int | None = None,
                      **kw) -> list[tuple]:
    """``engine_matches`` with the state exported after ``cut`` events and loaded into a new engine."""
    cut = min(cut, len(events))
    first, second = Engine(**kw), Engine(**kw)
    for eng in (first, second):
        for sub_id, text in subs.items():
            eng.add(sub_id, text, since=0)
    out = [match_key(pos, m) for pos, m in first.run(events[:cut])]
    second.load_instances(json.loads(json.dumps(first.export_instances())), first.clock)  # NaN survives
    out += [match_key(cut + pos, m) for pos, m in second.run(events[cut:], until)]
    return sorted(out, key=repr)


def same(matches: list[tuple]) -> list[str]:
    """Matches compared by their text (a NaN equals no other NaN object)."""
    return [repr(m) for m in matches]
