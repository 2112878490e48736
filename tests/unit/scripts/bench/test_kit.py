"""The benchmark kit: runs in children (a value, a served generator, a command), the record, rendering."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from scripts.bench import kit


def _square(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _fail() -> None:
    raise ValueError("no such workload")


def _die() -> None:
    os._exit(3)


def _hang() -> None:
    time.sleep(60)


def _counter(start: int):
    total = start
    while True:
        total += yield total


def test_in_child_returns_the_value_from_another_process() -> None:
    value, pid = kit.in_child(_square, 7)
    assert value == 49 and pid != os.getpid()


@pytest.mark.parametrize(("fn", "message"), [(_fail, "ValueError: no such workload"), (_die, "exit code 3")])
def test_a_child_that_raises_or_dies_is_a_failure_with_its_reason(fn, message: str) -> None:
    with pytest.raises(kit.ChildFailed, match=message):
        kit.in_child(fn, timeout_s=60)


def test_a_child_over_its_time_limit_is_killed() -> None:
    start = time.perf_counter()
    with pytest.raises(kit.ChildFailed, match="no result within 1 s"):
        kit.in_child(_hang, timeout_s=1)
    assert time.perf_counter() - start < 30


def test_a_served_generator_keeps_its_state_between_requests() -> None:
    child = kit.Child(_counter, 10, timeout_s=60)
    try:
        assert child.first == 10
        assert child.ask(5) == 15 and child.ask(1) == 16
    finally:
        child.close()
    assert not child.proc.is_alive()


def test_a_command_reports_its_own_cpu_time_and_its_result_line(tmp_path: Path) -> None:
    spin = "import json, sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n" \
           "print('RESULT ' + json.dumps({'read': sys.stdin.read()}))"
    ran = kit.run([sys.executable, "-c", spin], input="hello", cwd=tmp_path).check()
    assert ran.result_line() == {"read": "hello"} and ran.cpu_s >= 0.25 and ran.wall_s >= ran.cpu_s * 0.5
    assert len(ran.load_avg) == 3 and not ran.timed_out
    with pytest.raises(kit.ChildFailed, match="printed no result"):
        kit.run([sys.executable, "-c", "print('nothing')"]).check().result_line()
    with pytest.raises(kit.ChildFailed, match="exit code 2"):
        kit.run([sys.executable, "-c", "import sys; sys.exit(2)"]).check()
    slow = kit.run([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=0.5)
    assert slow.timed_out and slow.wall_s < 20
    with pytest.raises(kit.ChildFailed, match="timed out"):
        slow.check()


def test_the_process_table_sees_a_child_its_command_and_its_cpu() -> None:
    import subprocess

    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ntime.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", busy])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            procs = kit.processes()
            if child.pid in procs and procs[child.pid].cpu_s >= 0.2:
                break
            time.sleep(0.1)
        assert procs[child.pid].ppid == os.getpid() and "time.sleep(30)" in procs[child.pid].cmd
        assert child.pid in kit.descendants(os.getpid())
        assert kit.tree_cpu_s() >= procs[child.pid].cpu_s
        assert set(kit.tree_cpu_s(by_command=True)) == {"python"}
        assert kit.cpu_by_kind()["other"] >= 0.2  # a Python child that is not Spark's
        assert kit.python_workers(os.getpid()) == []
    finally:
        child.kill()
        child.wait()


_DAEMON = """
import os, signal, sys, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # as Spark's Python daemon: children reaped unwaited for
go = sys.argv[1]
pid = os.fork()
if pid == 0:
    t = time.process_time()
    while time.process_time() - t < 0.3:
        pass
    while not os.path.exists(go):
        time.sleep(0.02)
    os._exit(0)
print(pid, flush=True)
time.sleep(60)
"""


def _until(cond, what: str) -> None:
    deadline = time.monotonic() + 30
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_the_cpu_of_a_child_reaped_unwaited_for_stays_counted(tmp_path: Path) -> None:
    import subprocess

    go = tmp_path / "go"
    daemon = subprocess.Popen([sys.executable, "-c", _DAEMON, str(go)], stdout=subprocess.PIPE, text=True)
    try:
        assert daemon.stdout is not None
        worker = int(daemon.stdout.readline())
        tracker = kit.CpuTracker()
        _until(lambda: kit.processes().get(worker, kit.Proc(0, "", 0.0, 0.0)).cpu_s >= 0.25, "the worker's CPU")
        assert kit.ignores_sigchld(daemon.pid) and not kit.ignores_sigchld(os.getpid())
        seen = tracker.sample()["other"]
        assert seen >= 0.25
        go.touch()
        _until(lambda: worker not in kit.processes(), "the worker's end")
        assert kit.processes()[daemon.pid].reaped_s < 0.25  # the kernel reaped it: nobody's CPU
        assert tracker.sample()["other"] >= seen - 0.01  # its last sample still counted
        assert tracker.gone["other"] >= 0.25
        assert kit.cpu_by_kind()["other"] >= 0.0
    finally:
        go.touch()  # the worker ends even when an assertion failed
        daemon.kill()
        daemon.wait()


def test_a_child_waited_for_is_counted_once_in_its_parent() -> None:
    import subprocess

    tracker = kit.CpuTracker()
    before = tracker.sample()
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\n"
                    "while time.process_time() - t < 0.3: pass"], check=True)
    after = tracker.sample()
    assert tracker.gone["other"] == 0.0  # waited for: in the driver's reaped CPU, not kept twice
    assert after["driver"] - before["driver"] >= 0.25


def test_interleaved_rounds_alternate_the_order() -> None:
    assert [kit.interleaved(["a", "b", "c"], r) for r in range(3)] == [["a", "b", "c"], ["c", "b", "a"],
                                                                        ["a", "b", "c"]]


def test_a_record_is_saved_and_loaded(tmp_path: Path) -> None:
    rec = kit.record({"n_subs": 10}, [{"events_per_s": 1.5}], quick=True)
    assert rec["params"] == {"n_subs": 10} and rec["quick"] and len(rec["load_avg"]) == 3
    assert rec["environment"]["cpus"] == os.cpu_count() and rec["command"].startswith("python -m ")
    path = kit.save("toy-2026", rec, docs=tmp_path)
    assert path == tmp_path / "bench" / "toy-2026.json" and json.loads(path.read_text()) == rec
    kit.save("toy-2027", {"newer": True}, docs=tmp_path)
    assert kit.load("toy-*", docs=tmp_path) == {"newer": True} and kit.load("none", docs=tmp_path) is None


def test_a_section_is_replaced_between_its_markers_and_added_once(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text("# Page\n\nBy hand.\n")
    kit.write_section(doc, "first\n", "<!-- a -->", "<!-- /a -->")
    kit.write_section(doc, "one more", "<!-- b -->", "<!-- /b -->")
    kit.write_section(doc, "second", "<!-- a -->", "<!-- /a -->")
    assert doc.read_text() == ("# Page\n\nBy hand.\n\n<!-- a -->\nsecond\n<!-- /a -->\n\n"
                               "<!-- b -->\none more\n<!-- /b -->\n")


def test_a_table_aligns_its_columns() -> None:
    assert kit.table(["a", "b"], [[1, "x"], [2, "y"]], align="lr") == "| a | b |\n|---|---:|\n| 1 | x |\n| 2 | y |"


def test_a_plot_is_written(tmp_path: Path) -> None:
    kit.plot(tmp_path / "img" / "p.png", {"one": [(1, 2.0), (10, 3.0)], "two": [(1, 1.0)]}, title="t", xlabel="x",
             ylabel="y", logx=True)
    kit.plot(tmp_path / "img" / "b.png", {"one": [("w0", 2.0)], "two": [("w0", 1.0)]}, title="t", xlabel="",
             ylabel="y", bars=True)
    assert (tmp_path / "img" / "p.png").stat().st_size > 1000 and (tmp_path / "img" / "b.png").exists()
