"""Matching a large dense batch holds a fixed budget beyond the index (events in chunks).

On the dense interval workload every event satisfies ~30% of the interval predicates:
a batch whose satisfied predicates were materialised at once grew by ~355 MB here
(5,000 subscriptions, 20,000 events); chunked, by ~70 MB.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

CODE = textwrap.dedent("""
    import resource, sys
    from matchers.base import create
    from scripts.workloads import dense
    work = dense(n_subs=5000, n_events=20000, d=20, k=10, seed=3)
    m = create(sys.argv[1])
    m.add(work.subscriptions)
    batch = m.encode(work.events)
    m.match(batch.slice(0, 10))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = m.match(batch)
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024, result.total)
""")


@pytest.mark.parametrize("name", ["bitmark", "counting", "vci"])
def test_dense_batch_memory_is_bounded(name):
    out = subprocess.run([sys.executable, "-c", CODE, name], capture_output=True, text=True, check=True,
                         timeout=600, cwd=ROOT)
    grown, total = map(int, out.stdout.split())
    assert total > 0
    assert grown < 160 * 2**20, f"{name}: matching grew the process by {grown / 2**20:.0f} MB"
