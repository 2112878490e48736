"""``python -m streaming status|config`` and the status file."""

from __future__ import annotations

import json

from streaming.__main__ import main
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
