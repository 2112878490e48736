"""Bounds on what a subscription may be, shared by the text and JSON forms and records."""

MAX_DEPTH = 100
"""Deepest nesting of AND/OR/NOT accepted (keeps every recursive pass far from Python's limit)."""

MAX_ID_LENGTH = 256
"""Longest subscription id accepted, in characters."""

RESERVED_WORDS = frozenset({"and", "or", "not", "in", "between", "like", "matches", "true", "false"})
"""Keywords of the text form (any letter case): an attribute spelt like one must be back-quoted."""
