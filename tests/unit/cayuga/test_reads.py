"""Which attributes of which streams a subscription reads (the unknown-attribute warning)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from matchers.cayuga.reads import reads
from matchers.errors import SubscriptionError

from .streams import TABLE1
from .test_hypothesis import subscriptions


def _reads(text: str) -> dict[str, list[tuple[str, str]]]:
    return {r.text: sorted(r.sources) for r in reads(text)}


def test_scopes_name_their_streams():
    assert _reads("FILTER{prcie > 3}(Stock) NEXT{$2.name = $1.name AND $2.vol > 1} Trade") == {
        "prcie": [("Stock", "prcie")], "$.name": [("Stock", "name")],
        "$2.name": [("Trade", "name")], "$2.vol": [("Trade", "vol")]}


def test_projections_rename_and_computed_values_are_not_reads():
    got = _reads(TABLE1["S3"])  # FILTER{price > 1.05 * p1}((SELECT name, price AS p1 FROM Stock) NEXT ... Stock)
    assert got["p1"] == [("Stock", "p1"), ("Stock", "price")]  # the left's price, or a p1 of the right event
    got = _reads("FILTER{avg > 1 AND DUR > 2}((SELECT price * 2 AS avg FROM S) NEXT{TRUE} T)")
    assert "avg" not in got  # computed on the left: the right event may carry it, but need not
    # the SELECT is over the NEXT's records: a comes from either event
    assert _reads("SELECT a AS b FROM S NEXT{$2.b = 1} T") == {"a": [("S", "a"), ("T", "a")], "$2.b": [("T", "b")]}


def test_a_record_so_far_comes_from_every_stream_before():
    got = _reads("A NEXT{TRUE} B NEXT{$2.x = $1.k} C")
    assert got["$.k"] == [("A", "k"), ("B", "k")] and got["$2.x"] == [("C", "x")]
    got = _reads("FILTER{zz = 1}(A NEXT{TRUE} B)")
    assert got["zz"] == [("A", "zz"), ("B", "zz")]


def test_fold_aggregates_and_unless():
    got = _reads("SELECT name, lo FROM (SELECT name, price AS lo FROM Stock)"
                 " FOLD{$2.name = $.name, $2.price >= $.lo, min($.lo, $2.price) AS lo} Stock")
    assert "$.lo" not in got and "lo" not in got  # an aggregate
    assert got["$2.price"] == [("Stock", "price")]
    got = _reads("FILTER{ok = FALSE}(Login) UNLESS{$2.user = $1.user AND $2.ok = TRUE, 5 min} Login")
    assert got == {"ok": [("Login", "ok")], "$.user": [("Login", "user")], "$2.user": [("Login", "user")],
                   "$2.ok": [("Login", "ok")]}


def test_union_and_dropped_attributes():
    got = _reads("FILTER{a > 1}(S) UNION FILTER{b > 1}(T)")
    assert got == {"a": [("S", "a")], "b": [("T", "b")]}
    assert _reads("FILTER{c > 1}(SELECT a FROM S)") == {"a": [("S", "a")]}  # c is dropped by the projection


def test_a_bad_pattern_raises():
    with pytest.raises(SubscriptionError):
        reads("S NEXT{x = 1} S")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subscriptions())
def test_generated_subscriptions(text):
    """Every read of the hypothesis subscriptions names a stream and an attribute of the text,
    and every attribute of the text whose value comes straight from an event is read."""
    import re

    got = reads(text)
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    for r in got:
        assert r.sources and all(s in ("A", "B") and a in words for s, a in r.sources)
    assert {r.text.rsplit(".", 1)[-1] for r in got} <= words
    if "SELECT" not in text and "AS" not in text:  # no renaming, no computed names: every x and y is read
        named = set(re.findall(r"\b[xy]\b", re.sub(r"\$[12]?\.", " ", text)))
        assert named <= {a for r in got for _, a in r.sources}
