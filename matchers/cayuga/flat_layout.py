"""The event batch the flat engine's kernels (:mod:`.flat_kernels`) take. Numpy only."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Steps(NamedTuple):
    """Events in order, one per column of ``ev`` and of ``evn``.

    ``sout[soff[i]:soff[i+1]]`` are the forward edges of the start edges event ``i`` fires;
    for an event with the exact flag, ``snode[noff[i]:noff[i+1]]`` are the nodes whose static
    atoms it passes (checked by the caller: an integer too large for a float).
    """

    ev: np.ndarray  # int64[rows, events]: stream, t0, t1, seq, exact flag, a key code per slot,
    #                 a value type and constant id per static slot
    evn: np.ndarray  # float64[static slots, events]: the static slots' values as numbers
    sout: np.ndarray  # int64
    soff: np.ndarray  # int64[events + 1]
    snode: np.ndarray  # int64
    noff: np.ndarray  # int64[events + 1]
