"""What one micro-batch hands to storage (:class:`BatchResult`), and the batch's own
values as data (:func:`batch_values`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from routing.plan._columns import local_frame

__all__ = ["BatchResult", "batch_value", "batch_values"]


@dataclass
class BatchResult:
    """Everything a micro-batch writes, as lazy frames over the batch's scratch."""

    queue_rows: DataFrame  # rows for queue_messages (QUEUE_ROW): new or changed
    journal: DataFrame
    rejected: DataFrame
    copies: DataFrame  # message rows to append to their address tables
    clock: int | None  # the lake clock after the batch (epoch µs)
    positions: DataFrame  # round-robin positions after the batch (turns.POSITIONS)
    routed: DataFrame  # the producer rows accepted for routing
    rows_in: int = 0  # input rows, the job's own copies read back aside
    routed_rows: int = 0  # rows of ``routed``
    # the job's own copies read back (skipped: routed when made); 0 unless the stream
    # offered a commit of the job's (its commit file gone: routing.io.delta_tables.TableFiles)
    own_copies: int = 0
    rounds: int = 0
    # the fold ran: ``queue_rows`` are computed from the PENDING rows the batch started from
    folded: bool = False
    created: dict[str, tuple[int, int]] = field(default_factory=dict)  # JobState.created after
    attempts: int = 1  # plans of the batch (more than one when it created a queue)
    # the outputs ("copies", "rejected", "journal", "producer_ids") the plan makes none
    # of, known as it was planned (no divert or dead-letter edge where its rows are, no
    # refused row, no event, no chain cut, no message to route): their frames are empty
    # local ones, which no write needs to read
    known_empty: frozenset[str] = frozenset()


def batch_values(spark: SparkSession, **values: int | None) -> DataFrame:
    """One row of the batch's own values (bigint columns, read by :func:`batch_value`), to
    join where a plan needs them.

    Values of a batch (its id, the lake clock) are passed as data, never as literals:
    Spark compiles literals into the generated code, and a plan that differs in a literal
    from the previous batch's is compiled again (about 250 ms a class).
    """
    schema = StructType([StructField(_column(name), LongType()) for name in values])
    return F.broadcast(local_frame(spark, [tuple(values.values())], schema))


def batch_value(name: str) -> Column:
    """The value ``name`` of :func:`batch_values`' row, as a Column of the rows it is joined to.

    Example::

        rows.crossJoin(batch_values(spark, clock=clock)).where(F.col("at") <= batch_value("clock"))
    """
    return F.col(_column(name))


def _column(name: str) -> str:
    return f"_{name}"
