"""The ids of subscriptions added as columns: their lookup (id -> key) made when first asked."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

import numpy as np


class LazyKeys(MutableMapping[str, int]):
    """Id -> key of distinct ``ids`` (``ids[i]`` -> ``start + i``), the matcher's ``_key_of``
    after a bulk :meth:`~matchers.bitmark.BitMarkMatcher.add_intervals`: the ``dict`` is made at
    the first lookup or change (a million ids: about 0.3 s of CPU, which a build that never
    looks one up does not spend); its length is known before."""

    def __init__(self, ids: np.ndarray, start: int):
        self._ids: np.ndarray | None = ids
        self._start = start
        self._map: dict[str, int] | None = None

    def _dict(self) -> dict[str, int]:
        if self._map is None:
            ids = self._ids
            assert ids is not None  # (one of the two is set)
            self._map = dict(zip(ids.tolist(), range(self._start, self._start + len(ids)), strict=True))
            self._ids = None
        return self._map

    def __len__(self) -> int:
        return len(self._ids) if self._map is None else len(self._map)  # type: ignore[arg-type]  # one is set

    def __getitem__(self, sub_id: str) -> int:
        return self._dict()[sub_id]

    def __setitem__(self, sub_id: str, key: int) -> None:
        self._dict()[sub_id] = key

    def __delitem__(self, sub_id: str) -> None:
        del self._dict()[sub_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __contains__(self, sub_id: object) -> bool:
        return sub_id in self._dict()

    def get(self, sub_id: str, default: Any = None) -> Any:
        return self._dict().get(sub_id, default)

    def pop(self, sub_id: str, *default: Any) -> Any:
        return self._dict().pop(sub_id, *default)

    def update(self, other: Any = (), /, **kwargs: int) -> None:
        self._dict().update(other, **kwargs)

    def items(self) -> Any:
        return self._dict().items()

    def keys(self) -> Any:
        return self._dict().keys()

    def values(self) -> Any:
        return self._dict().values()
