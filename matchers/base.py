"""The matcher interface and the registry of matchers by name.

Every index implements :class:`Matcher`: subscriptions are added and removed
incrementally (an ``add`` of a known id replaces it), a batch of encoded events is
matched at once, and memory is reported.  The base class maps subscription ids to
dense integer keys (reused after removal) that the kernels work with.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar, NamedTuple

import numpy as np

from matchers.events import Dictionary, EventBatch, encode
from matchers.expr import Kind, Pred, Scalar, Subscription


class Matches(NamedTuple):
    """Matches of a batch as CSR: event ``i`` matched keys ``keys[offsets[i]:offsets[i+1]]``.

    Keys are the matcher's subscription keys, sorted and distinct within each event.
    """

    offsets: np.ndarray
    keys: np.ndarray

    @property
    def total(self) -> int:
        return int(self.offsets[-1])


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: a bulk insert creates millions of long-lived
    objects, and each full collection it would trigger rescans the whole heap."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Matcher(ABC):
    """A content-based matching index.

    Subclasses implement :meth:`_insert`, :meth:`_delete`, :meth:`_match` and
    :meth:`memory_bytes`, and are registered with :func:`register`.

    Parameters
    ----------
    dictionary : attribute and string dictionaries to share (a new one if ``None``).
    """

    name: ClassVar[str] = ""

    def __init__(self, dictionary: Dictionary | None = None, **params: Any):
        if params:
            raise TypeError(f"{type(self).__name__} got unknown parameters: {sorted(params)}")
        self.dictionary = dictionary if dictionary is not None else Dictionary()
        self._key_of: dict[str, int] = {}
        self._subs: list[Subscription | None] = []
        self._free: list[int] = []

    # -- public API -------------------------------------------------------------
    def add(self, subscriptions: Iterable[Subscription]) -> None:
        """Insert subscriptions; one whose id is already present is replaced."""
        with no_cyclic_gc():
            subs = list({s.id: s for s in subscriptions}.values())
            self.remove(s.id for s in subs if s.id in self._key_of)
            entries = []
            for sub in subs:
                for conj in sub.conjunctions:
                    for p in conj:
                        self._register_operands(p)
                key = self._free.pop() if self._free else len(self._subs)
                if key == len(self._subs):
                    self._subs.append(sub)
                else:
                    self._subs[key] = sub
                self._key_of[sub.id] = key
                entries.append((key, sub))
            if entries:
                try:
                    self._insert(entries)
                except BaseException:
                    self._unassign(entries)
                    raise

    def _unassign(self, entries: list[tuple[int, Subscription]]) -> None:
        """Give back the keys of an insert that failed (the index must be left unchanged by it)."""
        for key, sub in entries:
            if self._key_of.get(sub.id) == key:
                del self._key_of[sub.id]
            self._subs[key] = None
            self._free.append(key)

    def remove(self, ids: Iterable[str]) -> int:
        """Delete subscriptions by id; unknown ids are ignored. Returns how many were removed."""
        entries = []
        for sub_id in dict.fromkeys(ids):
            key = self._key_of.pop(sub_id, None)
            if key is None:
                continue
            entries.append((key, self._subs[key]))
            self._subs[key] = None
            self._free.append(key)
        if entries:
            self._delete(entries)
        return len(entries)

    def encode(self, events: Iterable[Mapping[str, Scalar]]) -> EventBatch:
        """Encode flat events with this matcher's dictionary."""
        return encode(events, self.dictionary)

    def match(self, batch: EventBatch) -> Matches:
        """Match a batch of events encoded with this matcher's dictionary."""
        if batch.n == 0 or not self._key_of:
            return Matches(np.zeros(batch.n + 1, dtype=np.int64), np.zeros(0, dtype=np.int32))
        return self._match(batch)

    def match_ids(self, batch: EventBatch) -> list[list[str]]:
        """Sorted subscription ids matched by each event of the batch."""
        result = self.match(batch)
        return [self.ids(result.keys[result.offsets[i]:result.offsets[i + 1]]) for i in range(batch.n)]

    def match_events(self, events: Iterable[Mapping[str, Scalar]]) -> list[list[str]]:
        """Encode and match flat events; sorted subscription ids per event."""
        return self.match_ids(self.encode(events))

    def ids(self, keys: Iterable[int]) -> list[str]:
        """Sorted subscription ids of keys."""
        subs = self._subs
        return sorted(subs[k].id for k in keys)  # type: ignore[union-attr]

    def key_of(self, sub_id: str) -> int:
        """The key of a subscription id (``KeyError`` if absent)."""
        return self._key_of[sub_id]

    def subscription(self, key: int) -> Subscription:
        """The subscription stored under ``key``."""
        sub = self._subs[key]
        if sub is None:
            raise KeyError(key)
        return sub

    def subscriptions(self) -> Iterable[tuple[int, Subscription]]:
        """Every live ``(key, subscription)``."""
        return ((k, s) for k, s in enumerate(self._subs) if s is not None)

    def __len__(self) -> int:
        return len(self._key_of)

    def __contains__(self, sub_id: object) -> bool:
        return sub_id in self._key_of

    @property
    def capacity(self) -> int:
        """One more than the largest key ever used (size for per-key arrays)."""
        return len(self._subs)

    # -- to implement -------------------------------------------------------------
    @abstractmethod
    def _insert(self, entries: list[tuple[int, Subscription]]) -> None:
        """Index new subscriptions under their keys."""

    @abstractmethod
    def _delete(self, entries: list[tuple[int, Subscription]]) -> None:
        """Forget subscriptions (their keys may be reused by a later insert)."""

    @abstractmethod
    def _match(self, batch: EventBatch) -> Matches:
        """Match a non-empty batch against a non-empty index."""

    @abstractmethod
    def memory_bytes(self) -> int:
        """Bytes held by the index structures (not counting the subscription objects)."""

    # -- helpers ------------------------------------------------------------------
    def _register_operands(self, p: Pred) -> None:
        """Give the predicate's attribute an id and its string operands codes."""
        aid = self.dictionary.attr(p.attr)
        if aid < 0:
            raise MemoryError(f"attribute dictionary is full ({self.dictionary.max_attributes} names)")
        if p.kind is Kind.STR:
            values = p.operand if isinstance(p.operand, tuple) else (p.operand,)
            for v in values:
                self.dictionary.code(aid, v)  # type: ignore[arg-type]


_REGISTRY: dict[str, type[Matcher]] = {}

MATCHER_MODULES = (
    "matchers.brute",
    "matchers.counting",
    "matchers.fabret",
    "matchers.opindex",
    "matchers.vci",
    "matchers.amkh",
)
"""Modules that register matchers when imported (a module not yet present is skipped)."""


def register(name: str):
    """Class decorator registering a :class:`Matcher` under ``name``."""

    def wrap(cls: type[Matcher]) -> type[Matcher]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"matcher name {name!r} is registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return wrap


def _load_all() -> None:
    for module in MATCHER_MODULES:
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)


def names() -> list[str]:
    """Sorted names of every registered matcher."""
    _load_all()
    return sorted(_REGISTRY)


def create(name: str, dictionary: Dictionary | None = None, **params: Any) -> Matcher:
    """A new, empty matcher by registered name."""
    _load_all()
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown matcher {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None
    return cls(dictionary, **params)
