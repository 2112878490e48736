"""OpIndex (Zhang, Chan, Tan, VLDB 2014) and the baselines of its experiments.

Registered matchers: ``"opindex"`` (:class:`~matchers.opindex.index.OpIndex`, an entry
store), the paper's ``"opindex-paper"`` and ``"opindex-bs"`` (no segments and no
signatures; :mod:`matchers.opindex.paper`) and ``"kindex"`` (the k-index of
Whang et al., VLDB 2009, :class:`~matchers.opindex.kindex.KIndex`).
"""

from matchers.opindex.index import OpIndex
from matchers.opindex.kindex import KIndex
from matchers.opindex.paper import OpIndexBS, PaperOpIndex

__all__ = ["OpIndex", "OpIndexBS", "PaperOpIndex", "KIndex"]
