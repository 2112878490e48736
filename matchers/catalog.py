"""The matchers by name (:data:`matchers.base.REGISTERED`, filled by the class decorator
:func:`matchers.base.register` each index's package applies): :func:`discover` (imports every
index and the ``pubsub.matchers`` entry points), :func:`names`, :func:`servable`, :func:`create`."""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
from typing import Any

from matchers.base import REGISTERED, Matcher
from matchers.events import Dictionary

ENTRY_POINT_GROUP = "pubsub.matchers"
"""Entry-point group through which an index outside this package registers itself."""


_discovered = False


def discover(again: bool = False) -> None:
    """Import every subpackage of :mod:`matchers` and every ``pubsub.matchers`` entry point.

    Indexes register themselves on import (:func:`matchers.base.register`), so a new index is its
    package alone. Runs once per process unless ``again``.
    """
    global _discovered
    if _discovered and not again:
        return
    import matchers

    for info in pkgutil.iter_modules(matchers.__path__, "matchers."):
        if info.ispkg:
            importlib.import_module(info.name)
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        entry.load()
    _discovered = True


def names(baselines: bool = True) -> list[str]:
    """Sorted names of the registered matchers (``baselines=False``: those the service may use)."""
    discover()
    return sorted(n for n, cls in REGISTERED.items() if baselines or not cls.baseline)


def servable(name: str) -> str:
    """``name`` if the service may use it; else a :class:`ValueError` that says what to choose."""
    discover()
    cls = REGISTERED.get(name)
    if cls is not None and not cls.baseline:
        return name
    what = "is a baseline for tests and benchmarks" if cls is not None else "is not a registered matcher"
    raise ValueError(f"matcher {name!r} {what}; the service takes one of {', '.join(names(baselines=False))}")


def create(name: str, dictionary: Dictionary | None = None, **params: Any) -> Matcher:
    """A new, empty matcher by registered name."""
    discover()
    try:
        cls = REGISTERED[name]
    except KeyError:
        raise ValueError(f"unknown matcher {name!r}; known: {', '.join(sorted(REGISTERED))}") from None
    return cls(dictionary, **params)
