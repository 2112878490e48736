"""scripts.publish's reading of a JSONL file: each bad line named by its file and number, a
missing file refused before any connection."""

from __future__ import annotations

import pytest

from scripts.publish import from_file, main


def test_from_file_yields_objects_and_names_a_bad_line(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"id": 1}\n\n  {"id": 2}  \n{"id": \n')
    got = from_file(str(path))
    assert next(got) == b'{"id": 1}'
    assert next(got) == b'{"id": 2}'
    with pytest.raises(ValueError, match=r"events\.jsonl:4: not JSON"):
        next(got)


def test_from_file_refuses_a_line_that_is_not_an_object(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"[1, 2]\n")
    with pytest.raises(ValueError, match=r"events\.jsonl:1: an event must be a JSON object"):
        list(from_file(str(path)))


def test_a_missing_file_is_refused_before_connecting(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--bootstrap", "127.0.0.1:1", "--file", str(tmp_path / "nothing.jsonl")])
    assert exc.value.code == 2
    assert "nothing.jsonl: no such file" in capsys.readouterr().err
