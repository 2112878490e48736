"""The benchmark suite of ``make bench``: declared once, every entry a runnable benchmark."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from scripts.bench import harness, suite

MAKEFILE = (Path(__file__).resolve().parents[4] / "Makefile").read_text(encoding="utf-8")


@pytest.mark.parametrize("bench", suite.BENCHES, ids=lambda b: f"{b.module} {' '.join(b.full or ())}".strip())
def test_every_bench_is_a_module_with_a_main_taking_its_arguments(bench: suite.Bench) -> None:
    module = importlib.import_module(f"scripts.bench.{bench.module}")
    assert callable(module.main)
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    for arg in (*(bench.full or ()), *(bench.quick or ())):
        if arg.startswith("--"):
            assert f'"{arg}"' in source, f"{bench.module} has no option {arg}"


def test_the_makefile_runs_the_suite_and_lists_no_bench_module() -> None:
    targets = re.findall(r"^bench(?:-quick)?:.*\n((?:\t.*\n)+)", MAKEFILE, re.M)
    assert len(targets) == 2
    assert all("scripts.bench --all" in body and "scripts.bench." not in body for body in targets)


def test_dry_run_prints_the_commands_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert harness.main(["--all", "--dry-run", "--with", "dense=--peer-for 1000000:x=/bin/x:7"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(suite.selected(quick=False))
    assert lines[0] == "$ python -m scripts.bench" and lines[1] == "$ python -m scripts.bench --goal"
    assert lines[-3].endswith("--matchers-for 1000000:bitmark --peer-for 1000000:x=/bin/x:7")
    assert lines[-2] == "$ python -m scripts.bench.quamina"  # skipped without --with quamina=--quamina PATH
    assert lines[-1] == "$ python -m scripts.bench.flink"  # skipped without --with flink=--flink-python PATH
    assert harness.main(["--all", "--quick", "--dry-run"]) == 0
    quick = capsys.readouterr().out.splitlines()
    assert quick == [f"$ python -m {'scripts.bench' if b.module == 'harness' else 'scripts.bench.' + b.module} --quick"
                     for b in suite.BENCHES if b.quick is not None]
    assert "dense" not in " ".join(quick) and "--goal" not in " ".join(quick)


def test_an_unknown_module_in_with_is_an_error() -> None:
    with pytest.raises(SystemExit, match="no benchmark"):
        harness.main(["--all", "--dry-run", "--with", "nosuch=--x"])
