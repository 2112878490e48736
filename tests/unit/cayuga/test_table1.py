"""Table 1 (S1-S7) and AutQ of Demers et al.: engine against the reference evaluator."""

from __future__ import annotations

import pytest

from matchers.cayuga.algebra import Event
from matchers.cayuga.language import parse
from matchers.cayuga.reference import evaluate

from .helpers import engine_matches, reference_matches
from .streams import TABLE1, rss_posts, stock_ticks

CONFIGS = [dict(merge=True, indexed=True), dict(merge=False, indexed=True), dict(merge=True, indexed=False)]


def _events(name: str, seed: int) -> list[Event]:
    return rss_posts(250, seed) if name in ("S6", "S7") else stock_ticks(400, seed)


@pytest.mark.parametrize("config", CONFIGS, ids=["merged+indexed", "private+indexed", "merged+scan"])
@pytest.mark.parametrize("name", sorted(TABLE1))
def test_table1_engine_equals_reference(name, config):
    total = 0
    for seed in (1, 2, 3):
        events = _events(name, seed)
        expected = reference_matches({name: TABLE1[name]}, events)
        assert engine_matches({name: TABLE1[name]}, events, **config) == expected
        total += len(expected)
    assert total > 0, "the generated streams should exercise the subscription"


def test_all_table1_subscriptions_in_one_engine():
    stock = stock_ticks(300, 5)
    posts = [Event(e.id, e.stream, e.t0 + 10_000, e.t1 + 10_000, e.attrs) for e in rss_posts(200, 5)]
    events = stock + posts
    assert engine_matches(TABLE1, events) == reference_matches(TABLE1, events)


def _tick(i, name, price, vol=100):
    return Event(f"e{i}", "Stock", i, i, {"name": name, "price": price, "vol": vol})


def test_reference_s3_by_hand():
    events = [_tick(0, "IBM", 100), _tick(1, "MSFT", 10), _tick(2, "IBM", 104), _tick(3, "IBM", 110), _tick(4, "MSFT", 11)]
    out = [(p, r.witness) for p, r in evaluate(parse(TABLE1["S3"]), events)]
    # IBM 100 -> next IBM is 104 (not > 105): no match; IBM 104 -> 110 > 109.2: match;
    # MSFT 10 -> MSFT 11 > 10.5: match.
    assert out == [(3, ("e2", "e3")), (4, ("e1", "e4"))]


def test_reference_s2_first_msft_only():
    events = [_tick(0, "IBM", 120), _tick(1, "MSFT", 30), _tick(2, "MSFT", 20), _tick(3, "IBM", 130), _tick(4, "MSFT", 24)]
    out = [(p, r.witness, r.attrs["price"]) for p, r in evaluate(parse(TABLE1["S2"]), events)]
    # the first MSFT after IBM@0 costs 30 (not < 25): nothing; after IBM@3 the first is 24.
    assert out == [(4, ("e3", "e4"), 24)]


def test_reference_s4_monotonic_run():
    prices = [10, 11, 11, 12, 9, 10, 11, 12, 13, 14, 15, 16]
    events = [_tick(i, "IBM", p) for i, p in enumerate(prices)]
    text = "FILTER{DUR >= 8}(Stock FOLD{$2.name = $.name, $2.price >= $.price} Stock)"
    out = [(r.witness[0], r.witness[-1]) for _, r in evaluate(parse(text), events)]
    # runs starting at e4 (9) reach 8 ticks at e11; no earlier run lasts 8 ticks
    assert out == [("e4", "e11")]


def test_reference_fold_aggregate_average():
    prices = [10, 20, 30]
    events = [_tick(i, "IBM", p) for i, p in enumerate(prices)]
    text = (
        "(SELECT *, price AS avg, 1 AS cnt FROM Stock)"
        " FOLD{TRUE, TRUE, ($.cnt * $.avg + $2.price) / ($.cnt + 1) AS avg, $.cnt + 1 AS cnt} Stock"
    )
    out = {r.witness: (r.attrs["avg"], r.attrs["cnt"]) for _, r in evaluate(parse(text), events)}
    assert out[("e0", "e1", "e2")] == (20, 3)
    assert out[("e1", "e2")] == (25, 2)


def test_interval_events_do_not_overlap():
    # a right event must start after the left one ends
    events = [
        Event("a", "S", 0, 5, {"k": 1}),
        Event("b", "S", 3, 6, {"k": 1}),
        Event("c", "S", 6, 7, {"k": 1}),
    ]
    text = "S NEXT{$2.k = $1.k} S"
    out = [(r.witness, r.t0, r.t1) for _, r in evaluate(parse(text), events)]
    assert out == [(("a", "c"), 0, 7)]
    assert engine_matches({"q": text}, events) == reference_matches({"q": text}, events)
