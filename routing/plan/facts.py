"""The topology's facts as Spark values: moments of rows, which queues exist when, and
one row per queue for the delivery fold. The facts themselves are
:class:`routing.broker.topology.Topology`'s (pure Python)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from routing.broker.topology import RANKS, Created, CreatedHere, Topology, moment_of
from routing.plan._columns import is_in, literal_map, local_frame

__all__ = ["QUEUE_FACTS", "QueueFacts", "bound_since", "exists_at", "moment", "queue_facts"]


def moment(at: Column, rank: Column | int) -> Column:
    """The moment of a row at ``at`` with ``rank``, as one comparable bigint
    (:func:`routing.broker.topology.moment_of` for rows)."""
    return F.unix_micros(at) * RANKS + (rank if isinstance(rank, Column) else F.lit(rank))


def exists_at(
    topology: Topology, name: Column, at: Column, rank: Column | int, created: Created
) -> Column:
    """The queue ``name`` exists for an event of ``rank`` at ``at``: declared, or
    auto-created by then."""
    declared = sorted(q.name for q in topology.queues.values() if q.auto_created is None)
    exists = is_in(name, declared)
    made = {q.name: moment_of(created[q.name]) for q in topology.auto_queues if q.name in created}
    if made:
        since = literal_map(made, "bigint")[name]
        exists = exists | F.coalesce(moment(at, rank) >= since, F.lit(False))
    return exists


def bound_since(topology: Topology, address: Column, created: Created) -> Column:
    """The moment ``address`` got its first auto-created queue (null: none yet), as
    :meth:`routing.broker.topology.Topology.bound_since` says for ``created``."""
    addresses = sorted({q.address for q in topology.auto_queues})
    moments = {a: topology.bound_since(a, created) for a in addresses}
    known = {a: m for a, m in moments.items() if m is not None}
    return literal_map(known, "bigint")[address] if known else F.lit(None).cast("bigint")


def queue_facts(spark: SparkSession, topology: Topology, created: Created) -> DataFrame:
    """One row per queue (:meth:`routing.broker.topology.Topology.queue_fact_rows`)."""
    return local_frame(spark, topology.queue_fact_rows(created), QUEUE_FACTS)


class QueueFacts:
    """:func:`queue_facts` of one topology, ready for a broadcast join, kept per set of
    creation moments (they change a few times in a job's life), as the binding table's
    frames are: every fold round of every batch would otherwise build the same frame."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self._frames: dict[CreatedHere, DataFrame] = {}

    def frame(self, spark: SparkSession, created: Created) -> DataFrame:
        key = self.topology.created_here(created)
        if key not in self._frames:
            self._frames[key] = F.broadcast(queue_facts(spark, self.topology, created))
        return self._frames[key]


QUEUE_FACTS = StructType(
    [
        StructField("queue", StringType(), False),
        StructField("queue_address", StringType(), False),
        StructField("max_delivery_attempts", IntegerType(), False),
        StructField("redelivery_delay", LongType(), False),
        StructField("redelivery_delay_multiplier", DoubleType(), False),
        StructField("max_redelivery_delay", LongType(), False),
        StructField("dead_letter_address", StringType(), True),
        StructField("dla_has_bindings", BooleanType(), False),
        StructField("dla_bound_since", LongType(), True),
        StructField("expiry_address", StringType(), True),
        StructField("expiry_has_bindings", BooleanType(), False),
        StructField("expiry_bound_since", LongType(), True),
    ]
)
