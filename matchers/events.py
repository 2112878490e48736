"""Events: flattening JSON objects and encoding batches into contiguous arrays.

An event is a JSON object; nested objects flatten to dotted names; ``null`` is a
value (``None``, of kind ``NULL``), distinct from an absent attribute.  An event with
arrays flattens to :class:`Rows`: one flat row per choice of one element of each array
(the fields of one element of an array of objects stay in one row; an empty array is an
absent attribute), and the event matches a subscription when one of its rows does.

A batch encodes to CSR arrays (:class:`EventBatch`) over a :class:`Dictionary` shared
with the indexes: a global attribute dictionary and per-attribute string
dictionaries.  Subscription operands grow the string dictionaries; event strings
only look codes up (an unknown string gets code ``-1``, equal to no operand), and
the batch keeps its distinct raw strings for the string operators' side path.  An
executor holding several indexes encodes a batch once, against a common dictionary, and
translates it to each index's (:mod:`matchers.translate`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from operator import methodcaller
from typing import NamedTuple

import numpy as np

from matchers.errors import TooManyRows
from matchers.expr import Kind, Value
from matchers.scan_types import ARRAY_ROWS, NO_LIMITS, ScanLimits, ScanTable

NUM, STR, BOOL, NULL = int(Kind.NUM), int(Kind.STR), int(Kind.BOOL), int(Kind.NULL)


class Rows(tuple[dict[str, Value], ...]):
    """The flat rows of an event with arrays (see :func:`flatten`); it matches if one row does."""

    __slots__ = ()


FlatEvent = Mapping[str, Value] | Rows
"""An event as :func:`flatten` gives it: one flat mapping, or the rows of an event with arrays."""


def flatten(obj: Mapping, prefix: str = "", max_rows: int | None = ARRAY_ROWS) -> dict[str, Value] | Rows:
    """Flatten a JSON object to ``{dotted.name: scalar}``, or to :class:`Rows` of them.

    ``null`` stays (as ``None``).  An array gives one row per element (an element that is
    an object gives its fields, an array its own elements, under the array's name); several
    arrays give every combination, more than ``max_rows`` of them (``None``: no bound)
    raise :class:`TooManyRows`; an event with one row is a plain dict.  Values JSON cannot
    hold (non-finite numbers, other types, from Python callers) are left out.
    """
    out: dict[str, Value] = {}
    arrays: list[list[dict[str, Value]]] | None = None
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if value is None or isinstance(value, (bool, str)):
            out[name] = value
        elif isinstance(value, Mapping):
            sub = flatten(value, name + ".", max_rows)
            if isinstance(sub, Rows):
                arrays = [*(arrays or ()), list(sub)]
            else:
                out.update(sub)
        elif isinstance(value, (list, tuple)):
            arrays = [*(arrays or ()), _elements(value, name, max_rows)]
        else:
            _scalar(out, name, value)
    if not arrays:
        return out
    rows = [out]
    for alternatives in arrays:
        if max_rows is not None and len(rows) * len(alternatives) > max_rows:
            raise TooManyRows(max_rows)
        rows = [{**row, **alt} for row in rows for alt in alternatives]
    return rows[0] if len(rows) == 1 else Rows(rows)


def _elements(array: list | tuple, name: str, max_rows: int | None) -> list[dict[str, Value]]:
    """The rows one array contributes (``[{}]`` when it is empty: the attribute is absent)."""
    rows: list[dict[str, Value]] = []
    for value in array:
        if isinstance(value, Mapping):
            sub = flatten(value, name + ".", max_rows)
            rows.extend(sub if isinstance(sub, Rows) else (sub,))
        elif isinstance(value, (list, tuple)):
            rows.extend(_elements(value, name, max_rows))
        else:
            row: dict[str, Value] = {}
            _scalar(row, name, value)
            rows.append(row)
        if max_rows is not None and len(rows) > max_rows:
            raise TooManyRows(max_rows)
    return rows or [{}]


def _scalar(out: dict[str, Value], name: str, value: object) -> None:
    """Put a scalar JSON value under ``name``; a value JSON cannot hold is left out."""
    if value is None or isinstance(value, (bool, str)):
        out[name] = value
    elif isinstance(value, (int, float)):
        number = float(value)
        if math.isfinite(number):
            out[name] = number


class Dictionary:
    """Attribute ids and per-attribute string codes, shared by an index and its batches
    (or the union of several indexes', :mod:`matchers.translate`).

    Parameters
    ----------
    max_attributes : cap on distinct attribute names; an event attribute past the cap
        that no subscription uses is dropped from the batch (it could match nothing).
    """

    _scan: _ScanTable | None = None
    _event_only: set[int] | None = None  # ids only events have named (no subscription uses them)
    n_strings: int = 0
    """Strings given a code so far (by :meth:`code`): what the readers of the string tables
    compare to know whether any grew."""

    def __init__(self, max_attributes: int = 1_000_000):
        self.max_attributes = max_attributes
        self.attr_ids: dict[str, int] = {}
        self.attr_names: list[str] = []
        self.strings: list[dict[str, int]] = []

    def __getstate__(self) -> dict:
        """Without the scanner's table (:func:`encode_json` builds it again on first use)."""
        return {k: v for k, v in self.__dict__.items() if k != "_scan"}

    def attr(self, name: str, create: bool = True, event: bool = False) -> int:
        """Id of an attribute name (``-1`` if unknown and not created); ``event``: asked for
        by an event (:func:`encode`), which :func:`encode_json` leaves out until something
        else asks for the name."""
        aid = self.attr_ids.get(name, -1)
        if aid < 0 and create and len(self.attr_names) < self.max_attributes:
            aid = len(self.attr_names)
            self.attr_ids[name] = aid
            self.attr_names.append(name)
            self.strings.append({})
            if event:
                if self._event_only is None:
                    self._event_only = set()
                self._event_only.add(aid)
        elif not event and self._event_only and aid in self._event_only:
            self._event_only.discard(aid)
        return aid

    def event_only(self, aid: int) -> bool:
        """Whether only events have asked for attribute ``aid``."""
        return self._event_only is not None and aid in self._event_only

    def code(self, attr_id: int, text: str, create: bool = True) -> int:
        """Code of a string value of an attribute (``-1`` if unknown and not created)."""
        table = self.strings[attr_id]
        code = table.get(text, -1)
        if code < 0 and create:
            code = len(table)
            table[text] = code
            self.n_strings += 1
        return code

    @property
    def n_attrs(self) -> int:
        return len(self.attr_names)

    def memory_bytes(self) -> int:
        """Rough size of the dictionaries (keys, values and table overhead)."""
        total = 0
        for name in self.attr_names:
            total += 100 + len(name)
        for table in self.strings:
            total += 64 + sum(100 + len(s) for s in table)
        return total


class EventArrays(NamedTuple):
    """The arrays of an :class:`EventBatch` (fields alike), without its strings and rows:
    what a numba kernel takes whole (:attr:`EventBatch.arrays`)."""

    offsets: np.ndarray
    attrs: np.ndarray
    kinds: np.ndarray
    nums: np.ndarray
    codes: np.ndarray
    texts: np.ndarray


class EventBatch(NamedTuple):
    """A batch of events as CSR arrays; entries of an event are sorted by attribute id.

    Attributes
    ----------
    offsets : int64[n + 1], event ``i`` owns entries ``offsets[i]:offsets[i+1]``.
    attrs : int32[nnz], attribute ids.
    kinds : int8[nnz], :class:`~matchers.expr.Kind` of each value.
    nums : float64[nnz], the number, ``1.0``/``0.0`` for a boolean, NaN for a string or null.
    codes : int32[nnz], string code in the attribute's dictionary, ``-1`` if unknown or not a string.
    texts : int32[nnz], index into ``strings`` for a string, else ``-1``.
    strings : list[str], the batch's distinct string values.
    rows : int64[events + 1] or ``None``: with events of several rows (:class:`Rows`), the
        arrays above hold rows and event ``i`` owns rows ``rows[i]:rows[i+1]``;
        :meth:`matchers.base.Matcher.match` matches the rows and merges them per event.
    """

    offsets: np.ndarray
    attrs: np.ndarray
    kinds: np.ndarray
    nums: np.ndarray
    codes: np.ndarray
    texts: np.ndarray
    strings: list[str]
    rows: np.ndarray | None = None

    @property
    def arrays(self) -> EventArrays:
        """The batch's arrays as one numba-passable struct (``strings`` and ``rows`` aside)."""
        return EventArrays(self.offsets, self.attrs, self.kinds, self.nums, self.codes, self.texts)

    @property
    def n(self) -> int:
        """Number of events."""
        return len(self.offsets) - 1 if self.rows is None else len(self.rows) - 1

    def slice(self, lo: int, hi: int) -> EventBatch:
        """Events ``lo:hi`` of a batch without rows, as a batch of views (offsets rebased)."""
        assert self.rows is None, "slice the rows (batch._replace(rows=None))"
        if lo == 0 and hi == self.n:
            return self
        a, b = self.offsets[lo], self.offsets[hi]
        return EventBatch(self.offsets[lo:hi + 1] - a, self.attrs[a:b], self.kinds[a:b], self.nums[a:b],
                          self.codes[a:b], self.texts[a:b], self.strings)


_KIND_OF_TYPE = {float: NUM, int: NUM, bool: BOOL, str: STR, type(None): NULL}


class _AttrIds(dict):
    """Attribute name -> id for one encoding, filled from the dictionary on first sight."""

    def __init__(self, dictionary: Dictionary, create: bool):
        super().__init__()
        self.dictionary = dictionary
        self.create = create

    def __missing__(self, name: str) -> int:
        aid = self[name] = self.dictionary.attr(name, self.create, event=True)
        return aid


def encode(events: Iterable[FlatEvent], dictionary: Dictionary, known_only: bool = False) -> EventBatch:
    """Encode flat events (see :func:`flatten`) against ``dictionary``.

    New attribute names are added to the dictionary (up to its cap), or with ``known_only``
    left out of the batch as the cap leaves them out; string values only look their codes
    up.  Column-wise over all the batch's entries with C-level maps and numpy (no Python
    call per entry except for strings), then one sort by (event, attribute) when some
    event's attributes are not in id order.  An event may be :class:`Rows`
    (see :attr:`EventBatch.rows`).
    """
    events = events if isinstance(events, list) else list(events)
    if Rows in set(map(type, events)):
        per_event = np.fromiter((len(e) if type(e) is Rows else 1 for e in events), dtype=np.int64, count=len(events))
        rows = np.zeros(len(events) + 1, dtype=np.int64)
        np.cumsum(per_event, out=rows[1:])
        flat = list(chain.from_iterable(e if type(e) is Rows else (e,) for e in events))
        return encode(flat, dictionary, known_only)._replace(rows=rows)
    counts = np.fromiter(map(len, events), dtype=np.int64, count=len(events))
    n, nnz = len(events), int(counts.sum())
    names = list(chain.from_iterable(events))
    values = np.empty(nnz, dtype=object)
    values[:] = list(chain.from_iterable(map(_values, events)))
    attrs = np.fromiter(map(_AttrIds(dictionary, not known_only).__getitem__, names), dtype=np.int32, count=nnz)
    kinds = np.fromiter(map(_KIND_OF_TYPE.__getitem__, map(type, values)), dtype=np.int8, count=nnz)
    event_of = np.repeat(np.arange(n, dtype=np.int64), counts)
    step = np.diff(attrs)
    if np.any(step[event_of[1:] == event_of[:-1]] <= 0) or (nnz and attrs.min() < 0):
        order = np.lexsort((attrs, event_of))
        order = order[attrs[order] >= 0]  # attributes past the dictionary's cap (or unknown) are dropped
        attrs, kinds, event_of, values = attrs[order], kinds[order], event_of[order], values[order]
    is_str = kinds == STR
    nums = np.full(len(values), math.nan)
    numeric = (kinds == NUM) | (kinds == BOOL)
    if numeric.any():
        nums[numeric] = values[numeric].astype(np.float64)
    codes = np.full(len(values), -1, dtype=np.int32)
    texts = np.full(len(values), -1, dtype=np.int32)
    strings: list[str] = []
    str_at = np.flatnonzero(is_str)
    if len(str_at):
        tables = dictionary.strings
        str_values = values[str_at].tolist()
        codes[str_at] = [tables[a].get(v, -1) for a, v in zip(attrs[str_at].tolist(), str_values, strict=True)]
        index = {text: i for i, text in enumerate(dict.fromkeys(str_values))}
        strings = list(index)
        texts[str_at] = [index[v] for v in str_values]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(event_of, minlength=n), out=offsets[1:])
    return EventBatch(offsets, attrs, kinds, nums, codes, texts, strings)


_values = methodcaller("values")


def decode(batch: EventBatch, dictionary: Dictionary, i: int) -> dict[str, Value]:
    """Row ``i`` of a batch (event ``i`` of a batch without rows) back as a flat dict (for tests)."""
    out: dict[str, Value] = {}
    for j in range(batch.offsets[i], batch.offsets[i + 1]):
        name = dictionary.attr_names[batch.attrs[j]]
        kind = batch.kinds[j]
        if kind == NULL:
            out[name] = None
        elif kind == BOOL:
            out[name] = bool(batch.nums[j])
        elif kind == STR:
            out[name] = batch.strings[batch.texts[j]]
        else:
            out[name] = float(batch.nums[j])
    return out


class JsonBatch(NamedTuple):
    """:func:`encode_json`'s result.

    Attributes
    ----------
    batch : the encoded events that were not refused, in input order.
    events : int64, the input index of each of the batch's events.
    fast : bool per input event, whether the scanner took it (``spans`` hold for it).
    spans : int64[n, 4], per input event the byte spans of the values of the two
        top-level keys asked for (``-1`` when absent or not ``fast``).
    """

    batch: EventBatch
    events: np.ndarray
    fast: np.ndarray
    spans: np.ndarray


class _ScanTable:
    """The dictionary as :func:`matchers.scan.scan_records` reads it: one
    :class:`~matchers.scan_types.ScanTable` of attribute names and of each attribute's
    strings, grown as the dictionary grows."""

    def __init__(self) -> None:
        self.seen = [0]  # names seen, then strings seen per attribute
        self.strings_at = -1  # the dictionary's n_strings then
        self.skipped: list[int] = []  # names seen and not in the table
        self.blob = np.zeros(1 << 12, np.uint8)
        self.used = 0
        self.count = 0
        self.table = ScanTable.empty(1 << 10, self.blob)

    def update(self, dictionary: Dictionary) -> None:
        """Add what the dictionary gained since the last call (it only grows)."""
        from matchers import scan

        seen, skipped = self.seen, self.skipped
        tags: list[int] = []
        values: list[int] = []
        chunks: list[bytes] = []
        names = dictionary.attr_names
        if len(names) > seen[0]:
            skipped.extend(range(seen[0], len(names)))
            seen[0] = len(names)
            seen.extend([0] * (len(names) + 1 - len(seen)))
        if skipped:  # names only events have used stay out of the table (the scan drops them)
            for aid in skipped:
                if not dictionary.event_only(aid):
                    tags.append(scan.ATTR_TAG)
                    values.append(aid)
                    chunks.append(names[aid].encode("utf-8"))
            self.skipped = [aid for aid in skipped if dictionary.event_only(aid)]
        if dictionary.n_strings != self.strings_at:
            for aid, table in enumerate(dictionary.strings):
                if len(table) > seen[aid + 1]:
                    for text, code in list(table.items())[seen[aid + 1]:]:
                        tags.append(aid)
                        values.append(code)
                        chunks.append(text.encode("utf-8", "surrogatepass"))
                    seen[aid + 1] = len(table)
            self.strings_at = dictionary.n_strings
        if not tags:
            return
        lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
        starts = self.used + np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        need = self.used + int(lengths.sum())
        if need > len(self.blob):
            grown = np.zeros(max(need, 2 * len(self.blob)), np.uint8)
            grown[:self.used] = self.blob[:self.used]
            self.blob = grown
            self.table = self.table._replace(blob=grown)
        self.blob[self.used:need] = np.frombuffer(b"".join(chunks), np.uint8)
        self.used = need
        self.count += len(tags)
        new: list[np.ndarray] = [np.asarray(tags, np.int64), starts, starts + lengths, np.asarray(values, np.int32)]
        t = self.table
        if 2 * self.count > len(t.hashes):  # rebuild at most half full, with everything so far
            size = len(t.hashes)
            while 2 * self.count > size:
                size *= 2
            live = t.lengths >= 0
            old = [t.tags[live], t.starts[live], t.starts[live] + t.lengths[live], t.values[live]]
            t = self.table = ScanTable.empty(size, self.blob)
            new = [np.concatenate((a, b)) for a, b in zip(old, new, strict=True)]
        scan.table_insert(t, *new)


def encode_json(raws: Sequence[bytes], dictionary: Dictionary, slow: Callable[[int], FlatEvent | None],
                limits: ScanLimits = NO_LIMITS, keys: tuple[str, str] = ("", ""), drop_first: bool = False,
                encode_flat: Callable[[list[FlatEvent]], EventBatch] | None = None) -> JsonBatch:
    """Encode a batch of JSON events (bytes) against ``dictionary``, one scan of the bytes.

    The common case (see :mod:`matchers.scan`) goes straight from the bytes to the encoded
    rows in one kernel, leaving out the attributes the dictionary does not know (no
    subscription uses them: they could match nothing).  Every other event goes to
    ``slow(i)``, which gives its flat form (parse and :func:`flatten`) or ``None`` when it
    is refused (then it is not in the batch).  ``keys`` name two top-level keys whose value
    spans are wanted (an event id, a validity field); with ``drop_first`` the first is
    not an attribute.  Either way the batch encodes the events exactly as
    :func:`encode` of :func:`flatten` does, apart from the unknown attributes;
    ``encode_flat`` (default: :func:`encode` with ``dictionary``) encodes the flat ones.
    """
    from matchers import scan

    n = len(raws)
    table = dictionary._scan
    if table is None:
        table = dictionary._scan = _ScanTable()
    table.update(dictionary)
    lengths = np.fromiter(map(len, raws), dtype=np.int64, count=n)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    buf = np.frombuffer(b"".join(raws), np.uint8)
    out = scan.scan_records(buf, starts, ends, table.table, limits, keys, drop_first)
    row_event = out.row_event
    data = buf.tobytes() if len(out.text_spans) else b""
    strings = [data[a:b].decode() for a, b in out.text_spans.tolist()]
    fast = out.status == scan.OK
    slow_at = np.flatnonzero(~fast).tolist()
    flats: list[FlatEvent] = []
    slow_events: list[int] = []
    for i in slow_at:
        flat = slow(i)
        if flat is not None:
            flats.append(flat)
            slow_events.append(i)
    batch = EventBatch(out.offsets, out.attrs, out.kinds, out.nums, out.codes, out.texts, strings)
    if flats:
        other = encode_flat(flats) if encode_flat is not None else encode(flats, dictionary)
        other_rows = other.rows if other.rows is not None else np.arange(len(flats) + 1, dtype=np.int64)
        batch, row_event = _splice(batch, row_event, other._replace(rows=None),
                                   np.repeat(np.asarray(slow_events, np.int64), np.diff(other_rows)))
    events, per_event = np.unique(row_event, return_counts=True)
    if len(per_event) and per_event.max() > 1:
        rows = np.zeros(len(events) + 1, np.int64)
        np.cumsum(per_event, out=rows[1:])
        batch = batch._replace(rows=rows)
    return JsonBatch(batch, events, fast, out.key_spans)


def _splice(fast: EventBatch, fast_event: np.ndarray, other: EventBatch,
            other_event: np.ndarray) -> tuple[EventBatch, np.ndarray]:
    """The rows of two batches of rows (``*_event``: the event of each row) together,
    ordered by event: the batch and the event of each of its rows."""
    row_event = np.concatenate([fast_event, other_event])
    shift = fast.offsets[-1]
    offsets = np.concatenate([fast.offsets[:-1], other.offsets + shift])
    order = np.argsort(row_event, kind="stable")
    lengths = np.diff(offsets)[order]
    starts = offsets[:-1][order]
    new_offsets = np.zeros(len(order) + 1, np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    take = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1])
    texts = np.concatenate([fast.texts, np.where(other.texts >= 0, other.texts + len(fast.strings), -1).astype(np.int32)])
    return EventBatch(new_offsets, np.concatenate([fast.attrs, other.attrs])[take],
                      np.concatenate([fast.kinds, other.kinds])[take], np.concatenate([fast.nums, other.nums])[take],
                      np.concatenate([fast.codes, other.codes])[take], texts[take],
                      fast.strings + other.strings), row_event[order]
