"""Matchers are discovered, not listed: a package registers its index on import."""

from __future__ import annotations

import sys
import textwrap

import pytest

from matchers import base, oracle
from matchers.catalog import create, discover, names, servable
from matchers.expr import Subscription
from matchers.language import parse_text
from streaming.config import ConfigError, Settings

TOY = '''
"""A toy index in a package of its own: the recipe of docs/README.md, "adding an index"."""
import numpy as np

from matchers import oracle
from matchers.base import Matcher, Matches, register
from matchers.events import decode


@register("toy")
class Toy(Matcher):
    def __init__(self, dictionary=None, **params):
        super().__init__(dictionary, **params)
        self.live = {}

    def _insert(self, entries):
        for key, sub in entries:
            for conjunction in sub.conjunctions:
                for p in conjunction:
                    self._register_operands(p)
            self.live[key] = sub

    def _delete(self, entries):
        for key, _ in entries:
            del self.live[key]

    def _match(self, batch):
        offsets, keys = [0], []
        for i in range(batch.n):
            event = decode(batch, self.dictionary, i)
            keys += sorted(k for k, s in self.live.items() if oracle.evaluate(s.expr, event))
            offsets.append(len(keys))
        return Matches(np.array(offsets, dtype=np.int64), np.array(keys, dtype=np.int32))

    def memory_bytes(self):
        return 0
'''


@pytest.fixture
def toy_distribution(tmp_path, monkeypatch):
    """A package outside the repository that declares the ``pubsub.matchers`` entry point."""
    (tmp_path / "toyindex").mkdir()
    (tmp_path / "toyindex" / "__init__.py").write_text(textwrap.dedent(TOY))
    info = tmp_path / "toyindex-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyindex\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pubsub.matchers]\ntoy = toyindex\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    base.REGISTERED.pop("toy", None)
    sys.modules.pop("toyindex", None)


def test_every_index_package_registers_itself():
    assert {"counting", "dynamic", "opindex", "vci", "amkh", "brute"} <= set(names())
    assert {"brute", "kindex", "opindex-paper", "opindex-bs"}.isdisjoint(names(baselines=False))


def test_an_index_in_its_own_package_is_discovered_and_matches_as_the_oracle(toy_distribution):
    assert "toy" not in names()
    discover(again=True)
    assert servable("toy") == "toy" and Settings().replace(match={"matcher": "toy"}).match.matcher == "toy"
    subs = [Subscription.of(f"s{i}", parse_text(text)) for i, text in
            enumerate(["a = 1", "a > 1 AND b LIKE 'x%'", "NOT a IN (1, 2)", "b = 'xy' OR a <= 0"])]
    events = [{"a": 1}, {"a": 2, "b": "xy"}, {"a": 0, "b": "z"}, {"b": "xy"}, {}]
    toy = create("toy")
    toy.add(subs)
    assert toy.match_ids(toy.encode(events)) == [sorted(oracle.match(subs, e)) for e in events]


def test_the_service_refuses_a_baseline_or_an_unknown_matcher():
    with pytest.raises(ValueError, match="baseline"):
        servable("brute")
    for name, why in (("brute", "is a baseline"), ("kindex", "is a baseline"), ("nope", "is not a registered")):
        with pytest.raises(ConfigError, match=f"match.matcher: matcher '{name}' {why}.*takes one of .*counting"):
            Settings().replace(match={"matcher": name})
    assert Settings().replace(match={"matcher": "opindex"}).match.matcher == "opindex"
