"""The pattern registry of earlier releases (``<checkpoint>/patterns/pattern-registry/v*.json``)
imported once into the columnar registry: its newest set becomes one version, each pattern keeps
its ``since`` and epochs keep growing past the old ones; idempotent across restarts and a crash
between the version's delta and its view."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from matchers.cayuga.compiler import chains, partition_attribute
from matchers.cayuga.language import parse
from streaming.config import Settings
from streaming.errors import RegistryError
from streaming.match.changes import records_of, register_records
from streaming.patterns.queries import legacy_registry_dir, registry_dir
from streaming.patterns.registry import current, engines_for
from streaming.registry_columns import EXPRESSION, PATTERN, ChangeBatch, ColumnRegistry, view
from streaming.registry_columns.migrate import import_patterns

FIXTURE = Path(__file__).parent / "data" / "pattern_registry"
"""A pattern registry the previous release's own code wrote (``PatternRegistry`` and
``apply_pattern_records`` of commit eb6cb67): batches 3, 5 and 8 made versions 1 to 3; ``p`` is
the operator's, replaced at version 3, ``acme:q`` and ``acme:r`` acme's, ``gone`` deleted."""
OLD = {k: v for k, v in orjson.loads((FIXTURE / "v000000000003.json").read_bytes())["patterns"].items()}


def checkpoint(tmp_path: Path) -> Settings:
    """Settings whose checkpoint holds the fixture where the previous release kept it."""
    settings = Settings().replace(spark={"checkpoint_dir": str(tmp_path)})
    shutil.copytree(FIXTURE, Path(legacy_registry_dir(settings).removeprefix("file://")))
    return settings


def expressions(reg: ColumnRegistry, batch_id: int, *ids: str) -> None:
    register_records(reg, batch_id, records_of(
        [(i.encode(), orjson.dumps({"id": i, "expr": "price > 1"}), "subscriptions", 0, n) for n, i in enumerate(ids)]),
        float(batch_id))


def test_the_previous_release_s_patterns_import_once(tmp_path):
    settings = checkpoint(tmp_path)
    reg = ColumnRegistry(registry_dir(settings))
    expressions(reg, 10, "e1", "e2")
    expressions(reg, 11, "e3")
    applied = import_patterns(legacy_registry_dir(settings), reg)
    assert applied is not None and (applied.version, applied.added) == (3, 3)
    got = current(registry_dir(settings))
    assert (got.version, got.batch_id, got.base, got.epoch) == (3, 11, 3, 6)
    assert got.patterns == OLD == reg.pattern_view()  # text, since and partition attribute as they were
    assert reg.lookup(["p", "acme:q", "acme:r", "gone", "e1"]).tolist() == [PATTERN, PATTERN, PATTERN, 0, EXPRESSION]
    assert reg.held()[("acme", PATTERN)] == (2, 0)  # the tenant's quota counts them
    # once: not again, nor after a restart
    assert import_patterns(legacy_registry_dir(settings), reg) is None
    again = ColumnRegistry(registry_dir(settings))
    assert import_patterns(legacy_registry_dir(settings), again) is None and again.version == 3
    assert again.pattern_view() == OLD and again.base == 3
    # a replay of the last batch still finds the version it recorded, and the columns before it
    assert again.apply(11, ChangeBatch.of([], []), 99.0)[:3] == (2, 11.0, True)
    assert again.columns_at(1).live == 2
    # the next batch: a pattern registered now sees instances from a later epoch than any old one
    applied, _ = register_records(again, 12, records_of(
        [(b"n", orjson.dumps({"id": "n", "pattern": OLD["p"][0]}), "subscriptions", 0, 5)]), 12.0)
    assert not applied.replay and applied.version == 4
    got = current(registry_dir(settings))
    assert got.patterns["n"][1] == 4 + 3 > max(e[1] for e in OLD.values())
    assert {i: e[1] for i, e in got.patterns.items() if i != "n"} == {i: e[1] for i, e in OLD.items()}
    engines = engines_for(registry_dir(settings), "name#0")
    assert sorted(engines) == ["", "acme"] and {e.epoch for e in engines.values()} == {got.epoch}
    assert "p" in engines[""] and "n" in engines[""] and "acme:r" in engines["acme"]


def test_a_crash_before_the_import_s_view_is_repaired_at_start(tmp_path, monkeypatch):
    settings = checkpoint(tmp_path)
    reg = ColumnRegistry(registry_dir(settings))
    expressions(reg, 0, "e1")

    def crash(*args):
        raise OSError("the driver died")

    monkeypatch.setattr(view, "write", crash)
    with pytest.raises(OSError):
        import_patterns(legacy_registry_dir(settings), reg)
    monkeypatch.undo()
    assert view.versions(reg.directory) == []  # the version's delta, not its view
    restarted = ColumnRegistry(registry_dir(settings))  # writes the view the crash kept from being written
    assert import_patterns(legacy_registry_dir(settings), restarted) is None
    got = current(registry_dir(settings))
    assert (got.version, got.base, got.patterns) == (2, 3, OLD)


def test_a_fresh_registry_imports_before_any_batch(tmp_path):
    settings = checkpoint(tmp_path)
    reg = ColumnRegistry(registry_dir(settings))
    applied = import_patterns(legacy_registry_dir(settings), reg)
    assert applied is not None and (applied.version, reg.batch_id) == (1, -1)
    first = register_records(reg, 0, records_of([]), 1.0)[0]
    assert not first.replay  # batch 0 is the match query's first, not a replay of the import
    expressions(reg, 1, "e1")
    assert reg.version == 2 and current(registry_dir(settings)).patterns == OLD


def test_an_older_file_without_attributes_and_nothing_to_import(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    text = OLD["p"][0]
    (old / "v000000000007.json").write_bytes(orjson.dumps({"version": 7, "batch_id": 2, "patterns": {"p": [text, 5]}}))
    reg = ColumnRegistry(tmp_path / "reg")
    assert import_patterns(str(old), reg) is not None
    assert reg.pattern_view() == {"p": [text, 5, partition_attribute(chains(parse(text)))]} and reg.base == 7
    # none there, or an empty set: nothing imported, nothing written
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "v000000000001.json").write_bytes(orjson.dumps({"version": 1, "batch_id": 0, "patterns": {}}))
    for n, source in enumerate((tmp_path / "none", empty)):
        fresh = ColumnRegistry(tmp_path / f"fresh{n}")
        assert import_patterns(str(source), fresh) is None
        assert fresh.version == 0 and view.versions(fresh.directory) == []
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "v000000000001.json").write_bytes(b"{not json")
    with pytest.raises(RegistryError, match="cannot read the pattern registry"):
        import_patterns(str(broken), ColumnRegistry(tmp_path / "reg-broken"))
