"""The columnar parse of subscription records (issue 29, step 1) judges every record as the
two queries' parsers do today: the same changes, the same error records."""

from __future__ import annotations

import orjson
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.patterns.registry import parse_pattern_change
from streaming.records import (
    DEFAULT_LIMITS,
    DELETE,
    UPSERT,
    Change,
    ErrorRecord,
    Position,
    count_predicates,
    default_parser,
    parse_change,
)
from streaming.registry_columns import columns
from streaming.registry_columns.parse import ERROR, PARSED_SCHEMA, parse_partition, parse_records

PARSE = default_parser()
VALUES = [
    {"id": "a", "expr": "price > 10 AND symbol = 'X'"},
    {"id": "a", "expr": "price > 10", "expires": 4102444800},
    {"id": "b", "json": {"price": [{"numeric": [">", 1]}]}},
    {"id": "c", "pattern": "SELECT * FROM FILTER{price > 10}(Stock)"},
    {"id": "c", "pattern": "SELECT * FROM ("},
    {"id": "c", "pattern": 7},
    {"id": "c", "pattern": "SELECT * FROM FILTER{price > 10}(Stock)", "target": "t"},
    {"id": "d", "op": "delete"},
    {"id": "d", "op": "delete", "expr": "x"},
    {"id": "e", "op": "merge"},
    {"id": "", "expr": "price > 1"},
    {"id": "f", "expr": "price >"},
    {"id": "f", "expr": "price > 1", "target": "elsewhere"},
    {"id": "f", "expr": "price > 1", "target": 3},
    {"id": "g", "expr": " OR ".join(f"p{i} = {i}" for i in range(300))},
    [1, 2],
]
RAW = [orjson.dumps(v) for v in VALUES] + [b"{not json", b"", None, b'{"id": "h", "expr": "a = 1"}' + b" " * 70_000]
KEYS = [None, b"a", b"c", b"d", b"\xff"]


def _expected(key, value, position, targets):
    """What today's parsers make of one record, as a row of PARSED_SCHEMA's change columns."""
    out = parse_change(key, value, position, PARSE, targets=targets)
    if isinstance(out, ErrorRecord):
        return None, ERROR, 0, None, None, None, 0, out.to_json()
    assert isinstance(out, Change)
    if out.op == UPSERT:
        return (out.id, columns.UPSERT, columns.EXPRESSION, value, out.subscription.expires, out.target,
                count_predicates(out.subscription), None)
    pattern = parse_pattern_change(key, value, position, {out.id}, DEFAULT_LIMITS)
    if isinstance(pattern, ErrorRecord):  # a refused pattern keeps its id (the match query drops the id)
        return out.id, ERROR, columns.PATTERN, None, None, None, 0, pattern.to_json()
    if pattern is None or pattern[0] == DELETE:
        return out.id, columns.DELETE, 0, None, None, None, 0, None
    return out.id, columns.UPSERT, columns.PATTERN, value, None, None, 0, None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(RAW)), min_size=1, max_size=12), st.booleans())
def test_each_record_is_judged_as_by_both_parsers(records, targets):
    rb = pa.RecordBatch.from_pydict({
        "key": [k for k, _ in records], "value": [v for _, v in records], "topic": ["subs"] * len(records),
        "partition": [0] * len(records), "offset": list(range(len(records)))})
    got = parse_records(rb, PARSE, targets=targets)
    assert got.schema == PARSED_SCHEMA and got.num_rows == len(records)
    rows = got.to_pylist()
    for i, ((key, value), row) in enumerate(zip(records, rows, strict=True)):
        want = _expected(key, value, Position("subs", 0, i), targets)
        assert tuple(row[c] for c in ("id", "op", "kind", "record", "expires", "target", "predicates",
                                                     "error")) == want
        assert (row["topic"], row["partition"], row["offset"], row["key"]) == ("subs", 0, i, key)


def test_a_partition_of_batches_comes_back_parsed_batch_by_batch():
    rb = pa.RecordBatch.from_pydict({"key": [b"a"], "value": [RAW[0]], "topic": ["s"], "partition": [1], "offset": [5]})
    empty = rb.slice(0, 0)
    out = list(parse_partition(iter([rb, empty, rb])))
    assert [b.num_rows for b in out] == [1, 1] and out[0].column("kind").to_pylist() == [columns.EXPRESSION]
