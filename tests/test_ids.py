"""Copy ids (SPEC §5.6): Spark == Python, pinned, distinct, in the copy range."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from routing.broker.ids import COPY_ID_BASE, copy_id_py
from routing.plan.ids import copy_id, is_copy_id

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
SCHEMA = "parent long, reason string, left string, address string, queue string"
REASONS = ["DIVERT", "DEAD_LETTER", "EXPIRY", "MOVE", "RETRY"]

Hop = tuple[int, str, str | None, str, str | None]

# Unicode, the encoding's own separators, length-prefix look-alikes, empty vs null.
VARIED: list[Hop] = [
    (123, "DIVERT", "divertAtoB", "B", None),
    (0, "DEAD_LETTER", None, "DLA", None),
    (0, "DEAD_LETTER", "", "DLA", None),
    (0, "DEAD_LETTER", "-", "DLA", None),
    (0, "DEAD_LETTER", "0:", "DLA", None),
    (1, "MOVE", "q:1", "a|b", "q|2"),
    (1, "MOVE", "q", ":1a|b", "q|2"),
    (1, "MOVE", "1:q", "1:a", "1:q"),
    (7, "EXPIRY", "zürich", "z=C3=BCrich", None),
    (7, "EXPIRY", "日本語のキュー", "адрес", None),
    (7, "RETRY", "emoji-😀", "\u00e9", "e\u0301"),  # NFC vs NFD: different bytes, different ids
    (7, "RETRY", "tab\tnew\nline", "nul\x00byte", ""),
    (COPY_ID_BASE - 1, "DIVERT", "d", "A", None),
    (COPY_ID_BASE, "DIVERT", "d", "A", None),
    (INT64_MAX, "DIVERT", "d", "A", None),
    (-1, "DIVERT", "d", "A", None),
    (INT64_MIN, "DIVERT", "d", "A", None),
    (42, "DIVERT", "x" * 5000, "y" * 300, None),  # multi-digit length prefixes
]

# Pinned values: a change to the function (or its encoding) must fail here, on purpose.
GOLDEN: list[tuple[Hop, int]] = [
    ((123, "DIVERT", "divertAtoB", "B", None), 6563673781275104526),
    ((456, "DEAD_LETTER", "X", "DLA", None), 7224815322612556170),
    ((1, "EXPIRY", "Q", "EXP", None), 8288262863436280041),
    ((1, "MOVE", "queue0", "A1", "queue1"), 5368066397783320778),
    ((789, "RETRY", "DLQ", "forwardingAddress", "forwardingQueue"), 7463236896107203102),
    ((7, "DEAD_LETTER", None, "DLA", None), 5259849448844736969),
    ((0, "DIVERT", "", "", None), 5703218721274978292),
    ((INT64_MAX, "DIVERT", "zürich:|", "日本", None), 7089123501005102116),
]


def _ids(spark: SparkSession, hops: list[Hop]) -> list[int | None]:
    df = spark.createDataFrame(list(enumerate(hops)), f"i int, h struct<{SCHEMA}>").select(
        "i", "h.*"
    )
    rows = df.select("i", copy_id("parent", "reason", "left", "address", "queue").alias("id"))
    return [r.id for r in sorted(rows.collect())]


def _plan(df: DataFrame) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_spark_equals_python_on_varied_rows(spark):
    assert _ids(spark, VARIED) == [copy_id_py(*hop) for hop in VARIED]


def test_golden_values_python_and_spark(spark):
    hops = [hop for hop, _ in GOLDEN]
    expected = [value for _, value in GOLDEN]
    assert [copy_id_py(*hop) for hop in hops] == expected
    assert _ids(spark, hops) == expected


def test_encoding_is_the_documented_one():
    """Recompute the docstring's example by hand: prefix, length-prefixed parts, '-' for null."""
    message = b"copy-id/v1|" + b"3:123" + b"6:DIVERT" + b"10:divertAtoB" + b"1:B" + b"-"
    x = int.from_bytes(hashlib.sha256(message).digest()[:8], "big")
    assert copy_id_py(123, "DIVERT", "divertAtoB", "B", None) == (1 << 62) + (x % (1 << 62))
    # byte lengths, not character lengths
    message = b"copy-id/v1|1:76:EXPIRY" + b"7:z\xc3\xbcrich" + b"1:E" + b"-"
    x = int.from_bytes(hashlib.sha256(message).digest()[:8], "big")
    assert copy_id_py(7, "EXPIRY", "zürich", "E", None) == (1 << 62) + (x % (1 << 62))


def test_every_hop_kind_of_one_parent_is_distinct():
    parent = 1234
    hops: list[Hop] = [
        (parent, "DIVERT", "d1", "B", None),
        (parent, "DIVERT", "d2", "B", None),
        (parent, "DIVERT", "d1", "C", None),  # composite forwarding address
        (parent, "DEAD_LETTER", "q", "DLA", None),
        (parent, "DEAD_LETTER", None, "DLA", None),  # send-to-dla-on-no-route
        (parent, "DEAD_LETTER", "", "DLA", None),
        (parent, "EXPIRY", "q", "EXP", None),
        (parent, "EXPIRY", "q2", "EXP", None),
        (parent, "MOVE", "q", "A", "q2"),
        (parent, "MOVE", "q", "A", "q3"),
        (parent, "MOVE", "q", "A", None),
        (parent, "RETRY", "q", "A", "q2"),
        (parent, "RETRY", "q", "A", ""),
        # the same text split differently must not collide
        (parent, "MOVE", "ab", "c", "d"),
        (parent, "MOVE", "a", "bc", "d"),
        (parent, "MOVE", "a", "b", "cd"),
        (parent + 1, "MOVE", "a", "b", "cd"),
        (12, "MOVE", "34", "b", "cd"),
    ]
    ids = [copy_id_py(*hop) for hop in hops]
    assert len(set(ids)) == len(ids)


def test_range_and_is_copy_id(spark):
    ids = [copy_id_py(*hop) for hop in VARIED]
    assert all(COPY_ID_BASE <= i <= INT64_MAX for i in ids)
    rows = [(i,) for i in [*ids, 0, 1, COPY_ID_BASE - 1, None]]
    got = spark.createDataFrame(rows, "id long").select(is_copy_id("id").alias("c")).collect()
    assert [r.c for r in got] == [True] * len(ids) + [False, False, False, None]


def test_column_version_is_native_spark(spark):
    df = spark.createDataFrame([VARIED[0]], SCHEMA).select(
        copy_id(F.col("parent"), F.lit("DIVERT"), "left", F.col("address"), F.lit(None))
    )
    plan = _plan(df)
    assert "Python" not in plan and "ArrowEval" not in plan, plan


def test_null_required_component_gives_null_id_in_spark(spark):
    df = spark.createDataFrame(
        [
            (None, "DIVERT", "d", "A", None),
            (1, None, "d", "A", None),
            (1, "DIVERT", "d", None, None),
        ],
        SCHEMA,
    )
    got = df.select(copy_id("parent", "reason", "left", "address", "queue").alias("id")).collect()
    assert [r.id for r in got] == [None, None, None]


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((True, "DIVERT", "d", "A", None), TypeError, "parent_id: expected an int"),
        (("1", "DIVERT", "d", "A", None), TypeError, "parent_id: expected an int"),
        ((1 << 63, "DIVERT", "d", "A", None), ValueError, "parent_id: expected an int64"),
        ((1, None, "d", "A", None), TypeError, "reason: expected a str, found None"),
        ((1, "DIVERT", "d", None, None), TypeError, "target_address: expected a str"),
        ((1, "DIVERT", 5, "A", None), TypeError, "left: expected a str or None, found int"),
    ],
)
def test_python_reference_rejects_bad_arguments(args, error, match):
    with pytest.raises(error, match=match):
        copy_id_py(*args)


_names = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["", "-", ":", "|", "1:a"]))


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.integers(INT64_MIN, INT64_MAX),
            st.sampled_from(REASONS),
            _names,
            st.text(max_size=12),
            _names,
        ),
        min_size=1,
        max_size=60,
    )
)
def test_spark_equals_python_property(spark, hops):
    hops = [h for h in hops if all(_encodable(v) for v in h[1:])]
    if hops:
        assert _ids(spark, hops) == [copy_id_py(*hop) for hop in hops]


def _encodable(value: object) -> bool:
    """Names are valid UTF-8 in the lake; lone surrogates cannot be stored at all."""
    try:
        if isinstance(value, str):
            value.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False
