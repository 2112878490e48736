"""``scripts.bench.text_ints``: the integers numpy's text reader finds, and a refusal (with the
byte) of what is not whitespace-separated integers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scripts.bench.text_ints import parse_ints, read_ints

SPACES = st.text(alphabet=" \t\n\r", min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(numbers=st.lists(st.integers(-(10**18) + 1, 10**18 - 1), max_size=60), data=st.data())
def test_parse_ints_reads_what_numpy_reads(numbers, data):
    seps = [data.draw(SPACES) for _ in range(len(numbers) + 1)]
    text = seps[0] + "".join(f"{x}{s}" for x, s in zip(numbers, seps[1:], strict=True))
    got, bad = parse_ints(np.frombuffer(text.encode(), dtype=np.uint8))
    assert bad == -1 and got.tolist() == numbers
    assert got.tolist() == np.array(text.split(), dtype=np.int64).tolist()


@pytest.mark.parametrize("text, at", [("1 2 x", 4), ("1 2x 3", 3), ("1 - 2", 3), ("12 3.5", 4), ("1,2", 1),
                                       ("1 " + "9" * 19, 20), ("--1", 1)])
def test_parse_ints_refuses_the_rest(text, at):
    got, bad = parse_ints(np.frombuffer(text.encode(), dtype=np.uint8))
    assert bad == at


def test_read_ints_names_the_byte(tmp_path):
    (tmp_path / "ok.txt").write_text("3 1 4\n1 -5\n")
    assert read_ints(tmp_path / "ok.txt").tolist() == [3, 1, 4, 1, -5]
    (tmp_path / "bad.txt").write_text("3 1 4\n1 e5\n")
    with pytest.raises(ValueError, match="at byte 8"):
        read_ints(tmp_path / "bad.txt")
    (tmp_path / "empty.txt").write_text("")
    assert read_ints(tmp_path / "empty.txt").tolist() == []
