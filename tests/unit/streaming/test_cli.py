"""``python -m streaming status|config`` and the status file."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

import pytest

from streaming.__main__ import first_line, main, parse_args
from streaming.config import PROJECT_ROOT
from streaming.instance import start_time
from streaming.metrics import BatchMetrics, StatusFile, read_status


def test_status_file_keeps_history_and_totals(tmp_path):
    status = StatusFile(tmp_path / "s.json", history=2)
    for b in range(3):
        status.write("running", BatchMetrics(batch_id=b, events=10, matches=b), registry={"version": b})
    doc = read_status(tmp_path / "s.json")
    assert [r["batch_id"] for r in doc["batches"]] == [1, 2]
    assert doc["totals"]["events"] == 30 and doc["totals"]["batches"] == 3
    assert doc["last_batch"]["batch_id"] == 2 and doc["registry"] == {"version": 2}
    assert "batch=2" in BatchMetrics(**doc["last_batch"]).log_line()


def test_status_and_config_commands(tmp_path, capsys):
    path = tmp_path / "status.json"
    assert main(["--set", f"status.status_file={path}", "status"]) == 1
    StatusFile(path).write("running", BatchMetrics(batch_id=4, events=7), registry={"version": 3, "subscriptions": 9})
    assert main(["--set", f"status.status_file={path}", "status"]) == 0
    out = capsys.readouterr().out
    assert "state: running" in out and "version 3, 9 subscriptions" in out and "batch=4" in out
    assert main(["--set", f"status.status_file={path}", "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "running"
    assert main(["--set", "kafka.client.sasl_plain_password=hunter2", "config"]) == 0
    out = capsys.readouterr().out
    assert "hunter2" not in out and json.loads(out)["kafka"]["client"]["sasl_plain_password"] == "***"
    assert main(["--set", "match.max_terms=zero", "config"]) == 2


def test_status_shows_the_index_and_why_auto_chose_it(tmp_path, capsys):
    path = tmp_path / "status.json"
    index = [{"matcher": "bitmark", "chosen_by": "auto", "reason": "dense interval conjunctions",
              "shape": {"subscriptions": 9}}]
    StatusFile(path).write("running", BatchMetrics(batch_id=4, events=7), index=index)
    code, out = _status(path, capsys)
    assert code == 0 and "index: bitmark (chosen by auto: dense interval conjunctions)" in out
    assert "decided on events" not in out  # none seen at that decision
    index[0]["events"] = {"events": 980.4, "attributes": 20.0, "coverage": 0.95, "rows": 1.0, "matches": 12.5}
    StatusFile(path).write("running", BatchMetrics(batch_id=4, events=7), index=index)
    assert ("  decided on events: 20 attributes (95% of the constrained ones), 1 rows, 12.5 matches per event "
            "(about 980 recent)") in _status(path, capsys)[1]
    StatusFile(path).write("running", BatchMetrics(batch_id=5, events=7), index=[{"matcher": "counting"}])
    assert "index: counting\n" in _status(path, capsys)[1]
    code, out = _status(path, capsys, "--json")
    assert json.loads(out)["index"] == [{"matcher": "counting"}]


def test_status_shows_where_the_shards_are(tmp_path, capsys):
    path = tmp_path / "status.json"
    shards = {"pinned": True, "anchorings": 2, "executors": 2,
              "groups": [{"shards": [0, 2], "anchor": "h/a"}, {"shards": [1], "anchor": "h/b"}],
              "placement": {"0": {"h/a": 5}, "1": {"h/b": 5}, "2": {"h/a": 4, "h/c": 1}}}
    StatusFile(path).write("running", BatchMetrics(batch_id=4, events=7), shards=shards)
    out = _status(path, capsys)[1]
    assert "shards: 2 group(s) pinned for 2 executor(s) (placed 2 times)" in out
    assert "  group [0, 2]: anchored on h/a" in out and "  shard 2 matched on h/a (4 tasks), h/c (1 tasks)" in out
    StatusFile(path).write("running", BatchMetrics(batch_id=5, events=7),
                           shards={"pinned": False, "placement": {"0": {"h/a": 1}}})
    assert "shards: not pinned (a local master)\n  shard 0 matched on h/a (1 tasks)" in _status(path, capsys)[1]


def _status(path, capsys, *extra):
    code = main(["status", "--status-file", str(path), *extra])
    return code, capsys.readouterr().out


def test_settings_options_go_before_or_after_the_command(tmp_path, capsys):
    args = parse_args(["--set", "match.shards=2", "run", "--set", "match.matcher=counting", "--reset"])
    assert args.overrides == ["match.shards=2", "match.matcher=counting"] and args.reset and args.config is None
    assert parse_args(["status", "--config", "x.toml"]).config.name == "x.toml"
    path = tmp_path / "status.json"
    StatusFile(path).write("running", BatchMetrics(batch_id=1, events=2))
    assert main(["status", "--set", f"status.status_file={path}"]) == 0  # as `make run-stream ARGS=...` passes it
    assert "state: running" in capsys.readouterr().out


def test_status_reports_a_killed_process_as_dead(tmp_path, capsys):
    path = tmp_path / "status.json"
    code = f"import time; from streaming.metrics import StatusFile; StatusFile({str(path)!r}).write('running'); time.sleep(600)"
    writer = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    try:
        deadline = time.monotonic() + 120
        while read_status(path) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        code, out = _status(path, capsys)
        assert code == 0 and out.startswith(f"state: running (pid {writer.pid},")
    finally:
        writer.kill()
        writer.wait()
    code, out = _status(path, capsys)
    assert code == 1 and out.startswith(f"state: dead (was running; pid {writer.pid} is gone")
    doc = read_status(path)
    doc["pid"], doc["pid_started"] = os.getpid(), 0  # the pid alive again, but another program's
    path.write_text(json.dumps(doc))
    code, out = _status(path, capsys, "--json")
    assert code == 1 and json.loads(out)["state"] == "dead" and json.loads(out)["last_state"] == "running"


def test_status_of_failed_and_stopped_jobs(tmp_path, capsys):
    path = tmp_path / "status.json"
    StatusFile(path).write("failed", error="query match failed: boom")
    code, out = _status(path, capsys)
    assert code == 1 and "state: failed" in out and "error: query match failed: boom" in out
    StatusFile(path).write("stopped")
    assert _status(path, capsys)[0] == 0
    assert read_status(path)["pid_started"] == start_time(os.getpid())


@pytest.fixture
def restore_logging():
    """``main`` configures the root logger; put pytest's back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:], root.level = handlers, level


def test_run_that_cannot_start_says_failed(tmp_path, capsys, restore_logging):
    path, taken = tmp_path / "status.json", tmp_path / "a-file"
    taken.write_text("")  # the embedded broker's data directory cannot be made here
    code = main(["--set", f"status.status_file={path}", "--set", f"status.log_dir={tmp_path / 'logs'}",
                 "--set", f"kafka.embedded_data_dir={taken}", "--set", f"spark.checkpoint_dir={tmp_path / 'ckpt'}",
                 "run"])
    assert code == 1
    doc = read_status(path)
    assert doc["state"] == "failed" and doc["error"].startswith("start-up failed: [Errno 17] File exists")
    err = capsys.readouterr().err
    failed = [line for line in err.splitlines() if "start-up failed" in line]  # one line, the trace in the log
    assert len(failed) == 1 and "[Errno 17] File exists" in failed[0] and "service.log" in failed[0]
    assert "Traceback" not in err
    trace = (tmp_path / "logs" / "service.log").read_text()
    assert "Traceback (most recent call last)" in trace and "FileExistsError" in trace


def test_bad_settings_are_refused_before_anything_starts(tmp_path, capsys):
    for setting, says in (("match.matcher=nope", "match.matcher: matcher 'nope' is not a registered matcher"),
                          ("spark.checkpoint_dir=nosuch://x/ckpt", "spark.checkpoint_dir: no file system")):
        assert main(["--set", f"status.status_file={tmp_path / 's.json'}", "--set", setting, "run"]) == 2
        assert capsys.readouterr().err.startswith(f"configuration error: {says}")
    assert not (tmp_path / "s.json").exists()


def test_first_line_names_the_python_error_inside_a_spark_failure():
    exc = RuntimeError("[STREAM_FAILED] Query [id = 1] terminated with exception: Job aborted\n"
                       "  at org.apache.spark...\nTraceback (most recent call last):\n  File \"x.py\", line 1\n"
                       "ValueError: bad batch\n  at more.java")
    assert first_line(exc) == ("[STREAM_FAILED] Query [id = 1] terminated with exception: Job aborted "
                               "(cause: ValueError: bad batch)")
    java = RuntimeError("An error occurred while calling o73.start.\n: org.apache.spark.SparkException: No listener.\n"
                        "\tat org.apache.spark.X(X.scala:1)\nCaused by: java.lang.ClassNotFoundException: no.Such\n\tat y")
    assert first_line(java) == ("org.apache.spark.SparkException: No listener. "
                                "(cause: java.lang.ClassNotFoundException: no.Such)")


def test_a_closed_pipe_ends_a_command_quietly():
    """``python -m streaming status | head`` must not end with a BrokenPipeError trace."""
    code = "from streaming.cli import exit_with; exit_with(lambda: print('x\\n' * 200000) or 0)"
    run = subprocess.run(
        ["bash", "-c", f'{sys.executable} -c "{code}" | head -c 1 >/dev/null; echo "${{PIPESTATUS[0]}}"'],
        capture_output=True, text=True, timeout=60, check=True, cwd=PROJECT_ROOT)
    assert run.stderr == ""
    assert run.stdout.strip() == "1"
