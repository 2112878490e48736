"""``--conf KEY=VALUE`` of ``scripts.bench.e2e``: Spark settings of the benchmark's session."""

import argparse

import pytest

from scripts.bench.e2e import spark_setting


def test_a_setting_splits_at_its_first_equals_sign():
    assert spark_setting("spark.broadcast.blockSize=1m") == ("spark.broadcast.blockSize", "1m")
    assert spark_setting("spark.driver.extraJavaOptions=-XX:StartFlightRecording=filename=a.jfr,settings=profile") == (
        "spark.driver.extraJavaOptions", "-XX:StartFlightRecording=filename=a.jfr,settings=profile")
    assert spark_setting("spark.x=") == ("spark.x", "")


@pytest.mark.parametrize("text", ["spark.broadcast.blockSize", "=1m", " =1m"])
def test_a_setting_without_a_key_and_equals_sign_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="KEY=VALUE"):
        spark_setting(text)
