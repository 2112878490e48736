"""The project's exceptions: one root, one class per kind of bad input."""

from __future__ import annotations


class PubSubError(Exception):
    """Root of every error the project raises on purpose."""


class SubscriptionError(PubSubError):
    """A subscription that cannot be registered.

    Parameters
    ----------
    message : what is wrong.
    sub_id : the subscription's id, when known.
    position : 1-based column in the text form (or a JSON path), when known.
    expected : what the parser expected there, when it applies.
    """

    def __init__(
        self,
        message: str,
        sub_id: str | None = None,
        position: int | str | None = None,
        expected: str | None = None,
    ):
        self.reason = message
        self.sub_id = sub_id
        self.position = position
        self.expected = expected
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.sub_id is not None:
            parts.append(f"subscription {self.sub_id!r}")
        if self.position is not None:
            parts.append(f"at {self.position}")
        head = " ".join(parts)
        text = f"{head}: {self.reason}" if head else self.reason
        if self.expected:
            text += f" (expected {self.expected})"
        return text

    def with_id(self, sub_id: str) -> SubscriptionError:
        """The same error, naming the subscription."""
        return SubscriptionError(self.reason, sub_id, self.position, self.expected)


class TooManyRows(PubSubError):
    """An event whose arrays make more rows than allowed (:func:`matchers.events.flatten`)."""

    def __init__(self, bound: int):
        super().__init__(f"its arrays make more than {bound} rows")
        self.bound = bound
