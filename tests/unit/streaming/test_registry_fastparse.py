"""The fast path of the columnar parse (:mod:`streaming.registry_columns.fastparse`) gives the rows
the general path gives, every column byte for byte (``packed`` included), error records too: records
of the shape it takes and the near misses it must hand back, drawn with fixed seeds."""

from __future__ import annotations

import json

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.expr import DEFAULT_MAX_TERMS, OP_BY_NAME
from matchers.packed import unpack
from streaming.config import LimitsSettings
from streaming.records import DEFAULT_LIMITS, default_parser
from streaming.registry_columns import columns
from streaming.registry_columns.fastparse import fast_row
from streaming.registry_columns.parse import ERROR, PARSED_SCHEMA, parse_records

PARSE = default_parser()
"""The default parser given: :func:`parse_records` takes the general path (without: the fast path)."""


def _dumps(obj) -> bytes:
    """``obj``'s JSON, by orjson but for integers past 64 bits."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def _batch(records: list[tuple[bytes | None, bytes | None]]) -> pa.RecordBatch:
    n = len(records)
    return pa.RecordBatch.from_pydict({
        "key": [k for k, _ in records], "value": [v for _, v in records], "topic": ["subs"] * n,
        "partition": [3] * n, "offset": list(range(100, 100 + n))})


def _assert_same(records, max_terms=DEFAULT_MAX_TERMS, limits=DEFAULT_LIMITS, targets=False) -> pa.RecordBatch:
    rb = _batch(records)
    fast = parse_records(rb, None, max_terms, limits, targets)
    slow = parse_records(rb, PARSE, max_terms, limits, targets)
    assert fast.schema == slow.schema == PARSED_SCHEMA
    for name in PARSED_SCHEMA.names:  # column by column: a failure names the column and the record
        assert fast.column(name).to_pylist() == slow.column(name).to_pylist(), (name, records)
    assert fast.equals(slow)
    return fast


OP_NAMES = [*OP_BY_NAME, "=", "==", "!=", "<>", "<", "<=", ">", ">=", "IN", " = ", "=<", "wildcard", "anything but",
            "EXISTS", "", 5, None, ["="]]
ATTRS = st.sampled_from(["a", "b", "a.b", "price", "é", "名前", "x y", "", "x\x00", "a\\b", 'q"'])
NUMBERS = st.one_of(
    st.integers(-40, 40), st.sampled_from([0, 2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, -(2**63), 10**30]),
    st.sampled_from([0.0, -0.0, 1.5, 10.0, -2.5, 1e308, -1e308, 5e-324, 0.1, 1e16, 2.0**53 + 2]),
    st.floats(allow_nan=False, allow_infinity=False),
)
STRINGS = st.one_of(st.sampled_from(["", "x", "X", "10", "a\"b", "a\\b", "\n", "\x00", "é", "😀", "\ud7ff"]),
                    st.text(max_size=6))
SCALARS = st.one_of(NUMBERS, NUMBERS, STRINGS, st.booleans(), st.none())
OPERANDS = st.one_of(SCALARS, SCALARS, SCALARS, st.lists(SCALARS, max_size=3), st.just({"x": 1}))
COMMON = st.tuples(ATTRS, st.sampled_from(["=", "==", "!=", "<>", "<", "<=", ">", ">="]), st.one_of(NUMBERS, STRINGS))
"""Comparisons of the shape the fast path takes."""
PREDICATES = st.one_of(
    COMMON.map(list), COMMON.map(list), COMMON.map(list),
    st.tuples(ATTRS | st.sampled_from([1, None]), st.sampled_from(OP_NAMES), OPERANDS).map(list),
    st.lists(ATTRS | st.sampled_from(["exists", "is null"]), min_size=0, max_size=4),
)


@st.composite
def forms(draw, depth: int = 0):
    """A JSON form: mostly ``{"all": [comparisons]}``, some other shapes."""
    kind = draw(st.sampled_from(["all"] * 6 + ["single", "any", "not", "nested", "empty", "two keys", "odd"]))
    items = draw(st.lists(PREDICATES, min_size=1, max_size=6))
    if kind == "all":
        return {"all": items}
    if kind == "single":
        return items[0]
    if kind == "any":
        return {"any": items}
    if kind == "not":
        return {"not": {"all": items}}
    if kind == "nested":
        return {"all": [{"all": items}, *items]}
    if kind == "empty":
        return draw(st.sampled_from([{"all": []}, {}, [], {"all": None}, {"ALL": items}]))
    if kind == "two keys":
        return {"all": items, "any": items}
    return draw(st.sampled_from([None, 1, "a = 1", True, {"all": items[0]}]))


@st.composite
def records(draw) -> tuple[bytes | None, bytes | None]:
    """A subscription record and its key: an upsert of a JSON form the fast path takes, or one
    near miss of it (``miss``: what is drawn from every choice rather than from the good ones),
    or any number of them."""
    miss = draw(st.sampled_from(["none", "none", "none", "id", "op", "form", "extra", "how", "key", "any", "any"]))

    def choose(what: str, good: st.SearchStrategy, anything: st.SearchStrategy):
        return draw(anything if miss in (what, "any") else good)

    good_ids = st.sampled_from(["s1", "s1", "s2", "é", "x" * 256])
    sub_id = choose("id", good_ids, st.one_of(good_ids, st.sampled_from(["", "x" * 257, None, 7, ["s1"]]),
                                              st.text(max_size=4)))
    obj: dict = {}
    op = choose("op", st.sampled_from(["upsert", None]),
                st.sampled_from(["upsert", "upsert", None, None, "delete", "UPSERT", 3]))
    order = draw(st.permutations(["op", "id", "json"]))
    common = st.lists(COMMON.map(list), min_size=1, max_size=6)
    form = choose("form", st.one_of(common.map(lambda items: {"all": items}), COMMON.map(list)), forms())
    for field in order:
        if field == "op" and op is not None:
            obj["op"] = op
        elif field == "id" and choose("id", st.just(1), st.integers(0, 9)) > 0:
            obj["id"] = sub_id
        elif field == "json" and (op != "delete" or draw(st.booleans())):
            obj["json"] = form
    extra = choose("extra", st.none(), st.sampled_from([None] * 3 + ["expires", "target", "pattern", "expr", "rule",
                                                                       "other", "null id"]))
    if extra == "expires":
        obj["expires"] = draw(st.sampled_from([4102444800, 1.5, "2026-01-31T12:00:00Z", None, "soon", 1e301]))
    elif extra == "target":
        obj["target"] = draw(st.sampled_from(["t", 3, None]))
    elif extra == "pattern":
        obj["pattern"] = "SELECT * FROM FILTER{price > 10}(Stock)"
    elif extra == "expr":
        obj["expr"] = "a = 1"
    elif extra == "rule":
        obj["rule"] = {"source": ["x"]}
    elif extra == "other":
        obj["other"] = 1
    elif extra == "null id":
        obj["id"] = None
    encodings = ["orjson", "orjson", "json", "ascii", "spaces"]
    how = choose("how", st.sampled_from(encodings), st.sampled_from(
        [*encodings, "dup key", "cut", "nan", "list", "bad utf-8", "none", "empty", "big int"]))
    if how == "orjson":
        value = _dumps(obj)
    elif how in ("json", "ascii", "spaces"):
        value = json.dumps(obj, ensure_ascii=how == "ascii", indent=2 if how == "spaces" else None).encode()
    elif how == "dup key":
        value = _dumps(obj)[:-1] + b',"id":"s2"}' if len(obj) else b'{"id":"s1","id":"s2"}'
    elif how == "cut":
        raw = _dumps(obj)
        value = raw[:draw(st.integers(0, max(0, len(raw) - 1)))]
    elif how == "nan":
        value = b'{"id":"s1","json":{"all":[["a","=",NaN]]}}'
    elif how == "list":
        value = _dumps([obj])
    elif how == "bad utf-8":
        value = _dumps(obj).replace(b"s", b"\xff", 1)
    elif how == "none":
        value = None
    elif how == "empty":
        value = b""
    else:
        value = b'{"id":"s1","json":{"all":[["a","=",123456789012345678901234567890]]}}'
    raw_id = obj.get("id")
    key_id = raw_id if isinstance(raw_id, str) else "s1"
    keys = [None, key_id.encode()]
    key = choose("key", st.sampled_from(keys), st.sampled_from([*keys, b"other", b"\xff", b""]))
    return key, value


LIMITS = st.builds(LimitsSettings, predicates=st.sampled_from([1000, 1000, 1, 2, 3, 4]),
                   subscription_bytes=st.sampled_from([65_536, 65_536, 40, 60, 80]))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(records(), min_size=1, max_size=8), st.sampled_from([DEFAULT_MAX_TERMS, 1, 0]), LIMITS,
       st.booleans())
def test_fast_path_rows_equal_general_path_rows(recs, max_terms, limits, targets):
    _assert_same(recs, max_terms, limits, targets)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.lists(COMMON.map(list), min_size=1, max_size=8), min_size=1, max_size=8), st.booleans())
def test_common_records_take_the_fast_path_and_equal_the_general_one(conjunctions, keyed):
    recs = []
    for i, items in enumerate(conjunctions):
        value = _dumps({"op": "upsert", "id": f"s{i}", "json": {"all": items}})
        recs.append((f"s{i}".encode() if keyed else None, value))
        decoded = orjson.loads(value)["json"]["all"]  # an integer past 64 bits reads as a float
        valid = all(attr and "\x00" not in attr and (type(v) is not int or abs(v) <= 2**53)
                    for attr, _, v in decoded)
        assert (fast_row(*recs[-1], DEFAULT_MAX_TERMS, DEFAULT_LIMITS) is not None) == valid
    _assert_same(recs)


@pytest.mark.parametrize("items", [
    [["a", "=", 10], ["a", "=", 10.0]],  # one predicate, twice in the tree
    [["a", "=", 0.0], ["a", "=", -0.0], ["a", "=", 0]],  # equal: the first one is kept
    [["a", "=", -0.0], ["b", ">", 0.0]],
    [["b", "<", 9], ["b", "<", 10], ["a", ">=", "10"], ["a", ">=", "9"]],  # sorted by the operand's repr
    [["a", "=", "a"], ["a", "=", "a"], ["a", "!=", "a"]],  # a contradiction is a subscription as any other
    [["k", "==", 1], ["k", "<>", 2], ["é", "=", "名前"], ["x", "=", "a\"b\\c\n"]],
    [["a", "=", 2**53], ["a", "=", -(2**53)], ["a", "=", 1e308], ["a", "=", 5e-324]],
])
def test_duplicates_order_and_types_are_the_general_paths(items):
    recs = [(b"s1", orjson.dumps({"op": "upsert", "id": "s1", "json": {"all": items}})),
            (None, orjson.dumps({"id": "s2", "json": items[0]})),
            (None, json.dumps({"json": {"all": items}, "id": "s3"}, ensure_ascii=True).encode())]
    for key, value in recs:
        assert fast_row(key, value, DEFAULT_MAX_TERMS, DEFAULT_LIMITS) is not None
    rows = _assert_same(recs)
    subs = [unpack(p, i) for p, i in zip(rows.column("packed").to_pylist(), rows.column("id").to_pylist(), strict=True)]
    records = [{k: v for k, v in orjson.loads(value).items() if k != "op"} for _, value in recs]
    assert [PARSE(record, DEFAULT_MAX_TERMS) for record in records] == subs


def test_bounds_hand_the_record_back():
    value = orjson.dumps({"id": "s1", "json": {"all": [["a", "=", 1], ["b", "=", 2], ["a", "=", 1]]}})
    assert fast_row(None, value, DEFAULT_MAX_TERMS, LimitsSettings(predicates=2)) is None  # 3 occurrences
    assert fast_row(None, value, DEFAULT_MAX_TERMS, LimitsSettings(subscription_bytes=len(value) - 1)) is None
    assert fast_row(None, value, 0, DEFAULT_LIMITS) is None
    assert fast_row(b"s2", value, DEFAULT_MAX_TERMS, DEFAULT_LIMITS) is None
    assert fast_row(None, value, DEFAULT_MAX_TERMS, LimitsSettings(predicates=3)) is not None
    many = orjson.dumps({"id": "s1", "json": {"all": [["a", "=", i] for i in range(300)]}})
    assert fast_row(None, many, DEFAULT_MAX_TERMS, DEFAULT_LIMITS) is not None  # indices past the small ints
    assert _assert_same([(b"s1", many)]).column("op").to_pylist() == [columns.UPSERT]
    rows = _assert_same([(None, value)] * 2 + [(b"s1", many)], limits=LimitsSettings(predicates=2))
    assert rows.column("op").to_pylist() == [ERROR, ERROR, ERROR]


def test_w1_records_all_take_the_fast_path():
    from scripts.bench.feed import subscription_records, workload_subscriptions

    recs = list(subscription_records(workload_subscriptions(3000, seed=1)))
    taken = [fast_row(k, v, DEFAULT_MAX_TERMS, DEFAULT_LIMITS) for k, v in recs]
    assert sum(row is None for row in taken) == 0
    rows = _assert_same(recs)
    assert rows.column("op").to_pylist() == [columns.UPSERT] * len(recs)
    assert rows.column("predicates").to_pylist() == [len(orjson.loads(v)["json"]["all"]) for _, v in recs]


DELETE_IDS = st.one_of(st.sampled_from(["s1", "é", "x" * 256, "", "x" * 257, None, 7, ["s1"], "a:b"]), st.text(max_size=4))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.tuples(DELETE_IDS, st.sampled_from(["delete", "delete", "Delete", "upsert", None]),
                          st.sampled_from([None, None, None, "json", "expr", "other", "id twice"]),
                          st.sampled_from(["none", "id", "other", "bad"]), st.sampled_from(["orjson", "json"])),
                min_size=1, max_size=8), LIMITS)
def test_deletes_take_the_fast_path_and_equal_the_general_one(drawn, limits):
    """A delete of only its op and id takes the fast path (unless its id or key is wrong, or it
    is larger than ``subscription_bytes``); any other delete, and the near misses, the general one."""
    recs = []
    for sub_id, op, extra, key_kind, how in drawn:
        obj = {"op": op, "id": sub_id} if op is not None else {"id": sub_id}
        if extra == "json":
            obj["json"] = {"all": [["a", "=", 1]]}
        elif extra == "expr":
            obj["expr"] = "a = 1"
        elif extra == "other":
            obj["other"] = None
        value = _dumps(obj) if how == "orjson" else json.dumps(obj).encode()
        if extra == "id twice":
            value = value[:-1] + b',"id":"s2"}'
        key = {"none": None, "id": str(obj.get("id")).encode(), "other": b"other", "bad": b"\xff"}[key_kind]
        recs.append((key, value))
        row = fast_row(key, value, DEFAULT_MAX_TERMS, limits)
        held = "s2" if extra == "id twice" else sub_id  # the last of a key given twice
        plain = (op == "delete" and extra in (None, "id twice") and type(held) is str and 0 < len(held) <= 256
                 and (key is None or key == held.encode()) and len(value) <= limits.subscription_bytes)
        if op == "delete":
            assert (row is not None) == plain, (key, value)
        assert (row is not None and row[1] == columns.DELETE) == plain, (key, value)
        if plain:
            assert row is not None and row[:2] == (held, columns.DELETE)
    _assert_same(recs, DEFAULT_MAX_TERMS, limits)
