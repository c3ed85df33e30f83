"""The Delta metadata the job reads through delta-rs (:mod:`routing.io.delta_tables`)."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from bench.history import table_with_history
from routing.broker.layout import ROUTING_APP_PREFIX
from routing.io import delta_tables
from routing.io.delta_tables import (
    DataFile,
    LogCleanedUpError,
    TableFiles,
    TableLogs,
    arrow_schema,
    commit_file,
    commit_rows,
    file_count,
    last_user_metadata,
    latest_schema,
    log_version,
    table_version,
    transaction_version,
)
from routing.io.storage import append as job_append
from routing.plan import schemas
from tests.lakeio import append, at, clean_up_log

APP = "jobs.route:test"


def send(location: str, message_id: int) -> None:
    """One producer commit of one message."""
    row = {"message_id": message_id, "address": "orders", "sent_at": at(message_id)}
    append(location, [row], schemas.MESSAGE)


def answers(logs: TableLogs, location: str) -> tuple:
    return (
        logs.version(location),
        logs.transaction_version(location, APP),
        logs.last_user_metadata(location),
        logs.file_count(location),
    )


def loaded_anew(location: str) -> tuple:
    return (
        table_version(location),
        transaction_version(location, APP),
        last_user_metadata(location),
        file_count(location),
    )


def test_kept_table_views_follow_every_later_commit(spark, tmp_path):
    """A view kept across questions answers as a table loaded anew would, however many
    commits other writers made since it was last asked."""
    location = str(tmp_path / "orders")
    logs = TableLogs()
    assert answers(logs, location) == loaded_anew(location) == (-1, None, None, 0)

    send(location, 1)
    assert answers(logs, location) == loaded_anew(location) == (0, None, None, 1)

    send(location, 2)
    send(location, 3)
    frame = spark.createDataFrame(
        pa.Table.from_pylist(
            [{"message_id": 4, "address": "orders", "sent_at": at(4)}], schema=schemas.MESSAGE
        )
    )
    job_append(frame, location, app_id=APP, txn_version=7, user_metadata='{"clock": 4}', logs=logs)
    assert answers(logs, location) == loaded_anew(location) == (3, 7, '{"clock": 4}', 4)


def test_a_tables_schema_at_a_version_it_learnt_and_before(tmp_path):
    """A table's schema at the version its files were learnt up to (answered by the view
    that learnt them) and at an earlier one (read from the log) are each that version's."""
    location = str(tmp_path / "orders")
    narrow = pa.schema([schemas.MESSAGE.field(n) for n in ("message_id", "address", "sent_at")])
    append(location, [{"message_id": 1, "address": "orders", "sent_at": at(1)}], narrow)
    wide = pa.Table.from_pylist(
        [{"message_id": 2, "address": "orders", "sent_at": at(2), "priority": 7}],
        schema=pa.schema([*narrow, schemas.MESSAGE.field("priority")]),
    )
    write_deltalake(location, wide, mode="append", schema_mode="merge")

    files = TableFiles(location, "sent_at")
    assert [f.version for f in files.added(-1, 1)] == [0, 1]
    assert files.schema(1) == arrow_schema(location, 1)
    assert "priority" in files.schema(1).names
    assert files.schema(0) == arrow_schema(location, 0)
    assert "priority" not in files.schema(0).names


def test_the_rows_a_commit_added_come_from_its_files_statistics_or_footers(tmp_path):
    """``commit_rows`` counts one commit's rows, not the table's; a file the commit left
    without statistics is counted from its Parquet footer."""
    location = str(tmp_path / "queue_messages")
    rows = [{"message_id": i, "status": "ACKED" if i % 3 else "PENDING"} for i in range(7)]
    schema = pa.schema([("message_id", pa.int64()), ("status", pa.string())])
    write_deltalake(location, pa.Table.from_pylist(rows[:2], schema), partition_by=["status"])
    write_deltalake(
        location, pa.Table.from_pylist(rows[2:], schema), partition_by=["status"], mode="append"
    )
    assert [commit_rows(location, v) for v in (0, 1)] == [2, 5]

    commit = commit_file(location, 1)
    actions = [json.loads(line) for line in commit.read_text().splitlines()]
    for action in actions:
        action.get("add", {}).pop("stats", None)
    commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
    assert commit_rows(location, 1) == 5


def test_a_tables_version_is_its_latest_commits_after_each_commit_and_checkpoint(tmp_path):
    """Listed from the log folder, the version delta-rs reads: none before the first commit
    (a folder left without one too), then each commit's, checkpoints and a log cleaned up
    past its first commits included."""
    location = str(tmp_path / "orders")
    logs = TableLogs()
    assert logs.version(location) == table_version(location) == -1
    os.makedirs(os.path.join(location, "_delta_log"))  # a writer killed before version 0
    assert logs.version(location) == -1
    for n in range(3):
        send(location, n)
        assert logs.version(location) == n == DeltaTable(location).version()
    DeltaTable(location).create_checkpoint()
    commit_file(location, 0).unlink()
    send(location, 3)
    write_deltalake(location, pa.table({"message_id": [5]}), mode="append", schema_mode="merge")
    assert logs.version(location) == table_version(location) == 4 == DeltaTable(location).version()


def snapshot_files(location: str, time_column: str) -> list[DataFile]:
    """The files each version added, as delta-rs's snapshots show them: the paths of each
    version's snapshot that the one before did not have."""
    table, known, files = DeltaTable(location, version=0), set(), []
    for version in range(DeltaTable(location).version() + 1):
        table.load_as_version(version)
        for row in sorted(
            pa.table(table.get_add_actions(flatten=True)).to_pylist(), key=lambda r: r["path"]
        ):
            if row["path"] in known:
                continue
            known.add(row["path"])
            files.append(
                DataFile(
                    row["path"],
                    version,
                    row["size_bytes"],
                    row["num_records"],
                    delta_tables._upper_bound(row[f"max.{time_column}"]),
                    delta_tables._lower_bound(row[f"min.{time_column}"]),
                )
            )
    return files


def test_the_files_a_version_added_are_those_its_snapshot_shows_for_either_writer(spark, tmp_path):
    """Read from the commit files, each version's files, sizes, row counts and time bounds
    are what delta-rs's snapshots say, for delta-rs's commits and delta-spark's (whose
    statistics are written differently), in one table; its schema too."""
    location = str(tmp_path / "orders")
    send(location, 1)
    job_rows = [{"message_id": i, "address": "orders", "sent_at": at(1000 + i)} for i in (2, 3)]
    frame = spark.createDataFrame(pa.Table.from_pylist(job_rows, schema=schemas.MESSAGE))
    job_append(frame, location, app_id="jobs.replay:log", txn_version=0)
    append(
        location,
        [
            {
                "message_id": 4,
                "address": "orders",
                "sent_at": at(1582) + dt.timedelta(microseconds=609),
            }
        ],
        schemas.MESSAGE,
    )

    files = TableFiles(location, "sent_at").added(-1, 2)
    assert files == snapshot_files(location, "sent_at")
    assert {f.version for f in files} == {0, 1, 2}
    assert TableFiles(location, "sent_at").added(0, 2) == files[1:]
    assert latest_schema(location) == arrow_schema(location)


def test_a_tables_latest_schema_is_its_last_schema_change(tmp_path):
    location = str(tmp_path / "orders")
    send(location, 1)
    wide = pa.table({"message_id": [2], "priority": pa.array([7], pa.int8())})
    write_deltalake(location, wide, mode="append", schema_mode="merge")
    send(location, 3)
    assert latest_schema(location) == arrow_schema(location)
    assert "priority" in latest_schema(location).names


def test_a_tables_version_is_found_from_a_version_it_had_or_its_last_checkpoint(tmp_path):
    """The latest version, looked for from a version the table had, from the one its last
    checkpoint names, or from the log folder's listing: each the version delta-rs reads."""
    location = str(tmp_path / "orders")
    assert log_version(location) == log_version(location, listed=True) == -1  # no table
    for n in range(4):
        send(location, n)
    assert log_version(location) == log_version(location, listed=True) == 3  # no checkpoint
    DeltaTable(location).create_checkpoint()
    for n in range(4, 7):
        send(location, n)
    latest = DeltaTable(location).version()
    assert latest == 6
    assert log_version(location) == log_version(location, listed=True) == latest
    assert [log_version(location, since) for since in range(latest + 1)] == [latest] * (latest + 1)
    clean_up_log(location)
    send(location, 7)
    latest = DeltaTable(location).version()
    assert log_version(location) == log_version(location, 6) == latest


def history(location: str, spark) -> None:
    """A producer's table through the commits an input table sees: appends, a schema change,
    a compaction, the routing job's own copies, checkpoints (delta-rs's, then delta-spark's
    own at its tenth commit)."""
    for n in range(3):
        send(location, n)
    DeltaTable(location).create_checkpoint()  # version 2
    wide = pa.Table.from_pylist(
        [{"message_id": 3, "address": "orders", "sent_at": at(3), "priority": 7}],
        schema=pa.schema(
            [*(schemas.MESSAGE.field(n) for n in ("message_id", "address", "sent_at", "priority"))]
        ),
    )
    write_deltalake(location, wide, mode="append", schema_mode="merge")  # version 3
    DeltaTable(location).optimize.compact()  # version 4
    copy = [{"message_id": 1 << 62, "address": "orders", "sent_at": at(4)}]
    frame = spark.createDataFrame(pa.Table.from_pylist(copy, schema=schemas.MESSAGE))
    job_append(frame, location, app_id=f"{ROUTING_APP_PREFIX}test", txn_version=0)  # 5
    DeltaTable(location).create_checkpoint()  # version 5
    for n in range(6, 10):
        send(location, n)
    row = [{"message_id": 10, "address": "orders", "sent_at": at(10)}]
    producer = spark.createDataFrame(pa.Table.from_pylist(row, schema=schemas.MESSAGE))
    columns = producer.select("message_id", "address", "sent_at")
    columns.write.format("delta").mode("append").save(location)  # 10, delta-spark's checkpoint
    assert Path(location, "_delta_log", f"{10:020d}.checkpoint.parquet").is_file()
    send(location, 11)


def test_a_view_asked_from_a_later_version_starts_at_the_checkpoint_before_it(spark, tmp_path):
    """However far behind the version it is asked from, a table's view offers the files
    its plain path (every commit read from the first) offers: none the compaction or the
    job's copies added, none of the versions asked from or before; and the table's schema."""
    location = str(tmp_path / "orders")
    history(location, spark)
    latest = DeltaTable(location).version()
    offered = {}
    for after in range(-1, latest):
        plain = TableFiles(location, "sent_at", catch_up=1 << 62).added(after, latest)
        assert TableFiles(location, "sent_at", catch_up=0).added(after, latest) == plain
        offered[after] = [f.version for f in plain]
    assert offered[-1] == [0, 1, 2, 3, 6, 7, 8, 9, 10, 11]
    assert offered[2] == [3, 6, 7, 8, 9, 10, 11]
    assert offered[4] == offered[5] == [6, 7, 8, 9, 10, 11]
    assert offered[10] == [11]
    later = TableFiles(location, "sent_at", catch_up=0)
    assert later.added(6, latest) == TableFiles(location, "sent_at").added(6, latest)
    assert later.schema(latest) == arrow_schema(location) == latest_schema(location)
    assert "priority" in latest_schema(location).names  # set before the last checkpoint
    assert later.added(0, latest)[0].version == 1  # asked from earlier: learnt again


def test_a_log_cleaned_up_past_its_first_commits_is_read_from_its_first_checkpoint(tmp_path):
    """Delta's log cleanup removes the commits before a checkpoint: their files count as the
    checkpoint's version's, and a view asked from a version whose commit is gone stops,
    naming the table, as a job whose last batch read it must (its reads since cannot be
    told from the files it read), on either path."""
    location = str(tmp_path / "orders")
    for n in range(4):
        send(location, n)
    cleaned = clean_up_log(location)  # its checkpoint's version
    for n in range(4, 6):
        send(location, n)
    latest = DeltaTable(location).version()
    for catch_up in (0, 1 << 62):
        files = TableFiles(location, "sent_at", catch_up)
        assert [f.version for f in files.added(-1, latest)] == [cleaned] * 4 + [latest - 1, latest]
        assert [f.version for f in files.added(cleaned, latest)] == [latest - 1, latest]
        assert files.schema(latest) == latest_schema(location) == arrow_schema(location)
        for gone in (0, cleaned - 1):
            with pytest.raises(
                LogCleanedUpError, match=f"cleaned up past version {gone}, the last"
            ):
                TableFiles(location, "sent_at", catch_up).added(gone, latest)


def test_a_long_history_of_the_bench_reads_as_delta_rs_reads_it(tmp_path):
    """The history bench's tables (bench/history.py: commits written beside delta-rs's first,
    compacted and checkpointed every 100) are tables delta-rs reads, and a view that starts
    at a checkpoint offers what the plain path offers: no compaction's files."""
    location = str(tmp_path / "orders")
    files = table_with_history(location, 250)
    assert DeltaTable(location).version() == 249
    assert len(DeltaTable(location).file_uris()) == files == 1 + 49  # compacted, and since
    plain = TableFiles(location, "sent_at", catch_up=1 << 62)
    assert [f.version for f in plain.added(-1, 249)] == [v for v in range(250) if v % 100 or not v]
    for after in (99, 150, 248):
        assert TableFiles(location, "sent_at", 0).added(after, 249) == plain.added(after, 249)
    assert latest_schema(location) == arrow_schema(location)
