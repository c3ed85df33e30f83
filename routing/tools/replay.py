"""Historical message logs loaded into a lake (docs/REPLAY.md).

A log is JSON Lines or Parquet, one record per line/row, each with a ``type``:

- ``send``: ``address``, ``message_id``, ``sent_at`` and the optional message
  columns of SPEC §3.1 (``routing_type``, ``expiration``, ``priority``,
  ``durable``, ``user_id``, ``properties``, ``property_types``, ``body`` as text or
  ``body_base64``); in JSON a property's value carries its type (a string is
  untyped, an integer a ``long``, another number a ``double``, a boolean a
  ``boolean``, ``{"type": T, "value": V}`` a T), and ``property_types`` adds types;
- ``delivery``: ``queue``, ``message_id``, ``outcome``, ``at``;
- ``management``: ``op``, ``queue``, ``message_id``, ``filter``, ``to_queue``, ``at``.

Times in JSON are ISO-8601 strings with a zone (``2026-01-01T00:00:00Z``); a time
without one is refused, as the lake's timestamps are UTC instants. A line that
is not a valid record goes to ``rejected/`` with its file and line number; the
job then validates the rows the way it validates any input.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    IntegralType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
    VariantType,
)

from routing.broker import layout
from routing.broker.layout import address_source
from routing.broker.properties import BOOLEAN, DOUBLE, LONG
from routing.io.lake import Lake
from routing.io.storage import TABLE, append_tables
from routing.plan import schemas
from routing.plan._columns import case_of, literal_map, shuffle_partitions, union_by_name
from routing.plan.bindings import source_of
from routing.plan.normalise import KINDS as INPUT_KINDS

KINDS = ("send", "delivery", "management")
ZONED = r"(Z|z|[+-]\d\d(:?\d\d)?)$"

RECORD = StructType(
    [
        StructField("type", StringType()),
        StructField("address", StringType()),
        StructField("message_id", StringType()),
        StructField("sent_at", StringType()),
        StructField("routing_type", StringType()),
        StructField("expiration", StringType()),
        StructField("priority", StringType()),
        StructField("durable", StringType()),
        StructField("user_id", StringType()),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("property_types", MapType(StringType(), StringType())),
        StructField("body", StringType()),
        StructField("body_base64", StringType()),
        StructField("queue", StringType()),
        StructField("outcome", StringType()),
        StructField("op", StringType()),
        StructField("filter", StringType()),
        StructField("to_queue", StringType()),
        StructField("at", StringType()),
    ]
)
"""A log record with every scalar as text: converted and checked by :func:`load`."""

JSON_RECORD = StructType(
    [
        StructField(f.name, VariantType()) if f.name in ("properties", "property_types") else f
        for f in RECORD.fields
    ]
)
""":data:`RECORD` as JSON Lines are parsed: the maps kept whole, to check their kinds."""

_SCALAR = ("STRING", "BIGINT", "DOUBLE", "BOOLEAN")
"""What a JSON property value may be (besides null, a decimal number and a typed value)."""

TIMES = ("sent_at", "expiration", "at")
NUMBERS = {"message_id": "long", "priority": "int"}
TYPED = dict.fromkeys(TIMES, "timestamp") | NUMBERS
"""Fields a log may carry typed rather than as text, and their Spark types."""
MESSAGE_TYPES = {f.name: f.dataType for f in schemas.spark_schema(schemas.MESSAGE).fields}
_POSITION = (1 << 33) - 1  # monotonically_increasing_id: partition id << 33 | position

ROWS_PER_FILE = 250_000
"""Rows of a loaded input table's data file, at most. The files are in event-time order
(:func:`write`), so each covers a short stretch of the log's time, and the routing job's
rate limit, which estimates the rows due by a time from files' statistics
(``maxEventsPerTrigger``), can cut a long log into batches of about its size
(docs/REPLAY.md, "Memory")."""
LOG_ORDER = ("file", "number")
"""A record's place in the logs: rows of one event time keep it in the tables."""
TABLE_KINDS = {
    "send": layout.ADDRESSES,
    "delivery": layout.DELIVERIES,
    "management": layout.MANAGEMENT,
}
"""The kind of input table each kind of record goes to."""


@dataclass
class Loaded:
    records: DataFrame  # valid records (typed columns + kind)
    rejected: DataFrame  # rejected lines (the rejected table's columns)


def _json_records(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """Records of JSON Lines logs with their file and 1-based line number.

    Text splits never span files, so a line's number is the lines of the earlier
    splits of its file plus its position in its split.
    """
    lines = spark.read.text(list(paths)).select(
        F.col("value").alias("raw"),
        F.col("_metadata.file_path").alias("file"),
        F.spark_partition_id().alias("_split"),
        F.monotonically_increasing_id().alias("_id"),
    )
    counts = sorted(
        (r.file, r._split, r["count"]) for r in lines.groupBy("file", "_split").count().collect()
    )
    offsets: dict[str, int] = {}
    seen: dict[str, int] = {}
    for file, split, count in counts:
        offsets[f"{file}|{split}"] = seen.get(file, 0)
        seen[file] = seen.get(file, 0) + count
    start = literal_map(offsets, "long")[F.concat_ws("|", "file", F.col("_split").cast("string"))]
    numbered = lines.withColumn("number", start + F.col("_id").bitwiseAND(F.lit(_POSITION)) + 1)
    parsed = numbered.where(F.trim("raw") != "").withColumn("r", F.from_json("raw", JSON_RECORD))
    properties, types = F.col("r.properties"), F.col("r.property_types")
    as_map = F.try_variant_get(properties, "$", "map<string,variant>")
    readable = F.forall(F.map_values(as_map), _property_value)
    types_map = F.try_variant_get(types, "$", "map<string,string>")
    fields = {f.name: F.col(f"r.{f.name}") for f in RECORD.fields}
    text = F.transform_values(as_map, lambda _k, v: _property_text(v))
    fields["properties"] = text
    fields["property_types"] = _property_types(as_map, types_map)
    return parsed.select(
        "file",
        "number",
        "raw",
        F.when(
            F.try_parse_json("raw").isNull() | ~F.trim("raw").startswith("{"),
            F.lit("not a JSON object"),
        )
        .when(
            _present(properties) & (as_map.isNull() | ~readable),
            F.lit(
                "properties is not an object of strings, numbers, booleans or "
                '{"type": ..., "value": ...} values'
            ),
        )
        .when(
            _present(types) & types_map.isNull(),
            F.lit("property_types is not an object of strings"),
        )
        .alias("_parse"),
        *[column.alias(name) for name, column in fields.items()],
    )


def _present(value: Column) -> Column:
    """A JSON field given, and not null."""
    return value.isNotNull() & ~F.is_variant_null(value)


def _property_value(value: Column) -> Column:
    """A JSON property value the log may carry: null, a string, a number, a boolean, or a
    typed value ``{"type": T, "value": V}`` (V a string, number or boolean)."""
    kind = F.schema_of_variant(value)
    inner = F.try_variant_get(value, "$.value", "variant")
    typed = (
        kind.startswith("OBJECT<")
        & F.try_variant_get(value, "$.type", "string").isNotNull()
        & inner.isNotNull()
        & (
            F.schema_of_variant(inner).isin(*_SCALAR)
            | F.schema_of_variant(inner).startswith("DECIMAL")
        )
        & (F.size(F.try_variant_get(value, "$", "map<string,variant>")) == 2)
    )
    return F.is_variant_null(value) | kind.isin(*_SCALAR) | kind.startswith("DECIMAL") | typed


def _scalar_text(value: Column) -> Column:
    """A JSON scalar as the lake's text: Java's (``7``, ``2.5``, ``1.0E20``, ``true``)."""
    kind = F.schema_of_variant(value)
    number = F.try_variant_get(value, "$", "double").cast("string")
    return F.when(kind.isin("DOUBLE") | kind.startswith("DECIMAL"), number).otherwise(
        F.try_variant_get(value, "$", "string")
    )


def _property_text(value: Column) -> Column:
    """A property value's text (:func:`_property_value`): a typed value's ``value``."""
    typed = F.schema_of_variant(value).startswith("OBJECT<")
    inner = F.try_variant_get(value, "$.value", "variant")
    return F.when(typed, _scalar_text(inner)).otherwise(_scalar_text(value))


def _property_type(value: Column) -> Column:
    """A property value's type: a string is untyped (null), a JSON integer a ``long``,
    another number a ``double``, a boolean a ``boolean``, a typed value its ``type``."""
    kind = F.schema_of_variant(value)
    return (
        F.when(kind == "BIGINT", F.lit(LONG))
        .when((kind == "DOUBLE") | kind.startswith("DECIMAL"), F.lit(DOUBLE))
        .when(kind == "BOOLEAN", F.lit(BOOLEAN))
        .when(kind.startswith("OBJECT<"), F.try_variant_get(value, "$.type", "string"))
    )


def _property_types(values: Column, explicit: Column) -> Column:
    """A record's ``property_types``: those its values carry, and ``explicit`` over them
    (null when the record has no typed property)."""
    carried = F.map_filter(F.transform_values(values, lambda _k, v: _property_type(v)), _typed)
    merged = F.map_zip_with(
        F.coalesce(carried, F.create_map().cast("map<string,string>")),
        F.coalesce(explicit, F.create_map().cast("map<string,string>")),
        lambda _k, a, b: F.coalesce(b, a),
    )
    return F.when(F.size(merged) > 0, F.map_filter(merged, _typed))


def _typed(_key: Column, kind: Column) -> Column:
    return kind.isNotNull()


def _parquet_records(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """Records of Parquet logs; ``body`` may be binary (then it is carried as base64).

    Columns that already have their type (UTC timestamps, integers) are carried as they
    are, in ``_typed_<name>``, rather than written out as text and parsed back; the
    original columns are kept in ``_log_<name>`` so that a rejected record's ``raw`` JSON
    is only built for the records that are rejected (:func:`checked`).
    """
    rows = spark.read.parquet(*paths)
    schema = {f.name: f.dataType for f in rows.schema.fields}

    def typed(name: str) -> bool:
        kind = schema.get(name)
        if name in TIMES:
            return isinstance(kind, TimestampType)
        return name in NUMBERS and isinstance(kind, IntegralType)

    def text(name: str) -> Column:
        if name not in schema or typed(name):
            return F.lit(None).cast("string")
        return F.col(name).cast("string")

    binary_body = isinstance(schema.get("body"), BinaryType)
    columns = {f.name: text(f.name) for f in RECORD.fields}
    for name in ("properties", "property_types"):
        columns[name] = F.col(name) if name in schema else F.lit(None).cast(RECORD[name].dataType)
    if binary_body:
        columns["body"] = F.lit(None).cast("string")
        columns["body_base64"] = F.coalesce(text("body_base64"), F.base64("body"))
    return rows.select(
        F.col("_metadata.file_path").alias("file"),
        (F.col("_metadata.row_index") + 1).alias("number"),
        F.lit(None).cast("string").alias("raw"),
        F.lit(None).cast("string").alias("_parse"),
        *[v.alias(k) for k, v in columns.items()],
        *[F.col(n).cast(TYPED[n]).alias(f"_typed_{n}") for n in schema if typed(n)],
        *[F.col(c).alias(f"_log_{c}") for c in rows.columns],
    )


def _time(name: str, columns: Sequence[str]) -> tuple[Column, Column]:
    """(timestamp, reason) of a time field given as text, or already typed."""
    text = F.col(name)
    parsed = F.try_to_timestamp(text)
    reason = F.when(
        text.isNotNull() & ~text.rlike(ZONED),
        F.concat(F.lit(f"{name} "), F.to_json(F.array(text)), F.lit(" has no time zone")),
    ).when(
        text.isNotNull() & parsed.isNull(), F.concat(F.lit(f"{name} is not a timestamp: "), text)
    )
    return _or_typed(name, columns, parsed), reason


def _number(name: str, columns: Sequence[str]) -> tuple[Column, Column]:
    value = F.col(name).try_cast(TYPED[name])
    reason = F.when(
        F.col(name).isNotNull() & value.isNull(),
        F.concat(F.lit(f"{name} is not an integer: "), F.col(name)),
    )
    return _or_typed(name, columns, value), reason


def _or_typed(name: str, columns: Sequence[str], from_text: Column) -> Column:
    """The field's typed value if a log carried it typed (then its text is null)."""
    typed = f"_typed_{name}"
    return F.coalesce(F.col(typed), from_text) if typed in columns else from_text


def _absent(name: str, columns: Sequence[str]) -> Column:
    """The field is not in the record (as text or typed)."""
    typed = f"_typed_{name}"
    missing = F.col(name).isNull()
    return missing & F.col(typed).isNull() if typed in columns else missing


def _raw(columns: Sequence[str], rejected: Column) -> Column:
    """A record's JSON for ``rejected.row``: a JSON line as it is; a Parquet row's columns,
    only for the rows that are rejected (the others never need it)."""
    log = [c for c in columns if c.startswith("_log_")]
    if not log:
        return F.col("raw")
    parquet = F.to_json(F.struct(*[F.col(c).alias(c[len("_log_") :]) for c in log]))
    return F.coalesce(F.col("raw"), F.when(rejected, parquet))


def load(spark: SparkSession, paths: Sequence[str]) -> Loaded:
    """Read the logs; valid records typed, bad lines as ``rejected`` rows."""
    return split(checked(spark, paths))


def is_parquet(path: str) -> bool:
    """A log in Parquet (by its name); any other is JSON Lines."""
    return Path(path).suffix.lower() in (".parquet", ".pq")


def records_within(paths: Sequence[str], rows: int) -> int | None:
    """How many records the logs hold, when at most ``rows`` (None: more). A Parquet log's
    from its footer, a JSON Lines log's by its lines (blank and bad ones too: a bound),
    read no further than ``rows`` lines in all."""
    total = 0
    for path in paths:
        if is_parquet(path):
            total += pq.ParquetFile(path).metadata.num_rows
        else:
            with open(path, "rb") as lines:
                total += sum(1 for _ in itertools.islice(lines, rows - total + 1))
        if total > rows:
            return None
    return total


def checked(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """Every record typed, with ``_reason`` (null when the record is valid)."""
    parquet = [p for p in paths if is_parquet(p)]
    jsonl = [p for p in paths if p not in parquet]
    frames = ([_json_records(spark, jsonl)] if jsonl else []) + (
        [_parquet_records(spark, parquet)] if parquet else []
    )
    records = union_by_name(frames, allow_missing=True)
    columns = records.columns
    sent_at, sent_reason = _time("sent_at", columns)
    expiration, expiration_reason = _time("expiration", columns)
    at, at_reason = _time("at", columns)
    message_id, id_reason = _number("message_id", columns)
    priority, priority_reason = _number("priority", columns)

    durable = F.lower("durable")
    kind = F.col("type")
    required = {
        "send": ("address", "message_id", "sent_at"),
        "delivery": ("queue", "message_id", "outcome", "at"),
        "management": ("op", "queue", "at"),
    }
    missing = F.lit(None).cast("string")
    for name, fields in reversed(required.items()):
        for field in reversed(fields):
            missing = F.when(
                (kind == name) & _absent(field, columns),
                F.lit(f"{name} record without {field}"),
            ).otherwise(missing)
    reason = F.coalesce(
        F.col("_parse"),
        F.when(
            kind.isNull() | ~kind.isin(*KINDS),
            F.concat(F.lit("unknown type "), F.to_json(F.array(kind))),
        ),
        missing,
        id_reason,
        sent_reason,
        expiration_reason,
        at_reason,
        priority_reason,
        F.when(
            F.col("durable").isNotNull() & ~durable.isin("true", "false"),
            F.lit("durable is not true or false"),
        ),
        F.when(
            F.col("body_base64").isNotNull()
            & F.try_to_binary("body_base64", F.lit("base64")).isNull(),
            F.lit("body_base64 is not base64"),
        ),
    )
    typed = records.select(
        "file",
        "number",
        _raw(columns, reason.isNotNull()).alias("raw"),
        reason.alias("_reason"),
        kind.alias("kind"),
        "address",
        message_id.alias("message_id"),
        sent_at.alias("sent_at"),
        "routing_type",
        expiration.alias("expiration"),
        priority.alias("priority"),
        (durable == "true").alias("durable"),
        "user_id",
        "properties",
        "property_types",
        F.coalesce(
            F.try_to_binary("body_base64", F.lit("base64")), F.encode("body", "UTF-8")
        ).alias("body"),
        "queue",
        "outcome",
        "op",
        "filter",
        "to_queue",
        at.alias("at"),
    )
    return typed


def split(typed: DataFrame) -> Loaded:
    """Valid records and rejected rows of :func:`checked` records."""
    rejected = typed.where(F.col("_reason").isNotNull()).select(
        F.concat(F.lit("log:"), F.regexp_replace("file", "^file:(//)?", "")).alias("source"),
        F.col("raw").alias("row"),
        F.concat(
            F.lit("line "), F.col("number").cast("string"), F.lit(": "), F.col("_reason")
        ).alias("reason"),
        F.coalesce("sent_at", "at").alias(
            "at"
        ),  # the line's own time if it has one: replays stay identical
    )
    return Loaded(typed.where(F.col("_reason").isNull()).drop("_reason"), rejected)


def table_counts(checked: DataFrame) -> dict[str, int]:
    """The rows each lake table gets from :func:`checked` records (one job; a table that
    gets none is left out): an address's table for each address sent to, the deliveries,
    the management rows and the rejected lines."""
    valid = F.col("_reason").isNull()
    found = (
        checked.groupBy(
            F.when(valid, F.col("kind")).alias("kind"),
            F.when(valid & (F.col("kind") == "send"), F.col("address")).alias("address"),
        )
        .count()
        .collect()
    )
    counts: dict[str, int] = {}
    for kind, address, rows in found:
        table = (
            layout.REJECTED
            if kind is None
            else address_source(address)
            if kind == "send"
            else TABLE_KINDS[kind]
        )
        counts[table] = counts.get(table, 0) + rows
    return counts


def lake_rows(loaded: Loaded, tables: Iterable[str]) -> dict[str, DataFrame]:
    """The rows of ``tables`` (:func:`table_counts`) tagged ``_table``, by kind: ONE frame
    for every address table (its rows tagged with their table, computed per row), one for
    each other table. Each frame reads the kept records once: a frame per address table
    read them once per address (4,000 addresses: 4,000 scans of the log, and a union of
    4,000 branches for the one job that writes them, :func:`~routing.io.storage.append_staged`).
    """
    kinds = {_kind(t) for t in tables}
    records = loaded.records
    frames: dict[str, DataFrame] = {}
    if layout.ADDRESSES in kinds:
        frames[layout.ADDRESSES] = records.where(F.col("kind") == "send").select(
            *[
                F.col(c) if c in records.columns else F.lit(None).cast(MESSAGE_TYPES[c]).alias(c)
                for c in schemas.MESSAGE.names
            ],
            source_of(F.col("address")).alias(TABLE),
        )
    if layout.DELIVERIES in kinds:
        frames[layout.DELIVERIES] = records.where(F.col("kind") == "delivery").select(
            *schemas.DELIVERY.names, F.lit(layout.DELIVERIES).alias(TABLE)
        )
    if layout.MANAGEMENT in kinds:
        frames[layout.MANAGEMENT] = records.where(F.col("kind") == "management").select(
            *schemas.MANAGEMENT.names, F.lit(layout.MANAGEMENT).alias(TABLE)
        )
    if layout.REJECTED in kinds:
        frames[layout.REJECTED] = loaded.rejected.withColumn(TABLE, F.lit(layout.REJECTED))
    unknown = sorted(kinds - set(frames))
    if unknown:
        raise ValueError(f"a log's records go to no table {unknown[0]!r}")
    return frames


def event_time() -> Column:
    """A checked record's event time: the column its table's rows are cut into batches by
    (``sent_at`` of a send, ``at`` of a delivery or management record)."""
    times = {kind: F.col(INPUT_KINDS[table].time_column) for kind, table in TABLE_KINDS.items()}
    return case_of(F.col("kind"), times, F.lit(None).cast("timestamp"))


def in_event_time_order(records: DataFrame) -> DataFrame:
    """:func:`checked` records sorted by their table, event time and place in the logs, in
    ``spark.sql.shuffle.partitions`` ranges: as many as the records are kept in
    (:meth:`~routing.plan.scratch.Scratch.keep`), so no two ranges end up in one partition.

    Each table's rows then lie in a few ranges, each in event-time order, and its files
    (:data:`ROWS_PER_FILE` rows at most, :func:`write`) each cover a short stretch of
    time: a rate-limited routing run can cut the log into batches that small
    (``maxEventsPerTrigger`` goes by files' statistics). Rows of one event time keep the
    logs' order, whatever the shuffle.
    """
    table = [F.col("kind"), F.when(F.col("kind") == "send", F.col("address"))]
    in_time = [event_time(), *[F.col(c) for c in LOG_ORDER]]
    ranges = shuffle_partitions(records.sparkSession)
    # a range holds a stretch of one or more tables' rows: sorted by time alone (a number,
    # where the tables' names would all compare alike), each table's rows are still in
    # time order
    return records.repartitionByRange(ranges, *table, *in_time).sortWithinPartitions(*in_time)


def write(
    lake: Lake,
    rows: Mapping[str, DataFrame],
    counts: Mapping[str, int],
    paths: Sequence[str],
    *,
    rows_per_file: int = ROWS_PER_FILE,
) -> None:
    """Append the rows to the lake, one commit per table, in files of at most
    ``rows_per_file`` rows; loading the same logs again is a no-op (each table's commit is
    the app transaction of the logs' content).

    :param rows: :func:`lake_rows` of records kept in event-time order
        (:func:`in_event_time_order`): each partition's rows are written in their order,
        and not kept again (a log can be far larger than the heap: the records are
        kept on disk).
    :param counts: :func:`table_counts` of the same records (they are not counted again).
    :param rows_per_file: rows of a data file at most (:data:`ROWS_PER_FILE`).
    """
    if rows_per_file < 1:
        raise ValueError(f"rows_per_file {rows_per_file}: expected a positive number of rows")
    app_id = f"jobs.replay:{logs_id(paths)}"
    append_tables(
        list(rows.values()),
        lake,
        app_id=app_id,
        txn_version=0,
        level=None,
        rows_per_file=rows_per_file,
        counts=[{t: n for t, n in counts.items() if _kind(t) == kind} for kind in rows],
    )


def _kind(table: str) -> str:
    """The :func:`lake_rows` frame that holds ``table``'s rows."""
    return layout.ADDRESSES if layout.is_address_source(table) else table


def logs_id(paths: Sequence[str]) -> str:
    """Identifies a set of logs by their content, so reloading them is recognised."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:32]
