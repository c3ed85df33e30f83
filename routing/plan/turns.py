"""Round-robin turns among bindings that share a routing name (SPEC §5.2 step 2).

Artemis ``BindingsImpl.getNextBinding``: from the group's current position, the
first binding (cyclically) whose filter matches the message gets it, and the
position moves to the binding after it; a message no binding matches leaves the
position where it is. Rows take their turns in ``(sent_at, message_id)`` order,
and the positions are carried from one micro-batch to the next (job state). A batch's
routing passes take turns one after the other; a plan whose later pass routed a row
earlier than one of an earlier pass is planned again with the turns foreseen
(``engine.run_batch``).

Groups: the anycast queues of an address (``anycast:<address>``), and the
non-exclusive diverts of an address sharing a routing-name
(``divert:<address>:<routing-name>``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from routing.plan._columns import literal_map, local_frame, union_by_name

TURNS = StructType(
    [
        StructField("group", StringType()),
        StructField("message_id", LongType()),
        StructField("chosen", IntegerType()),
        StructField("position", IntegerType()),
    ]
)
"""One row per request with the binding chosen (index, null: none matched); per group, one
row has the ``position`` where the group ends (a scan's extra row without ``message_id``, a
rotation's last request)."""


_ARROW_TYPES = (pa.string(), pa.int64(), pa.int32(), pa.int32())


def scan(masks: np.ndarray, start: int) -> tuple[np.ndarray, int]:
    """Chosen binding per row (-1: none) and the final position.

    :param masks: rows x bindings booleans, rows in turn order.
    """
    rows, width = masks.shape
    if width == 0:
        return np.full(rows, -1), start
    position = start % width
    if masks.all():  # every binding matches every row: plain rotation
        chosen = (position + np.arange(rows)) % width
        return chosen, int((position + rows) % width)
    chosen = np.full(rows, -1)
    order = np.arange(width)
    for i in range(rows):
        row = masks[i]
        if not row.any():
            continue
        rotated = row[(order + position) % width]
        pick = (int(np.argmax(rotated)) + position) % width
        chosen[i] = pick
        position = (pick + 1) % width
    return chosen, position


def _group_turns(table: pa.Table) -> pa.Table:
    table = table.sort_by([("sent_at", "ascending"), ("message_id", "ascending")])
    n = table.num_rows
    group = table.column("group")[0].as_py()
    start = table.column("start")[0].as_py()
    lists = table.column("mask").combine_chunks()
    width = len(lists[0]) if n else 0  # every request of a group has one flag per binding
    masks = lists.flatten().to_numpy(zero_copy_only=False).astype(bool).reshape(n, width)
    chosen, final = scan(masks, start)
    # one row per request, then the group's end row (no message_id, the final position)
    arrays = [
        pa.array([group] * (n + 1), pa.string()),
        pa.concat_arrays([table.column("message_id").combine_chunks(), pa.nulls(1, pa.int64())]),
        pa.array(np.append(chosen, -1).astype(np.int32), mask=np.append(chosen < 0, True)),
        pa.array(np.full(n + 1, final, dtype=np.int32), mask=np.arange(n + 1) < n),
    ]
    return pa.Table.from_arrays(
        arrays,
        schema=pa.schema([(f.name, t) for f, t in zip(TURNS.fields, _ARROW_TYPES, strict=True)]),
    )


POSITIONS = StructType([StructField("group", StringType()), StructField("position", IntegerType())])


def take_turns(
    requests: DataFrame,
    positions: DataFrame,
    keep: Callable[[DataFrame], DataFrame] = lambda frame: frame,
    groups: Mapping[str, int | None] | None = None,
) -> tuple[DataFrame, DataFrame]:
    """Run the turns of ``requests`` (``group``, ``sent_at``, ``message_id``, ``mask``).

    :param positions: :data:`POSITIONS`, where each group stood before (0 if never seen).
    :param keep: materialises the turns, which both results read: without it the
        positions after pass ``n`` hold pass ``n - 1``'s plan several times over, and a
        batch of many passes plans exponentially.
    :param groups: every group of the requests: its number of bindings when every binding
        matches every request (no filters), so its turns are a rotation numbered in the
        JVM (:func:`rotate`, ``mask`` unread); None when its turns are scanned in Python
        (:func:`scan`). Default: scan every group. With only rotations no Python runs.
    :return: the :data:`TURNS` of each request, and the positions after them.
    """
    requests = requests.join(F.broadcast(positions), "group", "left").select(
        "group",
        "sent_at",
        "message_id",
        "mask",
        F.coalesce("position", F.lit(0)).alias("start"),
    )
    rotations = {g: width for g, width in (groups or {}).items() if width is not None}
    parts = []
    if rotations:
        parts.append(requests.where(F.col("group").isin(*rotations)).transform(rotate(rotations)))
    if groups is None or len(rotations) < len(groups):
        scanned = requests.where(~F.col("group").isin(*rotations)) if rotations else requests
        parts.append(scanned.groupBy("group").applyInArrow(_group_turns, TURNS))
    turns = keep(union_by_name(parts))
    ends = turns.where(F.col("position").isNotNull()).select("group", "position")
    after = positions.join(ends, "group", "left_anti").unionByName(ends)
    return turns.where(F.col("message_id").isNotNull()), after


def rotate(widths: Mapping[str, int]) -> Callable[[DataFrame], DataFrame]:
    """:data:`TURNS` of groups where every binding takes every request: the ``n``-th
    request (``sent_at``, ``message_id`` order, from 0) gets binding ``(start + n) % width``
    and the group ends at ``(start + requests) % width``, as :func:`scan` with all-true
    masks. One window (one sort); the group's last request, the one with no next,
    carries its end position. (A count over the whole group would hold each group's
    requests in a buffer: a third slower.)
    """
    width = literal_map(widths, "int")[F.col("group")]

    def transform(requests: DataFrame) -> DataFrame:
        in_order = Window.partitionBy("group").orderBy("sent_at", "message_id")
        number = F.row_number().over(in_order)
        last = F.lead(F.lit(True)).over(in_order).isNull()
        return requests.select(
            "group",
            "message_id",
            ((F.col("start") + number - 1) % width).cast("int").alias("chosen"),
            F.when(last, (F.col("start") + number) % width).cast("int").alias("position"),
        )

    return transform


def positions_frame(spark, positions: Mapping[str, int]) -> DataFrame:
    """The positions of the job state as a :data:`POSITIONS` frame."""
    return local_frame(spark, sorted(positions.items()), POSITIONS)
