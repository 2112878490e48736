"""Command line: match JSONL events against JSONL subscriptions with a registered matcher.

``python -m matchers match --subscriptions S.jsonl --events E.jsonl --matcher counting --out M.jsonl``
writes one line ``{"event": ID, "subscriptions": [sorted ids]}`` per event, in input
order.  Bad lines are reported on stderr with their line number and skipped; the exit
code is 1 if any line was bad.  ``python -m matchers list`` prints the matcher names; ``python -m matchers warm`` compiles
the numba kernels of every matcher (or those named; with none, the stateful subscriptions'
flat engine too) into the cache.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import IO

import numpy as np
import orjson
from tqdm import tqdm

from matchers import base, catalog
from matchers.base import Matches
from matchers.errors import PubSubError, TooManyRows
from matchers.events import Rows, encode_json, flatten
from matchers.expr import DEFAULT_MAX_TERMS, Subscription
from matchers.output import LINE_PARTS, id_table, match_lines

BATCH = 10_000


def _lines(path: str) -> Iterator[tuple[int, bytes]]:
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                yield number, line


def _report(stream: IO[str], path: str, number: int, reason: str) -> None:
    print(f"{path}:{number}: {reason}", file=stream)


def read_subscriptions(path: str, max_terms: int, err: IO[str]) -> tuple[list[Subscription], int]:
    """Parse a subscriptions file; returns the good ones and the number of bad lines."""
    from matchers.language import parse_record

    subs: dict[str, Subscription] = {}
    bad = 0
    for number, line in _lines(path):
        try:
            record = orjson.loads(line)
            if not isinstance(record, dict):
                raise PubSubError("a subscription line must be a JSON object")
            sub = parse_record(record, max_terms=max_terms)
        except orjson.JSONDecodeError as exc:
            bad += 1
            _report(err, path, number, f"not valid JSON: {exc}")
            continue
        except PubSubError as exc:
            bad += 1
            _report(err, path, number, str(exc))
            continue
        if sub.id in subs:
            _report(err, path, number, f"subscription {sub.id!r} defined again: the last definition wins")
        subs[sub.id] = sub
    return list(subs.values()), bad


def _chunks(path: str, size: int) -> Iterator[list[tuple[int, bytes]]]:
    """The file's non-blank lines with their numbers, ``size`` at a time."""
    chunk: list[tuple[int, bytes]] = []
    for item in _lines(path):
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def read_event(path: str, number: int, line: bytes, err: IO[str]) -> tuple[object, dict | Rows] | None:
    """``(event id, flat attributes or rows)`` of one line, or ``None`` (reported on ``err``) if it is bad."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        _report(err, path, number, f"not valid JSON: {exc}")
        return None
    if not isinstance(obj, dict):
        _report(err, path, number, "an event line must be a JSON object")
        return None
    event_id = obj.pop("id", number)
    try:
        flat = flatten(obj)
    except TooManyRows as exc:
        _report(err, path, number, f"event not matched: {exc}")
        return None
    return event_id, flat


def match_chunk(matcher: base.Matcher, path: str, chunk: list[tuple[int, bytes]],
                err: IO[str]) -> tuple[Matches, np.ndarray, np.ndarray]:
    """Match one chunk of event lines: the matches of the good ones and the JSON of their ids,
    as bytes (uint8) with offsets (id ``i`` is ``ids[offsets[i]:offsets[i + 1]]``).

    The lines go through :func:`matchers.events.encode_json` (one scan of the bytes); the
    lines it does not take are read by :func:`read_event`, which reports the bad ones.  An id
    that is a JSON string is copied from its line as it is; any other (a number, an object,
    an id read by :func:`read_event`, the line number of an event without one) is written
    by ``orjson``.
    """
    slow_ids: dict[int, object] = {}
    lines = [line for _, line in chunk]

    def slow(i: int) -> dict | Rows | None:
        read = read_event(path, chunk[i][0], lines[i], err)
        if read is None:
            return None
        slow_ids[i] = read[0]
        return read[1]

    jb = encode_json(lines, matcher.dictionary, slow, keys=("id", ""), drop_first=True)
    result = matcher.match(jb.batch)
    lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
    starts = np.cumsum(lengths) - lengths
    buf = np.frombuffer(b"".join(lines), np.uint8)
    events = jb.events
    lo, hi = jb.spans[events, 0], jb.spans[events, 1]
    fast = jb.fast[events] & (lo >= 0)
    plain = np.zeros(len(events), dtype=bool)  # ids that are JSON strings, copied from their line
    plain[fast] = buf[starts[events[fast]] + lo[fast]] == 34
    src_lo = starts[events] + lo
    src_hi = starts[events] + hi
    others = np.flatnonzero(~plain).tolist()
    if others:
        written = []
        for j in others:
            i = int(events[j])
            if i in slow_ids:
                written.append(orjson.dumps(slow_ids[i]))
            elif lo[j] < 0:
                written.append(b"%d" % chunk[i][0])
            else:
                written.append(orjson.dumps(orjson.loads(lines[i][lo[j]:hi[j]])))
        sizes = np.fromiter(map(len, written), dtype=np.int64, count=len(written))
        src_lo[others] = len(buf) + np.cumsum(sizes) - sizes
        src_hi[others] = src_lo[others] + sizes
        buf = np.concatenate([buf, np.frombuffer(b"".join(written), np.uint8)])
    sizes = src_hi - src_lo
    offsets = np.zeros(len(events) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    ids = buf[np.repeat(src_lo - offsets[:-1], sizes) + np.arange(offsets[-1])]
    return result, ids, offsets


def cmd_match(args: argparse.Namespace) -> int:
    err = sys.stderr
    started = time.perf_counter()
    subs, bad = read_subscriptions(args.subscriptions, args.max_terms, err)
    matcher = catalog.create(args.matcher)
    matcher.add(subs)
    built = time.perf_counter()
    table = id_table([(s.id, matcher.key_of(s.id)) for s in subs], matcher.capacity)
    out = open(args.out, "wb") if args.out != "-" else sys.stdout.buffer
    n_events = n_matches = 0
    match_seconds = 0.0
    try:
        with tqdm(desc="events", unit="ev", disable=None, file=err) as bar:
            for chunk in _chunks(args.events, BATCH):
                t0 = time.perf_counter()
                result, event_ids, event_offsets = match_chunk(matcher, args.events, chunk, err)
                match_seconds += time.perf_counter() - t0
                n_good = len(event_offsets) - 1
                bad += len(chunk) - n_good
                n_events += n_good
                n_matches += result.total
                out.write(match_lines(event_ids, event_offsets, result.offsets, result.keys, table, *LINE_PARTS).tobytes())
                bar.update(len(chunk))
    finally:
        if out is not sys.stdout.buffer:
            out.close()
    if not args.quiet:
        rate = n_events / match_seconds if match_seconds else float("inf")
        print(f"{len(subs)} subscriptions, {n_events} events, {n_matches} matches, {bad} bad lines; "
              f"{args.matcher}: build {built - started:.2f} s, match {match_seconds:.2f} s ({rate:,.0f} events/s), "
              f"index {matcher.memory_bytes() / 1e6:.1f} MB", file=err)
    return 1 if bad else 0


def cmd_list(args: argparse.Namespace) -> int:
    for name in catalog.names():
        print(name)
    return 0


def _warm_one(name: str | None) -> None:
    """Warm matcher ``name`` (``None``: the patterns' flat engine)."""
    from matchers.warm import warm, warm_patterns

    warm(name) if name is not None else warm_patterns()


def cmd_warm(args: argparse.Namespace) -> int:
    """Warm the named matchers (all and the patterns' engine by default), one process per core:
    each compiles its own kernels into the shared cache, which numba writes atomically."""
    import logging
    import os
    from concurrent.futures import ProcessPoolExecutor

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    # the patterns' engine first: the longest job (62 kernels), the matchers share the other core
    jobs: list[str | None] = [*([] if args.names else [None]), *(args.names or catalog.names())]
    workers = min(len(jobs), os.cpu_count() or 1)
    if workers <= 1:
        for job in jobs:
            _warm_one(job)
        return 0
    with ProcessPoolExecutor(max_workers=workers) as pool:
        list(pool.map(_warm_one, jobs))  # re-raises a worker's exception
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matchers", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("match", help="match a JSONL file of events against a JSONL file of subscriptions")
    m.add_argument("--subscriptions", "-s", required=True, help='JSONL: {"id": ..., "expr": "..."}, {"id": ..., "json": {...}} or {"id": ..., "rule": {...}}')
    m.add_argument("--events", "-e", required=True, help="JSONL: one JSON object per line, optional \"id\"")
    m.add_argument("--matcher", "-m", default="counting", help="registered matcher name (see `list`)")
    m.add_argument("--out", "-o", default="-", help="output JSONL (default: stdout)")
    m.add_argument("--max-terms", type=int, default=DEFAULT_MAX_TERMS, help="bound on DNF conjunctions per subscription")
    m.add_argument("--quiet", "-q", action="store_true", help="no summary line on stderr")
    m.set_defaults(func=cmd_match)
    ls = sub.add_parser("list", help="print the registered matcher names, one a line")
    ls.set_defaults(func=cmd_list)
    w = sub.add_parser("warm", help="compile the numba kernels of the matchers into the cache (all by default)")
    w.add_argument("names", nargs="*", help="matcher names (see `list`)")
    w.set_defaults(func=cmd_warm)
    args = parser.parse_args(argv)
    wanted = [args.matcher] if args.command == "match" else args.names if args.command == "warm" else []
    unknown = [n for n in wanted if n not in catalog.names()]
    if unknown:
        parser.error(f"unknown matcher {unknown[0]!r}; known: {', '.join(catalog.names())}")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
