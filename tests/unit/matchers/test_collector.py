"""The collector pause around bulk work: it restores the collector's state, and the
Cayuga engine's batches run inside it."""

from __future__ import annotations

import gc

import pytest

from matchers.cayuga import algebra as A
from matchers.cayuga.engine import Engine
from matchers.collector import no_cyclic_gc


@pytest.mark.parametrize("enabled", [True, False])
def test_the_pause_restores_the_collector_as_it_found_it(enabled):
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with no_cyclic_gc():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError), no_cyclic_gc():
            raise RuntimeError("inside")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("flat", [False, True])
def test_a_batch_runs_with_the_collector_paused_and_leaves_it_on(flat, monkeypatch):
    eng = Engine(flat=flat)
    eng.add("q", "FILTER{x > 0}(A) NEXT{$2.k = $1.k} A")
    seen = []
    batch = Engine._batch

    def spy(self, events):
        seen.append(gc.isenabled())
        return batch(self, events)

    monkeypatch.setattr(Engine, "_batch", spy)
    gc.enable()
    events = [A.Event("e0", "A", 0, 0, {"x": 1, "k": "a"}), A.Event("e1", "A", 1, 1, {"x": 0, "k": "a"})]
    assert [(i, m.sub_id, m.witness) for i, m in eng.process_batch(events)] == [(1, "q", ("e0", "e1"))]
    assert seen == [False] and gc.isenabled()
    with pytest.raises(ValueError, match="before the previous event"):
        eng.process_batch([A.Event("e2", "A", 0, 0, {"x": 1})])
    assert gc.isenabled()
