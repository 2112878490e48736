"""Settings: file, environment and flag precedence, types, pass-through options, secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.config import ConfigError, Settings
from streaming.config_sources import load, parse_set

ROOT = Path(__file__).resolve().parents[3]


def test_shipped_file_loads_with_documented_defaults():
    s = load(ROOT / "conf" / "pubsub.toml", environ={})
    assert s.match.matcher == "auto"
    assert s.kafka.bootstrap_servers == ""
    assert s.kafka.topic_partitions()["events"] == s.kafka.events_partitions
    assert s.spark.conf["spark.sql.shuffle.partitions"] == "2"
    assert s.registry_dir == (Path(s.spark.checkpoint_dir).resolve() / "registry").as_uri()
    assert s.registry_columns_dir == (Path(s.spark.checkpoint_dir).resolve() / "registry-columns").as_uri()


def test_checkpoint_locations_are_uris():
    relative = load(None, ["spark.checkpoint_dir=var/ck pt"], {})
    assert relative.checkpoint == (Path("var/ck pt").resolve()).as_uri() and "%20" in relative.checkpoint
    for uri in ("file:///srv/ckpt", "hdfs://nn:8020/ckpt", "s3a://bucket/ckpt"):
        s = load(None, [f"spark.checkpoint_dir={uri}/"], {})
        assert (s.checkpoint, s.validity_dir) == (uri, uri + "/validity")


def test_precedence_file_env_flag(tmp_path):
    conf = tmp_path / "p.toml"
    conf.write_text('[match]\nmatcher = "vci"\nmax_terms = 10\n[kafka]\nevents_topic = "e1"\n')
    env = {"PUBSUB_MATCH_MATCHER": "dynamic", "PUBSUB_KAFKA_EVENTS_TOPIC": "e2", "PUBSUB_BOOTSTRAP_SERVERS": "x:1"}
    s = load(conf, ["match.matcher=opindex"], env)
    assert (s.match.matcher, s.match.max_terms, s.kafka.events_topic) == ("opindex", 10, "e2")


def test_types_are_coerced_and_checked():
    s = load(None, ["match.max_terms=12", "kafka.use_java_connector=false", "match.max_validity_s=5"], {})
    assert s.match.max_terms == 12 and s.kafka.use_java_connector is False and s.match.max_validity_s == 5.0
    for bad in ("match.max_terms=x", "kafka.use_java_connector=maybe", "match.max_terms=0",
                "notifications.payload=all", "match.nope=1", "nosection.key=1", "matcher"):
        with pytest.raises(ConfigError):
            load(None, [bad], {})


def test_pass_through_kafka_options_and_secrets_never_printed():
    env = {"PUBSUB_KAFKA_CLIENT_SASL_PLAIN_PASSWORD": "hunter2"}
    s = load(None, ["kafka.client.security.protocol=SASL_SSL", "kafka.bootstrap_servers=h:9092",
                    "spark.conf.spark.sql.shuffle.partitions=4"], env)
    cfg = s.kafka.client_config()
    assert cfg.bootstrap_servers == "h:9092"
    args = cfg.kafka_python("consumer")
    assert args["security_protocol"] == "SASL_SSL" and args["sasl_plain_password"] == "hunter2"
    assert "hunter2" not in repr(cfg)
    assert s.spark.conf["spark.sql.shuffle.partitions"] == "4"
    assert "hunter2" not in repr(s) and "hunter2" not in str(s.describe())


def test_no_bootstrap_servers_is_an_error_for_clients():
    with pytest.raises(ConfigError):
        Settings().kafka.client_config()
    assert Settings().kafka.client_config("127.0.0.1:1").bootstrap_servers == "127.0.0.1:1"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["kafka.client.sasl_kerberos_name=x"], "no librdkafka counterpart"),
        (["kafka.client.sasl_jaas_config=x"], "unknown Kafka client option"),
        (["kafka.client.request_timeout_ms=soon"], "expects a int"),
        (["kafka.data_client=auto"], "kafka.data_client must be one of"),
    ],
)
def test_kafka_client_options_are_checked_at_load(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load(None, overrides, {})


def test_kafka_python_data_client_takes_options_librdkafka_lacks():
    s = load(None, ["kafka.data_client=kafka-python", "kafka.client.sasl_kerberos_name=x"], {})
    assert s.kafka.client_config("h:1").kafka_python("consumer")["sasl_kerberos_name"] == "x"


def test_parse_set_and_replace():
    assert parse_set(["a.b=c=d"]) == {"a": {"b": "c=d"}}
    s = Settings().replace(kafka={"events_topic": "x"}, match={"snapshot_every": "3"})
    assert s.kafka.events_topic == "x" and s.match.snapshot_every == 3


def test_unreadable_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[match\n")
    with pytest.raises(ConfigError):
        load(bad, [], {})


def test_limits_section():
    s = load(ROOT / "conf" / "pubsub.toml", environ={})
    assert s.limits == Settings().limits and s.limits.message_bytes == 1_000_000
    s = load(None, ["limits.depth=8", "limits.event_bytes=5000000"], {"PUBSUB_LIMITS_PREDICATES": "50"})
    assert (s.limits.depth, s.limits.event_bytes, s.limits.predicates) == (8, 5_000_000, 50)
    for bad in ("limits.depth=0", "limits.depth=257", "limits.attributes=-1", "limits.message_bytes=2000000",
                "limits.nope=1"):
        with pytest.raises(ConfigError):
            load(None, [bad], {})
    raised = load(None, ["limits.message_bytes=20000000", "kafka.client.max_request_size=20000000"], {})
    assert raised.limits.message_bytes == 20_000_000


def test_scripts_find_the_embedded_broker_address(tmp_path):
    from argparse import Namespace

    from streaming.config_sources import bootstrap_servers

    settings = load(None, [f"kafka.embedded_data_dir={tmp_path}"], environ={})
    assert bootstrap_servers(Namespace(bootstrap=None), settings) == ""  # no broker has run there
    (tmp_path / "address").write_text("127.0.0.1:4242\n")
    assert bootstrap_servers(Namespace(bootstrap=None), settings) == "127.0.0.1:4242"
    assert bootstrap_servers(Namespace(bootstrap="h:1"), settings) == "h:1"
    configured = settings.replace(kafka={"bootstrap_servers": "k:9092"})
    assert bootstrap_servers(Namespace(bootstrap=None), configured) == "k:9092"


def test_relative_paths_resolve_against_the_project_root_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load(None, ["spark.checkpoint_dir=var/ck", "status.log_dir=logs"], {})
    assert s.spark.checkpoint_dir == str(ROOT / "var" / "ck") and s.status.log_dir == str(ROOT / "logs")
    assert s.status.status_file == str(ROOT / "var" / "status.json")  # from conf/pubsub.toml, found from tmp_path
    assert s.checkpoint == (ROOT / "var" / "ck").as_uri()
    s = load(None, [f"status.status_file={tmp_path / 's.json'}", "spark.checkpoint_dir=hdfs://nn/ck"], {})
    assert s.status.status_file == str(tmp_path / "s.json") and s.spark.checkpoint_dir == "hdfs://nn/ck"


def test_matcher_parameters_reach_the_index(tmp_path):
    from streaming.executor_cache import IndexSpec, build
    from streaming.registry_columns import ColumnRegistry

    s = load(None, ["match.matcher=bitmark", "match.params.buckets=32"], {"PUBSUB_MATCH_SHARDS": "1"})
    assert s.match.params == {"buckets": 32} and s.match.matcher_params() == (("buckets", 32),)
    conf = tmp_path / "p.toml"
    conf.write_text('[match]\nmatcher = "bitmark"\n[match.params]\nbuckets = 16\ntile_words = 8\n')
    assert load(conf, [], {}).match.params == {"buckets": 16, "tile_words": 8}
    for bad, says in ((["match.params.nope=1"], "unknown parameters"), (["match.params.buckets=0"], "must be positive")):
        with pytest.raises(ConfigError, match=f"match.params of bitmark: .*{says}"):
            load(None, ["match.matcher=bitmark", *bad], {})
    registry = ColumnRegistry(tmp_path / "registry")
    spec = IndexSpec(registry.directory.uri, "bitmark", 0, params=s.match.matcher_params())
    assert build(spec).buckets == 32


def test_worker_keepalive_is_under_sparks_idle_minute_or_off():
    assert load(ROOT / "conf" / "pubsub.toml", environ={}).spark.worker_keepalive_s == 30.0
    assert load(None, ["spark.worker_keepalive_s=0"], {}).spark.worker_keepalive_s == 0.0
    assert load(None, ["spark.worker_keepalive_s=59.5"], {}).spark.worker_keepalive_s == 59.5
    for bad in ("-1", "60", "600"):
        with pytest.raises(ConfigError, match="worker_keepalive_s"):
            load(None, [f"spark.worker_keepalive_s={bad}"], {})
