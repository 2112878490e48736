"""Side by side with Quamina on EventBridge-like events: JSON bytes to match ids, one core.

Workload: EventBridge-like events (565 bytes on average of nested JSON with a ``resources``
array of one or two ARNs) and EventBridge patterns of 1 to 4 fields (OR-lists of values,
``prefix``, ``anything-but``, ``exists``, ``equals-ignore-case``; the first field of each
a selective one), as
``{"id": ..., "rule": {...}}`` lines.  For each number of rules, interleaved rounds time:

* ``quamina``: an external Quamina benchmark binary given by ``--quamina PATH`` (built from
  its repository in a scratch directory: it reads the rules and events files, adds the
  patterns, and reports the CPU time of ``MatchesForEvent`` over every event with
  ``GOMAXPROCS=1``), its ids checked against ours;
* ``json``: this project's path from bytes: :func:`matchers.events.encode_json`, ``match``,
  and the output lines of ids written from the match arrays (what ``python -m matchers
  match`` runs: :func:`matchers.__main__.match_chunk`, :func:`matchers.output.match_lines`);
* ``general``: the general path in the same run (orjson, :func:`matchers.events.flatten`,
  :func:`matchers.events.encode`, ``match``, ids per match in Python), the baseline;
* ``parse_us``: bytes to encoded batch alone per event, for both paths;
* ``baseline`` (with ``--baseline TREE``): the ``json`` path of another checkout of this
  project (an older commit, as a git worktree) in the same rounds, its ids checked against
  ours too.

Each round runs this project (and the baseline) in a fresh process of its own
(:func:`run_tree`), so both are measured alike (in the bench's own process, which holds every
round's ids, a change read 1.01x of its baseline where fresh processes read 1.09x).

CPU seconds (``time.process_time`` here, ``getrusage`` in the binary; the cyclic garbage
collector paused in each timed step, after a collection), numba on one thread, with the
1-minute load average.  Run ``python -m scripts.bench.quamina --quamina
PATH [--quick]``; results go to ``docs/bench/quamina.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import orjson

from scripts.bench import kit
from scripts.rules import make_events, make_rules

DOCS = Path(__file__).resolve().parents[2] / "docs"


def run_quamina(binary: str, rules_path: str, events_path: str, out_path: str, rounds: int) -> dict:
    """The binary's report (one JSON line) and its ids per event."""
    ran = kit.run([binary, rules_path, events_path, out_path, str(rounds)], env={**os.environ, "GOMAXPROCS": "1"})
    report = json.loads(ran.check().stdout.strip().splitlines()[-1])
    with open(out_path, "rb") as f:
        report["ids"] = [orjson.loads(line)["subscriptions"] for line in f]
    return report


def run_project(matcher_name: str, records: list[dict], raws: list[bytes], rounds: int, batch: int) -> dict:
    """Both of the project's paths over the events, ``rounds`` times each, in CPU seconds."""
    from matchers.__main__ import match_chunk
    from matchers.catalog import create
    from matchers.collector import no_cyclic_gc
    from matchers.events import encode, encode_json, flatten
    from matchers.language import parse_record
    from matchers.output import LINE_PARTS, id_table, match_lines

    t0 = time.perf_counter()
    matcher = create(matcher_name)
    matcher.add([parse_record(dict(r)) for r in records])
    build_s = time.perf_counter() - t0
    chunks = [list(enumerate(raws[lo:lo + batch], lo + 1)) for lo in range(0, len(raws), batch)]
    parts = [raws[lo:lo + batch] for lo in range(0, len(raws), batch)]
    sink = open(os.devnull, "w")  # noqa: SIM115  # closed below
    table = id_table([(str(r["id"]), matcher.key_of(str(r["id"]))) for r in records], matcher.capacity)

    def json_path() -> list:
        out = []
        for chunk in chunks:
            result, event_ids, offsets = match_chunk(matcher, "-", chunk, sink)
            match_lines(event_ids, offsets, result.offsets, result.keys, table, *LINE_PARTS)
            out.append(result)
        return out

    def general_path() -> None:
        for part in parts:
            flats = [flatten(orjson.loads(raw)) for raw in part]
            r = matcher.match(matcher.encode(flats))
            _ = [matcher.ids(r.keys[r.offsets[i]:r.offsets[i + 1]]) for i in range(len(flats))]

    def json_parse() -> None:
        for part in parts:
            encode_json(part, matcher.dictionary, lambda i: None)

    def general_parse() -> None:
        for part in parts:
            encode([flatten(orjson.loads(raw)) for raw in part], matcher.dictionary)

    results = json_path()  # untimed: kernels loaded, caches of both paths warm
    general_path()
    cpu = dict.fromkeys(("json", "general", "parse_json", "parse_general"), 0.0)
    for _ in range(rounds):  # interleaved; a full collection, started by one path, would land on another
        for name, run in (("json", json_path), ("general", general_path), ("parse_json", json_parse),
                          ("parse_general", general_parse)):
            gc.collect()
            with no_cyclic_gc():
                c0 = time.process_time()
                run()
                cpu[name] += time.process_time() - c0
    ids = [matcher.ids(r.keys[r.offsets[i]:r.offsets[i + 1]]) for r in results for i in range(len(r.offsets) - 1)]
    json_cpu, general_cpu, parse_json, parse_general = cpu["json"], cpu["general"], cpu["parse_json"], cpu["parse_general"]
    sink.close()
    n = len(raws) * rounds
    return dict(build_s=build_s, json_cpu_s=json_cpu, general_cpu_s=general_cpu,
                json_events_per_cpu_s=n / json_cpu, general_events_per_cpu_s=n / general_cpu,
                parse_json_us=parse_json / n * 1e6, parse_general_us=parse_general / n * 1e6, ids=ids)


_RUNNER = """
import json, sys
import numba, orjson
numba.set_num_threads(1)
from scripts.bench.quamina import run_project
matcher, rules, events, rounds = sys.argv[1:]
records = [orjson.loads(line) for line in open(rules, "rb")]
raws = [line.rstrip(b"\\n") for line in open(events, "rb")]
print(json.dumps(run_project(matcher, records, raws, int(rounds), 1000)))
"""


def run_tree(tree: str | Path, matcher_name: str, rules_path: str, events_path: str, rounds: int) -> dict:
    """:func:`run_project` of the checkout at ``tree``, in a process of its own."""
    ran = kit.run([sys.executable, "-c", _RUNNER, matcher_name, rules_path, events_path, str(rounds)], cwd=tree,
                  env=kit.tree_env(tree, one_thread=False))
    return json.loads(ran.check().stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench.quamina", description=__doc__.splitlines()[0])
    parser.add_argument("--quamina", help="path of the Quamina benchmark binary (docs/rules-bench.md); "
                        "without it there is nothing to compare and the bench says so")
    parser.add_argument("--rules", type=int, action="append", help="numbers of rules (default 1000, 10000, 100000)")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--large-events", type=int, default=500, help="events at 100,000 rules and more")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per size")
    parser.add_argument("--matcher", default="counting")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--native-only", action="store_true", help="rules without anything-but and exists")
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 rules, 500 events, 2 rounds")
    parser.add_argument("--baseline", help="a checkout of this project (git worktree of an older commit) whose "
                        "json path is timed in the same rounds")
    parser.add_argument("--out", default=str(DOCS / "bench" / "quamina.json"))
    args = parser.parse_args(argv)
    if not args.quamina:
        print("scripts.bench.quamina: no Quamina binary given (--quamina PATH; docs/rules-bench.md says how to "
              "build one): skipped")
        return 0
    import numba

    numba.set_num_threads(1)
    sizes = args.rules or ([1000, 10_000] if args.quick else [1000, 10_000, 100_000])
    n_events = 500 if args.quick else args.events
    rounds = 2 if args.quick else args.rounds
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n_rules in sizes:
            count = min(n_events, args.large_events) if n_rules >= 100_000 else n_events
            raws = make_events(count, args.seed)
            events_path = os.path.join(tmp, f"events-{count}.jsonl")
            Path(events_path).write_bytes(b"\n".join(raws) + b"\n")
            records = make_rules(n_rules, args.seed, args.native_only)
            rules_path = os.path.join(tmp, f"rules-{n_rules}.jsonl")
            Path(rules_path).write_bytes(b"\n".join(map(orjson.dumps, records)) + b"\n")
            repeat = max(1, 2000 // count) if n_rules < 100_000 else 1  # enough events to time
            for r in range(rounds):
                order = ("quamina", "project", *(("baseline",) if args.baseline else ()))
                order = order[r % len(order):] + order[:r % len(order)]
                row: dict = dict(rules=n_rules, events=count, repeat=repeat, round=r, matcher=args.matcher,
                                 native_only=args.native_only)
                for who in order:
                    if who == "quamina":
                        q = run_quamina(args.quamina, rules_path, events_path, os.path.join(tmp, "q.jsonl"), repeat)
                        row["quamina_events_per_cpu_s"] = count * repeat / q["match_cpu_s"]
                        row["quamina_build_s"] = q["build_s"]
                        q_ids = q["ids"]
                    elif who == "baseline":
                        b = run_tree(args.baseline, args.matcher, rules_path, events_path, repeat)
                        row["baseline_events_per_cpu_s"] = b["json_events_per_cpu_s"]
                        row["baseline_build_s"] = b["build_s"]
                        b_ids = b["ids"]
                    else:
                        p = run_tree(DOCS.parent, args.matcher, rules_path, events_path, repeat)
                        p_ids = p.pop("ids")
                        row.update(p)
                disagree = [i for i, (a, b) in enumerate(zip(q_ids, p_ids, strict=True)) if a != b]
                row["ratio_json_to_quamina"] = row["json_events_per_cpu_s"] / row["quamina_events_per_cpu_s"]
                row["ratio_json_to_general"] = row["json_events_per_cpu_s"] / row["general_events_per_cpu_s"]
                if args.baseline:
                    row["events_disagreeing_baseline"] = sum(x != y for x, y in zip(b_ids, p_ids, strict=True))
                    row["ratio_json_to_baseline"] = row["json_events_per_cpu_s"] / row["baseline_events_per_cpu_s"]
                row["matches_per_event"] = sum(map(len, p_ids)) / count
                row["events_disagreeing"] = len(disagree)
                row["disagreeing_rules"] = sorted({x for i in disagree[:50] for x in set(q_ids[i]) ^ set(p_ids[i])})[:20]
                row["load_avg_1min"] = os.getloadavg()[0]
                results.append(row)
                print(json.dumps(row), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(dict(results=results, python=sys.version.split()[0]), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
