"""A micro-batch's parsed subscription records to the registry's next changes, on the driver:
ids, target topics, quotas and expiry judged on columns (step 2 of the wiring plan, ``docs/service.md``).

:func:`admit` takes the rows :func:`~streaming.registry_columns.parse.parse_records` made (from
any number of tasks, in any order) and judges them as the earlier release's two queries did
(the match query's gate of expressions, modelled by ``tests/unit/streaming/gate_model.py``, and
its pattern registry, by ``tests/unit/streaming/pattern_model.py``), in record order (topic, partition,
offset): each change gets its tenant's internal id (:meth:`Tenants.internal`); a tenant's upsert
naming a target it may not, or past its ``subscriptions``, ``predicates`` or ``patterns``
quota, is refused with an error record on its errors topic; an upsert that gives a tenant's
id another internal id (another target, or the other kind) deletes the old one first; then
live subscriptions whose expiry time is past, and upserts already expired, become deletes.
Strings are handled by Arrow, the sequential quota decisions by one compiled pass
(:func:`_judge`); Python runs per tenant, per distinct target, and per refused record. The
rows are ordered and judged on their narrow columns; each change's record bytes and packed
subscription are taken once (at 1,000,000 W1 rows, copies of every column in record order cost
about half of its 4.2 s of CPU, 2026-11-30).

Unlike the earlier release, a bad or refused record changes nothing: there, a record of one kind that the
other kind's query judges (a bad or refused pattern, a bad or refused expression) still deletes
that query's subscription of the same id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.patterns.registry import PATTERN as PATTERN_STAGE
from streaming.records import SUBSCRIPTION, Position, error
from streaming.registry_columns import kernels
from streaming.registry_columns.columns import (
    DELETE,
    EXPRESSION,
    PATTERN,
    UPSERT,
    ChangeBatch,
    IdColumns,
)
from streaming.registry_columns.parse import ERROR, PARSED_SCHEMA
from streaming.registry_columns.registry import ColumnRegistry
from streaming.routing import UNSET
from streaming.tenants import OPERATOR, SEP, Tenants

ERRORS_SCHEMA = pa.schema([("topic", pa.string()), ("value", pa.binary())])
"""The error records to send: the errors topic and the record (:meth:`ErrorRecord.to_json`)."""
QUOTAS = ("subscriptions", "predicates", "patterns")
"""The quotas :func:`_judge` applies, by column of its ``usage`` and ``bounds``."""
_TARGET = len(QUOTAS) + 1
"""The refusal code of a target topic the tenant may not name."""


class Admitted(NamedTuple):
    """What a batch's records do: the changes to :meth:`ColumnRegistry.apply` (record order,
    refused ones dropped, moved ids' deletes before their upserts, expiry deletes last), the
    error records (``ERRORS_SCHEMA``, record order), the accepted changes and the expiry
    deletes (as :class:`streaming.match.changes.ChangeOutcome` counts them), whether the batch
    is a replay, and the time it was judged at (a replay's: the time it recorded)."""

    changes: ChangeBatch
    errors: pa.Table
    accepted: int
    expired: int
    replay: bool
    now: float


def admit(parsed: pa.Table | pa.RecordBatch | Sequence[pa.RecordBatch], registry: ColumnRegistry, batch_id: int,
          tenants: Tenants | None, topic_exists: Callable[[str], bool], now: float,
          errors_topic: str = "errors") -> Admitted:
    """Judge a batch's parsed rows (``PARSED_SCHEMA``) against ``registry`` at ``now``.

    A batch at or below the registry's last is a replay: it is judged against the columns
    before the version it recorded (or the one it saw), at that version's time, so it gives
    what it gave the first time. ``errors_topic`` is where errors go without ``tenants``.
    """
    if isinstance(parsed, pa.RecordBatch):
        parsed = pa.Table.from_batches([parsed])
    elif not isinstance(parsed, pa.Table):
        parsed = pa.Table.from_batches(list(parsed), schema=PARSED_SCHEMA)
    wide = _Wide(parsed, _record_order(parsed))
    rows = parsed.select(_NARROW)
    rows = (rows if wide.order is None else rows.take(pa.array(wide.order))).combine_chunks()
    replay = batch_id <= registry.batch_id
    state = registry.columns
    if replay:
        stamp = registry.version_of_batch(batch_id)
        state = registry.columns_at(stamp.version - 1 if stamp.batch_id == batch_id else stamp.version)
        now = stamp.time
    op = rows.column("op").to_numpy()
    good, failed = np.flatnonzero(op != ERROR), np.flatnonzero(op == ERROR)
    sound = rows if len(good) == rows.num_rows else rows.take(pa.array(good))
    changes, refused, reasons = _judged(sound, good, wide, state, tenants, topic_exists)
    bad = np.concatenate([failed, good[refused]])
    values = pa.concat_arrays([wide.at("error", failed), pa.array(reasons, pa.binary())])
    order = np.argsort(bad, kind="stable")
    topics = _per_topic(rows.column("topic").chunk(0).take(pa.array(bad[order], pa.int64())) if rows.num_rows
                        else pa.array([], pa.string()),
                        lambda t: tenants.errors_topic_of(t) if tenants is not None else errors_topic)
    errors = pa.table([topics, values.take(pa.array(order, pa.int64()))], schema=ERRORS_SCHEMA)
    expiring = _expiring(changes, registry.expired(now) if not replay else state.expired(now), now)
    out = changes if not len(expiring) else ChangeBatch.concat(
        [changes, ChangeBatch.of(expiring, np.full(len(expiring), DELETE, np.int8))])
    return Admitted(out, errors, len(changes), len(expiring), replay, now)


_NARROW = ("id", "op", "kind", "expires", "target", "predicates", "topic", "partition", "offset")
"""The columns of the parsed rows :func:`admit` judges by; the others (the record's bytes, the
packed subscription, its route, the error record and the key) are taken only for the rows that need
them (:class:`_Wide`), without a copy of the whole batch's bytes in record order."""


def _record_order(parsed: pa.Table) -> np.ndarray | None:
    """The rows' positions in record order (topic, partition, offset), or ``None`` when they are
    in it (the tasks of one partition's ranges, collected in order)."""
    n = parsed.num_rows
    if not n:
        return None
    topics = parsed.column("topic").combine_chunks().dictionary_encode()
    rank = pc.rank(topics.dictionary, sort_keys="ascending").to_numpy().astype(np.int64)  # distinct: no ties
    order = np.lexsort((parsed.column("offset").to_numpy(), parsed.column("partition").to_numpy(),
                        rank[topics.indices.to_numpy(zero_copy_only=False)]))
    return None if np.array_equal(order, np.arange(n)) else order


class _Wide(NamedTuple):
    """The parsed rows as given, and their record order (:func:`_record_order`)."""

    parsed: pa.Table
    order: np.ndarray | None

    def at(self, name: str, rows: np.ndarray) -> pa.Array:
        """Column ``name`` at ``rows`` (positions in record order), as one array."""
        column = self.parsed.column(name)
        at = rows if self.order is None else self.order[rows]
        if len(at) == len(column) and np.array_equal(at, np.arange(len(at))):
            return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
        return column.take(pa.array(at, pa.int64())).combine_chunks()


def _per_topic(topics: pa.Array, of: Callable[[str], str]) -> pa.Array:
    """``of(topic)`` for each topic (called once per distinct topic)."""
    enc = topics.dictionary_encode()
    mapped = pa.array([of(t) for t in enc.dictionary.to_pylist()], pa.string())
    return mapped.take(enc.indices) if len(topics) else pa.array([], pa.string())


def _judged(rows: pa.Table, at: np.ndarray, wide: _Wide, state: IdColumns, tenants: Tenants | None,
            topic_exists: Callable[[str], bool]) -> tuple[ChangeBatch, np.ndarray, list[bytes]]:
    """The changes of a batch's sound rows (:data:`_NARROW` columns, at positions ``at`` of the
    record order, whose other columns ``wide`` gives), which rows were refused (a mask), and the
    refused rows' error records, in order."""
    n = rows.num_rows
    if not n:
        return ChangeBatch.of([], []), np.zeros(0, np.bool_), []
    ids, target = rows.column("id").chunk(0), rows.column("target").chunk(0)
    tenant = _per_topic(rows.column("topic").chunk(0), tenants.tenant_of_topic if tenants else lambda t: OPERATOR)
    plain = _internal(tenant, ids, tenants)
    new = pc.if_else(pc.is_valid(target), _join(tenant, target, ids), plain) if target.null_count < n else plain
    current = plain  # the id the tenant's id has before the batch: the one naming a target, if held
    for name, targets in (state.live_targets().items() if tenants else ()):  # one per tenant and target held
        mine = pa.array(np.flatnonzero(np.asarray(pc.equal(tenant, name))), pa.int64())
        for t in targets:
            named = _join(tenant.take(mine), pa.scalar(t), ids.take(mine))
            found = _held(state, named)[0] != 0
            mask = np.zeros(n, np.bool_)
            mask[np.asarray(mine)[found]] = True
            current = pc.replace_with_mask(current, pa.array(mask), named.filter(pa.array(found)))
    kind0, preds0 = _held(state, current)
    if new is plain and current is plain:  # no target named nor held: one id per row
        codes = plain.dictionary_encode()
        idx = np.tile(codes.indices.to_numpy(zero_copy_only=False).astype(np.int64), (3, 1))
    else:
        codes = pa.concat_arrays([plain, new, current]).dictionary_encode()
        idx = codes.indices.to_numpy(zero_copy_only=False).astype(np.int64).reshape(3, n)
    tenant_enc = tenant.dictionary_encode()
    names = tenant_enc.dictionary.to_pylist()
    usage, bounds = np.zeros((len(names), len(QUOTAS)), np.int64), np.zeros((len(names), len(QUOTAS)), np.int64)
    held = state.held_by_tenant()
    for i, name in enumerate(names):  # one per tenant in the batch
        usage[i] = (*held.get((name, EXPRESSION), (0, 0)), held.get((name, PATTERN), (0, 0))[0])
        quotas = tenants.quotas.get(name, {}) if tenants and name else {}
        bounds[i] = [quotas.get(q, 0) for q in QUOTAS]
    bad_target = np.zeros(n, np.bool_)
    if tenants is not None and target.null_count < n:  # judged once per tenant and target named
        pairs = pc.binary_join_element_wise(tenant, target, SEP).dictionary_encode()  # a tenant's name holds no SEP
        refused = [tenants.refuse_target(owner, "", topic, topic_exists) is not None
                   for owner, topic in (pair.split(SEP, 1) for pair in pairs.dictionary.to_pylist())]
        bad_target = np.asarray(refused, np.bool_)[pairs.indices.fill_null(0).to_numpy(zero_copy_only=False)]
        bad_target &= np.asarray(pc.is_valid(target))
    t_idx = tenant_enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    op, kind = rows.column("op").to_numpy(), rows.column("kind").to_numpy()
    preds = rows.column("predicates").to_numpy()
    out_id, moved, refusal, would_hold = _judge(idx[0], t_idx, op, kind, preds, idx[1], bad_target, idx[2], kind0,
                                                preds0, usage, bounds, len(codes.dictionary))
    reasons = _refusals(rows, np.flatnonzero(refusal), wide, at, [names[t] for t in t_idx[refusal != 0].tolist()],
                        refusal[refusal != 0].tolist(), would_hold[refusal != 0].tolist(), tenants, topic_exists)
    took = np.flatnonzero(out_id >= 0)
    pairs_out = 1 + (moved[took] >= 0)
    src = np.repeat(took, pairs_out)
    is_move = np.zeros(len(src), np.bool_)
    is_move[(np.cumsum(pairs_out) - pairs_out)[moved[took] >= 0]] = True
    source = pa.array(src, pa.int64())
    changes = ChangeBatch.of(
        codes.dictionary.take(pa.array(np.where(is_move, moved[src], out_id[src]))),
        np.where(is_move, DELETE, op[src]).astype(np.int8), np.where(is_move, 0, kind[src]),
        wide.at("record", at[src]), np.where(is_move, np.nan, rows.column("expires").to_numpy()[src]),
        tenant.take(source), np.where(is_move, 0, preds[src]), wide.at("packed", at[src]),
        pc.fill_null(wide.at("route", at[src]), UNSET).to_numpy())
    return changes, refusal != 0, reasons


def _join(tenant: pa.Array, target: pa.Array | pa.Scalar, ids: pa.Array) -> pa.Array:
    """``tenant>target:id`` (null where the target is)."""
    return pc.binary_join_element_wise(pc.binary_join_element_wise(tenant, target, ">"), ids, ":")


def _internal(tenant: pa.Array, ids: pa.Array, tenants: Tenants | None) -> pa.Array:
    """:meth:`Tenants.internal` of each id without a target (the ids as they are without tenants)."""
    if tenants is None:
        return ids
    as_is = pc.and_(pc.equal(tenant, OPERATOR), pc.invert(pc.match_substring(ids, ":")))
    return pc.if_else(as_is, ids, pc.binary_join_element_wise(tenant, ids, ":"))


def _held(state: IdColumns, ids: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The kind (``0``: none) and predicate count of each id in ``state``."""
    rows = state.find(ids)
    found = rows >= 0
    kinds, preds = np.zeros(len(rows), np.int8), np.zeros(len(rows), np.int32)
    kinds[found], preds[found] = state.kind[rows[found]], state.predicates[rows[found]]
    return kinds, preds


def _refusals(rows: pa.Table, at: np.ndarray, wide: _Wide, where: np.ndarray, owners: list[str], codes: list[int],
              held: list[int], tenants: Tenants | None, topic_exists: Callable[[str], bool]) -> list[bytes]:
    """The error records of refused rows ``at`` (of ``rows``, at positions ``where`` of the record
    order, whose record and key ``wide`` gives; as the earlier release's gate and pattern registry
    worded them: :meth:`Tenants.refuse_target`, :meth:`Tenants.refusal`), in order: one Python step per refused record."""
    if not len(at):
        return []
    assert tenants is not None  # only tenants' records are refused
    cols = rows.select(["id", "target", "topic", "partition", "offset"]).take(pa.array(at)).to_pydict()
    cols.update(record=wide.at("record", where[at]).to_pylist(), key=wide.at("key", where[at]).to_pylist())
    out = []
    for i, (owner, code) in enumerate(zip(owners, codes, strict=True)):
        sub_id = cols["id"][i]
        if code == _TARGET:
            reason = tenants.refuse_target(owner, sub_id, cols["target"][i], topic_exists)
        else:
            reason = tenants.refusal(owner, sub_id, QUOTAS[code - 1], held[i])
        assert reason is not None
        stage = PATTERN_STAGE if code == QUOTAS.index("patterns") + 1 else SUBSCRIPTION
        position = Position(cols["topic"][i], cols["partition"][i], cols["offset"][i])
        out.append(error(stage, cols["record"][i], position, reason, cols["key"][i]).to_json())
    return out


def _expiring(changes: ChangeBatch, due: pa.Array, now: float) -> pa.Array:
    """Ids to delete for expiry: those ``due`` the batch does not change (sorted: the same whatever
    the columns' row order), and the batch's last upserts whose expiry time is at or before ``now``."""
    off, data = kernels.string_buffers(changes.ids)
    h, _ = kernels.hash_ids(off, data, kernels.CRC_TABLE)
    last = kernels.last_occurrences(h, off, data, kernels.table_size(len(h)))
    stale = last & (changes.ops == UPSERT) & (changes.expires <= now)
    untouched = pc.invert(pc.is_in(due, value_set=changes.ids)) if len(changes) else pa.array(np.ones(len(due), bool))
    due = due.filter(untouched)
    return pa.concat_arrays([due.take(pc.array_sort_indices(due)), changes.ids.filter(pa.array(stale))])


@numba.njit(cache=True, nogil=True)
def _judge(key, tenant, op, kind, preds, new_id, bad_target, current, kind0, preds0, usage, bounds, nkeys):
    """The sequential decisions of a batch's sound rows, in order, as the earlier release's gates made them.

    Per row: ``key`` (dense id of its tenant's id without a target), ``tenant`` (row of
    ``usage``/``bounds``: held and quota of :data:`QUOTAS`, ``0``: none), ``new_id`` (dense id
    an upsert gives), ``current``/``kind0``/``preds0`` (the key's id, kind and predicates
    before the batch). Returns per row the dense id it changes (``-1``: refused), the id it
    moves away from (``-1``: none), the refusal code (index in :data:`QUOTAS` plus one, or
    :data:`_TARGET`) and the figure the refused row would have held. ``usage`` is updated.
    """
    n = len(key)
    cur = np.full(nkeys, -1, np.int64)
    ckind = np.zeros(nkeys, np.int8)
    cpreds = np.zeros(nkeys, np.int64)
    out_id, moved = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    refusal, would_hold = np.zeros(n, np.int8), np.zeros(n, np.int64)
    for i in range(n):
        k, t = key[i], tenant[i]
        if cur[k] < 0:
            cur[k], ckind[k], cpreds[k] = current[i], kind0[i], preds0[i]
        if bad_target[i]:
            refusal[i] = _TARGET
            continue
        old_n = 1 if ckind[k] == EXPRESSION else 0
        old_p = cpreds[k] if ckind[k] == EXPRESSION else 0
        old_pat = 1 if ckind[k] == PATTERN else 0
        new_n, new_p, new_pat = 0, 0, 0
        if op[i] == UPSERT:
            if kind[i] == EXPRESSION:
                new_n, new_p = 1, preds[i]
                s, p = usage[t, 0] - old_n + 1, usage[t, 1] - old_p + preds[i]
                if 0 < bounds[t, 0] < s:
                    refusal[i], would_hold[i] = 1, s
                    continue
                if 0 < bounds[t, 1] < p:
                    refusal[i], would_hold[i] = 2, p
                    continue
            else:
                new_pat = 1
                if old_pat == 0 and 0 < bounds[t, 2] < usage[t, 2] + 1:
                    refusal[i], would_hold[i] = 3, usage[t, 2] + 1
                    continue
            if new_id[i] != cur[k] and ckind[k] != 0:
                moved[i] = cur[k]
            out_id[i] = new_id[i]
            cur[k], ckind[k], cpreds[k] = new_id[i], kind[i], new_p
        else:
            out_id[i] = cur[k]
            cur[k], ckind[k], cpreds[k] = key[i], 0, 0
        usage[t, 0] += new_n - old_n
        usage[t, 1] += new_p - old_p
        usage[t, 2] += new_pat - old_pat
    return out_id, moved, refusal, would_hold


def warm() -> None:
    """Load the compiled kernels :func:`admit` and :meth:`ColumnRegistry.apply` run (from numba's
    cache: about 0.9 s of the first batch's admit in a fresh driver at 1,000,000 records,
    2026-11-30) by admitting and applying one record in a scratch registry: the match query
    runs it beside its start (:class:`streaming.match.job.MatchJob`)."""
    import tempfile

    from streaming.registry_columns.parse import parse_records

    schema = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                        ("partition", pa.int32()), ("offset", pa.int64())])
    records = pa.RecordBatch.from_pydict({"key": [b"w"], "value": [b'{"id": "w", "json": ["a", "=", 1]}'],
                                          "topic": ["t"], "partition": [0], "offset": [0]}, schema=schema)
    with tempfile.TemporaryDirectory(prefix="registry-warm-") as where:
        registry = ColumnRegistry(where)
        got = admit(parse_records(records), registry, 0, None, lambda _t: True, 0.0)
        registry.apply(0, got.changes, got.now, snapshot=False)
