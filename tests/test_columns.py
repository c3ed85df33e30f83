"""The shared DataFrame helpers of ``routing.plan._columns``."""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException

from routing.io.session import SMALL_BATCH_CONF
from routing.plan._columns import broadcasts_by_size, union_all, union_by_name
from tests.frames import assert_rows_equal


def frames(spark, n: int, *, swapped: bool = True) -> list:
    """``n`` one-row frames of ``(id, name)``, every other one with its columns swapped."""
    out = []
    for i in range(n):
        frame = spark.createDataFrame([(i, f"r{i}")], "id long, name string")
        out.append(frame.select("name", "id") if swapped and i % 2 else frame)
    return out


def root(frame):
    """The root of ``frame``'s plan as built (before Spark's analyzer and optimizer)."""
    return frame._jdf.queryExecution().logical()


def test_union_by_name_matches_columns_by_name(spark):
    expected = spark.createDataFrame([(i, f"r{i}") for i in range(5)], "id long, name string")
    assert_rows_equal(union_by_name(frames(spark, 5)), expected, order_by=["id"])


def test_union_by_name_is_one_union_of_every_frame(spark):
    """Eight frames are one union of eight: analysed once, where ``unionByName`` pair by pair
    analyses every pair it makes twice."""
    union = root(union_by_name(frames(spark, 8)))
    assert (union.nodeName(), union.children().size()) == ("Union", 8)
    assert root(union_by_name(frames(spark, 1))).nodeName() != "Union"


def test_union_by_name_keeps_every_row_of_a_frame_given_twice(spark):
    one, two = frames(spark, 2)
    expected = spark.createDataFrame([(0, "r0"), (0, "r0"), (1, "r1")], "id long, name string")
    assert_rows_equal(union_by_name([one, two, one]), expected, order_by=["id"])


def test_union_by_name_fills_missing_columns_when_allowed(spark):
    some = spark.createDataFrame([(1, "a")], "id long, name string")
    fewer = spark.createDataFrame([(2,)], "id long")
    expected = spark.createDataFrame([(1, "a"), (2, None)], "id long, name string")
    assert_rows_equal(union_by_name([some, fewer], allow_missing=True), expected, order_by=["id"])
    with pytest.raises(AnalysisException, match=r"(?i)column"):
        union_by_name([some, fewer]).collect()


def test_union_by_name_fills_a_column_only_a_later_frame_has(spark):
    fewer = spark.createDataFrame([(1,)], "id long")
    more = spark.createDataFrame([("b", 2, True)], "name string, id long, late boolean")
    expected = spark.createDataFrame(
        [(1, None, None), (2, "b", True), (3, None, None)], "id long, name string, late boolean"
    )
    unioned = union_by_name([fewer, more, fewer.withColumn("id", fewer.id + 2)], allow_missing=True)
    assert_rows_equal(unioned, expected, order_by=["id"])


def test_union_by_name_needs_a_frame():
    with pytest.raises(ValueError, match="at least one frame"):
        union_by_name([])


def test_union_all_skips_missing_frames(spark):
    one, two = frames(spark, 2, swapped=False)
    assert union_all([None, None]) is None
    assert union_all([None, one]) is one
    assert_rows_equal(union_all([one, None, two]), one.unionByName(two), order_by=["id"])


def test_union_all_narrows_to_the_shuffle_partitions(spark):
    many = [frame.repartition(3) for frame in frames(spark, 4)]
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    assert union_by_name(many).rdd.getNumPartitions() == 12
    assert union_all(many).rdd.getNumPartitions() == min(partitions, 12)


def test_broadcasts_by_size_follows_the_threshold(spark):
    """A small batch's session (``SMALL_BATCH_CONF``) broadcasts by hint only; a plan that
    must broadcast a side there names it."""
    key = "spark.sql.autoBroadcastJoinThreshold"
    before = spark.conf.get(key)
    try:
        spark.conf.set(key, SMALL_BATCH_CONF[key])
        assert not broadcasts_by_size(spark)
        spark.conf.set(key, "10MB")
        assert broadcasts_by_size(spark)
    finally:
        spark.conf.set(key, before)
