"""``python -m matchers.language --lint FILE...``: check subscription records (see :mod:`.lint`)."""

import sys

from .lint import main

sys.exit(main())
