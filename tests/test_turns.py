"""Round-robin turns (routing.plan.turns): a group whose bindings have no filter is a plain
rotation numbered by one window in the JVM; it must give exactly what the scan (Artemis
``BindingsImpl.getNextBinding``, one request at a time) gives, from any start position,
with ties in ``sent_at`` broken by ``message_id``, and beside scanned groups. A large
batch's groups are cut into chunks scanned in parallel: the same turns, however cut."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from routing.plan.scratch import Scratch
from routing.plan.turns import positions_frame, scan, take_turns
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
    chunks: int = 1,
    keep=lambda frame: frame,
) -> tuple[DataFrame, DataFrame]:
    turns, after = take_turns(
        requests(spark, rows), positions_frame(spark, start), keep, groups, chunks
    )
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


@pytest.mark.parametrize("chunks", [1, 3])
@pytest.mark.parametrize("start", [{}, {"r3": 2, "r2": 1, "s": 1}, {"r3": 7}])
def test_a_rotation_takes_the_turns_the_scan_takes(spark, start, chunks):
    """Same chosen bindings and same end positions as scanning every group; an unknown
    group starts at 0, and a stored position beyond the width wraps as in the scan."""
    scanned, scanned_after = turns_and_positions(spark, ROWS, start, None)
    widths = {"r3": 3, "r2": 2, "s": None}
    rotated, rotated_after = turns_and_positions(spark, ROWS, start, widths, chunks)
    assert_rows_equal(rotated, scanned, order_by=["message_id"], ignore_nullable=True)
    assert_rows_equal(rotated_after, scanned_after, order_by=["group"], ignore_nullable=True)


@pytest.mark.parametrize("chunks", [1, 2, 5])
def test_rotation_in_turn_order(spark, chunks):
    """Turn order is (sent_at, message_id): r3 from position 1 gives 14 -> 1, 13 -> 2,
    11 -> 0, 12 -> 1, 10 -> 2, and ends at 0; r2 from 0: 22 -> 0, 21 -> 1, 23 -> 0, ends 1."""
    rows = [r for r in ROWS if r[0] != "s"]
    turns, after = turns_and_positions(spark, rows, {"r3": 1}, {"r3": 3, "r2": 2}, chunks)
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


@pytest.mark.parametrize("chunks", [1, 3])
def test_positions_of_groups_without_requests_are_kept(spark, chunks):
    """A group no request takes a turn in keeps its stored position."""
    _, after = turns_and_positions(spark, ROWS[:5], {"r3": 1, "idle": 4}, {"r3": 3}, chunks)
    assert sorted(tuple(r) for r in after.collect()) == [("idle", 4), ("r3", 0)]


def test_only_rotations_run_no_python(spark):
    """With every group a rotation the plan has no Python step (no ``applyInArrow``)."""
    rows = [r for r in ROWS if r[0] != "s"]
    turns, _ = turns_and_positions(spark, rows, {}, {"r3": 3, "r2": 2})
    plan = turns._jdf.queryExecution().executedPlan().toString()
    assert "FlatMapGroupsInArrow" not in plan
    assert turns.where(F.col("chosen").isNull()).count() == 0


def one_request_at_a_time(masks: list[list[bool]], start: int) -> tuple[list[int | None], int]:
    """``BindingsImpl.getNextBinding`` as Artemis runs it: from the position, the first
    binding (cyclically) that matches takes the request, and the position moves past it."""
    width = len(masks[0])
    position, chosen = start % width, []
    for mask in masks:
        found = next(
            (b % width for b in range(position, position + width) if mask[b % width]), None
        )
        chosen.append(found)
        if found is not None:
            position = (found + 1) % width
    return chosen, position


def test_the_vectorised_scan_is_the_brokers_loop():
    """Every width, density and start, requests of every mask (rows in turn order)."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        rows, width, start = rng.integers(1, 40), rng.integers(1, 7), rng.integers(0, 9)
        masks = rng.random((rows, width)) < rng.random()
        chosen, final = scan(masks, start)
        expected, position = one_request_at_a_time(masks.tolist(), start)
        assert [None if c < 0 else c for c in chosen.tolist()] == expected
        assert final == position


@pytest.mark.parametrize("chunks", [2, 4, 9])
def test_groups_cut_into_chunks_take_the_turns_of_one_scan(spark, chunks):
    """Three groups (4 bindings two of them filtered, 3 unfiltered, 2 of which one
    never matches), 300 requests with ties in ``sent_at``, cut into chunks that split
    every group: the chosen bindings and the end positions of Artemis's loop."""
    rng = np.random.default_rng(11)
    widths = {"work": 4, "jobs": 3, "odd": 2}
    masks = {
        "work": lambda: [True, True, bool(rng.random() < 0.3), bool(rng.random() < 0.5)],
        "jobs": lambda: [True] * 3,
        "odd": lambda: [bool(rng.random() < 0.4), False],
    }
    rows = []
    for i in range(300):
        group = str(rng.choice(list(widths)))
        rows.append((group, int(rng.integers(0, 120)), 1000 - i, masks[group]()))
    start = {"work": 3, "jobs": 5}
    scratch = Scratch()
    try:
        turns, after = turns_and_positions(
            spark, rows, start, {"work": None, "jobs": 3, "odd": None}, chunks, scratch.keep
        )
        expected, ends = [], []
        for group in widths:
            mine = sorted((r for r in rows if r[0] == group), key=lambda r: (r[1], r[2]))
            chosen, position = one_request_at_a_time([r[3] for r in mine], start.get(group, 0))
            expected += [(group, r[2], c) for r, c in zip(mine, chosen, strict=True)]
            ends.append((group, position))
        assert_rows_equal(
            turns,
            spark.createDataFrame(expected, "group string, message_id long, chosen int"),
            order_by=["group", "message_id"],
            ignore_nullable=True,
        )
        assert sorted(tuple(r) for r in after.collect()) == sorted(ends)
    finally:
        scratch.release()
