"""The dense peer harness: the workload, its peer files, and a run next to a peer binary
(here a NumPy peer script that reads the files, as a C++ peer would)."""

from __future__ import annotations

import stat
import sys
import textwrap

import numpy as np

from scripts.bench.dense import bench, read_peer_subscriptions, write_peer_files
from scripts.workloads import dense_arrays

PEER = textwrap.dedent("""
    import sys, numpy as np
    subs, events = open(sys.argv[1]), open(sys.argv[2])
    n, d, k, domain = map(int, subs.readline().split())
    rows = np.loadtxt(subs, dtype=np.int64, ndmin=2)
    m, _ = map(int, events.readline().split())
    values = np.loadtxt(events, dtype=np.int64, ndmin=2)
    att, lo, hi = rows[:, 2::3], rows[:, 3::3], rows[:, 4::3]
    counts = [int(((lo <= v[att]) & (v[att] <= hi)).all(axis=1).sum()) for v in values]
    print("ms_per_event 1.5")
    print("build_s 0.25")
    print("initbits_s 0.75")
    print("counts", *counts)
""")


def test_dense_arrays_shape_the_workload():
    a = dense_arrays(n_subs=500, n_events=7, d=8, k=5, width=0.25, domain=1000, seed=4)
    assert a.attrs.shape == a.lo.shape == (500, 5) and a.events.shape == (7, 8)
    assert all(len(set(row)) == 5 for row in a.attrs.tolist())
    assert (a.hi - a.lo == 250).all() and a.lo.min() >= 0 and a.hi.max() < 1000
    assert (a.events >= 0).all() and (a.events < 1000).all()
    b = dense_arrays(n_subs=500, n_events=7, d=8, k=5, width=0.25, domain=1000, seed=4)
    assert (a.lo == b.lo).all() and (a.events == b.events).all()
    z = dense_arrays(n_subs=2000, n_events=2000, d=4, k=2, domain=1000, zipf_alpha=1.0, seed=4)
    assert np.median(z.events) < 100  # Zipf values crowd the low end


def test_peer_files_and_a_run_next_to_a_peer(tmp_path):
    arrays = dense_arrays(n_subs=3000, n_events=40, d=6, k=3, seed=2)
    subs, events = write_peer_files(arrays, tmp_path)
    head, first = subs.read_text().splitlines()[:2]
    assert head == "3000 6 3 1000000"
    assert list(map(int, first.split())) == [0, 3, *np.column_stack(
        (arrays.attrs[0], arrays.lo[0], arrays.hi[0])).ravel().tolist()]
    assert events.read_text().splitlines()[0] == "40 6"
    peer = tmp_path / "peer"
    peer.write_text(f"#!{sys.executable}\n{PEER}")
    peer.chmod(peer.stat().st_mode | stat.S_IEXEC)
    run = bench(arrays, ["bitmark", "bitmark@columns", "bitmark@file"], {"numpy-peer": (str(peer), [])}, rounds=2, batch=16, timeout_s=300,
                params={})
    ours, theirs = run["results"]["bitmark"], run["results"]["numpy-peer"]
    assert len(ours["ms"]) == len(theirs["ms"]) == 2 and theirs["best_ms"] == 1.5
    assert theirs["build_cpu_s"] == 0.25 and theirs["ready_cpu_s"] == 0.75  # its insert; insert and initBits
    assert ours["input_cpu_s"] > 0 and run["results"]["bitmark@file"]["input_cpu_s"] == 0  # the file's read is its build
    assert ours["count_mismatches"] == theirs["count_mismatches"] == 0
    assert ours["matches_per_event"] == theirs["matches_per_event"] > 0
    for name in ("bitmark@columns", "bitmark@file"):
        assert run["results"][name]["count_mismatches"] == 0 and run["results"][name]["build_cpu_s"] > 0


def test_peer_subscriptions_file_reads_back_as_columns(tmp_path):
    arrays = dense_arrays(n_subs=50, n_events=3, d=6, k=3, seed=5)
    subs, _ = write_peer_files(arrays, tmp_path)
    ids, intervals = read_peer_subscriptions(subs)
    assert ids == [f"s{i}" for i in range(50)] and intervals.names == tuple(f"a{j}" for j in range(6))
    assert (intervals.off == np.arange(51) * 3).all() and (intervals.attr == arrays.attrs.ravel()).all()
    assert (intervals.lo == arrays.lo.ravel()).all() and (intervals.hi == arrays.hi.ravel()).all()


def test_a_contestant_from_another_checkout():
    """``NAME#LABEL`` runs in a child that imports ``matchers`` and ``scripts`` from the
    checkout ``LABEL`` names (here this one), next to the same matcher from this process."""
    from pathlib import Path

    arrays = dense_arrays(n_subs=2000, n_events=20, d=6, k=3, width=0.7, seed=3)
    here = str(Path(__file__).resolve().parents[4])
    run = bench(arrays, ["bitmark@columns", "bitmark@columns#here"], {}, rounds=1, batch=8, timeout_s=300,
                params={}, checkouts={"here": here})
    ours, theirs = run["results"]["bitmark@columns"], run["results"]["bitmark@columns#here"]
    assert ours["count_mismatches"] == theirs["count_mismatches"] == 0
    assert ours["matches_per_event"] == theirs["matches_per_event"] > 0
