"""One Kafka client configuration, spelled for kafka-python, librdkafka, ``kafka-py`` and
Spark's Java connector.

:class:`KafkaClientConfig` is built once (from the settings, or on the executors from the
``kafka-py`` data source options) and checked then: an option kafka-python does not know,
or one librdkafka does not know when confluent-kafka is the data-path client, is an error
at start-up, never a silent switch of client; so is one the Java client does not know
when Spark's ``format("kafka")`` is asked for (:meth:`KafkaClientConfig.java_options`). Values are typed as kafka-python's defaults
for that argument. Secret values are never printed: :func:`redact` before printing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from kafka import KafkaConsumer, KafkaProducer

from streaming.kafka import kafka_python_fix
from streaming.kafka.errors import KafkaOptionError

kafka_python_fix.apply()  # every kafka-python client of the project is built from this module's config

Role = Literal["consumer", "producer", "admin"]

PREFIX = "kafka."
#: Data source option naming the data-path client; its values.
CLIENT_OPTION = "kafkaClient"
CLIENTS = ("confluent", "kafka-python")
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


class _ScrubSecrets(logging.Filter):
    """Replaces the secret option values of this process's configurations by ``"***"`` in a
    log record. kafka-python logs them at DEBUG: ``KafkaAdminClient`` its whole configuration,
    the connection every request, SASL/PLAIN's password included."""

    secrets: frozenset[str] = frozenset()  # replaced, never changed: other threads log

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = self.secrets
        text = record.getMessage()
        if any(s in text for s in secrets):
            for secret in secrets:
                text = text.replace(secret, REDACTED)
            record.msg, record.args = text, None
        return True


_SCRUB = _ScrubSecrets()


def _scrub_kafka_python_logs(secrets: set[str]) -> None:
    """Keep ``secrets`` out of every kafka-python logger's records from now on."""
    _SCRUB.secrets = _SCRUB.secrets | {s for s in secrets if s}
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if (name == "kafka" or name.startswith("kafka.")) and isinstance(logger, logging.Logger):
            if _SCRUB not in logger.filters:
                logger.addFilter(_SCRUB)


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


class Names(NamedTuple):
    """A kafka-python argument's names in the other clients: a property; ``None``: that client
    goes without it (kafka-python's own loop, batching or version negotiation, which changes
    nothing a client reads or writes); ``""``: no counterpart that keeps its meaning (refused)."""

    rdkafka: str | None
    """The librdkafka (confluent-kafka) property."""
    java: str | None
    """The Java client's property, given to Spark's ``format("kafka")`` as ``kafka.<property>``."""


#: The one table of names: kafka-python argument -> its librdkafka and Java client names.
#: The ``kafka-py`` option is the argument with dots (``kafka.sasl.plain.password``).
#: An argument missing here is refused by librdkafka on the confluent data path and by the
#: Java connector. The Java client takes SASL credentials as one JAAS configuration and a
#: CA file as a PEM trust store (:func:`_java_options`).
NAMES: dict[str, Names] = {
    "bootstrap_servers": Names("bootstrap.servers", "bootstrap.servers"),
    "client_id": Names("client.id", "client.id"),
    "security_protocol": Names("security.protocol", "security.protocol"),
    "sasl_mechanism": Names("sasl.mechanism", "sasl.mechanism"),
    "sasl_plain_username": Names("sasl.username", "sasl.jaas.config"),
    "sasl_plain_password": Names("sasl.password", "sasl.jaas.config"),
    "sasl_kerberos_service_name": Names("sasl.kerberos.service.name", "sasl.kerberos.service.name"),
    "ssl_check_hostname": Names("ssl.endpoint.identification.algorithm", "ssl.endpoint.identification.algorithm"),
    "ssl_cafile": Names("ssl.ca.location", "ssl.truststore.location"),
    # the Java client reads a client certificate and its key from one key store
    "ssl_certfile": Names("ssl.certificate.location", ""),
    "ssl_keyfile": Names("ssl.key.location", ""),
    "ssl_password": Names("ssl.key.password", "ssl.key.password"),
    # the JVM's own revocation checking, not a client option
    "ssl_crlfile": Names("ssl.crl.location", ""),
    "receive_message_max_bytes": Names("receive.message.max.bytes", None),
    "request_timeout_ms": Names("socket.timeout.ms", "request.timeout.ms"),
    "reconnect_backoff_ms": Names("reconnect.backoff.ms", "reconnect.backoff.ms"),
    "reconnect_backoff_max_ms": Names("reconnect.backoff.max.ms", "reconnect.backoff.max.ms"),
    "retry_backoff_ms": Names("retry.backoff.ms", "retry.backoff.ms"),
    "metadata_max_age_ms": Names("metadata.max.age.ms", "metadata.max.age.ms"),
    "connections_max_idle_ms": Names("connections.max.idle.ms", "connections.max.idle.ms"),
    # consumer
    "isolation_level": Names("isolation.level", "isolation.level"),
    "check_crcs": Names("check.crcs", "check.crcs"),
    "fetch_max_bytes": Names("fetch.max.bytes", "fetch.max.bytes"),
    "max_partition_fetch_bytes": Names("max.partition.fetch.bytes", "max.partition.fetch.bytes"),
    "fetch_min_bytes": Names("fetch.min.bytes", "fetch.min.bytes"),
    "fetch_max_wait_ms": Names(None, "fetch.max.wait.ms"),
    "max_poll_records": Names(None, "max.poll.records"),
    # producer
    "acks": Names("acks", "acks"),
    "retries": Names("retries", "retries"),
    "linger_ms": Names("linger.ms", "linger.ms"),
    "compression_type": Names("compression.type", "compression.type"),
    "enable_idempotence": Names("enable.idempotence", "enable.idempotence"),
    "delivery_timeout_ms": Names("delivery.timeout.ms", "delivery.timeout.ms"),
    "max_request_size": Names("message.max.bytes", "max.request.size"),
    "max_block_ms": Names(None, "max.block.ms"),
    "batch_size": Names(None, "batch.size"),
    "max_in_flight_requests_per_connection": Names(None, "max.in.flight.requests.per.connection"),
    # kafka-python only
    "api_version": Names(None, None),
    "bootstrap_timeout_ms": Names(None, None),
    "client_dns_lookup": Names(None, "client.dns.lookup"),
}
#: JAAS login modules of the SASL mechanisms that take a user name and a password.
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def _spark_text(name: str, value: Any) -> str:
    """A kafka-python argument's value as a Spark string option."""
    if isinstance(value, (list, tuple)):
        return ("," if name == "bootstrap_servers" else ".").join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _rdkafka_value(name: str, value: Any) -> Any:
    if name == "bootstrap_servers":
        return ",".join(value)
    if name == "ssl_check_hostname":
        return "https" if value else "none"
    return value


def _jaas_quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _java_options(given: Mapping[str, Any]) -> dict[str, str]:
    """Java client properties (string values) of typed kafka-python arguments."""
    refused = sorted(n for n in given if n not in NAMES or NAMES[n].java == "")
    if refused:
        raise KafkaOptionError(
            f"Kafka client options {refused} have no counterpart in the Java client of Spark's "
            "format(\"kafka\"): remove them, or use the kafka-py source (kafka.use_java_connector = false)"
        )
    conf: dict[str, str] = {}
    for name, value in given.items():
        prop = NAMES[name].java
        if prop is None or (name == "compression_type" and value is None) or prop == "sasl.jaas.config":
            continue
        if name == "ssl_check_hostname":
            conf[prop] = "https" if value else ""
        elif name == "ssl_cafile":
            conf.update({prop: value, "ssl.truststore.type": "PEM"})
        else:
            conf[prop] = _spark_text(name, value)
    if "sasl_plain_username" in given or "sasl_plain_password" in given:
        mechanism = str(given.get("sasl_mechanism", "PLAIN")).upper()
        if mechanism not in _JAAS_MODULES:
            raise KafkaOptionError(f"SASL mechanism {mechanism!r} takes no user name and password")
        user = _jaas_quoted(str(given.get("sasl_plain_username", "")))
        password = _jaas_quoted(str(given.get("sasl_plain_password", "")))
        conf["sasl.jaas.config"] = f"{_JAAS_MODULES[mechanism]} required username={user} password={password};"
    return conf


@dataclass(frozen=True, repr=False)
class KafkaClientConfig:
    """How every Kafka client of the project connects: built once, checked once.

    Holds kafka-python arguments (validated, typed) and the client of the data path (the
    ``kafka-py`` source's fetches and the sink's writes): ``confluent`` (librdkafka, the
    fastest here: docs/kafka.md) or ``kafka-python``. The admin side, watermarks and the
    scripts always use kafka-python. :meth:`kafka_python`, :meth:`rdkafka` and
    :meth:`spark_options` (``kafka-py``) and :meth:`java_options` (Spark's ``format("kafka")``)
    give each client its spelling from the one table :data:`NAMES`.
    Secrets never appear in ``repr``.

    Build it with :meth:`create` (kafka-python names) or :meth:`from_spark_options`.
    """

    options: tuple[tuple[str, Any], ...]
    """Sorted ``(kafka-python argument, typed value)`` pairs, ``bootstrap_servers`` first."""
    data_client: str = "confluent"

    @classmethod
    def create(
        cls,
        bootstrap_servers: str | Sequence[str],
        options: Mapping[str, Any] | None = None,
        data_client: str = "confluent",
    ) -> KafkaClientConfig:
        """A checked configuration from kafka-python arguments (dots or underscores).

        Raises
        ------
        KafkaOptionError
            If an option is unknown to kafka-python, takes a Python object, has a value of
            the wrong type, or has no librdkafka counterpart while ``data_client`` is
            ``confluent``; if the servers are empty or ``data_client`` is not one of
            :data:`CLIENTS`.
        """
        servers = bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
        given = {"kafka." + k.replace("_", "."): v for k, v in (options or {}).items()}
        return cls.from_spark_options({**given, "kafka.bootstrap.servers": servers, CLIENT_OPTION: data_client})

    @classmethod
    def from_spark_options(cls, options: Mapping[str, Any]) -> KafkaClientConfig:
        """A checked configuration from data source options (``kafka.*`` and ``kafkaClient``).

        Other options (``subscribe``, ``topic``, ...) are ignored; keys are case-insensitive.
        Raises :class:`KafkaOptionError` as :meth:`create` does.
        """
        typed: dict[str, Any] = {}
        client = "confluent"
        for key, value in options.items():
            if key.lower() == CLIENT_OPTION.lower():
                client = str(value).strip().lower()
            if not key.lower().startswith(PREFIX):
                continue
            name = key[len(PREFIX) :].lower().replace(".", "_")
            if name not in _KNOWN_KEYS:
                raise KafkaOptionError(f"unknown Kafka client option {key!r}: kafka-python has no argument {name!r}")
            if name in _OBJECT_KEYS:
                raise KafkaOptionError(f"option {key!r} takes a Python object, not a string option")
            typed[name] = _coerce(name, value)
        if client not in CLIENTS:
            raise KafkaOptionError(f"option {CLIENT_OPTION} must be one of {CLIENTS}, got {client!r}")
        if "bootstrap_servers" not in typed:
            raise KafkaOptionError("option kafka.bootstrap.servers is required")
        if client == "confluent":
            missing = sorted(n for n in typed if n not in NAMES)
            if missing:
                raise KafkaOptionError(
                    f"Kafka client options {missing} have no librdkafka counterpart: remove them, or "
                    "read and write with kafka-python (kafka.data_client = \"kafka-python\")"
                )
        servers = typed.pop("bootstrap_servers")
        secrets = {str(v) for n, v in typed.items() if redact({n: v})[n] == REDACTED}
        if secrets:
            _scrub_kafka_python_logs(secrets)
        return cls((("bootstrap_servers", tuple(servers)), *sorted(typed.items())), client)

    @property
    def bootstrap_servers(self) -> str:
        """The servers, comma-separated."""
        return ",".join(self.options[0][1])

    def kafka_python(self, role: Role) -> dict[str, Any]:
        """Keyword arguments for ``KafkaConsumer``, ``KafkaProducer`` or ``KafkaAdminClient``."""
        keys = _ROLE_KEYS[role]
        return {n: (list(v) if n == "bootstrap_servers" else v) for n, v in self.options if n in keys}

    def rdkafka(self, role: Role) -> dict[str, Any]:
        """confluent-kafka (librdkafka) properties of ``role``'s options.

        Raises
        ------
        KafkaOptionError
            If an option has no librdkafka counterpart (possible only when the data client
            is ``kafka-python``).
        """
        conf: dict[str, Any] = {}
        for name, value in self.options:
            if name not in _ROLE_KEYS[role] or (name == "compression_type" and value is None):
                continue
            if name not in NAMES:
                raise KafkaOptionError(f"Kafka client option {name!r} has no librdkafka counterpart")
            prop = NAMES[name].rdkafka
            if prop is not None:
                conf[prop] = _rdkafka_value(name, value)
        return conf

    def spark_options(self) -> dict[str, str]:
        """``kafka.*`` options and ``kafkaClient`` for the ``kafka-py`` source and sink."""
        options = {PREFIX + n.replace("_", "."): _spark_text(n, v) for n, v in self.options}
        return {**options, CLIENT_OPTION: self.data_client}

    def java_options(self, role: Role) -> dict[str, str]:
        """``kafka.*`` options of ``role`` for Spark's Java connector ``format("kafka")``.

        Raises
        ------
        KafkaOptionError
            If an option has no Java client counterpart (:data:`NAMES`), or SASL
            credentials come with a mechanism that takes none.
        """
        given = {n: v for n, v in self.options if n in _ROLE_KEYS[role]}
        return {PREFIX + prop: text for prop, text in _java_options(given).items()}

    def redacted(self) -> dict[str, Any]:
        """The kafka-python arguments with secrets replaced by ``"***"`` (safe to print)."""
        return redact({**dict(self.options), "data_client": self.data_client})

    def __repr__(self) -> str:
        return f"KafkaClientConfig({self.redacted()})"
