"""The benchmark kit: what every benchmark of this package shares, and nothing else.

* **Isolation**: :class:`Child` runs a function in a forked, single-threaded process
  (:func:`in_child` for one value, a generator for a process that builds once and then
  answers requests); :func:`start` runs a command (another interpreter, a peer binary,
  this project in another code tree) and its :meth:`Started.wait` reports the child's own
  CPU time (``wait4``), wall time and the load average; :func:`in_trees` runs a bench
  module over several code trees in interleaved rounds.
* **Record**: :func:`record` is one result (workload parameters, the figures, the load
  average and the environment), :func:`save` writes it to ``docs/bench/<name>.json``.
* **Rendering**: :func:`table` (markdown), :func:`plot` (lines or bars, PNG) and
  :func:`write_section` (the generated part of a page between two markers).

A benchmark module is a sweep (records from a grid of workload parameters) and a render
(a record to markdown), declared in :mod:`scripts.bench.suite`; it imports this module and
the library, never another benchmark.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import platform
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


# -- the machine -------------------------------------------------------------------------------
def one_thread() -> None:
    """Limit numba to one thread, so that a run uses one core at a time.

    The process is not pinned to a CPU: on a machine shared with other jobs pinning stops
    the scheduler from moving the run to the idler core and inflates wall times.
    """
    try:
        import numba

        numba.set_num_threads(1)
    except (ImportError, ValueError):
        pass


def best_cpu(rounds: int, fn: Callable[[], object]) -> float:
    """The least CPU seconds of this process (``time.process_time``) that ``fn()`` took in ``rounds`` calls."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def load_avg() -> list[float]:
    """The machine's 1, 5 and 15-minute load averages, rounded (the machine is shared)."""
    return [round(x, 2) for x in os.getloadavg()]


def environment() -> dict[str, Any]:
    """Versions and machine of a record."""
    import numba
    import numpy

    return dict(python=platform.python_version(), numpy=numpy.__version__, numba=numba.__version__,
                machine=platform.machine(), processor=platform.processor() or platform.machine(),
                cpus=os.cpu_count(), one_core=True, load_avg=load_avg())


# -- a function in a forked child ---------------------------------------------------------------
class ChildFailed(RuntimeError):
    """A child raised, died or did not answer in time; the message says which."""


def _child_main(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    one_thread()
    try:
        got = fn(*args)
        if isinstance(got, Generator):
            request = None
            while True:
                conn.send(("ok", got.send(request)))
                request = conn.recv()
                if request is StopIteration:
                    break
        else:
            conn.send(("ok", got))
    except StopIteration:
        pass
    except BaseException as exc:  # reported to the parent, which decides
        conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"))
    finally:
        conn.close()


class Child:
    """``fn(*args)`` in a forked process with numba on one thread: a crash or a hang of the
    run cannot take the benchmark down, and one run's memory or compiled code does not
    leak into the next.

    :attr:`first` is what ``fn`` returned or, for a generator, its first ``yield``;
    :meth:`ask` sends a value into the generator and returns what it yields next. Each
    answer must come within ``timeout_s`` (``None``: no limit), else the child is killed
    and :class:`ChildFailed` raised.
    """

    def __init__(self, fn: Callable[..., Any], *args: Any, timeout_s: float | None = None) -> None:
        ctx = mp.get_context("fork")
        self.timeout_s = timeout_s
        self.conn, theirs = ctx.Pipe()
        self.proc = ctx.Process(target=_child_main, args=(theirs, fn, args))
        self.started = time.perf_counter()
        self.proc.start()
        theirs.close()
        self.first = self._answer()

    def _answer(self) -> Any:
        try:
            if not self.conn.poll(self.timeout_s):
                raise ChildFailed(f"skipped: no result within {self.timeout_s:.0f} s (killed)")
            status, payload = self.conn.recv()
        except EOFError:
            self.proc.join(5)
            status, payload = "error", f"child died (exit code {self.proc.exitcode})"
        except ChildFailed:
            self.close()
            raise
        if status != "ok":
            self.close()
            raise ChildFailed(str(payload).strip())
        return payload

    def ask(self, request: Any) -> Any:
        """Send ``request`` to the child's generator; what it yields next."""
        self.conn.send(request)
        return self._answer()

    def close(self) -> None:
        """Stop the child (at once if it does not stop by itself)."""
        if self.proc.is_alive():
            try:
                self.conn.send(StopIteration)
            except OSError:
                pass
            self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()


def in_child(fn: Callable[..., Any], *args: Any, timeout_s: float | None = None) -> Any:
    """``fn(*args)`` run in a :class:`Child`; its value (:class:`ChildFailed` if none came)."""
    child = Child(fn, *args, timeout_s=timeout_s)
    child.close()
    return child.first


# -- a command in a child process ------------------------------------------------------------------
class MatchClock:
    """Matching timed batch by batch: the CPU and wall seconds, events and matches so far."""

    def __init__(self) -> None:
        self.cpu_s = self.wall_s = 0.0
        self.events = self.matches = 0

    def match(self, matcher: Any, batch: Any) -> Any:
        """``matcher.match(batch)``, timed and counted."""
        c0, t0 = time.process_time(), time.perf_counter()
        result = matcher.match(batch)
        self.cpu_s += time.process_time() - c0
        self.wall_s += time.perf_counter() - t0
        self.events += batch.n
        self.matches += result.total
        return result


@dataclass
class Ran:
    """How a command ended."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    cpu_s: float
    """User and system CPU time of the child and its threads (``wait4``)."""
    wall_s: float
    load_avg: list[float]
    timed_out: bool = False

    def check(self) -> Ran:
        """This run, or :class:`ChildFailed` with the end of its stderr if it failed."""
        if self.returncode != 0 or self.timed_out:
            why = "timed out" if self.timed_out else f"exit code {self.returncode}"
            raise ChildFailed(f"{' '.join(self.argv[:3])} ... failed ({why}):\n{self.stderr[-3000:]}")
        return self

    def result_line(self, prefix: str = "RESULT ") -> Any:
        """The JSON after ``prefix`` on the last stdout line that starts with it (:class:`ChildFailed`: none)."""
        lines = [ln for ln in self.stdout.splitlines() if ln.startswith(prefix)]
        if not lines:
            raise ChildFailed(f"{' '.join(self.argv[:3])} ... printed no result:\n{self.stdout[-1000:]}\n"
                              f"{self.stderr[-3000:]}")
        return json.loads(lines[-1][len(prefix):])


@dataclass
class Started:
    """A command running as a child process (see :func:`start`)."""

    argv: list[str]
    proc: Any
    out: IO[str]
    err: IO[str]
    t0: float
    timeout_s: float | None = None
    files: list[IO[str]] = field(default_factory=list)

    def wait(self) -> Ran:
        """Wait for the end (killing the child after ``timeout_s``) and report it."""
        deadline = None if self.timeout_s is None else self.t0 + self.timeout_s
        timed_out = False
        while True:
            pid, status, usage = os.wait4(self.proc.pid, 0 if deadline is None else os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:  # type: ignore[operator]  # deadline is set in this branch
                self.proc.kill()
                timed_out = True
                pid, status, usage = os.wait4(self.proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - self.t0
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        texts = []
        for f in (self.out, self.err):
            f.seek(0)
            texts.append(f.read())
        for f in (self.out, self.err, *self.files):
            f.close()
        return Ran(self.argv, self.proc.returncode, texts[0], texts[1], usage.ru_utime + usage.ru_stime, wall,
                   load_avg(), timed_out)


def start(argv: Sequence[str], *, cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
          input: str | None = None, timeout_s: float | None = None) -> Started:
    """Start ``argv`` as a child process (``input`` on its stdin, its output to temporary
    files so that no pipe fills up); :meth:`Started.wait` for its end."""
    import subprocess

    files: list[IO[str]] = []
    stdin = None
    if input is not None:
        stdin = tempfile.TemporaryFile("w+")
        stdin.write(input)
        stdin.seek(0)
        files.append(stdin)
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env) if env is not None else None, stdin=stdin,
                            stdout=out, stderr=err, text=True)
    return Started(list(argv), proc, out, err, time.perf_counter(), timeout_s, files)


def run(argv: Sequence[str], **how: Any) -> Ran:
    """:func:`start` and wait."""
    return start(argv, **how).wait()


def tree_env(tree: Path | str, one_thread: bool = True, **more: str) -> dict[str, str]:
    """The environment of a run of the code in ``tree`` (a checkout of this project): its
    packages first on the path (``PYTHONPATH`` in ``more`` replaces it), numba on one thread."""
    return {**os.environ, "PYTHONPATH": str(Path(tree).resolve()), **({"NUMBA_NUM_THREADS": "1"} if one_thread else {}),
            **more}


class Proc(NamedTuple):
    """A live process, from ``/proc``."""

    ppid: int
    cmd: str
    """Its command line, arguments separated by spaces (empty for a zombie)."""
    cpu_s: float
    """User + system CPU seconds."""
    reaped_s: float
    """User + system CPU seconds of its children that ended and were waited for."""
    start: int = 0
    """When it started (clock ticks after boot): a pid with another start is another process."""


def processes() -> dict[int, Proc]:
    """Every live process by pid."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, Proc] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # ended meanwhile
        f = stat[stat.rindex(")") + 2:].split()
        out[int(entry)] = Proc(int(f[1]), cmd.strip(), (int(f[11]) + int(f[12])) / tick, (int(f[13]) + int(f[14])) / tick,
                               int(f[19]))
    return out


def descendants(pid: int, procs: Mapping[int, Proc] | None = None) -> list[int]:
    """Every process below ``pid``."""
    children: dict[int, list[int]] = {}
    for child, p in (processes() if procs is None else procs).items():
        children.setdefault(p.ppid, []).append(child)
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def python_workers(pid: int) -> list[int]:
    """The Spark Python workers below ``pid`` (a driver or an executor JVM): the processes a
    ``pyspark.daemon`` forked."""
    procs = processes()
    daemon = {p for p, proc in procs.items() if "pyspark.daemon" in proc.cmd}
    return sorted(p for p in descendants(pid, procs) if p in daemon and procs[p].ppid in daemon)


def tree_cpu_s(by_command: bool = False) -> Any:
    """CPU seconds (user + system) of this process and every live descendant (JVM, Python
    workers); with ``by_command``, a dict of them by kind (``java``, ``python``)."""
    procs = processes()
    mine = [os.getpid(), *descendants(os.getpid(), procs)]
    if not by_command:
        return sum(procs[p].cpu_s for p in mine if p in procs)
    out: dict[str, float] = {}
    for p in mine:
        if p in procs:
            name = "java" if procs[p].cmd.split(" ")[0].endswith("java") else "python"
            out[name] = out.get(name, 0.0) + procs[p].cpu_s
    return out


_KINDS = ("driver", "jvm", "python workers", "broker", "other")


def _kinds(procs: Mapping[int, Proc]) -> dict[int, str]:
    """The kind of this process and of each live descendant (a zombie takes its parent's)."""
    children: dict[int, list[int]] = {}
    for pid, p in procs.items():
        children.setdefault(p.ppid, []).append(pid)
    out: dict[int, str] = {}
    todo = [(os.getpid(), "driver")]
    while todo:
        pid, parent_kind = todo.pop()
        p = procs.get(pid, Proc(0, "", 0.0, 0.0))
        out[pid] = ("driver" if pid == os.getpid() else parent_kind if not p.cmd
                    else "broker" if " kafka.Kafka " in f" {p.cmd} " else "jvm" if "java" in p.cmd.split(" ")[0]
                    else "python workers" if "pyspark" in p.cmd else "other")
        todo += [(child, out[pid]) for child in children.get(pid, [])]
    return out


def ignores_sigchld(pid: int) -> bool:
    """Whether ``pid`` ignores SIGCHLD: its children are then reaped by the kernel and their CPU
    is added to nobody's (as ``pyspark.daemon`` does with its workers)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGCHLD - 1) & 1)
    except OSError:
        pass
    return False


class _Seen(NamedTuple):
    kind: str
    start: int
    cpu_s: float
    """Its CPU with its reaped children's, when last sampled."""
    lost: bool
    """Whether its CPU is lost when it ends: its parent ignores SIGCHLD, or is not this tree's."""


class CpuTracker:
    """CPU seconds by kind of this process and its descendants, those that ended included.

    A process that ended is in its parent's CPU only if the parent waited for it; the workers
    of ``pyspark.daemon`` (which ignores SIGCHLD) and orphans are not. So every process of the
    tree is remembered (by pid and start time) at each :meth:`sample`, and when one has ended
    unwaited for, its last sample stays counted (``gone``): what it spent after that sample is
    lost. :meth:`start` samples in a thread every ``every`` seconds."""

    def __init__(self) -> None:
        self.seen: dict[int, _Seen] = {}
        self.gone = dict.fromkeys(_KINDS, 0.0)
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def sample(self) -> dict[str, float]:
        """The CPU seconds by kind now, those of ended processes as last sampled."""
        procs = processes()
        with self.lock:
            kinds = _kinds(procs)
            for pid in [p for p, seen in self.seen.items() if p not in procs or procs[p].start != seen.start]:
                ended = self.seen.pop(pid)
                if ended.lost:
                    self.gone[ended.kind] += ended.cpu_s
            for pid, seen in self.seen.items():  # alive but no longer below us (orphaned): still ours
                kinds.setdefault(pid, seen.kind)
            waits = {pid: not ignores_sigchld(pid) for pid in {procs[p].ppid for p in kinds if p in procs}}
            out = dict(self.gone)
            for pid, kind in kinds.items():
                p = procs.get(pid)
                if p is None:
                    continue
                out[kind] += p.cpu_s + p.reaped_s
                if pid != os.getpid():
                    self.seen[pid] = _Seen(kind, p.start, p.cpu_s + p.reaped_s, not (p.ppid in kinds and waits[p.ppid]))
            return out

    def start(self, every: float = 1.0) -> None:
        """Sample every ``every`` seconds in a daemon thread (once)."""
        if self.thread is None:
            def run() -> None:
                while True:
                    time.sleep(every)
                    self.sample()

            self.thread = threading.Thread(target=run, name="cpu-tracker", daemon=True)
            self.thread.start()


_TRACKER = CpuTracker()


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds (user + system, with reaped children) of this process and its descendants, by kind:
    ``driver`` (this process), ``jvm`` (Spark), ``python workers`` (Spark's Python daemon and
    workers), ``broker`` (the embedded broker), ``other``. The first call starts the sampling of
    a :class:`CpuTracker` (every second, in this process): from then on, processes that end
    stay counted."""
    _TRACKER.start()
    return _TRACKER.sample()


def process_memory(pid: int) -> dict[str, int]:
    """Bytes of a process from ``/proc/<pid>/smaps``: RSS, PSS, anonymous (the heap and the
    pages it copied on write) and the PSS of its mappings of shared index files."""
    out = {"rss": 0, "pss": 0, "anon": 0, "file_pss": 0}
    in_index = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if not parts[0].endswith(":"):  # a mapping's header: address range, ..., path
                in_index = "/pubsub-index-" in line
            elif parts[0] == "Rss:":
                out["rss"] += int(parts[1]) * 1024
            elif parts[0] == "Pss:":
                out["pss"] += int(parts[1]) * 1024
                if in_index:
                    out["file_pss"] += int(parts[1]) * 1024
            elif parts[0] == "Anonymous:":
                out["anon"] += int(parts[1]) * 1024
    return out


def interleaved(labels: Sequence[str], rnd: int) -> list[str]:
    """The order of ``labels`` in round ``rnd``: alternating, so that a drift of the load hits all alike."""
    return list(labels) if rnd % 2 == 0 else list(labels)[::-1]


def in_trees(module: str, argv: Sequence[str], trees: Mapping[str, Path], result: str, rounds: int = 1,
             first_round: int = 0, parallel: bool = False) -> list[dict]:
    """Run ``python -m scripts.bench.<module> <argv>`` over each code tree (a checkout of
    this project, e.g. a git worktree of an older commit: its own bench and matchers), one
    process per run, ``rounds`` rounds :func:`interleaved` (``first_round`` continues an
    earlier series), or with ``parallel`` the trees of a round at the same time (under the
    same load).

    Each run starts without the tree's ``result`` file (a path relative to the tree, the
    JSON the bench writes) and returns it parsed, with the run's CPU seconds, wall seconds
    and the load average when it ended."""
    runs = []
    for rnd in range(first_round, first_round + rounds):
        order = interleaved(list(trees), rnd)
        for group in ([order] if parallel else [[label] for label in order]):
            started = {}
            for label in group:
                tree = trees[label].resolve()
                (tree / result).unlink(missing_ok=True)
                started[label] = (tree, start([sys.executable, "-m", f"scripts.bench.{module}", *argv], cwd=tree,
                                              env=tree_env(tree)))
            for label, (tree, child) in started.items():
                ran = child.wait()
                if ran.returncode != 0 or not (tree / result).exists():
                    raise RuntimeError(f"{module} over {tree} failed ({ran.returncode}):\n{ran.stderr[-3000:]}")
                runs.append({"tree": label, "path": str(tree), "round": rnd, "module": module, "argv": list(argv),
                             "parallel": parallel, "cpu_s": ran.cpu_s, "wall_s": ran.wall_s,
                             "load_avg": os.getloadavg(), "stdout": ran.stdout[-4000:],
                             "result": json.loads((tree / result).read_text())})
                print(f"{module} round {rnd} {label}: {ran.wall_s:.0f} s wall, {ran.cpu_s:.0f} s CPU, "
                      f"load {runs[-1]['load_avg'][0]:.1f}", file=sys.stderr, flush=True)
    return runs


# -- the record ----------------------------------------------------------------------------------
def record(params: Mapping[str, Any], results: Any, **more: Any) -> dict[str, Any]:
    """One result: the workload ``params``, the figures (``results``), the command that
    made it, the date, the load average at its end and the environment."""
    return {"command": "python -m " + " ".join([_module_of(sys.argv[0]), *sys.argv[1:]]),
            "date": time.strftime("%Y-%m-%d"), "time_utc": time.strftime("%H:%M", time.gmtime()),
            "params": dict(params), **more, "results": results, "load_avg": load_avg(),
            "environment": environment()}


def _module_of(path: str) -> str:
    p = Path(path).resolve()
    try:
        rel = p.relative_to(ROOT).with_suffix("")
    except ValueError:
        return p.stem
    parts = [x for x in rel.parts if x != "__main__"]
    return ".".join(parts)


def save(name: str, rec: Mapping[str, Any], docs: Path = DOCS) -> Path:
    """Write ``rec`` as ``<docs>/bench/<name>.json``; its path."""
    path = docs / "bench" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1, default=float) + "\n")
    return path


def load(name: str, docs: Path = DOCS) -> Any:
    """The record ``<docs>/bench/<name>.json`` (``name`` may be a glob: the newest match), or ``None``."""
    files = sorted((docs / "bench").glob(f"{name}.json"))
    return json.loads(files[-1].read_text()) if files else None


# -- rendering ---------------------------------------------------------------------------------
def table(head: Sequence[str], rows: Iterable[Sequence[Any]], align: str = "") -> str:
    """A markdown table; ``align`` holds one letter a column (``l``, ``r``), default left."""
    rule = "|" + "".join("---:|" if a == "r" else "---|" for a in align.ljust(len(head), "l"))
    return "\n".join(["| " + " | ".join(head) + " |", rule, *("| " + " | ".join(map(str, r)) + " |" for r in rows)])


BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def write_section(doc: Path, text: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the generated part of ``doc`` (between the markers ``begin`` and ``end``,
    added at its end the first time) with ``text``."""
    old = doc.read_text() if doc.exists() else ""
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in old and end in old:
        new = old[: old.index(begin)] + block + old[old.index(end) + len(end):]
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    doc.write_text(new)


def plot(path: Path, series: Mapping[str, Sequence[tuple[Any, float]]], *, title: str, xlabel: str, ylabel: str,
         logx: bool = False, logy: bool = False, bars: bool = False, size: tuple[float, float] = (7, 4.5)) -> None:
    """One PNG: a line (or, with ``bars``, a group of bars over the categories of x) per series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size)
    cats = list(dict.fromkeys(x for pts in series.values() for x, _ in pts))
    width = 0.8 / max(1, len(series))
    for j, (label, pts) in enumerate(series.items()):
        if bars:
            ax.bar([cats.index(x) + (j - (len(series) - 1) / 2) * width for x, _ in pts], [y for _, y in pts],
                   width=width, label=label)
        elif pts:
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=label)
    if bars:
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels([str(c) for c in cats], fontsize=8)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2 if bars else 1)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
