"""Small Column and DataFrame helpers shared by the routing modules."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

import pyarrow as pa
from pyspark import SparkContext
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.classic.column import Column as ClassicColumn
from pyspark.sql.classic.dataframe import DataFrame as ClassicFrame
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DataType, MapType, StructType


def literal_map(pairs: Mapping[str, object], value_type: str = "string") -> Column:
    """A literal ``map<string, value_type>`` (sorted, so plans are stable).

    One JSON literal that Spark folds into a map: one py4j call and one expression,
    however many pairs (a broker's queues or addresses: thousands). A map of
    ``create_map`` children takes two py4j calls and two expressions a pair: minutes of
    planning for 50,000 addresses.
    """
    text = json.dumps({key: pairs[key] for key in sorted(pairs)})
    return F.from_json(F.lit(text), f"map<string,{value_type}>")


def is_in(column: Column, values: Iterable[str]) -> Column:
    """``column`` is one of ``values``, which Spark looks up in a hash set: a broker's
    queue names, thousands of them, in a few py4j calls, where ``isin`` makes one per
    value (34 s for 50,000). The names are joined with NUL, which no name from
    ``broker.xml`` holds (XML cannot), and split in the JVM."""
    listed = sorted(set(values))
    if len(listed) <= SMALL_SET:
        return column.isin(listed) if listed else F.lit(False)
    jvm = SparkContext._jvm
    assert jvm is not None  # a Column exists: so does the gateway
    names = jvm.java.util.regex.Pattern.compile("\x00").splitAsStream("\x00".join(listed))
    return ClassicColumn(column._jc.isInCollection(names.toList()))  # type: ignore[operator]


SMALL_SET = 16
"""Values :func:`is_in` passes one by one (Spark's hash set starts above 10)."""


def local_frame(
    spark: SparkSession, rows: Iterable[Sequence[object]], schema: StructType
) -> DataFrame:
    """``rows`` (tuples in ``schema``'s order) as a frame the plan holds itself: a local
    relation, which no task reads and the driver broadcasts as it is.

    ``spark.createDataFrame`` on a list sends the rows through a Python worker, and
    every query that reads such a frame runs a stage of Python tasks for it (0.1 to
    0.3 s each, several a small batch: docs/PERFORMANCE.md). From an Arrow table Spark keeps
    a small frame in the plan. The values stay data, not literals compiled into code.

    Example::

        positions = local_frame(spark, [("orders", 0)], turns.POSITIONS)
    """
    arrow = to_arrow_schema(schema, timezone="UTC")
    table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], arrow)
    return spark.createDataFrame(table, schema)


def shuffle_partitions(spark: SparkSession) -> int:
    """``spark.sql.shuffle.partitions`` of the session (Spark's default, 200, if unset)."""
    value = spark.conf.get("spark.sql.shuffle.partitions")
    return int(value) if value is not None else 200


def broadcasts_by_size(spark: SparkSession) -> bool:
    """Whether the session broadcasts a join's side by its estimated size
    (``spark.sql.autoBroadcastJoinThreshold`` not negative). A small batch's does not
    (``session.SMALL_BATCH_CONF``): only the sides a plan names are broadcast."""
    value = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    return value is None or not value.strip().startswith("-")


def union_by_name(frames: Sequence[DataFrame], *, allow_missing: bool = False) -> DataFrame:
    """The rows of every frame (at least one), by name, as one union: analysed once.

    ``unionByName`` analyses the plan it makes twice (to match the names, then again with
    nested unions flattened), so a union of n frames built pair by pair is 2(n - 1)
    analyses, each over every frame's plan: a chain of 192 frames took 5.3 s to build. One
    n-ary union node made in the JVM is analysed once, the names matched frame by frame as
    ``unionByName`` matches them, and the optimizer plans it as it plans the pairs.
    """
    if not frames:
        raise ValueError("union_by_name: expected at least one frame")
    if len(frames) == 1:
        return frames[0]
    return _union(frames, allow_missing=allow_missing)


def union_all(frames: Iterable[DataFrame | None]) -> DataFrame | None:
    """The rows of every frame given (None ones skipped; None if there are none), by name.

    A union has the partitions of all its inputs: the union of a batch's many routing
    passes is narrowed to ``spark.sql.shuffle.partitions`` partitions (no shuffle), or
    every stage reading it would run hundreds of near-empty tasks. The narrowing is part
    of the union's plan, analysed with it.
    """
    present = [f for f in frames if f is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    return _union(present, partitions=max(shuffle_partitions(present[0].sparkSession), 1))


def _union(
    frames: Sequence[DataFrame], *, allow_missing: bool = False, partitions: int | None = None
) -> DataFrame:
    """A by-name ``Union`` of the frames' plans (coalesced to ``partitions``, if given) as
    one frame: one analysis, where the Dataset API makes two a pair of frames."""
    spark = frames[0].sparkSession
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a classic session's frames
    logical = jvm.org.apache.spark.sql.catalyst.plans.logical
    children = jvm.PythonUtils.toSeq([f._jdf.logicalPlan() for f in frames])
    plan = logical.Union(children, True, allow_missing)
    if partitions is not None:
        plan = logical.Repartition(partitions, False, plan)
    session = spark._jsparkSession
    return ClassicFrame(jvm.org.apache.spark.sql.classic.Dataset.ofRows(session, plan), spark)


def union_of(frames: Iterable[DataFrame | None]) -> DataFrame:
    """:func:`union_all` of frames of which at least one is there (a plan's invariant).

    :raises ValueError: if every frame is None.
    """
    union = union_all(frames)
    if union is None:
        raise ValueError("union_of: expected at least one frame, found none")
    return union


def empty_array(element_type: str) -> Column:
    """An empty ``array<element_type>``."""
    return F.array().cast(f"array<{element_type}>")


def chosen_values(choices: Sequence[tuple[Column, Column]], element_type: str) -> Column:
    """The array of each value whose condition holds, in order (a null condition does not).

    ``concat`` of one-element arrays rather than ``array_compact`` or ``filter``: those
    are higher-order functions, which Spark evaluates without code generation, and so is
    everything under them (every divert and queue filter): several times slower a row.
    """
    empty = empty_array(element_type)
    parts = [F.when(condition, F.array(value)).otherwise(empty) for condition, value in choices]
    if not parts:
        return empty
    return parts[0] if len(parts) == 1 else F.concat(*parts)


def case_of(key: Column, values: Mapping[str, Column], default: Column) -> Column:
    """``CASE WHEN key = k1 THEN v1 ... ELSE default``: only the matching branch is evaluated."""
    expression = None
    for name, value in values.items():
        condition = key == F.lit(name)
        expression = (
            F.when(condition, value) if expression is None else expression.when(condition, value)
        )
    return default if expression is None else expression.otherwise(default)


def tagged_union(frames: list[DataFrame]) -> DataFrame:
    """The rows of every frame, by name; a column a frame lacks is null, or an empty map.

    A writer keeps each table's own columns, so the filler is never written; it is an
    empty map because Spark's Arrow conversion crawls over null maps: rows reached the
    Python writer the job once had ten times slower when a journal row carried a null
    ``properties`` and a message row a null ``detail``.
    """
    types: dict[str, DataType] = {}
    for frame in frames:
        for field in frame.schema.fields:
            types.setdefault(field.name, field.dataType)

    def filler(kind: DataType) -> Column:
        if isinstance(kind, MapType):
            return F.create_map().cast(kind)
        return F.lit(None).cast(kind)

    filled = [
        frame.withColumns({n: filler(t) for n, t in types.items() if n not in frame.columns})
        for frame in frames
    ]
    return union_by_name(filled)
