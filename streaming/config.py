"""Settings of the service: one frozen, typed object loaded from ``conf/pubsub.toml``.

Precedence, lowest first: the defaults of the dataclasses below, the TOML file,
environment variables ``PUBSUB_<SECTION>_<KEY>`` and ``--set section.key=value`` flags
(read by :func:`streaming.config_sources.load`).
Kafka client options (``[kafka.client]``, ``PUBSUB_KAFKA_CLIENT_<OPTION>``,
``--set kafka.client.<option>=...``) and Spark settings (``[spark.conf]``,
``--set spark.conf.<key>=...``) pass through unchanged; secrets among the Kafka options
never appear in ``repr`` or :meth:`Settings.describe`.

Relative paths (the default configuration file, ``spark.checkpoint_dir``,
``status.status_file``, ``status.log_dir``, ``kafka.embedded_data_dir``) resolve against :data:`PROJECT_ROOT`, not the working directory,
so every command finds the same files from wherever it runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from matchers.errors import PubSubError
from matchers.events import ARRAY_ROWS
from matchers.scan_types import ScanLimits
from streaming.kafka.client_config import CLIENTS, KafkaClientConfig, redact
from streaming.kafka.errors import KafkaOptionError
from streaming.storage import join, to_uri

PROJECT_ROOT = Path(__file__).resolve().parents[1]
"""Root of the project: the directory holding ``conf/`` and the ``streaming`` package."""

DEFAULT_PATH = PROJECT_ROOT / "conf" / "pubsub.toml"
ENV_PREFIX = "PUBSUB_"
PAYLOADS = ("event", "id")


class ConfigError(PubSubError, ValueError):
    """A setting that is unknown or has a value of the wrong type."""


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap_servers: str = ""
    use_java_connector: bool = True
    events_topic: str = "events"
    subscriptions_topic: str = "subscriptions"
    notifications_topic: str = "notifications"
    errors_topic: str = "errors"
    events_partitions: int = 2
    subscriptions_partitions: int = 1
    notifications_partitions: int = 2
    errors_partitions: int = 1
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int = 100_000
    embedded_data_dir: str = "var/broker"
    # Client of the data path (the source's reads, the sink's writes): "confluent" or "kafka-python".
    data_client: str = "confluent"
    client: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        return _repr_redacting(self, "client")

    def client_config(self, bootstrap_servers: str | None = None) -> KafkaClientConfig:
        """The one Kafka client configuration: ``bootstrap_servers`` (else the setting) and ``client``."""
        servers = bootstrap_servers or self.bootstrap_servers
        if not servers:
            raise ConfigError("no Kafka bootstrap servers: configure kafka.bootstrap_servers or start the embedded broker")
        try:
            return KafkaClientConfig.create(servers, self.client, self.data_client)
        except KafkaOptionError as exc:
            raise ConfigError(f"kafka.client: {exc}") from None

    def topic_partitions(self) -> dict[str, int]:
        """The service's topics and the partition counts to create them with."""
        return {
            self.events_topic: self.events_partitions,
            self.subscriptions_topic: self.subscriptions_partitions,
            self.notifications_topic: self.notifications_partitions,
            self.errors_topic: self.errors_partitions,
        }


@dataclass(frozen=True)
class SparkSettings:
    app_name: str = "pubsub-match"
    master: str = "local[2]"
    trigger_interval: str = "1 second"
    checkpoint_dir: str = "var/checkpoint"
    # An empty job when none ran for this many seconds keeps the Python workers and their
    # indexes alive (Spark stops them after a minute idle: streaming.spark.WorkerKeeper); 0: none.
    worker_keepalive_s: float = 30.0
    conf: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        return _repr_redacting(self, "conf")


@dataclass(frozen=True)
class MatchSettings:
    matcher: str = "auto"
    max_terms: int = 256
    snapshot_every: int = 50
    snapshots_kept: int = 2
    max_catchup_versions: int = 20
    shared_index: bool = True
    event_id_field: str = "id"
    valid_until_field: str = "valid_until"
    max_validity_s: float = 86400.0
    shards: int = 1
    route_by: str = ""
    route_spread: int = 1
    params: Mapping[str, Any] = field(default_factory=dict)

    def matcher_params(self) -> tuple[tuple[str, Any], ...]:
        """``params`` as sorted pairs (what an index spec carries to the executors)."""
        return tuple(sorted(self.params.items()))


@dataclass(frozen=True)
class NotificationSettings:
    payload: str = "event"


@dataclass(frozen=True)
class PatternsSettings:
    """The Cayuga patterns query (:mod:`streaming.patterns`); see ``[patterns]`` in ``conf/pubsub.toml``.

    Parameters
    ----------
    enabled : run the patterns query along with the match query.
    starting_offsets : where they start without a checkpoint ("" follows ``kafka.starting_offsets``).
    trigger_interval : their processing-time trigger ("" follows ``spark.trigger_interval``).
    stream_field, time_field, start_field : reserved event fields: the stream name, the
        end time ``t1`` and the start time ``t0`` (integer ticks); the event's id is
        ``match.event_id_field``.
    default_stream : stream of an event without a stream field.
    time_unit_ms : milliseconds per tick (event time).
    watermark_delay : how far (event time) events of one key may arrive out of order
        (``"<number> <unit>"``, unit ``ms``, ``seconds``, ``minutes``, ``hours`` or ``days``).
    key_buckets : state keys per partition attribute (values hashed into this many).
    state_partitions : partitions of the keyed state (Spark's state store: the ``patterns``
        query's shuffle partitions; fixed for a checkpoint).
    max_keys_per_event : bound on the state keys one event goes to.
    state_timeout : ticks after which an instance is dropped whatever its pattern (0: only
        its ``DUR`` bound ends it; a bound on the state of patterns without one).
    unknown_attribute_events : events of a stream after which a pattern reading an attribute
        that none of them carried is reported (log, errors topic, status); 0: never
        (:mod:`streaming.patterns.census`).
    stream_attribute_names : attribute names kept per stream for that report's "did you
        mean" (besides those patterns read).
    """

    enabled: bool = True
    starting_offsets: str = ""
    trigger_interval: str = ""
    stream_field: str = "stream"
    time_field: str = "ts"
    start_field: str = "ts_start"
    default_stream: str = "events"
    time_unit_ms: int = 1000
    watermark_delay: str = "5 seconds"
    key_buckets: int = 64
    state_partitions: int = 4
    max_keys_per_event: int = 64
    state_timeout: int = 0
    unknown_attribute_events: int = 1000
    stream_attribute_names: int = 256


@dataclass(frozen=True)
class LimitsSettings:
    """Bounds on what one record may hold; a record past one is an error record, never a crash.

    Parameters
    ----------
    event_bytes : largest event record value.
    depth : deepest nesting of objects and arrays in an event (a flat object has depth 1).
    attributes : most attributes of an event after flattening: distinct names of its rows (nulls count).
    string_length : longest string value or attribute name of an event, in characters.
    subscription_bytes : largest subscription record value.
    predicates : most predicates of one subscription.
    array_rows : most rows of one event with arrays (one per choice of one element of
        each array, :func:`matchers.events.flatten`).
    message_bytes : largest key plus value the service sends; a notification past it goes
        out in the id-only form. Kafka's producer default (librdkafka ``message.max.bytes``);
        it may not exceed ``kafka.client.max_request_size`` when that is set.
    """

    event_bytes: int = 1_000_000
    depth: int = 32
    attributes: int = 1_000
    string_length: int = 65_536
    subscription_bytes: int = 65_536
    predicates: int = 1_000
    array_rows: int = ARRAY_ROWS
    message_bytes: int = 1_000_000

    def scan(self) -> ScanLimits:
        """These limits as the JSON scan (:func:`matchers.scan.scan_records`) takes them."""
        return ScanLimits(depth=self.depth, attributes=self.attributes, string_length=self.string_length,
                          array_rows=self.array_rows, event_bytes=self.event_bytes)


MAX_DEPTH = 256
"""Highest ``limits.depth`` (below Python's recursion limit and orjson's 1024)."""
PRODUCER_MESSAGE_BYTES = 1_000_000
"""The producer's own bound on a record when ``kafka.client.max_request_size`` is not set."""


TENANT_NAME = r"[A-Za-z0-9_-]{1,64}"
"""A tenant's name: letters, digits, ``_`` and ``-`` (no ``.``, so no topic of one tenant
extends another's name; no ``:``, the separator of tenant and subscription id)."""
QUOTAS = ("subscriptions", "predicates", "patterns", "pattern_instances")
TOPIC_NAME = r"[A-Za-z0-9._-]{1,249}"
"""A Kafka topic name (no ``:`` or ``>``, which :mod:`streaming.tenants` uses inside ids)."""


@dataclass(frozen=True)
class TenantsSettings:
    """Tenants served besides the operator (:mod:`streaming.tenants`) and their quotas.

    Parameters
    ----------
    names : comma-separated tenant names; "" keeps the single-tenant layout.
    subscriptions : most subscriptions a tenant holds at once (0: no bound).
    predicates : most predicates over all of a tenant's subscriptions (0: no bound).
    patterns : most Cayuga patterns a tenant holds at once (0: no bound).
    pattern_instances : most live instances of a tenant's patterns, over all state partitions;
        a tenant at it starts no new instances in the next batch (0: no bound).
    quotas : per-tenant overrides, ``{"<tenant>.<quota>": n}`` or ``{"<tenant>": {"<quota>": n}}``
        (``<tenant>_<quota>`` from the environment).
    targets : per-tenant prefix of the target topics its subscriptions may name,
        ``{"<tenant>": "<prefix>"}`` (default ``<notifications_topic>.<tenant>.``).
    """

    names: str = ""
    subscriptions: int = 0
    predicates: int = 0
    patterns: int = 0
    pattern_instances: int = 0
    quotas: Mapping[str, Any] = field(default_factory=dict)
    targets: Mapping[str, Any] = field(default_factory=dict)

    @property
    def tenants(self) -> tuple[str, ...]:
        return tuple(n.strip() for n in self.names.split(",") if n.strip())

    def quota_table(self) -> dict[str, dict[str, int]]:
        """``{tenant: {quota: bound}}`` of every tenant (0: no bound).

        Raises
        ------
        ConfigError
            On an unknown tenant or quota, or a bound that is not a non-negative integer.
        """
        table = {t: {q: getattr(self, q) for q in QUOTAS} for t in self.tenants}
        flat: dict[str, Any] = {}
        for key, value in self.quotas.items():
            if isinstance(value, Mapping):
                flat.update({f"{key}.{k}": v for k, v in value.items()})
            else:
                flat[key] = value
        for key, value in flat.items():
            if "." in key:
                tenant, _, quota = key.rpartition(".")
            else:  # <tenant>_<quota> from PUBSUB_TENANTS_QUOTAS_* (a quota's name may hold "_")
                quota = next((q for q in QUOTAS if key.endswith("_" + q)), "")
                tenant = key[:-len(quota) - 1]
            if tenant not in table or quota not in QUOTAS:
                raise ConfigError(f"tenants.quotas: {key!r} is not <tenant>.<quota> of a configured tenant "
                                  f"({', '.join(table) or 'none'}) and one of {QUOTAS}")
            bound = _coerce(value, int, f"tenants.quotas.{key}")
            if bound < 0:
                raise ConfigError(f"tenants.quotas.{key} must be 0 (no bound) or positive")
            table[tenant][quota] = bound
        return table

    def target_prefixes(self, notifications_topic: str) -> dict[str, str]:
        """``{tenant: prefix}``: the topics each tenant's subscriptions may name as their target.

        Raises
        ------
        ConfigError
            On an unknown tenant, a prefix that is not the start of a topic name, or one
            that covers another tenant's.
        """
        table = {t: f"{notifications_topic}.{t}." for t in self.tenants}
        for tenant, prefix in self.targets.items():
            if tenant not in table:
                raise ConfigError(f"tenants.targets: {tenant!r} is not a configured tenant ({', '.join(table) or 'none'})")
            if not isinstance(prefix, str) or not re.fullmatch(TOPIC_NAME, prefix):
                raise ConfigError(f"tenants.targets.{tenant} must be the start of a topic name "
                                  f"(letters, digits, '.', '_', '-'), not {prefix!r}")
            table[tenant] = prefix
        for a, b in itertools.permutations(table, 2):
            if table[b].startswith(table[a]):
                raise ConfigError(f"tenants.targets: tenant {a!r}'s prefix {table[a]!r} covers tenant {b!r}'s "
                                  f"{table[b]!r}: each tenant's target topics must be its own")
        return table


@dataclass(frozen=True)
class StatusSettings:
    status_file: str = "var/status.json"
    history: int = 20
    log_level: str = "INFO"
    log_dir: str = "var/logs"


@dataclass(frozen=True)
class Settings:
    """Every setting of the service (see ``conf/pubsub.toml`` for what each means)."""

    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    spark: SparkSettings = field(default_factory=SparkSettings)
    match: MatchSettings = field(default_factory=MatchSettings)
    notifications: NotificationSettings = field(default_factory=NotificationSettings)
    patterns: PatternsSettings = field(default_factory=PatternsSettings)
    status: StatusSettings = field(default_factory=StatusSettings)
    limits: LimitsSettings = field(default_factory=LimitsSettings)
    tenants: TenantsSettings = field(default_factory=TenantsSettings)

    @property
    def checkpoint(self) -> str:
        """The checkpoint location as a URI (a path without scheme made absolute: ``file://...``)."""
        return to_uri(self.spark.checkpoint_dir)

    @property
    def registry_dir(self) -> str:
        """The pickled registry of earlier releases (read once, to convert it: :attr:`registry_columns_dir`)."""
        return join(self.checkpoint, "registry")

    @property
    def registry_columns_dir(self) -> str:
        """The subscription registry (:class:`streaming.registry_columns.ColumnRegistry`)."""
        return join(self.checkpoint, "registry-columns")

    @property
    def validity_dir(self) -> str:
        return join(self.checkpoint, "validity")

    def describe(self) -> dict[str, dict[str, Any]]:
        """Every setting as nested plain dicts, secrets of Kafka clients and Spark redacted (safe to print)."""
        out: dict[str, dict[str, Any]] = {}
        for section in dataclasses.fields(self):
            values = dataclasses.asdict(getattr(self, section.name))
            if section.name == "kafka":
                values["client"] = redact(values["client"])
            if section.name == "spark":  # e.g. spark.hadoop.fs.s3a.secret.key
                values["conf"] = redact(values["conf"])
            out[section.name] = values
        return out

    def replace(self, **sections: Mapping[str, Any]) -> Settings:
        """A copy with some settings changed: ``replace(kafka={"events_topic": "e2"})``."""
        settings = overlay(self, {name: dict(values) for name, values in sections.items()}, "replace()")
        check_tenants(settings)
        return settings


CHECKPOINT_SCHEMES = frozenset({"file", "hdfs", "viewfs", "s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss"})
"""File systems a checkpoint location may name (those of ``pyarrow.fs`` and Hadoop's S3 aliases)."""

PASS_THROUGH = {("kafka", "client"), ("spark", "conf"), ("tenants", "quotas"), ("tenants", "targets"),
                 ("match", "params")}
PATH_SETTINGS = (("spark", "checkpoint_dir"), ("status", "status_file"), ("status", "log_dir"), ("kafka", "embedded_data_dir"))
"""Settings holding a local path, made absolute against :data:`PROJECT_ROOT` by :func:`streaming.config_sources.load`."""


def _repr_redacting(settings: Any, name: str) -> str:
    """The repr of a settings dataclass, its options mapping ``name`` redacted."""
    fields = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings) if f.name != name}
    return f"{type(settings).__name__}({fields}, {name}={redact(getattr(settings, name))})"


def section_types() -> dict[str, type]:
    """The settings' sections by name (their dataclasses)."""
    return {f.name: get_type_hints(Settings)[f.name] for f in dataclasses.fields(Settings)}


def _coerce(value: Any, kind: Any, where: str) -> Any:
    """``value`` (a TOML value or a string from the environment/flags) as type ``kind``."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.strip().lower() in ("true", "1", "yes")
        raise ConfigError(f"{where} must be true or false, not {value!r}")
    if kind is int or kind is float:
        wrong = ConfigError(f"{where} must be {'an integer' if kind is int else 'a number'}, not {value!r}")
        if isinstance(value, bool) or (kind is int and isinstance(value, float) and not value.is_integer()):
            raise wrong
        try:
            return kind(value)
        except (TypeError, ValueError):
            raise wrong from None
    if kind is str:
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{where} must be a string, not {value!r}")
        return str(value)
    raise AssertionError(kind)


def _literal(value: Any) -> Any:
    """A TOML value as it is; a string from the environment or ``--set`` read as a TOML literal
    when it is one (``32``, ``0.5``, ``true``), else kept as the string."""
    if not isinstance(value, str):
        return value
    try:
        return tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return value


def overlay(base: Settings, overrides: Mapping[str, Mapping[str, Any]], source: str) -> Settings:
    """``base`` with ``overrides`` (``{section: {key: value}}``, from ``source``) applied, coerced and validated."""
    sections = section_types()
    new: dict[str, Any] = {}
    for name in overrides:
        if name not in sections:
            raise ConfigError(f"{source}: unknown section [{name}]; known: {', '.join(sections)}")
    for name, cls in sections.items():
        current = getattr(base, name)
        values = overrides.get(name)
        if not values:
            new[name] = current
            continue
        hints = get_type_hints(cls)
        changes: dict[str, Any] = {}
        for key, value in values.items():
            if key not in hints:
                raise ConfigError(
                    f"{source}: unknown setting {name}.{key}; known: {', '.join(sorted(hints))}"
                )
            if (name, key) in PASS_THROUGH:
                if not isinstance(value, Mapping):
                    raise ConfigError(f"{source}: {name}.{key} must be a table of options")
                if (name, key) == ("match", "params"):  # typed values, also from the environment and --set
                    value = {k: _literal(v) for k, v in value.items()}
                changes[key] = {**getattr(current, key), **{str(k): v for k, v in value.items()}}
            else:
                changes[key] = _coerce(value, hints[key], f"{source}: {name}.{key}")
        new[name] = dataclasses.replace(current, **changes)
    settings = Settings(**new)
    _validate(settings)
    return settings


_UNIT_MS = {"ms": 1, "millisecond": 1, "milliseconds": 1, "second": 1000, "seconds": 1000, "s": 1000,
            "minute": 60_000, "minutes": 60_000, "min": 60_000, "hour": 3_600_000, "hours": 3_600_000,
            "day": 86_400_000, "days": 86_400_000}


def interval_ms(text: str) -> int:
    """Milliseconds of an interval ``"<number> <unit>"`` (``"5 seconds"``, ``"500 ms"``).

    Raises
    ------
    ValueError
        If the text is no such interval, or a negative one.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*", text)
    if m is None or m.group(2).lower() not in _UNIT_MS:
        raise ValueError(f"{text!r} is not an interval like \"5 seconds\" (units: {', '.join(sorted(_UNIT_MS))})")
    return round(float(m.group(1)) * _UNIT_MS[m.group(2).lower()])


def _validate(s: Settings) -> None:
    if s.notifications.payload not in PAYLOADS:
        raise ConfigError(f"notifications.payload must be one of {PAYLOADS}, not {s.notifications.payload!r}")
    if s.kafka.starting_offsets not in ("earliest", "latest"):
        raise ConfigError(f"kafka.starting_offsets must be earliest or latest, not {s.kafka.starting_offsets!r}")
    for key in ("events_partitions", "subscriptions_partitions", "notifications_partitions", "errors_partitions"):
        if getattr(s.kafka, key) < 1:
            raise ConfigError(f"kafka.{key} must be at least 1")
    if s.spark.worker_keepalive_s != 0 and not 0 < s.spark.worker_keepalive_s < 60:
        raise ConfigError("spark.worker_keepalive_s must be 0 (none) or between 0 and 60 (Spark stops a worker "
                          "idle for a minute)")
    if s.kafka.max_offsets_per_trigger < 0:
        raise ConfigError("kafka.max_offsets_per_trigger must be 0 (no cap) or positive")
    for key in ("max_terms", "snapshot_every", "snapshots_kept", "max_catchup_versions", "shards", "route_spread"):
        if getattr(s.match, key) < 1:
            raise ConfigError(f"match.{key} must be at least 1")
    if s.match.route_by != s.match.route_by.strip() or "\0" in s.match.route_by:
        raise ConfigError(f"match.route_by must be an attribute name (\"\": none), not {s.match.route_by!r}")
    if s.match.route_spread > 1 and not s.match.route_by:
        raise ConfigError("match.route_spread needs match.route_by")
    if s.match.max_validity_s <= 0:
        raise ConfigError("match.max_validity_s must be positive")
    scheme = s.spark.checkpoint_dir.split("://", 1)[0].lower() if "://" in s.spark.checkpoint_dir else "file"
    if scheme not in CHECKPOINT_SCHEMES:
        raise ConfigError(f"spark.checkpoint_dir: no file system for {scheme}:// in {s.spark.checkpoint_dir!r}; "
                          f"use a path or a URI of {', '.join(s + '://' for s in sorted(CHECKPOINT_SCHEMES))}")
    from matchers.catalog import create, servable

    try:
        servable(s.match.matcher)
    except ValueError as exc:
        raise ConfigError(f"match.matcher: {exc}") from None
    try:
        create(s.match.matcher, **s.match.params)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"match.params of {s.match.matcher}: {exc}") from None
    pat = s.patterns
    if pat.starting_offsets not in ("", "earliest", "latest"):
        raise ConfigError(f"patterns.starting_offsets must be earliest, latest or \"\", not {pat.starting_offsets!r}")
    for key in ("time_unit_ms", "key_buckets", "state_partitions", "max_keys_per_event"):
        if getattr(pat, key) < 1:
            raise ConfigError(f"patterns.{key} must be at least 1")
    try:
        interval_ms(pat.watermark_delay)
    except ValueError as exc:
        raise ConfigError(f"patterns.watermark_delay: {exc}") from None
    if pat.state_timeout < 0:
        raise ConfigError("patterns.state_timeout must be 0 (none) or positive")
    if pat.unknown_attribute_events < 0:
        raise ConfigError("patterns.unknown_attribute_events must be 0 (never report) or positive")
    if pat.stream_attribute_names < 1:
        raise ConfigError("patterns.stream_attribute_names must be at least 1")
    if len({pat.stream_field, pat.time_field, pat.start_field, s.match.event_id_field}) < 4:
        raise ConfigError("patterns.stream_field, time_field, start_field and match.event_id_field must differ")
    if s.status.history < 1:
        raise ConfigError("status.history must be at least 1")
    for f in dataclasses.fields(s.limits):
        if getattr(s.limits, f.name) < 1:
            raise ConfigError(f"limits.{f.name} must be at least 1")
    if s.limits.depth > MAX_DEPTH:
        raise ConfigError(f"limits.depth must be at most {MAX_DEPTH}")
    names = s.tenants.tenants
    bad = [n for n in names if not re.fullmatch(TENANT_NAME, n)]
    if bad or len(set(names)) != len(names):
        raise ConfigError(f"tenants.names must be distinct names of 1-64 letters, digits, '_' or '-', not {bad or names}")
    for key in QUOTAS:
        if getattr(s.tenants, key) < 0:
            raise ConfigError(f"tenants.{key} must be 0 (no bound) or positive")
    if s.kafka.data_client not in CLIENTS:
        raise ConfigError(f"kafka.data_client must be one of {CLIENTS}, not {s.kafka.data_client!r}")
    s.kafka.client_config("address.checked.later:9092")  # every client option known to its clients, or an error now
    client = s.kafka.client
    producer_max = _coerce(client.get("max_request_size", client.get("max.request.size", PRODUCER_MESSAGE_BYTES)),
                           int, "kafka.client.max_request_size")
    if s.limits.message_bytes > producer_max:
        raise ConfigError(f"limits.message_bytes ({s.limits.message_bytes}) exceeds the producer's maximum request "
                          f"size ({producer_max}): raise kafka.client.max_request_size too")


def check_tenants(settings: Settings) -> None:
    """Check the per-tenant tables once the settings are complete (tenants.names may come from a later source)."""
    settings.tenants.quota_table()
    settings.tenants.target_prefixes(settings.kafka.notifications_topic)
