"""SQLite as an independent judge of the text form.

Random expressions are written directly as text (keywords in any case, literals on
either side, parentheses or not, so precedence matters), then evaluated two ways over
the same events: by SQLite (a row per event, NULL for a missing attribute, with
case-sensitive LIKE) and by ``oracle.evaluate(parse_text(text), event)``.  Within the
part of the language where SQL and our semantics coincide (no booleans, no regular
expressions, every present value of the predicate's type), they must agree: SQL's
three-valued logic, keeping only TRUE, is our "a predicate on a missing attribute is
false, NOT pushed down".
"""

from __future__ import annotations

import random
import sqlite3

import pytest

from matchers import oracle
from matchers.language import parse_text

NUM_ATTRS = ("a", "b")
STR_ATTRS = ("s", "`x y`")
NUMS: tuple[str, ...] = ("0", "1", "2.5", "-1", "3", "1e0", "-0.5")
STRS = ("''", "'a'", "'ab'", "'b'", "'B'", "'é'", "'ba'", "'a b'")
PATTERNS = ("'a%'", "'%b'", "'%a%'", "'a_'", "'%'", "'_b%'", "'é%'", "'a'", "'%a_b%'", "''")


def _kw(rng: random.Random, word: str) -> str:
    return rng.choice((word.upper(), word.lower(), word.title()))


def _predicate(rng: random.Random) -> str:
    if rng.random() < 0.5:
        attr, pool = rng.choice(NUM_ATTRS), NUMS
    else:
        attr, pool = rng.choice(STR_ATTRS), STRS
    r = rng.random()
    if r < 0.35:
        op = rng.choice(("=", "==", "!=", "<>", "<", "<=", ">", ">="))
        value = rng.choice(pool)
        return f"{value} {op} {attr}" if rng.random() < 0.3 else f"{attr} {op} {value}"
    if r < 0.55:
        values = ", ".join(rng.choice(pool) for _ in range(rng.randint(1, 3)))
        return f"{attr} {_kw(rng, 'not') + ' ' if rng.random() < 0.5 else ''}{_kw(rng, 'in')} ({values})"
    if r < 0.75:
        low, high = sorted(rng.sample(pool, 2), key=lambda v: float(v) if pool is NUMS else v.strip("'"))
        neg = _kw(rng, "not") + " " if rng.random() < 0.5 else ""
        return f"{attr} {neg}{_kw(rng, 'between')} {low} {_kw(rng, 'and')} {high}"
    if pool is NUMS:
        return f"{attr} {rng.choice(('<', '>='))} {rng.choice(pool)}"
    neg = _kw(rng, "not") + " " if rng.random() < 0.5 else ""
    return f"{attr} {neg}{_kw(rng, 'like')} {rng.choice(PATTERNS)}"


def _expression(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth >= 3 or r < 0.35:
        text = _predicate(rng)
    elif r < 0.6:
        text = f" {_kw(rng, 'and')} ".join(_expression(rng, depth + 1) for _ in range(rng.randint(2, 3)))
    elif r < 0.85:
        text = f" {_kw(rng, 'or')} ".join(_expression(rng, depth + 1) for _ in range(rng.randint(2, 3)))
    else:
        text = f"{_kw(rng, 'not')} {_expression(rng, depth + 1)}"
    return f"({text})" if rng.random() < 0.25 else text


def _events(rng: random.Random, n: int) -> list[dict]:
    events = []
    for _ in range(n):
        event: dict = {}
        for attr in NUM_ATTRS:
            if rng.random() < 0.75:
                event[attr] = float(rng.choice(NUMS))
        for attr in STR_ATTRS:
            if rng.random() < 0.75:
                event[attr.strip("`")] = rng.choice(STRS + ("'abc'", "'xab'", "'a\nb'", "'éa'"))[1:-1]
        events.append(event)
    return events


@pytest.fixture(scope="module")
def database():
    db = sqlite3.connect(":memory:")
    db.execute("PRAGMA case_sensitive_like = ON")
    db.execute("CREATE TABLE ev (id INTEGER PRIMARY KEY, a, b, s, `x y`)")
    yield db
    db.close()


@pytest.mark.parametrize("seed", range(4))
def test_text_form_agrees_with_sqlite(database, seed):
    rng = random.Random(seed)
    events = _events(rng, 40)
    database.execute("DELETE FROM ev")
    database.executemany("INSERT INTO ev VALUES (?, ?, ?, ?, ?)",
                         [(i, e.get("a"), e.get("b"), e.get("s"), e.get("x y")) for i, e in enumerate(events)])
    checked = 0
    for _ in range(300):
        text = _expression(rng)
        rows = database.execute(f"SELECT id, ({text}) FROM ev ORDER BY id").fetchall()
        tree = parse_text(text)
        for (row_id, sql_value), (index, event) in zip(rows, enumerate(events), strict=True):
            assert row_id == index
            assert oracle.evaluate(tree, event) == (sql_value == 1), (text, event, sql_value)
            checked += 1
    assert checked == 300 * 40
