"""A reader of the pickled registry of the release before the columnar one, and nothing more: it
exists only so that :func:`streaming.registry_columns.migrate.convert_pickled` can convert a
checkpoint that release wrote. Nothing writes this format any more.

That release kept, under ``<checkpoint>/registry/``::

    deltas/<version:012d>.pkl      the changes that made ``version``: (op, id, packed subscription or None)
    snapshots/<version:012d>.pkl   every subscription at ``version``

each a pickle of a call of ``streaming.registry._delta(version, batch_id, time, changes)`` or
``streaming.registry._snapshot(version, batch_id, time, subscriptions)`` on plain tuples, a
subscription packed as ``(id, *matchers.packed.to_tuples(sub))`` (before 2026-11-29, an
``ANYTHING BUT``'s operand was the negated :class:`~matchers.expr.Pred` itself, pickled with its
``Op`` and ``Kind``; :func:`~matchers.packed.from_tuples` reads both). Version 0 was the empty
registry; snapshots and deltas at or below the oldest kept snapshot were pruned. The unpickler
here resolves those names and refuses every other global.
"""

from __future__ import annotations

import io
import pickle
from typing import Any, NamedTuple

from matchers.expr import Kind, Op, Pred, Subscription, _pred_of
from matchers.packed import from_tuples
from streaming.errors import RegistryError
from streaming.storage import Directory

DELTAS = "deltas"
SNAPSHOTS = "snapshots"
SUFFIX = ".pkl"
UPSERT, DELETE = "upsert", "delete"
"""The ops of the old deltas' changes (as :data:`streaming.records.UPSERT` / ``DELETE`` were)."""


class PickledState(NamedTuple):
    """The old registry at its latest version: ``{id: Subscription}`` and the batch that recorded it."""

    version: int
    batch_id: int
    time: float
    subscriptions: dict[str, Subscription]


def _unpack(packed: tuple) -> Subscription:
    return from_tuples(packed[1:], packed[0])


def _delta(version: int, batch_id: int, time: float, changes: tuple) -> tuple[int, int, float, tuple]:
    return version, batch_id, time, changes


def _snapshot(version: int, batch_id: int, time: float, subs: tuple) -> tuple[int, int, float, dict]:
    return version, batch_id, time, {p[0]: _unpack(p) for p in subs}


_NAMES: dict[tuple[str, str], Any] = {
    ("streaming.registry", "_delta"): _delta, ("streaming.registry", "_snapshot"): _snapshot,
    ("matchers.expr", "Pred"): Pred, ("matchers.expr", "Op"): Op, ("matchers.expr", "Kind"): Kind,
    ("matchers.expr", "_pred_of"): _pred_of}  # a predicate as it pickles since 2026-11-29


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return _NAMES[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of the pickled registry's format") from None


def _versions(directory: Directory) -> list[int]:
    try:
        entries = directory.names()
    except FileNotFoundError:
        return []
    return sorted(int(e[: -len(SUFFIX)]) for e in entries
                  if e.endswith(SUFFIX) and not e.startswith(".") and e[: -len(SUFFIX)].isdigit())


def _read(directory: Directory, version: int) -> tuple:
    name = f"{version:012d}{SUFFIX}"
    try:
        return _Unpickler(io.BytesIO(directory.read(name))).load()
    except FileNotFoundError:
        raise RegistryError(f"pickled registry file {directory.uri}/{name} is missing") from None
    except Exception as exc:
        raise RegistryError(f"cannot read pickled registry file {directory.uri}/{name}: "
                            f"{type(exc).__name__}: {exc}") from exc


def read_pickled(directory: Directory) -> PickledState:
    """The latest state of the pickled registry at ``directory``: its latest snapshot plus the deltas
    after it (version 0 and batch ``-1`` when it holds none).

    Raises
    ------
    RegistryError
        If a file is unreadable or a delta after the snapshot is missing.
    """
    deltas, snaps = _versions(directory.sub(DELTAS)), _versions(directory.sub(SNAPSHOTS))
    latest = max(deltas[-1] if deltas else 0, snaps[-1] if snaps else 0)
    if snaps:
        version, batch_id, time, subs = _read(directory.sub(SNAPSHOTS), snaps[-1])
    else:
        version, batch_id, time, subs = 0, -1, 0.0, {}
    for v in range(version + 1, latest + 1):
        _, batch_id, time, changes = _read(directory.sub(DELTAS), v)
        for op, sub_id, packed in changes:
            if op == UPSERT:
                subs[sub_id] = _unpack(packed)
            else:
                subs.pop(sub_id, None)
    return PickledState(latest, batch_id, time, subs)
