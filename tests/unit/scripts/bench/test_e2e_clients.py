"""The benchmarks' own Kafka clients get the settings :mod:`scripts.bench.feed` documents."""

from unittest import mock

import confluent_kafka

from scripts.bench import e2e, e2e_broker, feed


def test_the_event_producer_batches_and_compresses_with_lz4():
    with mock.patch.object(confluent_kafka, "Producer") as made:
        feed.producer("127.0.0.1:9092")
    conf = made.call_args.args[0]
    assert conf["bootstrap.servers"] == "127.0.0.1:9092"
    assert {k: conf[k] for k in feed.PRODUCER_SETTINGS} == feed.PRODUCER_SETTINGS
    assert conf["compression.type"] == "lz4" and conf["linger.ms"] == 20


def test_the_notification_reader_waits_on_the_broker_not_in_a_loop():
    with mock.patch.object(confluent_kafka, "Consumer") as made:
        e2e.NotificationReader("127.0.0.1:9092", "notes", 2)
    conf = made.call_args.args[0]
    assert conf["fetch.wait.max.ms"] == 500 and conf["fetch.min.bytes"] == 1
    assert conf["bootstrap.servers"] == "127.0.0.1:9092"
    assert [tp.partition for tp in made.return_value.assign.call_args.args[0]] == [0, 1]


def test_a_variant_names_its_properties():
    assert e2e_broker.parse_variant("current") == ("current", {})
    assert e2e_broker.parse_variant("z=compression.type=zstd,ev:linger.ms=50") == (
        "z", {"compression.type": "zstd", "ev:linger.ms": "50"})


def test_a_variant_reaches_each_client_and_is_undone():
    from streaming.kafka import fetch, sink

    read0, write0 = dict(fetch._RDKAFKA_READ_SETTINGS), dict(sink._RDKAFKA_WRITE_SETTINGS)
    props = {"fetch.wait.max.ms": 7, "sink:compression.type": "zstd", "ev:linger.ms": 50, "acks": 1}
    with e2e_broker.settings(props), mock.patch.object(confluent_kafka, "Producer") as made:
        assert fetch._RDKAFKA_READ_SETTINGS["fetch.wait.max.ms"] == 7
        assert sink._RDKAFKA_WRITE_SETTINGS["compression.type"] == "zstd" and sink._RDKAFKA_WRITE_SETTINGS["acks"] == 1
        assert "linger.ms" not in sink._RDKAFKA_WRITE_SETTINGS or sink._RDKAFKA_WRITE_SETTINGS["linger.ms"] != 50
        feed.producer("127.0.0.1:9092")
        conf = made.call_args.args[0]
        assert conf["linger.ms"] == 50 and conf["acks"] == 1 and conf["compression.type"] == "lz4"
    assert fetch._RDKAFKA_READ_SETTINGS == read0 and sink._RDKAFKA_WRITE_SETTINGS == write0
