"""Every command of README.md's bash blocks and of ``make demo``, run as a new user would.

The commands are read from README.md and the Makefile, so this test breaks when either
changes without the other still working. They run in a scratch directory (``.venv`` a
link to the project's), against the test broker, with the service (``make run-stream``'s
command, ``python -m streaming run``) as a subprocess; topics, checkpoint, status file
and logs are the test's own through ``PUBSUB_*`` variables.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from streaming.config import PROJECT_ROOT
from streaming.metrics import read_status

pytestmark = pytest.mark.integration

README = PROJECT_ROOT / "README.md"
MAKEFILE = PROJECT_ROOT / "Makefile"
START_S = 600.0  # a Spark start-up and first batch on a loaded 2-core machine
NOTIFY_S = 300.0
NOT_RUN = {"make test"}  # would run this very test again


def readme_commands() -> list[str]:
    """The commands of README.md's bash blocks: continued lines joined, heredocs whole."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        lines = iter(block.splitlines())
        for line in lines:
            if not line.strip():
                continue
            command = line
            while command.endswith("\\"):
                command += "\n" + next(lines)
            heredoc = re.search(r"<<\s*'?(\w+)'?", command)
            if heredoc:
                while (line := next(lines)) != heredoc.group(1):
                    command += "\n" + line
                command += "\n" + line
            commands.append(command)
    return commands


def make_recipe(target: str) -> list[str]:
    """The shell lines of a Makefile target, ``$(PY)`` as the README's ``.venv/bin/python``."""
    text = MAKEFILE.read_text(encoding="utf-8")
    body = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", text, re.M)
    assert body, f"no target {target} in the Makefile"
    return [line.strip().lstrip("@").replace("$(PY)", ".venv/bin/python") for line in body.group(1).splitlines()]


class Service:
    """``python -m streaming run`` in a subprocess, its console in a file."""

    def __init__(self, cwd: Path, env: dict[str, str], bootstrap: str, console: Path) -> None:
        run = [c for c in make_recipe("run-stream") if "-m streaming run" in c]
        assert run == [".venv/bin/python -m streaming run $(ARGS)"], "make run-stream no longer runs the service"
        self.console = console
        self.proc = subprocess.Popen(
            [".venv/bin/python", "-m", "streaming", "--set", f"kafka.bootstrap_servers={bootstrap}", "run"],
            cwd=cwd, env=env, stdout=console.open("wb"), stderr=subprocess.STDOUT)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=180)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=60)


def wait_for(what: str, check: Any, timeout: float, service: Service) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        if service.proc.poll() is not None:
            pytest.fail(f"the service exited ({service.proc.returncode}) waiting for {what}:\n"
                        + service.console.read_text(errors="replace")[-3000:])
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}:\n" + service.console.read_text(errors="replace")[-3000:])


def shell(command: str, cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, f"{command}\nexit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


class Follower:
    """A README ``follow`` command in the background, its output lines collected."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def stop(self) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)  # Ctrl-C, as the README says
        return self.proc.wait(timeout=60)


def registered(checkpoint: Path, pattern_id: str) -> bool:
    """Whether the registry's pattern view (the match query writes it, the patterns query reads it) holds ``pattern_id``."""
    files = sorted((checkpoint / "registry-columns" / "patterns").glob("*.json"))
    return bool(files) and pattern_id in json.loads(files[-1].read_text())["patterns"]


def test_every_readme_command_works(kafka_broker: Any, tmp_path: Path) -> None:
    commands = readme_commands()
    assert {"make run-stream", "make test"} <= {c.split("#")[0].strip() for c in commands}
    work = tmp_path / "clone"
    work.mkdir()
    (work / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    tag = uuid.uuid4().hex[:10]
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "B": kafka_broker.bootstrap_servers,
           "PUBSUB_SPARK_CHECKPOINT_DIR": str(tmp_path / "checkpoint"),
           "PUBSUB_STATUS_STATUS_FILE": str(tmp_path / "status.json"),
           "PUBSUB_STATUS_LOG_DIR": str(tmp_path / "logs"),
           **{f"PUBSUB_KAFKA_{t.upper()}_TOPIC": f"{t}-{tag}"
              for t in ("events", "subscriptions", "notifications", "errors")}}

    for command in make_recipe("demo"):  # make demo's commands (make itself would reinstall)
        done = shell(command, work, env)
    head = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(head) == 3 and all(set(d) == {"event", "subscriptions"} for d in head)
    assert len((work / "var" / "demo" / "matches.jsonl").read_text().splitlines()) == 20000

    service: Service | None = None
    follower: Follower | None = None
    followers: list[Follower] = []
    ran: list[str] = []
    try:
        for command in commands:
            bare = command.split("#")[0].strip()
            if bare in NOT_RUN or bare == "make run-stream":
                continue  # make run-stream: its command is started below, when the README uses it
            if bare.startswith("B="):
                service = Service(work, env, kafka_broker.bootstrap_servers, tmp_path / "service.txt")
                wait_for("the first batch", lambda: (read_status(tmp_path / "status.json") or {}).get("batches"),
                         START_S, service)
                continue
            if "-m scripts.follow" in command:
                follower = Follower(command, work, env)
                followers.append(follower)
            elif "-m streaming status" in command:
                out = shell(command, work, env).stdout
                assert out.startswith("state: running (pid"), out
            else:
                if "-m scripts.publish" in command and service is not None:
                    wait_for("the pattern registered", lambda: registered(tmp_path / "checkpoint", "rising"),
                             START_S, service)
                shell(command, work, env)
            ran.append(bare)

        assert any("scripts.workloads stock" in c for c in ran) and any("matchers match" in c for c in ran)
        subs = (work / "subs.jsonl").read_text().splitlines()
        matches = [json.loads(line) for line in (work / "matches.jsonl").read_text().splitlines()]
        assert len(subs) == 10000 and len(matches) == 20000 and any(m["subscriptions"] for m in matches)

        assert service is not None and follower is not None

        def printed(lines: list[str]) -> bool:
            return any(" ibm <- r1 " in ln for ln in lines) and "pattern rising <- events [r1, r2, r3]" in "\n".join(lines)

        wait_for("the notifications of ibm and rising", lambda: printed(follower.lines), NOTIFY_S, service)
        assert follower.stop() == 0
        # the same command again (the same default group, which has committed): from the beginning again
        again = Follower(next(c for c in commands if "-m scripts.follow" in c), work, env)
        followers.append(again)
        wait_for("the notifications printed again", lambda: printed(again.lines), NOTIFY_S, service)
        assert again.stop() == 0
        assert service.stop() == 0
        service = None
        out = shell(next(c for c in commands if "-m streaming status" in c), work, env).stdout
        assert out.startswith("state: stopped"), out
        console = (tmp_path / "service.txt").read_text(errors="replace")
        assert re.search(r"Spark UI at http://127\.0\.0\.1:\d+", console)
        assert "numba kernels of auto" in console
        assert "falling behind" not in console and "Traceback" not in console
        assert re.search(r"stopped after \d+ batches at registry version \d+", console)
    finally:
        for f in followers:
            if f.proc.poll() is None:
                f.proc.kill()
        if service is not None:
            service.kill()

