"""Input rows as the SPEC types in Spark expressions (routing.plan.normalise).

Each table is written as a producer would (pyarrow to Parquet, the producer's own types)
and read as the job reads it: Spark's Parquet reader plus the position columns.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from routing.io.lake_events import row_checks
from routing.plan import schemas
from routing.plan.normalise import EVENT_SCHEMA, normalise, py_repr, untyped_property
from tests.frames import assert_rows_equal
from tests.gateway import sent_commands

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
T0 = dt.datetime(2026, 1, 1, tzinfo=UTC)
VERSION = 3


def read(spark, tmp_path: Path, table: pa.Table) -> tuple[DataFrame, str]:
    """The rows of ``table`` as the job reads them, and the file's path as Spark names it."""
    path = tmp_path / "part-00000.parquet"
    pq.write_table(table, path)
    rows = spark.read.parquet(str(path)).withColumns(
        {
            "_version": F.lit(VERSION).cast("long"),
            "_file": F.col("_metadata.file_path"),
            "_row": F.col("_metadata.row_index"),
        }
    )
    return rows, f"file:{path}"


def events(spark, rows: list[dict]) -> DataFrame:
    """EVENT rows; columns not given are null."""
    return spark.createDataFrame(
        [tuple(r.get(n) for n in EVENT_SCHEMA.names) for r in rows], EVENT_SCHEMA
    )


def by_row(frame: DataFrame) -> list[Row]:
    return frame.orderBy("row").collect()


def micros(moment: dt.datetime | None) -> int | None:
    return None if moment is None else (moment - EPOCH) // dt.timedelta(microseconds=1)


def python_time(text: str) -> int | None:
    """The rule the Python reader applied (``lake_events.coerce``), in exact arithmetic."""
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return micros(moment) if moment.tzinfo is not None else None


TYPED_CASES = [
    # (properties, property_types, reason or None)
    ({"n": "7", "s": "x"}, {"n": "long", "s": "string"}, None),
    ({"f": "TRUE", "d": "1.0E20", "g": "NaN", "h": "-Infinity"}, None, None),
    ({"f": "TRUE", "d": "1.0E20", "g": "NaN"}, {"f": "boolean", "d": "double", "g": "float"}, None),
    ({"n": "-128", "m": "32767", "k": "+5"}, {"n": "byte", "m": "short", "k": "integer"}, None),
    ({"n": "7"}, {"n": None}, None),  # a null type: untyped
    ({"n": None}, {"n": "long"}, None),  # a typed null
    (
        {"n": "7x"},
        {"n": "long"},
        "property_types: 'n' is typed long but its value '7x' does not read as one",
    ),
    (
        {"n": "128"},
        {"n": "byte"},
        "property_types: 'n' is typed byte but its value '128' does not read as one",
    ),
    ({"n": "2147483648"}, {"n": "integer"}, "its value '2147483648' does not read as one"),
    # the bounds, and leading zeros, which make a text long without making it large
    ({"n": "9223372036854775807", "m": "-9223372036854775808"}, {"n": "long", "m": "long"}, None),
    ({"n": "+0000000000000000000000001", "m": "-000127"}, {"n": "long", "m": "byte"}, None),
    ({"n": "9223372036854775808"}, {"n": "long"}, "its value '9223372036854775808' does not"),
    ({"n": "-000129"}, {"n": "byte"}, "its value '-000129' does not read as one"),
    (
        {"b": "yes"},
        {"b": "boolean"},
        "property_types: 'b' is typed boolean but its value 'yes' does not",
    ),
    ({"d": "1,5"}, {"d": "double"}, "'d' is typed double but its value '1,5' does not read as one"),
    (
        {"n": "1"},
        {"n": "int"},
        "property_types: unknown type 'int' of 'n'; expected one of boolean,",
    ),
    # the first entry by key names the reason
    ({"n": "1"}, {"b": "int", "a": "long"}, "'a' is typed long but the message has no such"),
    ({"n": "1"}, {"m": "long"}, "property_types: 'm' is typed long but the message has no such"),
    # more entries than are checked one by one: the rest of the row is checked all the same
    (
        {k: "1" for k in "abcdef"},
        {**{k: "long" for k in "abcde"}, "f": "byte"},
        None,
    ),
    (
        {**{k: "1" for k in "abcde"}, "f": "x"},
        {**{k: "long" for k in "abcde"}, "f": "byte"},
        "property_types: 'f' is typed byte but its value 'x' does not read as one",
    ),
    ({"b": "s", "d": "x"}, {"a": None, "b": "string", "c": None, "d": "long"}, "'d' is typed long"),
    # names and values quoted as Python's repr quotes them
    ({}, {"it's": "long"}, 'property_types: "it\'s" is typed long but the message has no such'),
    ({}, {"it's \"\\": "long"}, "property_types: 'it\\'s \"\\\\' is typed long"),
    (
        {"k": "\t\x00\u200b\xa0\u2028\U000e0001\U0001f600é"},
        {"k": "byte"},
        "value '\\t\\x00\\u200b\\xa0\\u2028\\U000e0001\U0001f600é' does not read as one",
    ),
    ({}, {"n": "lông"}, "property_types: unknown type 'lông' of 'n'; expected one of boolean,"),
    # key order is code points' (Spark's), not UTF-16's: U+FFFF comes before U+10000
    ({}, {"\U00010000": "long", "\uffff": "long"}, "property_types: '\\uffff' is typed long"),
    # no properties at all: only an unknown type is wrong
    (None, {"n": "long"}, None),
    (None, {"n": "long", "m": "int"}, "property_types: unknown type 'int' of 'm'"),
    # a name twice (a map Parquet holds as written): the entries in order of name, then type
    ({"n": "x"}, [("n", "long"), ("n", "byte")], "property_types: 'n' is typed byte but its"),
]


@pytest.mark.parametrize(("properties", "types", "reason"), TYPED_CASES)
def test_property_types_are_checked(spark, tmp_path, properties, types, reason):
    """A typed value must read as its type (SPEC §3.1); the first entry in key order that
    does not names the row's reason. The job's JVM function and the plain path (Spark's
    expressions) give the same reason, word for word."""
    table = pa.table(
        {
            "message_id": [1],
            "address": ["orders"],
            "sent_at": [T0],
            "properties": pa.array(
                [None if properties is None else list(properties.items())], schemas.STRING_MAP
            ),
            "property_types": pa.array(
                [list(types.items()) if isinstance(types, dict) else types],
                schemas.STRING_MAP,
            ),
        }
    )
    rows, _ = read(spark, tmp_path, table)
    (found,) = normalise(rows, "addresses/orders").select("error").collect()
    jvm = row_checks(spark)
    assert jvm is not None  # the job's jar is on the suite's classpath
    (checks,) = rows.select(
        jvm.property_types(F.col("properties"), F.col("property_types")),
        untyped_property(F.col("properties"), F.col("property_types")),
    ).collect()
    if reason is None:
        assert found.error is None
    else:
        assert found.error is not None and reason in found.error, found.error
    assert checks[0] == checks[1] == found.error


def test_a_well_typed_message_table_passes_through_unchanged(spark, tmp_path):
    sent = [T0, T0 + dt.timedelta(microseconds=1_500)]
    table = pa.table(
        {
            "message_id": [1, 2],
            "address": ["orders", "orders"],
            "routing_type": ["ANYCAST", None],
            "sent_at": sent,
            "expiration": [None, T0 + dt.timedelta(hours=1)],
            "priority": pa.array([4, None], pa.int32()),
            "durable": [True, None],
            "user_id": ["u", None],
            "properties": pa.array([[("k", "v"), ("n", "7")], None], schemas.STRING_MAP),
            "property_types": pa.array([[("n", "long")], None], schemas.STRING_MAP),
            "body": [b"\x00\x01", None],
            "copy_reason": [None, None],
            "to_queue": [None, None],
        },
        schema=schemas.MESSAGE,
    )
    rows, file = read(spark, tmp_path, table)

    actual = normalise(rows, "addresses/orders")

    assert [(f.name, f.dataType) for f in actual.schema.fields] == [
        (f.name, f.dataType) for f in EVENT_SCHEMA.fields
    ]
    position = {"source": "addresses/orders", "version": VERSION, "file": file}
    values = [{n: table.column(n)[i].as_py() for n in table.column_names} for i in range(2)]
    values[0]["properties"] = dict(values[0]["properties"])
    values[0]["property_types"] = dict(values[0]["property_types"])
    expected = events(spark, [{**position, "row": i, **v} for i, v in enumerate(values)])
    assert_df_equality(actual.orderBy("row"), expected.orderBy("row"), ignore_nullable=True)


def test_a_well_typed_table_is_passed_through_without_checks(spark, tmp_path, capsys):
    table = pa.table(
        {"queue": ["q"], "message_id": [1], "outcome": ["ACK"], "at": [T0]},
        schema=schemas.DELIVERY,
    )
    rows, _ = read(spark, tmp_path, table)

    normalise(rows, "deliveries").explain()

    plan = capsys.readouterr().out
    assert "CASE WHEN" not in plan and "regexp" not in plan, plan


def test_missing_optional_columns_become_null(spark, tmp_path):
    table = pa.table({"message_id": [7], "address": ["orders"], "sent_at": [T0]})
    rows, file = read(spark, tmp_path, table)

    actual = normalise(rows, "addresses/orders")

    expected = events(
        spark,
        [
            {
                "source": "addresses/orders",
                "version": VERSION,
                "file": file,
                "row": 0,
                "message_id": 7,
                "address": "orders",
                "sent_at": T0,
            }
        ],
    )
    assert_df_equality(actual, expected, ignore_nullable=True)


def test_a_timestamp_without_a_zone_is_rejected_with_the_row_as_written(spark, tmp_path):
    naive = T0.replace(tzinfo=None)
    table = pa.table(
        {
            "message_id": [1, 2],
            "address": ["orders", "orders"],
            "sent_at": pa.array([naive + dt.timedelta(milliseconds=250), None], pa.timestamp("us")),
            "expiration": pa.array([naive, naive], pa.timestamp("us")),
        }
    )
    rows, _ = read(spark, tmp_path, table)

    first, second = by_row(normalise(rows, "addresses/orders"))

    assert (first.sent_at, first.expiration) == (None, None)
    assert first.error == "sent_at: timestamp without a time zone"
    assert first.raw == (
        '{"address":"orders","expiration":"2026-01-01T00:00:00",'
        '"message_id":1,"sent_at":"2026-01-01T00:00:00.250000"}'
    )
    assert second.error == "expiration: timestamp without a time zone"


def test_a_table_read_again_reuses_its_columns(spark, tmp_path):
    """A job reads the same tables batch after batch: the second read of a table with the
    same schema builds no Column again: under a fifth of the py4j calls (the projections)."""
    table = pa.table(
        {
            "message_id": pa.array([1, 2], pa.int32()),
            "address": ["orders", "payments"],
            "sent_at": pa.array([T0, T0], pa.timestamp("us", tz="UTC")),
        }
    )
    rows, _ = read(spark, tmp_path, table)
    with sent_commands(spark) as first_time:
        first = normalise(rows, "addresses/orders")
    with sent_commands(spark) as again:
        second = normalise(rows, "addresses/orders")
    assert len(again) * 5 < len(first_time), (again, first_time)
    assert_rows_equal(second, first, ["row"])
    assert [r.error for r in by_row(second)] == [
        None,
        "address 'payments' does not belong in table addresses/orders",
    ]


def test_times_as_text_are_read_with_their_zone(spark, tmp_path):
    texts = [
        "2026-01-01T00:00:00Z",
        "2026-01-01T02:00:00+02:00",
        " 2026-01-01T00:00:00.5Z\n",
        "2026-01-01 00:00:00",
        "yesterday",
        None,
    ]
    table = pa.table(
        {
            "message_id": list(range(len(texts))),
            "address": ["orders"] * len(texts),
            "sent_at": texts,
        }
    )
    rows, _ = read(spark, tmp_path, table)

    got = by_row(
        normalise(rows, "addresses/orders").select(
            "row", F.unix_micros("sent_at").alias("sent_at"), "error"
        )
    )

    t0 = micros(T0)
    assert [(r.sent_at, r.error) for r in got] == [
        (t0, None),
        (t0, None),
        (t0 + 500_000, None),
        (None, "sent_at: '2026-01-01 00:00:00' is not a timestamp with a time zone"),
        (None, "sent_at: 'yesterday' is not a timestamp with a time zone"),
        (None, None),
    ]


ISO_TEXTS = [
    "2026-01-01T00:00:00Z",
    "2026-01-01 00:00:00+02:00",
    "2026-01-01T12:30:00-05:00",
    "20260101T000000Z",
    "2026-01-01T00:00:00.1234567891Z",
    "2026-01-01T00:00:00,5Z",
    "2026-01-01T00:00Z",
    "2026-01-01T00Z",
    "2026-01-01T00:00:00.Z",
    "2026-W01-1T00:00Z",
    "2026W011T00:00Z",
    "2020-W53-7T00Z",
    "2026-W53-1T00Z",
    "2026-01-01T00:00:00+0200",
    "2026-01-01T00:00:00+02:00:30.5",
    "2026-01-01T00:00:00+00:00:00.5",
    "2026-01-01T00:00:00+23:59",
    "2026-01-01T00:00:00+24:00",
    "2026-01-01",
    "2026-01-01Z",
    "2026-01-01T24:00:00Z",
    "2026-02-30T00:00:00Z",
    "0000-01-01T00:00:00Z",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59.999999-01:00",
    "2026-01-01ü00:00:00Z",
    "2026-01-01T00:00:00 Z",
    "2026-01-01T00:00:60Z",
    "2026-01-01T00:00:00ZZ",
    "2026-06-15t10:00:00z",
    "1969-12-31T23:59:59.5Z",
    "\u3000 2026-01-01T00:00:00Z\t",
    "9999-W52-6T00Z",
]


def iso_corpus(size: int, seed: int = 7) -> list[str]:
    """Hand-picked times and mutations of them (the grammar's corners)."""
    rng = random.Random(seed)
    alphabet = "0123456789:-+.,TZW zü"
    corpus = list(ISO_TEXTS)
    while len(corpus) < size:
        chars = list(rng.choice(ISO_TEXTS))
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(chars) + 1)
            if rng.random() < 0.4 and chars:
                del chars[min(i, len(chars) - 1)]
            else:
                chars.insert(i, rng.choice(alphabet))
        corpus.append("".join(chars))
    return corpus


def test_times_as_text_are_read_as_python_reads_them(spark, tmp_path):
    corpus = iso_corpus(600)
    table = pa.table(
        {
            "message_id": list(range(len(corpus))),
            "address": ["orders"] * len(corpus),
            "sent_at": corpus,
        }
    )
    rows, _ = read(spark, tmp_path, table)

    got = by_row(
        normalise(rows, "addresses/orders").select(
            "row", F.unix_micros("sent_at").alias("sent_at"), "error"
        )
    )

    expected = [
        (
            python_time(text),
            None
            if python_time(text) is not None
            else f"sent_at: {text!r} is not a timestamp with a time zone",
        )
        for text in corpus
    ]
    wrong = [
        (text, (r.sent_at, r.error), e)
        for text, r, e in zip(corpus, got, expected, strict=True)
        if (r.sent_at, r.error) != e
    ]
    assert not wrong, wrong[:10]
    assert sum(1 for e in expected if e[0] is not None) > 40  # the corpus reaches both ways


INTEGER_TEXTS = [
    "7",
    " 8 ",
    "+9",
    "-10",
    "1_000",
    "007",
    "١٢",
    "𝟘𝟙",
    "\u30001\u3000",
    "x",
    "1.0",
    "",
    "0x10",
    "1__0",
    "_1",
    "- 1",
    "9223372036854775807",
    "9223372036854775808",
    "it's",
    'say "hi"',
    "both ' and \"",
    "back\\slash",
    "tab\tnew\nline\r",
    "\x00\x1b\x7f\x80\xa0\xad",
    "\u200b\u2028\ue000\U000e0001",
    "zürich 😀",
]


def python_integer(text: str, name: str, low: int, high: int) -> tuple[int | None, str | None]:
    try:
        value = int(text.strip())
    except ValueError:
        return None, f"{name}: {text!r} is not an integer"
    if not low <= value <= high:
        return None, f"{name}: {text!r} is out of range"
    return value, None


def test_integers_as_text_are_read_as_python_reads_them(spark, tmp_path):
    n = len(INTEGER_TEXTS)
    table = pa.table(
        {
            "message_id": INTEGER_TEXTS,
            "address": ["orders"] * n,
            "sent_at": [T0] * n,
            "priority": ["99999999999", *[" 3"] * (n - 1)],
        }
    )
    rows, _ = read(spark, tmp_path, table)

    got = by_row(normalise(rows, "addresses/orders"))

    expected = [python_integer(text, "message_id", -(2**63), 2**63 - 1) for text in INTEGER_TEXTS]
    expected[0] = (7, "priority: '99999999999' is out of range")  # int32
    assert [(r.message_id, r.error) for r in got] == expected
    assert [r.message_id for r in got[:8]] == [7, 8, 9, -10, 1000, 7, 12, 1]
    assert [r.priority for r in got[:2]] == [None, 3]


def test_integers_out_of_range_are_rejected(spark, tmp_path):
    table = pa.table(
        {
            "message_id": pa.array([1, 2, 3, 4, 2**64 - 1, 6], pa.uint64()),
            "address": ["orders"] * 6,
            "sent_at": [T0] * 6,
            "priority": [5, 99999999999, -(2**31) - 1, 2**62 + 1, 1, None],
        }
    )
    rows, _ = read(spark, tmp_path, table)

    got = by_row(normalise(rows, "addresses/orders"))

    assert [(r.message_id, r.priority, r.error) for r in got] == [
        (1, 5, None),
        (2, None, "priority: 99999999999 is out of range"),
        (3, None, "priority: -2147483649 is out of range"),
        # the reason has always shown the value as a float
        (4, None, f"priority: {float(2**62 + 1):.0f} is out of range"),
        (None, 1, f"message_id: {float(2**64 - 1):.0f} is out of range"),
        (6, None, None),
    ]


def test_a_map_of_numbers_is_rejected(spark, tmp_path):
    table = pa.table(
        {
            "message_id": [1, 2],
            "address": ["orders", "orders"],
            "sent_at": [T0, T0],
            "properties": pa.array([[("n", 1), ("a", 2)], None], pa.map_(pa.string(), pa.int64())),
        }
    )
    rows, _ = read(spark, tmp_path, table)

    bad, good = by_row(normalise(rows, "addresses/orders"))

    assert bad.properties is None
    assert bad.error == "properties: map<string, int64> is not a map of strings to strings"
    assert '"properties":{"a":2,"n":1}' in bad.raw
    assert (good.error, good.raw) == (None, None)


def test_a_row_in_the_table_of_another_address_is_rejected(spark, tmp_path):
    addresses = ["orders", "payments", "", None, "a/b", "zürich"]
    n = len(addresses)
    table = pa.table({"message_id": list(range(n)), "address": addresses, "sent_at": [T0] * n})
    rows, _ = read(spark, tmp_path, table)

    def errors(source: str) -> list[str | None]:
        return [r.error for r in by_row(normalise(rows, source))]

    assert errors("addresses/orders") == [
        None,
        "address 'payments' does not belong in table addresses/orders",
        None,
        None,
        "address 'a/b' does not belong in table addresses/orders",
        "address 'zürich' does not belong in table addresses/orders",
    ]
    assert errors("addresses/a=2Fb")[4] is None
    assert errors("addresses/z=C3=BCrich")[5] is None
    # a folder that is no address's dir() holds no address's rows
    assert errors("addresses/zürich")[5] == (
        "address 'zürich' does not belong in table addresses/zürich"
    )


QUOTED = [
    "orders",
    "",
    "it's",
    'say "hi"',
    'it\'s "both" \\',
    "\t\n\r\x00\x1f\x7f\x85\xa0",
    "\u200b\u2028\u2029\ufeff\U000e0001",
    "zürich 😀 東京",
    "\ud7ff\ue000\U0010ffff",
]


def test_values_are_quoted_as_python_quotes_them(spark):
    """A reason quotes a value as Python's ``repr()`` does: the job's JVM function and the
    plain path (Spark's expressions) alike."""
    jvm = row_checks(spark)
    assert jvm is not None  # the job's jar is on the suite's classpath
    texts = spark.createDataFrame([(t,) for t in [*QUOTED, None]], "text string")

    quoted = texts.select(
        "text", jvm.quoted(F.col("text")).alias("jvm"), py_repr(F.col("text")).alias("plain")
    ).collect()

    expected = {t: None if t is None else repr(t) for t in [*QUOTED, None]}
    assert {r.text: r.jvm for r in quoted} == expected
    assert {r.text: r.plain for r in quoted} == expected


def test_values_of_the_wrong_kind_are_rejected(spark, tmp_path):
    table = pa.table(
        {
            "message_id": [1, 2, 3, 4, 5, 6],
            "address": pa.array([5, None, None, None, None, None], pa.int64()),
            "sent_at": [T0] * 6,
            "expiration": pa.array([None, dt.date(2026, 1, 2), None, None, None, None]),
            "priority": pa.array([None, None, 1.5, None, None, None], pa.float64()),
            "durable": [None, None, None, "yes", None, None],
            "body": [None, None, None, None, "text", None],
            "to_queue": pa.array([None, None, None, None, None, b"q"], pa.binary()),
        }
    )
    rows, _ = read(spark, tmp_path, table)

    got = by_row(normalise(rows, "addresses/orders"))

    assert [r.error for r in got] == [
        "address: int64 is not a string",
        "expiration: date32[day] is not a timestamp",
        "priority: double is not an integer",
        "durable: string is not a boolean",
        None,
        "to_queue: binary is not a string",
    ]
    assert got[4].body == bytearray(b"text")


def test_the_error_is_the_first_failing_column(spark, tmp_path):
    table = pa.table(
        {
            "message_id": ["x", "1", "2", "3", "4"],
            "address": ["payments", "payments", "payments", "payments", "orders"],
            "sent_at": ["late", "late"] + ["2026-01-01T00:00:00Z"] * 3,
            "priority": ["high", "high", "high", "4", "4"],
        }
    )
    rows, _ = read(spark, tmp_path, table)

    got = by_row(normalise(rows, "addresses/orders"))

    assert [r.error for r in got] == [
        "message_id: 'x' is not an integer",
        "sent_at: 'late' is not a timestamp with a time zone",
        "priority: 'high' is not an integer",
        "address 'payments' does not belong in table addresses/orders",
        None,
    ]
    # every failing value is null, not only the first
    assert (got[0].message_id, got[0].sent_at, got[0].priority) == (None, None, None)


def test_raw_is_the_producers_row_for_rejected_rows_only(spark, tmp_path):
    table = pa.table(
        {
            "user_id": ['u"1', "u2"],
            "sent_at": [T0 + dt.timedelta(microseconds=7), T0],
            "message_id": [1, 2],
            "routing_type": pa.array([1, None], pa.int64()),
            "address": ["orders", "orders"],
            "body": [b"\x00\xffhi", None],
            "properties": pa.array([[("z", "1"), ("a", None)], None], schemas.STRING_MAP),
            "durable": [False, None],
            "extra": ["not a SPEC column", None],
        }
    )
    rows, _ = read(spark, tmp_path, table)

    bad, good = by_row(normalise(rows, "addresses/orders"))

    assert bad.error == "routing_type: int64 is not a string"
    assert bad.raw == (
        '{"address":"orders","body":"AP9oaQ==","durable":false,"message_id":1,'
        '"properties":{"a":null,"z":"1"},"routing_type":1,'
        '"sent_at":"2026-01-01T00:00:00.000007+00:00","user_id":"u\\"1"}'
    )
    assert json.loads(bad.raw)["body"] == "AP9oaQ=="
    assert (good.error, good.raw) == (None, None)


def test_delivery_rows(spark, tmp_path):
    table = pa.table(
        {
            "queue": ["orders", "orders"],
            "message_id": ["5", "five"],
            "outcome": ["ACK", "ROLLBACK"],
            "at": pa.array([T0.replace(tzinfo=None)] * 2, pa.timestamp("ms", tz="UTC")),
        }
    )
    rows, file = read(spark, tmp_path, table)

    actual = normalise(rows, "deliveries")

    position = {"source": "deliveries", "version": VERSION, "file": file}
    expected = events(
        spark,
        [
            {**position, "row": 0, "queue": "orders", "message_id": 5, "outcome": "ACK", "at": T0},
            {
                **position,
                "row": 1,
                "queue": "orders",
                "outcome": "ROLLBACK",
                "at": T0,
                "error": "message_id: 'five' is not an integer",
                "raw": '{"at":"2026-01-01T00:00:00+00:00","message_id":"five",'
                '"outcome":"ROLLBACK","queue":"orders"}',
            },
        ],
    )
    assert_df_equality(actual.orderBy("row"), expected.orderBy("row"), ignore_nullable=True)


def test_management_rows(spark, tmp_path):
    table = pa.table(
        {
            "op": ["RETRY", "MOVE"],
            "queue": ["DLQ", "orders"],
            "at": ["2026-01-01T01:00:00+01:00", "2026-01-01T00:00:00"],
            "to_queue": [None, "other"],
        }
    )
    rows, file = read(spark, tmp_path, table)

    actual = normalise(rows, "management")

    position = {"source": "management", "version": VERSION, "file": file}
    expected = events(
        spark,
        [
            {**position, "row": 0, "op": "RETRY", "queue": "DLQ", "at": T0},
            {
                **position,
                "row": 1,
                "op": "MOVE",
                "queue": "orders",
                "to_queue": "other",
                "error": "at: '2026-01-01T00:00:00' is not a timestamp with a time zone",
                "raw": '{"at":"2026-01-01T00:00:00","op":"MOVE","queue":"orders",'
                '"to_queue":"other"}',
            },
        ],
    )
    assert_df_equality(actual.orderBy("row"), expected.orderBy("row"), ignore_nullable=True)


def test_only_input_tables_with_their_position_are_accepted(spark):
    rows = spark.range(1).withColumns({"_version": F.lit(1), "_file": F.lit("f")})
    with pytest.raises(ValueError, match="lack the reader's column"):
        normalise(rows, "deliveries")
    with pytest.raises(ValueError, match="source 'journal': expected an input table"):
        normalise(rows.withColumn("_row", F.lit(0)), "journal")
    with pytest.raises(TypeError, match="rows must be a DataFrame"):
        normalise([], "deliveries")
