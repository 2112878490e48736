"""Kafka client configuration: Spark ``kafka.*`` options to kafka-python arguments and back.

Spark data source options are flat strings; kafka-python takes keyword arguments with
underscores (``bootstrap_servers``, ``sasl_plain_password``). An option
``kafka.sasl.plain.password`` maps to ``sasl_plain_password``. Values are coerced to the
type of kafka-python's default for that argument. Secret values are never logged: use
:func:`redact` before printing a configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from kafka import KafkaConsumer, KafkaProducer

from streaming.kafka.errors import KafkaOptionError

Role = Literal["consumer", "producer", "admin"]

PREFIX = "kafka."
#: Values of the ``kafkaClient`` option: which library talks to Kafka in reads and writes.
CLIENTS = ("auto", "confluent", "kafka-python")
_CONSUMER_KEYS = frozenset(KafkaConsumer.DEFAULT_CONFIG)
_PRODUCER_KEYS = frozenset(KafkaProducer.DEFAULT_CONFIG)
_ADMIN_KEYS = _CONSUMER_KEYS & _PRODUCER_KEYS
_KNOWN_KEYS = _CONSUMER_KEYS | _PRODUCER_KEYS
_ROLE_KEYS = {"consumer": _CONSUMER_KEYS, "producer": _PRODUCER_KEYS, "admin": _ADMIN_KEYS}
_DEFAULTS: dict[str, Any] = {**KafkaProducer.DEFAULT_CONFIG, **KafkaConsumer.DEFAULT_CONFIG}
# Arguments that take Python objects and therefore cannot travel as Spark string options.
_OBJECT_KEYS = frozenset(
    {
        "ssl_context",
        "sasl_oauth_token_provider",
        "socket_options",
        "selector",
        "kafka_client",
        "metric_reporters",
        "key_deserializer",
        "value_deserializer",
        "key_serializer",
        "value_serializer",
        "partitioner",
        "default_offset_commit_callback",
        "partition_assignment_strategy",
    }
)
_SECRET_MARKERS = ("password", "secret", "token", "jaas", "credential")
REDACTED = "***"


def redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of ``config`` with secret values replaced by ``"***"``.

    Parameters
    ----------
    config : Mapping[str, Any]
        kafka-python arguments or Spark options (``kafka.``-prefixed or not).

    Returns
    -------
    dict[str, Any]
        The same keys; values of keys naming a password, secret, token or JAAS
        configuration are redacted.
    """
    return {
        key: (REDACTED if any(m in key.lower() for m in _SECRET_MARKERS) else value)
        for key, value in config.items()
    }


def _coerce(name: str, value: Any) -> Any:
    """Convert a string option to the type kafka-python expects for ``name``."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if name == "bootstrap_servers":
        servers = [s.strip() for s in text.split(",") if s.strip()]
        if not servers:
            raise KafkaOptionError("kafka.bootstrap.servers is empty")
        return servers
    if name == "api_version":
        try:
            return tuple(int(p) for p in text.split("."))
        except ValueError:
            raise KafkaOptionError(
                f"kafka.api.version must look like 2.8.0, got {text!r}"
            ) from None
    if name == "acks":
        if text in ("all", "-1", "0", "1"):
            return text if text == "all" else int(text)
        raise KafkaOptionError(f"option kafka.acks must be all, -1, 0 or 1, got {text!r}")
    default = _DEFAULTS.get(name)
    try:
        if isinstance(default, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError:
        option = PREFIX + name.replace("_", ".")
        raise KafkaOptionError(
            f"option {option} expects a {type(default).__name__}, got {text!r}"
        ) from None
    return text


def client_kwargs(options: Mapping[str, Any], role: Role) -> dict[str, Any]:
    """Build kafka-python keyword arguments for one client from Spark options.

    Parameters
    ----------
    options : Mapping[str, Any]
        Data source options; only keys starting with ``kafka.`` are used.
    role : {"consumer", "producer", "admin"}
        The client to configure; options that only apply to another client are dropped.

    Returns
    -------
    dict[str, Any]
        Keyword arguments for ``KafkaConsumer``, ``KafkaProducer`` or ``KafkaAdminClient``.

    Raises
    ------
    KafkaOptionError
        If an option is unknown to kafka-python, takes a Python object, has a value of
        the wrong type, or ``kafka.bootstrap.servers`` is missing.
    """
    kwargs: dict[str, Any] = {}
    for key, value in options.items():
        if not key.lower().startswith(PREFIX):
            continue
        name = key[len(PREFIX) :].lower().replace(".", "_")
        if name not in _KNOWN_KEYS:
            raise KafkaOptionError(
                f"unknown Kafka client option {key!r}: kafka-python has no argument {name!r}"
            )
        if name in _OBJECT_KEYS:
            raise KafkaOptionError(f"option {key!r} takes a Python object, not a string option")
        if name in _ROLE_KEYS[role]:
            kwargs[name] = _coerce(name, value)
    if "bootstrap_servers" not in kwargs:
        raise KafkaOptionError("option kafka.bootstrap.servers is required")
    return kwargs


def options_from_config(config: Mapping[str, Any]) -> dict[str, str]:
    """Turn kafka-python arguments into ``kafka.``-prefixed Spark options.

    Parameters
    ----------
    config : Mapping[str, Any]
        kafka-python arguments such as ``{"bootstrap_servers": "127.0.0.1:9092"}``;
        keys may also be given in the dotted form (``"bootstrap.servers"``).

    Returns
    -------
    dict[str, str]
        ``{"kafka.bootstrap.servers": "127.0.0.1:9092", ...}``.

    Raises
    ------
    KafkaOptionError
        If a value is a Python object that cannot be passed as a string option.
    """
    options: dict[str, str] = {}
    for key, value in config.items():
        name = key.replace(".", "_")
        if name in _OBJECT_KEYS:
            raise KafkaOptionError(f"client option {key!r} takes a Python object, not a string")
        if isinstance(value, (list, tuple)):
            text = (
                ",".join(str(v) for v in value)
                if name == "bootstrap_servers"
                else ".".join(str(v) for v in value)
            )
        elif isinstance(value, bool):
            text = "true" if value else "false"
        else:
            text = str(value)
        options[PREFIX + name.replace("_", ".")] = text
    return options


def config_client_kwargs(config: Mapping[str, Any], role: Role) -> dict[str, Any]:
    """kafka-python arguments for ``role`` from a client config dict (validated, coerced)."""
    return client_kwargs(options_from_config(config), role)


# kafka-python argument -> librdkafka property.
_RDKAFKA_NAMES = {
    "bootstrap_servers": "bootstrap.servers",
    "client_id": "client.id",
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "sasl_kerberos_service_name": "sasl.kerberos.service.name",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "ssl_crlfile": "ssl.crl.location",
    "receive_message_max_bytes": "receive.message.max.bytes",
    "request_timeout_ms": "socket.timeout.ms",
    "reconnect_backoff_ms": "reconnect.backoff.ms",
    "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
    "retry_backoff_ms": "retry.backoff.ms",
    "metadata_max_age_ms": "metadata.max.age.ms",
    "connections_max_idle_ms": "connections.max.idle.ms",
    # consumer
    "isolation_level": "isolation.level",
    "check_crcs": "check.crcs",
    "fetch_max_bytes": "fetch.max.bytes",
    "max_partition_fetch_bytes": "max.partition.fetch.bytes",
    "fetch_min_bytes": "fetch.min.bytes",
    # producer
    "acks": "acks",
    "retries": "retries",
    "linger_ms": "linger.ms",
    "compression_type": "compression.type",
    "enable_idempotence": "enable.idempotence",
    "delivery_timeout_ms": "delivery.timeout.ms",
    "max_request_size": "message.max.bytes",
}
# kafka-python arguments with no librdkafka counterpart that change nothing a client
# reads or writes (timeouts of kafka-python's own loops, version probing, batching).
_RDKAFKA_IGNORED = frozenset(
    {
        "api_version",
        "bootstrap_timeout_ms",
        "client_dns_lookup",
        "fetch_max_wait_ms",
        "max_poll_records",
        "max_block_ms",
        "batch_size",
        "max_in_flight_requests_per_connection",
    }
)


def rdkafka_config(kwargs: Mapping[str, Any], role: Role) -> dict[str, Any] | None:
    """librdkafka (confluent-kafka) properties equivalent to kafka-python ``kwargs``.

    Parameters
    ----------
    kwargs : Mapping[str, Any]
        kafka-python arguments, as :func:`client_kwargs` builds them.
    role : {"consumer", "producer", "admin"}
        The client the properties are for (kept for symmetry with :func:`client_kwargs`).

    Returns
    -------
    dict or None
        None when confluent-kafka is not installed or an argument has no librdkafka
        equivalent, so that the caller falls back to kafka-python rather than silently
        dropping a setting (a security option above all).
    """
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return None
    conf: dict[str, Any] = {}
    for name, value in kwargs.items():
        if name in _RDKAFKA_IGNORED or name not in _ROLE_KEYS[role]:
            continue
        if name == "ssl_check_hostname":
            conf["ssl.endpoint.identification.algorithm"] = "https" if value else "none"
            continue
        if name not in _RDKAFKA_NAMES:
            return None
        if name == "bootstrap_servers" and not isinstance(value, str):
            value = ",".join(value)
        if name == "compression_type" and value is None:
            continue
        conf[_RDKAFKA_NAMES[name]] = value
    return conf


def client_option(options: Mapping[str, Any]) -> str:
    """The ``kafkaClient`` option: ``auto`` (default), ``confluent`` or ``kafka-python``.

    Raises
    ------
    KafkaOptionError
        If the value is not one of :data:`CLIENTS`.
    """
    value = str(options.get("kafkaClient", "auto")).strip().lower()
    if value not in CLIENTS:
        raise KafkaOptionError(f"option kafkaClient must be one of {CLIENTS}, got {value!r}")
    return value
