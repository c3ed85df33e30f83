"""A batch behind a backlog reads, of what earlier batches left in Delta, only the files
that may hold the ids it names (``spark.routing.stateReads``, routing.plan.id_ranges): it
writes what a batch reading them whole writes, and opens none of a backlog's files when it
names none of their messages."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import route as route_job
from routing.broker.ids import COPY_ID_BASE
from routing.io.lake import Lake
from routing.io.storage import READS
from routing.plan import schemas
from routing.plan.id_ranges import IdRanges
from tests.frames import assert_rows_equal
from tests.lakeio import append, at, read_table

BROKER = """<?xml version="1.0" encoding="UTF-8"?>
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <address-settings>
      <address-setting match="#">
        <dead-letter-address>DLA</dead-letter-address>
        <max-delivery-attempts>2</max-delivery-attempts>
      </address-setting>
    </address-settings>
    <addresses>
      <address name="orders"><anycast><queue name="orders"/></anycast></address>
      <address name="DLA"><anycast><queue name="DLQ"/></anycast></address>
    </addresses>
  </core>
</configuration>
"""

BACKLOG = range(1, 7)
"""The messages the first run leaves PENDING in ``orders``."""


@pytest.fixture
def backlog_in_files(monkeypatch) -> None:
    """The next process reads the PENDING rows and producer ids through Delta, as it does
    past the sizes it keeps in memory."""
    monkeypatch.setattr("routing.io.storage.CARRIED_PENDING_ROWS", 0)
    monkeypatch.setattr("routing.io.storage.KEPT_PRODUCER_IDS", 0)


@contextmanager
def reads(spark: SparkSession, how: str) -> Iterator[None]:
    spark.conf.set(READS, how)
    try:
        yield
    finally:
        spark.conf.unset(READS)


def send(message_id: int, ms: int, **extra) -> dict:
    return {"message_id": message_id, "address": "orders", "sent_at": at(ms), **extra}


def delivery(message_id: int, outcome: str, ms: int) -> dict:
    return {"queue": "orders", "message_id": message_id, "outcome": outcome, "at": at(ms)}


def route(spark: SparkSession, conf: Path, lake: Lake) -> SimpleNamespace:
    """``jobs.route --available-now`` over ``lake`` in a new job (a new process's storage)."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["--conf", str(conf), "--lake", lake.root, "--available-now"]
    status = route_job.main(argv, spark=spark, out=out, err=err)
    return SimpleNamespace(status=status, out=out.getvalue(), err=err.getvalue())


def backlog(spark: SparkSession, folder: Path) -> tuple[Lake, Path]:
    """A lake whose first run left :data:`BACKLOG` PENDING, one of them with an expiration
    long after every event here."""
    folder.mkdir()
    conf = folder / "broker.xml"
    conf.write_text(BROKER, encoding="utf-8")
    lake = Lake.at(folder / "lake")
    sends = [send(i, 1000 + i) for i in BACKLOG]
    sends[0]["expiration"] = at(10_000_000)
    append(lake.address_table("orders"), sends, schemas.MESSAGE)
    run = route(spark, conf, lake)
    assert run.status == 0, run.err
    return lake, conf


def table(spark: SparkSession, location: str, *columns: str) -> DataFrame:
    return spark.createDataFrame(read_table(location)).select(*columns)


@pytest.mark.usefixtures("backlog_in_files")
def test_reading_by_id_writes_what_reading_whole_writes(spark, tmp_path):
    """The second run's batch acknowledges and rolls back messages of the backlog and of
    its own, reuses a producer id the first run took, and names a message that is not
    there: every table comes out as when the backlog's files are read whole."""
    lakes = {}
    for how in ("by-id", "whole"):
        lake, conf = backlog(spark, tmp_path / how)
        append(
            lake.address_table("orders"), [send(i, 5000 + i) for i in (7, 8, 9, 2)], schemas.MESSAGE
        )
        events = [
            delivery(3, "ACK", 6000),
            delivery(5, "ROLLBACK", 6001),
            delivery(5, "ROLLBACK", 6002),  # dead-lettered: max-delivery-attempts 2
            delivery(8, "ACK", 6003),
            delivery(9, "ROLLBACK", 6004),
            delivery(99, "ACK", 6005),
        ]
        append(lake.deliveries, events, schemas.DELIVERY)
        with reads(spark, how):
            run = route(spark, conf, lake)
        assert run.status == 0, run.err
        lakes[how] = lake

    by_id, whole = lakes["by-id"], lakes["whole"]
    queue_columns = ("queue", "message_id", "status", "delivery_count", "redeliver_at", "status_at")
    assert_rows_equal(
        table(spark, by_id.queue_messages, *queue_columns),
        table(spark, whole.queue_messages, *queue_columns),
        order_by=["queue", "message_id", "status"],
    )
    for name in ("rejected", "journal"):
        location = getattr(by_id, name)
        columns = read_table(location).column_names
        assert_rows_equal(
            table(spark, location, *columns),
            table(spark, getattr(whole, name), *columns),
            order_by=columns[:4],
        )
    reasons = sorted(r.reason for r in table(spark, by_id.rejected, "reason").collect())
    assert reasons == ["duplicate message_id 2", "no PENDING message 99 in queue orders"]


@pytest.mark.usefixtures("backlog_in_files")
def test_a_batch_naming_none_of_the_backlog_opens_none_of_its_files(spark, tmp_path):
    """New messages and their deliveries behind a backlog: the batch's reads of the PENDING
    rows, of the producer ids and the MERGE's of ``queue_messages`` skip every file of
    the first run, by their ids' bounds; here those files are gone, and the run does not
    notice. Reading them whole, it fails on the first it opens."""
    for how in ("by-id", "whole"):
        lake, conf = backlog(spark, tmp_path / how)
        first_run = [
            path
            for location in (lake.queue_messages, lake.producer_ids)
            for path in Path(location).rglob("*.parquet")
        ]
        for path in first_run:
            path.unlink()
        append(lake.address_table("orders"), [send(i, 5000 + i) for i in (7, 8)], schemas.MESSAGE)
        append(lake.deliveries, [delivery(7, "ACK", 6000)], schemas.DELIVERY)

        with reads(spark, how):
            run = route(spark, conf, lake)

        if how == "whole":
            assert run.status != 0
            continue
        assert run.status == 0, run.err
        written = spark.read.format("delta").load(lake.queue_messages).where("message_id > 6")
        assert sorted((r.message_id, r.status) for r in written.collect()) == [
            (7, "ACKED"),
            (8, "PENDING"),
        ]


def test_producer_ids_and_copy_ids_are_ranges_of_their_own(spark):
    """A copy's id is a hash anywhere past COPY_ID_BASE: one range over both kinds would
    hold every producer id too."""
    ids = [5, 9, COPY_ID_BASE + 3, COPY_ID_BASE + 100]
    frame = spark.createDataFrame([(i,) for i in ids], "message_id long")
    named = IdRanges.of(frame.agg(*IdRanges.aggregates(F.col("message_id"), "ids")).first(), "ids")
    assert named == IdRanges(((5, 9), (COPY_ID_BASE + 3, COPY_ID_BASE + 100)))

    probes = [4, 5, 7, 9, 10, COPY_ID_BASE, COPY_ID_BASE + 50, COPY_ID_BASE + 101]
    probe = spark.createDataFrame([(i,) for i in probes], "message_id long")
    held = sorted(r.message_id for r in probe.where(named.holds(F.col("message_id"))).collect())
    assert held == [5, 7, 9, COPY_ID_BASE + 50]
    assert probe.where(IdRanges(()).holds(F.col("message_id"))).count() == 0
