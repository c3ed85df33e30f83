"""An input table's rows as :data:`EVENT` rows, in Spark expressions.

Spark's Parquet reader hands over a table's rows in whatever types the producer gave its
columns (SPEC §3 lets producers use any Delta writer). The job needs the SPEC types, and
a value that cannot be read as its type must not stop the job: the row comes out with
``error`` (why; the first failing column in the schema's order, then the address check
of an address table) and ``raw`` (the row as the producer wrote it, JSON), so that it
lands in ``rejected/`` (SPEC §3.5). A value that fails is null.

The rules are those the Python reader applied per row before (``coerce`` and
``normalise`` of ``lake_events``), reasons word for word, but here as Column
expressions chosen per column from the table's schema at plan time: no UDF, no Python
per row, and a column already of the right type is passed through as it is.

Readings of text follow Python's, since that is what the rules were written in:

- a time is ``datetime.fromisoformat(text.strip().replace("Z", "+00:00"))`` (CPython 3.11's
  grammar: extended and basic dates, ISO week dates, any one separator character, ``.`` or
  ``,`` fractions, zones ``±HH[[:]MM[[:]SS[.f]]]``) and must carry a zone;
- an integer is ``int(text.strip())``: optional sign, decimal digits of any script,
  ``_`` between digits;
- a value quoted in a reason is ``repr(value)``.

Where the Python reader was wrong this is not: times are exact before 1970 and with a
fractional zone (it truncated ``timestamp()``), text beyond an integer column's range is
``'<text>' is out of range`` (it raised), an empty map is ``{}`` in ``raw`` (it wrote
``[]``). Spark's reader, not pyarrow's, types the columns: unsigned integers arrive
widened (``uint64`` as ``decimal(20,0)``, read as an integer), every time at µs.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache, reduce

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DecimalType,
    IntegerType,
    IntegralType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from routing.broker import layout
from routing.broker.properties import INTEGRAL_RANGES, PROPERTY_TYPES, TEXT_PATTERNS
from routing.plan import schemas

EVENT = pa.schema(
    [
        ("source", pa.string()),
        ("version", pa.int64()),
        ("file", pa.string()),
        ("row", pa.int64()),
        *[(f.name, f.type) for f in schemas.MESSAGE],
        ("queue", pa.string()),
        ("outcome", pa.string()),
        ("op", pa.string()),
        ("filter", pa.string()),
        ("at", schemas.TIMESTAMP),
        ("error", pa.string()),
        ("raw", pa.string()),
    ]
)
"""One input row of any input table (columns a table does not have are null)."""


@dataclass(frozen=True)
class TableKind:
    """What an input table holds: its SPEC schema, required columns and event-time column."""

    schema: pa.Schema
    required: tuple[str, ...]
    time_column: str


KINDS = {
    layout.ADDRESSES: TableKind(schemas.MESSAGE, schemas.MESSAGE_REQUIRED, "sent_at"),
    layout.DELIVERIES: TableKind(schemas.DELIVERY, tuple(schemas.DELIVERY.names), "at"),
    layout.MANAGEMENT: TableKind(schemas.MANAGEMENT, schemas.MANAGEMENT_REQUIRED, "at"),
}


EVENT_SCHEMA: StructType = from_arrow_schema(EVENT)
"""The Spark schema of what :func:`normalise` returns."""

POSITION = {"version": "_version", "file": "_file", "row": "_row"}
"""EVENT's position columns and the reader's columns they come from: what the reader
(:func:`routing.io.lake_events.read_events`) adds to a table's rows."""

_RAW_PREFIX = "_producer_"
"""Private name of a producer's column kept, as written, for ``raw``."""

_BOUNDS: dict[DataType, tuple[int, int]] = {
    ByteType(): (-(2**7), 2**7 - 1),
    ShortType(): (-(2**15), 2**15 - 1),
    IntegerType(): (-(2**31), 2**31 - 1),
    LongType(): (-(2**63), 2**63 - 1),
}

_UINT64 = DecimalType(20, 0)
"""How Spark's Parquet reader types a ``uint64`` column (the others widen to signed)."""


def normalise(rows: DataFrame, source: str) -> DataFrame:
    """``rows`` of the input table ``source`` as EVENT rows, typed as SPEC §3 says.

    :param rows: the table's rows as Spark read them (the producer's columns and types;
        optional columns may be missing) plus the reader's ``_version``, ``_file`` and
        ``_row``.
    :param source: the table's path in the lake (``deliveries``, ``management``,
        ``addresses/<dir(address)>``).
    :return: the columns of :data:`EVENT_SCHEMA`, in its order: ``source``, the
        position, the kind's columns (other kinds' null), ``error`` and ``raw``.
    :raises TypeError: ``rows`` is not a DataFrame or ``source`` not a str.
    :raises ValueError: ``source`` is not an input table, or ``rows`` lacks a position.

    Example::

        rows = spark.read.parquet(path).withColumns(
            {"_version": F.lit(3), "_file": F.col("_metadata.file_path"),
             "_row": F.col("_metadata.row_index")}
        )
        events = normalise(rows, "addresses/orders")
    """
    if not isinstance(rows, DataFrame):
        raise TypeError(f"rows must be a DataFrame, got {type(rows).__name__}")
    if not isinstance(source, str):
        raise TypeError(f"source must be a str, got {type(source).__name__}")
    if source not in (layout.DELIVERIES, layout.MANAGEMENT) and not layout.is_address_source(
        source
    ):
        raise ValueError(
            f"source {source!r}: expected an input table, "
            f"{layout.DELIVERIES}, {layout.MANAGEMENT} or {layout.ADDRESSES}/<dir(address)>"
        )
    missing = [c for c in POSITION.values() if c not in rows.columns]
    if missing:
        raise ValueError(
            f"rows lack the reader's column(s) {', '.join(missing)}; expected "
            f"{', '.join(POSITION.values())} beside the table's own columns"
        )
    table = {TABLE: F.lit(source), TABLE_ADDRESS: F.lit(layout.address_of_source(source))}
    return normalise_tables(rows.withColumns(table), kind_name(source))


TABLE, TABLE_ADDRESS = "_table", "_table_address"
"""The reader's columns naming each row's table (``source``) and the address whose table
that is (null: a folder that is no address's ``dir``), for :func:`normalise_tables`."""


def kind_name(source: str) -> str:
    """The kind of input table ``source`` is: ``addresses``, ``deliveries`` or ``management``."""
    return layout.ADDRESSES if layout.is_address_source(source) else source


TypesCheck = Callable[[Column, Column], Column]
"""Why a row's ``property_types`` cannot be, from its ``properties`` and ``property_types``
columns: :func:`untyped_property` or the job's Catalyst expression of the same rule."""

Quote = Callable[[Column], Column]
"""Python's ``repr()`` of a string column, as the reasons quote values: :func:`py_repr` or
the job's Catalyst expression of the same rule."""


@dataclass(frozen=True)
class RowChecks:
    """How the rules whose Spark expressions hold lambdas are computed: Spark only
    interprets a lambda, and a projection that holds one is not compiled with its stage
    (no whole-stage code: its projection is generated again for every partition read,
    18% of the read's samples at 4,000 address tables, docs/PERFORMANCE.md). The plain path is
    :data:`PLAIN_CHECKS`; the job's jar has each rule as one expression with generated code
    (:func:`routing.io.lake_events.row_checks`)."""

    property_types: TypesCheck
    quoted: Quote


def normalise_tables(
    rows: DataFrame,
    kind: str,
    keep: Sequence[str] = (),
    *,
    checks: RowChecks | None = None,
) -> DataFrame:
    """:func:`normalise` of rows of several tables of one ``kind`` read together, each row
    naming its table in :data:`TABLE` and :data:`TABLE_ADDRESS`: one projection, whatever
    the number of tables. ``keep``: columns of ``rows`` carried beside the EVENT columns;
    ``checks``: how property types are checked and values quoted (None: :data:`PLAIN_CHECKS`).
    """
    first, then = _projections(kind, rows.schema, checks or PLAIN_CHECKS)
    carried = [F.col(c) for c in keep]
    events = rows.select(*first, *carried)
    return events if then is None else events.select(*then, *carried)


@lru_cache(maxsize=64)
def _projections(
    kind_key: str, schema: StructType, checks: RowChecks
) -> tuple[tuple[Column, ...], tuple[Column, ...] | None]:
    """The projections :func:`normalise_tables` makes of rows of tables of ``kind_key``
    read with ``schema``: the EVENT columns, and a second step when a row can fail (None
    otherwise); property types checked and values quoted by ``checks``.

    Built once per kind, schema and check: a job reads the same tables batch after batch, and
    building their Columns is hundreds of py4j calls (about 1,900 of a ten-message
    batch's). A Column is an expression of the gateway's one JVM, not of a session.
    """
    kind = KINDS[kind_key]
    source = F.col(TABLE)
    present = {f.name: f.dataType for f in schema.fields}
    targets = {f.name: f.dataType for f in from_arrow_schema(kind.schema).fields}
    values: dict[str, Column] = {}
    reasons: list[Column] = []
    for name, target in targets.items():
        if name not in present:
            values[name] = F.lit(None).cast(target)
            continue
        value, reason = coerce(F.col(name), present[name], target, name, checks.quoted)
        values[name] = value
        if reason is not None:
            reasons.append(reason)
    if kind_key == layout.ADDRESSES:
        if "property_types" in present:
            reasons.append(checks.property_types(values["properties"], values["property_types"]))
        reasons.append(misplaced(values["address"], source, F.col(TABLE_ADDRESS), checks.quoted))

    kept = sorted(name for name in kind.schema.names if name in present)
    columns = []
    for field in EVENT_SCHEMA.fields:
        if field.name == "source":
            column = source
        elif field.name in POSITION:
            column = F.col(POSITION[field.name])
        elif field.name in values:
            column = values[field.name]
        elif field.name == "error" and reasons:
            column = F.coalesce(*reasons) if len(reasons) > 1 else reasons[0]
        else:
            column = F.lit(None)
        columns.append(column.cast(field.dataType).alias(field.name))
    if not reasons:
        return tuple(columns), None
    # raw in a second step: the first computes error once and keeps the producer's columns
    # that it converted; one read as the SPEC types is its EVENT column, not a second copy
    converted = [name for name in kept if not _same(present[name], targets[name])]
    originals = [F.col(name).alias(_RAW_PREFIX + name) for name in converted]
    raw = _object(
        [
            (name, F.col(_RAW_PREFIX + name if name in converted else name), present[name])
            for name in kept
        ]
    )
    return (
        (*columns[:-1], *originals),
        (
            *map(F.col, EVENT_SCHEMA.names[:-1]),
            F.when(F.col("error").isNotNull(), raw).alias("raw"),
        ),
    )


# --------------------------------------------------------------------------------------
# One column
# --------------------------------------------------------------------------------------


def coerce(
    value: Column, source: DataType, target: DataType, name: str, quoted: Quote | None = None
) -> tuple[Column, Column | None]:
    """``value`` (of type ``source``) as ``target``, and per row why it could not be.

    The reason is None when no row can fail (the conversion is chosen from the types, at
    plan time); otherwise a column that is null where the value converted, and
    ``"<name>: ..."`` where it did not (the value is then null), text quoted by ``quoted``
    (:func:`py_repr` when None).
    """
    quoted = quoted or py_repr
    if _same(source, target) or isinstance(source, NullType):
        return value.cast(target), None

    def failed(reason: str) -> tuple[Column, Column]:
        return F.lit(None).cast(target), F.when(value.isNotNull(), F.lit(f"{name}: {reason}"))

    spelled = arrow_name(source)
    if isinstance(target, TimestampType):
        if isinstance(source, TimestampNTZType):
            return failed("timestamp without a time zone")
        if isinstance(source, StringType):
            return _timestamp_of_text(value, name, quoted)
        return failed(f"{spelled} is not a timestamp")
    if isinstance(target, IntegralType):
        if isinstance(source, IntegralType) or source == _UINT64:
            return _narrowed(value, source, target, name)
        if isinstance(source, StringType):
            return _integer_of_text(value, target, name, quoted)
        return failed(f"{spelled} is not an integer")
    if isinstance(target, StringType):
        return failed(f"{spelled} is not a string")
    if isinstance(target, BooleanType):
        return failed(f"{spelled} is not a boolean")
    if isinstance(target, BinaryType):
        if isinstance(source, StringType):
            return value.cast(target), None
        return failed(f"{spelled} is not binary")
    if isinstance(target, MapType):
        if _string_map(source):
            return value.cast(target), None
        return failed(f"{spelled} is not a map of strings to strings")
    return failed(f"{spelled} cannot be read as {arrow_name(target)}")


def untyped_property(properties: Column, types: Column) -> Column:
    """Why a row's ``property_types`` cannot be (null if it can): the first entry, in key
    order, that names a type SPEC §3.1 does not know, or a property the row does not have,
    or whose property's text does not read as its type (:mod:`routing.broker.properties`).
    A null type is no type (the property is untyped); a typed null value is null.

    Each row is first asked whether any entry is wrong; only a wrong row builds its reason
    (sorting, quoting). The plain path: the job checks with one JVM function of the same
    rule (:data:`TypesCheck`), a plan of one call where this is hundreds of nodes and
    lambdas that Spark interprets.
    """
    known = ", ".join(PROPERTY_TYPES)

    def faults(name: Column, kind: Column) -> tuple[Column, Column, Column, Column]:
        """Whether the entry names an unknown type, a missing property, unreadable text;
        and the text."""
        text = F.try_element_at(properties, name)
        typed = kind.isNotNull()
        unknown = typed & ~kind.isin(*PROPERTY_TYPES)
        missing = typed & ~F.map_contains_key(properties, name)
        return unknown, missing, typed & ~(text.isNull() | _reads_as(text, kind)), text

    def wrong(name: Column, kind: Column) -> Column:
        unknown, missing, unreadable, _ = faults(name, kind)
        return unknown | missing | unreadable

    def problem(entry: Column) -> Column:
        name, kind = entry["key"], entry["value"]
        unknown, missing, unreadable, text = faults(name, kind)
        typed = F.concat(py_repr(name), F.lit(" is typed "), kind)
        return (
            F.when(
                unknown,
                F.concat(
                    F.lit("unknown type "),
                    py_repr(kind),
                    F.lit(" of "),
                    py_repr(name),
                    F.lit(f"; expected one of {known}"),
                ),
            )
            .when(missing, F.concat(typed, F.lit(" but the message has no such property")))
            .when(
                unreadable,
                F.concat(
                    typed,
                    F.lit(" but its value "),
                    py_repr(text),
                    F.lit(" does not read as one"),
                ),
            )
        )

    entries = F.map_entries(types)
    any_wrong = F.exists(entries, lambda entry: wrong(entry["key"], entry["value"]))
    problems = F.filter(F.transform(F.array_sort(entries), problem), lambda p: p.isNotNull())
    return F.when(any_wrong, F.concat(F.lit("property_types: "), F.element_at(problems, 1)))


def _reads_as(text: Column, kind: Column) -> Column:
    """``text`` reads as a value of type ``kind`` (true for a string or an unknown type):
    one branch per type, each with its pattern a literal, compiled once (a pattern that
    is a column's value is compiled again whenever it changes)."""
    branches = []
    for name, pattern in TEXT_PATTERNS.items():
        matches = F.regexp_like(text, F.lit(f"\\A(?:{pattern})\\z"))
        if name in INTEGRAL_RANGES:
            low, high = INTEGRAL_RANGES[name]
            # parsing a number costs microseconds: only text long enough to be out of
            # range is parsed (a long too large for a bigint is null, out of range)
            in_range = (F.length(text) < len(str(high))) | F.coalesce(
                text.try_cast("bigint").between(F.lit(low), F.lit(high)), F.lit(False)
            )
            matches = matches & in_range
        branches.append((kind == name, matches))
    (condition, value), *others = branches
    reads = reduce(lambda chain, branch: chain.when(*branch), others, F.when(condition, value))
    return reads.otherwise(F.lit(True))


def misplaced(
    address: Column, source: Column, expected: Column, quoted: Quote | None = None
) -> Column:
    """Why a row of the address table ``source`` names another address (null if it
    does not): a row belongs in the table of the address it names (SPEC §3 dir).

    ``expected``: the address whose table ``source`` is; null for a folder that is no
    address's ``dir`` (made by hand), which holds no row of any address. ``quoted``: how
    the address is quoted (:func:`py_repr` when None).
    """
    quoted = quoted or py_repr
    wrong = (
        address.isNotNull() & (address != F.lit("")) & (expected.isNull() | (address != expected))
    )
    return F.when(
        wrong,
        F.concat(F.lit("address "), quoted(address), F.lit(" does not belong in table "), source),
    )


def arrow_name(kind: DataType) -> str:
    """A Spark type as pyarrow spells it (``int64``, ``map<string, int64>``), as the
    reasons always have."""
    if isinstance(kind, VariantType):
        return kind.simpleString()
    try:
        return str(to_arrow_type(kind, timezone="UTC"))
    except Exception:  # a type Arrow has no name for
        return kind.simpleString()


def _same(source: DataType, target: DataType) -> bool:
    if isinstance(target, MapType):
        return _string_map(source)
    return source == target


def _string_map(kind: DataType) -> bool:
    return (
        isinstance(kind, MapType)
        and isinstance(kind.keyType, StringType)
        and isinstance(kind.valueType, StringType)
    )


def _narrowed(
    value: Column, source: DataType, target: DataType, name: str
) -> tuple[Column, Column | None]:
    """An integer as a (maybe narrower) integer type; out of range is a reason."""
    low, high = _BOUNDS[target]
    source_low, source_high = _BOUNDS.get(source, (0, 2**64 - 1))
    if low <= source_low and source_high <= high:
        return value.cast(target), None
    fits = value.between(F.lit(low), F.lit(high))
    reason = F.when(
        ~fits, F.concat(F.lit(f"{name}: "), _float_text(value), F.lit(" is out of range"))
    )
    return F.when(fits, value.cast(target)), reason


def _float_text(value: Column) -> Column:
    """``f"{float(value):.0f}"`` of an integer: the reasons have always shown the
    value as a float (exact up to 2**53, its nearest double beyond)."""
    rounded = value.cast("double")
    large = (rounded / 4).cast("long").cast("decimal(21,0)") * F.lit(4)
    return F.when(F.abs(rounded) < F.lit(2.0**62), rounded.cast("long").cast("string")).otherwise(
        large.cast("string")
    )


# --------------------------------------------------------------------------------------
# Text as integers and times (Python's int() and datetime.fromisoformat)
# --------------------------------------------------------------------------------------


@cache
def _python_space() -> str:
    """A Java regex class of what ``str.strip()`` removes."""
    return "[" + "".join(f"\\x{{{c:x}}}" for c in range(0x10000) if chr(c).isspace()) + "]"


@cache
def _decimal_digits() -> tuple[str, str]:
    """Every non-ASCII decimal digit (``int()`` reads them) and its ASCII digit."""
    digits = [
        (chr(c), str(unicodedata.decimal(chr(c))))
        for c in range(0x80, 0x110000)
        if unicodedata.decimal(chr(c), None) is not None
    ]
    return "".join(d for d, _ in digits), "".join(a for _, a in digits)


def _stripped(text: Column) -> Column:
    space = _python_space()
    return F.regexp_replace(text, F.lit(f"^{space}+|{space}+\\z"), F.lit(""))


def _integer_of_text(
    value: Column, target: DataType, name: str, quoted: Quote
) -> tuple[Column, Column]:
    """``int(value.strip())`` as ``target``; not an integer, or out of range, is a reason."""
    digits, ascii_digits = _decimal_digits()
    text = F.translate(_stripped(value), digits, ascii_digits)
    readable = text.rlike(r"^[+-]?[0-9]+(?:_[0-9]+)*\z")
    number = F.when(readable, F.replace(text, F.lit("_"), F.lit("")).try_cast(target))
    named = F.concat(F.lit(f"{name}: "), quoted(value))
    reason = F.when(
        value.isNotNull() & ~readable, F.concat(named, F.lit(" is not an integer"))
    ).when(value.isNotNull() & number.isNull(), F.concat(named, F.lit(" is out of range")))
    return number, reason


class _Pattern:
    """A regex built from pieces, with named groups that may repeat across alternatives
    (Java's may not): each use gets its own name, :meth:`field` joins them back."""

    def __init__(self) -> None:
        self.groups: dict[str, list[str]] = {}

    def group(self, field: str, body: str) -> str:
        names = self.groups.setdefault(field, [])
        names.append(f"{field}{len(names)}")
        return f"(?<{names[-1]}>{body})"

    def field(self, field: str) -> str:
        """A replacement that is the field's text (only one of its groups takes part)."""
        return "".join(f"${{{n}}}" for n in self.groups.get(field, []))


def _iso_pattern() -> tuple[str, list[str], str]:
    """The regex of the times CPython 3.11's ``datetime.fromisoformat`` reads with a zone
    (after ``strip()`` and ``Z`` -> ``+00:00``), the fields it captures, and the
    replacement that writes them ``|``-separated.

    It follows ``_datetimemodule.c``: the date's form decides where the one-character
    separator is; time components are two digits, the last one optionally followed by
    one ignored ASCII character just before the zone; a fraction's first six digits
    count; a zone whose whole seconds are 0 is UTC.
    """
    p = _Pattern()
    d1, d2, d4 = r"\d", r"\d\d", r"\d{4}"
    separator, non_digit, non_dash = r"(?s:.)", r"[^0-9]", r"[^-]"  # separators: any character
    unsigned = r"[\x00-\x2a\x2c\x2e-\x7f]"  # one byte, not + or -
    dates = [
        rf"{p.group('year', d4)}-{p.group('month', d2)}-{p.group('day', d2)}{separator}",
        rf"{p.group('year', d4)}{p.group('month', d2)}{p.group('day', d2)}{separator}",
        rf"{p.group('wyear', d4)}-W{p.group('week', d2)}-{p.group('wday', d1)}{non_digit}",
        rf"{p.group('wyear', d4)}-W{p.group('week', d2)}-",  # the time starts \d\d
        rf"{p.group('wyear', d4)}-W{p.group('week', d2)}{non_dash}",
        rf"{p.group('wyear', d4)}W{p.group('week', d2)}{non_digit}",
        rf"{p.group('wyear', d4)}W{p.group('week', d2)}{p.group('wday', d1)}{non_digit}",
        # a run of digits after YYYYWww: odd, the separator is its first; even, its second
        rf"{p.group('wyear', d4)}W{p.group('week', d2)}(?=\d(?:\d\d)+(?!\d))\d",
        rf"{p.group('wyear', d4)}W{p.group('week', d2)}(?=(?:\d\d)+(?!\d))"
        rf"{p.group('wday', d1)}\d",
    ]

    def fraction(least: int) -> str:
        # fewer than six digits: all up to the zone; six: the rest until the zone is ignored
        return p.group("fraction", rf"\d{{6}}|\d{{{least},5}}(?=[+-])") + r"[^+-]*"

    ignored = f"{unsigned}?"  # the one character C reads after a component and drops
    time = (
        f"{p.group('hour', d2)}(?:{ignored}|[.,]{fraction(1)}"
        f"|:{p.group('minute', d2)}(?:{ignored}|[.,]{fraction(1)}"
        f"|:{p.group('second', d2)}(?:{ignored}|[.,]{fraction(1)}|:{fraction(1)}))"
        f"|{p.group('minute', d2)}(?:{ignored}|[.,]{fraction(1)}"
        f"|{p.group('second', d2)}(?:{ignored}|[.,]{fraction(1)}|{fraction(2)})))"
    )

    def zone_fraction(least: int) -> str:
        return p.group("zfraction", rf"\d{{{least},}}")

    zone = (
        f"{p.group('zhour', d2)}(?:|[.,]{zone_fraction(1)}"
        f"|:{p.group('zminute', d2)}(?:|[.,]{zone_fraction(1)}"
        f"|:{p.group('zsecond', d2)}(?:|[.,]{zone_fraction(1)}|:{zone_fraction(1)}))"
        f"|{p.group('zminute', d2)}(?:|[.,]{zone_fraction(1)}"
        f"|{p.group('zsecond', d2)}(?:|[.,]{zone_fraction(1)}|{zone_fraction(2)})))"
    )
    pattern = f"^(?:{'|'.join(dates)}){time}{p.group('sign', '[+-]')}{zone}\\z"
    fields = list(p.groups)
    return pattern, fields, "|".join(p.field(f) for f in fields)


@cache
def _iso() -> tuple[str, dict[str, int], str]:
    pattern, fields, replacement = _iso_pattern()
    return pattern, {f: i for i, f in enumerate(fields)}, replacement


def _timestamp_of_text(value: Column, name: str, quoted: Quote) -> tuple[Column, Column]:
    """An ISO-8601 time with a zone as a UTC timestamp; anything else is a reason."""
    pattern, index, replacement = _iso()
    text = F.replace(_stripped(value), F.lit("Z"), F.lit("+00:00"))
    matched = text.rlike(pattern)
    # null unless the text matched: fields of other text could make make_date throw
    parts = F.split(
        F.when(matched, F.regexp_replace(text, F.lit(pattern), F.lit(replacement))), r"\|"
    )

    def part(field: str) -> Column:
        return parts.getItem(index[field])

    def number(field: str, default: int | None = None) -> Column:
        read = part(field).try_cast("int")
        return read if default is None else F.coalesce(read, F.lit(default))

    def micros(field: str) -> Column:  # the first six digits of a fraction, as µs
        return F.rpad(F.substring(part(field), 1, 6), 6, "0").cast("long")

    week_year, week, weekday = number("wyear"), number("week"), number("wday", 1)
    january_4 = F.make_date(week_year, F.lit(1), F.lit(4))
    in_week = F.date_add(
        F.date_sub(january_4, F.weekday(january_4)), (week - 1) * 7 + (weekday - 1)
    )
    by_week = part("week") != F.lit("")
    year = F.when(by_week, F.year(in_week)).otherwise(number("year"))
    week_ok = (
        (week_year >= 1)
        & weekday.between(1, 7)
        & (
            week.between(1, 52)
            | ((week == 53) & (F.weekofyear(F.make_date(week_year, F.lit(12), F.lit(28))) == 53))
        )
    )
    second = number("second", 0)
    local = F.try_make_timestamp(
        year,
        F.when(by_week, F.month(in_week)).otherwise(number("month")),
        F.when(by_week, F.dayofmonth(in_week)).otherwise(number("day")),
        number("hour"),
        number("minute", 0),
        second,
        F.lit("UTC"),
    )
    # a zone of whole seconds 0 is UTC, whatever its fraction (CPython's quirk)
    seconds = number("zhour") * 3600 + number("zminute", 0) * 60 + number("zsecond", 0)
    offset = F.when(seconds == 0, F.lit(0)).otherwise(
        seconds.cast("long") * 1_000_000 + micros("zfraction")
    )
    sign = F.when(part("sign") == F.lit("-"), F.lit(-1)).otherwise(F.lit(1))
    readable = (
        matched
        & F.when(by_week, week_ok).otherwise(F.lit(True))
        & year.between(1, 9999)
        & (second < 60)
        & (offset < F.lit(86_400_000_000))
    )
    moment = F.when(
        readable,
        F.timestamp_micros(F.unix_micros(local) + micros("fraction") - sign * offset),
    )
    reason = F.when(
        value.isNotNull() & moment.isNull(),
        F.concat(F.lit(f"{name}: "), quoted(value), F.lit(" is not a timestamp with a time zone")),
    )
    return moment, reason


# --------------------------------------------------------------------------------------
# repr() and the producer's row as JSON
# --------------------------------------------------------------------------------------

_UNPRINTABLE = r"[\p{C}\p{Z}&&[^ ]]"
"""What Python's ``repr`` escapes besides quotes and backslashes (not ``isprintable``)."""


def py_repr(text: Column) -> Column:
    """Python's ``repr()`` of a string column: how the reasons quote values."""
    single = F.instr(text, "'") > 0
    double = F.instr(text, '"') > 0
    quote = F.when(single & ~double, F.lit('"')).otherwise(F.lit("'"))
    body = F.replace(text, F.lit("\\"), F.lit("\\\\"))
    body = F.when(single & double, F.replace(body, F.lit("'"), F.lit("\\'"))).otherwise(body)
    # character by character only for the rare text that has something to escape
    chars = F.regexp_extract_all(body, F.lit("(?s)."), 0)
    body = F.when(
        body.rlike(_UNPRINTABLE), F.array_join(F.transform(chars, _escaped_char), "")
    ).otherwise(body)
    return F.concat(quote, body, quote)


def _escaped_char(char: Column) -> Column:
    point = F.ascii(char)

    def hexadecimal(prefix: str, width: int) -> Column:
        return F.concat(F.lit(prefix), F.lpad(F.lower(F.hex(point)), width, "0"))

    return (
        F.when(char == F.lit("\t"), F.lit("\\t"))
        .when(char == F.lit("\n"), F.lit("\\n"))
        .when(char == F.lit("\r"), F.lit("\\r"))
        .when(~char.rlike(_UNPRINTABLE), char)
        .when(point < 0x100, hexadecimal("\\x", 2))
        .when(point < 0x10000, hexadecimal("\\u", 4))
        .otherwise(hexadecimal("\\U", 8))
    )


PLAIN_CHECKS = RowChecks(property_types=untyped_property, quoted=py_repr)
"""The rules of :class:`RowChecks` in Spark's expressions."""


def _object(members: list[tuple[str, Column, DataType]]) -> Column:
    """``{"name":value,...}`` of the members in the order given, compact."""
    parts: list[Column] = []
    for i, (name, value, kind) in enumerate(members):
        key = json.dumps(name, ensure_ascii=False)
        parts += [F.lit(("," if i else "") + key + ":"), json_text(value, kind)]
    return F.concat(F.lit("{"), *parts, F.lit("}"))


def json_text(value: Column, kind: DataType) -> Column:
    """A value as JSON text, the way the rejected rows have always shown a producer's
    row: compact, keys sorted (struct fields and map keys), bytes base64, times in
    ``isoformat()`` form, decimals as strings (uint64 as numbers), null as ``null``."""
    if isinstance(kind, NullType):
        return F.lit("null")
    if isinstance(kind, StructType):
        fields = sorted(kind.fields, key=lambda f: f.name)
        body = _object([(f.name, value.getField(f.name), f.dataType) for f in fields])
    elif _string_map(kind):
        # Spark's JSON of the map with its entries in key order, as the lambdas below write
        # it: without a lambda, its projection is compiled with its stage (RowChecks)
        body = F.to_json(F.map_from_entries(F.sort_array(F.map_entries(value))))
    elif isinstance(kind, MapType):
        value_kind = kind.valueType
        entries = F.transform(
            F.map_entries(value),
            lambda e: F.struct(
                e["key"].cast("string").alias("k"), json_text(e["value"], value_kind).alias("v")
            ),
        )
        pairs = F.transform(
            F.sort_array(entries),
            lambda e: F.concat(_scalar(e["k"]), F.lit(":"), e["v"]),
        )
        body = F.concat(F.lit("{"), F.array_join(pairs, ","), F.lit("}"))
    elif isinstance(kind, ArrayType):
        element = kind.elementType
        items = F.transform(value, lambda item: json_text(item, element))
        body = F.concat(F.lit("["), F.array_join(items, ","), F.lit("]"))
    elif isinstance(kind, TimestampType | TimestampNTZType):
        zone = "xxx" if isinstance(kind, TimestampType) else ""
        body = F.concat(
            F.lit('"'),
            F.when(
                F.date_format(value, "SSSSSS") == F.lit("000000"),
                F.date_format(value, f"yyyy-MM-dd'T'HH:mm:ss{zone}"),
            ).otherwise(F.date_format(value, f"yyyy-MM-dd'T'HH:mm:ss.SSSSSS{zone}")),
            F.lit('"'),
        )
    elif kind == _UINT64:
        body = value.cast("string")
    elif isinstance(kind, DecimalType):
        body = _scalar(value.cast("string"))
    else:
        return _scalar(value)
    return F.when(value.isNull(), F.lit("null")).otherwise(body)


def _scalar(value: Column) -> Column:
    """Spark's JSON of a scalar (strings escaped, bytes base64; null is ``null``)."""
    text = F.to_json(F.array(value))
    return F.substring(text, F.lit(2), F.length(text) - 2)
