"""The storage module: locations as URIs, whole-file writes, listings, on local disk and object-store names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streaming.storage import Directory, _open, environment, join, local_path, to_uri, write_file


def test_locations_become_uris(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert to_uri("var/ck") == (tmp_path / "var" / "ck").as_uri()
    assert to_uri(tmp_path / "a b") == (tmp_path / "a b").as_uri()
    assert to_uri("hdfs://nn:8020/ck/") == "hdfs://nn:8020/ck" and to_uri("file:///x") == "file:///x"
    assert join("s3a://bucket/ck", "registry", "a b") == "s3a://bucket/ck/registry/a%20b"


def test_write_read_list_remove(tmp_path):
    d = Directory(join(tmp_path, "x y", "deltas"))
    with pytest.raises(FileNotFoundError):
        d.names()
    assert not d.exists()
    d.write("1.pkl", b"one")
    d.write("1.pkl", b"uno")  # a rewrite replaces the whole file
    d.sub("inner").write("2", b"two")
    assert d.exists() and d.names() == ["1.pkl"] and d.read("1.pkl") == b"uno"
    assert (tmp_path / "x y" / "deltas" / "inner" / "2").read_bytes() == b"two"
    assert not [p for p in (tmp_path / "x y" / "deltas").iterdir() if p.name.endswith(".tmp")]
    d.remove("1.pkl")
    d.remove("1.pkl")  # a missing file is no error
    assert d.names() == []
    with pytest.raises(FileNotFoundError):
        d.read("1.pkl")
    write_file(tmp_path / "status.json", b"{}")
    assert Path(tmp_path / "status.json").read_bytes() == b"{}"


def test_hadoop_s3a_opens_as_s3():
    d = Directory("s3a://bucket/ckpt?endpoint_override=127.0.0.1:9&scheme=http")
    assert d.fs.type_name == "s3" and d.path == "bucket/ckpt"


def test_write_not_durable_skips_fsync(tmp_path, monkeypatch):
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd) or real(fd))
    write_file(tmp_path / "status.json", b"{1}")
    assert len(calls) == 2  # the file and its directory
    write_file(tmp_path / "status.json", b"{2}", durable=False)
    assert len(calls) == 2 and (tmp_path / "status.json").read_bytes() == b"{2}"
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]


def test_environment_carries_the_hadoop_settings():
    conf = {
        "spark.hadoop.fs.s3a.endpoint": "127.0.0.1:9000",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
        "spark.hadoop.fs.s3a.access.key": "key",
        "spark.hadoop.fs.s3a.secret.key": "secret",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.dfs.namenode.http-address": "nn:9870",
        "spark.ui.enabled": "true",
    }
    assert environment(conf) == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "key",
        "AWS_SECRET_ACCESS_KEY": "secret", "PUBSUB_S3_PATH_STYLE": "true", "PUBSUB_WEBHDFS_ADDRESS": "nn:9870",
    }
    assert environment({"spark.hadoop.fs.s3a.endpoint": "s3.example"}) == {"AWS_ENDPOINT_URL": "https://s3.example"}
    assert environment({}) == {}


def test_hdfs_opens_through_webhdfs(monkeypatch):
    monkeypatch.delenv("PUBSUB_WEBHDFS_ADDRESS", raising=False)
    _open.cache_clear()
    d = Directory("hdfs://nn:8020/a%20b/ckpt")
    assert d.fs.type_name.startswith("py::fsspec+webhdfs") and d.path == "/a b/ckpt"
    assert d.fs.handler.fs.url == "http://nn:9870/webhdfs/v1"  # the name node's default HTTP port
    assert local_path("hdfs://nn:8020/x") is None
    monkeypatch.setenv("PUBSUB_WEBHDFS_ADDRESS", "127.0.0.1:50070")
    _open.cache_clear()
    assert Directory("hdfs://nn:8020/x").fs.handler.fs.url == "http://127.0.0.1:50070/webhdfs/v1"
    _open.cache_clear()
