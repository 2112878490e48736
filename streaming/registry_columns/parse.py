"""Subscription records parsed where the cores are: one batch of records in, one batch of
changes out, as columns (step 1 of the registry's wiring plan, ``docs/service.md``).

:func:`parse_records` judges each record as the earlier release's two queries did
(:func:`streaming.records.read_envelope`, then :func:`~streaming.records.expression_change`
for an expression or :func:`streaming.patterns.registry.pattern_change` for a pattern) and
returns a row per record: the change (id, op, kind, the record's bytes, an expression's
subscription packed (:func:`matchers.packed.pack`) or a pattern's text and partition attribute
(:func:`streaming.registry_columns.view.packed`), expiry, target topic, and with a routing
attribute its route hash, :mod:`streaming.routing`) or its error record (``error``: the errors
topic's JSON), with the record's position.
No Python object per subscription outlives the call, so it runs in a Spark task
(:func:`parse_partition`: the match query's tasks call it, :mod:`streaming.match.changes`)
and the driver gets columns.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from matchers.collector import no_cyclic_gc
from matchers.expr import DEFAULT_MAX_TERMS
from matchers.packed import pack
from streaming.config import LimitsSettings
from streaming.patterns.registry import pattern_change
from streaming.records import (
    DEFAULT_LIMITS,
    DELETE,
    ErrorRecord,
    Position,
    SubscriptionParser,
    count_predicates,
    default_parser,
    expression_change,
    read_envelope,
)
from streaming.registry_columns.columns import DELETE as DELETE_CODE
from streaming.registry_columns.columns import EXPRESSION, PATTERN
from streaming.registry_columns.columns import UPSERT as UPSERT_CODE
from streaming.registry_columns.fastparse import fast_row
from streaming.routing import expression_routes

ERROR = -1
"""The op of a row that is an error record."""

PARSED_SCHEMA = pa.schema([
    ("id", pa.string()), ("op", pa.int8()), ("kind", pa.int8()), ("record", pa.binary()), ("packed", pa.binary()),
    ("expires", pa.float64()), ("target", pa.string()), ("predicates", pa.int32()), ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()), ("error", pa.binary()), ("key", pa.binary()), ("route", pa.int64()),
])
"""One row per subscription record: its change (``op`` :data:`UPSERT_CODE` or
:data:`DELETE_CODE`, ``kind`` :data:`EXPRESSION` or :data:`PATTERN` for an upsert, ``0``
otherwise; ``packed``: an expression's subscription without its id, :func:`matchers.packed.pack`,
or a pattern's text and partition attribute, :func:`streaming.registry_columns.view.packed`;
``predicates``: its count, for the tenants' quota) or its error record
(``op`` :data:`ERROR`; a refused pattern keeps its id and kind :data:`PATTERN`, the others
have neither), its position and key (a refusal's error record names it), and with a routing
attribute (``route_by``) the route hash of each row (:func:`streaming.routing.expression_routes`:
an expression upsert's ``h(v)``, :data:`~streaming.routing.NO_ROUTE` for none and for any other
row; null for every row without one)."""

def parse_records(rb: pa.RecordBatch, parse: SubscriptionParser | None = None, max_terms: int = DEFAULT_MAX_TERMS,
                  limits: LimitsSettings = DEFAULT_LIMITS, targets: bool = False, route_by: str = "") -> pa.RecordBatch:
    """The :data:`PARSED_SCHEMA` rows of a batch of subscription records (Kafka source columns
    ``key, value, topic, partition, offset``), in its order. ``targets``: an upsert may name
    its target topic (the tenant layout, :func:`~streaming.records.parse_change`); ``route_by``:
    the routing attribute (``match.route_by``, ``""``: none) the ``route`` column is of. Without
    ``parse`` (the default parser), a record of the common shape takes
    :func:`.fastparse.fast_row` (the same row); with it, every record takes ``parse``."""
    with no_cyclic_gc():  # a batch's rows are acyclic tuples, freed once they are columns
        keys, values = rb.column("key").to_pylist(), rb.column("value").to_pylist()
        rows: list[tuple | None] = _fast_rows(keys, values, max_terms, limits) if parse is None else [None] * rb.num_rows
        general = [i for i, row in enumerate(rows) if row is None]
        if general:
            parse = parse or default_parser()
            topics, parts, offsets = (rb.column(c).to_pylist() for c in ("topic", "partition", "offset"))
            for i in general:
                rows[i] = _row(keys[i], values[i], Position(topics[i], int(parts[i]), int(offsets[i])), parse,
                               max_terms, limits, targets)
        return _batch(rows, rb, route_by)


def parse_fast(rb: pa.RecordBatch, max_terms: int = DEFAULT_MAX_TERMS, limits: LimitsSettings = DEFAULT_LIMITS,
               route_by: str = "") -> tuple[pa.RecordBatch, pa.RecordBatch]:
    """The rows (as :func:`parse_records` gives them, in ``rb``'s order) of the records of
    ``rb`` the fast path takes, and the other records (``rb``'s rows, in its order), whose
    rows :func:`parse_records` gives: the two are the rows of ``rb``."""
    with no_cyclic_gc():
        keys, values = rb.column("key").to_pylist(), rb.column("value").to_pylist()
        rows = _fast_rows(keys, values, max_terms, limits)
        took = np.fromiter((r is not None for r in rows), np.bool_, len(rows))
        return (_batch([r for r in rows if r is not None], rb.filter(pa.array(took)), route_by),
                rb.filter(pa.array(~took)))


def _fast_rows(keys: list[bytes | None], values: list[bytes | None], max_terms: int,
               limits: LimitsSettings) -> list[tuple | None]:
    """:func:`.fastparse.fast_row` of each record (``None``: the general path judges it)."""
    return [fast_row(key, value, max_terms, limits) for key, value in zip(keys, values, strict=True)]


def _batch(rows: list, records: pa.RecordBatch, route_by: str) -> pa.RecordBatch:
    """The :data:`PARSED_SCHEMA` batch of rows (:data:`_ROW` tuples) of ``records`` (their
    position and key taken as they are), with their routes by ``route_by`` (if any)."""
    cols: dict[str, Any] = dict(zip(_ROW, zip(*rows, strict=True) if rows else [()] * len(_ROW), strict=True))
    arrays = {f.name: records.column(f.name).cast(f.type) if f.name in _RECORD else pa.array(cols[f.name], f.type)
              for f in PARSED_SCHEMA if f.name != "route"}
    if route_by:
        expressions = (np.asarray(arrays["op"]) == UPSERT_CODE) & (np.asarray(arrays["kind"]) == EXPRESSION)
        route = pa.array(expression_routes(arrays["packed"], expressions, route_by), pa.int64())
    else:
        route = pa.nulls(len(rows), pa.int64())
    return pa.RecordBatch.from_arrays([*arrays.values(), route], schema=PARSED_SCHEMA)


_RECORD = frozenset(("topic", "partition", "offset", "key"))
"""The columns of :data:`PARSED_SCHEMA` that are the record's own."""


_ROW = ("id", "op", "kind", "record", "packed", "expires", "target", "predicates", "error")
"""The columns of :func:`_row`'s tuple."""


def _row(key: bytes | None, value: bytes | None, position: Position, parse: SubscriptionParser, max_terms: int,
         limits: LimitsSettings, targets: bool) -> tuple:
    """``(id, op, kind, record, packed, expires, target, predicates, error)`` of one record."""
    envelope = read_envelope(key, value, position, limits)
    if isinstance(envelope, ErrorRecord):
        return _error(envelope)
    op, sub_id, obj = envelope
    if op == DELETE or obj is None:
        return sub_id, DELETE_CODE, 0, None, None, None, None, 0, None
    if "pattern" in obj:
        judged = pattern_change(sub_id, obj, key, value, position)
        if isinstance(judged, ErrorRecord):
            return sub_id, ERROR, PATTERN, None, None, None, None, 0, judged.to_json()
        return sub_id, UPSERT_CODE, PATTERN, value, judged, None, None, 0, None
    change = expression_change(sub_id, obj, key, value, position, parse, max_terms, limits, targets)
    if isinstance(change, ErrorRecord):
        return _error(change)
    sub = change.subscription
    assert sub is not None  # an upsert carries its subscription
    return (change.id, UPSERT_CODE, EXPRESSION, value, pack(sub), sub.expires, change.target, count_predicates(sub),
            None)


def _error(record: ErrorRecord) -> tuple:
    return None, ERROR, 0, None, None, None, None, 0, record.to_json()


def parse_partition(batches: Iterator[pa.RecordBatch], max_terms: int = DEFAULT_MAX_TERMS,
                    limits: LimitsSettings = DEFAULT_LIMITS, targets: bool = False,
                    route_by: str = "") -> Iterator[pa.RecordBatch]:
    """:func:`parse_records` over one partition of records, each with the default parser (what
    a parse task runs, :func:`streaming.match.changes.parse_ranges`)."""
    for rb in batches:
        if rb.num_rows:
            yield parse_records(rb, None, max_terms, limits, targets, route_by)
