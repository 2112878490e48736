"""The engine's own mechanics: merging, subscription changes, expiry, state, indexes."""

from __future__ import annotations

import math
import random

import pytest

from matchers.cayuga import algebra as A
from matchers.cayuga.engine import Engine, Match
from matchers.cayuga.language import parse
from matchers.cayuga.reference import evaluate
from matchers.cayuga.static import StaticFilters, holds
from matchers.errors import SubscriptionError

from .helpers import engine_matches, match_key, reference_matches
from .streams import TABLE1, stock_ticks

S3 = TABLE1["S3"]


def _sub_family(n: int, seed: int) -> dict[str, str]:
    """S3-like subscriptions with thresholds from a small set, so prefixes repeat."""
    rng = random.Random(seed)
    out = {}
    for i in range(n):
        sym = rng.choice(["IBM", "MSFT", "ORCL"])
        p = rng.choice([20, 50, 100])
        k = rng.choice([1.02, 1.05])
        out[f"q{i}"] = (
            f"FILTER{{price > {k} * p1}}((SELECT name, price AS p1 FROM FILTER{{name = '{sym}' AND price > {p}}}(Stock))"
            " NEXT{$2.name = $1.name} Stock)"
        )
    return out


def test_merging_shares_nodes_and_keeps_results():
    subs = _sub_family(40, 1)
    events = stock_ticks(300, 4)
    merged, private = Engine(merge=True), Engine(merge=False)
    for sid, text in subs.items():
        merged.add(sid, text)
        private.add(sid, text)
    assert len(merged.nodes) < len(private.nodes) == 40
    a = sorted((match_key(p, m) for p, m in merged.run(events)), key=repr)
    b = sorted((match_key(p, m) for p, m in private.run(events)), key=repr)
    assert a == b == reference_matches(subs, events)
    assert merged.instances <= private.instances


def test_remove_and_readd_mid_stream():
    subs = _sub_family(10, 2)
    events = stock_ticks(300, 6)
    eng = Engine()
    for sid, text in subs.items():
        eng.add(sid, text)
    got = []
    for i, e in enumerate(events):
        if i == 100:
            assert eng.remove("q0") and eng.remove("q1")
            assert not eng.remove("q0")
        if i == 200:
            eng.add("q0", subs["q0"])
        got.extend(match_key(i, m) for m in eng.process(e))
    got.sort(key=repr)
    # q2.. over everything; q1 until event 99; q0 until 99 and again from 200 (fresh state)
    expected = [k for k in reference_matches(subs, events) if k[1] not in ("q0", "q1")]
    early = reference_matches({"q0": subs["q0"], "q1": subs["q1"]}, events[:100])
    late = [(k[0] + 200,) + k[1:] for k in reference_matches({"q0": subs["q0"]}, events[200:])]
    assert got == sorted(expected + early + late, key=repr)


def test_removing_every_subscription_frees_the_automaton():
    subs = _sub_family(10, 3)
    eng = Engine()
    for sid, text in subs.items():
        eng.add(sid, text)
    eng.run(stock_ticks(100, 1))
    for sid in subs:
        eng.remove(sid)
    assert not eng.nodes and not eng.starts and len(eng.static) == 0 and eng.instances == 0


def test_replace_subscription():
    eng = Engine()
    eng.add("a", "FILTER{price > 1000}(Stock)")
    eng.add("a", "FILTER{price > 0}(Stock)")
    assert len(eng) == 1
    assert len(eng.process(A.Event("x", "Stock", 0, 0, {"price": 5}))) == 1


def test_bad_subscription_names_its_id():
    eng = Engine()
    with pytest.raises(SubscriptionError) as info:
        eng.add("bad", "S NEXT{x = 1} S")
    assert info.value.sub_id == "bad"
    assert len(eng) == 0


def test_dur_bound_drops_instances():
    text = "FILTER{DUR <= 5}(Stock NEXT{$2.name = $1.name AND $2.price > 1000000} Stock)"
    eng = Engine()
    eng.add("q", text)
    events = stock_ticks(500, 1)
    eng.run(events)
    # only instances started in the last 5 ticks can still complete
    assert eng.instances <= sum(1 for e in events if e.t1 > events[-1].t1 - 5)
    unbounded = Engine()
    unbounded.add("q", "Stock NEXT{$2.name = $1.name AND $2.price > 1000000} Stock")
    unbounded.run(events)
    assert unbounded.instances == len(events)


def test_export_and_load_instances_resumes_exactly():
    subs = dict(TABLE1)
    del subs["S6"], subs["S7"]
    events = stock_ticks(400, 3)
    eng = Engine()
    for sid, text in subs.items():
        eng.add(sid, text)
    got = [match_key(i, m) for i, e in enumerate(events[:200]) for m in eng.process(e)]
    state, clock = eng.export_instances(), eng.clock
    fresh = Engine()
    for sid, text in subs.items():
        fresh.add(sid, text)
    assert fresh.load_instances(state, clock) == len(state)
    got += [match_key(i + 200, m) for i, e in enumerate(events[200:]) for m in fresh.process(e)]
    assert sorted(got, key=repr) == reference_matches(subs, events)


def test_out_of_order_event_is_rejected():
    eng = Engine()
    eng.add("q", S3)
    eng.process(A.Event("a", "Stock", 5, 5, {"name": "IBM", "price": 1}))
    with pytest.raises(ValueError, match="before the previous"):
        eng.process(A.Event("b", "Stock", 4, 4, {"name": "IBM", "price": 1}))
    with pytest.raises(ValueError, match="before t0"):
        eng.process(A.Event("c", "Stock", 7, 6, {"name": "IBM", "price": 1}))


def test_union_duplicates_are_reported_once():
    text = "FILTER{price > 10}(Stock) UNION FILTER{price > 5}(Stock)"
    events = stock_ticks(50, 1)
    assert engine_matches({"u": text}, events) == reference_matches({"u": text}, events)
    text = "(FILTER{price > 10}(Stock) UNION FILTER{price > 5}(Stock)) NEXT{$2.name = $1.name} Stock"
    assert engine_matches({"u": text}, events) == reference_matches({"u": text}, events)


def test_types_follow_the_null_rule():
    events = [
        A.Event("a", "S", 0, 0, {"k": True, "v": 1}),
        A.Event("b", "S", 1, 1, {"k": 1, "v": 2}),
        A.Event("c", "S", 2, 2, {"k": True, "v": "x"}),
        A.Event("d", "S", 3, 3, {"v": 3}),
        A.Event("e", "S", 4, 4, {"k": True, "v": 4}),
    ]
    subs = {
        "eq": "S NEXT{$2.k = $1.k} S",
        "ne": "S NEXT{NOT $2.k = $1.k} S",
        "rng": "S NEXT{$2.v > $1.v} S",
    }
    got = engine_matches(subs, events)
    assert got == reference_matches(subs, events)
    assert {(k[1], k[5]) for k in got} >= {("eq", ("a", "c")), ("rng", ("a", "b"))}


def test_static_filters_against_brute_force():
    rng = random.Random(7)
    sf = StaticFilters()
    conj = {}
    ops = ["=", "!=", "<", "<=", ">", ">=", "contains"]
    for cid in range(300):
        atoms = []
        for _ in range(rng.randint(0, 3)):
            op = rng.choice(ops)
            attr = rng.choice(["a", "b", "s"])
            c = rng.choice(["x", "xy", "y"]) if attr == "s" or op == "contains" else rng.choice([0, 1, 2, 2.0, True])
            atoms.append((attr, op, c))
        conj[cid] = tuple(atoms)
        sf.add(cid, "S", conj[cid])
    for cid in range(0, 300, 3):
        sf.remove(cid)
        del conj[cid]
    for _ in range(200):
        ev = {k: rng.choice([0, 1, 2, 1.0, True, "x", "xyz"]) for k in ("a", "b", "s") if rng.random() < 0.8}
        expected = {cid for cid, atoms in conj.items() if all(holds(a, ev) for a in atoms)}
        assert sf.match("S", ev) == expected
    assert sf.match("T", {"a": 1}) == set()


def test_closures_agree_with_interpreter():
    from matchers.cayuga.closures import pred_fn

    text = (
        "S NEXT{($2.a + $1.b * 2 > 3 OR NOT contains($2.s, $1.s)) AND -$2.a < 5 AND $2.a % 2 = 0"
        " AND $2.a / $1.b >= 0 AND DUR < 9 AND $2.s + 'z' != 'xz'} S"
    )
    pred = parse(text).pred
    fn = pred_fn(pred)
    rng = random.Random(3)
    values = [0, 1, 2, 3.5, -1, "x", "", True, None]
    for _ in range(2000):
        r1 = {k: v for k in ("a", "b", "s") if (v := rng.choice(values)) is not None}
        r2 = {k: v for k in ("a", "b", "s") if (v := rng.choice(values)) is not None}
        d = rng.randint(1, 12)
        ctx = {A.FIRST: r1, A.LAST: r1, A.SECOND: r2}
        assert fn(r1, r1, r2, d) == A.eval_pred(pred, ctx, d)


def test_reference_rejects_unordered_input():
    with pytest.raises(ValueError):
        evaluate(parse("S"), [A.Event("a", "S", 3, 3, {}), A.Event("b", "S", 1, 1, {})])


@pytest.mark.parametrize("matcher", ["counting", "propagation"])
def test_static_predicates_through_project_matchers(matcher):
    subs = _sub_family(30, 5)
    subs.update({k: v for k, v in TABLE1.items() if k not in ("S6", "S7")})
    subs["bools"] = "FILTER{flag < TRUE}(Stock) NEXT{TRUE} Stock"
    events = stock_ticks(300, 2)
    eng = Engine(static_matcher=matcher)
    for sid, text in subs.items():
        eng.add(sid, text)
    got = []
    for lo in range(0, len(events), 64):
        got += [match_key(lo + i, m) for i, m in eng.process_batch(events[lo:lo + 64])]
    assert sorted(got, key=repr) == reference_matches(subs, events)


def test_typed_comparisons_agree_with_compare():
    """Comparisons compiled per operand type give the algebra's three-valued result
    (same value and type: True, False or None) for every operand type and both sides."""
    from matchers.cayuga.closures import pred_fn

    values = [0, 1, 2, 1.0, 2.5, float("nan"), True, False, "a", "b", "", None]
    consts = [1, 1.0, 2.5, "a", True]
    for op in A.FLIP:
        preds = [A.Cmp(op, A.Attr(A.SECOND, "x"), A.Attr(A.LAST, "y"))]
        preds += [A.Cmp(op, A.Attr(A.SECOND, "x"), A.Const(k)) for k in consts]
        preds += [A.Cmp(op, A.Const(k), A.Attr(A.SECOND, "x")) for k in consts]
        for pred in preds:
            fn = pred_fn(pred)
            for x in values:
                for y in values:
                    r2 = {} if x is None else {"x": x}
                    r1 = {} if y is None else {"y": y}
                    ctx = {A.FIRST: r1, A.LAST: r1, A.SECOND: r2}
                    want = A.eval_pred(pred, ctx, 1)
                    got = fn(r1, r1, r2, 1)
                    assert got is want or (type(got) is type(want) and got == want), (pred, x, y, got, want)


@pytest.mark.parametrize("indexed", [True, False])
def test_equalities_through_buckets_keep_the_null_rule(indexed):
    """Bucket keys equal exactly when the algebra's ``=`` holds: 1 and 1.0 meet, TRUE and
    1 do not, NaN never equals itself, a missing attribute never matches."""
    nan = float("nan")
    values = [1, 1.0, True, 1, nan, nan, "1", 2, None, 1.0, False, 0]
    events = [A.Event(f"e{i}", "S", i, i, {"k": v, "v": i} if v is not None else {"v": i})
              for i, v in enumerate(values)]
    subs = {"eq": "S NEXT{$2.k = $1.k} S", "eq2": "S NEXT{$2.k = $.k AND $2.v > $1.v + 1} S",
            "fold": "S FOLD{$2.k = $.k, TRUE} S"}
    assert engine_matches(subs, events, indexed=indexed) == reference_matches(subs, events)


def test_nested_folds_report_a_witness_once_per_record():
    """Two derivations of the same witness (rebind at the first FOLD, or forward then
    rebind at the second) are one notification when their records are equal, two when not."""
    subs = {
        "same": "(S FOLD{TRUE, TRUE} S) FOLD{TRUE, TRUE} S",
        "differ": "((SELECT *, 0 AS c FROM S) FOLD{TRUE, TRUE, $.c + 1 AS c} S) FOLD{TRUE, TRUE, $.c + 10 AS c} S",
    }
    events = [A.Event(f"e{i}", "S", i, i, {"v": i}) for i in range(5)]
    got = engine_matches(subs, events)
    assert got == reference_matches(subs, events)
    witnesses = [k[5] for k in got if k[1] == "same"]
    assert len(witnesses) == len(set(witnesses))
    assert len([k for k in got if k[1] == "differ"]) > len(set(k[5] for k in got if k[1] == "differ"))


def test_constants_of_different_types_are_not_shared():
    """``k = TRUE`` and ``k = 1`` compile to different closures (the compile caches are
    keyed by terms, and ``Const(True)`` is not ``Const(1)``)."""
    subs = {"t": "FILTER{k = TRUE}(S) NEXT{$2.k = TRUE} S", "one": "FILTER{k = 1}(S) NEXT{$2.k = 1} S",
            "f": "FILTER{k = 1.0}(S) NEXT{$2.k != 1.0} S"}
    events = [A.Event(f"e{i}", "S", i, i, {"k": v}) for i, v in enumerate([True, 1, 1.0, True, 1, 0, True])]
    assert engine_matches(subs, events) == reference_matches(subs, events)


def test_removing_a_union_sharing_its_start_frees_every_node():
    """Chains of one subscription sharing a start: removing it unlinks all of them, and a
    later subscription on the same prefix does not report to the removed one."""
    eng = Engine()
    eng.add("u", "(S NEXT{TRUE} A) UNION (S NEXT{TRUE} B)")
    eng.remove("u")
    assert not eng.nodes and not eng.starts
    eng.add("v", "S NEXT{TRUE} B")
    got = eng.run([A.Event("1", "S", 1, 1, {}), A.Event("2", "B", 2, 2, {})])
    assert [m.sub_id for _, m in got] == ["v"]


def test_duration_filters_after_an_operator_agree_with_the_reference():
    """Forward edges filtering only on ``DUR`` are tested as plain comparisons in the
    engine (:func:`.automaton.dur_tests`): every operator, either side, a conjunction,
    fractional, infinite and NaN constants, against the reference evaluator."""
    from matchers.cayuga.automaton import dur_tests
    from matchers.cayuga.reference import evaluate_all

    nxt = parse("Stock NEXT{$2.name = $1.name} Stock")
    subs: dict[str, A.Expr] = {}
    for op in ("=", "!=", "<", "<=", ">", ">="):
        for k in (3, 3.5, 0, -1, math.inf, -math.inf, math.nan):
            subs[f"{op}{k}"] = A.Filter(A.Cmp(op, A.Dur(), A.Const(k)), nxt)
            subs[f"{k}{op}"] = A.Filter(A.Cmp(op, A.Const(k), A.Dur()), nxt)
    subs["and"] = A.Filter(A.And((A.Cmp(">", A.Dur(), A.Const(2)), A.Cmp("<=", A.Dur(), A.Const(6.5)))), nxt)
    subs["two"] = A.Filter(A.Cmp(">=", A.Dur(), A.Const(2)), A.Filter(A.Cmp("<", A.Dur(), A.Const(9)), nxt))
    for expr in subs.values():
        assert dur_tests((("filter", expr.pred),)) is not None  # the fast form is the one tested
    events = stock_ticks(300, 5, spacing=2)
    eng = Engine()
    for sub_id, expr in subs.items():
        eng.add(sub_id, expr)
    got = sorted((match_key(pos, m) for pos, m in eng.run(events)), key=repr)
    want = sorted((match_key(pos, Match(sub_id, r.attrs, r.t0, r.t1, r.witness))
                   for sub_id, records in evaluate_all(subs, events).items() for pos, r in records), key=repr)
    assert got == want and len({k[1] for k in got}) > 10


def test_a_nan_duration_bound_does_not_hold_back_expiry():
    """An instance whose deadline is NaN (``DUR <= NaN``: it can never fire) does not keep
    the instances of other subscriptions from expiring."""
    never = A.Filter(A.Cmp("<=", A.Dur(), A.Const(math.nan)),
                     parse("Stock NEXT{$2.name = $1.name AND $2.price > 1000000} Stock"))
    eng = Engine()
    eng.add("nan", never)
    eng.add("q", "FILTER{DUR <= 5}(Stock NEXT{$2.name = $1.name AND $2.vol > 1000000} Stock)")
    events = stock_ticks(400, 2)
    assert eng.run(events) == []
    recent = sum(1 for e in events if e.t1 > events[-1].t1 - 5)
    assert eng.instances <= len(events) + recent  # every "nan" instance, the last 5 ticks of "q"
    assert eng.next_expiry() is not None
