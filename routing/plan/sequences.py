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
- ``_ready``: an eligible event that needs the message deliverable: a consumer's
  delivery, a MOVE or SEND_TO_DLA naming it by id (Artemis's consumers and by-id
  operations do not see a message scheduled for redelivery, SPEC §5.3);
- ``delivery_count`` and ``redeliver_at`` (before the batch), ``max_delivery_attempts``,
  ``redelivery_delay``, ``redelivery_delay_multiplier``, ``max_redelivery_delay``, ``at``.

Outputs, per event (:data:`FIGURES`):

- ``_pos``: 1-based position among the message's events;
- ``_count``: the delivery count after this event;
- ``_ends``: this event ends the message (ACK, attempts exhausted, or terminal);
- ``_first_end``: position of the first ending event (null: none);
- ``_applied``: eligible, not waiting, and not after the first ending event;
- ``_last``: position of the last applied event (the message's final state);
- ``_waiting``: an eligible ``_ready`` event that came while the message waited for its
  redelivery (before ``_redeliver_at`` of the last ROLLBACK applied before it, or of the
  state): not applied, it changes nothing (the fold rejects it);
- ``_waits_until``: the redelivery time the message waited for (with ``_waiting``);
- ``_redeliver_at``: a ROLLBACK applied without ending the message: when the message may
  be delivered again, ``at + min(max-redelivery-delay, delay * multiplier^(count-1))``
  (Artemis ``QueueImpl.calculateRedeliveryDelay``; null without a delay);
- ``_redeliver_at_after``: the message's ``redeliver_at`` after its applied events: the
  ``_redeliver_at`` of the last such ROLLBACK, or the one it had if there is none.

Which events wait depends on the events before them (a waiting delivery counts nothing,
and so moves later redelivery times), so the figures are computed again, each round
without the first waiting event of every message, until no event waits: once when
none does, which is almost always.
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

ELIGIBLE, ROLLBACK, ACK, TERMINAL, READY = (
    "_eligible",
    "_rollback",
    "_ack",
    "_terminal",
    "_ready",
)
FLAGS = (ELIGIBLE, ROLLBACK, ACK, TERMINAL, READY)
"""The flags :func:`in_order` reads of each event (see above), beside :data:`STATE`."""
STATE = (
    "delivery_count",
    "redeliver_at",
    "max_delivery_attempts",
    "redelivery_delay",
    "redelivery_delay_multiplier",
    "max_redelivery_delay",
    "at",
)
"""What :func:`in_order` reads of each event besides its flags: the message's state before
the batch, its queue's settings, the event's time."""

POS, COUNT, ENDS, FIRST_END, APPLIED, LAST = (
    "_pos",
    "_count",
    "_ends",
    "_first_end",
    "_applied",
    "_last",
)
WAITING, WAITS_UNTIL, REDELIVER_AT, REDELIVER_AT_AFTER = (
    "_waiting",
    "_waits_until",
    "_redeliver_at",
    "_redeliver_at_after",
)
FIGURES = StructType(
    [
        StructField(POS, IntegerType()),
        StructField(COUNT, IntegerType()),
        StructField(ENDS, BooleanType()),
        StructField(FIRST_END, IntegerType()),
        StructField(APPLIED, BooleanType()),
        StructField(LAST, IntegerType()),
        StructField(WAITING, BooleanType()),
        StructField(WAITS_UNTIL, TimestampType()),
        StructField(REDELIVER_AT, TimestampType()),
        StructField(REDELIVER_AT_AFTER, TimestampType()),
    ]
)
"""The columns :func:`in_order` adds."""

READ = (*FLAGS, *STATE)
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


def _int(table: pa.Table, name: str, default: int = 0) -> np.ndarray:
    return pc.fill_null(table.column(name), default).to_numpy().astype(np.int64)


def _micros(table: pa.Table, name: str) -> np.ndarray:
    """A timestamp column as epoch µs, null as :data:`_NONE`."""
    micros = pc.cast(table.column(name), pa.int64())
    return pc.fill_null(micros, _NONE).to_numpy(zero_copy_only=False).astype(np.int64)


def _timestamps(micros: np.ndarray, missing: np.ndarray) -> pa.Array:
    return pa.array(np.where(missing, 0, micros), mask=missing).cast(_TIMESTAMP)


def _figures(table: pa.Table, key: Sequence[str]) -> pa.Table:
    n = table.num_rows
    starts = _starts(table, key)
    group = np.cumsum(starts) - 1  # group number of each row
    first = np.flatnonzero(starts)  # first row of each group
    groups = len(first)
    row = np.arange(n)
    pos = row - first[group] + 1

    eligible, terminal = _flag(table, ELIGIBLE), _flag(table, TERMINAL)
    rollback0, ack0, ready = _flag(table, ROLLBACK), _flag(table, ACK), _flag(table, READY)
    at = _micros(table, "at")
    state_until = _micros(table, "redeliver_at")[first]  # the message's, before the batch
    delay = _int(table, "redelivery_delay")
    multiplier = pc.fill_null(table.column("redelivery_delay_multiplier"), 1.0).to_numpy()
    max_delay = _int(table, "max_redelivery_delay")
    waiting = np.zeros(n, dtype=bool)
    while True:
        live = eligible & ~waiting
        rollback, ack = rollback0 & live, ack0 & live
        running = np.cumsum(rollback)
        rollbacks: np.ndarray = running - (running - rollback)[first][group]  # this group's
        count = _int(table, "delivery_count") + rollbacks + ack
        attempts = _int(table, "max_delivery_attempts")
        ends = ack | (terminal & live) | (rollback & (attempts > 0) & (count >= attempts))

        first_end = np.full(groups, _NONE)
        np.minimum.at(first_end, group[ends], pos[ends])
        group_first_end = first_end[group]
        none_ended = group_first_end == _NONE
        applied = live & (none_ended | (pos <= group_first_end))
        rescheduling = applied & rollback & ~ends
        # the redelivery time each rescheduling ROLLBACK sets (QueueImpl.calculateRedeliveryDelay)
        exponent = np.maximum(count - 1, 0).astype(np.float64)
        millis = np.minimum(delay * np.power(multiplier, exponent), max_delay)
        scheduled = rescheduling & (delay > 0)
        until = np.where(scheduled, at + millis.astype(np.int64) * 1000, _NONE)
        # what each event finds: the time set by the last rescheduling ROLLBACK before it
        # (one without a delay clears it), else the message's state before the batch
        latest = np.maximum.accumulate(np.where(rescheduling, row, -1))
        previous = np.concatenate([[-1], latest[:-1]])
        from_batch = previous >= first[group]
        finds = np.where(from_batch, until[np.maximum(previous, 0)], state_until[group])
        early = applied & ready & (finds != _NONE) & (at < finds)
        if not early.any():
            break
        first_early = np.full(groups, _NONE)
        np.minimum.at(first_early, group[early], pos[early])
        waiting |= early & (pos == first_early[group])

    last_live = np.zeros(groups, dtype=np.int64)
    np.maximum.at(last_live, group[live], pos[live])
    last = np.where(none_ended, last_live[group], group_first_end)
    last_rescheduling = np.full(groups, -1)
    np.maximum.at(last_rescheduling, group[rescheduling], row[rescheduling])
    source = last_rescheduling[group]
    rescheduled = source >= 0
    after = np.where(rescheduled, until[np.maximum(source, 0)], state_until[group])
    # what a waiting event found (the events before it are those it saw when it waited)
    waits = np.where(waiting, finds, _NONE)

    figures = {
        POS: pa.array(pos.astype(np.int32)),
        COUNT: pa.array(count.astype(np.int32)),
        ENDS: pa.array(ends),
        FIRST_END: pa.array(group_first_end.astype(np.int32), mask=none_ended),
        APPLIED: pa.array(applied),
        LAST: pa.array(last.astype(np.int32), mask=last == 0),
        WAITING: pa.array(waiting),
        WAITS_UNTIL: _timestamps(waits, waits == _NONE),
        REDELIVER_AT: _timestamps(until, until == _NONE),
        REDELIVER_AT_AFTER: _timestamps(after, after == _NONE),
    }
    for name, values in figures.items():
        table = table.append_column(name, values)
    return table
