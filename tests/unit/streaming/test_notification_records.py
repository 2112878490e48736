"""The bulk records (:func:`notifications.match_records`, :func:`executor.notify`) equal the
per-record specification (:class:`notifications.EventNotes`) byte for byte."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any
from unittest import mock

import numpy as np
import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming import notifications
from streaming.config import LimitsSettings
from streaming.match import executor
from streaming.match.tasks import BatchContext
from streaming.records import DEFAULT_LIMITS, EVENT
from streaming.tenants import SEP, TARGET, Tenants

_BUILD_ERRORS = (TypeError, ValueError, OverflowError, UnicodeError, RecursionError)


def _deep(n: int) -> Any:
    v: Any = 1
    for _ in range(n):
        v = [v]
    return v


def reference(events: notifications.EventColumns, bounds: list[int], sub_ids: list[str], which: list[int],
              matched_ms: int, batch_id: int, room: int, tags: list[Any], retro: bool) -> tuple[list, list, list, list]:
    """What :func:`match_records` appends and returns, record by record with :class:`EventNotes`."""
    keys: list[bytes] = []
    values: list[bytes] = []
    out_tags: list[Any] = []
    failures = []
    for j in range(len(bounds) - 1):
        lo, hi = bounds[j], bounds[j + 1]
        if lo == hi:
            continue
        try:
            notes = notifications.EventNotes(events.topics[j], events.partitions[j], events.offsets[j],
                                             events.event_ids[j], None if events.raws is None else events.raws[j],
                                             events.event_ms[j], matched_ms, batch_id, retro)
        except _BUILD_ERRORS as exc:
            failures.append((j, f"cannot build its notification: {type(exc).__name__}: {exc}"))
            continue
        try:
            notes.add_records([sub_ids[w] for w in which[lo:hi]], room, keys, values)
        except notifications.NotificationTooLarge as exc:
            failures.append((j, str(exc)))
            continue
        out_tags += [tags[w] for w in which[lo:hi]]
    return keys, values, out_tags, failures


def bulk(*args: Any) -> tuple[list, list, list, list]:
    events, bounds, sub_ids, which, matched_ms, batch_id, room, tags, retro = args
    out: tuple[list, list, list] = ([], [], [])
    failures = notifications.match_records(events, bounds, sub_ids, which, matched_ms, batch_id, room, out, tags,
                                           retro=retro)
    return (*out, failures)


_TEXT = st.text(max_size=12) | st.text(st.sampled_from('a"\\\n\x00\x1f\u00e9\u2028\U0001f600/|:'), max_size=8)
_SUB = _TEXT.filter(bool) | st.builds(lambda n, c: c * n, st.integers(100, 1500), st.sampled_from("x\u00e9\"\n"))
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1)
                     | st.floats(allow_nan=False, allow_infinity=False) | _TEXT,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3), max_leaves=6)
_EVENT_ID = (_TEXT | _JSON | st.builds(lambda n: "e" * n, st.integers(50, 1500))
             | st.sampled_from([_deep(252), _deep(253), _deep(254), _deep(300), 2**64, -2**63 - 1, "x\ud800", ["\udfff"]]))
_EVENT = st.tuples(
    st.sampled_from(["events", "ev.t-1", "\u00e9v\ud800"]), st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1),
    _EVENT_ID, st.none() | st.integers(0, 2**50),
    st.builds(lambda pad, body: orjson.dumps({"pad": "p" * pad, "b": body}), st.integers(0, 1200), _JSON),
    st.lists(st.integers(0, 5), min_size=0, max_size=4))


@st.composite
def _cases(draw: Any) -> tuple:
    sub_ids = draw(st.lists(_SUB, min_size=1, max_size=6, unique=True))
    events = draw(st.lists(_EVENT, min_size=0, max_size=6))
    with_event = draw(st.booleans())
    bounds, which = [0], []
    for *_, picks in events:
        which += sorted({p % len(sub_ids) for p in picks})
        bounds.append(len(which))
    cols = notifications.EventColumns([e[0] for e in events], [e[1] for e in events], [e[2] for e in events],
                                      [e[3] for e in events], [b" " + e[5] + b"\n" for e in events] if with_event else None,
                                      [e[4] for e in events])
    tags = [draw(st.sampled_from(["notifications", "n.t1", "x"])) for _ in sub_ids]
    return (cols, bounds, sub_ids, which, draw(st.integers(0, 2**50)), draw(st.integers(0, 2**31)),
            draw(st.integers(150, 3000)), tags, draw(st.booleans()))


@settings(max_examples=400, deadline=None)
@given(_cases())
def test_bulk_records_equal_the_reference(case):
    assert bulk(*case) == reference(*case)


def _fixed_case(rng: random.Random) -> tuple:
    n_subs, n_events = rng.randint(1, 40), rng.randint(1, 60)
    sub_ids = list({rng.choice(["s", "sub-\u00e9", 'q"', "t\\", "\u2028", "x" * rng.randint(1, 900)]) + str(k)
                    for k in range(n_subs)})
    bounds, which, evs = [0], [], []
    for i in range(n_events):
        which += sorted(rng.sample(range(len(sub_ids)), rng.randint(0, min(4, len(sub_ids)))))
        bounds.append(len(which))
        eid = rng.choice([f"e{i}", i, None, 1.5, {"a": [i]}, "\u00e9" * rng.randint(0, 800), _deep(254), 2**64])
        evs.append(("events", rng.randint(0, 9), i * 1000, eid, rng.choice([None, 17]),
                    orjson.dumps({"id": i, "pad": "p" * rng.randint(0, 1500)})))
    cols = notifications.EventColumns([e[0] for e in evs], [e[1] for e in evs], [e[2] for e in evs],
                                      [e[3] for e in evs], [e[5] for e in evs], [e[4] for e in evs])
    return (cols, bounds, sub_ids, which, 1_700_000_000_000, rng.randint(0, 99), rng.choice([400, 1200, 2500, 10**6]),
            list(range(len(sub_ids))), rng.random() < 0.3)


@pytest.mark.parametrize("seed", range(40))
def test_bulk_records_equal_the_reference_on_fixed_seeds(seed):
    case = _fixed_case(random.Random(seed))
    assert bulk(*case) == reference(*case)
    slim = case[0]._replace(raws=None)
    assert bulk(slim, *case[1:]) == reference(slim, *case[1:])


def test_the_fallbacks_are_exercised():
    """The cases above reach the id-only form, the too-large error and the unbuildable event."""
    events = notifications.EventColumns(["events"] * 3, [0] * 3, [1, 2, 3], ["e" * 600, "small", _deep(300)],
                                        [b'{"x":"' + b"y" * 900 + b'"}'] * 3, [None] * 3)
    keys, values, tags, failures = bulk(events, [0, 1, 2, 3], ["s"], [0, 0, 0], 5, 6, 700, ["t"], False)
    assert [j for j, _ in failures] == [0, 2] and "even without the event" in failures[0][1]
    assert failures[1][1].startswith("cannot build its notification: ")
    assert orjson.loads(values[0])["note"].startswith("sent without the event") and tags == ["t"]
    assert (keys, values, tags, failures) == reference(events, [0, 1, 2, 3], ["s"], [0, 0, 0], 5, 6, 700, ["t"], False)


# -- executor.notify against the record-by-record loop it replaced -------------------------------------
def _reference_notify(p: executor.PreparedBatch, kept: list, result: Any, id_of: Any, ctx: BatchContext,
                      out: executor.Out, rejected: list, valid: list) -> int:
    notes_topic, room = ctx.notifications_topic, ctx.limits.message_bytes - notifications.RECORD_OVERHEAD
    res_off, dropped = result.offsets.tolist(), 0
    for j, (i, event_id, obj) in enumerate(kept):
        event_id = f"{p.topics[i]}/{p.parts[i]}/{p.offsets[i]}" if event_id is None else event_id
        ms = None if p.stamps[i] is None else p.stamps[i] // 1000
        lo, hi = res_off[j], res_off[j + 1]
        if lo < hi:
            reason = None
            try:
                notes = notifications.EventNotes(p.topics[i], p.parts[i], p.offsets[i], event_id,
                                                 p.values[i] if ctx.payload == "event" else None, ms, 1_234_567,
                                                 ctx.batch_id)
                ids = list(map(id_of, result.keys[lo:hi].tolist()))
                routed = [(notes_topic, s) for s in ids] if ctx.tenants is None else list(map(ctx.tenants.route, ids))
                notes.add_records([s for _, s in routed], room, out.keys, out.values)
                out.topics.extend(t for t, _ in routed)
            except _BUILD_ERRORS as exc:  # NotificationTooLarge among them
                reason = str(exc) if isinstance(exc, notifications.NotificationTooLarge) else \
                    f"cannot build its notification: {type(exc).__name__}: {exc}"
            if reason is not None:
                rejected.append((EVENT, i, reason))
                dropped += 1
                continue
        if ctx.valid_until_field in obj:
            valid.append((i, event_id, ms))
    return dropped


@pytest.mark.parametrize("tenanted", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_notify_equals_the_per_record_loop(seed, tenanted):
    rng = random.Random(seed)
    tenants = Tenants(("t1", "t2"), "subs", "notes", "errs", {}) if tenanted else None
    ids = [rng.choice(["a", f"t1{SEP}", f"t2{TARGET}out.t2{SEP}", SEP]) + rng.choice(["s", "\u00e9", "x" * 2000]) + str(k)
           for k in range(30)]
    if not tenanted:
        ids = [s.replace(SEP, "_") for s in ids]
    n = rng.randint(1, 80)
    values = [orjson.dumps({"id": f"e{i}", "pad": "p" * rng.randint(0, 3000), "valid_until": 1}) for i in range(n)]
    rb = pa.RecordBatch.from_pydict({"value": values, "topic": ["events"] * n, "partition": [rng.randint(0, 3)] * n,
                                     "offset": list(range(n)),
                                     "timestamp": pa.array([rng.choice([None, 1_700_000_000_000_123]) for _ in range(n)],
                                                           pa.timestamp("us"))})
    limits = LimitsSettings(message_bytes=rng.choice([3_000, 4_000, DEFAULT_LIMITS.message_bytes]))
    p = executor.PreparedBatch(rb, limits)
    kept = [(i, rng.choice([None, f"e{i}", "\u00e9" * 3000, _deep(300)]), rng.choice([{}, {"valid_until": 2e9}]))
            for i in sorted(rng.sample(range(n), rng.randint(1, n)))]
    keys = [sorted(rng.sample(range(len(ids)), rng.randint(0, 3))) for _ in kept]
    result = SimpleNamespace(offsets=np.cumsum([0] + [len(k) for k in keys]), keys=np.array(sum(keys, []), dtype=np.int64))
    ctx = BatchContext(3, 1e9, None, "notes", "errs", rng.choice(["event", "id"]), "id", "valid_until", 1e9,
                       None, limits, tenants)
    got_out, got_rejected, got_valid = executor.Out([], [], [], []), [], []
    with mock.patch("time.time", return_value=1234.567):
        got = executor.notify(p, kept, result, SimpleNamespace(ids_of=lambda k: list(map(ids.__getitem__, k.tolist()))), ctx, got_out, got_rejected,
                              got_valid)
    want_out, want_rejected, want_valid = executor.Out([], [], [], []), [], []
    want = _reference_notify(p, kept, result, ids.__getitem__, ctx, want_out, want_rejected, want_valid)
    sent = [(r["key"], r["value"], r["topic"]) for b in got_out.notes for r in b.to_pylist()]  # notify's: Arrow batches
    want_sent = list(zip(want_out.keys, want_out.values, want_out.topics, strict=True))
    assert (got, sent, got_rejected) == (want, want_sent, want_rejected)
    assert not got_out.keys and not got_out.values and not got_out.topics
    assert [(p.offsets.index(v.offset), v.event_id, v.timestamp_ms) for v in got_valid] == want_valid


# -- the kernel's hash inputs across BLAKE2b's 128-byte blocks ------------------------------------------
_BLOCKY = st.builds(lambda n, c, tail: c * n + tail, st.integers(40, 150), st.sampled_from("a\u00e9\"\\\n\U0001f600"),
                    _TEXT)


@settings(max_examples=200, deadline=None)
@given(st.lists(_BLOCKY, min_size=1, max_size=5, unique=True), st.lists(_EVENT, min_size=1, max_size=4),
       st.booleans(), st.integers(150, 3000), st.booleans())
def test_bulk_records_with_ids_around_the_hash_blocks(sub_ids, events, with_event, room, retro):
    """Ids of 40 to 600 UTF-8 bytes (their hash input one to five blocks), escapes and
    astral characters, either payload, records past ``room``: the same records as the reference."""
    bounds, which = [0], []
    for *_, picks in events:
        which += sorted({p % len(sub_ids) for p in picks} | {0})
        bounds.append(len(which))
    cols = notifications.EventColumns([e[0] for e in events], [e[1] for e in events], [e[2] for e in events],
                                      [e[3] for e in events], [e[5] for e in events] if with_event else None,
                                      [e[4] for e in events])
    case = (cols, bounds, sub_ids, which, 1_700_000_000_000, 7, room, list(range(len(sub_ids))), retro)
    assert bulk(*case) == reference(*case)


@pytest.mark.parametrize("cap", [1, 50, 120, 10**9])
def test_notes_batches_split_where_the_values_pass_the_cap(cap):
    """The records' batches hold every record once, in order, with its key and topic; a new batch
    starts where the values would pass the cap (2 GiB in the service), one record at least each."""
    from streaming.match import tasks
    from streaming.notes_kernel import pack

    values = [b"v" * n for n in (0, 7, 60, 3, 0, 115, 1, 49)]
    subs = np.array([2, 0, 1, 1, 2, 0, 0, 2], dtype=np.int64)
    with mock.patch.object(tasks, "_MAX_BINARY", cap):
        batches = tasks.notes_batches(pack(values), subs, [b"a", b"b", b"c"], ["ta", "tb", "tc"])
    rows = [(r["key"], r["value"], r["topic"]) for b in batches for r in b.to_pylist()]
    assert rows == [([b"a", b"b", b"c"][s], v, ["ta", "tb", "tc"][s]) for s, v in zip(subs.tolist(), values, strict=True)]
    assert all(b.schema == tasks.OUT_SCHEMA and b.num_rows >= 1 for b in batches)
    assert all(sum(map(len, b.column("value").to_pylist())) <= max(cap, 115) for b in batches)
    assert len(batches) == (1 if cap == 10**9 else len(batches)) and (cap >= 234 or len(batches) > 1)
    assert tasks.notes_batches(pack([]), subs[:0], [b"a"], ["t"]) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 30), max_size=6), max_size=12))
def test_matched_gives_arrays_equal_to_the_per_event_lists(per_event):
    """:func:`notifications.matched`'s ``int64`` arrays hold what the lists of the per-event
    grouping it replaced held (events with matches, their bounds, each key once), and
    :func:`build_records` builds the same records from them as from those lists."""
    offsets = np.concatenate([[0], np.cumsum([len(k) for k in per_event])]).astype(np.int64)
    keys = np.array([k for ks in per_event for k in ks], dtype=np.int32)
    m = notifications.matched(offsets, keys, lambda unique: [f"s{k}" for k in unique.tolist()])
    hits = [i for i, ks in enumerate(per_event) if ks]
    bounds = [int(offsets[i]) for i in hits] + [int(offsets[-1])]
    assert all(a.dtype == np.int64 for a in (m.hits, m.bounds, m.which))
    assert m.hits.tolist() == hits and m.bounds.tolist() == bounds
    assert m.ids == [f"s{k}" for k in sorted(set(keys.tolist()))]
    assert [m.ids[w] for w in m.which.tolist()] == [f"s{k}" for k in keys.tolist()]
    events = notifications.EventColumns(["t"] * len(hits), [0] * len(hits), hits, [f"e{i}" for i in hits],
                                        [b'{"a":%d}' % i for i in hits], [7] * len(hits))
    as_arrays = notifications.build_records(events, m.bounds, m.ids, m.which, 5, 1, 10_000)
    as_lists = notifications.build_records(events, bounds, m.ids, m.which.tolist(), 5, 1, 10_000)
    assert as_arrays.values.data.tobytes() == as_lists.values.data.tobytes()
    assert as_arrays.values.bounds.tolist() == as_lists.values.bounds.tolist()
    assert as_arrays.subs.tolist() == as_lists.subs.tolist() and as_arrays.failures == as_lists.failures
