"""The columnar parse of subscription records (issue 29, step 1) judges every record as the
earlier release's two parsers did: the same changes, the same error records (a pattern's as
that release's pattern registry judged it: envelope, then its compiled text)."""

from __future__ import annotations

import orjson
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.cayuga.compiler import chains, partition_attribute
from matchers.cayuga.language import parse
from streaming.patterns.registry import pattern_change
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
    read_envelope,
)
from streaming.registry_columns import columns, view
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
    envelope = read_envelope(key, value, position, DEFAULT_LIMITS)
    assert not isinstance(envelope, ErrorRecord)  # parse_change would have refused it
    op, public, obj = envelope
    if op == DELETE or obj is None or "pattern" not in obj:
        return out.id, columns.DELETE, 0, None, None, None, 0, None
    judged = pattern_change(public, obj, key, value, position)
    if isinstance(judged, ErrorRecord):  # a refused pattern keeps its id
        return out.id, ERROR, columns.PATTERN, None, None, None, 0, judged.to_json()
    return out.id, columns.UPSERT, columns.PATTERN, value, None, None, 0, None


def _packed(row) -> bytes | None:
    """A pattern upsert's packed column: its text and partition attribute."""
    obj = orjson.loads(row["record"])
    return view.packed(obj["pattern"], partition_attribute(chains(parse(obj["pattern"]))))


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
        if row["kind"] == columns.PATTERN and row["op"] == columns.UPSERT:
            assert row["packed"] == _packed(row)


def test_a_partition_of_batches_comes_back_parsed_batch_by_batch():
    rb = pa.RecordBatch.from_pydict({"key": [b"a"], "value": [RAW[0]], "topic": ["s"], "partition": [1], "offset": [5]})
    empty = rb.slice(0, 0)
    out = list(parse_partition(iter([rb, empty, rb])))
    assert [b.num_rows for b in out] == [1, 1] and out[0].column("kind").to_pylist() == [columns.EXPRESSION]
