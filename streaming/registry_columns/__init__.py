"""One registry for expressions and patterns, held as columns (issue 29; not wired in yet).

:class:`ColumnRegistry` is the driver's side (:mod:`.registry`), :func:`read_shard` an
executor's (a shard's live subscriptions as an Arrow table), :class:`ChangeBatch` the
changes of a micro-batch as columns (:mod:`.columns`), :mod:`.files` the Arrow IPC layout;
:func:`.parse.parse_records` turns subscription records into rows (in tasks) and
:func:`.admit.admit` those rows into a batch's changes and error records (on the driver).
"""

from streaming.registry_columns.columns import (
    DELETE,
    EXPRESSION,
    PATTERN,
    UPSERT,
    ChangeBatch,
    ChangeBatchError,
)
from streaming.registry_columns.registry import Applied, ColumnRegistry, read_shard

__all__ = ["DELETE", "EXPRESSION", "PATTERN", "UPSERT", "Applied", "ChangeBatch", "ChangeBatchError",
           "ColumnRegistry", "read_shard"]
