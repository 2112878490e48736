"""``matchers.warm``: the compile log line, and a warmed matcher."""

from __future__ import annotations

import logging

import numba
from numba.core import event

from matchers.warm import _CompileWatch, warm


def test_first_compilation_is_announced_once(caplog):
    @numba.njit
    def twice(x):
        return 2 * x

    watch = _CompileWatch("demo")
    with caplog.at_level(logging.INFO, logger="matchers.warm"), event.install_listener("numba:compile", watch):
        assert twice(2) == 4 and twice(2.5) == 5.0
    assert watch.compiled == 2
    assert [r.getMessage() for r in caplog.records] == [
        "compiling the numba kernels of demo (first run only, cached afterwards)"]


def test_warm_builds_and_matches_then_compiles_nothing_more(caplog):
    warm("counting")
    with caplog.at_level(logging.INFO, logger="matchers.warm"):
        seconds, compiled = warm("counting")
    assert compiled == 0 and seconds >= 0
    assert "numba kernels of counting loaded from the cache" in caplog.text


def test_warm_patterns_runs_the_flat_engine_and_says_so(caplog):
    from matchers.cayuga import flat_kernels as K
    from matchers.warm import warm_patterns

    with caplog.at_level(logging.INFO, logger="matchers.warm"):
        seconds, compiled = warm_patterns()
    assert seconds >= 0 and compiled >= 0
    assert "flat engine kernels:" in caplog.text
    # every kernel the flat engine calls has machine code now (compiled, or loaded from the cache)
    for kernel in (K.step, K.expire, K.next_expiry, K.drop_node, K.reserve, K.load, K.index_start, K.unindex_start):
        assert kernel.signatures, kernel.__name__
