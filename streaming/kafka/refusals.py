"""Telling a broker that refuses the client's login from one that cannot be reached.

Neither client gives up on a broker that refuses its SASL login or its TLS handshake:
kafka-python retries until its bootstrap timeout and then says only ``Unable to bootstrap``,
and a librdkafka producer retries until its records time out. Both report the refusal on
the way (kafka-python in a log record that carries the exception, librdkafka to the
``error_cb``); these helpers turn it into :class:`AuthenticationError` naming the servers,
the security protocol, the mechanism and the user, never a secret.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kafka.errors import SaslAuthenticationFailedError

from streaming.kafka.client_config import KafkaClientConfig
from streaming.kafka.errors import AuthenticationError


def refusal(config: KafkaClientConfig, reason: str) -> AuthenticationError:
    """The error of ``config``'s client refused by the broker for ``reason``."""
    options = dict(config.options)
    who = f"security_protocol={options.get('security_protocol', 'PLAINTEXT')}"
    if "sasl_mechanism" in options:
        who += f", sasl_mechanism={options['sasl_mechanism']}, user {options.get('sasl_plain_username')!r}"
    return AuthenticationError(f"Kafka at {config.bootstrap_servers} refused the connection ({who}): {reason}")


def _refused_by(exc: BaseException | None) -> str | None:
    """The reason of a refused login or TLS handshake in ``exc`` or what it was raised from."""
    while exc is not None:
        if isinstance(exc, SaslAuthenticationFailedError):
            return str(exc)
        if isinstance(exc, ssl.SSLError):
            return f"TLS handshake failed: {exc}"
        # kafka-python wraps a TLS alert read from the broker (a client certificate it refused)
        # as KafkaConnectionError(SSLError), without chaining it
        wrapped = next((a for a in exc.args if isinstance(a, ssl.SSLError)), None)
        exc = exc.__cause__ or exc.__context__ or wrapped
    return None


class _Refusals(logging.Handler):
    """Keeps the reason of the first login or TLS failure that kafka-python logs."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.first: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        for arg in record.args if isinstance(record.args, tuple) else ():
            if self.first is None and isinstance(arg, BaseException):
                self.first = _refused_by(arg)


@contextmanager
def kafka_python_refusals(config: KafkaClientConfig) -> Iterator[None]:
    """Raise :class:`AuthenticationError` instead of a kafka-python error caused by a refused login.

    Wrap the creation (the bootstrap) of a kafka-python client of ``config``.
    """
    seen = _Refusals()
    logger = logging.getLogger("kafka")
    logger.addHandler(seen)
    try:
        yield
    except Exception:
        if seen.first is not None:
            raise refusal(config, seen.first) from None
        raise
    finally:
        logger.removeHandler(seen)


def rdkafka_refusals(found: list[str]) -> Callable[[Any], None]:
    """A librdkafka ``error_cb`` appending the text of each refused login or TLS handshake to ``found``."""
    from confluent_kafka import KafkaError

    refused = (KafkaError._AUTHENTICATION, KafkaError._SSL)

    def on_error(err: Any) -> None:
        # a TLS alert the broker sends after the handshake (TLS 1.3: a client certificate it
        # refused) comes as a transport error: "Receive failed: ...: SSL alert number 42"
        if err.code() in refused or (err.code() == KafkaError._TRANSPORT and "SSL alert number" in err.str()):
            found.append(err.str())

    return on_error
