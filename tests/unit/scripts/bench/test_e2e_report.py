"""The registration breakdown of ``scripts.bench.e2e``: the phases and the gaps add up to the
measured seconds, from the batches' own metrics."""

import dataclasses

import pytest

from scripts.bench.e2e_report import registration_line, registration_phases
from streaming.metrics import BatchMetrics


def test_the_phases_and_gaps_add_up_to_the_registration():
    started = 1000.0
    batches = [dataclasses.asdict(BatchMetrics(0, subscription_records=70, batch_ms=4000, changes_ms=3500,
                                               parse_ms=2000, admit_ms=1000, apply_ms=500, finished_at=1006.0)),
               dataclasses.asdict(BatchMetrics(1, subscription_records=30, batch_ms=1000, changes_ms=600, parse_ms=300,
                                               admit_ms=200, apply_ms=100, finished_at=1007.5))]
    warm = [dataclasses.asdict(BatchMetrics(2, index_ms=1500, finished_at=1010.0))]
    p = registration_phases(batches, started, 8.0, warm)
    assert p["start_s"] == pytest.approx(2.0) and p["batches"] == 2 and p["records"] == 100
    assert (p["parse_s"], p["admit_s"], p["apply_s"]) == pytest.approx((2.3, 1.2, 0.6))
    assert p["rest_of_batches_s"] == pytest.approx(0.9) and p["between_s"] == pytest.approx(1.0)
    total = p["start_s"] + p["parse_s"] + p["admit_s"] + p["apply_s"] + p["rest_of_batches_s"] + p["between_s"]
    assert total == pytest.approx(8.0) and p["first_index_s"] == pytest.approx(1.5)
    line = registration_line({"n_subs": 100, "registered": 100, "register_s": 8.0, "warmup_s": 2.5,
                              "register_load": 3.0, "register_phases": p})
    assert line.startswith("registered 100 of 100 subscriptions in 8.0 s") and "read + parse 2.3" in line
