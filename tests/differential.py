"""The differential check of the matcher tests: a matcher against :mod:`matchers.oracle`.

:func:`check` compares every event's matches with the oracle's; :func:`subscriptions_of`
turns generated expression trees into subscriptions; :func:`insert_delete` is the add /
remove loop with a check after each change; :func:`check_trees` and :func:`check_pickled`
add subscriptions and check; :func:`check_updates` checks after a drawn delete and re-add. Random workloads: :mod:`tests.strategies`.
"""

from __future__ import annotations

import contextlib
import pickle
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

from matchers import oracle
from matchers.errors import SubscriptionError
from matchers.expr import STRING_OPS, Expr, Subscription, predicates

Live = Mapping[str, Subscription] | Iterable[Subscription]


def check(matcher: Any, live: Live, evs: Sequence[dict], structure: Callable[[Any], None] | None = None) -> int:
    """Assert that ``matcher`` matches each of ``evs`` as the oracle does over ``live``.

    ``live`` maps ids to the subscriptions the matcher holds (or lists them);
    ``structure`` checks the index's own invariants afterwards. Returns the number of matches.
    """
    subs = list(live.values()) if isinstance(live, Mapping) else list(live)
    total = 0
    for event, ids in zip(evs, matcher.match_events(evs), strict=True):
        want = oracle.match(subs, event)
        assert ids == want, f"{getattr(matcher, 'name', type(matcher).__name__)} on {event}"
        total += len(want)
    if structure is not None:
        structure(matcher)
    return total


def subscriptions_of(trees: Iterable[Expr], max_terms: int = 64) -> list[Subscription]:
    """Subscriptions ``h0``, ``h1``, ... of generated trees; a tree over the DNF bound is left out."""
    subs = []
    for i, tree in enumerate(trees):
        try:
            subs.append(Subscription.of(f"h{i}", tree, max_terms=max_terms))
        except SubscriptionError:
            continue
    return subs


def check_trees(matcher: Any, trees: Iterable[Expr], evs: Sequence[dict]) -> None:
    """Add the subscriptions of generated ``trees`` to ``matcher`` and check it on ``evs``."""
    subs = subscriptions_of(trees)
    matcher.add(subs)
    check(matcher, subs, evs)


def check_pickled(matcher: Any, subs: Sequence[Subscription], evs: Sequence[dict], gone: int) -> None:
    """Add ``subs`` to ``matcher``: a pickled copy matches ``evs`` as it does, and as the
    oracle does once the first ``gone`` subscriptions are removed from it."""
    matcher.add(subs)
    before = matcher.match_events(evs)
    clone = pickle.loads(pickle.dumps(matcher))
    assert clone.match_events(evs) == before
    clone.remove([s.id for s in subs[:gone]])
    check(clone, subs[gone:], evs)


def check_updates(matcher: Any, subs: Sequence[Subscription], evs: Sequence[dict], data: Any,
                  trees: st.SearchStrategy[Expr]) -> dict[str, Subscription]:
    """Add ``subs`` to ``matcher`` and check it on ``evs``, again after removing ids drawn from
    ``data`` and after re-adding drawn ids with trees drawn from ``trees`` (one over the DNF bound
    is left out). Returns the subscriptions the matcher holds then."""
    matcher.add(subs)
    live = {s.id: s for s in subs}
    check(matcher, live, evs)
    gone = data.draw(st.lists(st.sampled_from(sorted(live)), unique=True)) if live else []
    assert matcher.remove(gone) == len(gone)
    for sub_id in gone:
        del live[sub_id]
    check(matcher, live, evs)
    again = []
    for sub_id in data.draw(st.lists(st.sampled_from([s.id for s in subs]), unique=True)) if subs else []:
        with contextlib.suppress(SubscriptionError):
            again.append(Subscription.of(sub_id, data.draw(trees), max_terms=64))
    matcher.add(again)
    live.update({s.id: s for s in again})
    check(matcher, live, evs)
    return live


def no_regex(subs: Iterable[Subscription]) -> list[Subscription]:
    """The subscriptions without string operators (the phase-1 string evaluator's RE2 sets do not pickle)."""
    return [s for s in subs if all(p.op not in STRING_OPS for p in predicates(s.expr))]


def insert_delete(
    matcher: Any,
    pool: Sequence[Subscription],
    evs: Sequence[dict],
    rng: random.Random,
    steps: int,
    batch: int,
    gone: Callable[[int, int], int],
    after: Callable[[int, dict[str, Subscription], list[str]], None] | None = None,
    structure: Callable[[Any], None] | None = None,
    unknown: Sequence[str] = (),
) -> dict[str, Subscription]:
    """Add ``batch`` subscriptions sampled from ``pool``, then remove ``gone(step, n_live)`` live ones, ``steps`` times.

    The matcher is checked after each change; ``after(step, live, removed)`` may change it
    further (re-adds), keeping ``live`` in step. ``unknown`` ids are removed too and must
    count for nothing. Returns the live subscriptions.
    """
    live: dict[str, Subscription] = {}
    for step in range(steps):
        added = rng.sample(list(pool), batch)
        matcher.add(added)
        live.update({s.id: s for s in added})
        check(matcher, live, evs, structure)
        removed = rng.sample(sorted(live), min(len(live), gone(step, len(live))))
        assert matcher.remove(removed + list(unknown)) == len(removed)
        for sub_id in removed:
            del live[sub_id]
        check(matcher, live, evs, structure)
        if after is not None:
            after(step, live, removed)
    return live
