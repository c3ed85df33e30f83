"""The copies of many address tables written by one Spark job, then committed table by
table (:func:`routing.io.storage.append_staged`), against each table's own append."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import DataFrame, SparkSession

from routing.broker import layout
from routing.io import storage
from routing.io.delta_tables import transaction_version
from routing.io.jvm import jvm_class
from routing.io.lake import Lake
from routing.io.storage import SKIPPED, STAGED_APPENDS, TABLE, append_tables
from routing.plan import schemas
from routing.plan._columns import local_frame
from tests.lakeio import append, at, commit_actions

APP = "jobs.route:test-query"
ADDRESSES = ("orders", "orders.DLA", "audit", "billing")
PRODUCED = pa.schema(
    [("message_id", pa.int64()), ("address", pa.string()), ("sent_at", pa.timestamp("us", "UTC"))]
)
"""The columns a producer's rows have."""
OPTIONS = storage.append_options(
    schemas.MESSAGE.names, statistics=storage.STATISTICS_COLUMNS[layout.ADDRESSES]
)
"""The options of the job's appends to address tables."""


def copies(spark: SparkSession, batch: int, addresses=ADDRESSES) -> DataFrame:
    """Three copies a batch to each of ``addresses``, tagged with their table."""
    rows = [
        (batch * 100 + i * 10 + n, address, at(batch * 100 + n), layout.address_source(address))
        for i, address in enumerate(addresses)
        for n in range(3)
    ]
    tagged = pa.schema([*[PRODUCED.field(n) for n in PRODUCED.names], (TABLE, pa.string())])
    frame = local_frame(spark, rows, schemas.spark_schema(tagged))
    return storage.conform(frame, schemas.MESSAGE.append(pa.field(TABLE, pa.string())))


def write(spark: SparkSession, lake: Lake, batches: range, *, staged: bool, monkeypatch) -> None:
    monkeypatch.setattr(storage, "STAGED_ADDRESS_APPENDS", staged)
    for batch in batches:
        append_tables(copies(spark, batch), lake, app_id=APP, txn_version=batch)


def table(spark: SparkSession, lake: Lake, address: str) -> DataFrame:
    return spark.read.format("delta").load(lake.address_table(address)).orderBy("message_id")


def test_staged_copies_are_the_tables_own_appends(spark, tmp_path, monkeypatch):
    """Three batches to four address tables, staged and table by table: the same rows, the
    same table properties, commits of the same kind (the batch's app transaction, a blind append, statistics on
    the ids and times), nothing left in the staging folder."""
    staged, plain = Lake.at(tmp_path / "staged"), Lake.at(tmp_path / "plain")
    write(spark, staged, range(3), staged=True, monkeypatch=monkeypatch)
    write(spark, plain, range(3), staged=False, monkeypatch=monkeypatch)

    for address in ADDRESSES:
        assert_df_equality(table(spark, staged, address), table(spark, plain, address))
        location, reference = staged.address_table(address), plain.address_table(address)
        assert transaction_version(location, APP) == 2
        made, plainly_made = DeltaTable(location), DeltaTable(reference)
        assert made.metadata().configuration == plainly_made.metadata().configuration
        assert made.protocol() == plainly_made.protocol()
        assert made.schema() == plainly_made.schema()
        for version in (0, 1, 2):  # the append that creates the table, then two to it
            ours, theirs = commit_actions(location, version), commit_actions(reference, version)
            assert [(t["appId"], t["version"]) for t in ours["txn"]] == [(APP, version)]
            for key in ("operation", "operationParameters", "isBlindAppend"):
                assert ours["commitInfo"][0][key] == theirs["commitInfo"][0][key]
            for add in ours["add"]:
                assert add["partitionValues"] == {}
                assert (Path(location) / add["path"]).is_file()
                stats = json.loads(add["stats"])
                assert set(stats["maxValues"]) == {"message_id", "sent_at"}
        files = pa.table(DeltaTable(location).get_add_actions(flatten=True))
        assert sum(files["num_records"].to_pylist()) == 9  # delta-rs reads every file
    assert not any(Path(staged.table(layout.STAGING)).rglob("*.parquet"))


def test_a_table_the_staged_files_do_not_fit_takes_its_own_append(spark, tmp_path, monkeypatch):
    """A producer's table without the optional columns (``property_types``...) and with
    Delta's default statistics: its copies are appended the plain way, which adds the
    columns, while the tables the job created take their staged files."""
    lake = Lake.at(tmp_path / "lake")
    write(spark, lake, range(1), staged=True, monkeypatch=monkeypatch)
    producers = lake.address_table("payments")
    append(producers, [{"message_id": 1, "address": "payments", "sent_at": at(1)}], PRODUCED)
    addresses = (*ADDRESSES, "payments")

    append_tables(copies(spark, 1, addresses), lake, app_id=APP, txn_version=1)

    got = spark.read.format("delta").load(producers)
    assert "property_types" in got.columns
    assert sorted(r.message_id for r in got.collect()) == [1, 140, 141, 142]
    for address in ADDRESSES:
        assert table(spark, lake, address).count() == 6
        assert transaction_version(lake.address_table(address), APP) == 1


def test_a_staged_batch_written_again_writes_nothing_twice(spark, tmp_path, monkeypatch):
    """A batch resumed after a crash skips the tables that hold its app transaction, and
    the commit itself refuses one committed since the writer looked (its files deleted)."""
    lake = Lake.at(tmp_path / "lake")
    write(spark, lake, range(2), staged=True, monkeypatch=monkeypatch)
    write(spark, lake, range(1, 2), staged=True, monkeypatch=monkeypatch)
    for address in ADDRESSES:
        assert table(spark, lake, address).count() == 6

    appender = jvm_class(spark, STAGED_APPENDS)
    rows = copies(spark, 1).select(*schemas.MESSAGE.names, TABLE)
    root = lake.table(layout.STAGING)
    staged = appender.stage(spark._jsparkSession, rows._jdf, TABLE, root, OPTIONS)
    options = {**OPTIONS, "txnAppId": APP, "txnVersion": "1"}
    orders = lake.address_table("orders")
    # looked before batch 1 (version 0): its commit came since
    due = appender.commit(
        spark._jsparkSession, staged, "addresses/orders", orders, options, False, 0, True
    )
    assert due == SKIPPED
    staged.close(spark._jsparkSession)
    assert table(spark, lake, "orders").count() == 6
    assert not any(Path(root).rglob("*.parquet"))


def has_checksum(location: str, version: int) -> bool:
    return (Path(location) / "_delta_log" / f"{version:020d}.crc").is_file()


@pytest.mark.parametrize("staged", [True, False], ids=["staged", "own-append"])
@pytest.mark.parametrize("shared", [True, False], ids=["shared", "plain"])
def test_a_copy_after_a_producers_commit_leaves_no_checksum_as_the_producer_did(
    spark, tmp_path, monkeypatch, staged, shared
):
    """A producer writing through delta-rs leaves its version without a checksum file. The
    job's next commit to that address table leaves none either (``ADDRESS_TABLES_SHARED``;
    Delta's own commit derives one from the table's state), and so does the one after it;
    the tables only the job wrote keep theirs. Every row is there, read by Delta and by
    delta-rs, and each commit is the batch's app transaction."""
    monkeypatch.setattr(storage, "ADDRESS_TABLES_SHARED", shared)
    lake = Lake.at(tmp_path / "lake")
    write(spark, lake, range(1), staged=staged, monkeypatch=monkeypatch)
    produced = ("orders", "audit")
    for address in produced:  # a producer's row, with the columns the table has
        location = lake.address_table(address)
        row = DeltaTable(location).to_pyarrow_table().slice(0, 1)
        write_deltalake(
            location, row.set_column(0, "message_id", pa.array([7], pa.int64())), mode="append"
        )
        assert not has_checksum(location, 1)

    write(spark, lake, range(1, 3), staged=staged, monkeypatch=monkeypatch)

    for address in ADDRESSES:
        location = lake.address_table(address)
        by_producer = address in produced
        rows = 9 + by_producer
        assert table(spark, lake, address).count() == rows
        assert DeltaTable(location).to_pyarrow_table().num_rows == rows
        assert transaction_version(location, APP) == 2
        versions = (2, 3) if by_producer else (1, 2)  # the job's commits of batches 1, 2
        assert [has_checksum(location, v) for v in versions] == [not (shared and by_producer)] * 2
