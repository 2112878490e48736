"""The check of a parse error shared by the text and JSON form tests."""

from __future__ import annotations

from matchers.errors import SubscriptionError


def check_error(err: SubscriptionError, sub_id: str, position: str, message: str, expected: str | None) -> None:
    """``err`` names ``sub_id`` and ``position``, its reason holds ``message``, and what it
    expected starts with ``expected`` (None: not checked)."""
    assert err.position == position
    assert message in err.reason
    if expected is not None:
        assert err.expected is not None and err.expected.startswith(expected)
    assert err.sub_id == sub_id
    assert str(err).startswith(f"subscription '{sub_id}' at {position}: ")
