"""EventBridge-style patterns: compiled expressions against a direct reading of the patterns,
positioned errors, records, every matcher, and the command line."""

from __future__ import annotations

import fnmatch
import ipaddress
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers import oracle
from matchers.catalog import create, names
from matchers.errors import SubscriptionError
from matchers.language import parse_record
from matchers.language.eventbridge import parse_pattern


# -- an independent reading of EventBridge's rules, on flat events ------------------------------
def _typed_equal(a, b) -> bool:
    return (type(a) is type(b) or (_is_num(a) and _is_num(b))) and a == b


def _is_str(v) -> bool:
    return isinstance(v, str)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _wild(pattern: str, v: str) -> bool:
    return fnmatch.fnmatchcase(v, pattern.replace("[", "[[]").replace("?", "[?]"))  # * is the only wildcard here


def _item(item, present: bool, v) -> bool:
    if not isinstance(item, dict):
        return present and _typed_equal(item, v) and (item is None) == (v is None)
    (key, arg), = item.items()
    if key == "exists":
        return present is arg
    if not present:
        return False
    if key in ("prefix", "suffix") and isinstance(arg, dict):  # {"equals-ignore-case": text}
        folded, text = (v.casefold() if _is_str(v) else v), arg["equals-ignore-case"].casefold()
        return _is_str(v) and (folded.startswith(text) if key == "prefix" else folded.endswith(text))
    if key == "prefix":
        return _is_str(v) and v.startswith(arg)
    if key == "suffix":
        return _is_str(v) and v.endswith(arg)
    if key == "equals-ignore-case":
        return _is_str(v) and v.casefold() in [a.casefold() for a in (arg if isinstance(arg, list) else [arg])]
    if key == "wildcard":
        return _is_str(v) and _wild(arg, v)
    if key == "cidr":
        try:
            return _is_str(v) and ipaddress.ip_address(v) in ipaddress.ip_network(arg, strict=False)
        except ValueError:
            return False
    if key == "numeric":
        tests = [(arg[i], arg[i + 1]) for i in range(0, len(arg), 2)]
        ops = {"<": float.__lt__, "<=": float.__le__, "=": float.__eq__, ">": float.__gt__, ">=": float.__ge__}
        return _is_num(v) and all(ops[op](float(v), float(x)) for op, x in tests)
    assert key == "anything-but"
    if isinstance(arg, dict):  # one test; under prefix, suffix and wildcard, a list of them
        (inner, given), = arg.items()
        if inner != "equals-ignore-case" and isinstance(given, list):
            return not any(_item({inner: g}, True, v) for g in given)
        return not _item(arg, True, v)
    values = arg if isinstance(arg, list) else [arg]
    return not any(_typed_equal(x, v) and v is not None for x in values)


def eb_matches(pattern: dict, event: dict, prefix: str = "") -> bool:
    for key, value in pattern.items():
        if key == "$or":
            if not any(eb_matches(p, event, prefix) for p in value):
                return False
        elif isinstance(value, dict):
            if not eb_matches(value, event, f"{prefix}{key}."):
                return False
        else:
            name = prefix + key
            if not any(_item(item, name in event, event.get(name)) for item in value):
                return False
    return True


# -- random patterns and events ------------------------------------------------------------------
FIELDS = ("a", "b", "d.e")
STRINGS = ("", "us-east", "us-west", "eu", "EU", "Straße", "STRASSE", "a.png", "10.1.2.3", "::1", "x*y")
NUMBERS = (0, 1, 2.5, -3, 1000)
ODD = (None, True, False)

scalars = st.sampled_from(STRINGS + NUMBERS + ODD)
matchers_ = st.one_of(
    st.builds(lambda s: {"prefix": s}, st.sampled_from(("us-", "e", "", "S"))),
    st.builds(lambda s: {"suffix": s}, st.sampled_from((".png", "t", "E"))),
    st.builds(lambda k, s: {k: {"equals-ignore-case": s}}, st.sampled_from(("prefix", "suffix")),
              st.sampled_from(("US-", "e", "", "ss", "STRASSE", ".PNG"))),
    st.builds(lambda s: {"equals-ignore-case": s}, st.sampled_from(("eu", "strasse", "US-EAST"))),
    st.builds(lambda s: {"wildcard": s}, st.sampled_from(("us-*", "*.png", "*", "S*e"))),
    st.builds(lambda s: {"cidr": s}, st.sampled_from(("10.0.0.0/8", "10.1.2.3/32", "::/0", "11.0.0.0/8"))),
    st.builds(lambda b: {"exists": b}, st.booleans()),
    st.builds(lambda t: {"numeric": list(t)}, st.sampled_from(
        ((">", 0), ("<=", 2.5), ("=", 1), (">=", 0, "<", 1000), ("<", 1, ">", -5)))),
    st.builds(lambda v: {"anything-but": v}, st.one_of(
        st.sampled_from(STRINGS + NUMBERS),
        st.lists(st.sampled_from(STRINGS + NUMBERS), min_size=1, max_size=3),
        st.sampled_from(({"prefix": "us-"}, {"suffix": ".png"}, {"equals-ignore-case": "eu"},
                         {"equals-ignore-case": ["eu", "straße"]}, {"wildcard": "*-*"}, {"prefix": ""},
                         {"prefix": ["us-", "e"]}, {"suffix": [".png", "t", "E"]},
                         {"wildcard": ["*-*", "S*e", "*y"]})))),
)
field_values = st.lists(st.one_of(scalars, matchers_), min_size=1, max_size=3)
flat_patterns = st.dictionaries(st.sampled_from(("a", "b")), field_values, min_size=1, max_size=2)
patterns = st.one_of(
    flat_patterns,
    st.builds(lambda p, q: {**p, "d": {"e": q}}, flat_patterns, field_values),
    st.builds(lambda p, q: {"$or": [p, q]}, flat_patterns, flat_patterns),
)
events = st.dictionaries(st.sampled_from(FIELDS), scalars, max_size=3)


@settings(max_examples=300, deadline=None)
@given(pattern=patterns, evs=st.lists(events, min_size=1, max_size=6))
def test_compiled_patterns_mean_what_eventbridge_does(pattern, evs):
    expr = parse_pattern(pattern)
    for event in evs:
        flat = {k: (float(v) if _is_num(v) else v) for k, v in event.items()}
        assert oracle.evaluate(expr, flat) is eb_matches(pattern, event), (pattern, event)


def test_every_matcher_agrees():
    rules = [
        {"source": ["aws.ec2"], "detail": {"state": [{"anything-but": ["pending", "stopped"]}]}},
        {"detail": {"cpu": [{"numeric": [">", 0, "<=", 90]}], "state": ["running", None]}},
        {"$or": [{"source": [{"prefix": "aws."}]}, {"ip": [{"cidr": "10.0.0.0/8"}]}]},
        {"region": [{"equals-ignore-case": "EU-West-1"}], "file": [{"wildcard": "*.png"}]},
        {"detail": {"error": [{"exists": False}]}, "source": [{"anything-but": {"prefix": "aws."}}]},
    ]
    subs = [parse_record({"id": f"r{i}", "rule": rule}) for i, rule in enumerate(rules)]
    evs = [{"source": "aws.ec2", "detail.state": "running", "detail.cpu": 50.0},
           {"source": "aws.ec2", "detail.state": "pending"},
           {"source": "custom", "detail.state": None, "detail.cpu": 90.0, "ip": "10.9.9.9"},
           {"source": 5.0, "region": "eu-west-1", "file": "a.png"},
           {"source": None, "detail.error": "boom"}, {}]
    expected = [oracle.match(subs, e) for e in evs]
    assert expected[0] == ["r0", "r1", "r2"] and expected[3] == ["r3", "r4"]
    for name in names():
        matcher = create(name)
        matcher.add(subs)
        assert matcher.match_events(evs) == expected, name


@pytest.mark.parametrize(("rule", "position", "message"), [
    ({"x": [{"contains": "a"}]}, "$.rule.x[0].contains", "unsupported matcher 'contains'"),
    ({"x": [{"prefix": {"equals": "a"}}]}, "$.rule.x[0].prefix", '"prefix" takes a string or {"equals-ignore-case"'),
    ({"x": [{"suffix": {"equals-ignore-case": ["a"]}}]}, "$.rule.x[0].suffix['equals-ignore-case']",
     '"suffix" with "equals-ignore-case" takes a string'),
    ({"x": [{"suffix": 3}]}, "$.rule.x[0].suffix", '"suffix" takes a string or {"equals-ignore-case"'),
    ({"x": [{"anything-but": {"prefix": []}}]}, "$.rule.x[0]['anything-but'].prefix", "the array is empty"),
    ({"x": [{"anything-but": {"wildcard": ["a*", 1]}}]}, "$.rule.x[0]['anything-but'].wildcard[1]",
     "takes a string or an array of strings"),
    ({"x": [{"anything-but": {"prefix": {"equals-ignore-case": "a"}}}]}, "$.rule.x[0]['anything-but'].prefix",
     "takes a string or an array of strings"),
    ({"x": [{"anything-but": [["a"]]}]}, "$.rule.x[0]['anything-but'][0]", "takes values, not an array"),
    ({"x": []}, "$.rule.x", "the array is empty"),
    ({"x": "a"}, "$.rule.x", "the value of field 'x' is 'a'"),
    ({"x": [[1]]}, "$.rule.x[0]", "an array is not a value"),
    ({"x": [{"prefix": "a", "suffix": "b"}]}, "$.rule.x[0]", "a matcher is an object of one key"),
    ({"detail-type": [{"numeric": ["<", 5, "<", 6]}]}, "$.rule['detail-type'][0].numeric[2]", "lower one"),
    ({"x": [{"numeric": [">", "5"]}]}, "$.rule.x[0].numeric[1]", "'5' is not a number"),
    ({"x": [{"numeric": ["~", 5]}]}, "$.rule.x[0].numeric[0]", "unknown numeric operator"),
    ({"x": [{"exists": "yes"}]}, "$.rule.x[0].exists", "takes true or false"),
    ({"x": [{"cidr": "10.0.0.0/40"}]}, "$.rule.x[0].cidr", "CIDR needs an IPv4 or IPv6 network"),
    ({"x": [{"anything-but": {"cidr": "10.0.0.0/8"}}]}, "$.rule.x[0]['anything-but']", "this object has 'cidr'"),
    ({"x": [{"anything-but": [True]}]}, "$.rule.x[0]['anything-but'][0]", "compares strings and numbers"),
    ({"x": [{"anything-but": []}]}, "$.rule.x[0]['anything-but']", "the array is empty"),
    ({"$or": [{"a": [1]}]}, "$.rule['$or']", "at least two patterns"),
    ({"a": {}}, "$.rule.a", "empty object"),
    ([1], "$.rule", "is not a pattern"),
])
def test_unsupported_constructs_are_positioned_errors(rule, position, message):
    with pytest.raises(SubscriptionError) as info:
        parse_record({"id": "e", "rule": rule})
    assert info.value.position == position and message in info.value.reason, str(info.value)
    assert info.value.sub_id == "e"


def test_record_has_one_form():
    with pytest.raises(SubscriptionError, match='both "expr" and "rule"'):
        parse_record({"id": "e", "expr": "a = 1", "rule": {"a": [1]}})
    sub = parse_record({"id": "r", "rule": {"a": [1, "x"]}, "expires": 1767225600})
    assert sub.expires == 1767225600 and oracle.evaluate(sub.expr, {"a": "x"})


def test_command_line(tmp_path):
    subs = tmp_path / "subs.jsonl"
    subs.write_text(json.dumps({"id": "png", "rule": {"file": [{"wildcard": "*.png"}], "size": [{"exists": True}]}})
                    + "\n", encoding="utf-8")
    evs = tmp_path / "events.jsonl"
    evs.write_text('{"id": 1, "file": "a.png", "size": null}\n{"id": 2, "file": "a.png"}\n', encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "matchers", "match", "-s", str(subs), "-e", str(evs), "-q"],
                         capture_output=True, text=True, check=True).stdout
    assert [json.loads(line)["subscriptions"] for line in out.splitlines()] == [["png"], []]


@pytest.mark.parametrize(("rule", "event", "matched"), [
    ({"resources": ["arn:b"]}, {"resources": ["arn:a", "arn:b"]}, True),  # the intersection is not empty
    ({"resources": ["arn:c"]}, {"resources": ["arn:a", "arn:b"]}, False),
    ({"n": [{"numeric": [">", 0, "<", 5]}]}, {"n": [-1, 9]}, False),  # both bounds on one element
    ({"n": [{"numeric": [">", 0, "<", 5]}]}, {"n": [-1, 3]}, True),
    ({"s": [{"anything-but": ["a"]}]}, {"s": ["a", "b"]}, True),  # some element is not in the list
    ({"s": [{"anything-but": ["a"]}]}, {"s": ["a", "a"]}, False),
    ({"s": [{"exists": True}]}, {"s": []}, False),  # an empty array is an absent field
    ({"s": [{"exists": False}]}, {"s": []}, True),
    ({"items": {"sku": ["x"], "qty": [{"numeric": [">", 2]}]}},
     {"items": [{"sku": "x", "qty": 1}, {"sku": "y", "qty": 3}]}, False),  # fields of one element
    ({"items": {"sku": ["x"], "qty": [{"numeric": [">", 2]}]}},
     {"items": [{"sku": "y", "qty": 1}, {"sku": "x", "qty": 3}]}, True),
])
def test_event_arrays(rule, event, matched):
    from matchers.events import flatten

    sub = parse_record({"id": "r", "rule": rule})
    assert oracle.match([sub], flatten(event)) == (["r"] if matched else [])


def test_command_line_arrays(tmp_path):
    subs = tmp_path / "subs.jsonl"
    subs.write_text(json.dumps({"id": "sku", "expr": "items.sku = 'x' AND items.qty > 2"}) + "\n"
                    + json.dumps({"id": "tag", "rule": {"tags": ["b"]}}) + "\n", encoding="utf-8")
    evs = tmp_path / "events.jsonl"
    big = json.dumps({"id": 4, "a": list(range(40)), "b": list(range(40))})
    evs.write_text('{"id": 1, "tags": ["a", "b"], "items": [{"sku": "x", "qty": 1}, {"sku": "y", "qty": 3}]}\n'
                   '{"id": 2, "items": [{"sku": "y", "qty": 1}, {"sku": "x", "qty": 3}]}\n'
                   f'{{"id": 3, "tags": []}}\n{big}\n', encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "matchers", "match", "-s", str(subs), "-e", str(evs), "-q"],
                         capture_output=True, text=True)
    assert run.returncode == 1  # a bad line
    got = [json.loads(line) for line in run.stdout.splitlines()]
    assert [(g["event"], g["subscriptions"]) for g in got] == [(1, ["tag"]), (2, ["sku"]), (3, [])]
    assert "events.jsonl:4: event not matched: its arrays make more than 1000 rows" in run.stderr, run.stderr
