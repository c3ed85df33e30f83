"""The job's storage interface: what a micro-batch reads and writes, and how.

:class:`LakeStorage` is the embedded default: Delta through delta-rs behind the
``lake`` / ``lake_events`` Spark data sources. A micro-batch is written in ONE
Spark job that fills every table it changes, one Delta commit per table, each
carrying the app transaction (``appId``, batch id); ``queue_messages`` commits
last, with the job state as its ``userMetadata``. A batch whose
``queue_messages`` commit is already in the table was fully written: a replay
after a crash skips it, and any table committed before the crash skips its
part, so nothing is lost or written twice.

:func:`storage_for` picks the JVM Delta connector's variant
(:mod:`routing.jvm_storage`) when a cluster provides it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from routing import lake as layout
from routing import schemas
from routing._columns import tagged_union
from routing.delta_log import TableLog
from routing.engine import BatchResult, JobState, batch_values
from routing.lake import Lake
from routing.lake_source import FILE_PATH_COLUMN, ROWS_WRITTEN, count_key

TABLE = "_table"
COMPACT_PRODUCER_IDS_AT = 64
"""Files in ``_state/producer_ids`` (one per batch) past which it is compacted into one:
a long run must not make every batch open thousands of small files."""


@dataclass
class LakeStorage:
    """Delta through delta-rs (the embedded default)."""

    lake: Lake

    name = "delta-rs"

    def events(self, spark: SparkSession, options: dict[str, str]) -> DataFrame:
        reader = spark.readStream.format("lake_events")
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load(self.lake.root)

    def done(self, app_id: str, batch_id: int) -> bool:
        """True when ``batch_id`` was fully written (its ``queue_messages`` commit landed)."""
        version = TableLog(self.lake.queue_messages).transaction_version(app_id)
        return version is not None and version >= batch_id

    def state(self) -> JobState:
        log = TableLog(self.lake.queue_messages)
        return JobState.from_json(log.user_metadata()) if log.exists() else JobState()

    def pending(self, spark: SparkSession) -> DataFrame:
        """PENDING rows of ``queue_messages`` with the file each one is in."""
        if not TableLog(self.lake.queue_messages).exists():
            schema = schemas.spark_schema(schemas.QUEUE_MESSAGE).add(FILE_PATH_COLUMN, "string")
            return spark.createDataFrame([], schema)
        return (
            spark.read.format("lake")
            .option("partitionFilter", json.dumps({schemas.QUEUE_MESSAGES_PARTITION: ["PENDING"]}))
            .option("withFilePath", "true")
            .load(self.lake.queue_messages)
        )

    def taken(self, spark: SparkSession, batch_id: int) -> DataFrame | None:
        """Producer ids accepted by batches before ``batch_id`` (None before the first).

        Spark's own Parquet reader on the snapshot's files: the table is append-only
        and holds two small columns, so this is the cheapest way to join it. Rows of
        ``batch_id`` itself are left out: a batch replayed after a crash may find them.
        """
        log = TableLog(self.lake.producer_ids)
        if not log.exists():
            return None
        snapshot = log.snapshot()
        if len(snapshot) > COMPACT_PRODUCER_IDS_AT:
            log.table().optimize.compact()
            snapshot = log.snapshot()
        files = [f.location(log.uri) for f in snapshot]
        if not files:
            return None
        return (
            spark.read.schema(schemas.spark_schema(schemas.PRODUCER_ID))
            .parquet(*files)
            .crossJoin(batch_values(spark, batch=batch_id))
            .where(F.col("batch_id") < F.col("_batch"))
            .select("message_id")
        )

    def write(
        self, outputs: DataFrame, state: JobState, app_id: str, batch_id: int
    ) -> dict[str, int]:
        """Write a batch's outputs (:func:`outputs`) in one Spark job, one commit per table.

        ``queue_messages`` rows name in ``_file`` the PENDING file they come from: the
        commit removes those files (their unchanged rows are among the outputs too).

        :return: the rows written (:func:`count_rows`), as the executors counted them
            while writing and the ``queue_messages`` commit records them.
        """
        tables = {
            f"{layout.ADDRESSES}/*": {"columns": schemas.MESSAGE.names},
            layout.JOURNAL: {"columns": schemas.JOURNAL.names, "countBy": "event"},
            layout.REJECTED: {"columns": schemas.REJECTED.names},
            layout.PRODUCER_IDS: {"columns": schemas.PRODUCER_ID.names},
            layout.QUEUE_MESSAGES: {
                "columns": schemas.QUEUE_MESSAGE.names,
                "partitionBy": [schemas.QUEUE_MESSAGES_PARTITION],
                "replaceFilesColumn": FILE_PATH_COLUMN,
                "userMetadata": state.to_json(),
                "commitEmpty": True,
                "recordCounts": True,
            },
        }
        (
            outputs.write.format("lake")
            .mode("append")
            .option("tableColumn", TABLE)
            .option("tables", json.dumps(tables))
            .option("txnAppId", app_id)
            .option("txnVersion", str(batch_id))
            .save(self.lake.root)
        )
        info = TableLog(self.lake.queue_messages).commit_info()
        return json.loads(info.get(ROWS_WRITTEN, "{}"))


def count_rows(outputs: DataFrame) -> dict[str, int]:
    """The rows of :func:`outputs` by table, and journal rows by event (``"journal:ACKED"``):
    what the ``lake`` writer counts as it writes (:data:`routing.lake_source.ROWS_WRITTEN`)."""
    counts: dict[str, int] = {}
    rows = outputs.groupBy(TABLE, F.when(F.col(TABLE) == layout.JOURNAL, F.col("event")).alias("e"))
    for table, event, n in rows.count().collect():
        counts[table] = counts.get(table, 0) + n
        if event is not None:
            counts[count_key(table, event)] = n
    return counts


def outputs(result: BatchResult, source_of, batch_id: int) -> DataFrame:
    """Every row a batch writes, tagged with its table (one DataFrame, one write job)."""
    frames = [
        result.copies.withColumn(TABLE, source_of(F.col("address"))),
        result.journal.withColumn(TABLE, F.lit(layout.JOURNAL)),
        result.rejected.withColumn(TABLE, F.lit(layout.REJECTED)),
        result.routed.crossJoin(batch_values(result.routed.sparkSession, batch=batch_id)).select(
            "message_id", F.col("_batch").alias("batch_id"), F.lit(layout.PRODUCER_IDS).alias(TABLE)
        ),
        result.queue_rows.withColumn(TABLE, F.lit(layout.QUEUE_MESSAGES)),
    ]
    return tagged_union(frames)


def storage_for(spark: SparkSession, lake: Lake):
    """The JVM Delta connector's storage when a cluster provides it, else delta-rs."""
    from routing.session import has_jvm_delta

    if has_jvm_delta(spark):
        from routing.jvm_storage import JvmDeltaStorage

        return JvmDeltaStorage(lake)
    return LakeStorage(lake)
