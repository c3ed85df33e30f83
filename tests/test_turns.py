"""Round-robin turns (routing.plan.turns): a group whose bindings have no filter is a plain
rotation numbered by one window in the JVM; it must give exactly what the Python scan
(Artemis ``BindingsImpl.getNextBinding``, one request at a time) gives, from any start
position, with ties in ``sent_at`` broken by ``message_id``, and beside scanned groups."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from routing.plan.turns import positions_frame, take_turns
from tests.frames import assert_rows_equal

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
REQUEST = "group string, sent_at timestamp, message_id long, mask array<boolean>"


def requests(spark: SparkSession, rows: list[tuple[str, int, int, list[bool]]]) -> DataFrame:
    """Requests from (group, millisecond, message id, mask)."""
    return spark.createDataFrame(
        [(g, T0 + dt.timedelta(milliseconds=ms), m, mask) for g, ms, m, mask in rows], REQUEST
    )


def turns_and_positions(
    spark: SparkSession,
    rows: list[tuple[str, int, int, list[bool]]],
    start: dict[str, int],
    groups: dict[str, int | None] | None,
) -> tuple[DataFrame, DataFrame]:
    turns, after = take_turns(requests(spark, rows), positions_frame(spark, start), groups=groups)
    return turns.select("group", "message_id", "chosen"), after


# group r3 (3 bindings): ids in an order unlike their times, two ties at 5 ms;
# group r2 (2 bindings) shares the frame; group s has a filter, so it is scanned
ROWS = [
    ("r3", 5, 12, [True] * 3),
    ("r3", 1, 14, [True] * 3),
    ("r3", 5, 11, [True] * 3),
    ("r3", 9, 10, [True] * 3),
    ("r3", 3, 13, [True] * 3),
    ("r2", 2, 21, [True, True]),
    ("r2", 1, 22, [True, True]),
    ("r2", 4, 23, [True, True]),
    ("s", 1, 31, [False, True]),
    ("s", 2, 32, [True, False]),
    ("s", 3, 33, [False, False]),
    ("s", 4, 34, [True, True]),
]


@pytest.mark.parametrize("start", [{}, {"r3": 2, "r2": 1, "s": 1}, {"r3": 7}])
def test_a_rotation_takes_the_turns_the_scan_takes(spark, start):
    """Same chosen bindings and same end positions as scanning every group; an unknown
    group starts at 0, and a stored position beyond the width wraps as in the scan."""
    scanned, scanned_after = turns_and_positions(spark, ROWS, start, None)
    rotated, rotated_after = turns_and_positions(spark, ROWS, start, {"r3": 3, "r2": 2, "s": None})
    assert_rows_equal(rotated, scanned, order_by=["message_id"], ignore_nullable=True)
    assert_rows_equal(rotated_after, scanned_after, order_by=["group"], ignore_nullable=True)


def test_rotation_in_turn_order(spark):
    """Turn order is (sent_at, message_id): r3 from position 1 gives 14 -> 1, 13 -> 2,
    11 -> 0, 12 -> 1, 10 -> 2, and ends at 0; r2 from 0: 22 -> 0, 21 -> 1, 23 -> 0, ends 1."""
    rows = [r for r in ROWS if r[0] != "s"]
    turns, after = turns_and_positions(spark, rows, {"r3": 1}, {"r3": 3, "r2": 2})
    assert_rows_equal(
        turns,
        spark.createDataFrame(
            [
                ("r3", 14, 1),
                ("r3", 13, 2),
                ("r3", 11, 0),
                ("r3", 12, 1),
                ("r3", 10, 2),
                ("r2", 22, 0),
                ("r2", 21, 1),
                ("r2", 23, 0),
            ],
            "group string, message_id long, chosen int",
        ),
        order_by=["message_id"],
        ignore_nullable=True,
    )
    assert_rows_equal(
        after,
        spark.createDataFrame([("r2", 1), ("r3", 0)], "group string, position int"),
        order_by=["group"],
        ignore_nullable=True,
    )


def test_positions_of_groups_without_requests_are_kept(spark):
    """A group no request takes a turn in keeps its stored position."""
    _, after = turns_and_positions(spark, ROWS[:5], {"r3": 1, "idle": 4}, {"r3": 3})
    assert sorted(tuple(r) for r in after.collect()) == [("idle", 4), ("r3", 0)]


def test_only_rotations_run_no_python(spark):
    """With every group a rotation the plan has no Python step (no ``applyInArrow``)."""
    rows = [r for r in ROWS if r[0] != "s"]
    turns, _ = turns_and_positions(spark, rows, {}, {"r3": 3, "r2": 2})
    plan = turns._jdf.queryExecution().executedPlan().toString()
    assert "FlatMapGroupsInArrow" not in plan
    assert turns.where(F.col("chosen").isNull()).count() == 0
