"""The job's input: every input table of a lake as one stream, cut in event time.

``spark.readStream.format("lake_events").load(lake_root)`` yields the rows of every
``addresses/*`` table, ``deliveries/`` and ``management/`` in one schema
(:data:`EVENT`), with the table they came from (``source``) and their position
(``version``, ``file``, ``row``) for a stable order.

Offsets are ``{"tables": {source: version}, "until": t, "asOf": a}``: a batch holds
the rows of those table versions whose event time (``sent_at`` or ``at``) is at
most ``until`` and that no earlier batch held. ``maxEventsPerTrigger`` lowers
``until`` instead of cutting versions, so a rate-limited run and a single batch
see the same events in the same event-time order (docs/DESIGN.md). Rows that
arrive later with an older time come in the next batch. ``asOf`` (option) is the
``--as-of`` of SPEC §5.4: raising it alone makes a new batch.

A row whose values cannot be read as the SPEC types (a timestamp without a zone, a
properties map of numbers, an id that is not an integer...) is still emitted,
with ``error`` saying why and ``raw`` holding the row as JSON, so the job can
put it in ``rejected/``. A table that lacks a required column is an error of
the lake, not of a row: the query stops with :class:`LakeSchemaError`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from routing import lake, schemas
from routing.delta_log import DataFile, TableLog
from routing.lake_source import _parallelism, plan_partitions

UNBOUNDED = 1 << 62
"""``until`` of an offset with no time bound (µs; far beyond any real time)."""
NO_AS_OF = -(1 << 62)

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


class LakeSchemaError(ValueError):
    """An input table lacks a column the SPEC requires: the lake is unusable as it is."""


@dataclass(frozen=True)
class TableKind:
    """What an input table holds: its SPEC schema, required columns and event-time column."""

    schema: pa.Schema
    required: tuple[str, ...]
    time_column: str


KINDS = {
    "addresses": TableKind(schemas.MESSAGE, schemas.MESSAGE_REQUIRED, "sent_at"),
    lake.DELIVERIES: TableKind(schemas.DELIVERY, tuple(schemas.DELIVERY.names), "at"),
    lake.MANAGEMENT: TableKind(schemas.MANAGEMENT, schemas.MANAGEMENT_REQUIRED, "at"),
}


def kind_of(source: str) -> TableKind:
    return KINDS["addresses" if source.startswith(f"{lake.ADDRESSES}/") else source]


def input_sources(root: lake.Lake) -> list[str]:
    """Lake paths of every input table that exists now."""
    fixed = [s for s in (lake.DELIVERIES, lake.MANAGEMENT) if TableLog(root.table(s)).exists()]
    return root.address_sources() + fixed


def check_table(root: lake.Lake, source: str) -> None:
    """Raise :class:`LakeSchemaError` if the table ``source`` lacks a required column."""
    kind = kind_of(source)
    names = set(TableLog(root.table(source)).schema().names)
    missing = [c for c in kind.required if c not in names]
    if missing:
        raise LakeSchemaError(
            f"table {source}: missing required column(s) {', '.join(missing)}; "
            f"expected the columns of SPEC §3 ({', '.join(kind.schema.names)})"
        )


def check_lake(root: lake.Lake) -> list[str]:
    """Check every input table of the lake; return their sources."""
    sources = input_sources(root)
    for source in sources:
        check_table(root, source)
    return sources


# --------------------------------------------------------------------------------------
# Normalisation of one file's rows (executors)
# --------------------------------------------------------------------------------------


def _micros_of_iso(text: str) -> int | None:
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond


def coerce(
    column: pa.Array, target: pa.DataType, name: str
) -> tuple[pa.Array, list[str | None] | None]:
    """``column`` as ``target``, and per row the reason it could not be (None: no failures).

    Rows that fail are null in the result.
    """
    n = len(column)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    source = column.type
    if source.equals(target) or pa.types.is_null(source):
        return column.cast(target), None

    def failed(reason: str) -> tuple[pa.Array, list[str | None]]:
        valid = column.is_valid().to_pylist()
        return pa.nulls(n, target), [reason if v else None for v in valid]

    if pa.types.is_timestamp(target):
        if pa.types.is_timestamp(source):
            if source.tz is None:
                return failed(f"{name}: timestamp without a time zone")
            return column.cast(target, safe=False), None
        if pa.types.is_string(source) or pa.types.is_large_string(source):
            values = [None if v is None else _micros_of_iso(v) for v in column.to_pylist()]
            reasons = [
                f"{name}: {raw!r} is not a timestamp with a time zone"
                if raw is not None and v is None
                else None
                for raw, v in zip(column.to_pylist(), values, strict=True)
            ]
            return pa.array(values, pa.int64()).cast(target), reasons
        return failed(f"{name}: {source} is not a timestamp")
    if pa.types.is_integer(target):
        if pa.types.is_integer(source):
            try:
                return column.cast(target), None
            except pa.ArrowInvalid:
                limit = pc.cast(column, pa.int64(), safe=False)
                ok = column.cast(pa.float64()).to_pylist()
                lo, hi = (-(2**31), 2**31 - 1) if target == pa.int32() else (-(2**63), 2**63 - 1)
                reasons = [
                    None if v is None or lo <= v <= hi else f"{name}: {v:.0f} is out of range"
                    for v in ok
                ]
                values = [None if r else v for v, r in zip(limit.to_pylist(), reasons, strict=True)]
                return pa.array(values, target), reasons
        if pa.types.is_string(source) or pa.types.is_large_string(source):
            values, reasons = [], []
            for raw in column.to_pylist():
                try:
                    values.append(None if raw is None else int(raw.strip()))
                    reasons.append(None)
                except ValueError:
                    values.append(None)
                    reasons.append(f"{name}: {raw!r} is not an integer")
            return pa.array(values, target), reasons
        return failed(f"{name}: {source} is not an integer")
    if pa.types.is_string(target):
        if pa.types.is_string(source) or pa.types.is_large_string(source):
            return column.cast(target), None
        return failed(f"{name}: {source} is not a string")
    if pa.types.is_boolean(target):
        return failed(f"{name}: {source} is not a boolean")
    if pa.types.is_binary(target):
        if pa.types.is_large_binary(source) or pa.types.is_fixed_size_binary(source):
            return column.cast(target), None
        if pa.types.is_string(source) or pa.types.is_large_string(source):
            return column.cast(pa.binary()), None
        return failed(f"{name}: {source} is not binary")
    if pa.types.is_map(target):
        if pa.types.is_map(source) and _stringish(source.key_type) and _stringish(source.item_type):
            return column.cast(target), None
        return failed(f"{name}: {source} is not a map of strings to strings")
    return failed(f"{name}: {source} cannot be read as {target}")


def _stringish(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list) and value and isinstance(value[0], tuple):
        return {str(k): _json_value(v) for k, v in value}
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return value


def raw_json(table: pa.Table, index: int) -> str:
    """The row as JSON, the way the producer wrote it (bytes base64, times ISO)."""
    row = table.slice(index, 1).to_pylist()[0]
    return json.dumps({k: _json_value(v) for k, v in row.items()}, sort_keys=True, default=str)


def normalise(raw: pa.Table, source: str, version: int, file: str, first_row: int) -> pa.Table:
    """Rows of one file (already read) as :data:`EVENT` rows, with per-row errors."""
    kind = kind_of(source)
    n = raw.num_rows
    arrays: dict[str, pa.Array] = {}
    errors: list[str | None] | None = None
    for target in kind.schema:
        if target.name not in raw.column_names:
            arrays[target.name] = pa.nulls(n, target.type)
            continue
        values, reasons = coerce(raw.column(target.name), target.type, target.name)
        arrays[target.name] = values
        errors = _first_reason(errors, reasons)
    if lake.is_address_source(source):
        errors = _first_reason(errors, _misplaced(arrays["address"], source))
    constants = {"source": source, "version": version, "file": file}
    columns = []
    for target in EVENT:
        if target.name in arrays:
            columns.append(arrays[target.name])
        elif target.name in constants:
            columns.append(pa.repeat(pa.scalar(constants[target.name], target.type), n))
        elif target.name == "row":
            columns.append(pa.array(np.arange(first_row, first_row + n, dtype=np.int64)))
        elif target.name == "error" and errors is not None:
            columns.append(pa.array(errors, pa.string()))
        elif target.name == "raw" and errors is not None:
            columns.append(
                pa.array(
                    [raw_json(raw, i) if e else None for i, e in enumerate(errors)], pa.string()
                )
            )
        else:
            columns.append(pa.nulls(n, target.type))
    return pa.Table.from_arrays(columns, schema=EVENT)


def _first_reason(
    errors: list[str | None] | None, reasons: list[str | None] | None
) -> list[str | None] | None:
    if reasons is None:
        return errors
    if errors is None:
        return reasons
    return [e or r for e, r in zip(errors, reasons, strict=True)]


def _misplaced(addresses: pa.Array, source: str) -> list[str | None] | None:
    """A row must be in the table of the address it names (SPEC §3 dir(address))."""
    wrong = {}
    for value in pc.unique(addresses).to_pylist():
        if value is None or value == "":
            continue
        if lake.address_source(value) != source:
            wrong[value] = f"address {value!r} does not belong in table {source}"
    if not wrong:
        return None
    return [wrong.get(a) for a in addresses.to_pylist()]


# --------------------------------------------------------------------------------------
# The stream
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventSlice:
    """Rows of one file whose event time is in ``(after, upto]`` (``after`` None: any,
    nulls included — a file is read with ``after=None`` exactly once, when it is new)."""

    source: str
    location: str
    path: str
    version: int
    after: int | None
    upto: int
    row_groups: tuple[int, ...] | None = None
    first_row: int = 0


class EventPartition(InputPartition):
    def __init__(self, files: Sequence[EventSlice]) -> None:
        super().__init__(list(files))
        self.files = list(files)


def read_slice(piece: EventSlice) -> Iterator[pa.RecordBatch]:
    kind = kind_of(piece.source)
    parquet = pq.ParquetFile(piece.location)
    wanted = [c for c in kind.schema.names if c in parquet.schema_arrow.names]
    offset = piece.first_row
    groups = list(piece.row_groups) if piece.row_groups is not None else None
    for batch in parquet.iter_batches(batch_size=65_536, columns=wanted, row_groups=groups):
        table = pa.Table.from_batches([batch])
        events = normalise(table, piece.source, piece.version, piece.path, offset)
        offset += table.num_rows
        times = events.column(kind.time_column).cast(pa.int64())
        keep = pc.less_equal(times, piece.upto)
        if piece.after is None:
            keep = pc.or_kleene(keep, pc.is_null(times))
        else:
            keep = pc.and_kleene(keep, pc.greater(times, piece.after))
        keep = pc.fill_null(keep, False)
        yield from events.filter(keep).to_batches()


class LakeEventsReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets: ``{"base": {source: v}, "tables": {source: v}, "until": t, "asOf": a}``.

    Consumed so far: every row of versions ``<= base``, and the rows of versions in
    ``(base, tables]`` whose event time is ``<= until``. ``until`` never decreases
    while rows are held back; once it is unbounded everything is consumed and
    ``base`` catches up, so a later rate-limited batch may cut lower again.
    """

    def __init__(self, root: str, options: Mapping[str, str]) -> None:
        self.lake = lake.Lake(root)
        self.max_events = (
            int(options["maxeventspertrigger"]) if "maxeventspertrigger" in options else None
        )
        self.as_of = _parse_as_of(options.get("asof"))
        self.cap: dict[str, int] | None = None
        self._logs: dict[str, TableLog] = {}

    def _log(self, source: str) -> TableLog:
        if source not in self._logs:
            self._logs[source] = TableLog(self.lake.table(source))
        return self._logs[source]

    def _versions(self) -> dict[str, int]:
        versions = {}
        for source in input_sources(self.lake):
            if self.cap is not None and source not in self.cap:
                continue
            version = self._log(source).version()
            if self.cap is not None:
                version = min(version, self.cap[source])
            if version >= 0:
                versions[source] = version
        return versions

    def initialOffset(self) -> dict:
        return {"base": {}, "tables": {}, "until": UNBOUNDED, "asOf": NO_AS_OF}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_events) if self.max_events else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.cap = None
        self.cap = self._versions()

    def _held(self, source: str, base: int, upto: int, until: int) -> list[DataFile]:
        """Files of versions ``(base, upto]`` that may hold rows later than ``until``."""
        if until >= UNBOUNDED:
            return []
        return [f for f in self._log(source).added(base, upto) if _later_than(f, until)]

    def _base(self, start: dict) -> dict[str, int]:
        """The fully consumed versions after ``start``."""
        if start["until"] >= UNBOUNDED:
            return dict(start["tables"])
        return {
            source: version
            if not self._held(source, start["base"].get(source, -1), version, start["until"])
            else start["base"].get(source, -1)
            for source, version in start["tables"].items()
        }

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        versions = self._versions()
        for source, version in versions.items():
            if version > start["tables"].get(source, -1):
                check_table(self.lake, source)
        base = self._base(start)
        held = {
            s: self._held(s, base.get(s, -1), v, start["until"]) for s, v in start["tables"].items()
        }
        new = {s: self._log(s).added(start["tables"].get(s, -1), v) for s, v in versions.items()}
        as_of = max(start["asOf"], self.as_of)
        if not any(new.values()) and not any(held.values()) and as_of == start["asOf"]:
            return start
        until = UNBOUNDED
        if isinstance(limit, ReadMaxRows):
            files = [f for fs in held.values() for f in fs] + [f for fs in new.values() for f in fs]
            until = _cut(files, limit.max_rows)
            if start["until"] < UNBOUNDED:
                until = max(until, start["until"])
        if until == start["until"] and not any(new.values()) and as_of == start["asOf"]:
            return start
        return {"base": base, "tables": versions, "until": until, "asOf": as_of}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        pieces: list[EventSlice] = []
        sizes: list[int] = []
        for source, version in end["tables"].items():
            location = self.lake.table(source)
            seen = start["tables"].get(source, -1)
            if end["until"] > start["until"]:
                for f in self._held(source, end["base"].get(source, -1), seen, start["until"]):
                    pieces.append(
                        EventSlice(
                            source,
                            f.location(location),
                            f.path,
                            f.version,
                            start["until"],
                            end["until"],
                        )
                    )
                    sizes.append(f.size)
            for f in self._log(source).added(seen, version):
                pieces.append(
                    EventSlice(source, f.location(location), f.path, f.version, None, end["until"])
                )
                sizes.append(f.size)
        return [EventPartition(p.files) for p in plan_partitions(pieces, sizes, _parallelism())]

    def read(self, partition: EventPartition) -> Iterator[pa.RecordBatch]:
        # Spark plans one bare InputPartition when partitions() returns none
        for piece in getattr(partition, "files", ()):
            yield from read_slice(piece)

    def commit(self, end: dict) -> None:
        pass


def _later_than(f: DataFile, until: int) -> bool:
    bound = _file_max(f)
    return bound is None or bound > until


def _cut(files: Sequence[DataFile], max_rows: int) -> int:
    """The smallest file-time boundary giving a batch of about ``max_rows`` rows."""
    total = 0
    for bound, rows in sorted(
        (_file_max(f), f.num_records or 0) for f in files if _file_max(f) is not None
    ):
        total += rows
        if total >= max_rows:
            return bound
    return UNBOUNDED


def _file_max(f: DataFile) -> int | None:
    for column in ("sent_at", "at"):
        bound = f.max_micros(column)
        if bound is not None:
            return bound
    return None


def _parse_as_of(value: str | None) -> int:
    if value is None or value == "":
        return NO_AS_OF
    if value.lstrip("-").isdigit():
        return int(value)
    micros = _micros_of_iso(value)
    if micros is None:
        raise ValueError(
            f"asOf {value!r}: expected an ISO-8601 time with a zone, e.g. 2026-01-01T00:00:00Z"
        )
    return micros


class LakeEventsDataSource(DataSource):
    """``spark.readStream.format("lake_events").load(lake_root)``: the job's input stream."""

    @classmethod
    def name(cls) -> str:
        return "lake_events"

    def schema(self) -> StructType:
        return from_arrow_schema(EVENT)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = {k.lower(): v for k, v in self.options.items()}
        root = options.get("path")
        if not root:
            raise ValueError("the lake_events source needs the lake root: .load(root)")
        return LakeEventsReader(root, options)


DATA_SOURCES: list[type[DataSource]] = [LakeEventsDataSource]
