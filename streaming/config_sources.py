"""Where the settings come from: ``conf/pubsub.toml`` (or ``--config``), ``PUBSUB_<SECTION>_<KEY>``
environment variables and ``--set section.key=value`` flags, in that order of precedence over
the defaults of :class:`streaming.config.Settings`; and the command line's shared arguments
(``--config``, ``--set``, ``--bootstrap``)."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from streaming.config import (
    DEFAULT_PATH,
    ENV_PREFIX,
    PASS_THROUGH,
    PATH_SETTINGS,
    PROJECT_ROOT,
    ConfigError,
    Settings,
    check_tenants,
    overlay,
    section_types,
)
from streaming.kafka.broker import recorded_address
from streaming.kafka.client_config import KafkaClientConfig


def _from_env(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Overrides from ``PUBSUB_<SECTION>_<KEY>`` variables (an unknown key of a known section is an error)."""
    sections = section_types()
    out: dict[str, dict[str, Any]] = {}
    for var, value in environ.items():
        if not var.startswith(ENV_PREFIX):
            continue
        rest = var[len(ENV_PREFIX):].lower()
        section = next((s for s in sections if rest.startswith(s + "_")), None)
        if section is None:
            continue  # not a setting (e.g. PUBSUB_BOOTSTRAP_SERVERS of the test fixtures)
        key = rest[len(section) + 1:]
        passed = next((p for (s, p) in PASS_THROUGH if s == section and key.startswith(p + "_")), None)
        if passed is not None:
            out.setdefault(section, {}).setdefault(passed, {})[key[len(passed) + 1:]] = value
        else:
            out.setdefault(section, {})[key] = value
    return out


def parse_set(items: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Overrides from ``section.key=value`` strings (``kafka.client.sasl.mechanism=PLAIN``)."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        name, sep, value = item.partition("=")
        parts = name.strip().split(".")
        if not sep or len(parts) < 2 or not all(parts):
            raise ConfigError(f"--set {item!r}: expected section.key=value")
        section, key = parts[0], parts[1]
        if (section, key) in PASS_THROUGH and len(parts) > 2:
            out.setdefault(section, {}).setdefault(key, {})[".".join(parts[2:])] = value
        elif len(parts) == 2:
            out.setdefault(section, {})[key] = value
        else:
            raise ConfigError(f"--set {item!r}: only kafka.client.*, spark.conf.*, tenants.quotas.*, tenants.targets.* and match.params.* take dotted keys")
    return out


def load(
    path: str | Path | None = None,
    overrides: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Load the settings.

    Parameters
    ----------
    path : TOML file; ``None`` reads ``conf/pubsub.toml`` of the project when it exists (else
        the defaults).
    overrides : ``section.key=value`` strings from ``--set`` flags.
    environ : environment to read ``PUBSUB_*`` from (``os.environ`` by default).

    Raises
    ------
    ConfigError
        On an unreadable file, an unknown setting or a value of the wrong type.

    Notes
    -----
    A relative ``spark.checkpoint_dir``, ``status.status_file``, ``status.log_dir`` or
    ``kafka.embedded_data_dir`` is made absolute
    against :data:`PROJECT_ROOT` (a URI such as ``hdfs://...`` is kept as it is).
    """
    settings = Settings()
    file = Path(path) if path is not None else DEFAULT_PATH
    if path is not None or file.exists():
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read configuration {file}: {exc}") from None
        settings = overlay(settings, data, str(file))
    settings = overlay(settings, _from_env(os.environ if environ is None else environ), "environment")
    settings = overlay(settings, parse_set(overrides), "--set")
    check_tenants(settings)
    return overlay(settings, _absolute_paths(settings), "load()")



def _absolute_paths(settings: Settings) -> dict[str, dict[str, str]]:
    """The local paths among the settings that are relative, made absolute against :data:`PROJECT_ROOT`."""
    out: dict[str, dict[str, str]] = {}
    for section, key in PATH_SETTINGS:
        value = getattr(getattr(settings, section), key)
        if value and "://" not in value:
            path = PROJECT_ROOT / Path(value).expanduser()  # an absolute path stays as it is
            if str(path) != value:
                out.setdefault(section, {})[key] = str(path)
    return out


def add_arguments(parser: Any) -> None:
    """Add ``--config``, ``--set`` and ``--bootstrap`` to an ``argparse`` parser (scripts share them)."""
    parser.add_argument("--config", type=Path, default=None, help="TOML settings (default conf/pubsub.toml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a setting (repeatable)")
    parser.add_argument("--bootstrap", default=None,
                        help="Kafka bootstrap servers (default kafka.bootstrap_servers of the settings, "
                             "else the embedded broker's address)")


def bootstrap_servers(args: Any, settings: Settings) -> str:
    """``--bootstrap``, else ``kafka.bootstrap_servers``, else the embedded broker's address file."""
    if args.bootstrap or settings.kafka.bootstrap_servers:
        return args.bootstrap or settings.kafka.bootstrap_servers
    return recorded_address(settings.kafka.embedded_data_dir) if settings.kafka.embedded_data_dir else ""


def from_arguments(args: Any) -> tuple[Settings, KafkaClientConfig]:
    """Settings and the Kafka client configuration from the arguments of :func:`add_arguments`."""
    settings = load(args.config, args.overrides)
    return settings, settings.kafka.client_config(bootstrap_servers(args, settings))
