"""Check files of subscription records without registering them.

``python -m matchers.language --lint subscriptions.jsonl [more.jsonl | -]`` prints one
line per problem, ``PATH:LINE: error: MESSAGE`` or ``PATH:LINE: warning: MESSAGE``, and
exits with 1 if any record would be rejected (warnings alone exit with 0).  Errors are
the messages registration would give; warnings are an id defined again (the last
definition wins) and an ``expires`` time already past.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from typing import IO, NamedTuple

import orjson
from tqdm import tqdm

from matchers.errors import PubSubError
from matchers.expr import DEFAULT_MAX_TERMS

from .subscription_records import parse_record

__all__ = ["Finding", "lint_lines", "main"]


class Finding(NamedTuple):
    """One problem: ``line`` (1-based), ``severity`` (``"error"`` or ``"warning"``), ``message``."""

    line: int
    severity: str
    message: str


def lint_lines(lines: Iterable[bytes | str], max_terms: int = DEFAULT_MAX_TERMS,
               now: float | None = None) -> Iterator[Finding]:
    """Findings for JSONL subscription records, in line order (blank lines are skipped).

    Parameters
    ----------
    lines : the lines of a JSONL file.
    max_terms : the DNF bound registration will apply.
    now : the time ``expires`` is compared with (default: the current time).
    """
    now = time.time() if now is None else now
    first_line: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        record, reason = _load_json(line)
        if reason is not None:
            yield Finding(number, "error", reason)
            continue
        try:
            sub = parse_record(record, max_terms)
        except PubSubError as exc:
            yield Finding(number, "error", str(exc))
            continue
        if sub.id in first_line:
            yield Finding(number, "warning", f"subscription {sub.id!r} is defined again (first at line "
                                             f"{first_line[sub.id]}): the last definition wins")
        else:
            first_line[sub.id] = number
        if sub.expires is not None and sub.expires <= now:
            yield Finding(number, "warning", f"subscription {sub.id!r} has already expired "
                                             f"({time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(sub.expires))})")


def _load_json(line: bytes | str) -> tuple[object, str | None]:
    """orjson, then the standard library for what JSON allows and orjson refuses.

    orjson refuses numbers beyond a double; the standard library reads them, and the
    record parser then reports them with their place in the record.
    """
    try:
        return orjson.loads(line), None
    except orjson.JSONDecodeError as exc:
        reason = f"not valid JSON: {exc}"
    try:
        return json.loads(line, parse_constant=_reject_constant), None
    except (ValueError, UnicodeDecodeError):
        return None, reason


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def _lint_file(path: str, max_terms: int, out: IO[str], err: IO[str]) -> tuple[int, int, int]:
    """Lint one file (``-`` is standard input); returns (records, errors, warnings)."""
    records = errors = warnings = 0

    def counted(stream: Iterable[bytes]) -> Iterator[bytes]:
        nonlocal records
        for line in tqdm(stream, desc=path, unit=" lines", disable=None, file=err, leave=False):
            records += bool(line.strip())
            yield line

    with (open(path, "rb") if path != "-" else nullcontext(sys.stdin.buffer)) as stream:
        for finding in lint_lines(counted(stream), max_terms):
            print(f"{path}:{finding.line}: {finding.severity}: {finding.message}", file=out)
            if finding.severity == "error":
                errors += 1
            else:
                warnings += 1
    return records, errors, warnings


def main(argv: list[str] | None = None, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """Command line entry point; returns the exit code."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    parser = argparse.ArgumentParser(prog="python -m matchers.language",
                                     description="Check subscription records (JSONL) without registering them.")
    parser.add_argument("--lint", nargs="+", metavar="PATH", required=True,
                        help='JSONL files of {"id": ..., "expr"|"json"|"rule": ...} records; - is stdin')
    parser.add_argument("--max-terms", type=int, default=DEFAULT_MAX_TERMS,
                        help=f"bound on DNF conjunctions per subscription (default {DEFAULT_MAX_TERMS})")
    args = parser.parse_args(argv)
    total = [0, 0, 0]
    for path in args.lint:
        try:
            counts = _lint_file(path, args.max_terms, out, err)
        except OSError as exc:
            print(f"{path}: cannot read: {exc.strerror or exc}", file=err)
            total[1] += 1
            continue
        total = [t + c for t, c in zip(total, counts, strict=True)]
    records, errors, warnings = total
    print(f"{records} record{'s' if records != 1 else ''}: {errors} error{'s' if errors != 1 else ''}, "
          f"{warnings} warning{'s' if warnings != 1 else ''}", file=err)
    return 1 if errors else 0
