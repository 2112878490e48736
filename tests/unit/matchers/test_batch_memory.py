"""Matching a large dense batch holds a fixed budget beyond the index (events in chunks,
:meth:`matchers.base.Matcher.match`), for every matcher the service may use.

On the dense interval workload every event satisfies ~30% of the interval predicates:
matched at once, a 10,000-event batch against 2,000 subscriptions materialises ~60M
satisfied predicates: the Fabret matchers grew by 459 MB, amkh by 200 MB; in chunks of a
16 MB budget each grows by 7 to 11 MB here. The growth is the peak resident size while
matching (``VmHWM``, reset after the warm-up) above the resident size before: ``ru_maxrss``
would also count the parent's size, which a child keeps across ``exec``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from matchers import base
from matchers.catalog import create, names
from scripts.workloads import dense

ROOT = Path(__file__).resolve().parents[3]

CODE = textwrap.dedent("""
    import sys
    import matchers.base
    from matchers.catalog import create
    from scripts.workloads import dense
    matchers.base.BATCH_BUDGET = 16 << 20
    work = dense(n_subs=2000, n_events=10000, d=20, k=10, seed=3)
    m = create(sys.argv[1])
    m.add(work.subscriptions)
    batch = m.encode(work.events)
    m.match(batch.slice(0, 200))  # kernels compiled or loaded, chunk sizes measured

    def kib(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak resident size starts again from here (not the compiler's peak)
    before = kib("VmRSS")
    result = m.match(batch)
    print((kib("VmHWM") - before) * 1024, result.total)
""")


@pytest.mark.parametrize("name", names(baselines=False))
def test_dense_batch_memory_is_bounded(name):
    """The peak resident size while matching, above the resident size before (an upper
    bound of what matching held), stays within a few budgets."""
    out = subprocess.run([sys.executable, "-c", CODE, name], capture_output=True, text=True, check=True,
                         timeout=600, cwd=ROOT)
    grown, total = map(int, out.stdout.split())
    assert total > 0
    assert grown < 160 * 2**20, f"{name}: matching grew the process by {grown / 2**20:.0f} MB"


@pytest.mark.parametrize("name", names(baselines=False))
def test_chunks_match_as_the_whole_batch(name, monkeypatch):
    """A batch matched in chunks of one event (a budget of one byte) gives what one chunk gives."""
    work = dense(n_subs=300, n_events=200, d=6, k=3, width=0.5, seed=5)
    m = create(name)
    m.add(work.subscriptions)
    batch = m.encode(work.events)
    whole = m.match(batch)
    monkeypatch.setattr(base, "BATCH_BUDGET", 1)
    assert m._chunk_events() == 1
    chunked = m.match(batch)
    assert whole.total > 0
    assert chunked.offsets.tolist() == whole.offsets.tolist()
    assert chunked.keys.tolist() == whole.keys.tolist()
