"""The job's storage: every Delta read and write, through delta-spark (SPEC §2).

:class:`DeltaStorage` is the only storage, in the embedded session and on a cluster:

- the input stream is the ``lake_events`` source (:mod:`routing.io.lake_events`): it plans
  the event-time cut from the tables' metadata, and the rows are read by Spark's own
  readers (:func:`routing.io.lake_events.read_events`);
- address tables (copies), ``journal``, ``rejected`` and the producer ids are plain
  appends (Delta's ``WriteIntoDelta``, :func:`append`) carrying the app transaction
  (``txnAppId`` = the query's app id, ``txnVersion`` = the batch id), so a batch replayed
  after a crash writes nothing twice;
- ``queue_messages`` is committed last, by ONE commit that upserts the batch's queue
  rows into its PENDING partition (a changed PENDING row is updated in place and moves to
  its status partition; a new one is inserted): a ``MERGE``, whose app transaction comes
  from Delta's idempotent-DML settings; an append when no row written has the key of a
  PENDING row; the partition replaced, its rows in memory, when it is small
  (:data:`REPLACED_PENDING_ROWS`). ``userMetadata`` carries the job state (lake clock,
  round-robin positions) atomically with the rows. A batch whose ``queue_messages``
  commit landed was fully written: :meth:`DeltaStorage.done` skips it on a replay.

Example::

    storage = DeltaStorage(Lake.at("/lake"))
    if not storage.done(app_id, batch_id):
        storage.write(outputs(result, router.source_of, batch_id), state, app_id, batch_id)
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Protocol

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from routing.broker import layout
from routing.broker.state import JobState
from routing.io.delta_tables import (
    PartitionStatistics,
    TableLogs,
    commit_app_ids,
    commit_file,
    commit_rows,
    file_uri,
    is_table,
    version_before_app_commit,
)
from routing.io.jvm import java_map, jvm_class
from routing.io.lake import Lake
from routing.plan import schemas
from routing.plan._columns import is_in, local_frame, shuffle_partitions, union_by_name, union_of
from routing.plan.batch import BatchResult, batch_value, batch_values
from routing.plan.deliveries import KEY
from routing.plan.expiry import Expirations, earliest_expiration
from routing.plan.id_ranges import WHOLE, IdRanges, ReadsById
from routing.plan.scratch import Scratch

log = logging.getLogger(__name__)

TABLE = "_table"
"""The column of a tagged union of rows that names each row's table (lake-relative)."""

COMPACT_PRODUCER_IDS_AT = 64
"""Files in ``_state/producer_ids`` (about one per batch) past which it is compacted
(``OPTIMIZE``): a long run must not make every batch open thousands of small files."""

PRODUCER_IDS_FROM_FILES = True
"""Whether a process reads the producer ids it keeps in memory (:data:`KEPT_PRODUCER_IDS`)
from the files the table's log names (:func:`read_files`), rather than through Delta, whose
first scan of each version rebuilds the snapshot's state (Spark jobs and their planning, in
the first batch of every run: docs/PERFORMANCE.md). Not from a table with deletion vectors
or column mapping, whose files alone do not hold its rows. False: through Delta, the plain
path the suite also runs. The PENDING rows are read from their files likewise when their
partition is replaced rather than merged (:data:`REPLACED_PENDING_ROWS`)."""

REPLACED_PENDING_ROWS = 10_000
"""PENDING rows up to which a process reads the PENDING partition from the files its log
names (:func:`read_files`), and a batch that changes some of those rows commits the
partition anew (:data:`PARTITION_REPLACE`: its files removed, the carried rows with the
batch's changes added) rather than MERGEs into it. Neither rebuilds the snapshot's state,
which Delta's scan and MERGE do in the first batch of every run and after every commit the
process did not make (Spark jobs and their planning: docs/PERFORMANCE.md). Above it, and at
0, the plain path: read through Delta, MERGE, which rewrites only the files holding a
changed row. Not for a table with deletion vectors or column mapping, nor one whose
commits record more than their files (change data feed, row tracking: writer version 4 or
later)."""

CARRIED_PENDING_ROWS = 100_000
"""PENDING rows up to which a batch hands the next one its queues' PENDING rows in memory
(:meth:`DeltaStorage.pending`), rather than the next batch reading them from Delta."""

OVERLAPPED_ROWS = 100_000
"""Input rows of a batch up to which its writes overlap (:meth:`DeltaStorage.write`). A
small batch's actions are mostly the driver's fixed work, which overlaps; a large batch's
keep both cores and the heap busy, and side by side they contend (1M messages: every
overlapping variant tried was 2 to 9% slower, docs/DESIGN.md)."""

CARRIED_PARTS = 4
"""Frames of PENDING rows a batch may hand the next one as a union rather than checkpointed
into one (:meth:`CarriedPending.extended`): each a frame its batch kept already, so carrying
them costs no Spark job. Past it, they are checkpointed into one frame (one job: their count
and expirations are known), so the plans that read them stay small (each batch plans several
over them)."""

CARRIED_PRODUCER_IDS = 100_000
"""Producer ids accepted since the producer-id table was last read through Delta up to
which the batches keep them in memory (:meth:`DeltaStorage.taken`); past it, the next
batch reads the table again and starts anew, so memory stays flat."""

KEPT_PRODUCER_IDS = 100_000
"""Producer ids up to which the producer-id table, read through Delta, is kept in memory
(checkpointed once) rather than read again, pinned, by every batch (:meth:`DeltaStorage.taken`)."""

READS = "spark.routing.stateReads"
"""The session setting that picks how a batch reads what earlier batches left in Delta's
files (its PENDING rows, the producer ids taken, the MERGE's target): ``by-id`` (the
default: only the files that may hold the ids the batch names, by their statistics,
:mod:`routing.plan.id_ranges`) or ``whole`` (every file, the plain path)."""


def reads_by_id(spark: SparkSession) -> bool:
    """Whether ``spark``'s batches read earlier batches' files by id (:data:`READS`)."""
    return spark.conf.get(READS, "by-id") != "whole"


APP_TRANSACTION_APPEND = "routing.delta.AppTransactionAppend"
"""Delta's append of an app transaction without its check of the table's transactions
(jars/src/routing/delta, built by ``make setup``; :func:`append`)."""
SKIPPED = -2
"""What :data:`APP_TRANSACTION_APPEND`'s append returns when it found its app transaction
committed already (``AppTransactionAppend.SKIPPED``)."""

PARTITION_REPLACE = "routing.delta.PartitionReplace"
"""The commit that replaces a partition's files with the rows given (jars/src/routing/delta,
:meth:`DeltaStorage._replace_pending`)."""
MOVED = -4
"""What :data:`PARTITION_REPLACE` returns when the table is no longer at the version whose
files it was to remove (``PartitionReplace.MOVED``): the batch MERGEs instead."""

STAGED_APPENDS = "routing.delta.StagedAppends"
"""The appends of many tables whose rows one Spark job writes (jars/src/routing/delta,
:func:`append_staged`)."""
NOT_STAGED = -3
"""What :data:`STAGED_APPENDS`' commit returns for a table that cannot take the staged
files as they are (``StagedAppends.NOT_STAGED``): it is appended the plain way."""
STAGED_ADDRESS_APPENDS = True
"""Whether a batch writes the copies of the address tables it reaches with one Spark job
(:func:`append_staged`). A Spark job per table cost about 90 ms each, side by side four at a
time: 40 tables took 3.6 s of a 6 s append, one job 0.5 s (docs/PERFORMANCE.md). False:
every table by an append of its own (:func:`append`), the plain path the suite also runs."""

ADDRESS_TABLES_SHARED = True
"""Whether the job's commits to address tables, which producers write too, write no
checksum file after a version without one, as a producer's commit through delta-rs leaves
it (``AppTransactionAppend.JobTransaction``). Delta derives a commit's checksum from the
previous version's, or without one from that snapshot's state, rebuilt in the commit: a
Spark job and its planning, 0.3-0.5 s of a small batch for each address table a producer
wrote since the job's last commit there. False: Delta's commit as it is (the plain path
the suite also runs). The job's own tables always get one: their reads through Delta
start from it."""

STAGED_COMMITS = 16
"""Staged commits (:func:`append_staged`) made at once. Without a Spark job each is a wait
on the file system and the log more than work: 40 tables created by staged commits took
6.1 s four at a time, 4.6 s eight, 4.1 s sixteen (a warm session); to tables that exist,
1.2 to 1.4 s whichever."""

CHECKPOINT_INTERVAL = 100
"""``delta.checkpointInterval`` of the tables the job creates (:func:`append`; Delta's
default is 10). The job commits each of its tables once a batch, so at 10 a continuous job
wrote a checkpoint of each every ten batches, and the batches beside them ran about 0.8 s
longer (:class:`LogCheckpoints`). A reader that loads a table anew replays the commits since
its last checkpoint: up to 99 small files, some tens of milliseconds (docs/PERFORMANCE.md)."""

STATISTICS_COLUMNS: Mapping[str, tuple[str, ...]] = {
    layout.ADDRESSES: ("message_id", "sent_at"),
    layout.DELIVERIES: ("message_id", "at"),
    layout.MANAGEMENT: ("message_id", "at"),
    layout.QUEUE_MESSAGES: ("message_id", "sent_at", "routed_at", "status_at", "expiration"),
    layout.JOURNAL: ("message_id", "at"),
    layout.REJECTED: ("at",),
    layout.PRODUCER_IDS: ("message_id", "batch_id"),
}
"""``delta.dataSkippingStatsColumns`` of the tables the job creates, by kind: the columns
whose minimum, maximum and null count each data file's log entry records (Delta's default
is the first 32 columns; every file still records its row count). Collecting them is a
Delta append's own aggregate: about a quarter of a 1M-row append, 40 ms of a 200-row one,
mostly for bounds that skip nothing, since every batch's files hold every address, queue
and outcome. Ids and times grow with the batches, so their bounds do skip files, and the
input stream cuts its batches by the event time's (docs/PERFORMANCE.md)."""


def statistics_columns(table: str) -> tuple[str, ...] | None:
    """The columns with statistics in ``table`` (its path in the lake) if the job creates it
    (None: not a table of the lake's layout, Delta's default)."""
    return STATISTICS_COLUMNS.get(layout.ADDRESSES if layout.is_address_source(table) else table)


TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
MERGE_MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"
MERGE_SCHEMA = "spark.databricks.delta.schema.autoMerge.enabled"
"""A MERGE adds the columns its rows have and the table lacks, as an append with
``mergeSchema`` does: a lake written before ``property_types`` existed gains it."""
"""Whether a MERGE copies its source into a local checkpoint first (Delta's ``auto``: any
source that is not a Delta scan). The queue rows a batch merges are one already."""

JOB_TABLES: dict[str, pa.Schema] = {
    layout.JOURNAL: schemas.JOURNAL,
    layout.REJECTED: schemas.REJECTED,
    layout.PRODUCER_IDS: schemas.PRODUCER_ID,
}
INPUT_TABLES: dict[str, pa.Schema] = {
    layout.DELIVERIES: schemas.DELIVERY,
    layout.MANAGEMENT: schemas.MANAGEMENT,
    layout.REJECTED: schemas.REJECTED,
}


def count_key(table: str, event: str | None = None) -> str:
    """The key of a row count: the table's path, or ``"journal:ACKED"`` for journal events."""
    return table if event is None else f"{table}:{event}"


def tables_written(counts: Mapping[str, int]) -> list[str]:
    """The tables of a row count (:func:`count_rows`), without the per-event keys."""
    return [key for key in counts if ":" not in key]


def schema_of(table: str) -> pa.Schema:
    """The SPEC schema of a lake table, by its lake-relative path."""
    if layout.is_address_source(table):
        return schemas.MESSAGE
    if table == layout.QUEUE_MESSAGES:
        return schemas.QUEUE_MESSAGE
    return {**JOB_TABLES, **INPUT_TABLES}[table]


@contextlib.contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set session settings for the duration of a block, then restore the previous ones."""
    previous: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, was in previous.items():
            if was is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, was)


def conform(rows: DataFrame, schema: pa.Schema) -> DataFrame:
    """``rows`` with exactly ``schema``'s columns, in order: missing ones null, others cast.

    A producer may leave out the optional columns (SPEC §3.1), or create its table with
    a column of null type; every reader of a kind of table sees the SPEC's columns.
    """
    present = set(rows.columns)
    return rows.select(
        *[
            (F.col(f.name) if f.name in present else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in schemas.spark_schema(schema).fields
        ]
    )


def read_table(
    spark: SparkSession, location: str, schema: pa.Schema, version: int | None = None
) -> DataFrame:
    """A Delta table's rows with its SPEC ``schema`` (:func:`conform`), at ``version``
    (None: the latest); empty when the table does not exist yet (or at ``version`` -1).

    Example::

        journal = read_table(spark, Lake.at("lake").journal, schemas.JOURNAL)
    """
    if not is_table(location) or version == -1:
        return local_frame(spark, [], schemas.spark_schema(schema))
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return conform(reader.load(location), schema)


def read_files(
    spark: SparkSession,
    paths: Sequence[str],
    schema: pa.Schema,
    partitioned: tuple[str, str] | None = None,
) -> DataFrame:
    """The rows of the Parquet files at ``paths`` with ``schema`` (:func:`conform`): a
    version of a table without reader features read without Delta
    (:class:`routing.io.delta_tables.VersionFiles`). ``partitioned``: ``(location,
    column)``, the files are in partition folders (``column=value``) of the table at
    ``location``, and hold no ``column``: Spark reads it from their folders' names.

    Example::

        files = TableLogs().files(lake.producer_ids, version)
        ids = read_files(spark, files.paths, schemas.PRODUCER_ID)
    """
    fields = schemas.spark_schema(schema)
    if not paths:
        return local_frame(spark, [], fields)
    if partitioned is None:
        return conform(spark.read.schema(fields).parquet(*paths), schema)
    location, column = partitioned
    in_files = StructType([f for f in fields.fields if f.name != column])
    return conform(spark.read.schema(in_files).option("basePath", location).parquet(*paths), schema)


def route_app_id(lake: Lake) -> str | None:
    """The Delta app id of the routing job's commits to ``lake``: stable across restarts of
    its checkpoint; its prefix tells the input stream the commit is the job's own (not
    offered again). None before the job's first run."""
    metadata = Path(lake.checkpoint(layout.ROUTE_QUERY), "metadata")
    if not metadata.is_file():
        return None
    return f"{layout.ROUTING_APP_PREFIX}{json.loads(metadata.read_text())['id']}"


def finished_versions(lake: Lake, locations: Sequence[str]) -> dict[str, int]:
    """The version to read each table of ``locations`` at to see the lake as of the routing
    job's last finished batch: for a table that holds a commit of the batch after it (in
    flight, or left by a run that stopped inside it and not yet rolled forward), the
    version before that commit. Tables without one are absent: their latest version is
    the finished batch's.

    A batch commits its tables one at a time, ``queue_messages`` last; a reader of the
    others alone would see some of a batch's rows (``ROUTED`` in ``journal``, its copies
    nowhere) until it finishes. Only commits written since the finished batch's
    ``queue_messages`` commit are looked into."""
    app_id = route_app_id(lake)
    if app_id is None:
        return {}
    finished = TableLogs().transaction_version(lake.queue_messages, app_id)
    since = 0.0
    if finished is not None:
        before = version_before_app_commit(lake.queue_messages, app_id, finished)
        if before is not None:
            with contextlib.suppress(FileNotFoundError):
                since = commit_file(lake.queue_messages, before + 1).stat().st_mtime
    in_flight = -1 if finished is None else finished
    found = {
        location: version_before_app_commit(location, app_id, in_flight + 1, since)
        for location in locations
    }
    return {location: version for location, version in found.items() if version is not None}


def _in_pending() -> Column:
    """A ``queue_messages`` row is in the PENDING partition (the one a batch starts from)."""
    return F.col(schemas.QUEUE_MESSAGES_PARTITION) == schemas.PENDING


def count_rows(frames: Sequence[DataFrame]) -> list[dict[str, int]]:
    """The rows of each tagged frame by table, and journal rows by event
    (``"journal:ACKED"``), in one job."""

    def by_table(index: int, rows: DataFrame) -> DataFrame:
        event = F.col("event") if "event" in rows.columns else F.lit(None).cast("string")
        journal = F.when(F.col(TABLE) == layout.JOURNAL, event)
        return rows.groupBy(F.lit(index).alias("_frame"), TABLE, journal.alias("e")).count()

    counts: list[dict[str, int]] = [{} for _ in frames]
    if not frames:  # a batch whose plan knows every output empty: no job
        return counts
    found = union_by_name([by_table(i, f) for i, f in enumerate(frames)])
    for index, table, event, n in found.collect():
        counts[index][table] = counts[index].get(table, 0) + n
        if event is not None:
            counts[index][count_key(table, event)] = n
    return counts


def append_options(
    columns: Sequence[str],
    *,
    app_id: str | None = None,
    txn_version: int | None = None,
    user_metadata: str | None = None,
    rows_per_file: int | None = None,
    statistics: Sequence[str] | None = None,
) -> dict[str, str]:
    """The writer's options of an append of rows with ``columns`` (:func:`append`)."""
    # a producer may have created its address table without the optional columns;
    # the interval and the statistics are properties of a table this append creates,
    # and of no other
    options = {"mergeSchema": "true", "delta.checkpointInterval": str(CHECKPOINT_INTERVAL)}
    if with_statistics := [c for c in statistics or () if c in columns]:
        options["delta.dataSkippingStatsColumns"] = ",".join(with_statistics)
    if app_id is not None:
        options.update(txnAppId=app_id, txnVersion=str(txn_version))
    if rows_per_file is not None:
        options["maxRecordsPerFile"] = str(rows_per_file)
    if user_metadata is not None:
        options["userMetadata"] = user_metadata
    return options


def append(
    rows: DataFrame,
    location: str,
    *,
    app_id: str | None = None,
    txn_version: int | None = None,
    partition_by: Sequence[str] = (),
    user_metadata: str | None = None,
    rows_per_file: int | None = None,
    checkpoints: LogCheckpoints | None = None,
    logs: TableLogs | None = None,
    statistics: Sequence[str] | None = None,
    shared: bool = False,
) -> bool:
    """Append ``rows`` to the Delta table at ``location`` (created if missing, with a
    checkpoint every :data:`CHECKPOINT_INTERVAL` commits and the file statistics of
    ``statistics``' columns, :data:`STATISTICS_COLUMNS`), as one commit; with ``app_id``
    the commit is the app transaction ``(app_id, txn_version)``, skipped when that version
    was committed already.

    Delta's writer asks the table whether it was by rebuilding the snapshot's state, two
    Spark queries before every append, since each commit makes a new snapshot: most of a
    small append's time. Where :data:`APP_TRANSACTION_APPEND` is on the classpath the job
    reads the answer from the log (delta-rs) and appends through it, the same write and
    commit without the question (docs/DESIGN.md); elsewhere through Delta's writer. Either
    way the commit conflicts with another writer's commit of the same app transaction
    (``ConcurrentTransactionException``): a second writer cannot commit a batch twice.

    :param rows_per_file: at most this many rows in a data file (Delta's
        ``maxRecordsPerFile``); None: a file per task.
    :param checkpoints: where a checkpoint of the log the commit is due goes, to be written
        beside the job's next steps rather than inside the commit (:class:`LogCheckpoints`;
        through :data:`APP_TRANSACTION_APPEND` only). None: Delta writes it in the commit.
    :param logs: where the job asks the table's transactions (None: the log read anew).
    :param statistics: the columns whose statistics a table this append creates keeps,
        those of them ``rows`` has (a producer's table may lack the optional ones); None
        or none of them: Delta's default.
    :param shared: the table is one other writers write too (an address table): through
        :data:`APP_TRANSACTION_APPEND`, a commit after a version without a checksum file
        (a producer's through delta-rs) writes none either, rather than rebuilding the
        table's state in the commit to derive one (docs/DESIGN.md).
    :return: False when the app transaction was committed already (nothing written);
        through Delta's own writer, always True (it skips such a commit silently).
    """
    options = append_options(
        rows.columns,
        app_id=app_id,
        txn_version=txn_version,
        user_metadata=user_metadata,
        rows_per_file=rows_per_file,
        statistics=statistics,
    )
    spark = rows.sparkSession
    appender = jvm_class(spark, APP_TRANSACTION_APPEND) if app_id is not None else None
    if appender is None:
        writer = rows.write.format("delta").mode("append").options(**options)
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.save(location)
        return True
    assert app_id is not None and txn_version is not None  # an app transaction
    checked, done = (logs or TableLogs()).transaction_at(location, app_id)
    if done is not None and done >= txn_version:
        return False  # committed already: what Delta's writer would skip
    # the commit checks the versions since ``checked`` and conflicts with a concurrent one
    # of the same app transaction, as Delta's writer's does
    due = appender.append(
        spark._jsparkSession,
        rows._jdf,
        location,
        options,
        list(partition_by),
        checkpoints is not None,
        checked,
        shared,
    )
    if checkpoints is not None and due >= 0:
        checkpoints.due(location, due)
    return due != SKIPPED


class LogCheckpoints:
    """Checkpoints of Delta logs that the job's appends left out of their commits
    (:func:`append` notes them :meth:`due`), written one at a time beside the batches.

    Delta writes a table's checkpoint inside the commit whose version is a multiple of its
    ``delta.checkpointInterval`` (10), before the commit returns: a second or more for a
    small table (the state rebuilt from the log, then written). The job commits each of its
    tables once a batch, so their versions move together, and every tenth batch or so
    waited for three or four checkpoints at once (docs/DESIGN.md). A commit is complete
    without its checkpoint (a reader replays the commits since the last one): here each
    batch starts at most one (:meth:`write_next`), on a thread of its own, so they spread
    over the batches that follow. A table's later checkpoint replaces one still due. One
    that fails is logged, as Delta's commit logs it: the table is as readable as before.
    """

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="delta-checkpoint")
        self._due: dict[str, int] = {}
        self._running: Future[None] | None = None

    @property
    def waiting(self) -> dict[str, int]:
        """The checkpoints due and not started: the version of each table's."""
        return dict(self._due)

    def due(self, location: str, version: int) -> None:
        """Note that the table at ``location`` is due its checkpoint at ``version``."""
        self._due[location] = max(version, self._due.get(location, version))

    def write_next(self) -> None:
        """Start writing the checkpoint due longest, unless one is being written."""
        if self._due and (self._running is None or self._running.done()):
            location = next(iter(self._due))
            self._running = self._pool.submit(self._checkpoint, location, self._due.pop(location))

    def close(self) -> None:
        """Write every checkpoint due, and return once they are written (or have failed)."""
        while self._due or self._running is not None:
            if self._running is not None:
                self._running.result()
                self._running = None
            self.write_next()
        self._pool.shutdown()

    def _checkpoint(self, location: str, version: int) -> None:
        try:
            writer = jvm_class(self._spark, APP_TRANSACTION_APPEND)
            assert writer is not None  # an append through it noted this checkpoint
            writer.checkpoint(self._spark._jsparkSession, location, version)
        except Exception:  # the commit stands; the next checkpoint will cover it
            log.warning("checkpoint of %s at version %d failed", location, version, exc_info=True)


CONCURRENT_COMMITS = 4
"""Tables of one group (:func:`append_tables`) written at once. A commit is mostly fixed
work (the table's snapshot, the job's set-up, the statistics, the log entry), a few
hundred milliseconds each even for a handful of rows; side by side they overlap."""


class KeptRows:
    """Tagged frames (``_table`` names each row's table, :func:`outputs`), each computed once
    and kept in a scratch of its own, with their rows counted by table (:func:`count_rows`,
    one job).

    Kept as one union, every table's writer read back (deserialized) every table's rows,
    each as wide as all their columns together: a 1M batch's journal, producer ids and
    copies about eight times over. A frame of its own per kind of row is read by the
    writers of its tables only, and a frame a later batch reads (the producer ids) can be
    handed over rather than computed again (:meth:`hand_over`).
    """

    def __init__(
        self,
        frames: Sequence[DataFrame],
        pool: ThreadPoolExecutor,
        level: StorageLevel | None = StorageLevel.MEMORY_AND_DISK,
        counts: Sequence[Mapping[str, int]] | None = None,
    ) -> None:
        """Keep ``frames`` side by side on ``pool``, at ``level`` (None: they are made of
        frames kept already, so they are not kept again); ``counts``: each frame's rows by
        table (:func:`count_rows`), when the caller knows them already."""
        self._scratches = [Scratch() for _ in frames]
        if level is None:
            self.frames = list(frames)
        else:
            self.frames = list(pool.map(lambda s, f: s.keep(f, level), self._scratches, frames))
        self.counts = [dict(c) for c in counts] if counts is not None else count_rows(self.frames)

    @property
    def totals(self) -> dict[str, int]:
        """The rows of every frame by table (and journal rows by event, :func:`count_key`)."""
        return dict(sum((Counter(n) for n in self.counts), Counter()))

    def rows(self, table: str) -> DataFrame | None:
        """The kept rows of ``table``, in its schema (None: no frame holds one)."""
        return self.tagged([table], schema_of(table).names)

    def tagged(self, tables: Sequence[str], names: Sequence[str]) -> DataFrame | None:
        """The kept rows of ``tables``, with the columns ``names`` (None: no frame holds one)."""
        rows = F.col(TABLE) == tables[0] if len(tables) == 1 else is_in(F.col(TABLE), tables)
        # a frame holding no other table's rows is read whole: a filter is one analysis more
        holding = [
            k if set(tables_written(n)) <= set(tables) else k.where(rows)
            for k, n in zip(self.frames, self.counts, strict=True)
            if any(n.get(t) for t in tables)
        ]
        if not holding:
            return None
        return union_by_name([k.select(*names) for k in holding])

    def hand_over(self, table: str) -> tuple[DataFrame, Scratch] | None:
        """:meth:`rows` of ``table`` and a scratch holding the frames they are read from,
        for the caller to release (:meth:`release` no longer does)."""
        rows = self.rows(table)
        if rows is None:
            return None
        held = Scratch()
        for scratch, n in zip(self._scratches, self.counts, strict=True):
            if n.get(table):
                held.absorb(scratch)
        return rows, held

    def release(self) -> None:
        for scratch in self._scratches:
            scratch.release()


def append_kept(
    kept: KeptRows,
    lake: Lake,
    pool: ThreadPoolExecutor,
    *,
    app_id: str | None = None,
    txn_version: int | None = None,
    first: Callable[[str], bool] | None = layout.is_address_source,
    rows_per_file: int | None = None,
    checkpoints: LogCheckpoints | None = None,
    logs: TableLogs | None = None,
) -> Appended:
    """Append ``kept`` rows to the lake: one commit per table that gets rows, the tables
    for which ``first`` holds before the others (None: all at once), each group's commits
    side by side on ``pool`` (:data:`CONCURRENT_COMMITS`): they are separate Delta tables,
    each commit its own transaction. Each task writes its rows in the order it holds
    them, in files of at most ``rows_per_file`` rows (:func:`append`, which takes
    ``checkpoints`` and ``logs`` too).

    :return: the row counts of the tables committed, and the tables that held the app
        transaction already (a batch resumed after a crash).
    """

    def write(table: str) -> bool:
        rows = kept.rows(table)
        assert rows is not None  # a table written gets rows
        return append(
            rows,
            lake.table(table),
            app_id=app_id,
            txn_version=txn_version,
            rows_per_file=rows_per_file,
            checkpoints=checkpoints,
            logs=logs,
            statistics=statistics_columns(table),
            shared=ADDRESS_TABLES_SHARED and layout.is_address_source(table),
        )

    counts = kept.totals
    in_group = first or (lambda _: True)
    tables = sorted(tables_written(counts), key=lambda t: (not in_group(t), t))
    committed: dict[str, bool] = {}
    staging = STAGED_ADDRESS_APPENDS and app_id is not None and txn_version is not None
    for _, group in itertools.groupby(tables, key=in_group):
        names = list(group)  # the group's commits, then the next group
        staged = [t for t in names if staging and layout.is_address_source(t)]
        # the other tables' appends run while the address tables' rows are staged
        appends = {t: pool.submit(write, t) for t in names if t not in staged}
        if staged:
            assert app_id is not None and txn_version is not None
            committed.update(
                append_staged(
                    kept,
                    lake,
                    staged,
                    app_id=app_id,
                    txn_version=txn_version,
                    plain=write,
                    rows_per_file=rows_per_file,
                    checkpoints=checkpoints,
                    logs=logs,
                )
            )
            appends.update({t: pool.submit(write, t) for t in staged if t not in committed})
        committed.update({t: append.result() for t, append in appends.items()})
    before = {t: counts[t] for t in tables if not committed[t]}
    kept_counts = {k: n for k, n in counts.items() if k.split(":")[0] not in before}
    return Appended(kept_counts, before)


def append_staged(
    kept: KeptRows,
    lake: Lake,
    tables: Sequence[str],
    *,
    app_id: str,
    txn_version: int,
    plain: Callable[[str], bool],
    rows_per_file: int | None = None,
    checkpoints: LogCheckpoints | None = None,
    logs: TableLogs | None = None,
) -> dict[str, bool]:
    """Append the ``kept`` rows of address ``tables`` with ONE Spark job: their rows are
    written to a staging folder (``_state/staging``) with Delta's writer and statistics,
    then each table's files are moved into it and committed there, :data:`STAGED_COMMITS`
    commits side by side (:data:`STAGED_APPENDS`). Each commit is the app transaction
    ``(app_id, txn_version)``, checked and conflicting as :func:`append`'s.

    A table that is not there yet is created by its commit, with the properties
    :func:`append` gives a table. One whose columns or settings are not those of the staged
    files (a producer's, :data:`STAGED_APPENDS`) is appended by ``plain``, as is every
    table when fewer than two are left to stage.

    :return: whether each table of ``tables`` was committed (False: it held the app
        transaction already, nothing written); empty when nothing was staged.
    """
    logs = logs or TableLogs()
    checked: dict[str, int] = {}
    committed: dict[str, bool] = {}
    for table in tables:
        at, done = logs.transaction_at(lake.table(table), app_id)
        if done is not None and done >= txn_version:
            committed[table] = False  # committed already: what Delta's writer would skip
        else:
            checked[table] = at
    rows = kept.tagged(list(checked), [*schemas.MESSAGE.names, TABLE])
    appender = jvm_class(rows.sparkSession, STAGED_APPENDS) if rows is not None else None
    if appender is None or rows is None or len(checked) < 2:
        return committed
    options = append_options(
        rows.columns,
        app_id=app_id,
        txn_version=txn_version,
        rows_per_file=rows_per_file,
        statistics=STATISTICS_COLUMNS[layout.ADDRESSES],
    )
    jspark = rows.sparkSession._jsparkSession
    # the options as one Java map and the method looked up once: py4j makes a call of each
    # entry and of each lookup (400 new tables: 2.6 of 14 s of the commits' samples, py-spy)
    joptions = java_map(rows.sparkSession, options)
    staged = appender.stage(jspark, rows._jdf, TABLE, lake.table(layout.STAGING), joptions)
    commit_staged = appender.commit

    def commit(table: str) -> bool:
        due = commit_staged(
            jspark,
            staged,
            table,
            lake.table(table),
            joptions,
            checkpoints is not None,
            checked[table],
            ADDRESS_TABLES_SHARED,
        )
        if due == NOT_STAGED:
            return plain(table)
        if checkpoints is not None and due >= 0:
            checkpoints.due(lake.table(table), due)
        return due != SKIPPED

    try:
        with ThreadPoolExecutor(STAGED_COMMITS, thread_name_prefix="commit") as commits:
            committed.update(zip(checked, commits.map(commit, checked), strict=True))
    finally:
        staged.close(jspark)
    return committed


@dataclass(frozen=True)
class Appended:
    """What :func:`append_kept` committed."""

    counts: dict[str, int]
    """Rows by table (and journal rows by event, :func:`count_key`) of the tables committed."""
    before: dict[str, int] = field(default_factory=dict)
    """Tables that held the app transaction already (written by a run that stopped), with
    the rows each would have had."""


def append_tables(
    rows: DataFrame | Sequence[DataFrame],
    lake: Lake,
    *,
    app_id: str | None = None,
    txn_version: int | None = None,
    first: Callable[[str], bool] | None = layout.is_address_source,
    level: StorageLevel | None = StorageLevel.MEMORY_AND_DISK,
    rows_per_file: int | None = None,
    checkpoints: LogCheckpoints | None = None,
    counts: Sequence[Mapping[str, int]] | None = None,
) -> dict[str, int]:
    """Append tagged rows (``_table`` names each row's table) to the lake: each frame of
    ``rows`` (one, or several: :func:`outputs`) computed once and counted
    (:class:`KeptRows`, at ``level``; not counted when ``counts`` gives each frame's rows
    by table), then :func:`append_kept`; the frames are released once written.

    :return: the row counts by table (of the tables committed).
    """
    frames = [rows] if isinstance(rows, DataFrame) else list(rows)
    with ThreadPoolExecutor(CONCURRENT_COMMITS, thread_name_prefix="append") as pool:
        kept = KeptRows(frames, pool, level, counts)
        try:
            appended = append_kept(
                kept,
                lake,
                pool,
                app_id=app_id,
                txn_version=txn_version,
                first=first,
                rows_per_file=rows_per_file,
                checkpoints=checkpoints,
            )
            return appended.counts
        finally:
            kept.release()


class Storage(Protocol):
    """What the routing job needs of its storage (:mod:`jobs.route`): whether a batch was
    written, the state and PENDING rows it starts from, the producer ids already taken, and
    one write per batch (the input stream is :func:`routing.io.lake_events.stream`'s).
    :class:`DeltaStorage` is the lake's."""

    written_before: dict[str, int]
    """The tables the last :meth:`write` found written by a run that stopped in its batch,
    with their rows."""

    def done(self, app_id: str, batch_id: int) -> bool:
        """True when ``batch_id`` was fully written by the query ``app_id``."""
        ...

    def state(self) -> JobState:
        """The job state the last written batch left."""
        ...

    def pending(self, spark: SparkSession) -> DataFrame:
        """The PENDING queue rows a batch starts from."""
        ...

    def pending_expirations(self) -> Expirations | None:
        """What is known of the expirations of the rows :meth:`pending` gave (None: nothing)."""
        ...

    def taken(self, spark: SparkSession, batch_id: int) -> DataFrame | None:
        """Producer ids accepted before ``batch_id`` (None: none yet)."""
        ...

    def reads(self, spark: SparkSession) -> ReadsById:
        """Which of the rows :meth:`pending` and :meth:`taken` gave last are files a batch
        reads only where its ids may be."""
        ...

    def write(
        self, outputs: Outputs, state: JobState, app_id: str, batch_id: int
    ) -> dict[str, int]:
        """Write a batch's outputs and state, idempotently; the rows written by table."""
        ...

    def close(self) -> None:
        """Finish what the writes left running (the job is done with the storage)."""
        ...


@dataclass(frozen=True)
class CarriedPending:
    """The PENDING rows of ``queue_messages`` at ``version`` (``count`` of them, whose
    ``expirations`` are known): the union of frames kept in ``scratch`` (``parts``), in at
    most ``spark.sql.shuffle.partitions`` partitions, as :meth:`Scratch.keep` leaves a frame."""

    version: int
    parts: tuple[DataFrame, ...]
    scratch: Scratch
    count: int
    expirations: Expirations

    @cached_property
    def rows(self) -> DataFrame:
        return union_of(self.parts)

    def extended(self, written: QueueRows, version: int) -> CarriedPending | None:
        """These rows and the PENDING ones ``written`` by a batch that started from them:
        the written frame, kept already, joins the parts, and its scratch this one's. No
        Spark job, unless the union would outgrow :data:`CARRIED_PARTS` frames: then it is
        checkpointed into one frame (one job; the rows' count and expirations are known).

        None when that is not what the batch leaves: its rows were not compared with these
        (``pending`` not counted), one has the key of one of these (``updates``), or they
        were computed from these (``read_pending``: unioned batch after batch, their size
        estimates would compound, :meth:`DeltaStorage._carry`); or the union would outgrow
        :data:`CARRIED_PENDING_ROWS` rows. The rows are computed anew then.
        """
        if written.pending is None or written.updates or written.read_pending:
            return None
        assert written.pending_expirations is not None  # counted with ``pending``
        count = self.count + written.pending
        if count > CARRIED_PENDING_ROWS:
            return None
        part = written.rows.where(_in_pending()).select(*schemas.QUEUE_MESSAGE.names)
        self.scratch.absorb(written.scratch)
        expirations = self.expirations | written.pending_expirations
        parts = (*self.parts, part)
        if len(parts) <= CARRIED_PARTS:
            return CarriedPending(version, parts, self.scratch, count, expirations)
        scratch = Scratch()
        try:
            one = scratch.keep(union_by_name(list(parts)))
        finally:
            self.scratch.release()  # the parts, now in ``one``
        return CarriedPending(version, (one,), scratch, count, expirations)


@dataclass(frozen=True)
class PendingInDelta:
    """The PENDING rows of ``queue_messages`` read through Delta (``rows``), with what its
    files' statistics say of them: ``count`` (None: a file has none), and their
    ``expirations`` (None: a file has none of ``expiration``)."""

    rows: DataFrame
    count: int | None
    expirations: Expirations | None

    @classmethod
    def read(cls, rows: DataFrame, partition: PartitionStatistics) -> PendingInDelta:
        earliest = partition.earliest
        known = "expiration" in earliest
        return cls(rows, partition.rows, Expirations(earliest["expiration"]) if known else None)


@dataclass(frozen=True)
class CarriedProducerIds:
    """The producer ids of ``_state/producer_ids`` at ``version``: the table read through
    Delta at an earlier version (``base``: pinned, so read again it rebuilds nothing, or
    kept in ``base_scratch`` when small) and the ids the job's batches appended since
    (``added``, checkpointed in ``scratch``).

    Unlike the PENDING rows (:class:`CarriedPending`), the ids added are checkpointed into
    one frame every batch: each batch's duplicate check (:mod:`routing.plan.inputs`) plans
    a join over them, and over a union of a frame a batch it took 0.4 s longer."""

    version: int
    base: DataFrame
    added: DataFrame | None = None
    added_rows: int = 0
    scratch: Scratch = field(default_factory=Scratch)
    base_scratch: Scratch = field(default_factory=Scratch)  # ``base``, when it is kept
    base_in_files: bool = False  # ``base`` is read from Delta's files, not kept

    def rows(self) -> DataFrame:
        """Every producer id of the table at ``version`` (``PRODUCER_ID`` rows)."""
        return self.base if self.added is None else union_by_name([self.base, self.added])


@dataclass(frozen=True)
class QueueRows:
    """A batch's queue rows, kept in ``scratch`` and counted (:meth:`DeltaStorage.write`):
    ``count`` rows, ``updates`` whether one may update a PENDING row, and ``pending`` how
    many are PENDING and ``pending_expirations`` theirs (None: not counted, the batch's
    PENDING rows were not carried), and ``ids`` the ranges of their ids (the MERGE reads
    only the files that may hold them). ``read_pending``: :attr:`Outputs.queue_rows_read_pending`."""

    rows: DataFrame
    scratch: Scratch
    read_pending: bool
    count: int
    updates: bool
    pending: int | None
    pending_expirations: Expirations | None = None
    ids: IdRanges | None = None


@dataclass
class DeltaStorage:
    """The lake's Delta tables as the job reads and writes them (a :class:`Storage`).

    A batch's PENDING rows are carried to the next one in memory (:meth:`pending`): a new
    version of ``queue_messages`` read through Delta costs a rebuild of the snapshot's
    state, several Spark jobs, which is much of a small batch's time (docs/DESIGN.md).
    With them in memory, a batch that changes none of them appends its queue rows rather
    than merging them (:meth:`_commit_queue_rows`). The producer ids are carried too
    (:meth:`taken`).
    """

    lake: Lake
    _read: DataFrame | None = field(default=None, init=False, repr=False)
    _in_delta: PendingInDelta | None = field(default=None, init=False, repr=False)
    _carried: CarriedPending | None = field(default=None, init=False, repr=False)
    _ids: CarriedProducerIds | None = field(default=None, init=False, repr=False)
    _checkpoints: LogCheckpoints | None = field(default=None, init=False, repr=False)
    _logs: TableLogs = field(default_factory=TableLogs, init=False, repr=False)
    written_before: dict[str, int] = field(default_factory=dict, init=False)
    """The tables the last :meth:`write` found written already (by a run that stopped
    inside that batch), with their rows: not in the counts it returned."""

    def done(self, app_id: str, batch_id: int) -> bool:
        """True when ``batch_id`` was fully written (its ``queue_messages`` commit landed)."""
        version = self._logs.transaction_version(self.lake.queue_messages, app_id)
        return version is not None and version >= batch_id

    def state(self) -> JobState:
        """The job state of the last commit that carries one."""
        return JobState.from_json(self._logs.last_user_metadata(self.lake.queue_messages))

    def pending(self, spark: SparkSession) -> DataFrame:
        """PENDING rows of ``queue_messages`` (the partition alone is read).

        The rows the previous batch left, as it carried them (:meth:`write`), while the
        table is still at the version that batch committed; read from Delta otherwise (the
        first batch of a process, a batch after one too large to carry, another writer's
        commit since). Read from Delta, they are kept and counted as carried ones are when
        the files' statistics say they are few enough (:meth:`_read_carried`).
        """
        location = self.lake.queue_messages
        carried = self._carried
        if carried is not None and self._logs.version(location) == carried.version:
            self._read = carried.rows
            return self._read
        if carried is not None:
            carried.scratch.release()
            self._carried = None
        if not is_table(location):
            self._read = local_frame(spark, [], schemas.spark_schema(schemas.QUEUE_MESSAGE))
            return self._read
        partition = self._logs.partition(
            location, schemas.QUEUE_MESSAGES_PARTITION, schemas.PENDING, ("expiration",)
        )
        if partition.rows is not None and partition.rows <= CARRIED_PENDING_ROWS:
            self._carried = self._read_carried(spark, partition)
            self._read = self._carried.rows
        else:
            self._in_delta = PendingInDelta.read(
                self._read_delta(spark, partition.version), partition
            )
            self._read = self._in_delta.rows
        return self._read

    def _read_delta(self, spark: SparkSession, version: int | None = None) -> DataFrame:
        """The PENDING rows in Delta, at ``version`` (default the latest)."""
        return read_table(spark, self.lake.queue_messages, schemas.QUEUE_MESSAGE, version).where(
            _in_pending()
        )

    def _read_carried(self, spark: SparkSession, partition: PartitionStatistics) -> CarriedPending:
        """The PENDING rows of ``partition`` read once, then kept and counted as a batch
        carries them: a Delta scan in a batch's plans is planned again by each of its
        queries (Delta lists its files from the log then, 0.1-0.3 s each, about six a
        batch), and a batch that starts from carried rows appends its new ones rather
        than merging them (:meth:`_commit_queue_rows`). Read from the files the log names
        when the partition is one a batch replaces (:meth:`_replaceable`), else through
        Delta."""
        version = partition.version
        rows = (
            read_files(
                spark,
                [file_uri(self.lake.queue_messages, f.path) for f in partition.files],
                schemas.QUEUE_MESSAGE,
                (self.lake.queue_messages, schemas.QUEUE_MESSAGES_PARTITION),
            )
            if self._replaceable(spark, partition)
            else self._read_delta(spark, version)
        )
        scratch = Scratch()
        try:
            kept = scratch.keep(rows)
            # an aggregate without groups: exactly one row
            count, earliest = kept.agg(F.count(F.lit(1)), earliest_expiration()).collect()[0]
        except BaseException:
            scratch.release()
            raise
        return CarriedPending(version, (kept,), scratch, count, Expirations(earliest))

    def pending_expirations(self) -> Expirations | None:
        """The expirations of the rows :meth:`pending` gave: the carried rows', counted with
        them, or those the files' statistics give of rows read through Delta (None: a file
        has none of ``expiration``, a table written before it had them)."""
        carried, in_delta = self._carried, self._pending_in_delta()
        if carried is not None and self._read is carried.rows:
            return carried.expirations
        return in_delta.expirations if in_delta is not None else None

    def _pending_in_delta(self) -> PendingInDelta | None:
        """The PENDING rows :meth:`pending` gave, when it read them through Delta."""
        in_delta = self._in_delta
        return in_delta if in_delta is not None and self._read is in_delta.rows else None

    def taken(self, spark: SparkSession, batch_id: int) -> DataFrame | None:
        """Producer ids accepted by batches before ``batch_id`` (None before the first).

        Rows of ``batch_id`` itself are left out: a batch replayed after a crash may find
        them. The batch id is data, not a literal (:func:`routing.plan.batch.batch_values`).

        The table is read at its version (pinned): kept in memory when it holds at most
        :data:`KEPT_PRODUCER_IDS` ids, read then from the files its log names
        (:data:`PRODUCER_IDS_FROM_FILES`), through Delta otherwise. The ids later batches
        append are added in memory (:meth:`_carry_ids`), while the table is at the version
        their commits made. Reading each new version through Delta rebuilt its snapshot's
        state first, Spark jobs a small batch paid every time (docs/DESIGN.md).
        """
        from delta.tables import DeltaTable

        location = self.lake.producer_ids
        if not is_table(location):
            return None
        if self._logs.file_count(location) > COMPACT_PRODUCER_IDS_AT:
            DeltaTable.forPath(spark, location).optimize().executeCompaction()
        version = self._logs.version(location)
        if self._ids is None or self._ids.version != version:
            self._drop_ids()
            files = self._logs.files(location, version)
            kept = files.rows is not None and files.rows <= KEPT_PRODUCER_IDS
            if kept and PRODUCER_IDS_FROM_FILES and files.plain:
                base = read_files(spark, files.paths, schemas.PRODUCER_ID)
            else:
                base = (
                    spark.read.format("delta")
                    .option("versionAsOf", version)
                    .load(location)
                    .select(*schemas.PRODUCER_ID.names)
                )
            scratch = Scratch()
            if kept:
                # read once: each batch's plan over a Delta scan filtered the snapshot's
                # files again (a Spark job and Delta's planning, about 0.1 s a batch)
                base = scratch.keep(base)
            self._ids = CarriedProducerIds(
                version, base, base_scratch=scratch, base_in_files=not kept
            )
        return (
            self._ids.rows()
            .crossJoin(batch_values(spark, batch=batch_id))
            .where(F.col("batch_id") < batch_value("batch"))
            .select("message_id")
        )

    def reads(self, spark: SparkSession) -> ReadsById:
        """The PENDING rows :meth:`pending` gave and the producer ids :meth:`taken` gave are
        read by id where they are Delta's files, not rows in memory (:data:`READS`)."""
        if not reads_by_id(spark):
            return WHOLE
        ids = self._ids
        return ReadsById(
            pending=self._pending_in_delta() is not None,
            taken=ids is not None and ids.base_in_files,
        )

    def write(
        self, outputs: Outputs, state: JobState, app_id: str, batch_id: int
    ) -> dict[str, int]:
        """Write a batch's outputs (:func:`outputs`): one idempotent commit per table,
        ``queue_messages`` (with the job state) last.

        A small batch (:data:`OVERLAPPED_ROWS`) writes its tables all at once, and keeps and
        counts its queue rows (:meth:`_count_queue_rows`) meanwhile: neither reads what the
        other writes. A large one commits its address tables before the others, and then
        its queue rows (from their plan, when nothing needs them counted first:
        :meth:`_appends_as_planned`). The Delta checkpoints its commits are due wait, and
        one starts once the queue rows are committed (:class:`LogCheckpoints`; :meth:`close`
        writes the rest).

        :return: the rows written by table (:func:`count_rows`), without the tables a run
            that stopped inside the batch wrote (:attr:`written_before`).
        """
        if self._checkpoints is None:
            self._checkpoints = LogCheckpoints(outputs.queue_rows.sparkSession)

        def counted() -> QueueRows:
            scratch = Scratch()
            rows = scratch.keep(outputs.queue_rows.select(*schemas.QUEUE_MESSAGE.names))
            read_pending = outputs.queue_rows_read_pending
            counts = self._count_queue_rows(rows, read_pending)
            return QueueRows(rows, scratch, read_pending, *counts)

        small = outputs.rows_in <= OVERLAPPED_ROWS
        with (
            ThreadPoolExecutor(1, thread_name_prefix="queue-rows") as side,
            ThreadPoolExecutor(CONCURRENT_COMMITS, thread_name_prefix="append") as pool,
        ):
            overlapped = side.submit(counted) if small else None
            kept: KeptRows | None = None
            queue: QueueRows | None = None
            try:
                kept = KeptRows(outputs.tagged, pool)
                appended = append_kept(
                    kept,
                    self.lake,
                    pool,
                    app_id=app_id,
                    txn_version=batch_id,
                    first=None if small else layout.is_address_source,
                    checkpoints=self._checkpoints,
                    logs=self._logs,
                )
                counts, self.written_before = appended.counts, appended.before
                if overlapped is None and self._appends_as_planned(outputs):
                    self._append_queue_rows(outputs.queue_rows, state, app_id, batch_id)
                    self._drop_carried()
                    location = self.lake.queue_messages
                    written = commit_rows(location, self._logs.version(location))
                else:
                    queue = overlapped.result() if overlapped else counted()
                    self._commit_queue_rows(queue, state, app_id, batch_id)
                    written = queue.count
                self._checkpoints.write_next()
                if queue is not None:
                    self._carry(queue, app_id)
                self._carry_ids(
                    kept.hand_over(layout.PRODUCER_IDS), counts.get(layout.PRODUCER_IDS, 0), app_id
                )
            finally:
                if kept is not None:
                    kept.release()
                if queue is None and overlapped is not None and overlapped.exception() is None:
                    queue = overlapped.result()  # failed before it was read: release it
                if queue is not None:
                    queue.scratch.release()  # no-op once carried (_carry)
        if written:
            counts[layout.QUEUE_MESSAGES] = written
        return counts

    def close(self) -> None:
        """Wait for the Delta checkpoints the batches' commits left to write (:class:`LogCheckpoints`)."""
        if self._checkpoints is not None:
            self._checkpoints.close()
            self._checkpoints = None

    def _carry(self, queue: QueueRows, app_id: str) -> None:
        """Keep the PENDING rows after this batch's commit for the next batch: those the
        batch started from that it did not write, and the PENDING ones it wrote (what the
        MERGE did to the partition). Not when the batch wrote more than
        :data:`CARRIED_PENDING_ROWS` rows or leaves more PENDING rows than that (memory stays
        flat in a long replay), nor when the table's latest commit is not this batch's.

        Rows read through Delta whose files' statistics count too many to leave few enough
        are not read again to find that out.

        When the batch started from carried rows and wrote none of their keys (a batch of
        new messages), that is the carried rows and the PENDING ones it wrote, which its
        write kept already: they are unioned, no Spark job (:meth:`CarriedPending.extended`).
        Not when its queue rows were computed from the carried ones (the fold ran): a
        checkpoint keeps the size estimate of the plan it cuts, and without CBO a join's
        estimate is the product of its sides', so unioned batch after batch the estimate
        of the PENDING rows would compound (each batch's queue rows about its square)
        until planning runs out of heap. Otherwise the rows are computed, cached and
        counted (a cached frame's estimate is its rows' size), then checkpointed."""
        in_delta = self._pending_in_delta()
        read, self._read = self._read, None
        previous, self._carried = self._carried, None
        try:
            if read is None or queue.count > CARRIED_PENDING_ROWS:
                return
            if (
                in_delta is not None
                and in_delta.count is not None
                and in_delta.count - queue.count > CARRIED_PENDING_ROWS
            ):
                return  # each row written ends at most one of them: too many are left
            location = self.lake.queue_messages
            version = self._logs.version(location)
            if app_id not in commit_app_ids(location, version):
                return
            if previous is not None and read is previous.rows:
                self._carried = previous.extended(queue, version)
                if self._carried is not None:
                    previous = None  # its frames are the new carried rows'
                    return
            key = list(KEY)
            anti = read.join(F.broadcast(queue.rows.select(*key)), key, "left_anti")
            cached = (
                union_by_name([anti, queue.rows.where(_in_pending())])
                .select(*schemas.QUEUE_MESSAGE.names)
                .persist(StorageLevel.MEMORY_AND_DISK)
            )
            try:
                # an aggregate without groups: exactly one row
                count, earliest = cached.agg(F.count(F.lit(1)), earliest_expiration()).collect()[0]
                if count > CARRIED_PENDING_ROWS:
                    return
                scratch = Scratch()
                after = scratch.keep(cached)
            finally:
                cached.unpersist()
            self._carried = CarriedPending(version, (after,), scratch, count, Expirations(earliest))
        finally:
            if previous is not None:
                previous.scratch.release()

    def _carry_ids(
        self, handed: tuple[DataFrame, Scratch] | None, written: int, app_id: str
    ) -> None:
        """Add the ``written`` producer ids the batch appended (``handed``: their frame as its
        write kept it, and the scratch holding it, :meth:`KeptRows.hand_over`) to those
        carried, when its commit is the table's one version since them; otherwise, or past
        :data:`CARRIED_PRODUCER_IDS`, drop them (the next batch reads the table again).

        A commit that created the table (version 0, up to :data:`KEPT_PRODUCER_IDS` ids)
        holds every id there is: they are carried as the table read once, so the next batch
        does not read back what this one wrote (in a fresh job, Delta's first read of the
        table: 1.5 s of the second batch, docs/PERFORMANCE.md)."""
        ids, handed_scratch = handed if handed is not None else (None, Scratch())
        try:
            carried = self._ids
            if ids is None or written == 0:
                return  # no commit: the next batch finds the version it expects, or reads again
            location = self.lake.producer_ids
            version = self._logs.version(location)
            if carried is None:
                if (
                    version == 0
                    and written <= KEPT_PRODUCER_IDS
                    and app_id in commit_app_ids(location, version)
                ):
                    self._ids = CarriedProducerIds(version, ids, base_scratch=handed_scratch)
                    handed_scratch = Scratch()  # the carried ids' now
                return
            if (
                version != carried.version + 1
                or app_id not in commit_app_ids(location, version)
                or carried.added_rows + written > CARRIED_PRODUCER_IDS
            ):
                self._drop_ids()
                return
            scratch = Scratch()
            added = scratch.keep(
                ids if carried.added is None else union_by_name([carried.added, ids])
            )
            carried.scratch.release()
            self._ids = CarriedProducerIds(
                version,
                carried.base,
                added,
                carried.added_rows + written,
                scratch,
                carried.base_scratch,
                carried.base_in_files,
            )
        finally:
            handed_scratch.release()

    def _drop_ids(self) -> None:
        if self._ids is not None:
            self._ids.scratch.release()
            self._ids.base_scratch.release()
            self._ids = None

    def _commit_queue_rows(
        self, queue: QueueRows, state: JobState, app_id: str, batch_id: int
    ) -> None:
        """Upsert the batch's queue rows into the PENDING partition (:class:`QueueRows`,
        counted by :meth:`_count_queue_rows`).

        A MERGE when a row may be one of the PENDING rows the batch started from; an append
        when none is, which is what the MERGE would do then (insert every row) without its
        jobs that join the rows to the table's files, a large part of a small batch
        (docs/DESIGN.md). Only carried PENDING rows (:meth:`pending`) are compared: reading
        them through Delta again would cost what the MERGE saves. With the carried rows
        all of a small partition, the partition is replaced rather than merged into
        (:meth:`_replace_pending`): the MERGE would rebuild the snapshot's state first.
        """
        from delta.tables import DeltaTable

        rows = queue.rows
        spark = rows.sparkSession
        location = self.lake.queue_messages
        # the version is checked again: the rows were counted while the others were written
        if (
            queue.count == 0
            or not is_table(location)
            or (not queue.updates and self._started_from_carried())
        ):
            # the first batch creates the table; an empty batch still records its
            # transaction and the job state; a batch of new keys only inserts
            self._append_queue_rows(rows, state, app_id, batch_id)
            return
        carried = self._carried
        if (
            carried is not None
            and self._started_from_carried()
            and self._replace_pending(queue, carried, state, app_id, batch_id)
        ):
            return
        settings = {
            TXN_APP_ID: app_id,
            TXN_VERSION: str(batch_id),
            USER_METADATA: state.to_json(),
            # the rows are a local checkpoint (:meth:`write`): they cannot change between
            # the MERGE's two passes, which is all Delta's own copy of them would ensure
            MERGE_MATERIALIZE_SOURCE: "none",
            MERGE_SCHEMA: "true",
        }
        condition = F.expr(
            "t.status = 'PENDING' AND t.queue = s.queue AND t.message_id = s.message_id"
        )
        if queue.ids is not None and reads_by_id(spark):
            # true of every row's own id: the same rows match, in the files that may hold them
            condition &= queue.ids.holds(F.col("t.message_id"))
        with session_conf(spark, settings):
            (
                DeltaTable.forPath(spark, location)
                .alias("t")
                .merge(rows.alias("s"), condition)
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            )

    def _replaceable(self, spark: SparkSession, partition: PartitionStatistics) -> bool:
        """Whether a batch that changes rows of the PENDING ``partition`` commits it anew
        rather than MERGEs into it (:data:`REPLACED_PENDING_ROWS`)."""
        return (
            partition.rows is not None
            and partition.rows <= REPLACED_PENDING_ROWS
            and partition.plain
            and partition.rewritable
            and jvm_class(spark, PARTITION_REPLACE) is not None
        )

    def _replace_pending(
        self, queue: QueueRows, carried: CarriedPending, state: JobState, app_id: str, batch_id: int
    ) -> bool:
        """Commit the PENDING partition anew, ``carried`` (all its rows) with the batch's
        queue rows in place of those of the same key, the other statuses' rows appended:
        what the MERGE commits, in one commit that removes the partition's files as its log
        names them (:data:`PARTITION_REPLACE`). False when the partition is not one to
        replace (:data:`REPLACED_PENDING_ROWS`) or the table moved past the carried rows'
        version: nothing is written, the caller MERGEs."""
        spark = queue.rows.sparkSession
        location = self.lake.queue_messages
        partition = self._logs.partition(
            location, schemas.QUEUE_MESSAGES_PARTITION, schemas.PENDING
        )
        if partition.version != carried.version or not self._replaceable(spark, partition):
            return False
        key = list(KEY)
        kept = carried.rows.join(F.broadcast(queue.rows.select(*key)), key, "left_anti")
        # narrowed to the shuffle partitions: each task writes a file
        rows = union_of([kept, queue.rows]).select(*schemas.QUEUE_MESSAGE.names)
        options = append_options(
            rows.columns, app_id=app_id, txn_version=batch_id, user_metadata=state.to_json()
        )
        replace = jvm_class(spark, PARTITION_REPLACE)
        assert replace is not None  # _replaceable
        column, value = schemas.QUEUE_MESSAGES_PARTITION, schemas.PENDING
        due = replace.replace(
            spark._jsparkSession,
            rows._jdf,
            location,
            java_map(spark, options),
            [column],
            column,
            value,
            [f.path for f in partition.files],
            [f.size for f in partition.files],
            [f.modification_time for f in partition.files],
            f"{column} = '{value}'",
            self._checkpoints is not None,
            partition.version,
        )
        if due == MOVED:
            return False
        if self._checkpoints is not None and due >= 0:
            self._checkpoints.due(location, due)
        return True

    def _appends_as_planned(self, outputs: Outputs) -> bool:
        """Whether a batch of more than :data:`CARRIED_PENDING_ROWS` input rows writes its
        queue rows straight from their plan (:meth:`_append_queue_rows`), not kept and
        counted first: when they are appended whatever they hold, since ``queue_messages``
        does not exist yet (the first batch, a replay into a new lake) or none of them can
        update a PENDING row (:meth:`_count_queue_rows`).

        Kept, they cost such a batch a pass over its queue rows, serialized and read back,
        for a count that decides nothing. The batch then carries no PENDING rows to the
        next one, which reads them from Delta (:meth:`pending`); the queue rows of that
        many input rows are seldom few enough to be carried anyway."""
        if outputs.rows_in <= CARRIED_PENDING_ROWS:
            return False
        return not is_table(self.lake.queue_messages) or (
            not outputs.queue_rows_read_pending and self._started_from_carried()
        )

    def _append_queue_rows(
        self, rows: DataFrame, state: JobState, app_id: str, batch_id: int
    ) -> None:
        """Append a batch's queue rows to their status partitions, with its transaction and
        ``state``: from at most ``spark.sql.shuffle.partitions`` tasks, as :meth:`Scratch.keep`
        leaves a frame (a union of rounds adds up its parts'), each writing a file a status."""
        partitions = max(shuffle_partitions(rows.sparkSession), 1)
        append(
            rows.select(*schemas.QUEUE_MESSAGE.names).coalesce(partitions),
            self.lake.queue_messages,
            app_id=app_id,
            txn_version=batch_id,
            partition_by=[schemas.QUEUE_MESSAGES_PARTITION],
            user_metadata=state.to_json(),
            checkpoints=self._checkpoints,
            logs=self._logs,
            statistics=statistics_columns(layout.QUEUE_MESSAGES),
        )

    def _drop_carried(self) -> None:
        """Forget the PENDING rows carried (:meth:`pending` reads Delta next)."""
        self._read = None
        carried, self._carried = self._carried, None
        if carried is not None:
            carried.scratch.release()

    def _started_from_carried(self) -> bool:
        """The batch's PENDING rows were carried, and the table is still at their version."""
        carried = self._carried
        return (
            carried is not None
            and self._read is carried.rows
            and self._logs.version(self.lake.queue_messages) == carried.version
        )

    def _count_queue_rows(
        self, rows: DataFrame, read_pending: bool = True
    ) -> tuple[int, bool, int | None, Expirations | None, IdRanges]:
        """How many queue rows the batch writes, whether any may update a PENDING row, how
        many are PENDING and their expirations, and the ranges of their ids (one action):
        with the batch's PENDING rows carried, and the table still at their version,
        whether one has the key of a row written; otherwise, assumed so, and the PENDING
        rows not counted (None).

        Rows not computed from the PENDING rows (``read_pending`` False: the batch's fold
        did not run) are the entries of the messages the batch routed, whose ids are new
        (a producer id is used once, SPEC §3.1, and a copy's id is derived from its
        new parent's): none has the key of a PENDING row, and the carried rows are not read.
        """
        carried = self._carried if self._started_from_carried() else None
        key = list(KEY)
        if carried is not None and read_pending:
            # broadcast: at most CARRIED_PENDING_ROWS keys, and no shuffle of either side
            was_pending = carried.rows.select(*key, F.lit(True).alias("_was_pending"))
            rows = rows.join(F.broadcast(was_pending), key, "left")
        else:
            rows = rows.withColumn("_was_pending", F.lit(None).cast("boolean"))
        found = rows.agg(
            F.count(F.lit(1)).alias("rows"),
            F.count("_was_pending").alias("updates"),
            F.count_if(_in_pending()).alias("pending"),
            earliest_expiration(_in_pending()).alias("earliest"),
            *IdRanges.aggregates(F.col("message_id"), "ids"),
        )
        figures = found.collect()[0]  # an aggregate without groups: exactly one row
        ids = IdRanges.of(figures, "ids")
        if carried is None:
            return figures.rows, True, None, None, ids
        expirations = Expirations(figures.earliest)
        return figures.rows, figures.updates > 0, figures.pending, expirations, ids


@dataclass(frozen=True)
class Outputs:
    """Every row a batch writes (:func:`outputs`)."""

    tagged: list[DataFrame]
    """The rows of the tables appended to, a frame per kind of row, each row tagged with
    its table (:data:`TABLE`): the copies (at their addresses' tables), the journal, the
    rejected rows, the producer ids."""
    queue_rows: DataFrame
    """``queue_messages``' rows (:data:`routing.plan.schemas.QUEUE_MESSAGE`)."""
    rows_in: int
    """The batch's input rows (:attr:`routing.plan.batch.BatchResult.rows_in`): its size."""
    queue_rows_read_pending: bool = True
    """``queue_rows`` are computed from the PENDING rows the batch started from
    (:attr:`routing.plan.batch.BatchResult.folded`)."""


def outputs(result: BatchResult, source_of: Callable[[Column], Column], batch_id: int) -> Outputs:
    """Every row a batch writes, each appended row tagged with its table (:data:`TABLE`)."""
    producer_ids = result.routed.crossJoin(
        batch_values(result.routed.sparkSession, batch=batch_id)
    ).select("message_id", F.col("_batch").alias("batch_id"))
    tables = {
        "copies": (result.copies, source_of(F.col("address"))),
        "journal": (result.journal, F.lit(layout.JOURNAL)),
        "rejected": (result.rejected, F.lit(layout.REJECTED)),
        "producer_ids": (producer_ids, F.lit(layout.PRODUCER_IDS)),
    }
    tagged = [
        frame.withColumn(TABLE, table)
        for name, (frame, table) in tables.items()
        if name not in result.known_empty
    ]
    return Outputs(tagged, result.queue_rows, result.rows_in, result.folded)
