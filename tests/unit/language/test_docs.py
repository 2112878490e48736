"""The examples of docs/language.md parse, and their two forms agree."""

from __future__ import annotations

import json
import re
from pathlib import Path

from matchers.expr import to_text
from matchers.language import parse_json, parse_record, parse_text, to_json

DOC = (Path(__file__).resolve().parents[3] / "docs" / "language.md").read_text(encoding="utf-8")


def test_text_examples_parse_and_round_trip():
    (block,) = re.findall(r"```sql\n(.*?)```", DOC, re.S)
    lines = block.strip().splitlines()
    assert len(lines) >= 5
    for line in lines:
        tree = parse_text(line)
        assert parse_text(to_text(tree)) == tree and parse_json(to_json(tree)) == tree


def test_json_examples_parse():
    blocks = re.findall(r"```json\n(.*?)```", DOC, re.S)
    records = [json.loads(line) for line in blocks[0].strip().splitlines()]
    subs = [parse_record(r) for r in records]
    assert subs[0].expr == subs[1].expr and subs[1].expires is not None
    tree = parse_json(json.loads(blocks[1]))
    assert tree == parse_text("price BETWEEN 10 AND 20 AND (symbol IN ('IBM', 'MSFT') OR sector LIKE 'tech%') "
                              "AND NOT exchange = 'OTC'")
