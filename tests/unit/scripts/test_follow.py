"""``scripts.follow`` prints both kinds of notification and error records."""

from __future__ import annotations

import orjson

from scripts.follow import pretty
from streaming.notifications import encode, pattern


def test_match_notification_line():
    doc = orjson.loads(encode("ibm", "events", 1, 7, "e-7", b'{"symbol": "IBM", "price": 90}', 1000, 1500, 3))
    line = pretty(doc, errors=False)
    assert "ibm <- e-7" in line and "(+500 ms)" in line and '"symbol":"IBM"' in line


def test_pattern_notification_line():
    doc = orjson.loads(pattern("rising", ("e1", "e4", "e9"), {"symbol": "IBM", "cnt": 3}, 1, 9, "symbol#3",
                               "events", 0, 9, 9000, 9500))
    line = pretty(doc, errors=False)
    assert line == 'pattern rising <- events [e1, e4, e9] (t 1..9) {"symbol":"IBM","cnt":3}'


def test_error_record_line():
    doc = {"stage": "event", "topic": "events", "partition": 0, "offset": 4, "reason": "not JSON", "raw": "{x"}
    assert pretty(doc, errors=True) == "[event] events/0@4: not JSON  raw='{x'"
