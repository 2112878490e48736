"""Subscriptions by key packed in byte arrays (:class:`SubscriptionTable`): how a pickled matcher,
or one built from the registry's rows (:meth:`matchers.base.Matcher.add_packed`), holds them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from matchers.expr import Subscription
from matchers.packed import pack, unpack


class Packed(NamedTuple):
    """One subscription as its id and :func:`~matchers.packed.pack`'s bytes (unpacked when read)."""

    id: str
    data: bytes


class SubscriptionTable(Sequence):
    """Subscriptions by key packed in byte arrays: how a pickled matcher holds them.

    As Python objects the subscriptions are most of a matcher's memory; packed, they
    pickle out of band like the index arrays (and can be shared between processes, see
    :mod:`streaming.shared_index`).  Each is its id (UTF-8) and :func:`matchers.packed.pack`'s
    bytes, the registry's own form, so that a shard built from the registry's files takes
    its columns as they are (:meth:`Matcher.hold`).  ``table[key]`` unpacks one subscription
    (``None`` for a free key) and :meth:`id_of` decodes only its id.  Changes (``table[key] = sub``,
    :meth:`append`, :meth:`extend`) are kept beside the packed arrays, which are never
    written, so an unpickled matcher that changes holds only what changed as objects (or as
    :class:`Packed` bytes, which :meth:`put` keeps: a change read from the registry).
    """

    def __init__(self, id_offsets: np.ndarray, id_bytes: np.ndarray, sub_offsets: np.ndarray,
                 sub_bytes: np.ndarray):
        self.id_offsets, self.id_bytes = id_offsets, id_bytes
        self.sub_offsets, self.sub_bytes = sub_offsets, sub_bytes
        self._len = len(sub_offsets) - 1
        self._changed: dict[int, Subscription | Packed | None] = {}
        self._id_strings: pa.LargeStringArray | None = None  # the ids as Arrow strings, made on first use

    @classmethod
    def pack(cls, subs: Sequence[Subscription | None]) -> SubscriptionTable:
        """The table of ``subs`` (a table without changes is returned as it is)."""
        if isinstance(subs, SubscriptionTable):
            if not subs._changed:
                return subs
            pairs = [subs._encoded(key) for key in range(len(subs))]
        else:
            pairs = [_encode(sub) for sub in subs]
        return cls._of(pairs)

    @classmethod
    def _of(cls, pairs: Sequence[tuple[bytes, bytes]]) -> SubscriptionTable:
        """The table of ``(id, packed bytes)`` pairs (row ``i``: ``pairs[i]``)."""
        ids, blobs = zip(*pairs, strict=True) if pairs else ((), ())
        return cls(_offsets(ids), np.frombuffer(b"".join(ids), dtype=np.uint8),
                   _offsets(blobs), np.frombuffer(b"".join(blobs), dtype=np.uint8))

    def rows_at(self, keys: Sequence[int]) -> SubscriptionTable:
        """The subscriptions under the live ``keys``, in order, as a table of their own (row ``i``:
        ``keys[i]``'s), their bytes copied, nothing unpacked (a change held as an object packed)."""
        return SubscriptionTable._of(list(map(self._encoded, keys)))

    def ids(self) -> list[str]:
        """The ids of the packed rows (not of the changes; a free row's is empty)."""
        bounds = self.id_offsets.tolist()
        data = self.id_bytes.tobytes()
        if self.id_bytes.size and self.id_bytes.max() >= 0x80:
            return [data[lo:hi].decode("utf-8") for lo, hi in zip(bounds, bounds[1:], strict=False)]
        text = data.decode("ascii")  # one character a byte: sliced at the byte offsets
        return list(map(text.__getitem__, map(slice, bounds, bounds[1:])))

    def put(self, keys: Sequence[int], rows: Sequence[Packed]) -> None:
        """Hold ``rows[i]`` under ``keys[i]`` (a key at :func:`len` or beyond extends the table,
        with free keys up to it), still packed."""
        self._changed.update(zip(keys, rows, strict=True))
        top = max(keys, default=-1) + 1
        for key in range(self._len, top):
            self._changed.setdefault(key, None)
        self._len = max(self._len, top)

    def _encoded(self, key: int) -> tuple[bytes, bytes]:
        """The id and the packed subscription under ``key`` (empty for a free key)."""
        if key in self._changed:
            held = self._changed[key]
            return (held.id.encode("utf-8"), held.data) if isinstance(held, Packed) else _encode(held)
        return (self.id_bytes[self.id_offsets[key]:self.id_offsets[key + 1]].tobytes(),
                self.sub_bytes[self.sub_offsets[key]:self.sub_offsets[key + 1]].tobytes())

    def __reduce__(self):
        packed = SubscriptionTable.pack(self)
        return type(self), (packed.id_offsets, packed.id_bytes, packed.sub_offsets, packed.sub_bytes)

    def __len__(self) -> int:
        return self._len

    def _key(self, key: int) -> int:
        if not -self._len <= key < self._len:
            raise IndexError(key)
        return key % self._len

    def __getitem__(self, key: int) -> Subscription | None:  # type: ignore[override]  # read by key only, no slices
        key = self._key(key)
        if key in self._changed:
            return _read(self._changed[key])
        lo, hi = self.sub_offsets[key], self.sub_offsets[key + 1]
        return unpack(self.sub_bytes[lo:hi].data, self.id_of(key)) if hi > lo else None

    def __setitem__(self, key: int, sub: Subscription | None) -> None:
        self._changed[self._key(key)] = sub

    def __iter__(self) -> Iterator[Subscription | None]:
        changed, bounds, data = self._changed, self.sub_offsets.tolist(), self.sub_bytes.data
        id_bounds, ids = self.id_offsets.tolist(), self.id_bytes.data
        cache: dict = {}  # one object per distinct predicate
        for key in range(self._len):
            if key in changed:
                yield _read(changed[key], cache)
            else:
                lo, hi = bounds[key], bounds[key + 1]
                yield unpack(data[lo:hi], str(ids[id_bounds[key]:id_bounds[key + 1]], "utf-8"), cache) \
                    if hi > lo else None

    def free(self, keys: Iterable[int]) -> None:
        """``table[key] = None`` for each of ``keys`` (each below :func:`len`), at once."""
        self._changed.update(dict.fromkeys(keys))

    def append(self, sub: Subscription | None) -> None:
        self._changed[self._len] = sub
        self._len += 1

    def extend(self, subs: Iterable[Subscription | None]) -> None:
        for sub in subs:
            self.append(sub)

    def ids_at(self, keys: np.ndarray) -> list[str]:
        """:meth:`id_of` of each of the live ``keys`` (int, in order): the packed rows' ids taken at
        once (Arrow's ``take`` of the id bytes, viewed as strings once), the changes' one by one."""
        keys = np.asarray(keys, dtype=np.int64)
        changed = self._changed
        mine = np.fromiter(map(changed.__contains__, keys.tolist()), dtype=bool, count=len(keys)) if changed \
            else np.zeros(len(keys), dtype=bool)
        if self._id_strings is None:
            self._id_strings = pa.LargeStringArray.from_buffers(
                len(self.id_offsets) - 1, pa.py_buffer(np.ascontiguousarray(self.id_offsets, dtype=np.int64)),
                pa.py_buffer(np.ascontiguousarray(self.id_bytes)))
        if not mine.any():
            return self._id_strings.take(pa.array(keys)).to_pylist()
        out = np.empty(len(keys), dtype=object)
        out[~mine] = self._id_strings.take(pa.array(keys[~mine])).to_pylist()
        out[mine] = [changed[k].id for k in keys[mine].tolist()]  # type: ignore[union-attr]  # a live key holds a subscription or its bytes
        return out.tolist()

    def id_of(self, key: int) -> str:
        """The id of the subscription under a live ``key``."""
        if key in self._changed:
            return self._changed[key].id  # type: ignore[union-attr]  # a live key holds a subscription or its bytes
        return self.id_bytes[self.id_offsets[key]:self.id_offsets[key + 1]].tobytes().decode("utf-8")


def _read(held: Subscription | Packed | None, cache: dict | None = None) -> Subscription | None:
    """A change as a subscription (:class:`Packed` bytes unpacked)."""
    return unpack(held.data, held.id, cache) if isinstance(held, Packed) else held


def _encode(sub: Subscription | None) -> tuple[bytes, bytes]:
    return (b"", b"") if sub is None else (sub.id.encode("utf-8"), pack(sub))


def _offsets(chunks: Sequence[bytes]) -> np.ndarray:
    out = np.zeros(len(chunks) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in chunks], out=out[1:])
    return out
