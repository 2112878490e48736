"""Events: flattening JSON objects and encoding batches into contiguous arrays.

An event is a JSON object; nested objects flatten to dotted names.  Arrays and
``null`` are unsupported values: that attribute counts as absent, the rest of the
event is still matched, and the problem is reported.

A batch encodes to CSR arrays (:class:`EventBatch`) over a :class:`Dictionary` shared
with the indexes: a global attribute dictionary and per-attribute string
dictionaries.  Subscription operands grow the string dictionaries; event strings
only look codes up (an unknown string gets code ``-1``, equal to no operand), and
the batch keeps its distinct raw strings for the string operators' side path.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import numpy as np

from matchers.expr import Kind, Scalar

NUM, STR, BOOL = int(Kind.NUM), int(Kind.STR), int(Kind.BOOL)


def flatten(obj: Mapping, problems: list[str] | None = None, prefix: str = "") -> dict[str, Scalar]:
    """Flatten a JSON object to ``{dotted.name: scalar}``.

    Unsupported values (arrays, ``null``, non-finite numbers) are left out and described
    in ``problems`` when it is given.
    """
    out: dict[str, Scalar] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, problems, name + "."))
        elif isinstance(value, (bool, str)):
            out[name] = value
        elif isinstance(value, (int, float)):
            number = float(value)
            if math.isfinite(number):
                out[name] = number
            elif problems is not None:
                problems.append(f"{name}: non-finite number is not supported")
        elif problems is not None:
            what = "null" if value is None else type(value).__name__
            what = "array" if isinstance(value, (list, tuple)) else what
            problems.append(f"{name}: {what} is not a supported value (treated as absent)")
    return out


class Dictionary:
    """Attribute ids and per-attribute string codes, shared by an index and its batches.

    Parameters
    ----------
    max_attributes : cap on distinct attribute names; an event attribute past the cap
        that no subscription uses is dropped from the batch (it could match nothing).
    """

    def __init__(self, max_attributes: int = 1_000_000):
        self.max_attributes = max_attributes
        self.attr_ids: dict[str, int] = {}
        self.attr_names: list[str] = []
        self.strings: list[dict[str, int]] = []

    def attr(self, name: str, create: bool = True) -> int:
        """Id of an attribute name (``-1`` if unknown and not created)."""
        aid = self.attr_ids.get(name, -1)
        if aid < 0 and create and len(self.attr_names) < self.max_attributes:
            aid = len(self.attr_names)
            self.attr_ids[name] = aid
            self.attr_names.append(name)
            self.strings.append({})
        return aid

    def code(self, attr_id: int, text: str, create: bool = True) -> int:
        """Code of a string value of an attribute (``-1`` if unknown and not created)."""
        table = self.strings[attr_id]
        code = table.get(text, -1)
        if code < 0 and create:
            code = len(table)
            table[text] = code
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


class EventBatch(NamedTuple):
    """A batch of events as CSR arrays; entries of an event are sorted by attribute id.

    Attributes
    ----------
    offsets : int64[n + 1], event ``i`` owns entries ``offsets[i]:offsets[i+1]``.
    attrs : int32[nnz], attribute ids.
    kinds : int8[nnz], :class:`~matchers.expr.Kind` of each value.
    nums : float64[nnz], the number, ``1.0``/``0.0`` for a boolean, NaN for a string.
    codes : int32[nnz], string code in the attribute's dictionary, ``-1`` if unknown or not a string.
    texts : int32[nnz], index into ``strings`` for a string, else ``-1``.
    strings : list[str], the batch's distinct string values.
    """

    offsets: np.ndarray
    attrs: np.ndarray
    kinds: np.ndarray
    nums: np.ndarray
    codes: np.ndarray
    texts: np.ndarray
    strings: list[str]

    @property
    def n(self) -> int:
        return len(self.offsets) - 1

    def slice(self, lo: int, hi: int) -> EventBatch:
        """Events ``lo:hi`` as a batch of views (offsets rebased)."""
        if lo == 0 and hi == self.n:
            return self
        a, b = self.offsets[lo], self.offsets[hi]
        return EventBatch(self.offsets[lo:hi + 1] - a, self.attrs[a:b], self.kinds[a:b], self.nums[a:b],
                          self.codes[a:b], self.texts[a:b], self.strings)


def encode(events: Iterable[Mapping[str, Scalar]], dictionary: Dictionary) -> EventBatch:
    """Encode flat events (see :func:`flatten`) against ``dictionary``.

    New attribute names are added to the dictionary (up to its cap); string values only
    look their codes up.
    """
    offsets = [0]
    attrs: list[int] = []
    kinds: list[int] = []
    nums: list[float] = []
    codes: list[int] = []
    texts: list[int] = []
    strings: list[str] = []
    string_ids: dict[str, int] = {}
    attr_of = dictionary.attr
    nan = math.nan
    for event in events:
        entries = []
        for name, value in event.items():
            aid = attr_of(name)
            if aid >= 0:
                entries.append((aid, value))
        entries.sort(key=lambda e: e[0])
        for aid, value in entries:
            attrs.append(aid)
            if isinstance(value, bool):
                kinds.append(BOOL)
                nums.append(1.0 if value else 0.0)
                codes.append(-1)
                texts.append(-1)
            elif isinstance(value, str):
                kinds.append(STR)
                nums.append(nan)
                codes.append(dictionary.strings[aid].get(value, -1))
                sid = string_ids.get(value)
                if sid is None:
                    sid = string_ids[value] = len(strings)
                    strings.append(value)
                texts.append(sid)
            else:
                kinds.append(NUM)
                nums.append(float(value))
                codes.append(-1)
                texts.append(-1)
        offsets.append(len(attrs))
    return EventBatch(
        np.asarray(offsets, dtype=np.int64),
        np.asarray(attrs, dtype=np.int32),
        np.asarray(kinds, dtype=np.int8),
        np.asarray(nums, dtype=np.float64),
        np.asarray(codes, dtype=np.int32),
        np.asarray(texts, dtype=np.int32),
        strings,
    )


def decode(batch: EventBatch, dictionary: Dictionary, i: int) -> dict[str, Scalar]:
    """Event ``i`` of a batch back as a flat dict (for tests and error messages)."""
    out: dict[str, Scalar] = {}
    for j in range(batch.offsets[i], batch.offsets[i + 1]):
        name = dictionary.attr_names[batch.attrs[j]]
        kind = batch.kinds[j]
        if kind == BOOL:
            out[name] = bool(batch.nums[j])
        elif kind == STR:
            out[name] = batch.strings[batch.texts[j]]
        else:
            out[name] = float(batch.nums[j])
    return out
