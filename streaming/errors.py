"""Exceptions of the service's stored state (the Kafka connector's are :mod:`streaming.kafka.errors`)."""

from __future__ import annotations

from matchers.errors import PubSubError


class RegistryError(PubSubError, RuntimeError):
    """A registry on disk is inconsistent or unreadable (a missing or pruned version, a bad file)."""


class CheckpointError(PubSubError, RuntimeError):
    """A query's checkpoint does not say what a micro-batch reads (its offset ranges)."""
