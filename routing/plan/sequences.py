"""The events of each (queue, message) in order: their running figures in one vectorized pass.

The delivery fold (:mod:`routing.plan.deliveries`) needs, for every event of a message in a
queue, figures that depend on the events before it: how many ROLLBACKs so far, which
event ends the message, which is the last one applied. Spark's window functions compute
them, but a window over hundreds of thousands of one- or two-row partitions costs about
20 µs a row here. So the rows are partitioned and sorted by (queue, message, event
order) once, and :func:`scan` walks each partition's Arrow batches with numpy: segment
starts, cumulative sums and per-segment minima and maxima, a few operations per column.

The pass computes only this bookkeeping; what an event means (which events are
eligible, what ends a message, where its copy goes) stays in Spark Columns, in the fold.

Inputs, per event (booleans already false for ineligible events):

- ``_eligible``: the event applies to the message as it sits in the queue;
- ``_rollback``, ``_ack``: an eligible ROLLBACK / ACK;
- ``_terminal``: an eligible event that ends the message whatever the count (expiry,
  MOVE, RETRY, SEND_TO_DLA);
- ``delivery_count`` (before the batch), ``max_delivery_attempts``, ``at``.

Outputs, per event (:data:`FIGURES`):

- ``_pos``: 1-based position among the message's events;
- ``_count``: the delivery count after this event;
- ``_ends``: this event ends the message (ACK, attempts exhausted, or terminal);
- ``_first_end``: position of the first ending event (null: none);
- ``_applied``: eligible and not after the first ending event;
- ``_last``: position of the last applied event (the message's final state);
- ``_rescheduled_at`` / ``_rescheduled_count``: ``at`` and ``_count`` of the last applied
  ROLLBACK that did not end the message (null: none), from which the fold computes the
  message's final ``redeliver_at``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, StructField, StructType, TimestampType

from routing.plan._columns import shuffle_partitions

ELIGIBLE, ROLLBACK, ACK, TERMINAL = "_eligible", "_rollback", "_ack", "_terminal"
FLAGS = (ELIGIBLE, ROLLBACK, ACK, TERMINAL)
"""The flags :func:`in_order` reads of each event (see above), beside ``delivery_count``,
``max_delivery_attempts`` and ``at``."""

POS, COUNT, ENDS, FIRST_END, APPLIED, LAST = (
    "_pos",
    "_count",
    "_ends",
    "_first_end",
    "_applied",
    "_last",
)
RESCHEDULED_AT, RESCHEDULED_COUNT = "_rescheduled_at", "_rescheduled_count"
FIGURES = StructType(
    [
        StructField(POS, IntegerType()),
        StructField(COUNT, IntegerType()),
        StructField(ENDS, BooleanType()),
        StructField(FIRST_END, IntegerType()),
        StructField(APPLIED, BooleanType()),
        StructField(LAST, IntegerType()),
        StructField(RESCHEDULED_AT, TimestampType()),
        StructField(RESCHEDULED_COUNT, IntegerType()),
    ]
)
"""The columns :func:`in_order` adds."""

READ = (*FLAGS, "delivery_count", "max_delivery_attempts", "at")
"""The columns :func:`in_order` reads of each event, beside its key."""
_FIGURES = "_figures"

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_NONE = np.iinfo(np.int64).max


def in_order(rows: DataFrame, key: Sequence[str], order: Sequence[str]) -> DataFrame:
    """``rows`` with :data:`FIGURES`, each (``key``) group's events taken in ``order``.

    Example::

        figures = in_order(events, ("queue", "message_id"), ("at", "_kind"))
    """
    key, order = list(key), list(order)
    partitions = shuffle_partitions(rows.sparkSession)
    # one partition (a small batch, session.SMALL_BATCH_CONF) holds every group whole
    # without a shuffle
    grouped = rows.coalesce(1) if partitions == 1 else rows.repartition(partitions, *key)
    return (
        grouped.sortWithinPartitions(*key, *order)
        .select("*", _figures_of(key).alias(_FIGURES))
        .select(*rows.columns, *(f"{_FIGURES}.{name}" for name in FIGURES.fieldNames()))
    )


def _figures_of(key: Sequence[str]) -> Column:
    """The figures of a partition's rows in order, as one scalar Arrow UDF.

    Only the key and :data:`READ` go to the Python worker, and only the figures come
    back: the rest of each row waits in the JVM (a ``mapInArrow`` sent every column both
    ways: 1M demo messages, 0.955x the wall). The UDF takes the partition's batches as
    an iterator, so a group cut by a batch boundary is completed with the next batch
    (:func:`scan`). It is nondeterministic so that the optimizer keeps it above the sort
    it depends on.
    """
    key = list(key)
    names = [*key, *READ]

    def figures(arrays: Iterator[tuple[pa.Array, ...]]) -> Iterator[pa.Array]:
        batches = (pa.RecordBatch.from_arrays(list(a), names=names) for a in arrays)
        for batch in scan(batches, key):
            columns = [batch.column(name) for name in FIGURES.fieldNames()]
            yield pa.StructArray.from_arrays(columns, names=FIGURES.fieldNames())

    udf = F.arrow_udf(figures, FIGURES).asNondeterministic()  # type: ignore[call-overload]
    return udf(*names)


def scan(batches: Iterator[pa.RecordBatch], key: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """The figures of key-sorted batches; a group cut by a batch boundary is held back and
    completed with the next batch, so every group is computed whole."""
    held: pa.Table | None = None
    for batch in batches:
        table = pa.Table.from_batches([batch])
        if held is not None:
            table = pa.concat_tables([held, table])
        if table.num_rows == 0:
            continue
        last_group = int(np.flatnonzero(_starts(table, key))[-1])
        if last_group:
            yield from _figures(table.slice(0, last_group), key).to_batches()
        held = table.slice(last_group)
    if held is not None and held.num_rows:
        yield from _figures(held, key).to_batches()


def _starts(table: pa.Table, key: Sequence[str]) -> np.ndarray:
    """True where a row starts a new key group."""
    n = table.num_rows
    starts = np.ones(n, dtype=bool)
    if n > 1:
        changed = None
        for name in key:
            column = table.column(name).combine_chunks()
            differs = pc.not_equal(column.slice(1), column.slice(0, n - 1))
            changed = differs if changed is None else pc.or_(changed, differs)
        assert changed is not None, "in_order: the key names at least one column"
        starts[1:] = changed.to_numpy(zero_copy_only=False)
    return starts


def _flag(table: pa.Table, name: str) -> np.ndarray:
    return pc.fill_null(table.column(name), False).to_numpy().astype(bool)


def _int(table: pa.Table, name: str) -> np.ndarray:
    return pc.fill_null(table.column(name), 0).to_numpy().astype(np.int64)


def _figures(table: pa.Table, key: Sequence[str]) -> pa.Table:
    n = table.num_rows
    starts = _starts(table, key)
    group = np.cumsum(starts) - 1  # group number of each row
    first = np.flatnonzero(starts)  # first row of each group
    groups = len(first)
    row = np.arange(n)
    pos = row - first[group] + 1

    eligible, terminal = _flag(table, ELIGIBLE), _flag(table, TERMINAL)
    rollback, ack = _flag(table, ROLLBACK), _flag(table, ACK)
    running = np.cumsum(rollback)
    rollbacks = running - (running - rollback)[first][group]  # this group's, up to this row
    count = _int(table, "delivery_count") + rollbacks + ack
    attempts = _int(table, "max_delivery_attempts")
    ends = ack | terminal | (rollback & (attempts > 0) & (count >= attempts))

    first_end = np.full(groups, _NONE)
    np.minimum.at(first_end, group[ends], pos[ends])
    group_first_end = first_end[group]
    none_ended = group_first_end == _NONE
    applied = eligible & (none_ended | (pos <= group_first_end))
    last_eligible = np.zeros(groups, dtype=np.int64)
    np.maximum.at(last_eligible, group[eligible], pos[eligible])
    last = np.where(none_ended, last_eligible[group], group_first_end)

    rescheduling = applied & rollback & ~ends
    last_rescheduling = np.full(groups, -1)
    np.maximum.at(last_rescheduling, group[rescheduling], row[rescheduling])
    source = last_rescheduling[group]
    rescheduled = source >= 0
    at = pc.cast(table.column("at"), pa.int64()).to_numpy(zero_copy_only=False)
    source = np.maximum(source, 0)

    figures = {
        POS: pa.array(pos.astype(np.int32)),
        COUNT: pa.array(count.astype(np.int32)),
        ENDS: pa.array(ends),
        FIRST_END: pa.array(group_first_end.astype(np.int32), mask=none_ended),
        APPLIED: pa.array(applied),
        LAST: pa.array(last.astype(np.int32), mask=last == 0),
        RESCHEDULED_AT: pa.array(at[source], mask=~rescheduled).cast(_TIMESTAMP),
        RESCHEDULED_COUNT: pa.array(count[source].astype(np.int32), mask=~rescheduled),
    }
    for name, values in figures.items():
        table = table.append_column(name, values)
    return table
