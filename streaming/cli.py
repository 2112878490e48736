"""What every command line of the project does on exit.

``exit_with(main)`` runs a command's ``main`` and exits with its code; when the reader of
its output goes away early (``python -m streaming status | head -3``,
``python -m scripts.follow | head``) the command ends quietly instead of printing a
``BrokenPipeError`` trace, as a Unix filter does.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn


def exit_with(main: Callable[[], int]) -> NoReturn:
    """Run ``main`` and exit with its code; a closed stdout ends the command with code 1."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null so the interpreter's own flush at exit fails no more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 1
    sys.exit(code)
