"""VCI experiments (Wu, Chen, Yu, Mei, Section 5): Fig. 5, Fig. 6 and Fig. 7 on this machine.

* ``fig5``: storage of SCI, SCI-BC, LCI, LCI-BC, LCI-BV (and LCI-BV(DT)) against ``L`` at
  ``R = 5,000``, ``W = 500``, ``n = 10,000``;
* ``fig6`` / ``fig7``: search time and storage against ``n`` (1,000 to 1,024,000, doubling,
  by incremental insertion into the same indexes) at ``R = 5,000, W = 200, L = 128`` (a)
  and ``R = 250,000`` (b), for the LCI schemes, Dlist and the interval-tree baseline.

Workload (Section 5.2, as :func:`scripts.workloads.vci` draws it): starts uniform in
``[1, R-1]``, lengths uniform in ``[1, W]``, ends cut at ``R``; 10,000 searches uniform in
``[1, R]``.  Search time is given twice: counting the matches only (the goal excludes
emitting ids) and counting plus copying the ids out (in chunks of 64 searches, into a
fresh buffer).  Times are CPU time of the process (``time.process_time``, best of 3);
storage is the index's structures after packing the id lists (bitmaps, list headers,
ids, distance table), the per-id bounds kept for deletion excluded for every index.

Results: ``docs/bench/vci.json`` (``vci-quick.json`` for ``--quick``), the results section
of ``docs/vci.md`` (full runs only) and ``docs/img/vci-fig5.png``, ``vci-fig6.png``, ``vci-fig7.png``
(``vci-quick-*`` for ``--quick``).

Usage::

    python -m scripts.bench.vci [--quick] [--only fig5,fig6]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from matchers.catalog import create
from matchers.counting import CountingMatcher
from matchers.vci import VciRangeEvaluator
from matchers.vci.baselines import DirectList, IntervalTree
from matchers.vci.interval_index import IntervalIndex, bitmap_bytes
from scripts.bench import kit
from scripts.draws import rngs
from scripts.workloads import vci as vci_workload

FIG5_SCHEMES = ("SCI", "SCI-BC", "LCI", "LCI-BC", "LCI-BV", "LCI-BV(DT)")
FIG6A = ("LCI", "LCI-BC", "LCI-BV", "LCI-BV(DT)", "Dlist", "tree")
FIG6B = ("LCI-BC", "LCI-BV", "LCI-BV(DT)", "tree")
COLORS = {"SCI": "C7", "SCI-BC": "C8", "LCI": "C0", "LCI-BC": "C1", "LCI-BV": "C2", "LCI-BV(DT)": "C3",
          "Dlist": "C4", "tree": "C5"}
"""One colour per index in every plot."""
BUILD_LIMIT_BYTES = 256 << 20
"""Bitmaps larger than this are not built for Fig. 5: their size is computed (exactly) instead."""
DLIST_LIMIT = 256 << 20
"""Dlist is not grown past this many bytes of ids (the paper's ran out of memory at 128,000)."""

FULL: dict[str, Any] = dict(L=[2, 4, 8, 16, 32, 64, 128, 256], sizes=[1000 << i for i in range(11)], n_queries=10_000,
                            R_large=250_000, matcher_subs=[10_000, 100_000], matcher_events=2000)
QUICK: dict[str, Any] = dict(L=[2, 8, 32, 128], sizes=[1000 << i for i in range(0, 7, 2)], n_queries=2_000,
                             R_large=250_000, matcher_subs=[10_000], matcher_events=500)
MATCHERS = ("counting", "counting + VCI ranges", "vci")
"""Whole matchers on the same workload as subscriptions (``x BETWEEN lo AND hi``)."""


def intervals(n: int, R: int, W: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Cells ``[x-1, y-1]`` of the paper's intervals ``[x, y]`` over values ``1..R``.

    Same draws as :func:`scripts.workloads.vci` with this seed.
    """
    rng, _ = rngs(seed)
    starts = rng.integers(1, R, size=n)
    ends = np.minimum(starts + rng.integers(1, W + 1, size=n), R)
    return starts - 1, ends - 1


def queries(n: int, R: int, seed: int = 0) -> np.ndarray:
    """Cells of ``n`` searches uniform over values ``1..R``."""
    _, rng = rngs(seed)
    return rng.integers(1, R + 1, size=n) - 1


def make(name: str, R: int, L: int):
    if name == "Dlist":
        return DirectList(R)
    if name == "tree":
        return IntervalTree(R)
    return IntervalIndex(R, L, name)


def search_times(index, cells: np.ndarray) -> tuple[float, float, float]:
    """(count-only µs, count + emit µs, mean matches) per search."""
    index.count_many(cells[:8])
    index.query_many(cells[:8])
    counts = index.count_many(cells)
    t_count = kit.best_cpu(3, lambda: index.count_many(cells))
    chunks = [cells[i:i + 64] for i in range(0, len(cells), 64)]
    t_emit = kit.best_cpu(3, lambda: [index.query_many(c) for c in chunks])
    n = len(cells)
    return t_count / n * 1e6, t_emit / n * 1e6, float(counts.mean())


# -- Fig. 5 ---------------------------------------------------------------------------------
def fig5(cfg: dict, R: int = 5000, W: int = 500, n: int = 10_000) -> dict:
    xs, ys = intervals(n, R, W)
    ids = np.arange(n)
    rows = []
    todo = [(s, L) for L in cfg["L"] for s in FIG5_SCHEMES]
    for scheme, L in tqdm(todo, desc="fig5 storage vs L", file=sys.stderr):
        computed = bitmap_bytes(scheme, R, L) > BUILD_LIMIT_BYTES
        # an unbuilt full-bitmap scheme has the lists of its clipped twin and the full bitmaps
        index = make(scheme + "-BC" if computed else scheme, R, L)
        c0 = time.process_time()
        index.insert(ids, xs, ys)
        t_insert = time.process_time() - c0
        index.compact()
        size = index.memory_bytes() - bitmap_bytes(index.scheme, R, L) + bitmap_bytes(scheme, R, L)
        rows.append(dict(scheme=scheme, L=L, bytes=size, bitmap_bytes=bitmap_bytes(scheme, R, L),
                         computed=computed, insert_s=None if computed else t_insert))
        del index
    return dict(R=R, W=W, n=n, rows=rows)


# -- Fig. 6 and 7 ----------------------------------------------------------------------------
def fig6(cfg: dict, R: int, W: int, L: int, names: Sequence[str], label: str) -> dict:
    sizes = cfg["sizes"]
    xs, ys = intervals(sizes[-1], R, W, seed=1)
    cells = queries(cfg["n_queries"], R, seed=1)
    mean_len = float((ys - xs + 1).mean())
    rows = []
    for name in names:
        index = make(name, R, L)
        have = 0
        bar = tqdm(sizes, desc=f"fig6{label} {name}", file=sys.stderr)
        for n in bar:
            if name == "Dlist" and n * mean_len * 4 > DLIST_LIMIT:
                break
            c0 = time.process_time()
            index.insert(np.arange(have, n), xs[have:n], ys[have:n])
            t_insert = time.process_time() - c0
            have = n
            index.compact()
            count_us, emit_us, matches = search_times(index, cells)
            rows.append(dict(index=name, n=n, count_us=count_us, emit_us=emit_us, matches=matches,
                             bytes=index.memory_bytes(), insert_us=t_insert / max(1, n - n // 2) * 1e6))
        del index
    return dict(R=R, W=W, L=L, n_queries=len(cells), rows=rows)


# -- whole matchers ----------------------------------------------------------------------------
def _matcher(name: str):
    if name == "counting + VCI ranges":
        return CountingMatcher(range_evaluator=VciRangeEvaluator())
    return create(name)


def matchers(cfg: dict, R: int = 5000, W: int = 200) -> dict:
    """Build and match time of the matchers on Section 5.2's intervals as subscriptions."""
    rows = []
    todo = [(n, name) for n in cfg["matcher_subs"] for name in MATCHERS]
    reference: dict[int, list] = {}
    workload = None
    for n, name in tqdm(todo, desc="matchers", file=sys.stderr):
        if workload is None or len(workload.subscriptions) != n:
            workload = vci_workload(n_subs=n, n_events=cfg["matcher_events"], R=R, W=W, seed=2)
        warm = _matcher(name)  # kernel compilation / cache loading happens here, untimed
        warm.add(workload.subscriptions[:20])
        warm.match(warm.encode(workload.events[:20]))
        matcher = _matcher(name)
        c0 = time.process_time()
        matcher.add(workload.subscriptions)
        matcher.match(matcher.encode(workload.events[:1]))  # applies queued changes, compiles
        build_s = time.process_time() - c0
        batch = matcher.encode(workload.events)
        c0 = time.process_time()
        result = matcher.match(batch)
        match_s = time.process_time() - c0
        keys = [sorted(matcher.ids(result.keys[result.offsets[i]:result.offsets[i + 1]]))
                for i in range(0, batch.n, max(1, batch.n // 50))]
        agrees = reference.setdefault(n, keys) == keys
        rows.append(dict(matcher=name, n=n, build_s=build_s, match_us=match_s / batch.n * 1e6,
                         matches=result.total / batch.n, agrees=agrees, bytes=matcher.memory_bytes()))
    return dict(R=R, W=W, n_events=cfg["matcher_events"], rows=rows)


def table_matchers(res: dict) -> str:
    lines = [f"R={res['R']}, W={res['W']}, {res['n_events']} events in one batch; CPU time", "",
             "| n | matcher | build s | match µs/event | × counting | matches/event | MB | agrees with counting |",
             "|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        base = next(b for b in res["rows"] if b["n"] == r["n"] and b["matcher"] == "counting")
        lines.append(f"| {r['n']:,} | {r['matcher']} | {r['build_s']:.2f} | {r['match_us']:.1f} | "
                     f"{base['match_us'] / r['match_us']:.1f} | {r['matches']:.1f} | {_mb(r['bytes'])} | "
                     f"{'yes' if r['agrees'] else 'NO'} |")
    return "\n".join(lines)


# -- output ----------------------------------------------------------------------------------
def _mb(b: float) -> str:
    return f"{b / 1e6:.2f}"


def table5(res: dict) -> str:
    Ls = sorted({r["L"] for r in res["rows"]})
    lines = [f"Storage (MB) vs L; R={res['R']}, W={res['W']}, n={res['n']} (* bitmaps computed, not built)", "",
             "| scheme | " + " | ".join(f"L={L}" for L in Ls) + " |", "|---" * (len(Ls) + 1) + "|"]
    for s in FIG5_SCHEMES:
        cells = []
        for L in Ls:
            r = next(r for r in res["rows"] if r["scheme"] == s and r["L"] == L)
            cells.append(_mb(r["bytes"]) + ("*" if r["computed"] else ""))
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table6(res: dict) -> str:
    names = list(dict.fromkeys(r["index"] for r in res["rows"]))
    sizes = sorted({r["n"] for r in res["rows"]})
    head = (f"R={res['R']}, W={res['W']}, L={res['L']}, {res['n_queries']} searches; "
            "per search: count-only µs / count+emit µs; storage MB")
    lines = [head, "", "| n | matches | " + " | ".join(f"{n} count µs" for n in names)
             + " | tree / LCI-BV(DT) (count) | " + " | ".join(f"{n} emit µs" for n in names)
             + " | " + " | ".join(f"{n} MB" for n in names) + " |",
             "|---" * (3 + 3 * len(names)) + "|"]
    for n in sizes:
        by = {r["index"]: r for r in res["rows"] if r["n"] == n}
        matches = next(iter(by.values()))["matches"]
        ratio = by["tree"]["count_us"] / by["LCI-BV(DT)"]["count_us"] if "tree" in by and "LCI-BV(DT)" in by else None
        ratio_text = f"{ratio:.1f}x" if ratio else "-"
        lines.append(
            f"| {n:,} | {matches:,.0f} | "
            + " | ".join(f"{by[k]['count_us']:.3f}" if k in by else "-" for k in names)
            + f" | {ratio_text} | "
            + " | ".join(f"{by[k]['emit_us']:.2f}" if k in by else "-" for k in names)
            + " | " + " | ".join(_mb(by[k]["bytes"]) if k in by else "-" for k in names) + " |"
        )
    return "\n".join(lines)


def plot(results: dict, prefix: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    img = kit.DOCS / "img"
    img.mkdir(parents=True, exist_ok=True)
    if "fig5" in results:
        res = results["fig5"]
        fig, ax = plt.subplots(figsize=(6, 4))
        for s in FIG5_SCHEMES:
            rows = sorted((r for r in res["rows"] if r["scheme"] == s), key=lambda r: r["L"])
            ax.plot([r["L"] for r in rows], [r["bytes"] / 1e6 for r in rows], marker="o", label=s, color=COLORS[s],
                    ls="--" if s == "LCI-BV(DT)" else "-")
        ax.set(xscale="log", yscale="log", xlabel="L", ylabel="storage (MB)",
               title=f"Fig. 5: storage vs L (R={res['R']}, W={res['W']}, n={res['n']})")
        ax.set_xscale("log", base=2)
        ax.legend(fontsize=8, loc="upper left")
        fig.tight_layout()
        paths.append(img / f"{prefix}-fig5.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    for fig_no, key, ylabel in (("6", "count_us", "µs per search (count only)"), ("7", "bytes", "storage (MB)")):
        parts = [k for k in ("fig6a", "fig6b") if k in results]
        if not parts:
            continue
        fig, axes = plt.subplots(1, len(parts), figsize=(6 * len(parts), 4), squeeze=False)
        for ax, part in zip(axes[0], parts, strict=True):
            res = results[part]
            for name in dict.fromkeys(r["index"] for r in res["rows"]):
                rows = [r for r in res["rows"] if r["index"] == name]
                ys = [r[key] / 1e6 if key == "bytes" else r[key] for r in rows]
                line, = ax.plot([r["n"] for r in rows], ys, marker="o", label=name, color=COLORS[name])
                if key == "count_us" and name in ("LCI-BV(DT)", "tree"):
                    ax.plot([r["n"] for r in rows], [r["emit_us"] for r in rows], ls=":", color=line.get_color(),
                            label=f"{name} (count+emit)")
            ax.set(xscale="log", yscale="log", xlabel="n (predicate intervals)", ylabel=ylabel,
                   title=f"Fig. {fig_no}({part[-1]}): R={res['R']}, W={res['W']}, L={res['L']}")
            ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        paths.append(img / f"{prefix}-fig{fig_no}.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths


def goals(results: dict) -> list[str]:
    """The stated goals, checked on this run's figures."""
    out = []
    for part in ("fig6a", "fig6b"):
        if part not in results:
            continue
        res = results[part]
        by = {(r["index"], r["n"]): r for r in res["rows"]}
        top = max(r["n"] for r in res["rows"])
        dt = by.get(("LCI-BV(DT)", top))
        if dt:
            out.append(f"{part} (R={res['R']}): LCI-BV(DT) at n={top:,}: {dt['count_us']:.3f} µs per search "
                       f"counting ({'meets' if dt['count_us'] < 2 else 'MISSES'} < 2 µs), "
                       f"{dt['emit_us']:.1f} µs emitting {dt['matches']:,.0f} ids")
        slower = [n for (name, n), r in by.items() if name == "LCI-BV(DT)" and n > 10_000 and ("tree", n) in by
                  and r["count_us"] >= by[("tree", n)]["count_us"]]
        out.append(f"{part}: LCI-BV(DT) faster than the interval tree at every n > 10,000 (count): "
                   + ("yes" if not slower else f"NO at n={slower}"))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, about a minute")
    parser.add_argument("--only", default="fig5,fig6,matchers",
                        help="comma-separated: fig5, fig6 (includes fig7), matchers; other parts are kept from the saved JSON")
    parser.add_argument("--render", action="store_true", help="only redo the docs and plots from the saved JSON")
    args = parser.parse_args(argv)
    prefix = "vci-quick" if args.quick else "vci"
    if args.render:
        saved = json.loads((kit.DOCS / "bench" / f"{prefix}.json").read_text())
        plot(saved, prefix)
        if not args.quick:
            kit.write_section(kit.DOCS / "vci.md", render(saved))
        return 0
    kit.one_thread()
    cfg = QUICK if args.quick else FULL
    only = set(args.only.split(","))
    saved_path = kit.DOCS / "bench" / f"{prefix}.json"
    results: dict = json.loads(saved_path.read_text()) if saved_path.exists() and only != {"fig5", "fig6", "matchers"} else {}
    results.update(environment=kit.environment(), quick=args.quick, config=cfg)
    started = time.time()
    if "fig5" in only:
        results["fig5"] = fig5(cfg)
        print(table5(results["fig5"]), "\n", flush=True)
    if "fig6" in only:
        results["fig6a"] = fig6(cfg, 5000, 200, 128, FIG6A, "a")
        print(table6(results["fig6a"]), "\n", flush=True)
        results["fig6b"] = fig6(cfg, cfg["R_large"], 200, 128, FIG6B, "b")
        print(table6(results["fig6b"]), "\n", flush=True)
    if "matchers" in only:
        results["matchers"] = matchers(cfg)
        print(table_matchers(results["matchers"]), "\n", flush=True)
    results["goals"] = goals(results)
    results["seconds"] = round(time.time() - started, 1)
    results["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for line in results["goals"]:
        print(line)
    (kit.DOCS / "bench").mkdir(parents=True, exist_ok=True)
    out = kit.DOCS / "bench" / f"{prefix}.json"
    out.write_text(json.dumps(results, indent=1))
    paths = plot(results, prefix)
    if not args.quick:
        kit.write_section(kit.DOCS / "vci.md", render(results))
    print(f"wrote {out} and {', '.join(str(p) for p in paths)}")
    return 0


def render(results: dict) -> str:
    """The measured tables as Markdown (pasted into ``docs/vci.md``)."""
    env = results.get("environment", {})
    parts = [f"Run of {results.get('date', '?')}; load average at the start {env.get('load_avg')} "
             f"(numpy {env.get('numpy')}, numba {env.get('numba')}); {results.get('seconds', '?')} s.", ""]
    if "fig5" in results:
        parts += ["### Fig. 5: storage vs L", "", table5(results["fig5"]), ""]
    for key, title in (("fig6a", "Fig. 6(a) / 7(a): moderate R"), ("fig6b", "Fig. 6(b) / 7(b): large R")):
        if key in results:
            parts += [f"### {title}", "", table6(results[key]), ""]
    if "matchers" in results:
        parts += ["### Whole matchers on the same intervals", "", table_matchers(results["matchers"]), ""]
    parts += ["### Goals", ""] + [f"* {g}" for g in results.get("goals", [])]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.exit(main())
