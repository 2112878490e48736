"""Subscription records: one JSON object per subscription, as read from a file or a topic.

A record is ``{"id": "s1", "expr": "price < 100"}`` (text form), ``{"id": "s1", "json":
{"all": [...]}}`` (JSON form) or ``{"id": "s1", "rule": {"source": ["aws.ec2"]}}`` (an
EventBridge-style pattern, :mod:`.eventbridge`), optionally with ``"expires"``: seconds since the epoch
or an ISO-8601 time (``"2026-01-31T12:00:00Z"``; without an offset it is UTC).  Any
other field is an error, so a misspelt one is never silently ignored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from matchers.errors import SubscriptionError
from matchers.expr import DEFAULT_MAX_TERMS, Subscription, to_text

from .eventbridge import parse_pattern
from .jsonform import describe, parse_json, to_json
from .limits import MAX_ID_LENGTH
from .text import parse_text

__all__ = ["parse_record", "parse_subscription", "to_record", "check_id", "parse_expires"]

FIELDS = ("id", "expr", "json", "rule", "expires")
FORMS = ("expr", "json", "rule")
"""The fields of which a record has exactly one: the text form, the JSON form, an event pattern."""
"""The fields a subscription record may have."""


def check_id(sub_id: Any) -> str:
    """Return ``sub_id`` if it is a valid subscription id (a non-empty string of at most 256 characters)."""
    if not isinstance(sub_id, str):
        raise SubscriptionError(f"the id must be a string, not {_describe(sub_id)}", position="$.id",
                                expected="a non-empty string")
    if not sub_id:
        raise SubscriptionError("the id is empty", position="$.id", expected="a non-empty string")
    if len(sub_id) > MAX_ID_LENGTH:
        raise SubscriptionError(f"the id has {len(sub_id)} characters, more than {MAX_ID_LENGTH}",
                                sub_id[:40] + "...", "$.id", f"at most {MAX_ID_LENGTH} characters")
    return sub_id


def parse_expires(value: Any, sub_id: str | None = None) -> float | None:
    """Seconds since the epoch from a number, an ISO-8601 string (UTC unless it has an offset) or null."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value) if abs(value) <= 1e300 else math.inf
        if not math.isfinite(seconds):
            raise SubscriptionError(f"expires must be a finite number of seconds, not {value!r}", sub_id,
                                    "$.expires", "seconds since the epoch")
        return seconds
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.strip())
        except ValueError:
            raise SubscriptionError(f"expires {value!r} is not an ISO-8601 time", sub_id, "$.expires",
                                    "an ISO-8601 time such as 2026-01-31T12:00:00Z") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    raise SubscriptionError(f"expires must be a number or a string, not {_describe(value)}", sub_id,
                            "$.expires", "seconds since the epoch or an ISO-8601 time")


def parse_record(obj: Any, max_terms: int = DEFAULT_MAX_TERMS) -> Subscription:
    """A :class:`~matchers.expr.Subscription` from a decoded subscription record.

    Parameters
    ----------
    obj : the decoded record, ``{"id": ..., "expr": ...}``, ``{"id": ..., "json": ...}`` or
        ``{"id": ..., "rule": ...}``, optionally with ``"expires"``.
    max_terms : bound on the conjunctions of the DNF; a subscription over it is rejected.

    Raises
    ------
    SubscriptionError
        Naming the subscription once its id is known; ``position`` is ``"line:column"`` in
        ``expr``, or a JSON path in the record (``$.json.all[1][2]``, ``$.rule.detail[0]``, ``$.expires``).
    """
    if not isinstance(obj, Mapping):
        raise SubscriptionError(f"a subscription record must be a JSON object, not {_describe(obj)}",
                                position="$", expected='{"id": ..., "expr": ...}, {"id": ..., "json": ...} or '
                                                       '{"id": ..., "rule": ...}')
    if "id" not in obj:
        raise SubscriptionError("the record has no id", position="$", expected='an "id" field')
    sub_id = check_id(obj["id"])
    unknown = [key for key in obj if key not in FIELDS]
    if unknown:
        raise SubscriptionError(f"unknown field{'s' if len(unknown) > 1 else ''} "
                                f"{', '.join(repr(k) for k in unknown)}", sub_id, f"$.{unknown[0]}",
                                "only " + ", ".join(FIELDS))
    forms = [f for f in FORMS if f in obj]
    if len(forms) != 1:
        what = ("both " if len(forms) == 2 else "all of ") + " and ".join(f'"{f}"' for f in forms) if forms else \
            'none of "expr", "json" and "rule"'
        raise SubscriptionError(f"the record has {what}", sub_id, "$",
                                'exactly one of "expr" (text form), "json" (JSON form) and "rule" (event pattern)')
    if forms == ["rule"]:
        expr = parse_pattern(obj["rule"], sub_id, "$.rule")
    elif forms == ["expr"]:
        text = obj["expr"]
        if not isinstance(text, str):
            raise SubscriptionError(f'"expr" must be a string (the text form), not {_describe(text)}; '
                                    'put the JSON form under "json"', sub_id, "$.expr", "a string")
        expr = parse_text(text, sub_id)
    else:
        expr = parse_json(obj["json"], sub_id, "$.json")
    return Subscription.of(sub_id, expr, max_terms, parse_expires(obj.get("expires"), sub_id))


def parse_subscription(text: str, sub_id: str, max_terms: int = DEFAULT_MAX_TERMS,
                       expires: float | None = None) -> Subscription:
    """A :class:`~matchers.expr.Subscription` from the text form and an id."""
    check_id(sub_id)
    return Subscription.of(sub_id, parse_text(text, sub_id), max_terms, expires)


def to_record(sub: Subscription, form: str = "text") -> dict[str, Any]:
    """The record of a subscription (``form`` ``"text"`` or ``"json"``); :func:`parse_record` reads it back."""
    if form == "text":
        record: dict[str, Any] = {"id": sub.id, "expr": to_text(sub.expr)}
    elif form == "json":
        record = {"id": sub.id, "json": to_json(sub.expr)}
    else:
        raise ValueError(f"form must be 'text' or 'json', not {form!r}")
    if sub.expires is not None:
        record["expires"] = sub.expires
    return record


def _describe(value: Any) -> str:
    """:func:`.jsonform.describe`, a scalar with its type."""
    text = describe(value)
    return text if value is None or isinstance(value, Mapping | list) else f"{type(value).__name__} {text}"
