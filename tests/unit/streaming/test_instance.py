"""The directory lock, children that die with their parent, and the record of stale ones."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streaming.__main__ import checkpoint_lock, data_loss_message, main, reset_checkpoint
from streaming.config import Settings
from streaming.instance import DirLock, InUseError, PidRecord, free_ports, spawn, start_time


def gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while start_time(pid) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_lock_refuses_a_second_holder_until_released(tmp_path: Path):
    path = tmp_path / "d" / "lock"
    with DirLock(path, "the thing"):
        assert path.read_text().strip() == str(os.getpid())
        other = subprocess.run(
            [sys.executable, "-c", f"from streaming.instance import DirLock; DirLock({str(path)!r}, 'the thing').acquire()"],
            capture_output=True, text=True, check=False)
        assert other.returncode == 1
        assert f"the thing is in use by another running instance (pid {os.getpid()}" in other.stderr
    DirLock(path, "the thing").acquire().release()  # free again


def test_lock_of_a_killed_holder_is_free(tmp_path: Path):
    path = tmp_path / "lock"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from streaming.instance import DirLock; "
                               f"DirLock({str(path)!r}, 'x').acquire(); print('held', flush=True); time.sleep(600)"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with pytest.raises(InUseError, match=f"pid {holder.pid}"):
        DirLock(path, "x").acquire()
    holder.kill()
    holder.wait()
    DirLock(path, "x").acquire().release()


def test_spawned_child_dies_with_its_parent_even_by_sigkill(tmp_path: Path):
    code = ("import sys, time; from streaming.instance import spawn; "
            "p = spawn(['sleep', '600'], sys.stderr.buffer); print(p.pid, flush=True); time.sleep(600)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert start_time(child) is not None and os.getsid(child) == child  # its own session
    parent.kill()
    parent.wait()
    assert gone(child)


def test_pid_record_ends_only_its_own_live_children(tmp_path: Path):
    record = PidRecord(tmp_path / "pids")
    with open(os.devnull, "wb") as log:
        child = spawn(["sleep", "600"], log)
    record.add("sleeper", child.pid)
    exited = subprocess.Popen(["true"])
    exited.wait()
    record.add("exited", exited.pid)  # gone before it is recorded: skipped
    assert record.alive() == {"sleeper": child.pid}
    doc = record.read()
    doc["reused"] = (os.getpid(), (start_time(os.getpid()) or 0) + 1)  # a pid now used by another process
    record.path.write_text(json.dumps(doc))
    assert record.alive() == {"sleeper": child.pid}
    assert record.end_stale() == [child.pid]
    assert child.wait(10) == -signal.SIGKILL
    assert not record.path.exists() and record.alive() == {}


def test_reset_moves_the_checkpoint_aside(tmp_path: Path):
    settings = Settings().replace(spark={"checkpoint_dir": str(tmp_path / "ckpt")})
    assert reset_checkpoint(settings) is None
    (tmp_path / "ckpt" / "registry").mkdir(parents=True)
    aside = reset_checkpoint(settings)
    assert aside is not None and aside.name.startswith("ckpt.reset-") and (aside / "registry").is_dir()
    assert not (tmp_path / "ckpt").exists()


def test_second_run_on_a_checkpoint_is_refused(tmp_path: Path, capsys):
    ckpt = tmp_path / "ckpt"
    settings = Settings().replace(spark={"checkpoint_dir": str(ckpt)})
    with checkpoint_lock(settings):
        assert main(["--set", f"spark.checkpoint_dir={ckpt}", "run", "--reset"]) == 3
    err = capsys.readouterr().err
    assert f"not started: the checkpoint {ckpt} is in use by another running instance" in err
    assert not list(tmp_path.glob("ckpt.reset-*"))  # nothing moved while another one runs


def test_data_loss_message_says_what_happened_and_what_to_do():
    failure = ("match: [STREAM_FAILED] ... streaming.kafka.errors.DataLossError: events-0: the log ends at 0 "
               "but the query has read up to 32 (topic deleted and recreated?); set failOnDataLoss=false to ...\n")
    said = data_loss_message(Settings(), failure)
    assert said is not None
    assert "events-0: the log ends at 0 but the query has read up to 32" in said and "failOnDataLoss" not in said
    assert "data directory var/broker was removed" in said and "python -m streaming run --reset" in said
    external = Settings().replace(kafka={"bootstrap_servers": "h:9092"})
    assert "the broker lost its data" in data_loss_message(external, failure)
    assert data_loss_message(Settings(), "match: FetchTimeoutError: no progress") is None


def test_data_loss_of_sparks_connector_is_told_the_same_way():
    failure = ("Some data may have been lost because they are not available in Kafka any more;\neither the data "
               "was aged out by Kafka or the topic may have been deleted before all the data in the\ntopic was "
               "processed.\nIf you don't want your streaming query to fail on such cases, set the source option "
               "failOnDataLoss to false.\nReason: Partition subscriptions-0 offset was changed from 30 to 0.\n"
               "This could be either 1) a user error ...\n=== Streaming Query ===\n")  # as the query raised it
    said = data_loss_message(Settings(), failure)
    assert said is not None
    assert "(Partition subscriptions-0 offset was changed from 30 to 0.)" in said and "failOnDataLoss" not in said
    assert "python -m streaming run --reset" in said


def test_free_ports_are_all_different_and_avoid_the_taken_ones():
    taken = set(free_ports(3))
    for _ in range(50):
        ports = free_ports(6, taken=taken)
        assert len(set(ports)) == 6 and not set(ports) & taken
