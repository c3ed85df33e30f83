"""Breadcrumbs (SPEC §5.5): the Arrow UDF, the Python reference and the native version agree.

Maps go into Spark as ordered entry lists (``map_from_entries``) and come back
as ``map_entries``, so key order is checked too, not only the contents.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from routing.plan.breadcrumbs import (
    HISTORY_NAMES,
    ORIG_ADDRESS,
    ORIG_MESSAGE_ID,
    ORIG_QUEUE,
    ORIG_ROUTING_TYPE,
    breadcrumb_types_native,
    breadcrumb_types_py,
    rebuild_breadcrumbs,
    rebuild_breadcrumbs_native,
    rebuild_breadcrumbs_py,
    rebuild_typed_breadcrumbs,
)
from routing.plan.breadcrumbs import _rebuild_arrow as rebuild_arrow_batch

A, Q, M, RT = ORIG_ADDRESS, ORIG_QUEUE, ORIG_MESSAGE_ID, ORIG_ROUTING_TYPE
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
STRING = pa.string()
IMPLS = {"udf": rebuild_breadcrumbs, "native": rebuild_breadcrumbs_native}

Props = dict[str, str | None]
Hop = tuple[str, str | None, int, str | None]  # orig address, queue, message id, routing type
Entries = list[tuple[str, str | None]]

INPUT_SCHEMA = (
    "i int, entries array<struct<key:string,value:string>>, "
    "address string, queue string, message_id long, routing_type string"
)

SEED_DLA_COPY: Props = {  # the seed's example: 123 on A, divertAtoB -> B (456), queue X -> DLA
    A: "B",
    Q: "X",
    M: "456",
    f"{A}_0": "A",
    f"{Q}_0": "divertAtoB",
    f"{M}_0": "123",
}

# (case, properties (None = null map), hop, expected properties)
CASES: list[tuple[str, Props | None, Hop, Props]] = [
    (
        "first hop: divert of a producer's message",
        {"k": "v"},
        ("A", "divertAtoB", 123, None),
        {"k": "v", A: "A", Q: "divertAtoB", M: "123"},
    ),
    (
        "second hop: the seed's dead letter",
        {"k": "v", A: "A", Q: "divertAtoB", M: "123"},
        ("B", "X", 456, None),
        {"k": "v", **SEED_DLA_COPY},
    ),
    (
        "third hop: retry from the DLQ adds _1",
        dict(SEED_DLA_COPY),
        ("DLA", "DLQ", 789, None),
        {
            A: "DLA",
            Q: "DLQ",
            M: "789",
            f"{A}_0": "A",
            f"{Q}_0": "divertAtoB",
            f"{M}_0": "123",
            f"{A}_1": "B",
            f"{Q}_1": "X",
            f"{M}_1": "456",
        },
    ),
    (
        "gaps: the lowest unused number, per name",
        {Q: "q", f"{Q}_0": "a", f"{Q}_2": "c", A: "x", f"{A}_1": "y", M: "9", f"{M}_0": "8"},
        ("B", "X", 10, None),
        {
            f"{Q}_0": "a",
            f"{Q}_2": "c",
            f"{A}_1": "y",
            f"{M}_0": "8",
            f"{Q}_1": "q",
            f"{A}_0": "x",
            f"{M}_1": "9",
            A: "B",
            Q: "X",
            M: "10",
        },
    ),
    (
        "non-canonical suffixes do not count and are copied unchanged",
        {
            Q: "q",
            f"{Q}_01": "leading zero",
            f"{Q}_x": "x",
            f"{Q}_-1": "minus",
            f"{Q}_+1": "plus",
            f"{Q}_\u0660": "arabic-indic zero",
            f"{Q}_0 ": "trailing space",
            f"{Q}_0\n": "trailing newline",
            f"{Q.lower()}_0": "lower case",
            f"{Q}__0": "double underscore",
            f"{RT}_0": "routing type has no history",
        },
        ("B", "X", 1, None),
        {
            f"{Q}_01": "leading zero",
            f"{Q}_x": "x",
            f"{Q}_-1": "minus",
            f"{Q}_+1": "plus",
            f"{Q}_\u0660": "arabic-indic zero",
            f"{Q}_0 ": "trailing space",
            f"{Q}_0\n": "trailing newline",
            f"{Q.lower()}_0": "lower case",
            f"{Q}__0": "double underscore",
            f"{RT}_0": "routing type has no history",
            f"{Q}_0": "q",
            A: "B",
            Q: "X",
            M: "1",
        },
    ),
    (
        "a huge canonical suffix is used but does not matter",
        {Q: "q", f"{Q}_99999999999999999999": "big", f"{Q}_0": "zero"},
        ("B", "X", 1, None),
        {
            f"{Q}_99999999999999999999": "big",
            f"{Q}_0": "zero",
            f"{Q}_1": "q",
            A: "B",
            Q: "X",
            M: "1",
        },
    ),
    (
        "null orig_queue (send-to-dla-on-no-route): the old queue still moves",
        {A: "A", Q: "q", M: "1"},
        ("B", None, 2, None),
        {f"{A}_0": "A", f"{Q}_0": "q", f"{M}_0": "1", A: "B", M: "2"},
    ),
    (
        "null orig_queue on a producer's message: no queue at all",
        {"k": "v"},
        ("B", None, 2, "ANYCAST"),
        {"k": "v", A: "B", M: "2", RT: "ANYCAST"},
    ),
    (
        "routing type is replaced when set, without history",
        {RT: "MULTICAST", "k": "v"},
        ("B", "X", 1, "ANYCAST"),
        {"k": "v", A: "B", Q: "X", M: "1", RT: "ANYCAST"},
    ),
    (
        "routing type is kept when the copied message has none",
        {RT: "MULTICAST", "k": "v"},
        ("B", "X", 1, None),
        {RT: "MULTICAST", "k": "v", A: "B", Q: "X", M: "1"},
    ),
    (
        "other properties are untouched, null values included",
        {
            "_AMQ_ACTUAL_EXPIRY": "1767225601000",
            "zürich": "日本",
            "a:b|c": "",
            "nullable": None,
            "_AMQ_ORIG_ADDRESSX": "not ours",
            A: "A",
        },
        ("B", "X", 1, None),
        {
            "_AMQ_ACTUAL_EXPIRY": "1767225601000",
            "zürich": "日本",
            "a:b|c": "",
            "nullable": None,
            "_AMQ_ORIG_ADDRESSX": "not ours",
            f"{A}_0": "A",
            A: "B",
            Q: "X",
            M: "1",
        },
    ),
    (
        "a present name with a null value moves as null",
        {A: None, Q: "q"},
        ("B", "X", 1, None),
        {f"{A}_0": None, f"{Q}_0": "q", A: "B", Q: "X", M: "1"},
    ),
    ("null map counts as empty", None, ("B", "X", 1, None), {A: "B", Q: "X", M: "1"}),
    ("empty map", {}, ("", "", 0, ""), {A: "", Q: "", M: "0", RT: ""}),
    (
        "message ids are written in decimal, any int64",
        {M: str(INT64_MAX)},
        ("B", "X", INT64_MIN, None),
        {f"{M}_0": str(INT64_MAX), A: "B", Q: "X", M: str(INT64_MIN)},
    ),
]


def _entries(props: Props | None) -> Entries | None:
    return None if props is None else list(props.items())


def _frame(spark: SparkSession, rows: list[tuple[Props | None, Hop]]) -> DataFrame:
    data = [(i, _entries(p), *hop) for i, (p, hop) in enumerate(rows)]
    df = spark.createDataFrame(data, INPUT_SCHEMA)
    return df.withColumn("properties", F.map_from_entries("entries")).drop("entries")


def _apply(df: DataFrame, impl: Any) -> Column:
    return impl("properties", "address", "queue", "message_id", "routing_type")


def _rebuilt(
    spark: SparkSession, rows: list[tuple[Props | None, Hop]], impls: tuple[str, ...] = tuple(IMPLS)
) -> list[dict[str, Entries]]:
    """Per input row: the entries from each implementation asked for, in order."""
    df = _frame(spark, rows).coalesce(1)  # tiny inputs: one task, one Python worker
    out = df.select("i", *[F.map_entries(_apply(df, IMPLS[name])).alias(name) for name in impls])
    result = sorted(out.collect())
    return [{name: [(e.key, e.value) for e in r[name]] for name in impls} for r in result]


@pytest.mark.parametrize(("case", "props", "hop", "expected"), CASES, ids=[c[0] for c in CASES])
def test_rule_python_reference(case, props, hop, expected):
    got = rebuild_breadcrumbs_py(props, *hop)
    assert got == expected
    assert list(got.items()) == _ordered(props, hop, expected)


def _ordered(props: Props | None, hop: Hop, expected: Props) -> Entries:
    """The documented key order: untouched keys, moved keys (A, Q, M), new keys (A, Q, M, RT)."""
    old = props or {}
    replaced = {*HISTORY_NAMES, *([RT] if hop[3] is not None else [])}
    kept = [(k, v) for k, v in old.items() if k not in replaced]
    moved = [
        (k, expected[k])
        for name in HISTORY_NAMES
        for k in expected
        if k.startswith(f"{name}_") and k not in old
    ]
    new = [
        (k, expected[k]) for k in (A, Q, M, RT) if k in expected and (k, expected[k]) not in kept
    ]
    return kept + moved + new


@pytest.mark.parametrize("impl", list(IMPLS))
def test_rule_in_spark(spark, impl):
    df = _frame(spark, [(p, hop) for _, p, hop, _ in CASES])
    actual = df.select("i", _apply(df, IMPLS[impl]).alias("properties")).orderBy("i")
    expected = spark.createDataFrame(
        [(i, e) for i, (_, _, _, e) in enumerate(CASES)], "i int, properties map<string,string>"
    ).orderBy("i")
    # Rows in `i` order on both sides (chispa's ignore_row_order would sort by the maps).
    assert_df_equality(actual, expected, ignore_nullable=True)


def test_key_order_in_spark_matches_the_reference(spark):
    rows = [(p, hop) for _, p, hop, _ in CASES]
    for (props, hop), got in zip(rows, _rebuilt(spark, rows), strict=True):
        ref = list(rebuild_breadcrumbs_py(props, *hop).items())
        assert got["udf"] == ref
        assert got["native"] == ref


def test_udf_handles_many_rows_and_batches(spark):
    """Several Arrow batches and partitions, with null maps mixed in."""
    rows = 25_000  # two partitions of 12,500: two Arrow batches each (10,000 per batch)
    df = spark.range(0, rows, 1, 2).select(
        F.col("id").cast("int").alias("i"),
        F.when(
            F.col("id") % 7 != 0,
            F.create_map(
                F.lit("k"),
                F.col("id").cast("string"),
                F.lit(A),
                F.lit("a"),
                F.lit(f"{A}_0"),
                F.lit("older"),
            ),
        ).alias("properties"),
        F.lit("B").alias("address"),
        F.when(F.col("id") % 2 == 0, F.lit("X")).alias("queue"),
        F.col("id").alias("message_id"),
        F.lit(None).cast("string").alias("routing_type"),
    )
    udf = F.map_entries(_apply(df, rebuild_breadcrumbs))
    native = F.map_entries(_apply(df, rebuild_breadcrumbs_native))
    assert df.where(udf != native).count() == 0


def _arrow_batch(
    rows: list[tuple[Props | None, Hop]], string: pa.DataType = STRING
) -> list[pa.Array]:
    return [
        pa.array([_entries(p) for p, _ in rows], pa.map_(string, string)),
        pa.array([h[0] for _, h in rows], string),
        pa.array([h[1] for _, h in rows], string),
        pa.array([h[2] for _, h in rows], pa.int64()),
        pa.array([h[3] for _, h in rows], string),
    ]


def _as_entries(out: pa.Array) -> list[Entries]:
    return [list(m) for m in out.to_pylist()]


@pytest.mark.parametrize("string", [pa.string(), pa.large_string()], ids=str)
@pytest.mark.parametrize("part", [slice(0, None), slice(3, 9), slice(5, 5)], ids=str)
def test_arrow_kernel_on_slices_and_string_types(string, part):
    """The kernel reads offsets relative to the child arrays: slices (offset != 0) work."""
    rows = [(p, hop) for _, p, hop, _ in CASES]
    batch = [column[part] for column in _arrow_batch(rows, string)]
    out = rebuild_arrow_batch(*batch)
    assert out.type == pa.map_(string, string)
    assert _as_entries(out) == [
        list(rebuild_breadcrumbs_py(p, *hop).items()) for p, hop in rows[part]
    ]


def test_arrow_kernel_ignores_entries_behind_a_null_map():
    """Arrow lets a null list slot span child entries; they must not leak into the copy."""
    props = pa.MapArray.from_arrays(
        pa.array([0, 1, 3, 4], pa.int32()),
        pa.array(["k", A, f"{Q}_0", A]),
        pa.array(["v", "hidden", "hidden", "a"]),
        mask=pa.array([False, True, False]),
    )
    hops: list[Hop] = [("X", "q", 1, None), ("Y", None, 2, None), ("Z", "r", 3, None)]
    out = rebuild_arrow_batch(props, *_arrow_batch([(None, h) for h in hops])[1:])
    assert _as_entries(out) == [
        list(rebuild_breadcrumbs_py(p, *h).items())
        for p, h in zip([{"k": "v"}, None, {A: "a"}], hops, strict=True)
    ]


# ---------------------------------------------------------------------------------------
# Property-based: chains of hops

_LOOK_ALIKES = [
    f"{Q}_01",
    f"{A}_x",
    f"{M}_-1",
    f"{A}_0\n",
    f"{RT}_0",
    "_AMQ_ORIG_",
    "_AMQ_ACTUAL_EXPIRY",
    f"{Q.lower()}_0",
]
_CANONICAL = [f"{name}_{n}" for name in HISTORY_NAMES for n in range(6)] + list(HISTORY_NAMES)
_CANONICAL_RE = re.compile(r"_AMQ_ORIG_(ADDRESS|QUEUE|MESSAGE_ID)(_(0|[1-9][0-9]*))?")

_text = st.text(st.characters(codec="utf-8"), max_size=6)
_value = st.one_of(st.none(), _text)
_app_key = st.one_of(_text, st.sampled_from(_LOOK_ALIKES)).filter(
    lambda k: not _CANONICAL_RE.fullmatch(k)
)
_routing_type = st.sampled_from([None, "ANYCAST", "MULTICAST"])
_hop = st.tuples(
    _text, st.one_of(st.none(), _text), st.integers(INT64_MIN, INT64_MAX), _routing_type
)


@st.composite
def _chain(draw: st.DrawFn, max_hops: int = 30) -> tuple[Props, bool, list[Hop]]:
    """Initial properties (clean: no breadcrumbs yet; dirty: stray ones), then 0..max hops."""
    props = draw(st.dictionaries(_app_key, _value, max_size=5))
    if draw(st.booleans()):
        props[RT] = draw(_routing_type.filter(lambda t: t is not None))
    clean = draw(st.booleans())
    if not clean:
        props.update(draw(st.dictionaries(st.sampled_from(_CANONICAL), _value, max_size=6)))
    return props, clean, draw(st.lists(_hop, max_size=max_hops))


def _expected_after(props: Props, hops: list[Hop]) -> Props:
    """Oracle for a clean chain, built from the hop list, not from the rule.

    Every earlier value of each name is kept exactly once, ``_0`` oldest ...
    unsuffixed latest; the queue history skips hops without a queue.
    """
    out: Props = {k: v for k, v in props.items() if k != RT}
    histories = {
        A: [h[0] for h in hops],
        Q: [h[1] for h in hops if h[1] is not None],
        M: [str(h[2]) for h in hops],
    }
    for name, values in histories.items():
        has_latest = bool(hops) and (name != Q or hops[-1][1] is not None)
        older = values[:-1] if has_latest else values
        out.update({f"{name}_{n}": v for n, v in enumerate(older)})
        if has_latest:
            out[name] = values[-1]
    types = [h[3] for h in hops if h[3] is not None]
    if types:
        out[RT] = types[-1]
    elif RT in props:
        out[RT] = props[RT]
    return out


def _reference_chain(props: Props, hops: list[Hop]) -> list[Props]:
    states = [props]
    for hop in hops:
        states.append(rebuild_breadcrumbs_py(states[-1], *hop))
    return states


@settings(max_examples=300, deadline=None)
@given(_chain())
def test_reference_keeps_every_earlier_value_once_in_order(chain):
    props, clean, hops = chain
    final = _reference_chain(props, hops)[-1]
    if clean:
        assert final == _expected_after(props, hops)
    # Whatever the start: nothing is lost, every old value is still somewhere.
    for name in HISTORY_NAMES:
        if name in props:
            suffixed = {k: v for k, v in final.items() if k.startswith(f"{name}_")}
            assert props[name] in suffixed.values() or (hops == [] and final[name] == props[name])


@settings(max_examples=150, deadline=None)
@given(st.lists(_chain(max_hops=6), min_size=1, max_size=6))
def test_arrow_kernel_equals_reference_without_spark(chains):
    """Many cheap examples for the vectorized kernel alone, every step of every chain."""
    steps: list[tuple[Props | None, Hop]] = []
    for props, _clean, hops in chains:
        states = _reference_chain(props, hops)
        steps += list(zip(states[:-1], hops, strict=True))
    if steps:
        out = rebuild_arrow_batch(*_arrow_batch(steps))
        assert _as_entries(out) == [
            list(rebuild_breadcrumbs_py(p, *hop).items()) for p, hop in steps
        ]


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(_chain(), min_size=1, max_size=8))
def test_every_step_udf_equals_reference_and_native(spark, chains):
    """Every (state, hop) step of many chains in one DataFrame: one Spark job per example.

    Each step's input is the reference's state; since each step agrees, whole
    chains agree by induction (the next test also runs them hop by hop).
    """
    steps: list[tuple[Props | None, Hop]] = []
    for props, _clean, hops in chains:
        states = _reference_chain(props, hops)
        steps += list(zip(states[:-1], hops, strict=True))
    if not steps:
        return
    for (state, hop), got in zip(steps, _rebuilt(spark, steps), strict=True):
        ref = list(rebuild_breadcrumbs_py(state, *hop).items())
        assert got["udf"] == ref, (state, hop)
        assert got["native"] == ref, (state, hop)


@st.composite
def _chain_batch(draw: st.DrawFn) -> list[tuple[Props, bool, list[Hop]]]:
    """Many chains, and one that takes the full 30 hops."""
    chains = draw(st.lists(_chain(), min_size=5, max_size=40))
    props, clean, _ = draw(_chain(max_hops=0))
    chains.append((props, clean, draw(st.lists(_hop, min_size=30, max_size=30))))
    return chains


@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(_chain_batch())
def test_chains_hop_by_hop_through_the_udf(spark, chains):
    """All chains advance together, one DataFrame per hop, the UDF's output feeding the next.

    UDF only (one Spark job per hop is the cost here); the native version is
    checked against it on every step by the test above.
    """
    states: list[Props] = [dict(props) for props, _, _ in chains]
    for k in range(max(len(hops) for _, _, hops in chains)):
        live = [c for c, (_, _, hops) in enumerate(chains) if k < len(hops)]
        rows = [(states[c], chains[c][2][k]) for c in live]
        for c, (state, hop), got in zip(live, rows, _rebuilt(spark, rows, ("udf",)), strict=True):
            assert got["udf"] == list(rebuild_breadcrumbs_py(state, *hop).items()), (k, state, hop)
            states[c] = dict(got["udf"])
    for (props, clean, hops), final in zip(chains, states, strict=True):
        if clean:
            assert final == _expected_after(props, hops)


# --------------------------------------------------------------------------------------
# Property types of a copy (SPEC §3.1): breadcrumbs typed, moved values keep their type
# --------------------------------------------------------------------------------------


def test_types_follow_the_history_and_type_the_new_breadcrumbs():
    """A typed ``_AMQ_ORIG_MESSAGE_ID`` (``long``) moves to ``_0`` with its type; an untyped
    ``_AMQ_ORIG_ADDRESS`` moves untyped; the new breadcrumbs are ``string`` and ``long``; an
    application property keeps its own; a replaced ``_AMQ_ORIG_ROUTING_TYPE`` is a string."""
    props = {A: "a", M: "1", RT: "ANYCAST", "n": "7", "s": "x"}
    types = {M: "long", RT: "byte", "n": "integer"}
    rebuilt = rebuild_breadcrumbs_py(props, "b", "q", 2, "MULTICAST")
    assert breadcrumb_types_py(props, types, rebuilt, "MULTICAST") == {
        "n": "integer",
        f"{M}_0": "long",
        A: "string",
        Q: "string",
        M: "long",
        RT: "string",
    }
    kept = rebuild_breadcrumbs_py(props, "b", None, 2, None)  # send-to-dla-on-no-route
    assert breadcrumb_types_py(props, types, kept, None) == {
        "n": "integer",
        RT: "byte",
        f"{M}_0": "long",
        A: "string",
        M: "long",
    }


_TYPED_CASES = st.lists(
    st.tuples(
        _chain(max_hops=1),
        st.one_of(
            st.none(),
            st.dictionaries(
                st.sampled_from([A, Q, M, RT, f"{A}_0", "n", "x"]),
                st.sampled_from([None, "long", "string", "short"]),
            ),
        ),
    ),
    min_size=1,
    max_size=12,
)


def _typed_steps(cases: list[Any]) -> list[tuple[Props | None, Props | None, Hop]]:
    return [
        (props, types, hops[0] if hops else ("a", "q", 1, None))
        for (props, _, hops), types in cases
    ]


@settings(max_examples=150, deadline=None)
@given(_TYPED_CASES)
def test_arrow_kernel_types_equal_the_reference_without_spark(cases):
    """The kernel's types (:func:`rebuild_typed_breadcrumbs`' pass) equal
    :func:`breadcrumb_types_py`, over the rebuilt maps equal to the reference's."""
    steps = _typed_steps(cases)
    batch = _arrow_batch([(props, hop) for props, _, hop in steps])
    types = pa.array([_entries(t) for _, t, _ in steps], pa.map_(STRING, STRING))
    rebuilt, typed = rebuild_arrow_batch(*batch, types)
    for (props, kinds, hop), found, found_types in zip(
        steps, _as_entries(rebuilt), typed.to_pylist(), strict=True
    ):
        expected = rebuild_breadcrumbs_py(props, *hop)
        assert found == list(expected.items())
        assert dict(found_types) == breadcrumb_types_py(props, kinds, expected, hop[3])


def test_arrow_kernel_types_ignore_entries_behind_a_null_map():
    """A null types map spanning child entries types nothing; a sliced batch reads right."""
    types = pa.MapArray.from_arrays(
        pa.array([0, 1, 2, 3], pa.int32()),
        pa.array(["k", "k", "k"]),
        pa.array(["long", "short", "string"]),
        mask=pa.array([False, True, False]),
    )
    props = pa.array([[("k", "1")]] * 3, pa.map_(STRING, STRING))
    hops = _arrow_batch([(None, ("X", "q", i, None)) for i in range(3)])[1:]
    _, typed = rebuild_arrow_batch(props, *hops, types)
    assert [dict(t).get("k") for t in typed.to_pylist()] == ["long", None, "string"]
    _, tail = rebuild_arrow_batch(props[1:], *[h[1:] for h in hops], types[1:])
    assert [dict(t).get("k") for t in tail.to_pylist()] == [None, "string"]


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(_TYPED_CASES)
def test_types_in_spark_equal_the_reference(spark, cases):
    """:func:`rebuild_typed_breadcrumbs` (the job's) and :func:`breadcrumb_types_native`
    over the rebuilt maps equal :func:`breadcrumb_types_py`."""
    steps = _typed_steps(cases)
    rows = [
        (_entries(props), _entries(types), _entries(rebuild_breadcrumbs_py(props, *hop)), *hop)
        for props, types, hop in steps
    ]
    frame = spark.createDataFrame(
        rows,
        "p array<struct<k:string,v:string>>, t array<struct<k:string,v:string>>, "
        "r array<struct<k:string,v:string>>, address string, queue string, id long, rt string",
    ).select(
        *[F.map_from_entries(c).alias(c) for c in ("p", "t", "r")],
        "address",
        "queue",
        "id",
        "rt",
        F.monotonically_increasing_id().alias("i"),
    )
    typed = rebuild_typed_breadcrumbs("p", "t", "address", "queue", "id", "rt")
    got = frame.select(
        "i",
        F.map_entries(breadcrumb_types_native("p", "t", "r", "rt")).alias("native"),
        F.map_entries(typed["properties"]).alias("rebuilt"),
        F.map_entries(typed["property_types"]).alias("udf"),
    )
    found = sorted(got.collect(), key=lambda r: r.i)
    for (props, types, hop), row in zip(steps, found, strict=True):
        rebuilt = rebuild_breadcrumbs_py(props, *hop)
        expected = breadcrumb_types_py(props, types, rebuilt, hop[3])
        assert [(e["key"], e["value"]) for e in row.rebuilt] == list(rebuilt.items())
        for impl in ("native", "udf"):
            assert {e["key"]: e["value"] for e in row[impl]} == expected, (impl, props, types)
