"""OpIndex (Zhang, Chan, Tan, VLDB 2014) and the baselines of its experiments.

Registered matchers: ``"opindex"`` (:class:`~matchers.opindex.index.OpIndex`),
``"opindex-bs"`` (no segments and no signatures) and ``"kindex"`` (the k-index of
Whang et al., VLDB 2009, :class:`~matchers.opindex.kindex.KIndex`).
"""

from matchers.opindex.index import OpIndex, OpIndexBS, OpIndexPaper
from matchers.opindex.kindex import KIndex

__all__ = ["OpIndex", "OpIndexBS", "OpIndexPaper", "KIndex"]
