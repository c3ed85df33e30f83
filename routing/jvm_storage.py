"""The job's storage on a cluster that provides Delta's JVM connector (SPEC §2).

:func:`routing.storage.storage_for` picks :class:`JvmDeltaStorage` when
``io.delta:delta-spark_2.13`` is on the classpath (``spark-submit --packages
io.delta:delta-spark_2.13:4.x --conf
spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension``). It has the interface
of :class:`routing.storage.LakeStorage` and keeps the same guarantees, with Delta's
own writers instead of the delta-rs data source:

- every table a batch changes gets one commit carrying the app transaction
  (``txnAppId`` = the query's app id, ``txnVersion`` = the batch id), so a batch
  replayed after a crash is skipped table by table (Delta's idempotent writes);
- address tables (copies), ``journal`` and ``rejected`` are plain appends
  (``df.write.format("delta").option("txnAppId", …).option("txnVersion", …)``);
- ``queue_messages`` is committed last, by ONE ``MERGE`` (``delta.tables.DeltaTable``)
  that upserts the batch's queue rows into the PENDING partition: a changed PENDING row
  is updated in place (and moves to its new status partition), a new row is inserted.
  This is the Delta-native form of the embedded storage's "replace the PENDING files
  that hold a changed row". The idempotent-DML session settings
  (``spark.databricks.delta.write.txnAppId`` / ``…txnVersion``) give the MERGE its app
  transaction and ``spark.databricks.delta.commitInfo.userMetadata`` carries the job
  state (lake clock, round-robin positions), atomically with the rows. A batch with no
  queue row commits an empty append instead, so the state and the transaction are
  recorded all the same.

Limits (this module cannot run where the project is built and tested: Delta's JVM jars
cannot be downloaded there, so only its import, interface and log reading are tested):

- The input stream stays the ``lake_events`` Python source: it is what cuts every input
  table in event time (docs/DESIGN.md), which Delta's per-table streaming source does
  not do. It reads the Delta log and the Parquet files itself, so input tables must not
  use reader features delta-rs lacks (deletion vectors, column mapping); tables this
  module creates have deletion vectors off.
- ``done`` and ``state`` read the Delta log directly (:class:`routing.delta_log.TableLog`),
  as the embedded storage does; ``state`` looks back past commits without job state
  (an ``OPTIMIZE`` by an operator, say).
- Unlike the embedded storage, a batch is written by several Spark jobs (one per
  table), not one; each commit is still atomic and idempotent.
- The session settings used for the MERGE are set and restored around it: do not
  share the job's session with other writers to Delta during a batch.

Example::

    storage = JvmDeltaStorage(Lake.at("/lake"))
    if not storage.done(app_id, batch_id):
        storage.write(outputs, state, app_id, batch_id)

.. note:: Evolving
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from routing import lake as layout
from routing import schemas
from routing.delta_log import TableLog
from routing.engine import JobState
from routing.lake_source import FILE_PATH_COLUMN, tables_written
from routing.scratch import Scratch
from routing.storage import TABLE, LakeStorage, count_rows

STATE_LOOKBACK = 100
"""How many commits :meth:`JvmDeltaStorage.state` looks back for the last job state."""

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


@contextlib.contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set session settings for the duration of a block, then restore the previous ones."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@dataclass
class JvmDeltaStorage(LakeStorage):
    """Delta through the JVM connector (``delta-spark``), for clusters that provide it.

    The input stream and ``done`` are the embedded storage's (the ``lake_events`` source
    and the Delta log read directly); reads of the job's tables and writes are Delta's.
    """

    name = "delta-jvm"

    def state(self) -> JobState:
        """The job state of the last commit that carries one."""
        log = TableLog(self.lake.queue_messages)
        if not log.exists():
            return JobState()
        latest = log.version()
        for version in range(latest, max(-1, latest - STATE_LOOKBACK), -1):
            text = log.user_metadata(version)
            if text:
                return JobState.from_json(text)
        return JobState()

    def pending(self, spark: SparkSession) -> DataFrame:
        """PENDING rows of ``queue_messages``; ``_file`` is null: the MERGE needs no file names."""
        if not TableLog(self.lake.queue_messages).exists():
            schema = schemas.spark_schema(schemas.QUEUE_MESSAGE).add(FILE_PATH_COLUMN, "string")
            return spark.createDataFrame([], schema)
        return (
            spark.read.format("delta")
            .load(self.lake.queue_messages)
            .where(F.col(schemas.QUEUE_MESSAGES_PARTITION) == "PENDING")
            .select(
                *schemas.QUEUE_MESSAGE.names, F.lit(None).cast("string").alias(FILE_PATH_COLUMN)
            )
        )

    def taken(self, spark: SparkSession, batch_id: int) -> DataFrame | None:
        """Producer ids accepted by batches before ``batch_id`` (None before the first)."""
        if not TableLog(self.lake.producer_ids).exists():
            return None
        return (
            spark.read.format("delta")
            .load(self.lake.producer_ids)
            .where(F.col("batch_id") < batch_id)
            .select("message_id")
        )

    def write(
        self, outputs: DataFrame, state: JobState, app_id: str, batch_id: int
    ) -> dict[str, int]:
        """Write a batch's outputs (:func:`routing.storage.outputs`): one idempotent commit per
        table, address tables first, ``queue_messages`` (with the job state) last.

        :return: the rows written (:func:`routing.storage.count_rows`): Delta's writers do
            not count them for us, so they are counted first (the outputs are computed once,
            then read by every write).
        """
        scratch = Scratch()
        try:
            return self._write(scratch.keep(outputs), state, app_id, batch_id)
        finally:
            scratch.release()

    def _write(
        self, outputs: DataFrame, state: JobState, app_id: str, batch_id: int
    ) -> dict[str, int]:
        spark = outputs.sparkSession
        written = count_rows(outputs)
        tables = tables_written(written)
        for relative in (t for t in tables if t.startswith(f"{layout.ADDRESSES}/")):
            self._append(outputs, relative, schemas.MESSAGE.names, app_id, batch_id)
        for relative, schema in (
            (layout.JOURNAL, schemas.JOURNAL),
            (layout.REJECTED, schemas.REJECTED),
            (layout.PRODUCER_IDS, schemas.PRODUCER_ID),
        ):
            if relative in tables:
                self._append(outputs, relative, schema.names, app_id, batch_id)
        rows = outputs.where(F.col(TABLE) == layout.QUEUE_MESSAGES).select(
            *schemas.QUEUE_MESSAGE.names
        )
        self._commit_queue_rows(spark, rows, state, app_id, batch_id)
        return written

    def _append(
        self, outputs: DataFrame, relative: str, columns, app_id: str, batch_id: int
    ) -> None:
        (
            outputs.where(F.col(TABLE) == relative)
            .select(*columns)
            .write.format("delta")
            .mode("append")
            .option("txnAppId", app_id)
            .option("txnVersion", str(batch_id))
            # a producer may have created its address table without the optional columns
            .option("mergeSchema", "true")
            .save(self.lake.table(relative))
        )

    def _create_queue_messages(self, spark: SparkSession) -> None:
        from delta.tables import DeltaTable

        (
            DeltaTable.createIfNotExists(spark)
            .location(self.lake.queue_messages)
            .addColumns(schemas.spark_schema(schemas.QUEUE_MESSAGE))
            .partitionedBy(schemas.QUEUE_MESSAGES_PARTITION)
            .property("delta.enableDeletionVectors", "false")
            .execute()
        )

    def _commit_queue_rows(
        self, spark: SparkSession, rows: DataFrame, state: JobState, app_id: str, batch_id: int
    ) -> None:
        from delta.tables import DeltaTable

        if not TableLog(self.lake.queue_messages).exists():
            self._create_queue_messages(spark)
        if rows.isEmpty():
            # nothing to merge: an empty append still records the transaction and the state
            (
                rows.write.format("delta")
                .mode("append")
                .option("txnAppId", app_id)
                .option("txnVersion", str(batch_id))
                .option("userMetadata", state.to_json())
                .save(self.lake.queue_messages)
            )
            return
        settings = {
            TXN_APP_ID: app_id,
            TXN_VERSION: str(batch_id),
            USER_METADATA: state.to_json(),
        }
        with session_conf(spark, settings):
            (
                DeltaTable.forPath(spark, self.lake.queue_messages)
                .alias("t")
                .merge(
                    rows.alias("s"),
                    "t.status = 'PENDING' AND t.queue = s.queue AND t.message_id = s.message_id",
                )
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            )
