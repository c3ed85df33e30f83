"""Storage: read -> write of message rows through the ``lake`` data source vs delta-rs direct.

The floor is delta-rs alone in this process (its query engine reads the table into
Arrow, ``write_deltalake`` writes it back). The data source does the same through
Spark: executors read and write parquet, the driver commits with delta-rs.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from bench import Figure
from routing import schemas
from routing.lake_source import TableWrite, commit, write_files


def message_table(rows: int, seed: int = 7) -> pa.Table:
    """Realistic message rows: a few properties, small bodies, UTC times, some nulls."""
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    sent = (1_767_225_600_000_000 + ids * 1000).astype("datetime64[us]")
    kinds = np.array(["order", "invoice", "refund", "audit"])[rng.integers(0, 4, rows)]
    offsets = np.arange(0, 2 * rows + 1, 2, dtype=np.int32)
    keys = np.tile(np.array(["kind", "region"], dtype=object), rows)
    values = np.empty(2 * rows, dtype=object)
    values[0::2] = kinds
    values[1::2] = np.array(["eu", "us", "apac"])[rng.integers(0, 3, rows)]
    properties = pa.MapArray.from_arrays(
        pa.array(offsets), pa.array(keys, pa.string()), pa.array(values, pa.string())
    )
    routing = pa.array(np.where(rng.random(rows) < 0.5, "ANYCAST", None), pa.string())
    return pa.table(
        {
            "message_id": ids,
            "address": pa.array(np.full(rows, "orders", dtype=object), pa.string()),
            "routing_type": routing,
            "sent_at": pa.array(sent).cast(schemas.TIMESTAMP),
            "expiration": pa.nulls(rows, schemas.TIMESTAMP),
            "priority": pa.array(rng.integers(0, 10, rows).astype(np.int32)),
            "durable": pa.array(rng.random(rows) < 0.9),
            "user_id": pa.nulls(rows, pa.string()),
            "properties": properties,
            "body": pa.array([b"payload-%06d" % (i % 1000) for i in range(rows)], pa.binary()),
            "copy_reason": pa.nulls(rows, pa.string()),
            "to_queue": pa.nulls(rows, pa.string()),
        },
        schema=schemas.MESSAGE,
    )


def _delta_rs_copy(source: str, target: str) -> None:
    table = QueryBuilder().register("t", DeltaTable(source)).execute('select * from "t"').read_all()
    write_deltalake(target, table, mode="append")


def _data_source_copy(spark, source: str, target: str) -> None:
    spark.read.format("lake").load(source).write.format("lake").mode("append").save(target)


def _spark_parquet_copy(spark, source: str, target: str) -> None:
    """Spark's own Parquet reader and writer on the same files: what Spark's row path costs."""
    spark.read.parquet(source).write.mode("overwrite").parquet(target)


def _handoff_to_python(spark, source: str) -> None:
    """Spark reads the rows and hands them to Python workers as Arrow, which drop them: what
    any Python writer pays before it writes a byte (Spark 4.2 has no columnar hand-off)."""
    rows = spark.read.parquet(source)
    rows.mapInArrow(lambda batches: (b.slice(0, 0) for b in batches), rows.schema).write.format(
        "noop"
    ).mode("overwrite").save()


def run(spark, scale: float) -> list[Figure]:
    rows = int(1_000_000 * scale)
    work = Path(tempfile.mkdtemp(prefix="bench-storage-"))
    try:
        source = str(work / "source")
        # written by the lake writer: 128k-row row groups, so either engine can split it
        commit(
            TableWrite(source, schemas.MESSAGE), write_files(message_table(rows), source, "", ())
        )
        _data_source_copy(spark, source, str(work / "warm"))  # Python workers up
        floor = best(lambda i: _delta_rs_copy(source, str(work / f"floor{i}")))
        lake = best(lambda i: _data_source_copy(spark, source, str(work / f"lake{i}")))
        _spark_parquet_copy(spark, source, str(work / "native"))  # warm
        native = best(lambda i: _spark_parquet_copy(spark, source, str(work / f"native{i}")))
        handoff = best(lambda i: _handoff_to_python(spark, source))
        assert DeltaTable(str(work / "lake0")).count() == rows
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = lake / floor
    return [
        Figure(f"delta-rs read+write of {rows:,} rows (floor)", rows / floor, "rows/s"),
        Figure("  floor per row", floor / rows * 1e6, "µs"),
        Figure(f"lake data source read->write of {rows:,} rows", rows / lake, "rows/s"),
        Figure("  data source per row", lake / rows * 1e6, "µs"),
        Figure("data source time / floor time", ratio, "x", "<= 3x", ratio <= 3.0),
        Figure(f"Spark's native parquet read->write of {rows:,} rows", rows / native, "rows/s"),
        Figure("data source time / Spark native parquet time", lake / native, "x"),
        Figure("Spark read + hand-off to Python, no write", handoff / rows * 1e6, "µs/row"),
        Figure("  hand-off alone / floor time", handoff / floor, "x"),
    ]


def best(step, repeat: int = 2) -> float:
    times = []
    for i in range(repeat):
        started = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - started)
    return min(times)
