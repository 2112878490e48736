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

import orjson
from numba.core import event

from matchers.catalog import create
from matchers.events import encode_json, flatten
from matchers.language import parse_record
from matchers.subtable import SubscriptionTable
from matchers.translate import Translation, common_dictionary

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
    """Build matcher ``name`` on a tiny workload (from packed rows), match, remove a subscription, match again
    (for ``auto``, each index it may choose: :data:`matchers.auto.CHOICES`); the events are
    also encoded from JSON (the scan, :func:`matchers.scan.scan_records`) and translated
    (:mod:`matchers.translate`).

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
            matcher.add_packed(SubscriptionTable.pack(  # as a shard is built: matchers.packed.decode, add
                [parse_record({"id": f"warm-{i}", "expr": expr}) for i, expr in enumerate(SUBSCRIPTIONS)]))
            events = [flatten(dict(e)) for e in EVENTS]
            matcher.match(matcher.encode(events))
            matcher.remove(["warm-0"])
            matcher.match(matcher.encode(events))
            common = common_dictionary()  # an executor's path: one encoding, translated (matchers.translate)
            translation = Translation(common, matcher.dictionary)
            translation.update()
            translation.apply(encode_json([orjson.dumps(e) for e in EVENTS], common, lambda i: None, keys=("id", ""),
                                          drop_first=True).batch)
    seconds = time.perf_counter() - started
    if watch.compiled:
        log.info("compiled %d numba kernels of %s in %.1f s", watch.compiled, name, seconds)
    else:
        log.info("numba kernels of %s loaded from the cache in %.1f s", name, seconds)
    return seconds, watch.compiled


PATTERNS = (
    "FILTER{DUR <= 5}(FILTER{name = 'IBM' AND price > 1}(Stock) NEXT{$2.name = $1.name AND $2.price > 2} Stock)",
    "Stock FOLD{$2.name = $.name AND $2.up = TRUE, TRUE} Stock",
)
"""Flat stateful subscriptions (:mod:`matchers.cayuga.flat`): the flat engine's kernels."""


def warm_patterns() -> tuple[float, int]:
    """Run the flat engine of the stateful subscriptions (:mod:`matchers.cayuga.flat`) over a
    few events, one at a time and in a batch, export and load its instances, remove a
    subscription; the seconds it took and the kernels compiled, as :func:`warm`."""
    from matchers.cayuga.algebra import Event
    from matchers.cayuga.engine import Engine

    watch = _CompileWatch("the patterns' flat engine")
    started = time.perf_counter()
    with event.install_listener("numba:compile", watch):
        events = [Event(f"w{i}", "Stock", i, i, {"name": "IBM", "price": i, "up": i % 2 == 0, "big": 2**60})
                  for i in range(12)]
        eng = Engine(flat=True)
        for i, text in enumerate(PATTERNS):
            eng.add(f"warm-{i}", text)
        for e in events[:6]:
            eng.process(e)
        eng.process_batch(events[6:])
        eng.next_expiry()
        eng.advance(20)
        again = Engine(flat=True)
        for i, text in enumerate(PATTERNS):
            again.add(f"warm-{i}", text)
        again.load_instances(eng.export_instances(), eng.clock)
        again.remove("warm-0")
    seconds = time.perf_counter() - started
    log.info("flat engine kernels: %d compiled in %.1f s", watch.compiled, seconds)
    return seconds, watch.compiled
