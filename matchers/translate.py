"""One encoding of a batch for several indexes: from a common dictionary to each index's own.

Each index bakes its own :class:`~matchers.events.Dictionary`'s attribute ids and string
codes into its arrays, and the shards of an executor are built apart, so each has its own.
Rather than encoding every event once per shard, an executor encodes it once against a
*common* dictionary, the union of its shards' names and strings (ids only grow; no event
adds to it: :func:`~matchers.events.encode` with ``known_only``), and a :class:`Translation`
per shard turns that batch into the shard's: each attribute id to the shard's (an
attribute the shard's subscriptions do not use is left out, as the scan of
:func:`~matchers.events.encode_json` leaves it out), each string code to the shard's
(``-1`` when the shard does not know the string), each row's entries sorted by the
shard's ids again, in one kernel (:func:`matchers.translate_kernel.translate`).  The
batch's strings, values and rows are those of the common batch.  While the common
dictionary is the same as a shard's (one shard), the batch goes to it as it is.
"""

from __future__ import annotations

import numpy as np

from matchers.events import Dictionary, EventBatch

NO_CAP = 1 << 62
"""The common dictionary's cap on names: none (each shard's own cap bounds its names)."""


def common_dictionary() -> Dictionary:
    """A new common dictionary (see the module docstring)."""
    return Dictionary(max_attributes=NO_CAP)


class Translation:
    """From batches encoded against ``common`` to what ``own``'s encoding would give them.

    :meth:`update` first (it adds what ``own`` gained to ``common``), then
    :meth:`apply` to batches encoded against ``common`` since.

    Parameters
    ----------
    common : the dictionary the batches are encoded against (shared by the translations of
        an executor's shards).
    own : one index's dictionary.
    """

    def __init__(self, common: Dictionary, own: Dictionary):
        self.common, self.own = common, own
        self._attr_map = np.full(max(common.n_attrs, 16), -1, np.int32)  # common id -> own id
        self._seen = 0  # own names looked at
        self._skipped: list[int] = []  # own names only events have asked for (not in common)
        self._mapped: list[tuple[int, int]] = []  # (own id, common id) of each name in common
        self._strings_seen: dict[int, int] = {}  # own id -> strings looked at
        self._strings_at = -1  # own.n_strings then
        self._same_at: tuple[int, int] | None = None  # (common.n_attrs, common.n_strings) when found the same
        self._str_keys = np.zeros(0, np.int64)  # sorted common id << 32 | common code
        self._str_codes = np.zeros(0, np.int32)  # the own code of each

    def update(self) -> None:
        """Add the names and strings ``own`` gained since the last call to ``common`` and to the
        maps (a name that only events had asked for and a subscription now uses too)."""
        own, common = self.own, self.common
        names = own.attr_names
        fresh = [aid for aid in self._skipped if not own.event_only(aid)]
        if fresh:
            self._skipped = [aid for aid in self._skipped if own.event_only(aid)]
        for aid in range(self._seen, len(names)):
            (self._skipped if own.event_only(aid) else fresh).append(aid)
        self._seen = len(names)
        for aid in fresh:
            cid = common.attr(names[aid])
            if cid < 0:
                raise MemoryError(f"common attribute dictionary is full ({common.max_attributes} names)")
            self._grow(common.n_attrs)
            self._attr_map[cid] = aid
            self._mapped.append((aid, cid))
        if fresh or own.n_strings != self._strings_at:
            self._strings_at = own.n_strings
            self._add_strings()
        self._same_at = (common.n_attrs, common.n_strings) if self._same() else None

    def _add_strings(self) -> None:
        """Add the strings ``own`` gained to ``common`` and to the string map."""
        own, common = self.own, self.common
        keys: list[int] = []
        codes: list[int] = []
        seen = self._strings_seen
        for aid, cid in self._mapped:
            table = own.strings[aid]
            done = seen.get(aid, 0)
            if len(table) > done:
                for text, code in list(table.items())[done:]:
                    keys.append(cid << 32 | common.code(cid, text))
                    codes.append(code)
                seen[aid] = len(table)
        if keys:
            new_keys = np.asarray(keys, np.int64)
            order = np.argsort(new_keys)
            at = np.searchsorted(self._str_keys, new_keys[order])
            self._str_keys = np.insert(self._str_keys, at, new_keys[order])
            self._str_codes = np.insert(self._str_codes, at, np.asarray(codes, np.int32)[order])

    def _same(self) -> bool:
        """Whether ``common`` is ``own`` (the same names, ids, strings and codes, as with one shard)."""
        common, n = self.common, self.common.n_attrs
        return (len(self._mapped) == n and common.n_strings == len(self._str_keys)
                and bool(np.array_equal(self._attr_map[:n], np.arange(n)))
                and bool(np.array_equal(self._str_codes, self._str_keys & 0xFFFFFFFF)))

    def _grow(self, n: int) -> None:
        """Room in the attribute map for ``n`` common ids (the new ones unknown: ``-1``)."""
        if n > len(self._attr_map):
            grown = np.full(max(n, 2 * len(self._attr_map)), -1, np.int32)
            grown[:len(self._attr_map)] = self._attr_map
            self._attr_map = grown

    def apply(self, batch: EventBatch) -> EventBatch:
        """``batch`` (encoded against ``common`` after the last :meth:`update`) as ``own``'s
        (``batch`` itself while ``common`` is the same as ``own``: one shard)."""
        from matchers.translate_kernel import translate

        if self._same_at == (self.common.n_attrs, self.common.n_strings):
            return batch  # the batch is already own's
        self._grow(self.common.n_attrs)  # names other shards added meanwhile
        offsets, attrs, kinds, nums, codes, texts = translate(
            batch.offsets, batch.attrs, batch.kinds, batch.nums, batch.codes, batch.texts,
            self._attr_map, self._str_keys, self._str_codes)
        return EventBatch(offsets, attrs, kinds, nums, codes, texts, batch.strings, batch.rows)

    def memory_bytes(self) -> int:
        """Bytes of the maps."""
        return self._attr_map.nbytes + self._str_keys.nbytes + self._str_codes.nbytes + 64 * len(self._mapped)
