"""Frames a micro-batch reads more than once: checkpointed once, released when it is written."""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame

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
        return kept

    def absorb(self, other: Scratch) -> None:
        """Take ``other``'s frames over: released with this scratch's, no longer with ``other``'s."""
        self._rdds += other._rdds
        other._rdds.clear()

    def release(self) -> None:
        for rdd in self._rdds:
            rdd.unpersist(False)
        self._rdds.clear()
