"""The --lint mode: findings per line, exit codes, several files."""

from __future__ import annotations

import io

from matchers.language.lint import Finding, lint_lines, main

LINES = [
    b'{"id": "a", "expr": "price < 100"}\n',
    b'{"id": "b", "expr": "price <"}\n',
    b"\n",
    b"not json\n",
    b'{"id": "a", "json": ["x", "in", []]}\n',
    b'{"id": "a", "expr": "x = 1", "expires": 5}\n',
    b'[1, 2]\n',
    b'{"id": "c", "expr": "x = 1", "expires": "2999-01-01T00:00:00Z"}\n',
    b'{"id": "d", "json": ["x", "=", 1' + b"0" * 400 + b']}\n',  # beyond a double
    b'{"id": "e", "expr": "x = 1", "expires": NaN}\n',
]


def test_findings_per_line():
    findings = list(lint_lines(LINES, now=1000.0))
    assert [(f.line, f.severity) for f in findings] == [
        (2, "error"), (4, "error"), (5, "error"), (6, "warning"), (6, "warning"), (7, "error"), (9, "error"),
        (10, "error"),
    ]
    assert findings[0] == Finding(2, "error", "subscription 'b' at 1:8: the expression ends too early (expected a value)")
    assert "not valid JSON" in findings[1].message and "not valid JSON" in findings[-1].message
    assert "$.json[2]" in findings[2].message
    assert "defined again (first at line 1)" in findings[3].message
    assert "already expired (1970-01-01T00:00:05Z)" in findings[4].message
    assert "must be a JSON object" in findings[5].message
    assert "subscription 'd' at $.json[2]: the number 1000" in findings[6].message


def test_max_terms():
    line = '{"id": "w", "expr": "(a = 1 OR b = 1) AND (c = 1 OR d = 1)"}'
    assert list(lint_lines([line], max_terms=4)) == []
    (finding,) = lint_lines([line], max_terms=3)
    assert "more than 3 conjunctions" in finding.message


def test_main_exit_codes_and_output(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": "a", "expr": "a = 1"}\n{"id": "a", "expr": "a = 2"}\n')
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join(LINES))
    out, err = io.StringIO(), io.StringIO()
    assert main(["--lint", str(good)], out, err) == 0
    assert out.getvalue() == f"{good}:2: warning: subscription 'a' is defined again (first at line 1): the last definition wins\n"
    assert err.getvalue().endswith("2 records: 0 errors, 1 warning\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["--lint", str(good), str(bad), str(tmp_path / "missing.jsonl")], out, err) == 1
    assert f"{bad}:2: error: subscription 'b' at 1:8" in out.getvalue()
    assert "missing.jsonl: cannot read" in err.getvalue()
    assert err.getvalue().endswith("11 records: 7 errors, 3 warnings\n")
