"""One registry for expressions and patterns, held as columns (issue 29): the match query's,
whose pattern view (:mod:`.view`) the patterns query reads.

:class:`ColumnRegistry` is the driver's side (:mod:`.registry`), :func:`read_shard` an
executor's (a shard's live subscriptions as an Arrow table), :class:`ChangeBatch` the
changes of a micro-batch as columns (:mod:`.columns`), :mod:`.files` the Arrow IPC layout;
:func:`.parse.parse_records` turns subscription records into rows (in the match query's tasks) and
:func:`.admit.admit` those rows into a batch's changes and error records (on the driver);
:mod:`.shards` builds an executor's index from the files, :mod:`.view` writes and reads the
pattern view, :mod:`.migrate` converts the pickled registry and imports the pattern registry of
earlier releases.
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
