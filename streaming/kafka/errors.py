"""Exceptions raised by the Kafka connector."""

from __future__ import annotations

from matchers.errors import PubSubError


class KafkaConnectorError(PubSubError, RuntimeError):
    """Root of every error raised by :mod:`streaming.kafka`."""


class KafkaOptionError(KafkaConnectorError, ValueError):
    """An option given to the source, the sink or a client is invalid."""


class BrokerError(KafkaConnectorError):
    """The embedded broker binary is missing, does not run, or does not answer."""


class FetchTimeoutError(KafkaConnectorError):
    """A partition did not deliver the records of an offset range in time."""


class DataLossError(KafkaConnectorError):
    """Offsets that a query needs are no longer (or not yet) in the log."""


class AuthenticationError(KafkaConnectorError):
    """The broker refused the client's SASL login or TLS handshake."""


class DeliveryError(KafkaConnectorError):
    """The producer could not deliver every record of a write."""
