"""Warm the numba cache: build a matcher on a tiny workload and match with it once.

Every kernel is compiled with ``cache=True``: the first process that runs it compiles it
(seconds to a minute for a whole matcher) and stores the machine code under the
package's ``__pycache__``; later processes load it from there. ``make setup`` warms every
matcher (``python -m matchers warm``) and the service warms its matcher before it starts,
so that no micro-batch waits for the compiler.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from numba.core import event

from matchers.base import create
from matchers.events import flatten
from matchers.language import parse_record

log = logging.getLogger(__name__)

SUBSCRIPTIONS = (
    "price < 100 AND symbol IN ('IBM', 'MSFT')",
    "price BETWEEN 10 AND 20 OR volume >= 1000",
    "NOT symbol = 'IBM' AND price != 5",
    "name LIKE 'A%' AND name NOT LIKE '%z'",
    "name MATCHES 'c+d' OR symbol NOT IN ('X')",
    "flag = true AND price NOT BETWEEN 1 AND 2",
    "symbol > 'H' AND symbol <= 'M'",
)
"""One subscription per kind of predicate (numbers, strings, booleans, negations, OR)."""

EVENTS = (
    {"symbol": "IBM", "price": 15, "volume": 10, "name": "Acme", "flag": True},
    {"symbol": "MSFT", "price": 150.5, "volume": 5000, "name": "ccd"},
    {"symbol": "K", "price": 5, "name": "Az", "flag": False},
    {"other": 1},
    {"symbol": ["IBM", "K"], "price": [1, 20]},  # arrays: rows merged per event
)


class _CompileWatch(event.Listener):
    """Counts numba compilations and says, at the first one, what is going on."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.compiled = 0

    def on_start(self, _event: Any) -> None:
        if not self.compiled:
            log.info("compiling the numba kernels of %s (first run only, cached afterwards)", self.name)
        self.compiled += 1

    def on_end(self, _event: Any) -> None:
        pass


def warm(name: str) -> tuple[float, int]:
    """Build matcher ``name`` on a tiny workload, match, remove a subscription, match again
    (for ``auto``, each index it may choose: :data:`matchers.auto.CHOICES`).

    Returns
    -------
    tuple[float, int]
        Seconds it took and the number of kernels compiled (0: all came from the cache).
    """
    watch = _CompileWatch(name)
    started = time.perf_counter()
    with event.install_listener("numba:compile", watch):
        from matchers.auto import CHOICES

        for each in (name, *CHOICES) if name == "auto" else (name,):
            matcher = create(each)
            matcher.add(parse_record({"id": f"warm-{i}", "expr": expr}) for i, expr in enumerate(SUBSCRIPTIONS))
            events = [flatten(dict(e)) for e in EVENTS]
            matcher.match(matcher.encode(events))
            matcher.remove(["warm-0"])
            matcher.match(matcher.encode(events))
    seconds = time.perf_counter() - started
    if watch.compiled:
        log.info("compiled %d numba kernels of %s in %.1f s", watch.compiled, name, seconds)
    else:
        log.info("numba kernels of %s loaded from the cache in %.1f s", name, seconds)
    return seconds, watch.compiled
