"""Frames a micro-batch reads more than once: checkpointed once, released when it is written."""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql.classic.dataframe import DataFrame as ClassicFrame

from routing.plan._columns import shuffle_partitions


class Scratch:
    """Materialise a frame once (a local checkpoint: plan cut short, rows computed
    and kept) and drop its blocks when the batch is done, so memory stays flat over
    a long run.

    Checkpoints rather than ``persist``: a batch's plans would otherwise nest round
    after round, and Catalyst's cache lookups over such plans grow much faster than
    the data. Eager ones, computed here: a lazy checkpoint is completed by whichever
    job first reads it, and in Spark 4.2 that can deadlock the driver. Adaptive
    execution runs a query's broadcast and shuffle stages from several threads; one
    finishing a job marks the checkpoint done (``RDDCheckpointData`` lock, then the
    RDD's) while another asks for the same RDD's cached locations (the RDD's lock,
    then ``RDDCheckpointData``'s, since SPARK-46861). Seen as a job hung for good in
    a test run. An eager checkpoint is done before any other job can read it.
    """

    def __init__(self) -> None:
        self._rdds: list = []

    def keep(
        self, frame: DataFrame, level: StorageLevel = StorageLevel.MEMORY_AND_DISK
    ) -> DataFrame:
        """``frame`` computed once, in at most ``spark.sql.shuffle.partitions`` partitions,
        stored at ``level`` (``DISK_ONLY`` for a frame far larger than the heap: a
        partition stored in memory first is unrolled there, and millions of rows outgrow it).

        Unions add up their inputs' partitions: a batch of many routing passes would
        otherwise carry hundreds of near-empty partitions into every later stage, and
        write a file per partition and table.
        """
        partitions = shuffle_partitions(frame.sparkSession)
        kept = frame.coalesce(max(partitions, 1)).localCheckpoint(eager=True, storageLevel=level)
        # the checkpointed RDD behind the frame's LogicalRDD (no public accessor)
        self._rdds.append(kept._jdf.queryExecution().analyzed().rdd())
        return bounded(kept)

    def absorb(self, other: Scratch) -> None:
        """Take ``other``'s frames over: released with this scratch's, no longer with ``other``'s."""
        self._rdds += other._rdds
        other._rdds.clear()

    def release(self) -> None:
        for rdd in self._rdds:
            rdd.unpersist(False)
        self._rdds.clear()


ESTIMATE_BOUND = 1 << 62
"""The largest size (bytes, rows) a kept frame keeps its plan's estimate up to."""


def bounded(kept: DataFrame) -> DataFrame:
    """``kept`` (a checkpoint) without its plan's estimate when that is above
    :data:`ESTIMATE_BOUND`: Spark then takes it for ``spark.sql.defaultSizeInBytes``
    (``Long.MaxValue``, 2^63 - 1), as for any RDD of unknown size.

    A checkpoint keeps the size estimate of the plan it computed, and Spark estimates a
    join at the product of its sides' sizes. A routing pass joins its rows to the turns
    taken from them and checkpoints the result, which the next pass's copies come from:
    the estimate squares at each pass and its digits double. A batch of four rounds of
    dead letters at an address with turns (a random lake of 77 input rows) never ended its
    first plan: the planner was multiplying numbers of millions of digits. A frame estimated
    below the bound keeps its estimate (a small one is broadcast); above it, no
    estimate changes a plan: every join threshold is far below.
    """
    plan = kept._jdf.queryExecution().analyzed()
    stats = plan.computeStats()  # py4j gives its BigInts as ints
    rows = stats.rowCount().get() if stats.rowCount().isDefined() else None
    if stats.sizeInBytes() <= ESTIMATE_BOUND and (rows is None or rows <= ESTIMATE_BOUND):
        return kept
    jvm = kept.sparkSession.sparkContext._jvm
    assert jvm is not None  # a classic session's frame
    session, _, constraints = (plan.otherCopyArgs().apply(i) for i in range(3))
    unknown = plan.copy(
        plan.output(),
        plan.rdd(),
        plan.outputPartitioning(),
        plan.outputOrdering(),
        plan.isStreaming(),
        plan.stream(),
        session,
        jvm.scala.Option.empty(),
        constraints,
    )
    frame = jvm.org.apache.spark.sql.classic.Dataset.ofRows(session, unknown)
    return ClassicFrame(frame, kept.sparkSession)
