"""Differential check of the normal forms against the oracle on the expression tree.

For random trees (every operator, NOT anywhere) and random events (attributes missing
or of another type), the tree's truth equals the OR over DNF conjunctions of the AND of
their predicates, and the AND over CNF clauses of the OR of theirs.  Trees also go
through the text and JSON forms first, so that what a user registers is what is tested.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers import oracle
from matchers.expr import Subscription, cnf, dnf, to_text
from matchers.language import parse_json, parse_text, to_json
from tests.unit.language.strategies import small_events, small_exprs

BOUND = 4096


def _dnf_truth(tree, event) -> bool:
    return any(all(oracle.holds(p, event) for p in conj) for conj in dnf(tree, BOUND))


def _cnf_truth(tree, event) -> bool:
    return all(any(oracle.holds(p, event) for p in clause) for clause in cnf(tree, BOUND))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=small_exprs, events=st.lists(small_events, min_size=1, max_size=8))
def test_dnf_and_cnf_agree_with_the_tree(tree, events):
    parsed = parse_text(to_text(tree))
    assert parse_json(to_json(tree)) == parsed == tree
    for event in events:
        truth = oracle.evaluate(tree, event)
        assert _dnf_truth(tree, event) == truth
        assert _cnf_truth(tree, event) == truth


def test_normal_forms_on_written_subscriptions():
    """Hand-written subscriptions through the text form, over an exhaustive little event space."""
    texts = [
        "NOT (a < 1 OR s LIKE 'a%') AND (b BETWEEN 0 AND 2 OR NOT f = true)",
        "NOT NOT (a IN (0, 1) AND NOT s MATCHES '^a.c$') OR t.u NOT LIKE '%b%'",
        "(a = 1 OR b = 2) AND (s = 'ab' OR NOT (t.u > 'a' AND f != false))",
        "NOT (a NOT BETWEEN 1 AND 2 AND (s NOT IN ('a', 'b') OR b <= 2.5))",
        "a <> 1 AND NOT (NOT (b >= 0) OR NOT (s LIKE '%\\\\%%' OR s LIKE 'a_c'))",
    ]
    rng = random.Random(7)
    values = (0.0, 1.0, 2.0, 2.5, 3.0, "", "a", "ab", "abc", "a%c", "b", True, False)
    for text in texts:
        tree = parse_text(text)
        sub = Subscription.of("s", tree)
        for _ in range(400):
            event = {k: rng.choice(values) for k in ("a", "b", "s", "t.u", "f") if rng.random() < 0.8}
            truth = oracle.evaluate(tree, event)
            assert any(all(oracle.holds(p, event) for p in c) for c in sub.conjunctions) == truth, (text, event)
            assert _cnf_truth(tree, event) == truth, (text, event)
