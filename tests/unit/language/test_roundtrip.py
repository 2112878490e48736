"""Round trips: ``to_text`` -> ``parse_text``, ``to_json`` -> JSON text -> ``parse_json``, records."""

from __future__ import annotations

import json

import orjson
from hypothesis import given, settings

from matchers.expr import Subscription, to_text
from matchers.language import parse_json, parse_record, parse_text, to_json, to_record
from tests.unit.language.strategies import wide_exprs, wide_preds


@settings(max_examples=400, deadline=None)
@given(p=wide_preds)
def test_predicate_text_round_trip(p):
    assert parse_text(to_text(p)) == p


@settings(max_examples=300, deadline=None)
@given(tree=wide_exprs)
def test_text_round_trip(tree):
    assert parse_text(to_text(tree)) == tree


@settings(max_examples=300, deadline=None)
@given(tree=wide_exprs)
def test_json_round_trip_through_json_text(tree):
    form = to_json(tree)
    assert parse_json(form) == tree
    assert parse_json(json.loads(json.dumps(form))) == tree
    assert parse_json(orjson.loads(orjson.dumps(form))) == tree


@settings(max_examples=100, deadline=None)
@given(tree=wide_exprs)
def test_record_round_trip(tree):
    sub = Subscription.of("s-1", tree, max_terms=10**6, expires=1.7e9)
    for form in ("text", "json"):
        back = parse_record(json.loads(json.dumps(to_record(sub, form))), max_terms=10**6)
        assert back == sub and back.conjunctions == sub.conjunctions
