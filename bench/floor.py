"""Floor: what Spark and Delta alone cost here, the references for the route and replay figures.

Jobs that route nothing, built from the job's own pieces (its session and settings,
its Delta append, the lake's tables), each run as its own process like the job
(issue 22):

- **a cold pass-through**: ``--available-now`` over the ten-message lake, one input
  table (``addresses/orders``) streamed by Delta's source and its rows appended to
  ``queue_messages`` by the job's append: the JVM and session start, a streaming
  query's start, one read and one commit. No routing run can take less; the route
  target for this lake is < 10 s;
- **a continuous pass-through** at a 1 s trigger, under the latency run's producer (120
  rows a second, the same measure as ``bench.replay``'s): a small batch's read and one
  commit, against the routing job's p50 < 2 s target;
- **read and write**: the demo lakes' input tables read by Delta and about as many rows
  written as the job writes per message (6.0 against the job's 6.2: queue rows, journal,
  copies, producer ids), in four tables, with no join, sort or decision; its marginal
  throughput, 100k → 1M, against the route target of 65k msg/s.

``python -m bench.floor pass-through --lake L [--available-now | --trigger T]`` and
``python -m bench.floor read-write --lake L --to DIR`` run one job.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench import Figure, marginal
from bench.process import run_job
from bench.replay import latency
from bench.route import SIZES, input_lake
from routing.io import storage
from routing.io.delta_tables import TableLogs
from routing.io.lake import Lake
from routing.io.session import SMALL_BATCH_CONF, build_session
from routing.plan import schemas
from routing.plan._columns import union_by_name

COLD_RUNS = 3


def _floor(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench.floor", *args]


def pending_rows(messages: DataFrame) -> DataFrame:
    """The pass-through's ``queue_messages`` rows: each message PENDING in queue ``orders``,
    with the columns the latency run's watcher reads (:class:`bench.watch.QueueWatcher`)."""
    return messages.select(
        "message_id",
        F.lit("orders").alias("queue"),
        F.lit(schemas.PENDING).alias(schemas.QUEUE_MESSAGES_PARTITION),
        "sent_at",
        "copy_reason",
    )


def pass_through(lake: Lake, trigger: str | None) -> None:
    """Stream ``addresses/orders`` into ``queue_messages`` as PENDING rows, one idempotent
    append a batch (``trigger`` None: ``--available-now``), as the job commits a small batch."""
    spark = build_session("bench-floor", short_run=trigger is None)
    for key, value in SMALL_BATCH_CONF.items():
        spark.conf.set(key, value)
    logs = TableLogs()

    def append(rows: DataFrame, batch_id: int) -> None:
        storage.append(
            pending_rows(rows),
            lake.queue_messages,
            app_id="bench-floor",
            txn_version=batch_id,
            partition_by=[schemas.QUEUE_MESSAGES_PARTITION],
            logs=logs,
        )

    writer = (
        spark.readStream.format("delta")
        .load(lake.address_table("orders"))
        .writeStream.foreachBatch(append)
        .option("checkpointLocation", f"{lake.root}/_checkpoints/bench-floor")
    )
    query = writer.trigger(
        **({"availableNow": True} if trigger is None else {"processingTime": trigger})
    ).start()
    query.awaitTermination()
    spark.stop()


def read_write(lake: Lake, to: Path) -> None:
    """Read the lake's input tables and write about six rows a message: the messages as
    queue rows and as copies, the deliveries, and one narrow journal-like row per input
    row (four tables, side by side as the job writes them)."""
    spark = build_session("bench-floor")
    messages = union_by_name(
        [spark.read.format("delta").load(lake.table(t)) for t in lake.address_sources()],
        allow_missing=True,  # a producer may leave out the optional columns
    )
    deliveries = spark.read.format("delta").load(lake.deliveries)
    narrow = union_by_name(
        [
            messages.select(
                "message_id", F.lit("ROUTED").alias("event"), F.col("sent_at").alias("at")
            ),
            deliveries.select("message_id", F.lit("ACKED").alias("event"), "at"),
        ]
    )
    tables = {
        "queue_messages": messages.withColumn(
            schemas.QUEUE_MESSAGES_PARTITION, F.lit(schemas.PENDING)
        ),
        "copies": messages,
        "deliveries": deliveries,
        "journal": narrow,
    }

    def write(name: str) -> None:
        writer = tables[name].write.format("delta").mode("append")
        if name == "queue_messages":
            writer = writer.partitionBy(schemas.QUEUE_MESSAGES_PARTITION)
        writer.save(str(to / name))

    with ThreadPoolExecutor(storage.CONCURRENT_COMMITS) as pool:
        list(pool.map(write, tables))
    spark.stop()


def run(spark: SparkSession, scale: float) -> list[Figure]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-floor-"))
    figures: list[Figure] = []
    try:
        ten = input_lake(spark, workdir, 10)
        colds = []
        for _ in range(COLD_RUNS):
            copy = workdir / "passed"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(ten, copy)
            colds.append(
                run_job(_floor("pass-through", "--lake", str(copy), "--available-now")).seconds
            )
        figures.append(
            Figure(
                f"cold pass-through, ten-message lake, wall (median of {COLD_RUNS})",
                float(np.median(colds)),
                "s",
                "route: < 10 s",
            )
        )

        waits = latency(workdir, job=_floor("pass-through", "--trigger", "1 second"))
        if waits:
            p50, p95 = np.percentile(waits, [50, 95])
            figures.append(Figure("continuous pass-through latency p50", p50, "s", "route: < 2 s"))
            figures.append(Figure("continuous pass-through latency p95", p95, "s", "route: < 5 s"))

        times = {}
        for size in (max(1000, int(s * scale)) for s in SIZES):
            lake = input_lake(spark, workdir, size)
            out = workdir / "written"
            shutil.rmtree(out, ignore_errors=True)
            times[size] = run_job(
                _floor("read-write", "--lake", str(lake), "--to", str(out))
            ).seconds
            figures.append(Figure(f"read and write, {size:,} messages, wall", times[size], "s"))
        small, large = sorted(times)
        figures.append(
            Figure(
                f"read and write marginal throughput ({large:,} - {small:,})",
                marginal(times),
                "msg/s",
                "route: >= 65k",
            )
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor")
    jobs = parser.add_subparsers(dest="job", required=True)
    passing = jobs.add_parser("pass-through", help="stream one input table into queue_messages")
    passing.add_argument("--lake", required=True)
    when = passing.add_mutually_exclusive_group(required=True)
    when.add_argument("--available-now", action="store_true")
    when.add_argument("--trigger", help="a processing-time trigger, e.g. '1 second'")
    writing = jobs.add_parser(
        "read-write", help="read the input tables, write about six rows a message"
    )
    writing.add_argument("--lake", required=True)
    writing.add_argument("--to", required=True, type=Path)
    args = parser.parse_args(argv)
    if args.job == "pass-through":
        pass_through(Lake.at(args.lake), None if args.available_now else args.trigger)
    else:
        read_write(Lake.at(args.lake), args.to)
    return 0


if __name__ == "__main__":
    sys.exit(main())
