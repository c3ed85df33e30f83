"""The forkless local file system the embedded session writes the lake with
(jars/src/routing/localfs, routing/io/session.py): Hadoop's semantics, no helper processes."""

import os
import stat

import pytest
from py4j.protocol import Py4JJavaError

from routing.io.session import LOCAL_FS_CONF


@pytest.fixture()
def jvm(spark):
    return spark.sparkContext._jvm


@pytest.fixture()
def hadoop_conf(spark):
    return spark.sparkContext._jsc.hadoopConfiguration()


def _path(jvm, path) -> object:
    return jvm.org.apache.hadoop.fs.Path(f"file://{path}")


def _rename(spark, jvm, hadoop_conf, src, dst) -> None:
    """``FileContext.rename(src, dst, NONE)``: how Delta's HDFSLogStore commits a version."""
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(hadoop_conf)
    options = spark.sparkContext._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
    options[0] = jvm.org.apache.hadoop.fs.Options.Rename.NONE
    context.rename(_path(jvm, src), _path(jvm, dst), options)


def test_the_session_uses_the_forkless_file_system_for_file_urls(spark, jvm, hadoop_conf):
    uri = jvm.java.net.URI("file:///")
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(uri, hadoop_conf)
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(uri, hadoop_conf)
    assert fs.getClass().getName() == LOCAL_FS_CONF["spark.hadoop.fs.file.impl"]
    assert (
        context.getDefaultFileSystem().getClass().getName()
        == LOCAL_FS_CONF["spark.hadoop.fs.AbstractFileSystem.file.impl"]
    )


def test_a_rename_onto_an_existing_file_fails_and_keeps_both(spark, jvm, hadoop_conf, tmp_path):
    (tmp_path / "a.json").write_text("mine")
    (tmp_path / "b.json").write_text("theirs")
    with pytest.raises(Py4JJavaError) as raised:
        _rename(spark, jvm, hadoop_conf, tmp_path / "a.json", tmp_path / "b.json")
    assert raised.value.java_exception.getClass().getName().endswith("FileAlreadyExistsException")
    assert (tmp_path / "b.json").read_text() == "theirs"
    assert (tmp_path / "a.json").read_text() == "mine"


def test_a_rename_to_a_new_name_moves_the_file(spark, jvm, hadoop_conf, tmp_path):
    (tmp_path / "a.json").write_text("mine")
    _rename(spark, jvm, hadoop_conf, tmp_path / "a.json", tmp_path / "c.json")
    assert (tmp_path / "c.json").read_text() == "mine"
    assert not (tmp_path / "a.json").exists()


def test_permissions_are_set_as_hadoop_asks(jvm, hadoop_conf, tmp_path):
    target = tmp_path / "part.parquet"
    target.write_bytes(b"x")
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), hadoop_conf)
    fs.setPermission(_path(jvm, target), jvm.org.apache.hadoop.fs.permission.FsPermission(0o640))
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640


def test_a_delta_table_round_trips(spark, tmp_path):
    location = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(location)
    spark.range(3, 5).write.format("delta").mode("append").save(location)
    assert sorted(r.id for r in spark.read.format("delta").load(location).collect()) == list(
        range(5)
    )
    assert sorted(os.listdir(tmp_path / "t" / "_delta_log"))[:2] == [
        ".00000000000000000000.crc.crc",
        ".00000000000000000000.json.crc",
    ]
