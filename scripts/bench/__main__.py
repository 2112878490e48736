"""``python -m scripts.bench``: the benchmark harness (see :mod:`scripts.bench.harness`)."""

import sys

from scripts.bench.harness import main

if __name__ == "__main__":
    sys.exit(main())
