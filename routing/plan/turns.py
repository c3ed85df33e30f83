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

A request maps each position of its group (``k`` bindings, ``k`` positions) to the binding
it takes and the position after it; such maps compose, so a group's turns are a prefix
scan over its requests' maps (:func:`scan`, vectorised). A large batch cuts its requests
into ranges of turn order and scans them in parallel (:func:`turns_in_chunks`): each
chunk's map, composed on the driver in turn order, gives the next chunk its start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from routing.plan._columns import literal_map, local_frame, shuffle_partitions, union_by_name

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

CHUNK = "_chunk"
"""A request's chunk of its group's turn order (:func:`turns_in_chunks`)."""

CHUNK_SCANS = StructType(
    [
        StructField("group", StringType()),
        StructField(CHUNK, IntegerType()),
        StructField("message_id", LongType()),
        StructField("start", IntegerType()),
        StructField("from_each", ArrayType(IntegerType())),
    ]
)
"""A chunk's scan from each position of its group (:func:`_chunk_scans`): per request, the
binding it takes from each position the chunk may start at (-1: none); per chunk, one row
without ``message_id`` whose ``from_each`` is the position after the chunk from each, and
whose ``start`` is where the group stood before the batch."""

TURNS_CONF = "spark.routing.turns.chunks"
"""How many ranges of turn order a batch's requests are cut into (:func:`take_turns`);
unset: ``spark.sql.shuffle.partitions``, which is 1 in a small batch."""

_ARROW_TYPES = (pa.string(), pa.int64(), pa.int32(), pa.int32())
_TURN_ORDER = [("sent_at", "ascending"), ("message_id", "ascending")]


def steps(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per request and position: the binding it takes from there (-1: none) and the
    position after it. Computed once per distinct mask (a group has few).

    :param masks: requests x bindings booleans.
    :return: two requests x bindings arrays.
    """
    rows, width = masks.shape
    if rows == 0:
        empty = np.zeros((0, width), dtype=np.int64)
        return empty, empty
    if width < 63:  # each mask as the bits of one integer: np.unique over rows is far slower
        codes = masks.astype(np.int64) @ (np.int64(1) << np.arange(width, dtype=np.int64))
        found, inverse = np.unique(codes, return_inverse=True)
        distinct = (found[:, None] >> np.arange(width)) & 1 == 1
    else:
        distinct, inverse = np.unique(masks, axis=0, return_inverse=True)
    positions = np.arange(width)
    # [position, step] -> the binding ``step`` places after ``position``
    order = (positions[:, None] + positions[None, :]) % width
    ahead = distinct[:, order]  # distinct masks x positions x steps
    matched = ahead.any(axis=2)
    taken = np.where(matched, (positions[None, :] + ahead.argmax(axis=2)) % width, -1)
    after = np.where(matched, (taken + 1) % width, positions[None, :])
    inverse = inverse.reshape(-1)
    return taken[inverse], after[inverse]


def composed(after: np.ndarray) -> np.ndarray:
    """Per request and start position: the position after it and every request before it
    (the prefix compositions of the requests' maps, in log2(requests) vectorised steps)."""
    prefix = after.copy()
    span = 1
    while span < len(prefix):
        # requests i-2*span+1 .. i: those after the first span, applied to the first span's
        prefix[span:] = np.take_along_axis(prefix[span:], prefix[:-span], axis=1)
        span *= 2
    return prefix


def from_each_position(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per request, the binding it takes when its group starts the requests at each
    position (-1: none), and the position after them all from each.

    :param masks: rows x bindings booleans, rows in turn order.
    :return: a rows x bindings array and a bindings array.
    """
    rows, width = masks.shape
    if rows == 0 or width == 0:
        return np.full((rows, width), -1), np.arange(width)
    taken, after = steps(masks)
    prefix = composed(after)
    found = np.vstack([np.arange(width), prefix[:-1]])  # the position each request finds
    return np.take_along_axis(taken, found, axis=1), prefix[-1]


def scan(masks: np.ndarray, start: int) -> tuple[np.ndarray, int]:
    """Chosen binding per row (-1: none) and the final position.

    :param masks: rows x bindings booleans, rows in turn order.
    """
    rows, width = masks.shape
    if width == 0:
        return np.full(rows, -1), start
    position = start % width
    chosen, ends = from_each_position(masks)
    return chosen[:, position], int(ends[position])


def _masks(table: pa.Table) -> np.ndarray:
    """The ``mask`` column as a rows x bindings array (a group's masks have one width)."""
    lists = table.column("mask").combine_chunks()
    width = len(lists[0]) if len(lists) else 0
    return lists.flatten().to_numpy(zero_copy_only=False).astype(bool).reshape(len(lists), width)


def _turns_table(table: pa.Table, chosen: np.ndarray, final: int | None) -> pa.Table:
    """:data:`TURNS` of one group's requests (``table``, in turn order), and its end row
    (no message_id, the ``final`` position) unless ``final`` is None."""
    n = table.num_rows
    ends = 0 if final is None else 1
    group = table.column("group")[0].as_py()
    ids = table.column("message_id").combine_chunks().cast(pa.int64())
    chosen = np.concatenate([chosen, np.full(ends, -1)]).astype(np.int32)
    arrays = [
        pa.array([group] * (n + ends), pa.string()),
        pa.concat_arrays([ids, pa.nulls(ends, pa.int64())]),
        pa.array(chosen, mask=chosen < 0),
        pa.array(np.full(n + ends, final or 0, dtype=np.int32), mask=np.arange(n + ends) < n),
    ]
    return pa.Table.from_arrays(
        arrays,
        schema=pa.schema([(f.name, t) for f, t in zip(TURNS.fields, _ARROW_TYPES, strict=True)]),
    )


def _group_turns(table: pa.Table) -> pa.Table:
    """:data:`TURNS` of a whole group, from its ``start``."""
    table = table.sort_by(_TURN_ORDER)
    chosen, final = scan(_masks(table), table.column("start")[0].as_py())
    return _turns_table(table, chosen, final)


def _chunks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    """A partition's requests, one table per chunk of a group, each in turn order."""
    listed = list(batches)
    if not listed:
        return
    table = pa.Table.from_batches(listed)
    if table.num_rows == 0:
        return
    table = table.sort_by([("group", "ascending"), (CHUNK, "ascending"), *_TURN_ORDER])
    group, chunk = (table.column(c).combine_chunks() for c in ("group", CHUNK))
    changed = pc.or_(
        pc.not_equal(group[1:], group[:-1]), pc.not_equal(chunk[1:], chunk[:-1])
    ).to_numpy(zero_copy_only=False)
    bounds = [0, *(np.flatnonzero(changed) + 1).tolist(), table.num_rows]
    for begin, end in pairwise(bounds):
        yield table.slice(begin, end - begin)


def _chunk_scans(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """:data:`CHUNK_SCANS` of a partition's chunks."""
    for chunk in _chunks(batches):
        masks = _masks(chunk)
        rows, width = masks.shape
        group, number, start = (chunk.column(c)[0].as_py() for c in ("group", CHUNK, "start"))
        from_each, ends = from_each_position(masks)
        values = np.vstack([from_each, ends[None, :]]).astype(np.int32).reshape(-1)
        ids = chunk.column("message_id").combine_chunks().cast(pa.int64())
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([group] * (rows + 1), pa.string()),
                pa.array(np.full(rows + 1, number, np.int32)),
                pa.concat_arrays([ids, pa.nulls(1, pa.int64())]),
                pa.array(np.full(rows + 1, start, np.int32)),
                pa.ListArray.from_arrays(
                    pa.array(np.arange(rows + 2, dtype=np.int32) * width), pa.array(values)
                ),
            ],
            schema=_CHUNK_SCANS_ARROW,
        )


_CHUNK_SCANS_ARROW = pa.schema(
    [
        ("group", pa.string()),
        (CHUNK, pa.int32()),
        ("message_id", pa.int64()),
        ("start", pa.int32()),
        ("from_each", pa.list_(pa.int32())),
    ]
)

CHUNK_STARTS = StructType(
    [
        StructField("group", StringType()),
        StructField(CHUNK, IntegerType()),
        StructField("begin", IntegerType()),
        StructField("final", IntegerType()),
    ]
)


def chunk_starts(
    maps: Iterable[tuple[str, int, int, list[int]]],
) -> list[tuple[str, int, int, int | None]]:
    """:data:`CHUNK_STARTS`: per chunk of a group, the position it starts from, and the
    group's end position when it is the group's last chunk (else None); from each chunk's
    group, number, group start and map (the position after it from each position)."""
    by_group: dict[str, list[tuple[int, int, list[int]]]] = {}
    for group, chunk, start, after in maps:
        by_group.setdefault(group, []).append((chunk, start, after))
    starts = []
    for group, chunks in sorted(by_group.items()):
        chunks.sort()
        width = len(chunks[0][2])
        position = chunks[0][1] % width if width else chunks[0][1]
        for k, (chunk, _, after) in enumerate(chunks):
            begin = position
            position = after[position] if width else position
            starts.append((group, chunk, begin, position if k == len(chunks) - 1 else None))
    return starts


POSITIONS = StructType([StructField("group", StringType()), StructField("position", IntegerType())])


def take_turns(
    requests: DataFrame,
    positions: DataFrame,
    keep: Callable[[DataFrame], DataFrame] = lambda frame: frame,
    groups: Mapping[str, int | None] | None = None,
    chunks: int | None = None,
) -> tuple[DataFrame, DataFrame]:
    """Run the turns of ``requests`` (``group``, ``sent_at``, ``message_id``, ``mask``).

    :param positions: :data:`POSITIONS`, where each group stood before (0 if never seen).
    :param keep: materialises the turns, which both results read: without it the
        positions after pass ``n`` hold pass ``n - 1``'s plan several times over, and a
        batch of many passes plans exponentially. The chunks are kept with it too.
    :param groups: every group of the requests: its number of bindings when every binding
        matches every request (no filters), so its turns are a rotation numbered in the
        JVM (:func:`rotate`, ``mask`` unread); None when its turns are scanned in Python
        (:func:`scan`). Default: scan every group. With only rotations no Python runs.
        Read by the plain path only.
    :param chunks: how many ranges of turn order the requests are cut into, a group's
        chunks scanned in parallel (:func:`turns_in_chunks`). Default :data:`TURNS_CONF`.
        1: the plain path, each group in one task (:func:`whole_groups`).
    :return: the :data:`TURNS` of each request, and the positions after them.
    """
    requests = requests.join(F.broadcast(positions), "group", "left").select(
        "group",
        "sent_at",
        "message_id",
        "mask",
        F.coalesce("position", F.lit(0)).alias("start"),
    )
    if chunks is None:
        spark = requests.sparkSession
        chunks = int(spark.conf.get(TURNS_CONF, None) or shuffle_partitions(spark))
    if chunks > 1:
        turns = keep(turns_in_chunks(requests, chunks, keep))
    else:
        turns = keep(whole_groups(requests, groups))
    ends = turns.where(F.col("position").isNotNull()).select("group", "position")
    after = union_by_name([positions.join(ends, "group", "left_anti"), ends])
    return turns.where(F.col("message_id").isNotNull()), after


def whole_groups(requests: DataFrame, groups: Mapping[str, int | None] | None) -> DataFrame:
    """:data:`TURNS` of ``requests`` (with their group's ``start``), each group in one
    task: a rotation by a window in the JVM, a scan in Python."""
    rotations = {g: width for g, width in (groups or {}).items() if width is not None}
    parts = []
    if rotations:
        parts.append(requests.where(F.col("group").isin(*rotations)).transform(rotate(rotations)))
    if groups is None or len(rotations) < len(groups):
        scanned = requests.where(~F.col("group").isin(*rotations)) if rotations else requests
        parts.append(scanned.groupBy("group").applyInArrow(_group_turns, TURNS))
    return union_by_name(parts)


def turns_in_chunks(
    requests: DataFrame, chunks: int, keep: Callable[[DataFrame], DataFrame]
) -> DataFrame:
    """:data:`TURNS` of ``requests`` (with their group's ``start``) cut into ``chunks``
    ranges of ``(group, sent_at, message_id)``: the parallel prefix scan.

    Each range's index is its requests' chunk, so a group's chunks follow its turn order.
    One Python pass scans each chunk from every position it may start at (a group has few:
    one per binding) and gives its map (the position after it from each); the driver
    composes a group's maps in chunk order, so each chunk's start is the position the
    chunks before it leave; each request then takes its binding from its chunk's start.
    The requests are kept first: the ranges' bounds are sampled from them, a job that
    would otherwise compute them twice. Rotations are scanned too (all-true masks): a
    rotation's window would hold a group in one task.
    """
    spark = requests.sparkSession
    scans = keep(
        keep(requests)
        .repartitionByRange(chunks, "group", "sent_at", "message_id")
        .withColumn(CHUNK, F.spark_partition_id())
        .mapInArrow(_chunk_scans, CHUNK_SCANS)
    )
    maps = scans.where(F.col("message_id").isNull()).select("group", CHUNK, "start", "from_each")
    starts = local_frame(spark, chunk_starts(tuple(row) for row in maps.collect()), CHUNK_STARTS)
    chosen = F.element_at("from_each", F.col("begin") + 1)
    return (
        scans.join(F.broadcast(starts), ["group", CHUNK])
        .where(F.col("message_id").isNotNull() | F.col("final").isNotNull())
        .select(
            "group",
            "message_id",
            F.when(F.col("message_id").isNotNull() & (chosen >= 0), chosen).alias("chosen"),
            F.when(F.col("message_id").isNull(), F.col("final")).alias("position"),
        )
    )


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
