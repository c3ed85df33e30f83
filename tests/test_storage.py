"""The job's storage between batches: the PENDING rows and producer ids one batch carries
to the next, and how it commits its queue rows."""

from __future__ import annotations

import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from routing.broker import layout
from routing.broker.state import JobState
from routing.io.delta_tables import (
    TableFiles,
    TableLogs,
    epoch_micros,
    table_version,
    transaction_version,
)
from routing.io.jvm import jvm_class
from routing.io.lake import Lake
from routing.io.storage import (
    APP_TRANSACTION_APPEND,
    CHECKPOINT_INTERVAL,
    OVERLAPPED_ROWS,
    TABLE,
    DeltaStorage,
    LogCheckpoints,
    Outputs,
    statistics_columns,
)
from routing.io.storage import append as append_rows
from routing.plan import schemas
from routing.plan._columns import local_frame
from routing.plan.expiry import Expirations
from routing.plan.id_ranges import IdRanges
from tests.lakeio import append, at, commit_actions

APP = "jobs.route:test-query"


def queue_row(
    message_id: int, status: str, queue: str = "orders", expiration: int | None = None
) -> tuple[object, ...]:
    """A ``queue_messages`` row (QUEUE_MESSAGE's column order) of a message in ``queue``
    (``expiration``: conformance time, :func:`at`)."""
    sent = at(message_id)
    expires = None if expiration is None else at(expiration)
    untyped = None  # property_types
    message = (message_id, "orders", "ANYCAST", sent, expires, 4, True, None, {}, untyped, b"x")
    message = (*message, None, None)
    return (*message, queue, status, 0, None, sent, sent)


def write_batch(
    spark: SparkSession,
    storage: DeltaStorage,
    batch_id: int,
    rows: list,
    producer_ids: tuple[int, ...] = (),
    *,
    folded: bool = False,
) -> dict[str, int]:
    """One batch as the job runs it: its PENDING rows and the producer ids taken read,
    then its queue rows and the ``producer_ids`` it accepted written (``folded``: the queue
    rows were computed from the PENDING rows read, :class:`Outputs`); the rows written by
    table."""
    storage.pending(spark)
    storage.taken(spark, batch_id)
    queue_rows = local_frame(spark, rows, schemas.spark_schema(schemas.QUEUE_MESSAGE))
    ids = local_frame(
        spark, [(i, batch_id) for i in producer_ids], schemas.spark_schema(schemas.PRODUCER_ID)
    )
    no_journal = local_frame(spark, [], schemas.spark_schema(schemas.JOURNAL))
    tagged = [
        no_journal.withColumn(TABLE, F.lit(layout.JOURNAL)),
        ids.withColumn(TABLE, F.lit(layout.PRODUCER_IDS)),
    ]
    outputs = Outputs(tagged, queue_rows, len(rows) + len(producer_ids), folded)
    return storage.write(outputs, JobState(), APP, batch_id)


def pending_in_delta(spark: SparkSession, lake: Lake) -> DataFrame:
    return (
        spark.read.format("delta")
        .load(lake.queue_messages)
        .where(F.col("status") == schemas.PENDING)
        .select(*schemas.QUEUE_MESSAGE.names)
    )


def test_a_batch_carries_the_pending_rows_delta_holds_after_its_commit(spark, tmp_path):
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [queue_row(1, "PENDING"), queue_row(2, "PENDING")])
    # message 1 is acknowledged (the fold ran), message 3 arrives, message 2 stays
    write_batch(spark, storage, 1, [queue_row(1, "ACKED"), queue_row(3, "PENDING")], folded=True)

    carried = storage.pending(spark)

    assert carried.inputFiles() == []  # from memory: no file of the table read
    assert_df_equality(
        carried.orderBy("message_id"),
        pending_in_delta(spark, lake).orderBy("message_id"),
        ignore_nullable=True,
    )
    assert sorted(r.message_id for r in carried.collect()) == [2, 3]


def test_another_writers_commit_makes_the_next_batch_read_delta_again(spark, tmp_path):
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [queue_row(1, "PENDING")])
    columns = schemas.QUEUE_MESSAGE.names
    append(
        lake.queue_messages,
        [dict(zip(columns, queue_row(7, "PENDING"), strict=True))],
        schemas.QUEUE_MESSAGE,
    )

    pending = storage.pending(spark)

    assert sorted(r.message_id for r in pending.collect()) == [1, 7]
    assert_df_equality(
        pending.orderBy("message_id"),
        pending_in_delta(spark, lake).orderBy("message_id"),
        ignore_nullable=True,
    )


def test_a_new_process_keeps_the_pending_rows_it_reads_and_appends_new_ones(spark, tmp_path):
    """A process's first batch reads the PENDING rows from Delta once: kept and counted as
    carried ones, and a batch that changes none of them appends its rows."""
    lake = Lake.at(tmp_path / "lake")
    write_batch(spark, DeltaStorage(lake), 0, [queue_row(1, "PENDING", expiration=900)])
    storage = DeltaStorage(lake)  # the next process's

    pending = storage.pending(spark)

    assert pending.inputFiles() == []  # kept: the table's files are read once
    assert storage.pending_expirations() == Expirations(epoch_micros(at(900)))
    assert_df_equality(
        pending.orderBy("message_id"),
        pending_in_delta(spark, lake).orderBy("message_id"),
        ignore_nullable=True,
    )
    write_batch(spark, storage, 1, [queue_row(2, "PENDING"), queue_row(3, "ACKED")])
    assert last_operation(spark, lake) == "WRITE"
    assert sorted(
        (r.message_id, r.status)
        for r in spark.read.format("delta").load(lake.queue_messages).collect()
    ) == [(1, "PENDING"), (2, "PENDING"), (3, "ACKED")]


def enable_deletion_vectors(spark: SparkSession, location: str) -> None:
    spark.sql(
        f"ALTER TABLE delta.`{location}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)"
    )


def test_a_new_process_reads_the_pending_rows_of_the_tables_latest_version(spark, tmp_path):
    """Rows rewritten or deleted since they were written (another writer's MERGE or
    DELETE, with deletion vectors) are read as the table's latest version has them."""
    from delta.tables import DeltaTable as SparkTable

    lake = Lake.at(tmp_path / "lake")
    rows = [queue_row(i, "PENDING") for i in (1, 2, 3)] + [queue_row(4, "ACKED")]
    write_batch(spark, DeltaStorage(lake), 0, rows)
    enable_deletion_vectors(spark, lake.queue_messages)
    SparkTable.forPath(spark, lake.queue_messages).delete("message_id = 2")
    assert DeltaTable(lake.queue_messages).protocol().min_reader_version == 3

    pending = DeltaStorage(lake).pending(spark)  # the next process's

    assert sorted(r.message_id for r in pending.collect()) == [1, 3]
    assert_df_equality(
        pending.orderBy("message_id"),
        pending_in_delta(spark, lake).orderBy("message_id"),
        ignore_nullable=True,
    )


def test_a_batch_too_large_to_carry_leaves_the_next_to_read_delta(spark, tmp_path, monkeypatch):
    monkeypatch.setattr("routing.io.storage.CARRIED_PENDING_ROWS", 1)
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [queue_row(1, "PENDING"), queue_row(2, "PENDING")])

    pending = storage.pending(spark)

    assert pending.inputFiles() != []
    assert sorted(r.message_id for r in pending.collect()) == [1, 2]


@pytest.mark.parametrize(
    ("expirations", "earliest"),
    [((None, None), None), ((None, 9_000), 9_000), ((7_000, 5_000), 5_000)],
    ids=["none", "one", "earliest"],
)
def test_pending_rows_read_through_delta_have_their_expirations_from_the_statistics(
    spark, tmp_path, monkeypatch, expirations, earliest
):
    """Known without reading a row, as the carried rows' are: a batch behind a deep backlog
    asks no more to know that none expires. An EXPIRED row's expiration is not theirs."""
    monkeypatch.setattr("routing.io.storage.CARRIED_PENDING_ROWS", 0)
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    first, second = expirations
    write_batch(spark, storage, 0, [queue_row(1, "PENDING", expiration=first)])
    write_batch(
        spark,
        storage,
        1,
        [queue_row(2, "PENDING", expiration=second), queue_row(3, "EXPIRED", expiration=100)],
    )

    next_process = DeltaStorage(lake)
    next_process.pending(spark)

    expected = None if earliest is None else epoch_micros(at(earliest))
    assert next_process.pending_expirations() == Expirations(expected)


def test_pending_rows_of_files_without_expiration_statistics_have_no_known_expirations(
    spark, tmp_path, monkeypatch
):
    """A table the job created before its files recorded them: the batch asks (None)."""
    from deltalake import write_deltalake

    monkeypatch.setattr("routing.io.storage.CARRIED_PENDING_ROWS", 0)
    lake = Lake.at(tmp_path / "lake")
    earlier = {"delta.dataSkippingStatsColumns": "message_id,sent_at,routed_at,status_at"}
    empty = schemas.QUEUE_MESSAGE.empty_table()
    write_deltalake(lake.queue_messages, empty, partition_by=["status"], configuration=earlier)
    write_batch(spark, DeltaStorage(lake), 0, [queue_row(1, "PENDING", expiration=9_000)])

    storage = DeltaStorage(lake)
    storage.pending(spark)

    assert storage.pending_expirations() is None


def test_a_batch_of_new_messages_carries_the_rows_its_write_kept(spark, tmp_path):
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [queue_row(1, "PENDING"), queue_row(2, "PENDING")])
    # no row of batches 1 and 2 has the key of a PENDING row: nothing to take out
    write_batch(spark, storage, 1, [queue_row(3, "PENDING"), queue_row(4, "ACKED")])
    write_batch(spark, storage, 2, [queue_row(5, "PENDING")])

    carried = storage.pending(spark)

    assert storage._carried is not None
    assert len(storage._carried.parts) == 3  # batch 0's rows, then each batch's as kept
    assert storage._carried.count == 4
    assert carried.inputFiles() == []
    assert_df_equality(
        carried.orderBy("message_id"),
        pending_in_delta(spark, lake).orderBy("message_id"),
        ignore_nullable=True,
    )


@pytest.mark.parametrize("why", ["parts", "folded"])
def test_carried_rows_are_checkpointed_into_one_frame_past_the_parts_or_after_a_fold(
    spark, tmp_path, monkeypatch, why
):
    monkeypatch.setattr("routing.io.storage.CARRIED_PARTS", 2)
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [queue_row(1, "PENDING")])
    write_batch(spark, storage, 1, [queue_row(2, "PENDING")], folded=why == "folded")
    write_batch(spark, storage, 2, [queue_row(3, "PENDING"), queue_row(4, "EXPIRED")])

    carried = storage.pending(spark)

    assert storage._carried is not None
    # parts: batch 0's, batch 1's, then one; folded: batch 1 checkpoints, batch 2 adds its own
    assert len(storage._carried.parts) == (1 if why == "parts" else 2)
    assert storage._carried.count == 3  # parts: added up, not counted again
    assert sorted(r.message_id for r in carried.collect()) == [1, 2, 3]


def test_the_carried_rows_expirations_are_known_without_reading_them(spark, tmp_path):
    """The earliest expiration of the PENDING rows carried, counted as they are: by the
    batch that checkpoints them, and added up when a batch of new messages extends them;
    counted too when they are read through Delta, few enough to be kept."""
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)

    def earliest_after(batch_id: int, rows: list, *, folded: bool = False) -> int | None:
        write_batch(spark, storage, batch_id, rows, folded=folded)
        return earliest_after_read()

    def earliest_after_read() -> int | None:
        storage.pending(spark)
        expirations = storage.pending_expirations()
        assert expirations is not None
        return expirations.earliest

    micros = lambda ms: epoch_micros(at(ms))  # noqa: E731
    assert earliest_after(0, [queue_row(1, "PENDING", expiration=500)]) == micros(500)
    # extended: a PENDING row's expiration counts, an expired row's does not
    two_expirations = [
        queue_row(2, "PENDING", expiration=400),
        queue_row(3, "EXPIRED", expiration=5),
    ]
    assert earliest_after(1, two_expirations) == micros(400)
    assert len(storage._carried.parts) == 2
    # checkpointed again: message 2 left the queue
    assert earliest_after(2, [queue_row(2, "ACKED", expiration=400)], folded=True) == micros(500)
    assert earliest_after(3, [queue_row(1, "ACKED", expiration=500)], folded=True) is None

    append(
        lake.queue_messages,
        [
            dict(
                zip(
                    schemas.QUEUE_MESSAGE.names,
                    queue_row(7, "PENDING", expiration=300),
                    strict=True,
                )
            )
        ],
        schemas.QUEUE_MESSAGE,
    )
    # another writer's commit: the rows are read from Delta again, and counted
    assert earliest_after_read() == micros(300)


def last_operation(spark: SparkSession, lake: Lake) -> str:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, lake.queue_messages).history(1).collect()[0].operation


@pytest.mark.parametrize("overlapped_rows", [OVERLAPPED_ROWS, 0], ids=["overlapped", "in-turn"])
def test_a_batch_that_changes_no_pending_row_appends_its_queue_rows(
    spark, tmp_path, monkeypatch, overlapped_rows
):
    monkeypatch.setattr("routing.io.storage.OVERLAPPED_ROWS", overlapped_rows)
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [queue_row(1, "PENDING"), queue_row(2, "PENDING")])
    # message 3 arrives; message 4 arrives and is acknowledged in the same batch
    write_batch(spark, storage, 1, [queue_row(3, "PENDING"), queue_row(4, "ACKED")])

    assert last_operation(spark, lake) == "WRITE"
    assert storage.done(APP, 1)
    expected = local_frame(
        spark,
        [
            queue_row(1, "PENDING"),
            queue_row(2, "PENDING"),
            queue_row(3, "PENDING"),
            queue_row(4, "ACKED"),
        ],
        schemas.spark_schema(schemas.QUEUE_MESSAGE),
    )
    written = (
        spark.read.format("delta").load(lake.queue_messages).select(*schemas.QUEUE_MESSAGE.names)
    )
    assert_df_equality(
        written.orderBy("message_id"), expected.orderBy("message_id"), ignore_nullable=True
    )


@pytest.mark.parametrize("carried", [False, True], ids=["new-table", "carried-rows"])
def test_a_large_batch_appends_its_queue_rows_from_their_plan(
    spark, tmp_path, monkeypatch, carried
):
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    earlier = [queue_row(1, "PENDING")] if carried else []
    if carried:
        write_batch(spark, storage, 0, earlier)
    # a large batch (more input rows than are carried), none of whose queue rows updates one
    monkeypatch.setattr("routing.io.storage.OVERLAPPED_ROWS", 0)
    monkeypatch.setattr("routing.io.storage.CARRIED_PENDING_ROWS", 2)
    batch = [queue_row(2, "PENDING"), queue_row(3, "ACKED"), queue_row(4, "PENDING")]
    before = job_names(spark)
    written = write_batch(spark, storage, 1, batch)
    ran = [n for i, n in job_names(spark).items() if i not in before]

    assert last_operation(spark, lake) == "WRITE"
    # the queue rows were not kept (a local checkpoint) and counted: counted from the commit
    assert not [n for n in ran if n.startswith(("localCheckpoint", "count"))], ran
    assert written[layout.QUEUE_MESSAGES] == 3
    rows = local_frame(spark, earlier + batch, schemas.spark_schema(schemas.QUEUE_MESSAGE))
    table = spark.read.format("delta").load(lake.queue_messages)
    assert_df_equality(
        table.select(*schemas.QUEUE_MESSAGE.names).orderBy("message_id"),
        rows.orderBy("message_id"),
        ignore_nullable=True,
    )
    # none carried: the next batch reads the PENDING rows from Delta
    assert storage._carried is None
    assert_df_equality(
        storage.pending(spark).orderBy("message_id"),
        pending_in_delta(spark, lake).orderBy("message_id"),
    )


def jobs_ran(spark: SparkSession) -> list:
    """The Spark jobs the application ran so far (the status store's ``JobData``), once the
    listeners have caught up."""
    context = spark.sparkContext._jsc.sc()
    context.listenerBus().waitUntilEmpty(60_000)
    jobs = context.statusStore().jobsList(None)
    return list(spark.sparkContext._jvm.scala.jdk.javaapi.CollectionConverters.asJava(jobs))


def job_names(spark: SparkSession) -> dict[int, str]:
    """The Spark jobs ran so far, by id, with their names (the call that started each, as
    ``localCheckpoint at ...``)."""
    return {j.jobId(): j.name() for j in jobs_ran(spark)}


def job_descriptions(spark: SparkSession) -> dict[int, str]:
    """The Spark jobs ran so far, by id, with their descriptions ("" for none)."""
    described = ((j.jobId(), j.description()) for j in jobs_ran(spark))
    return {i: d.get() if d.isDefined() else "" for i, d in described}


def test_a_batch_that_changes_a_pending_row_merges_its_queue_rows(spark, tmp_path, monkeypatch):
    """The plain path: a PENDING partition too large to replace."""
    monkeypatch.setattr("routing.io.storage.REPLACED_PENDING_ROWS", 0)
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [queue_row(1, "PENDING"), queue_row(2, "PENDING")])
    before = job_descriptions(spark)
    write_batch(spark, storage, 1, [queue_row(1, "ACKED"), queue_row(3, "PENDING")], folded=True)
    ran = {i: d for i, d in job_descriptions(spark).items() if i not in before}

    assert last_operation(spark, lake) == "MERGE"
    assert ran
    # the rows were checkpointed by the write: Delta's MERGE does not copy them again
    assert not [d for d in ran.values() if "materialize source" in d]
    rows = spark.read.format("delta").load(lake.queue_messages).collect()
    assert sorted((r.message_id, r.status) for r in rows) == [
        (1, "ACKED"),
        (2, "PENDING"),
        (3, "PENDING"),
    ]


def test_a_table_that_records_its_changes_is_merged_into(spark, tmp_path):
    """A change data feed records what a MERGE changed: a partition replaced would record
    every PENDING row as deleted and inserted again."""
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [queue_row(1, "PENDING"), queue_row(2, "PENDING")])
    spark.sql(
        f"ALTER TABLE delta.`{lake.queue_messages}` "
        "SET TBLPROPERTIES ('delta.enableChangeDataFeed' = true)"
    )
    storage = DeltaStorage(lake)  # the table moved: the next process's

    write_batch(spark, storage, 1, [queue_row(1, "ACKED")], folded=True)

    assert last_operation(spark, lake) == "MERGE"
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 2)
        .load(lake.queue_messages)
    )
    assert sorted((r.message_id, r._change_type) for r in changes.collect()) == [
        (1, "update_postimage"),
        (1, "update_preimage"),
    ]


def delta_jobs(spark: SparkSession, since: dict[int, str]) -> list[str]:
    """The descriptions of Delta's own Spark jobs (its snapshot's state, a scan's or a
    MERGE's files) run since the jobs ``since`` (:func:`job_descriptions`)."""
    return [d for i, d in job_descriptions(spark).items() if i not in since and "Delta" in d]


@pytest.mark.parametrize("process", ["same", "new"])
def test_a_batch_that_changes_a_pending_row_replaces_the_small_pending_partition(
    spark, tmp_path, process
):
    """One commit removes the partition's files and adds its rows anew with the batch's
    changes, as the MERGE would leave the table; without rebuilding the snapshot's state,
    in the process that wrote the last version or in a new one (which reads the PENDING
    rows from the files the log names)."""
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    first = [queue_row(1, "PENDING"), queue_row(2, "PENDING", expiration=900)]
    write_batch(spark, storage, 0, [*first, queue_row(3, "ACKED")])
    write_batch(spark, storage, 1, [queue_row(4, "PENDING")])
    replaced = {a["path"] for a in commit_actions(lake.queue_messages, 0)["add"]}
    replaced |= {a["path"] for a in commit_actions(lake.queue_messages, 1)["add"]}
    replaced = {p for p in replaced if p.startswith("status=PENDING/")}
    if process == "new":
        storage = DeltaStorage(lake)
    before = job_descriptions(spark)
    redelivered = list(queue_row(2, "PENDING", expiration=900))
    redelivered[schemas.QUEUE_MESSAGE.names.index("delivery_count")] = 1
    changed = [queue_row(1, "ACKED"), tuple(redelivered), queue_row(5, "DEAD_LETTERED")]
    write_batch(spark, storage, 2, changed, folded=True)

    assert delta_jobs(spark, before) == []
    commit = commit_actions(lake.queue_messages, 2)
    assert {r["path"] for r in commit["remove"]} == replaced
    assert commit["commitInfo"][0]["operationParameters"]["mode"] == "Overwrite"
    assert [(t["appId"], t["version"]) for t in commit["txn"]] == [(APP, 2)]
    rows = spark.read.format("delta").load(lake.queue_messages)
    assert sorted((r.message_id, r.status, r.delivery_count) for r in rows.collect()) == [
        (1, "ACKED", 0),
        (2, "PENDING", 1),
        (3, "ACKED", 0),
        (4, "PENDING", 0),
        (5, "DEAD_LETTERED", 0),
    ]
    assert_df_equality(
        storage.pending(spark).orderBy("message_id"),
        pending_in_delta(spark, lake).orderBy("message_id"),
        ignore_nullable=True,
    )


def taken_ids(taken: DataFrame | None) -> list[int]:
    assert taken is not None
    return sorted(r.message_id for r in taken.collect())


def test_a_batch_carries_the_producer_ids_it_appended(spark, tmp_path, monkeypatch):
    monkeypatch.setattr("routing.io.storage.KEPT_PRODUCER_IDS", 0)  # the table read pinned
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [], producer_ids=(1, 2))
    write_batch(spark, storage, 1, [], producer_ids=(3,))
    write_batch(spark, storage, 2, [], producer_ids=(4,))
    first_files = set(
        spark.read.format("delta").option("versionAsOf", 0).load(lake.producer_ids).inputFiles()
    )

    taken = storage.taken(spark, 3)

    assert taken is not None
    assert set(taken.inputFiles()) == first_files  # batches 1 and 2 from memory
    in_delta = spark.read.format("delta").load(lake.producer_ids).select("message_id")
    assert_df_equality(taken.orderBy("message_id"), in_delta.orderBy("message_id"))
    assert taken_ids(taken) == [1, 2, 3, 4]


def test_a_small_producer_id_table_is_read_once_into_memory(spark, tmp_path):
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [], producer_ids=(1, 2))
    write_batch(spark, storage, 1, [], producer_ids=(3,))
    write_batch(spark, storage, 2, [], producer_ids=(4,))

    taken = storage.taken(spark, 3)

    assert taken is not None
    assert taken.inputFiles() == []  # no Delta scan for the batch to plan
    assert taken_ids(taken) == [1, 2, 3, 4]


@pytest.mark.parametrize("from_files", [True, False], ids=["files", "delta"])
def test_a_new_process_reads_the_producer_ids_of_the_tables_latest_version(
    spark, tmp_path, monkeypatch, from_files
):
    """Compacted, with another writer's id, then with an id deleted through a deletion
    vector: read from the files the log names while they hold the table's rows alone
    (``PRODUCER_IDS_FROM_FILES``), through Delta once they do not, or with the switch off."""
    from delta.tables import DeltaTable as SparkTable

    monkeypatch.setattr("routing.io.storage.PRODUCER_IDS_FROM_FILES", from_files)
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    for batch, ids in enumerate([(1, 2), (3,), (4, 5)]):
        write_batch(spark, storage, batch, [], producer_ids=ids)
    SparkTable.forPath(spark, lake.producer_ids).optimize().executeCompaction()
    append(lake.producer_ids, [{"message_id": 9, "batch_id": 2}], schemas.PRODUCER_ID)

    assert taken_ids(DeltaStorage(lake).taken(spark, 3)) == [1, 2, 3, 4, 5, 9]  # a new process

    enable_deletion_vectors(spark, lake.producer_ids)
    SparkTable.forPath(spark, lake.producer_ids).delete("message_id = 4")

    assert taken_ids(DeltaStorage(lake).taken(spark, 3)) == [1, 2, 3, 5, 9]


def test_the_batch_that_creates_the_producer_id_table_carries_its_ids(spark, tmp_path):
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [], producer_ids=(1, 2))

    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("taken", "the next batch's producer ids")
    try:
        taken = storage.taken(spark, 1)
    finally:
        spark.sparkContext.setJobGroup("", "")

    assert tracker.getJobIdsForGroup("taken") == []  # not read back through Delta
    assert taken is not None
    assert taken_ids(taken) == [1, 2]
    write_batch(spark, storage, 1, [], producer_ids=(3,))
    assert taken_ids(storage.taken(spark, 2)) == [1, 2, 3]


def test_the_carried_producer_ids_leave_out_the_batch_itself(spark, tmp_path):
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [], producer_ids=(1,))
    write_batch(spark, storage, 1, [], producer_ids=(2,))

    # batch 1 replayed after a crash finds the ids it appended the first time
    assert taken_ids(storage.taken(spark, 1)) == [1]


@pytest.mark.parametrize("kept", [0, 100], ids=["pinned", "kept"])
def test_another_writers_producer_ids_make_the_next_batch_read_delta(
    spark, tmp_path, monkeypatch, kept
):
    monkeypatch.setattr("routing.io.storage.KEPT_PRODUCER_IDS", kept)
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [], producer_ids=(1,))
    write_batch(spark, storage, 1, [], producer_ids=(2,))
    append(lake.producer_ids, [{"message_id": 7, "batch_id": 1}], schemas.PRODUCER_ID)

    taken = storage.taken(spark, 2)

    assert taken is not None
    assert len(taken.inputFiles()) == (3 if kept == 0 else 0)  # kept: read once, into memory
    assert taken_ids(taken) == [1, 2, 7]


def test_too_many_producer_ids_to_carry_make_the_next_batch_read_delta(
    spark, tmp_path, monkeypatch
):
    monkeypatch.setattr("routing.io.storage.CARRIED_PRODUCER_IDS", 1)
    monkeypatch.setattr("routing.io.storage.KEPT_PRODUCER_IDS", 0)  # the table read pinned
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [], producer_ids=(1,))
    write_batch(spark, storage, 1, [], producer_ids=(2, 3))

    taken = storage.taken(spark, 2)

    assert taken is not None
    in_delta = spark.read.format("delta").load(lake.producer_ids)
    assert set(taken.inputFiles()) == set(in_delta.inputFiles())  # batch 1's files too
    assert taken_ids(taken) == [1, 2, 3]


WRITERS = pytest.mark.parametrize(
    "writer", ["job's append", "Delta's writer"], ids=["job-append", "delta-writer"]
)


def use_writer(monkeypatch: pytest.MonkeyPatch, writer: str) -> None:
    """Appends through the job's JVM append (built by ``make setup``), or through Delta's
    writer as on a cluster without the jar (its class name made one that is not there)."""
    if writer == "Delta's writer":
        monkeypatch.setattr("routing.io.storage.APP_TRANSACTION_APPEND", "routing.delta.Absent")
    else:
        assert jvm_class(SparkSession.getActiveSession(), APP_TRANSACTION_APPEND) is not None


def test_the_jobs_append_commits_what_deltas_writer_commits(spark, tmp_path, monkeypatch):
    rows = local_frame(
        spark,
        [queue_row(1, "PENDING"), queue_row(2, "ACKED"), queue_row(3, "PENDING")],
        schemas.spark_schema(schemas.QUEUE_MESSAGE),
    )
    options = dict(partition_by=["status"], user_metadata='{"clock": 1}', rows_per_file=1)
    job, delta = str(tmp_path / "job"), str(tmp_path / "delta")
    for batch in (0, 1):  # the append that creates the table, then one to it
        append_rows(rows, job, app_id=APP, txn_version=batch, **options)
    with monkeypatch.context() as patched:
        use_writer(patched, "Delta's writer")
        for batch in (0, 1):
            append_rows(rows, delta, app_id=APP, txn_version=batch, **options)

    for version in (0, 1):
        ours, theirs = commit_actions(job, version), commit_actions(delta, version)
        assert sorted(ours) == sorted(theirs)
        assert [(t["appId"], t["version"]) for t in ours["txn"]] == [(APP, version)]
        assert [(t["appId"], t["version"]) for t in theirs["txn"]] == [(APP, version)]
        for key in ("operation", "operationParameters", "userMetadata", "isBlindAppend"):
            assert ours["commitInfo"][0][key] == theirs["commitInfo"][0][key]
        assert len(ours["add"]) == len(theirs["add"]) == 3  # one row a file
        assert sorted(a["partitionValues"]["status"] for a in ours["add"]) == sorted(
            a["partitionValues"]["status"] for a in theirs["add"]
        )
    assert_df_equality(
        spark.read.format("delta").load(job).orderBy("message_id"),
        spark.read.format("delta").load(delta).orderBy("message_id"),
    )


@WRITERS
def test_a_batch_written_again_after_a_crash_writes_nothing_twice(
    spark, tmp_path, monkeypatch, writer
):
    use_writer(monkeypatch, writer)
    lake = Lake.at(tmp_path / "lake")
    write_batch(spark, DeltaStorage(lake), 0, [queue_row(1, "PENDING")], producer_ids=(1,))
    # batch 1 committed its producer ids, then the driver died before its queue rows
    ids = local_frame(spark, [(2, 1)], schemas.spark_schema(schemas.PRODUCER_ID))
    append_rows(ids, lake.producer_ids, app_id=APP, txn_version=1)
    before = table_version(lake.producer_ids)

    # the restarted job writes batch 1 again
    write_batch(spark, DeltaStorage(lake), 1, [queue_row(2, "PENDING")], producer_ids=(2,))

    assert table_version(lake.producer_ids) == before  # no second commit
    written = spark.read.format("delta").load(lake.producer_ids)
    assert sorted((r.message_id, r.batch_id) for r in written.collect()) == [(1, 0), (2, 1)]
    assert transaction_version(lake.queue_messages, APP) == 1
    pending = pending_in_delta(spark, lake)
    assert sorted(r.message_id for r in pending.collect()) == [1, 2]


def every_second_version_checkpointed(spark: SparkSession, location: str) -> None:
    spark.sql(f"ALTER TABLE delta.`{location}` SET TBLPROPERTIES (delta.checkpointInterval = 2)")


def checkpoint_file(location: str, version: int) -> Path:
    return Path(location) / "_delta_log" / f"{version:020d}.checkpoint.parquet"


def states_built(spark: SparkSession, location: str) -> list[int]:
    """The versions of the table at ``location`` whose whole state Delta rebuilt (and
    cached: its ``Delta Table State #<version>`` RDDs)."""
    names = [rdd.name() for rdd in spark.sparkContext._jsc.getPersistentRDDs().values()]
    found = (re.fullmatch(r"Delta Table State #(\d+) - (.*)/_delta_log", n or "") for n in names)
    return sorted(int(m[1]) for m in found if m and m[2].endswith(location))


def test_an_append_due_a_checkpoint_leaves_it_to_the_job(spark, tmp_path):
    rows = local_frame(
        spark, [queue_row(1, "PENDING")], schemas.spark_schema(schemas.QUEUE_MESSAGE)
    )
    ours, delta = str(tmp_path / "ours"), str(tmp_path / "delta")
    for location in (ours, delta):
        append_rows(rows, location, app_id=APP, txn_version=0)  # version 0
        every_second_version_checkpointed(spark, location)  # version 1
    checkpoints = LogCheckpoints(spark)

    append_rows(rows, ours, app_id=APP, txn_version=1, checkpoints=checkpoints)  # version 2
    append_rows(rows, delta, app_id=APP, txn_version=1)

    assert checkpoints.waiting == {ours: 2}
    assert not checkpoint_file(ours, 2).exists()
    assert checkpoint_file(delta, 2).exists()  # Delta's commit writes it before returning
    # nor does the commit rebuild the table's state for its statistics, as Delta's does
    assert (states_built(spark, ours), states_built(spark, delta)) == ([], [2])
    checkpoints.close()
    assert checkpoint_file(ours, 2).exists()
    last = json.loads((Path(ours) / "_delta_log" / "_last_checkpoint").read_text())
    assert last["version"] == 2
    assert_df_equality(
        spark.read.format("delta").load(ours), spark.read.format("delta").load(delta)
    )


def table_properties(location: str) -> dict[str, str]:
    return DeltaTable(location).metadata().configuration


def test_the_tables_the_job_creates_are_checkpointed_every_hundred_commits(spark, tmp_path):
    """Set on creation, through the job's append and through Delta's writer alike; a table
    a producer created keeps its own properties."""
    rows = local_frame(
        spark, [queue_row(1, "PENDING")], schemas.spark_schema(schemas.QUEUE_MESSAGE)
    )
    ours, deltas, producers = (str(tmp_path / name) for name in ("ours", "delta", "producer"))
    append_rows(rows, ours, app_id=APP, txn_version=0)  # through APP_TRANSACTION_APPEND
    append_rows(rows, deltas)  # no app transaction: Delta's own writer
    append(producers, [], schemas.QUEUE_MESSAGE)
    append_rows(rows, producers, app_id=APP, txn_version=0)

    interval = {"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)}
    assert CHECKPOINT_INTERVAL == 100
    assert table_properties(ours) == table_properties(deltas) == interval
    assert "delta.checkpointInterval" not in table_properties(producers)


def bounded_columns(location: str) -> set[str]:
    """The columns whose bounds the table's data files record."""
    actions = pa.table(DeltaTable(location).get_add_actions(flatten=True))
    return {name[4:] for name in actions.column_names if name.startswith("max.")}


def test_the_tables_the_job_creates_keep_statistics_on_their_ids_and_times(spark, tmp_path):
    """Only those bounds skip files (every batch's files hold every queue and status), and
    the PENDING rows' expirations tell a batch without a read whether one is due; a
    producer appending to an address table the job created still records its event times,
    which the input stream cuts by; a producer's own table keeps Delta's default."""
    lake = Lake.at(tmp_path / "lake")
    write_batch(spark, DeltaStorage(lake), 0, [queue_row(1, "PENDING")], producer_ids=(1,))
    assert bounded_columns(lake.queue_messages) == {
        "message_id",
        "sent_at",
        "routed_at",
        "status_at",
        "expiration",
    }
    assert bounded_columns(lake.producer_ids) == {"message_id", "batch_id"}

    copies = local_frame(
        spark, [queue_row(2, "PENDING")[:13]], schemas.spark_schema(schemas.MESSAGE)
    )
    dla, producers = lake.address_table("orders.DLA"), lake.address_table("orders")
    bounded = statistics_columns(layout.address_source("orders.DLA"))
    append_rows(copies, dla, app_id=APP, txn_version=0, statistics=bounded)
    append(dla, [{"message_id": 3, "address": "orders.DLA", "sent_at": at(30)}], schemas.MESSAGE)
    assert bounded_columns(dla) == {"message_id", "sent_at"}, "delta-rs keeps to the property"
    [producers_file] = TableFiles(dla, "sent_at").added(0, 1)
    sent = epoch_micros(at(30))
    assert producers_file.min_time == sent <= (producers_file.max_time or 0)

    append(producers, [{"message_id": 4, "address": "orders", "sent_at": at(40)}], schemas.MESSAGE)
    append_rows(copies, producers, app_id=APP, txn_version=0, statistics=bounded)
    assert {"address", "routing_type", "sent_at"} <= bounded_columns(producers)


def test_the_storage_writes_the_checkpoints_its_commits_were_due_before_it_closes(spark, tmp_path):
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [queue_row(1, "PENDING")], producer_ids=(1,))
    for location in (lake.queue_messages, lake.producer_ids):
        every_second_version_checkpointed(spark, location)

    write_batch(spark, storage, 1, [queue_row(2, "PENDING")], producer_ids=(2,))
    storage.close()

    assert checkpoint_file(lake.queue_messages, 2).exists()
    assert checkpoint_file(lake.producer_ids, 2).exists()
    pending = pending_in_delta(spark, lake)
    assert sorted(r.message_id for r in pending.collect()) == [1, 2]


def test_the_checkpoints_due_are_written_one_at_a_time_the_latest_of_each_table(spark, tmp_path):
    rows = local_frame(
        spark, [queue_row(1, "PENDING")], schemas.spark_schema(schemas.QUEUE_MESSAGE)
    )
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    checkpoints = LogCheckpoints(spark)
    for location, versions in ((first, 5), (second, 3)):
        append_rows(rows, location, app_id=APP, txn_version=0)
        every_second_version_checkpointed(spark, location)
        for version in range(2, versions):
            append_rows(rows, location, app_id=APP, txn_version=version, checkpoints=checkpoints)
    assert checkpoints.waiting == {first: 4, second: 2}  # first's 4 replaced its 2

    checkpoints.write_next()
    checkpoints.write_next()  # the first is being written: the second waits

    assert checkpoints.waiting == {second: 2}
    checkpoints.close()
    assert checkpoints.waiting == {}
    assert checkpoint_file(first, 4).exists() and not checkpoint_file(first, 2).exists()
    assert checkpoint_file(second, 2).exists()


@pytest.mark.parametrize("folded", [True, False])
def test_queue_rows_not_folded_are_counted_without_the_carried_rows(spark, tmp_path, folded):
    """Queue rows the fold did not compute are entries of messages the batch routed, with
    new ids: they are counted without comparing them with the PENDING rows carried (no
    broadcast of those rows), and taken to update none."""
    lake = Lake.at(tmp_path / "lake")
    storage = DeltaStorage(lake)
    write_batch(spark, storage, 0, [queue_row(1, "PENDING"), queue_row(2, "PENDING")])
    storage.pending(spark)
    rows = local_frame(
        spark,
        [queue_row(1, "ACKED"), queue_row(3, "PENDING", expiration=700)],
        schemas.spark_schema(schemas.QUEUE_MESSAGE),
    )

    count, updates, pending, expirations, ids = storage._count_queue_rows(rows, folded)

    assert (count, updates, pending) == (2, folded, 1)
    assert expirations is not None
    assert expirations.earliest == epoch_micros(at(700))
    assert ids == IdRanges(((1, 3),))


def test_an_app_transaction_committed_since_the_writer_looked_is_not_committed_again(
    spark, tmp_path
):
    """The job's append asks delta-rs whether its batch was committed, then commits through
    Delta: a commit of the same app transaction landing in between (another writer's) is
    found by the commit itself, which then writes nothing."""
    rows = local_frame(
        spark, [queue_row(1, "PENDING")], schemas.spark_schema(schemas.QUEUE_MESSAGE)
    )
    location = str(tmp_path / "table")
    append_rows(rows, location, app_id=APP, txn_version=0)
    appender = jvm_class(spark, APP_TRANSACTION_APPEND)
    options = {"txnAppId": APP, "txnVersion": "0"}
    # looked before the table existed (-1): version 0 came since, with the transaction
    appender.append(spark._jsparkSession, rows._jdf, location, options, [], False, -1, False)
    assert spark.read.format("delta").load(location).count() == 1
    assert table_version(location) == 0


def test_two_writers_racing_commit_each_app_transaction_once(spark, tmp_path):
    """Two jobs resuming the same batches at once append the same app transactions side by
    side: each is committed once, the loser of a race refused by Delta's conflict check
    (``ConcurrentTransactionException``) or finding the batch committed."""
    rows = local_frame(
        spark,
        [queue_row(1, "PENDING"), queue_row(2, "PENDING")],
        schemas.spark_schema(schemas.QUEUE_MESSAGE),
    )
    location = str(tmp_path / "table")
    append_rows(rows, location)  # the race is on the batches' commits, not on creating it
    batches = 4
    refused: list[str] = []
    for batch in range(batches):
        start = threading.Barrier(2)

        def write(txn_version: int = batch, start: threading.Barrier = start) -> None:
            start.wait()
            append_rows(rows, location, app_id=APP, txn_version=txn_version, logs=TableLogs())

        with ThreadPoolExecutor(2) as pool:
            writers = [pool.submit(write) for _ in range(2)]
        refused += [str(w.exception()) for w in writers if w.exception() is not None]
    assert all("ConcurrentTransactionException" in error for error in refused), refused
    assert spark.read.format("delta").load(location).count() == 2 * (1 + batches)
    assert transaction_version(location, APP) == batches - 1
