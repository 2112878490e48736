"""The embedded broker's JVM options reach its command line."""

import pytest

from streaming.kafka import broker
from streaming.kafka.errors import BrokerError


def test_the_broker_jvm_compiles_with_c1_only_and_a_fixed_heap():
    assert "-XX:TieredStopAtLevel=1" in broker.JVM_OPTIONS
    assert {"-Xms512m", "-Xmx512m"} <= set(broker.JVM_OPTIONS)
    try:
        command = broker.broker_command()
    except BrokerError as exc:  # no Java or jars here: the options are what they are
        pytest.skip(str(exc))
    assert command[1:1 + len(broker.JVM_OPTIONS)] == list(broker.JVM_OPTIONS)
