"""Geometry and array layout of a VCI index (Wu, Chen, Yu, Mei, Sections 2-4).

The attribute domain is ``R`` integer cells ``0 .. R-1``.  Virtual construct intervals
(VCIs) start at every cell; SCI has ``L`` of them per start (lengths ``1 .. L``), LCI has
``k + 1`` (lengths ``1, 2, 4, .., L = 2**k``).  A VCI here is the half-open run of cells
``[a, a + len)``: the paper's closed VCIs ``[a, b]`` share their end cells when a predicate
is decomposed (``[x, x+L], [x+L, x+2L], ..``), which lists a predicate twice for a value
on a seam; half-open pieces partition the predicate interval, so a stabbing query lists
each predicate once and a zero-length interval is simply a length-1 VCI.

Coordinates follow Eq. (1) and (2) with the start shifted by ``L - 1`` so that the
covering segment of every cell, even near ``0``, is in range: the VCI of type ``t``
starting at ``a`` has coordinate ``c = (a + L - 1) * K + t`` where ``K`` VCIs start at each
cell and ``len(t) = t + 1`` (SCI) or ``2**t`` (LCI).  Cell ``j`` is covered only by VCIs
whose coordinates lie in its covering segment ``[C_min(j), C_max(j)]`` with
``C_min(j) = j * K + K - 1`` and ``C_max(j) = C_min(j) + (L - 1) * K``; the coordinates of
the VCIs that do cover ``j`` are ``C_min(j) + DT`` for one distance table ``DT`` (Eq. 3).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

# decomposition families
SCI, LCI = 0, 1
# search modes: full bitmaps, clipped bitmaps, virtual bitmaps (division), virtual + distance table
BITMAP, CLIPPED, VIRTUAL, VIRTUAL_DT = 0, 1, 2, 3

SCHEMES: dict[str, tuple[int, int]] = {
    "SCI": (SCI, BITMAP),
    "SCI-BC": (SCI, CLIPPED),
    "SCI-BV": (SCI, VIRTUAL),
    "SCI-BV(DT)": (SCI, VIRTUAL_DT),
    "LCI": (LCI, BITMAP),
    "LCI-BC": (LCI, CLIPPED),
    "LCI-BV": (LCI, VIRTUAL),
    "LCI-BV(DT)": (LCI, VIRTUAL_DT),
}
"""Scheme name -> (decomposition family, search mode). The paper's Fig. 5 schemes are
SCI, SCI-BC, LCI, LCI-BC and LCI-BV; Fig. 6 adds LCI-BV(DT)."""

PAPER_SCHEMES = ("SCI", "SCI-BC", "LCI", "LCI-BC", "LCI-BV", "LCI-BV(DT)")


class Geometry(NamedTuple):
    """Derived constants of an index.

    Attributes
    ----------
    R : cells in the domain.
    L : longest VCI (a power of two for LCI).
    K : VCIs starting at each cell.
    family, mode : see :data:`SCHEMES`.
    n_coords : number of VCI coordinates, ``(R + L - 1) * K``.
    segment : covering-segment size, ``(L - 1) * K + 1``.
    words : 64-bit words per bitmap vector (0 without bitmaps).
    """

    R: int
    L: int
    K: int
    family: int
    mode: int
    n_coords: int
    segment: int
    words: int


def geometry(scheme: str, R: int, L: int) -> Geometry:
    """Validate the parameters of a scheme and derive its constants."""
    try:
        family, mode = SCHEMES[scheme]
    except KeyError:
        raise ValueError(f"unknown VCI scheme {scheme!r}; known: {', '.join(SCHEMES)}") from None
    if R < 1:
        raise ValueError(f"the domain needs at least one cell, not R={R}")
    if L < 1:
        raise ValueError(f"L must be at least 1, not {L}")
    if family == LCI and L & (L - 1):
        raise ValueError(f"LCI needs L to be a power of two, not {L}")
    K = L if family == SCI else L.bit_length()
    n_coords = (R + L - 1) * K
    segment = (L - 1) * K + 1
    if mode == BITMAP:
        words = (n_coords + 63) // 64
    elif mode == CLIPPED:
        words = (segment + 63) // 64
    else:
        words = 0
    return Geometry(R, L, K, family, mode, n_coords, segment, words)


def lengths(g: Geometry) -> np.ndarray:
    """int64[K]: the length in cells of the VCI of each type."""
    t = np.arange(g.K, dtype=np.int64)
    return t + 1 if g.family == SCI else np.left_shift(np.int64(1), t)


def distance_table(g: Geometry) -> np.ndarray:
    """int64[|DT|], ascending: ``coordinate - C_min(j)`` of every VCI that covers cell ``j``.

    A VCI starting ``d`` cells before ``j`` covers ``j`` when its length exceeds ``d``.
    ``|DT|`` is ``L (L + 1) / 2`` for SCI and ``2L - 1 + ..`` (the sum over ``d`` of the
    LCI lengths above ``d``) for LCI: the paper's Eq. (3) counted for half-open VCIs.
    """
    lens = lengths(g)
    out = []
    for d in range(g.L):
        for t in range(g.K):
            if lens[t] > d:
                out.append((g.L - 1 - d) * g.K + t - (g.K - 1))
    return np.array(sorted(out), dtype=np.int64)


class SlabLists(NamedTuple):
    """Growable int32 lists in one pool (:class:`matchers.vci.slabs.Slabs`), as the kernels take them."""

    start: np.ndarray  # int32[lists]: first pool position of each list
    length: np.ndarray  # int32[lists]: values in each list (length <= cap)
    cap: np.ndarray  # int32[lists]: pool positions reserved for each list
    pool: np.ndarray  # int32[pool]: the values (below 2**31 slots)
    top: np.ndarray  # int64[2]: (used length of the pool, garbage slots in it)


class Bounds(NamedTuple):
    """Per interval id of a grid index: its exact bounds (the grid cells round them)."""

    lo: np.ndarray  # float64[ids]: low bound
    hi: np.ndarray  # float64[ids]: high bound
    lo_closed: np.ndarray  # bool[ids]: whether lo is included
    hi_closed: np.ndarray  # bool[ids]: whether hi is included


class CellHits(NamedTuple):
    """Candidates of a grid index per queried value, as CSR: the full-cell index's ids and the
    edge-cell index's entries (``2 * id + side``, checked against the bounds)."""

    core_off: np.ndarray  # int64[values + 1]
    core_ids: np.ndarray  # int32
    edge_off: np.ndarray  # int64[values + 1], or [0] without edge cells
    edge_ids: np.ndarray  # int32


class Sides(NamedTuple):
    """Ids of the intervals reaching past the low (``below``) and high (``above``) end of the domain."""

    below: np.ndarray  # int32
    above: np.ndarray  # int32
