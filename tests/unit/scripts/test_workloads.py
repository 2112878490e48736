"""Workload generators: deterministic per seed, faithful to their parameters, every operator used."""

from __future__ import annotations

import json
import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from matchers import base
from matchers.brute import BruteForceMatcher
from matchers.expr import AFFIX_ICASE_OPS, ICASE_OPS, PRESENCE_OPS, Kind, Op, Subscription, to_text
from scripts import domains, draws
from scripts import workloads as wl
from scripts.bench import harness
from scripts.workloads import FABRET_WORKLOADS, WORKLOADS, generate


def preds_of(sub: Subscription):
    assert len(sub.conjunctions) == 1
    return sub.conjunctions[0]


def texts(w: draws.Workload) -> tuple[list[tuple[str, str]], list[dict]]:
    return [(s.id, to_text(s.expr)) for s in w.subscriptions], w.events


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_deterministic_for_a_seed(name):
    a = generate(name, n_subs=300, n_events=50, seed=7)
    b = generate(name, n_subs=300, n_events=50, seed=7)
    c = generate(name, n_subs=300, n_events=50, seed=8)
    assert texts(a) == texts(b)
    assert [s.conjunctions for s in a.subscriptions] == [s.conjunctions for s in b.subscriptions]
    assert texts(a) != texts(c)
    assert len(a.subscriptions) == 300 and len(a.events) == 50
    assert len({s.id for s in a.subscriptions}) == 300
    # subscriptions and events come from independent streams
    d = generate(name, n_subs=300, n_events=10, seed=7)
    assert texts(d)[0] == texts(a)[0]


@pytest.mark.parametrize("workload", sorted(FABRET_WORKLOADS))
def test_fabret_respects_its_specification(workload):
    spec = FABRET_WORKLOADS[workload]
    w = wl.fabret(workload, n_subs=2000, n_events=200, seed=1)
    n_fixed = len(spec["fixed"])
    pool = {f"a{i}" for i in range(spec["attr_offset"], spec["attr_offset"] + spec["n_t"])}
    fixed_names = [f"a{spec['attr_offset'] + j}" for j in range(n_fixed)]
    fixed_ops = [draws.OPS[o] for o in spec["fixed"]]
    free_used = Counter()
    for sub in w.subscriptions:
        conj = preds_of(sub)
        assert len(conj) == n_fixed + spec["n_free"]
        by_attr = {p.attr: p for p in conj}
        assert len(by_attr) == len(conj)  # distinct attributes
        for name, op in zip(fixed_names, fixed_ops, strict=True):
            assert by_attr[name].op is op
        free = [p for p in conj if p.attr not in fixed_names]
        assert all(p.op is Op.EQ and p.attr in pool for p in free)
        free_used.update(p.attr for p in free)
        for p in conj:
            hi = spec["lo"] + spec["skew_values"] - 1 if spec["skew_values"] and p.attr == fixed_names[0] else spec["hi"]
            assert spec["lo"] <= p.operand <= hi and p.kind is Kind.NUM
    assert set(free_used) == pool - set(fixed_names)  # every free name gets used
    for e in w.events:
        assert list(e) == [f"a{i}" for i in range(spec["n_a"])]
        assert all(spec["lo"] <= v <= spec["hi"] for v in e.values())
    if spec["skew_values"]:
        assert {e[fixed_names[0]] for e in w.events} == {1, 2}
    else:
        assert len({e["a0"] for e in w.events}) == spec["hi"] - spec["lo"] + 1


def test_fabret_overrides_and_errors():
    w = wl.fabret("W0", n_subs=100, n_events=5, seed=0, lo=1, hi=3)
    assert all(1 <= p.operand <= 3 for s in w.subscriptions for p in preds_of(s))
    with pytest.raises(ValueError, match="unknown Fabret workload"):
        wl.fabret("W9")
    with pytest.raises(ValueError, match="unknown Fabret parameters"):
        wl.fabret("W0", bogus=1)
    with pytest.raises(ValueError, match="exceed"):
        wl.fabret("W0", n_free=40)



@pytest.mark.parametrize("workload", ["W1", "W6"])
def test_fabret_subscriptions_one_at_a_time_are_fabrets(workload, monkeypatch):
    monkeypatch.setattr(wl, "BLOCK", 7)  # several blocks of rows
    lazy = wl.fabret_subscriptions(workload, n_subs=30, seed=3)
    assert not isinstance(lazy, list)
    got = [(s.id, s.expr, s.conjunctions) for s in lazy]
    assert got == [(s.id, s.expr, s.conjunctions) for s in wl.fabret(workload, n_subs=30, n_events=0, seed=3).subscriptions]
    with pytest.raises(ValueError, match="unknown Fabret parameters"):
        wl.fabret_subscriptions("W0", bogus=1)  # checked when called, not when first taken

@pytest.mark.parametrize("dist", ["uniform", "zipf"])
def test_opindex_respects_table_3_parameters(dist):
    d, gamma_max, m, sigma, theta1 = 300, 6, 12, 20, 0.3
    w = wl.opindex(n_subs=20_000, n_events=300, d=d, gamma_max=gamma_max, m=m, theta1=theta1, sigma=sigma,
                   dist=dist, seed=2)
    sizes = Counter()
    ops = Counter()
    attr_count = Counter()
    for sub in w.subscriptions:
        conj = preds_of(sub)
        sizes[len(conj)] += 1
        assert len({p.attr for p in conj}) == len(conj)
        for p in conj:
            ops[p.op] += 1
            attr_count[int(p.attr[1:])] += 1
            assert 1 <= p.operand <= sigma and 0 <= int(p.attr[1:]) < d
    assert set(sizes) == set(range(1, gamma_max + 1))
    assert set(ops) == {Op.EQ, Op.LE, Op.GE}
    total = sum(ops.values())
    assert abs(ops[Op.EQ] / total - theta1) < 0.02
    assert abs(ops[Op.LE] / total - (1 - theta1) / 2) < 0.02
    for e in w.events:
        assert len(e) == m and all(1 <= v <= sigma for v in e.values())
    if dist == "zipf":  # rank 1 is the most popular attribute and value
        assert attr_count.most_common(1)[0][0] == 0
        values = Counter(v for e in w.events for v in e.values())
        assert values.most_common(1)[0][0] == 1
    else:
        assert attr_count[0] < 3 * total / d


def test_opindex_defaults_and_event_sizes():
    params = wl.parameters("opindex")
    assert (params["n_subs"], params["d"], params["gamma_max"], params["m"], params["theta1"], params["sigma"]) == (
        1_000_000, 20_000, 4, 20, 0.4, 50)
    w = wl.opindex(n_subs=10, n_events=500, m=8, event_size="uniform", seed=1)
    assert {len(e) for e in w.events} == set(range(1, 9))
    with pytest.raises(ValueError):
        wl.opindex(n_subs=10, dist="normal")
    with pytest.raises(ValueError):
        wl.opindex(n_subs=10, n_events=1, d=5, m=6)


def test_vci_intervals():
    R, W = 300, 40
    w = wl.vci(n_subs=5000, n_events=1000, R=R, W=W, seed=3)
    lengths = Counter()
    for sub in w.subscriptions:
        (p,) = preds_of(sub)
        assert p.attr == "x" and p.op is Op.BETWEEN
        lo, hi = p.operand
        assert 1 <= lo <= R - 1 and lo < hi <= R
        assert hi - lo <= W
        if hi < R:
            lengths[hi - lo] += 1
    assert set(lengths) == set(range(1, W + 1))
    values = [e["x"] for e in w.events]
    assert min(values) >= 1 and max(values) <= R and list(w.events[0]) == ["x"]


def test_amkh_section_3():
    x = 30
    w = wl.amkh(n_subs=8000, n_events=200, x=x, seed=4)
    ops = Counter()
    second = Counter()
    for sub in w.subscriptions:
        conj = preds_of(sub)
        attrs = sorted(p.attr for p in conj)
        assert attrs[0] == "e0" and attrs[2] == "g0" and attrs[1] in {f"e{i}" for i in range(1, 10)}
        second[attrs[1]] += 1
        for p in conj:
            assert 6 <= p.operand <= x
            if p.attr.startswith("e"):
                assert p.op is Op.EQ
            else:
                ops[p.op] += 1
    assert len(second) == 9
    assert set(ops) == {Op.EQ, Op.GT, Op.LT} and abs(ops[Op.EQ] / 8000 - 0.5) < 0.03
    for e in w.events:
        assert len(e) == 20 and all(6 <= v <= 95 for v in e.values())


# the benchmark workloads cover the operators of the original language (the existence, null,
# case-insensitive, CIDR and ANYTHING BUT tests are covered by the extended differential workloads)
ORIGINAL_OPS = set(Op) - PRESENCE_OPS - ICASE_OPS - AFFIX_ICASE_OPS - {Op.CIDR, Op.NOT_CIDR, Op.ANYTHING_BUT}


def test_every_operator_appears():
    seen = set()
    for name in WORKLOADS:
        w = generate(name, n_subs=1500, n_events=1, seed=0)
        seen |= {p.op for s in w.subscriptions for c in s.conjunctions for p in c}
    assert seen == ORIGINAL_OPS
    shop = generate("ecommerce", n_subs=1500, n_events=1, seed=0)
    assert {p.op for s in shop.subscriptions for c in s.conjunctions for p in c} == ORIGINAL_OPS


def test_realistic_generators_mix_kinds_and_missing_attributes():
    for name in ("stock", "ecommerce"):
        w = generate(name, n_subs=500, n_events=500, seed=5)
        kinds = {type(v) for e in w.events for v in e.values()}
        assert {str, bool, float, int} <= kinds
        attrs = Counter(a for e in w.events for a in e)
        assert min(attrs.values()) < 500 <= max(attrs.values())  # some attributes are optional
        assert any(len(s.conjunctions) > 1 for s in w.subscriptions)  # OR


def test_fast_conjunctions_equal_subscription_of():
    for name in ("fabret-w2", "opindex", "vci", "amkh"):
        for sub in generate(name, n_subs=300, n_events=1, seed=9).subscriptions:
            assert sub.conjunctions == Subscription.of(sub.id, sub.expr).conjunctions


def test_text_form_parses_back():
    language = pytest.importorskip("matchers.language")
    for name in ("stock", "ecommerce", "fabret-w2", "vci"):
        for sub in generate(name, n_subs=300, n_events=1, seed=2).subscriptions:
            assert language.parse_text(to_text(sub.expr)) == sub.expr


def test_distinct_rows_and_zipf():
    rng = np.random.default_rng(0)
    p = draws.zipf_probabilities(50, 1.0)
    assert p.sum() == pytest.approx(1.0) and p[0] > p[1] > p[-1]
    assert np.allclose(draws.zipf_probabilities(4, 0.0), 0.25)
    rows = draws.distinct_rows(rng, draws.sampler(rng, 50, p), 2000, 30, 50)
    assert rows.shape == (2000, 30)
    assert all(len(set(r)) == 30 for r in rows.tolist())
    with pytest.raises(ValueError):
        draws.distinct_rows(rng, draws.sampler(rng, 5, None), 1, 6, 5)


def test_cli_writes_jsonl(tmp_path):
    subs, events = tmp_path / "s.jsonl", tmp_path / "e.jsonl"
    code = wl.main(["stock", "--subs", str(subs), "--events", str(events), "--n-subs", "40", "--n-events", "25",
                    "--seed", "3", "--param", "n_symbols=20"])
    assert code == 0
    sub_lines = [json.loads(line) for line in subs.read_text().splitlines()]
    event_lines = [json.loads(line) for line in events.read_text().splitlines()]
    expected = domains.stock_ticker(n_subs=40, n_events=25, n_symbols=20, seed=3)
    assert sub_lines == [{"id": s.id, "expr": to_text(s.expr)} for s in expected.subscriptions]
    assert event_lines == [{"id": i, **e} for i, e in enumerate(expected.events)]
    with pytest.raises(SystemExit):
        wl.main(["vci", "--subs", str(subs), "--events", str(events), "--param", "nonsense=1"])


# -- the benchmark harness (scripts/bench/harness.py) -------------------------------------
class _Sleepy(BruteForceMatcher):
    """A matcher too slow for any size: the harness must kill it and carry on."""

    def _insert(self, entries):
        time.sleep(60)


def test_harness_measures_and_checks_agreement(capsys):
    record = harness.bench_workload("stock", ["brute"], n_subs=300, n_events=60, seed=1, timeout_s=600,
                                    batch_size=25, params={"n_symbols": 20})
    (run,) = record["runs"]
    assert not run.get("failed"), run
    assert run["events_matched"] == 60 and run["match_us"] > 0 and run["memory_bytes"] > 0
    assert run["oracle_checked"] == 20 and run["oracle_disagreements"] == 0
    assert record["n_predicates"] == sum(len(c) for s in domains.stock_ticker(n_subs=300, n_events=1, n_symbols=20,
                                                                           seed=1).subscriptions
                                         for c in s.conjunctions)
    assert "| brute |" in capsys.readouterr().out


def test_harness_kills_a_run_over_its_time_limit(monkeypatch):
    monkeypatch.setitem(base.REGISTERED, "test-sleepy", _Sleepy)
    w = wl.vci(n_subs=50, n_events=10, seed=0)
    start = time.perf_counter()
    run = harness.run_isolated("test-sleepy", w, timeout_s=2)
    assert run["failed"] and "skipped" in run["note"]
    assert time.perf_counter() - start < 30
    crash = harness.run_isolated("no-such-matcher", w, timeout_s=30)
    assert crash["failed"] and "unknown matcher" in crash["note"]
    assert "failed" not in harness.run_isolated("brute", w, timeout_s=600)


@settings(max_examples=25, deadline=None)
@given(d=st.integers(1, 60), gamma_max=st.integers(1, 6), m=st.integers(1, 12), sigma=st.integers(1, 9),
       theta1=st.floats(0, 1), dist=st.sampled_from(["uniform", "zipf"]), alpha=st.floats(0, 2),
       seed=st.integers(0, 2**32 - 1))
def test_opindex_invariants_for_any_parameters(d, gamma_max, m, sigma, theta1, dist, alpha, seed):
    assume(gamma_max <= d and m <= d)
    w = wl.opindex(n_subs=60, n_events=20, d=d, gamma_max=gamma_max, m=m, theta1=theta1, sigma=sigma, dist=dist,
                   zipf_alpha=alpha, seed=seed)
    for sub in w.subscriptions:
        conj = preds_of(sub)
        assert 1 <= len(conj) <= gamma_max and len({p.attr for p in conj}) == len(conj)
        assert all(p.op in (Op.EQ, Op.LE, Op.GE) and 1 <= p.operand <= sigma for p in conj)
        assert all(0 <= int(p.attr[1:]) < d for p in conj)
        if theta1 == 1.0:
            assert all(p.op is Op.EQ for p in conj)
    for e in w.events:
        assert len(e) == m and all(1 <= v <= sigma for v in e.values())


@settings(max_examples=25, deadline=None)
@given(R=st.integers(2, 400), W=st.integers(1, 500), seed=st.integers(0, 2**32 - 1))
def test_vci_invariants_for_any_parameters(R, W, seed):  # noqa: N803
    w = wl.vci(n_subs=50, n_events=20, R=R, W=W, seed=seed)
    for sub in w.subscriptions:
        lo, hi = preds_of(sub)[0].operand
        assert 1 <= lo < hi <= R and hi - lo <= W
    assert all(1 <= e["x"] <= R for e in w.events)
