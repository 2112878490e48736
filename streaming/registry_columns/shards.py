"""An executor's shard of the registry, read from the registry's files (step 3 of the wiring plan).

A worker that has no index for shard ``s`` (or holds a newer version than a replayed batch
needs) builds it with :func:`build_shard` from :func:`~streaming.registry_columns.read_shard`;
one that is behind brings its index forward with :func:`catch_up`, which reads the deltas
after its version (``deltas/<v>.arrow``, the shard's rows only). Nothing comes from the
driver but the registry's location and the version, so the driver's memory does not grow
with the subscriptions.

The files hold each expression's subscription packed (:func:`matchers.packed.pack`, done when
its record was parsed); the matcher is given the rows' ``id`` and ``packed`` columns as they are
(:func:`packed_rows`, :meth:`Matcher.add_packed`: an index that takes columns reads them without
an object per subscription, another has them unpacked under the row's id, a tenant's internal
``t:x``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa

from matchers.base import Matcher, SubscriptionTable
from matchers.expr import Subscription
from matchers.packed import unpack
from streaming import routing as routes
from streaming.errors import RegistryError
from streaming.registry_columns import files
from streaming.registry_columns.columns import EXPRESSION
from streaming.registry_columns.registry import read_shard
from streaming.storage import Directory


def expressions(table: pa.Table) -> pa.Table:
    """The rows of kind :data:`EXPRESSION` of a shard's rows (or of its changes)."""
    rows = np.flatnonzero(table.column("kind").to_numpy() == EXPRESSION)
    return table.take(pa.array(rows)) if len(rows) < table.num_rows else table


def subscriptions(table: pa.Table) -> Iterator[Subscription]:
    """The expression subscriptions of a shard's rows (kind :data:`EXPRESSION`; other rows are
    skipped), each unpacked under the row's id (a predicate the rows repeat is one object).

    Raises
    ------
    RegistryError
        If an expression's packed form is missing or unreadable.
    """
    picked = expressions(table)
    cache: dict = {}  # one object per distinct predicate of the rows
    for sub_id, packed in zip(picked.column("id").to_pylist(), picked.column("packed").to_pylist(), strict=True):
        try:
            sub = unpack(packed, sub_id, cache)
        except (TypeError, ValueError, EOFError, IndexError) as exc:
            raise RegistryError(f"subscription {sub_id!r}: its packed form cannot be read: "
                                f"{type(exc).__name__}: {exc}") from exc
        yield sub


def build_shard(directory: str | Directory, version: int, shard: int, shards: int,
                make: Callable[[], Matcher], packed: bool = False, routing: routes.Routing | None = None) -> Matcher:
    """A new matcher (from ``make``) holding shard ``shard`` of ``shards``'s expressions at
    ``version``; with ``packed``, its subscriptions kept as the rows' packed bytes
    (:meth:`Matcher.hold`: for a matcher about to be pickled, which then packs nothing; one that
    took the rows' table as it is, :meth:`Matcher.held_table`, holds it already); with
    ``routing``, the ids of its unrouted ones (:func:`streaming.routing.track_build`)."""
    matcher = make()
    rows = expressions(read_shard(directory, version, shard, shards))
    _add(matcher, rows)
    routes.track_build(matcher, rows, routing)
    if packed and matcher.held_table() is None:
        matcher.hold(table_of(matcher, rows))
    return matcher


def packed_rows(rows: pa.Table) -> SubscriptionTable:
    """The expression ``rows``' ``id`` and ``packed`` columns as a table (row ``i``: key ``i``), nothing unpacked."""
    ids_offsets, ids = _column(rows.column("id"), None, pa.large_string())
    sub_offsets, subs = _column(rows.column("packed"), None, pa.large_binary())
    return SubscriptionTable(ids_offsets, ids, sub_offsets, subs)


def _add(matcher: Matcher, rows: pa.Table) -> None:
    """:meth:`Matcher.add_packed` of the expression ``rows`` (``RegistryError`` naming the first row
    that cannot be read, if one cannot: the matcher unchanged)."""
    try:
        matcher.add_packed(packed_rows(rows))
    except (TypeError, ValueError, EOFError, IndexError):
        for _ in subscriptions(rows):  # the row that cannot be read, if it is that
            pass
        raise


def table_of(matcher: Matcher, rows: pa.Table) -> SubscriptionTable:
    """The subscriptions of ``matcher``, which holds exactly the expression ``rows`` (distinct
    ids), by key: the rows' ``id`` and ``packed`` columns put in key order, nothing unpacked."""
    if len(matcher) != rows.num_rows:
        raise RegistryError(f"a shard's {rows.num_rows} expression rows hold {len(matcher)} distinct ids")
    keys = np.fromiter(map(matcher.key_of, rows.column("id").to_pylist()), dtype=np.int64, count=rows.num_rows)
    at = np.full(matcher.capacity, -1, dtype=np.int64)
    at[keys] = np.arange(rows.num_rows)
    take = pa.array(at, mask=at < 0)
    ids_offsets, ids = _column(rows.column("id"), take, pa.large_string())
    sub_offsets, subs = _column(rows.column("packed"), take, pa.large_binary())
    return SubscriptionTable(ids_offsets, ids, sub_offsets, subs)


def _column(column: pa.ChunkedArray, take: pa.Array | None, kind: pa.DataType) -> tuple[np.ndarray, np.ndarray]:
    """The values of a string or binary column at the positions ``take`` (all if ``None``; null:
    empty), as offsets (int64, from 0) and bytes."""
    values = column.cast(kind)
    values = (values if take is None else values.take(take)).combine_chunks()
    _, offsets, data = values.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int64)[values.offset:values.offset + len(values) + 1]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    return bounds - bounds[0], raw[bounds[0]:bounds[-1]]


def changes_after(directory: str | Directory, after: int, upto: int, shard: int, shards: int) -> pa.Table:
    """The net changes of versions ``after + 1 .. upto`` to shard ``shard`` of ``shards``
    (:func:`~streaming.registry_columns.files.net_deltas`: the last change of each id)."""
    location = directory if isinstance(directory, Directory) else Directory(directory)
    tables = [(v, files.in_shard(files.read_delta(location, v)[0], shard, shards)) for v in range(after + 1, upto + 1)]
    return files.net_deltas(tables)


def catch_up(matcher: Matcher, directory: str | Directory, after: int, upto: int, shard: int, shards: int,
             routing: routes.Routing | None = None) -> int:
    """Bring ``matcher``, holding shard ``shard`` of ``shards`` at version ``after``, to ``upto``:
    the expression upserts join (replacing their ids), then every other id changed leaves it
    (deleted or turned into another kind); nothing changes if one cannot be read.
    The number of ids the versions changed in the shard."""
    net = changes_after(directory, after, upto, shard, shards)
    if not net.num_rows:
        return 0
    joining = expressions(net)
    _add(matcher, joining)  # all read before the matcher changes
    kept = set(joining.column("id").to_pylist())
    changed = net.column("id").to_pylist()
    matcher.remove([sub_id for sub_id in changed if sub_id not in kept])
    routes.track_changes(matcher, changed, joining, routing)
    return net.num_rows

