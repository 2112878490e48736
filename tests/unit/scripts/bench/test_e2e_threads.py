"""The JVM thread groups of ``scripts.bench.e2e_threads`` and their per-event arithmetic."""

import pytest

from scripts.bench import e2e_threads


def test_thread_names_fall_in_their_groups():
    assert e2e_threads.group("stream executio") == "trigger loop"  # Linux keeps 15 characters
    assert e2e_threads.group("C1 CompilerThre") == e2e_threads.group("C2 CompilerThre") == "JIT"
    assert e2e_threads.group("G1 Conc#0") == e2e_threads.group("GC Thread#1") == "GC"
    assert e2e_threads.group("data-plane-kafk") == "requests"
    assert e2e_threads.group("Executor task l") == "task threads"
    assert e2e_threads.group("process reaper") == "other"


def test_per_event_is_the_difference_per_event_floored_at_zero():
    # a thread of group "other" ended: 1 s of its CPU is the process's, no live thread's
    before = {"jvm": {"JIT": 1.0, "other": 2.0, "process": 3.0}}
    after = {"jvm": {"JIT": 1.5, "other": 1.0, "children": 0.2, "process": 3.6},
             "broker": {"requests": 0.1, "process": 0.1}}
    got = e2e_threads.per_event(before, after, 100_000)
    assert got["jvm"] == pytest.approx({"ended threads": 11.0, "JIT": 5.0, "children": 2.0, "other": 0.0})
    assert list(got["jvm"]) == ["ended threads", "JIT", "children", "other"]  # largest first
    assert got["broker"] == {"requests": 1.0, "ended threads": 0.0}
    assert e2e_threads.line(got) == "broker requests 1.0; jvm ended threads 11.0, JIT 5.0, children 2.0"


def test_a_snapshot_of_a_process_without_java_children_is_empty():
    assert e2e_threads.snapshot() == {}
