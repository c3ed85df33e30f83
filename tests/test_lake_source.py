"""The ``lake`` data source: Delta tables through delta-rs, batch and streaming, exactly-once."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql.datasource import InputPartition

from routing import schemas
from routing.lake import Lake, address_dir
from routing.lake_source import (
    ROW_GROUP_ROWS,
    ROWS_WRITTEN,
    FileStats,
    LakeDataSource,
    TableFiles,
    count_key,
    tables_written,
)
from tests.frames import assert_rows_equal
from tests.lakeio import append, at, read_table

UTC = dt.UTC


def message_rows():
    """Every shape a message row can take: maps, binary, UTC times, nulls."""
    return [
        (
            1,
            "orders",
            "ANYCAST",
            at(0),
            None,
            4,
            True,
            "alice",
            {"k": "v", "empty": ""},
            b"\x00\xff",
            None,
            None,
        ),
        (2, "orders", "MULTICAST", at(1), at(60_000), 9, False, None, {}, b"", "DIVERT", None),
        (3, "orders", None, at(2), None, None, None, None, None, None, "MOVE", "q1"),
        (
            2**62 + 5,
            "orders",
            None,
            dt.datetime(2030, 6, 1, 12, 30, 0, 123456, tzinfo=UTC),
            None,
            0,
            None,
            "ü",
            {"ü": "é"},
            b"x" * 1000,
            None,
            None,
        ),
    ]


@pytest.fixture()
def messages(spark):
    return spark.createDataFrame(message_rows(), schemas.spark_schema(schemas.MESSAGE))


def test_batch_round_trip_of_the_message_schema(spark, tmp_path, messages):
    path = str(tmp_path / "addresses" / "orders")
    messages.write.format("lake").mode("append").save(path)

    back = spark.read.format("lake").load(path)
    assert_rows_equal(back, messages, ["message_id"])

    # an ordinary Delta table: delta-rs reads the same rows, with the SPEC's Arrow types
    table = DeltaTable(path)
    assert pa.schema(table.schema().to_arrow()) == schemas.MESSAGE
    assert sorted(r["message_id"] for r in read_table(path).to_pylist()) == [1, 2, 3, 2**62 + 5]
    delta_rs = read_table(path).to_pylist()
    assert {r["message_id"]: r["sent_at"] for r in delta_rs}[2**62 + 5] == dt.datetime(
        2030, 6, 1, 12, 30, 0, 123456, tzinfo=UTC
    )


def test_overwrite_replaces_the_rows(spark, tmp_path, messages):
    path = str(tmp_path / "t")
    messages.write.format("lake").mode("append").save(path)
    messages.limit(1).write.format("lake").mode("overwrite").save(path)
    assert spark.read.format("lake").load(path).count() == 1


def test_reads_a_table_written_by_delta_rs_with_fewer_columns(spark, tmp_path):
    path = tmp_path / "addresses" / "lean"
    lean = pa.schema(
        [("message_id", pa.int64()), ("address", pa.string()), ("sent_at", schemas.TIMESTAMP)]
    )
    append(path, [{"message_id": 7, "address": "lean", "sent_at": at(5)}], lean)
    back = spark.read.format("lake").load(str(path)).collect()
    assert [(r.message_id, r.address, r.sent_at) for r in back] == [
        (7, "lean", at(5).replace(tzinfo=None))
    ]


def test_a_table_without_files_reads_as_empty(spark, tmp_path):
    """A producer may create its table before its first message (Spark then plans
    one bare partition, which must read as nothing)."""
    path = tmp_path / "addresses" / "empty"
    append(path, [], schemas.MESSAGE)
    frame = spark.read.format("lake").load(str(path))
    assert frame.count() == 0
    assert frame.columns == schemas.MESSAGE.names
    reader = LakeDataSource({"path": str(path)}).reader(frame.schema)
    assert list(reader.read(InputPartition(0))) == []


def test_time_travel_and_partition_filter(spark, tmp_path):
    path = str(tmp_path / "qm")
    schema = "queue string, status string, n long"
    first = spark.createDataFrame([("q", "PENDING", 1), ("q", "ACKED", 2)], schema)
    first.write.format("lake").mode("append").option("partitionBy", "status").save(path)
    spark.createDataFrame([("q", "PENDING", 3)], schema).write.format("lake").mode("append").save(
        path
    )

    pending = (
        spark.read.format("lake").option("partitionFilter", '{"status": ["PENDING"]}').load(path)
    )
    assert sorted(r.n for r in pending.collect()) == [1, 3]
    old = spark.read.format("lake").option("versionAsOf", 0).load(path)
    assert sorted(r.n for r in old.collect()) == [1, 2]
    with_file = spark.read.format("lake").option("withFilePath", "true").load(path)
    assert all(r._file.startswith("status=") for r in with_file.collect())


def test_write_with_an_app_transaction_happens_once(spark, tmp_path, messages):
    path = str(tmp_path / "t")
    for _ in range(3):
        (
            messages.write.format("lake")
            .mode("append")
            .option("txnAppId", "app")
            .option("txnVersion", 4)
            .save(path)
        )
    assert spark.read.format("lake").load(path).count() == 4
    assert DeltaTable(path).transaction_version("app") == 4
    # the skipped attempts left no stray files behind
    assert len(list(Path(path).glob("*.parquet"))) == len(DeltaTable(path).file_uris())


def test_several_tables_in_one_write_one_commit_each_in_order(spark, tmp_path):
    root = str(tmp_path)
    df = spark.createDataFrame(
        [("journal", 1, "a"), ("rejected", 2, "b"), ("addresses/x", 3, "c"), ("journal", 4, "d")],
        "target string, n long, s string",
    )
    tables = '{"addresses/*": {}, "rejected": {}, "journal": {"userMetadata": "{\\"clock\\": 1}"}}'
    (
        df.write.format("lake")
        .mode("append")
        .option("tableColumn", "target")
        .option("tables", tables)
        .option("txnAppId", "job")
        .option("txnVersion", 0)
        .save(root)
    )
    assert sorted(r["n"] for r in read_table(tmp_path / "journal").to_pylist()) == [1, 4]
    assert [r["n"] for r in read_table(tmp_path / "addresses" / "x").to_pylist()] == [3]
    assert read_table(tmp_path / "journal").column_names == ["n", "s"]
    history = DeltaTable(str(tmp_path / "journal")).history()
    assert history[0]["userMetadata"] == '{"clock": 1}'
    # journal committed last: its commit is newer than the others'
    stamps = {
        t: DeltaTable(str(tmp_path / t)).history()[0]["timestamp"]
        for t in ("journal", "rejected", "addresses/x")
    }
    assert stamps["journal"] >= max(stamps["rejected"], stamps["addresses/x"])


def test_the_commit_of_a_record_counts_table_records_the_rows_written(spark, tmp_path):
    """A write counts its rows per table, and per value of a ``countBy`` column, as it
    writes them; the ``recordCounts`` table's commit records them (ROWS_WRITTEN)."""
    df = spark.createDataFrame(
        [("journal", "ACKED"), ("journal", "ACKED"), ("journal", "EXPIRED"), ("addresses/x", "c")]
        + [("rejected", "r")] * 3,
        "target string, event string",
    )
    tables = {
        "addresses/*": {},
        "journal": {"countBy": "event"},
        "rejected": {"commitEmpty": True, "recordCounts": True},
    }
    (
        df.repartition(3)
        .write.format("lake")
        .mode("append")
        .option("tableColumn", "target")
        .option("tables", json.dumps(tables))
        .save(str(tmp_path))
    )
    recorded = json.loads(DeltaTable(str(tmp_path / "rejected")).history()[0][ROWS_WRITTEN])
    assert recorded == {
        "addresses/x": 1,
        "journal": 3,
        count_key("journal", "ACKED"): 2,
        count_key("journal", "EXPIRED"): 1,
        "rejected": 3,
    }
    assert tables_written(recorded) == ["addresses/x", "journal", "rejected"]
    assert ROWS_WRITTEN not in DeltaTable(str(tmp_path / "journal")).history()[0]


def test_files_keep_statistics_of_times_and_dictionaries_of_strings(spark, tmp_path, messages):
    """Parquet statistics where a reader prunes (times, ids), none for bodies; strings and
    property maps dictionary-encoded, bodies not (routing.lake_source.encodings)."""
    path = tmp_path / "addresses" / "orders"
    messages.coalesce(1).write.format("lake").mode("append").save(str(path))
    (file,) = path.glob("*.parquet")
    group = pq.ParquetFile(file).metadata.row_group(0)
    columns = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    assert columns["sent_at"].statistics.has_min_max
    assert columns["message_id"].statistics.has_min_max
    assert columns["body"].statistics is None or not columns["body"].statistics.has_min_max
    dictionary = {p for p, c in columns.items() if "RLE_DICTIONARY" in c.encodings}
    assert {"address", "properties.key_value.key", "properties.key_value.value"} <= dictionary
    assert "body" not in dictionary


def test_a_task_writes_its_files_a_row_group_at_a_time(tmp_path):
    """TableFiles: batches arriving in any number become files of at most ``target_rows``
    rows per partition, row groups of at most ROW_GROUP_ROWS, and each file's statistics
    are those of its whole content."""
    rows = 2 * ROW_GROUP_ROWS + 1000
    statuses = pa.array(["PENDING", "ACKED", None] * (rows // 3) + ["PENDING"] * (rows % 3))
    table = pa.table(
        {
            "k": pa.array(range(rows), pa.int64()),
            "at": pa.array(range(rows), pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "status": statuses,
            "note": pa.array([None if i % 7 else f"n{i}" for i in range(rows)], pa.string()),
        }
    )
    files = TableFiles(str(tmp_path), "qm", ["status"], table.schema, target_rows=100_000)
    for batch in table.to_batches(max_chunksize=30_000):
        files.add(batch)
    written = files.close()

    assert sum(f.rows for f in written) == rows
    by_status: dict[str | None, int] = {}
    for added in written:
        status = added.partition_values["status"]
        by_status[status] = by_status.get(status, 0) + added.rows
        content = pq.ParquetFile(tmp_path / added.path)
        assert added.rows <= 100_000
        assert content.metadata.num_rows == added.rows
        assert content.schema_arrow.names == ["k", "at", "note"]
        assert all(
            content.metadata.row_group(g).num_rows <= ROW_GROUP_ROWS
            for g in range(content.metadata.num_row_groups)
        )
        whole = FileStats()
        whole.add(content.read())
        assert json.loads(added.stats) == json.loads(whole.json())
    assert by_status == dict(Counter(statuses.to_pylist()))


def test_replace_files_removes_and_adds_in_one_commit(spark, tmp_path):
    path = str(tmp_path / "qm")
    schema = "k long, status string"
    spark.createDataFrame([(1, "PENDING"), (2, "PENDING")], schema).write.format("lake").option(
        "partitionBy", "status"
    ).mode("append").save(path)
    old = sorted(
        {
            r._file
            for r in spark.read.format("lake").option("withFilePath", "true").load(path).collect()
        }
    )
    before = DeltaTable(path).version()
    (
        spark.createDataFrame([(1, "ACKED"), (2, "PENDING")], schema)
        .write.format("lake")
        .mode("append")
        .option("replaceFiles", json.dumps(old))
        .save(path)
    )
    assert DeltaTable(path).version() == before + 1
    assert sorted((r["k"], r["status"]) for r in read_table(path).to_pylist()) == [
        (1, "ACKED"),
        (2, "PENDING"),
    ]


def _stream_copy(spark, source, target, checkpoint, **options):
    reader = spark.readStream.format("lake")
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load(source)
        .writeStream.format("lake")
        .option("checkpointLocation", checkpoint)
        .option("txnAppId", "copy")
        .trigger(availableNow=True)
        .start(target)
    )
    query.awaitTermination()
    return query


def test_streaming_round_trip_and_rate_limit(spark, tmp_path, messages):
    source, target = str(tmp_path / "src"), str(tmp_path / "dst")
    for row in messages.collect():
        messages.where(messages.message_id == row.message_id).write.format("lake").mode(
            "append"
        ).save(source)
    query = _stream_copy(spark, source, target, str(tmp_path / "ck"), maxFilesPerTrigger=1)
    assert_rows_equal(spark.read.format("lake").load(target), messages, ["message_id"])
    # one file per trigger: as many commits in the target as non-empty source files
    assert DeltaTable(target).version() + 1 == len(DeltaTable(source).file_uris())
    assert query.lastProgress is not None


def test_available_now_picks_up_new_versions_and_stops_after_the_last(spark, tmp_path, messages):
    source, target, ck = str(tmp_path / "src"), str(tmp_path / "dst"), str(tmp_path / "ck")
    messages.limit(1).write.format("lake").mode("append").save(source)
    _stream_copy(spark, source, target, ck)
    assert spark.read.format("lake").load(target).count() == 1
    messages.write.format("lake").mode("append").save(source)
    _stream_copy(spark, source, target, ck)  # returns: available-now stops after the last version
    assert spark.read.format("lake").load(target).count() == 5


def test_a_running_query_picks_up_appended_versions(spark, tmp_path, messages):
    source, target = str(tmp_path / "src"), str(tmp_path / "dst")
    messages.limit(1).write.format("lake").mode("append").save(source)
    query = (
        spark.readStream.format("lake")
        .load(source)
        .writeStream.format("lake")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .option("txnAppId", "run")
        .trigger(processingTime="200 milliseconds")
        .start(target)
    )
    try:
        for _ in range(3):
            messages.limit(1).write.format("lake").mode("append").save(source)
        deadline = time.time() + 120
        while time.time() < deadline and (
            not DeltaTable.is_deltatable(target) or len(read_table(target)) < 4
        ):
            time.sleep(0.5)
    finally:
        query.stop()
    assert len(read_table(target)) == 4


def test_a_batch_replayed_after_a_crash_writes_nothing_twice(spark, tmp_path, messages):
    source, target, ck = str(tmp_path / "src"), str(tmp_path / "dst"), tmp_path / "ck"
    for _ in range(3):
        messages.write.format("lake").mode("append").save(source)
    _stream_copy(spark, source, target, str(ck), maxFilesPerTrigger=1)
    version = DeltaTable(target).version()
    rows = len(read_table(target))
    # crash between the Delta commit and Spark's own commit log: the last batch is not
    # marked done, so the restarted query runs it again
    last = max(int(p.name) for p in (ck / "commits").glob("[0-9]*"))
    (ck / "commits" / str(last)).unlink()
    (ck / "commits" / f".{last}.crc").unlink(missing_ok=True)
    _stream_copy(spark, source, target, str(ck), maxFilesPerTrigger=1)
    assert DeltaTable(target).version() == version
    assert len(read_table(target)) == rows == 12


APPENDER = textwrap.dedent(
    """
    import sys, time, datetime as dt
    import pyarrow as pa
    from deltalake import write_deltalake
    path, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    schema = pa.schema([("message_id", pa.int64()), ("address", pa.string()),
                        ("sent_at", pa.timestamp("us", tz="UTC"))])
    for i in range(start, start + n):
        write_deltalake(path, pa.Table.from_pylist(
            [{"message_id": i, "address": "a", "sent_at": dt.datetime.now(dt.UTC)}], schema=schema), mode="append")
        time.sleep(0.05)
    """
)


def test_appends_by_another_process_are_neither_lost_nor_duplicated(spark, tmp_path):
    source, target = str(tmp_path / "src"), str(tmp_path / "dst")
    subprocess.run([sys.executable, "-c", APPENDER, source, "0", "1"], check=True)
    producer = subprocess.Popen([sys.executable, "-c", APPENDER, source, "1", "60"])
    query = (
        spark.readStream.format("lake")
        .load(source)
        .writeStream.format("lake")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .option("txnAppId", "concurrent")
        .trigger(processingTime="300 milliseconds")
        .start(target)
    )
    try:
        assert producer.wait(timeout=300) == 0
    finally:
        query.stop()
    _stream_copy(spark, source, target, str(tmp_path / "ck"))
    ids = [r["message_id"] for r in read_table(target).to_pylist()]
    assert sorted(ids) == list(range(61))


@pytest.mark.parametrize(
    "address",
    [
        "a/b",
        "..",
        "../../etc",
        "with space",
        "zürich",
        "100%",
        ".hidden",
        "/abs",
        "a\\b",
        "x" * 200,
        "\x00nul",
    ],
)
def test_hostile_address_names_stay_inside_addresses(tmp_path, address):
    lake = Lake.at(tmp_path / "lake")
    table = Path(lake.address_table(address)).resolve()
    addresses = (tmp_path / "lake" / "addresses").resolve()
    assert table.parent == addresses
    assert set(table.name) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-="
    )
    assert not table.name.startswith(".")


def test_dir_of_address_examples_from_the_spec():
    assert address_dir("orders.eu") == "orders.eu"
    assert address_dir("a/b") == "a=2Fb"
    assert address_dir("..") == "=2E."
    assert address_dir("100%") == "100=25"
    assert address_dir("zürich") == "z=C3=BCrich"


def test_hostile_address_table_round_trip(spark, tmp_path, messages):
    lake = Lake.at(tmp_path)
    path = lake.address_table("../../etc")
    messages.write.format("lake").mode("append").save(path)
    assert spark.read.format("lake").load(path).count() == 4
    assert lake.address_sources() == ["addresses/=2E.=2F..=2Fetc"]
    assert not (tmp_path.parent / "etc").exists()
