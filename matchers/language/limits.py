"""Bounds on what a subscription may be, shared by the text and JSON forms and records."""

from matchers.expr import KEYWORDS as RESERVED_WORDS  # one definition, in matchers.expr

__all__ = ["MAX_DEPTH", "MAX_ID_LENGTH", "RESERVED_WORDS"]

MAX_DEPTH = 100
"""Deepest nesting of AND/OR/NOT accepted (keeps every recursive pass far from Python's limit)."""

MAX_ID_LENGTH = 256
"""Longest subscription id accepted, in characters."""
