"""The benches' view of ``queue_messages`` (bench/watch.py): when each producer id first shows."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, Transaction, write_deltalake
from pyspark.sql import SparkSession

from bench.floor import pending_rows
from bench.watch import QueueWatcher
from routing.broker.layout import ROUTING_APP_PREFIX
from routing.io import storage
from routing.plan import schemas

ROWS = pa.schema([("message_id", pa.int64()), ("copy_reason", pa.string())])


def commit(location: Path, rows: list[tuple[int, str | None]], batch: int) -> None:
    """One commit of queue rows as the routing job makes it: an app transaction of its own."""
    table = pa.Table.from_pylist(
        [{"message_id": m, "copy_reason": c} for m, c in rows], schema=ROWS
    )
    write_deltalake(
        str(location),
        table,
        mode="append",
        commit_properties=CommitProperties(
            app_transactions=[Transaction(f"{ROUTING_APP_PREFIX}test", batch)]
        ),
    )


def test_the_watcher_sees_each_producer_id_when_its_commit_lands(tmp_path: Path) -> None:
    location = tmp_path / "queue_messages"
    ticks = itertools.count(1)
    watcher = QueueWatcher(str(location), clock=lambda: float(next(ticks)))

    watcher.poll()  # no table yet
    assert watcher.seen == {}

    commit(location, [(1, None), (2, None), (9001, "DIVERT")], batch=0)
    watcher.poll()
    watcher.poll()  # nothing new: the ids keep the time they first showed
    assert watcher.seen == {1: 1.0, 2: 1.0}

    commit(location, [(3, None), (1, None)], batch=1)
    watcher.poll()
    assert watcher.seen == {1: 1.0, 2: 1.0, 3: 2.0}


def test_the_watcher_reads_the_rows_the_floors_pass_through_writes(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The floor's continuous pass-through is timed by the same watcher as the routing job
    (``bench.floor``'s latency run): its rows must carry what the watcher reads."""
    sent = datetime(2026, 1, 1, tzinfo=UTC)
    empty = dict.fromkeys(schemas.MESSAGE.names)
    messages = spark.createDataFrame(
        [{**empty, "message_id": m, "address": "orders", "sent_at": sent} for m in (7, 8)],
        schemas.spark_schema(schemas.MESSAGE),
    )
    location = tmp_path / "queue_messages"
    storage.append(
        pending_rows(messages),
        str(location),
        app_id="bench-floor",
        txn_version=0,
        partition_by=[schemas.QUEUE_MESSAGES_PARTITION],
    )
    watcher = QueueWatcher(str(location), clock=lambda: 1.0)
    watcher.poll()
    assert watcher.seen == {7: 1.0, 8: 1.0}
