"""Random subscriptions and events for differential tests: seeded generators and hypothesis strategies.

The value pools are small on purpose, so that equal values, boundaries, type
mismatches and missing attributes happen often.
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

from matchers.errors import SubscriptionError
from matchers.events import flatten
from matchers.expr import And, Expr, Not, Or, Pred, Subscription, anything_but, pred

NUM_ATTRS = ("a", "b", "c")
STR_ATTRS = ("s", "t.u")
BOOL_ATTRS = ("f",)
ATTRS = NUM_ATTRS + STR_ATTRS + BOOL_ATTRS
NUMS = (0, 1, 2, 2.5, 3, 4, -1, 1e3)
STRS = ("", "a", "ab", "abc", "b", "ba", "bab", "c", "xyz", "Ab", "é")
PATTERNS = ("ab%", "%b", "%b%", "a_c", "a%c", "%", "_", "abc", "b\\%", "%a_")
REGEXES = ("^a", "b$", "[xy]", "^$", "a.?b", "(?i)AB")

NUM_OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "not in", "between", "not between")
STR_OPS = NUM_OPS + ("like", "not like", "matches", "not matches")
PRESENCE_OPS = ("exists", "not exists", "is null", "is not null")
ICASE_OPS = ("= ignore case", "!= ignore case", "in ignore case", "not in ignore case")
ICASE_STRS = ("AB", "ß", "SS", "ss", "É", "ǅ", "ǆ")
CIDR_OPS = ("in cidr", "not in cidr")
NETS = ("10.0.0.0/8", "10.1.2.0/24", "10.1.2.3/32", "0.0.0.0/0", "::/0", "2001:db8::/32", "192.168.0.0/16")
IPS = ("10.0.0.0", "10.255.255.255", "11.0.0.0", "9.255.255.255", "10.1.2.3", "10.1.2.4", "2001:db8::1",
       "2001:db9::", "::1", "192.168.1.1", "not-an-ip", "::ffff:10.0.0.1", "010.0.0.1")
IP_ATTR = "ip"
"""A string attribute of the extended workloads only, holding addresses (and some non-addresses)."""
AFFIX_ICASE_OPS = ("prefix ignore case", "not prefix ignore case", "suffix ignore case", "not suffix ignore case")
BUT = "anything but"
"""EventBridge's anything-but of a positive predicate drawn by :func:`_make` (:func:`matchers.expr.anything_but`)."""
BUT_INNER = {"NUM": ("=", "in"), "STR": ("=", "in", "like", "prefix", "suffix", "= ignore case", "in ignore case",
                                        "prefix ignore case", "suffix ignore case")}
EXTENDED = {"NUM": NUM_OPS + PRESENCE_OPS + (BUT,) * 2,
            "STR": STR_OPS + PRESENCE_OPS + ICASE_OPS + ("wildcard",) + AFFIX_ICASE_OPS + (BUT,) * 3,
            "IP": ("=", "!=", "exists", "is null") + CIDR_OPS * 3}
"""Operator pools of the extended workloads: the classic ones and those beyond (residual path)."""


def _make(attr: str, op: str, pick) -> Pred:
    """A predicate of ``op`` on ``attr``; ``pick(pool, k)`` draws ``k`` values from a pool."""
    if op in PRESENCE_OPS:
        return pred(attr, op, None)
    if op == BUT:
        inner = BUT_INNER["STR" if attr in STR_ATTRS else "NUM"]
        return anything_but(_make(attr, pick(inner, 1)[0], pick))
    if op in AFFIX_ICASE_OPS or op in ("prefix", "suffix"):
        return pred(attr, op, pick(("", "a", "AB", "ss", "SS", "ß", "B", "é"), 1)[0])
    if op in CIDR_OPS:
        return pred(attr, op, pick(NETS, 1)[0])
    if attr == IP_ATTR:
        return pred(attr, op, pick(IPS, 1)[0])
    if op in ICASE_OPS:
        values = pick(STRS + ICASE_STRS, 3)
        return pred(attr, op, values if op.startswith(("in", "not in")) else values[0])
    if op == "wildcard":
        return pred(attr, op, pick(("*", "a*", "*b", "a*b", "*b*", "\\**", "ab"), 1)[0])
    if attr in BOOL_ATTRS:
        op = "=" if op in ("=", "in", "<", "<=") else "!="
        return pred(attr, op, pick((True, False), 1)[0])
    pool = NUMS if attr in NUM_ATTRS else STRS
    if op in ("in", "not in"):
        return pred(attr, op, pick(pool, 3))
    if op in ("between", "not between"):
        lo, hi = sorted(pick(pool, 2))
        return pred(attr, op, (lo, hi))
    if op in ("like", "not like"):
        return pred(attr, op, pick(PATTERNS, 1)[0])
    if op in ("matches", "not matches"):
        return pred(attr, op, pick(REGEXES, 1)[0])
    return pred(attr, op, pick(pool, 1)[0])


def _ops(attr: str, extended: bool) -> tuple[str, ...]:
    if extended:
        return EXTENDED["IP" if attr == IP_ATTR else "STR" if attr in STR_ATTRS else "NUM"]
    return STR_OPS if attr in STR_ATTRS else NUM_OPS


def random_pred(rng: random.Random, extended: bool = False) -> Pred:
    attr = rng.choice(ATTRS + (IP_ATTR,) if extended else ATTRS)
    return _make(attr, rng.choice(_ops(attr, extended)), lambda pool, k: [rng.choice(pool) for _ in range(k)])


def random_expr(rng: random.Random, depth: int = 0, extended: bool = False) -> Expr:
    r = rng.random()
    if depth >= 3 or r < 0.45:
        return random_pred(rng, extended)
    if r < 0.75:
        return And(tuple(random_expr(rng, depth + 1, extended) for _ in range(rng.randint(2, 3))))
    if r < 0.93:
        return Or(tuple(random_expr(rng, depth + 1, extended) for _ in range(rng.randint(2, 3))))
    return Not(random_expr(rng, depth + 1, extended))


def random_event(rng: random.Random, extended: bool = False) -> dict:
    """A flat event: each attribute present with probability 0.75, sometimes of the wrong
    type (``extended``: sometimes null)."""
    event: dict = {}
    for attr in ATTRS:
        if rng.random() >= 0.75:
            continue
        r = rng.random()
        if extended and r < 0.1:
            event[attr] = None
        elif r < 0.1 + 0.1 * extended:  # wrong type
            event[attr] = rng.choice((1.0, "1", True, "ab"))
        elif attr in NUM_ATTRS:
            event[attr] = float(rng.choice(NUMS + (0.5, 5, -3)))
        elif attr in STR_ATTRS:
            event[attr] = rng.choice(STRS + ("abcab", "xab", "zz", "a\nb") + ICASE_STRS * extended)
        else:
            event[attr] = rng.choice((True, False))
    if extended and rng.random() < 0.8:
        event[IP_ATTR] = rng.choice(IPS + (None,))
    return event


def random_array_event(rng: random.Random, extended: bool = False):
    """An event with arrays, flattened (:class:`~matchers.events.Rows` when it has several
    rows): each attribute a value or an array of 0-2 values of :func:`random_event`, and
    ``t`` an object or an array of objects (so ``t.u`` comes from one element)."""
    draws = [random_event(rng, extended) for _ in range(3)]
    event: dict = {}
    for attr in ATTRS + (IP_ATTR,) * extended:
        values = [d[attr] for d in draws if attr in d]
        if values:
            event[attr] = values[0] if rng.random() < 0.3 else values[:rng.randint(0, 2)]
    if "t.u" in event:
        value = event.pop("t.u")
        event["t"] = [{"u": v} for v in value] if type(value) is list and rng.random() < 0.5 else {"u": value}
    return flatten(event)


def random_subscriptions(rng: random.Random, n: int, prefix: str = "s", extended: bool = False) -> list[Subscription]:
    subs: list[Subscription] = []
    while len(subs) < n:
        try:
            subs.append(Subscription.of(f"{prefix}{len(subs)}", random_expr(rng, extended=extended), max_terms=32))
        except SubscriptionError:
            continue  # over the DNF bound
    return subs


# -- hypothesis -------------------------------------------------------------------------
@st.composite
def preds(draw, extended: bool = False) -> Pred:
    attr = draw(st.sampled_from(ATTRS + (IP_ATTR,) if extended else ATTRS))
    op = draw(st.sampled_from(_ops(attr, extended)))
    return _make(attr, op, lambda pool, k: draw(st.lists(st.sampled_from(pool), min_size=k, max_size=k)))


def trees(leaves, max_leaves: int = 6):
    """Expression trees (AND, OR, NOT) over the predicates ``leaves`` draws."""
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, min_size=2, max_size=3).map(lambda c: And(tuple(c))),
            st.lists(inner, min_size=2, max_size=3).map(lambda c: Or(tuple(c))),
            inner.map(Not),
        ),
        max_leaves=max_leaves,
    )


exprs = trees(preds())
extended_exprs = trees(preds(extended=True))

_values = {
    **{a: st.one_of(st.sampled_from(NUMS + (0.5, 5)).map(float), st.sampled_from(("1", True))) for a in NUM_ATTRS},
    **{a: st.one_of(st.sampled_from(STRS + ("abcab", "xab")), st.text(max_size=4), st.just(1.0))
       for a in STR_ATTRS},
    **{a: st.sampled_from((True, False, 1.0)) for a in BOOL_ATTRS},
}
events = st.fixed_dictionaries({}, optional=_values)
extended_events = st.fixed_dictionaries({}, optional={
    **{a: st.one_of(v, st.none(), st.sampled_from(ICASE_STRS)) for a, v in _values.items()},
    IP_ATTR: st.one_of(st.sampled_from(IPS), st.ip_addresses().map(str), st.none()),
})


def _arrays(values: dict) -> st.SearchStrategy:
    """Flattened events whose attributes are values or arrays of them (``t.u`` also from an
    array of objects)."""
    def event(draw_values: dict) -> dict:
        obj = dict(draw_values)
        if "t.u" in obj:
            obj["t"] = obj.pop("t.u")
            obj["t"] = [{"u": v} for v in obj["t"]] if type(obj["t"]) is list else {"u": obj["t"]}
        return obj
    return st.fixed_dictionaries({}, optional={a: st.one_of(v, st.lists(v, max_size=2)) for a, v in values.items()}
                                 ).map(event).map(flatten)


array_events = _arrays(_values)
extended_array_events = _arrays({
    **{a: st.one_of(v, st.none(), st.sampled_from(ICASE_STRS)) for a, v in _values.items()},
    IP_ATTR: st.one_of(st.sampled_from(IPS), st.none()),
})
"""Events with arrays, for the differential tests (flattened: rows)."""


@st.composite
def _pattern_items(draw, attr: str) -> list:
    """The items of one field of an EventBridge pattern: values, ``null``, ``exists``, ``anything-but``
    (of values, of prefixes, suffixes, wildcards or case-folded values), case-folded prefixes and suffixes."""
    pool = NUMS if attr in NUM_ATTRS else (True, False) if attr in BOOL_ATTRS else STRS
    item = st.one_of(
        st.sampled_from(pool),
        st.none(),
        st.builds(lambda b: {"exists": b}, st.booleans()),
        st.builds(lambda vs: {"anything-but": vs}, st.lists(st.sampled_from(NUMS + STRS), min_size=1, max_size=3)),
        st.builds(lambda v: {"anything-but": v}, st.sampled_from(NUMS + STRS)),
        st.builds(lambda v: {"anything-but": {"prefix": v}}, st.sampled_from(STRS)),
        st.builds(lambda k, vs: {"anything-but": {k: vs}}, st.sampled_from(("prefix", "suffix", "wildcard")),
                  st.lists(st.sampled_from(("", "a", "b", "ab", "a*", "*b", "*")), min_size=1, max_size=3)),
        st.builds(lambda vs: {"anything-but": {"equals-ignore-case": vs}},
                  st.lists(st.sampled_from(STRS + ICASE_STRS), min_size=1, max_size=3)),
        st.builds(lambda k, v: {k: {"equals-ignore-case": v}}, st.sampled_from(("prefix", "suffix")),
                  st.sampled_from(("", "A", "ab", "B", "SS", "ß", "É"))),
    )
    return draw(st.lists(item, min_size=1, max_size=3))


@st.composite
def event_patterns(draw) -> dict:
    """EventBridge patterns of 1 to 3 fields (``t.u`` nested) mixing existence, null and
    anything-but with exact values, sometimes under ``$or``."""
    def pattern(fields: list[str]) -> dict:
        obj: dict = {}
        for attr in fields:
            items = draw(_pattern_items(attr))
            if "." in attr:
                outer, inner = attr.split(".")
                obj.setdefault(outer, {})[inner] = items
            else:
                obj[attr] = items
        return obj
    fields = draw(st.lists(st.sampled_from(ATTRS), min_size=1, max_size=3, unique=True))
    if draw(st.booleans()):
        return pattern(fields)
    return {"$or": [pattern(fields), pattern(draw(st.lists(st.sampled_from(ATTRS), min_size=1, max_size=2,
                                                           unique=True)))]}
