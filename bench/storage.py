"""Storage: read -> write of message rows through the job's storage path (delta-spark),
beside Spark's own Parquet read+write of the same rows and a plain delta-rs read+write.

The job's path is what a batch does with message rows: the input stream's read (Spark's
Parquet reader on the files the Delta log lists, :func:`routing.io.lake_events.read_events`)
and an idempotent append with delta-spark (:func:`routing.io.storage.append`). Spark's own
Parquet read+write of the same files is the reference: the target is Delta's cost on top
of Spark's I/O within 1.2x of it. delta-rs alone in this process is reported as it comes.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from pyspark.sql import Row

from bench import Figure
from routing.io.delta_tables import TableFiles, arrow_schema
from routing.io.lake_events import SLICE, UNBOUNDED, read_events, slice_row
from routing.io.storage import append
from routing.plan import schemas


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
            "property_types": pa.nulls(rows, schemas.MESSAGE.field("property_types").type),
            "body": pa.array([b"payload-%06d" % (i % 1000) for i in range(rows)], pa.binary()),
            "copy_reason": pa.nulls(rows, pa.string()),
            "to_queue": pa.nulls(rows, pa.string()),
        },
        schema=schemas.MESSAGE,
    )


def _delta_rs_copy(source: str, target: str) -> None:
    table = QueryBuilder().register("t", DeltaTable(source)).execute('select * from "t"').read_all()
    write_deltalake(target, table, mode="append")


def _job_copy(spark, source: str, target: str) -> None:
    """The job's path: the input read of every file of the table, then a Delta append."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(arrow_schema(source)).json()
    files = TableFiles(source, "sent_at").added(-1, DeltaTable(source).version())
    slices = [
        Row(
            **dict(
                zip(
                    SLICE.names,
                    slice_row("addresses/orders", source, f, None, UNBOUNDED, schema),
                    strict=True,
                )
            )
        )
        for f in files
    ]
    rows = read_events(spark, slices).select(*schemas.MESSAGE.names)
    append(rows, target, app_id="bench", txn_version=0)


def _spark_parquet_copy(spark, source: str, target: str) -> None:
    """Spark's own Parquet reader and writer on the same files: what Spark's row path costs."""
    spark.read.parquet(source).write.mode("overwrite").parquet(target)


def run(spark, scale: float) -> list[Figure]:
    rows = int(1_000_000 * scale)
    work = Path(tempfile.mkdtemp(prefix="bench-storage-"))
    try:
        source = str(work / "source")
        table = message_table(rows)
        for start in range(0, rows, 128_000):  # a producer's commits of 128k rows
            write_deltalake(source, table.slice(start, 128_000), mode="append")
        _job_copy(spark, source, str(work / "warm"))
        job = best(lambda i: _job_copy(spark, source, str(work / f"job{i}")))
        _spark_parquet_copy(spark, source, str(work / "native"))  # warm
        native = best(lambda i: _spark_parquet_copy(spark, source, str(work / f"native{i}")))
        floor = best(lambda i: _delta_rs_copy(source, str(work / f"floor{i}")))
        assert DeltaTable(str(work / "job0")).count() == rows
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = job / native
    return [
        Figure(f"job storage path read->write of {rows:,} rows", rows / job, "rows/s"),
        Figure("  job path per row", job / rows * 1e6, "µs"),
        Figure(f"Spark's own parquet read->write of {rows:,} rows", rows / native, "rows/s"),
        Figure("job path time / Spark parquet time", ratio, "x", "<= 1.2x", ratio <= 1.2),
        Figure(f"delta-rs read+write of {rows:,} rows", rows / floor, "rows/s"),
        Figure("job path time / delta-rs time", job / floor, "x"),
    ]


def best(step, repeat: int = 2) -> float:
    times = []
    for i in range(repeat):
        started = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - started)
    return min(times)
