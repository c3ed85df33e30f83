"""Delta tables as Spark Python data sources, over delta-rs (SPEC §2).

The ``lake`` source reads and writes ordinary Delta tables without Delta's JVM
jars: executors read and write parquet files with pyarrow, the driver plans from
the Delta log (:mod:`routing.delta_log`) and commits with delta-rs.

- batch read (``versionAsOf``, ``partitionFilter``, ``withFilePath``);
- streaming read whose offsets are table versions (``startingVersion``,
  ``maxFilesPerTrigger`` / ``maxRowsPerTrigger``, ``Trigger.AvailableNow``);
- Arrow batch write (append, overwrite) and Arrow streaming write. Each write
  is ONE Delta commit; with ``txnAppId``/``txnVersion`` (batch writes) or the
  micro-batch id (streaming writes) it carries an app transaction, and a write
  whose transaction is already in the table is skipped: exactly-once.
- one write can fill several tables of a lake (``tableColumn``), one commit
  each, in a fixed order: the job commits a whole micro-batch in one Spark job. The
  rows written, per table (and per value of a ``countBy`` column), are counted by the
  executors as they write and recorded in the commit of a ``recordCounts`` table
  (:data:`ROWS_WRITTEN`): the job reads its batch figures there instead of counting
  its outputs in a Spark job of their own.

Example::

    spark.read.format("lake").load("lake/deliveries")
    df.write.format("lake").mode("append").option("txnAppId", "x").option("txnVersion", 7).save(path)
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StringType, StructField, StructType

from routing.delta_log import DataFile, TableLog, is_table

FILE_PATH_COLUMN = "_file"
"""Extra column (``withFilePath``): the file a row was read from, as the log names it."""

BATCH_ROWS = 65_536
TARGET_FILE_ROWS = 1_000_000
ROW_GROUP_ROWS = 131_072
"""Row groups small enough that one large file still feeds every core when read back."""
_SAFE_PARTITION = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


# --------------------------------------------------------------------------------------
# Arrow helpers (run on executors)
# --------------------------------------------------------------------------------------


def conform(batch: pa.RecordBatch | pa.Table, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with exactly ``schema``'s columns, in order: missing ones null, others cast."""
    columns = []
    for target in schema:
        index = batch.schema.get_field_index(target.name)
        if index < 0:
            columns.append(pa.nulls(batch.num_rows, target.type))
            continue
        column = batch.column(index)
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if not column.type.equals(target.type):
            column = column.cast(target.type)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_file(
    location: str,
    schema: pa.Schema,
    partition_values: Mapping[str, str | None],
    *,
    file_column: str | None = None,
    row_groups: Sequence[int] | None = None,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Batches of one data file (or some of its row groups) conformed to ``schema``."""
    data_fields = [
        f for f in schema if f.name not in partition_values and f.name != FILE_PATH_COLUMN
    ]
    parquet = pq.ParquetFile(location)
    present = set(parquet.schema_arrow.names)
    columns = [f.name for f in data_fields if f.name in present]
    groups = list(row_groups) if row_groups is not None else None
    for raw in parquet.iter_batches(batch_size=batch_rows, columns=columns, row_groups=groups):
        arrays = {name: raw.column(name) for name in raw.schema.names}
        for name, value in partition_values.items():
            if schema.get_field_index(name) >= 0:
                arrays[name] = constant(value, raw.num_rows, schema.field(name).type)
        if file_column:
            arrays[FILE_PATH_COLUMN] = constant(file_column, raw.num_rows, pa.string())
        yield conform(pa.RecordBatch.from_pydict(arrays), schema)


def constant(value: Any, rows: int, kind: pa.DataType) -> pa.Array:
    """An array of ``rows`` copies of ``value`` (a partition value is a string in the log)."""
    if value is None:
        return pa.nulls(rows, kind)
    return pa.repeat(pa.scalar(value, pa.string()), rows).cast(kind)


class FileStats:
    """Delta file statistics gathered row group by row group: min/max only for numbers
    and timestamps (exact, or widened outward when written), never for strings, so no
    reader can wrongly skip a file."""

    def __init__(self) -> None:
        self.rows = 0
        self.mins: dict[str, Any] = {}
        self.maxs: dict[str, Any] = {}
        self.nulls: Counter[str] = Counter()
        self.kinds: dict[str, pa.DataType] = {}

    def add(self, rows: pa.Table | pa.RecordBatch) -> None:
        self.rows += rows.num_rows
        for name, column in zip(rows.schema.names, rows.columns, strict=True):
            self.nulls[name] += column.null_count
            kind = self.kinds.setdefault(name, column.type)
            if column.null_count == len(column) or not (
                pa.types.is_integer(kind)
                or pa.types.is_floating(kind)
                or pa.types.is_timestamp(kind)
            ):
                continue
            low, high = pc.min_max(column).values()
            if pa.types.is_timestamp(kind):
                low, high = low.cast(pa.int64()), high.cast(pa.int64())
            low, high = low.as_py(), high.as_py()
            if pa.types.is_floating(kind) and (math.isnan(low) or math.isnan(high)):
                self.kinds[name] = pa.null()  # no bounds for a column with NaN
                continue
            self.mins[name] = low if name not in self.mins else min(self.mins[name], low)
            self.maxs[name] = high if name not in self.maxs else max(self.maxs[name], high)

    def json(self) -> str:
        def bound(name: str, value: Any, up: bool) -> Any:
            kind = self.kinds[name]
            return _stat_time(value, kind, up=up) if pa.types.is_timestamp(kind) else value

        bounded = [n for n in self.mins if not pa.types.is_null(self.kinds[n])]
        return json.dumps(
            {
                "numRecords": self.rows,
                "minValues": {n: bound(n, self.mins[n], False) for n in bounded},
                "maxValues": {n: bound(n, self.maxs[n], True) for n in bounded},
                "nullCount": dict(self.nulls),
            }
        )


def _stat_time(value: int, kind: pa.TimestampType, *, up: bool) -> str:
    """Millisecond ISO stats (what Spark's Delta parses), rounded outward."""
    per_ms = {"s": 0.001, "ms": 1, "us": 1000, "ns": 1_000_000}[kind.unit]
    millis = math.ceil(value / per_ms) if up else math.floor(value / per_ms)
    moment = datetime.fromtimestamp(millis / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


@dataclass(frozen=True)
class AddedFile:
    """A file an executor wrote; the driver turns it into an ``add`` action."""

    table: str
    path: str
    size: int
    partition_values: dict[str, str | None]
    stats: str
    rows: int


ROWS_WRITTEN = "rowsWritten"
"""``commitInfo`` entry of a table written with ``recordCounts``: the JSON object of the rows
the whole write wrote, by table (``"journal"``) and by counted value (``"journal:ACKED"``,
see :func:`count_key`)."""


def count_key(table: str, value: object) -> str:
    """The :data:`ROWS_WRITTEN` key of a table's rows that hold ``value`` in its counted column."""
    return f"{table}:{value}"


def tables_written(counts: dict[str, int]) -> list[str]:
    """The tables a :data:`ROWS_WRITTEN` object counts, without the per-value keys."""
    return sorted(key for key in counts if ":" not in key)


@dataclass
class LakeCommitMessage(WriterCommitMessage):
    files: list[AddedFile] = field(default_factory=list)
    replaced: dict[str, list[str]] = field(default_factory=dict)  # table -> files its rows replace
    counts: dict[str, int] = field(default_factory=dict)  # rows written (see ROWS_WRITTEN)


def write_files(
    table: pa.Table,
    table_uri: str,
    relative: str,
    partition_by: Sequence[str],
    target_rows: int = TARGET_FILE_ROWS,
) -> list[AddedFile]:
    """Write ``table`` as parquet files under ``table_uri`` (Hive-style partition folders)."""
    files = TableFiles(table_uri, relative, partition_by, table.schema, target_rows)
    files.add(table)
    return files.close()


class TableFiles:
    """The files a task writes into one table, written as its rows arrive.

    Each (partition) file is open until it holds ``target_rows`` rows; rows are buffered
    only up to a row group (:data:`ROW_GROUP_ROWS`) per open file, so a task's memory
    does not grow with the rows it writes: a replay writes millions in one task.
    """

    def __init__(
        self,
        table_uri: str,
        relative: str,
        partition_by: Sequence[str],
        schema: pa.Schema,
        target_rows: int = TARGET_FILE_ROWS,
    ) -> None:
        self.root = table_uri[len("file://") :] if table_uri.startswith("file://") else table_uri
        self.relative = relative
        self.partition_by = list(partition_by)
        self.schema = schema
        self.file_schema = pa.schema([f for f in schema if f.name not in self.partition_by])
        self.target_rows = target_rows
        self.open: dict[tuple[str | None, ...], _OpenFile] = {}
        self.written: list[AddedFile] = []

    def add(self, rows: pa.Table | pa.RecordBatch) -> None:
        for values, part in self._partitions(conform(rows, self.schema)):
            key = tuple(values.values())
            while part.num_rows:
                if key not in self.open:
                    self.open[key] = _OpenFile(self.root, values, self.file_schema)
                file = self.open[key]
                taken = part.slice(0, self.target_rows - file.rows)
                file.add(taken)
                part = part.slice(taken.num_rows)
                if file.rows >= self.target_rows:
                    self.written.append(self.open.pop(key).close(self.relative))

    def close(self) -> list[AddedFile]:
        """Finish every open file; the files this task wrote."""
        for file in self.open.values():
            self.written.append(file.close(self.relative))
        self.open.clear()
        return self.written

    def _partitions(
        self, rows: pa.RecordBatch
    ) -> Iterator[tuple[dict[str, str | None], pa.RecordBatch]]:
        if not self.partition_by:
            yield {}, rows
            return
        keys = (
            pa.Table.from_batches([rows])
            .select(self.partition_by)
            .group_by(self.partition_by)
            .aggregate([])
            .to_pylist()
        )
        for key in keys:
            mask = None
            for name, value in key.items():
                test = pc.is_null(rows[name]) if value is None else pc.equal(rows[name], value)
                mask = test if mask is None else pc.and_(mask, test)
            part = rows.filter(mask).drop_columns(self.partition_by)
            yield {k: None if v is None else str(v) for k, v in key.items()}, part


class _OpenFile:
    """One parquet file being written a row group at a time."""

    def __init__(self, root: str, values: dict[str, str | None], schema: pa.Schema) -> None:
        folder = "/".join(f"{k}={_partition_dir(v)}" for k, v in values.items())
        name = f"part-{uuid.uuid4()}-c000.snappy.parquet"
        self.path = f"{folder}/{name}" if folder else name
        self.location = f"{root.rstrip('/')}/{self.path}"
        self.values = values
        self.schema = schema
        self.rows = 0
        self.stats = FileStats()
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.writer: pq.ParquetWriter | None = None

    def add(self, rows: pa.RecordBatch) -> None:
        self.pending.append(rows)
        self.pending_rows += rows.num_rows
        self.rows += rows.num_rows
        if self.pending_rows >= ROW_GROUP_ROWS:
            self._write_group()

    def _write_group(self) -> None:
        if not self.pending_rows:
            return
        group = pa.Table.from_batches(self.pending, schema=self.schema)
        self.pending, self.pending_rows = [], 0
        if self.writer is None:
            os.makedirs(os.path.dirname(self.location), exist_ok=True)
            self.writer = pq.ParquetWriter(
                self.location,
                self.schema,
                compression="snappy",
                coerce_timestamps="us",
                **encodings(self.schema),
            )
        self.stats.add(group)
        self.writer.write_table(group, row_group_size=ROW_GROUP_ROWS)

    def close(self, relative: str) -> AddedFile:
        self._write_group()
        assert self.writer is not None  # a file is only opened with rows
        self.writer.close()
        size = os.path.getsize(self.location)
        return AddedFile(relative, self.path, size, self.values, self.stats.json(), self.rows)


def encodings(schema: pa.Schema) -> dict[str, list[str]]:
    """Parquet statistics for the columns a reader can prune on (numbers, times, booleans)
    and dictionary encoding for strings, map keys and values included (addresses, queues,
    statuses, property names repeat a lot), never for bodies: statistics and dictionaries
    of binary bodies cost most of pyarrow's default writing time (3x) and serve no reader,
    and the files come out a little smaller."""
    dictionary = []
    for f in schema:
        if pa.types.is_string(f.type):
            dictionary.append(f.name)
        elif pa.types.is_map(f.type):
            for leaf, kind in (("key", f.type.key_type), ("value", f.type.item_type)):
                if pa.types.is_string(kind):
                    dictionary.append(f"{f.name}.key_value.{leaf}")
    return {
        "write_statistics": [
            f.name
            for f in schema
            if pa.types.is_integer(f.type)
            or pa.types.is_floating(f.type)
            or pa.types.is_temporal(f.type)
            or pa.types.is_boolean(f.type)
        ],
        "use_dictionary": dictionary,
    }


def _partition_dir(value: str | None) -> str:
    if value is None:
        return "__HIVE_DEFAULT_PARTITION__"
    if not value or not set(value) <= _SAFE_PARTITION:
        raise ValueError(f"partition value {value!r}: only letters, digits and . _ - are supported")
    return value


# --------------------------------------------------------------------------------------
# Commits (driver)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableWrite:
    """What one table receives in a commit, besides the files the executors wrote."""

    uri: str
    schema: pa.Schema
    partition_by: tuple[str, ...] = ()
    overwrite: bool = False
    remove_paths: tuple[str, ...] = ()
    user_metadata: str | None = None
    commit_empty: bool = False
    replace_files_column: str | None = None  # rows name the file they replace in this column
    count_by: str | None = None  # rows written are also counted per value of this column
    record_counts: bool = False  # this table's commit records the write's row counts


def commit(
    write: TableWrite,
    files: Sequence[AddedFile],
    txn: tuple[str, int] | None = None,
    info: Mapping[str, str] | None = None,
) -> bool:
    """Make ONE Delta commit adding ``files`` (and removing ``remove_paths``).

    With ``txn`` = (app id, version) the commit records that app transaction, and is
    skipped (its files deleted) when the table already holds a version ``>=`` it.
    :param info: more ``commitInfo`` entries (e.g. :data:`ROWS_WRITTEN`).
    :return: True if a commit was made.
    """
    custom = dict(info or {})
    if write.user_metadata:
        custom["userMetadata"] = write.user_metadata
    properties = CommitProperties(
        custom_metadata=custom or None,
        app_transactions=[Transaction(txn[0], txn[1])] if txn else None,
    )
    now = int(time.time() * 1000)
    adds = [
        AddAction(
            path=f.path,
            size=f.size,
            partition_values=f.partition_values,
            modification_time=now,
            data_change=True,
            stats=f.stats,
        )
        for f in files
    ]
    if not is_table(write.uri):
        create_table_with_add_actions(
            write.uri,
            _delta_schema(write.schema),
            adds,
            mode="append",
            partition_by=list(write.partition_by) or None,
            commit_properties=properties,
        )
        return True
    table = DeltaTable(write.uri)
    if txn is not None:
        done = table.transaction_version(txn[0])
        if done is not None and done >= txn[1]:
            _delete(write.uri, files)
            return False
    if not adds and not write.remove_paths and not write.overwrite and not write.commit_empty:
        return False
    removes = []
    if write.remove_paths:
        current = {f.path: f for f in TableLog(write.uri).snapshot()}
        for path in write.remove_paths:
            if path in current:
                removes.append(
                    RemoveAction(
                        path=path,
                        deletion_timestamp=now,
                        data_change=True,
                        partition_values=dict(current[path].partition_values),
                        size=current[path].size,
                    )
                )
    table.create_write_transaction(
        adds + removes,
        mode="overwrite" if write.overwrite else "append",
        schema=_delta_schema(pa.schema(table.schema().to_arrow())),
        partition_by=list(write.partition_by) or None,
        commit_properties=properties,
    )
    return True


def _delta_schema(schema: pa.Schema):
    from deltalake import Schema

    return Schema.from_arrow(schema)


def _delete(uri: str, files: Iterable[AddedFile]) -> None:
    root = uri[len("file://") :] if uri.startswith("file://") else uri
    for f in files:
        with contextlib.suppress(FileNotFoundError):
            os.remove(f"{root.rstrip('/')}/{f.path}")


def ensure_columns(uri: str, schema: pa.Schema) -> pa.Schema:
    """Add to an existing table the columns of ``schema`` it lacks (a producer may leave out
    the optional message columns; the job's copies carry them all). Returns the table schema."""
    table = DeltaTable(uri)
    current = pa.schema(table.schema().to_arrow())
    missing = [f for f in schema if current.get_field_index(f.name) < 0]
    if missing:
        from deltalake import Field

        table.alter.add_columns([Field.from_arrow(f.with_nullable(True)) for f in missing])
        current = pa.schema(DeltaTable(uri).schema().to_arrow())
    return current


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileSlice:
    """A file to read (or some of its row groups), with what a reader needs (picklable)."""

    location: str
    path: str
    partition_values: Mapping[str, str | None]
    version: int
    row_groups: tuple[int, ...] | None = None
    first_row: int = 0


class FilesPartition(InputPartition):
    def __init__(self, files: Sequence[FileSlice]) -> None:
        super().__init__(list(files))
        self.files = list(files)


def split_large(pieces: Sequence[Any], sizes: Sequence[int], tasks: int) -> tuple[list, list[int]]:
    """Split each file larger than its fair share of the work into row-group ranges.

    ``pieces`` are frozen dataclasses with ``location``, ``row_groups`` and
    ``first_row`` fields; only the footers of the large files are read.
    """
    share = max(sum(sizes) // max(tasks, 1), 1)
    out, out_sizes = [], []
    for piece, size in zip(pieces, sizes, strict=True):
        if size <= share or piece.row_groups is not None:
            out.append(piece)
            out_sizes.append(size)
            continue
        meta = pq.ParquetFile(piece.location).metadata
        if meta.num_row_groups < 2:
            out.append(piece)
            out_sizes.append(size)
            continue
        total = sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups)) or 1
        chunk: list[int] = []
        chunk_bytes = first = row = 0
        for group in range(meta.num_row_groups):
            if not chunk:
                first = row
            chunk.append(group)
            chunk_bytes += meta.row_group(group).total_byte_size
            row += meta.row_group(group).num_rows
            if chunk_bytes * size >= share * total or group == meta.num_row_groups - 1:
                out.append(replace(piece, row_groups=tuple(chunk), first_row=first))
                out_sizes.append(max(size * chunk_bytes // total, 1))
                chunk, chunk_bytes = [], 0
    return out, out_sizes


def plan_partitions(files: Sequence[Any], sizes: Sequence[int], tasks: int) -> list[FilesPartition]:
    """Bin-pack files (split when large) into about ``tasks`` partitions of similar size."""
    if not files:
        return []
    files, sizes = split_large(files, sizes, tasks)
    order = sorted(range(len(files)), key=lambda i: -sizes[i])
    bins: list[list[int]] = [[] for _ in range(min(tasks, len(files)))]
    loads = [0] * len(bins)
    for i in order:
        target = loads.index(min(loads))
        bins[target].append(i)
        loads[target] += max(sizes[i], 1)
    return [FilesPartition([files[i] for i in sorted(b)]) for b in bins if b]


def _options(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def _parallelism() -> int:
    spark = SparkSession.getActiveSession()
    if spark is None:
        return 2
    return max(2, spark.sparkContext.defaultParallelism)


class _LakeFileReader:
    """Shared by batch and streaming readers: files -> conformed Arrow batches."""

    schema: pa.Schema
    with_file: bool

    def read(self, partition: FilesPartition) -> Iterator[pa.RecordBatch]:
        # Spark plans one bare InputPartition when partitions() returns none
        for file in getattr(partition, "files", ()):
            yield from read_file(
                file.location,
                self.schema,
                file.partition_values,
                file_column=file.path if self.with_file else None,
                row_groups=file.row_groups,
            )


class LakeReader(_LakeFileReader, DataSourceReader):
    def __init__(self, path: str, schema: pa.Schema, options: Mapping[str, str]) -> None:
        self.path = path
        self.schema = schema
        self.with_file = options.get("withfilepath", "false").lower() == "true"
        self.version = int(options["versionasof"]) if "versionasof" in options else None
        self.partition_filter: dict[str, list[str]] = json.loads(
            options.get("partitionfilter", "{}")
        )

    def partitions(self) -> Sequence[InputPartition]:
        if not is_table(self.path):
            return []
        files = [
            f
            for f in TableLog(self.path).snapshot(self.version)
            if all(f.partition_values.get(k) in v for k, v in self.partition_filter.items())
        ]
        slices = [
            FileSlice(f.location(self.path), f.path, dict(f.partition_values), f.version)
            for f in files
        ]
        return plan_partitions(slices, [f.size for f in files], _parallelism())


# --------------------------------------------------------------------------------------
# Streaming read: offsets are positions in the log, {"version": v, "index": i}:
# every data file added by versions < v, plus the first i files added by version v.
# --------------------------------------------------------------------------------------


class LakeStreamReader(_LakeFileReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, path: str, schema: pa.Schema, options: Mapping[str, str]) -> None:
        self.path = path
        self.schema = schema
        self.with_file = options.get("withfilepath", "false").lower() == "true"
        self.starting = options.get("startingversion", "0")
        self.max_files = (
            int(options["maxfilespertrigger"]) if "maxfilespertrigger" in options else None
        )
        self.max_rows = (
            int(options["maxrowspertrigger"]) if "maxrowspertrigger" in options else None
        )
        self.cap: int | None = None
        self._log = TableLog(path)

    def initialOffset(self) -> dict:
        if self.starting == "latest":
            return {"version": self._log.version() + 1, "index": 0}
        return {"version": int(self.starting), "index": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_files is not None:
            return ReadMaxFiles(self.max_files)
        if self.max_rows is not None:
            return ReadMaxRows(self.max_rows)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.cap = self._log.version()

    def _latest_version(self) -> int:
        latest = self._log.version()
        return latest if self.cap is None else min(latest, self.cap)

    def _files_between(self, start: dict, end: dict) -> list[tuple[int, int, DataFile]]:
        """(version, index, file) of every data file at a position in ``[start, end)``."""
        out = []
        last = min(end["version"], self._log.version())
        for version in range(max(start["version"], 0), last + 1):
            for index, f in enumerate(self._log.added(version - 1, version)):
                if (
                    (start["version"], start["index"])
                    <= (version, index)
                    < (end["version"], end["index"])
                ):
                    out.append((version, index, f))
        return out

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        latest = self._latest_version()
        end = {"version": latest + 1, "index": 0}
        if latest < start["version"]:
            return start
        files = self._files_between(start, end)
        if isinstance(limit, ReadAllAvailable) or not files:
            return end
        max_files = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        rows = 0
        for taken, (version, index, f) in enumerate(files):
            if taken and (
                (max_files is not None and taken >= max_files)
                or (max_rows is not None and rows + (f.num_records or 0) > max_rows)
            ):
                return {"version": version, "index": index}
            rows += f.num_records or 0
        return end

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        files = [f for _, _, f in self._files_between(start, end)]
        slices = [
            FileSlice(f.location(self.path), f.path, dict(f.partition_values), f.version)
            for f in files
        ]
        return plan_partitions(slices, [f.size for f in files], _parallelism())

    def commit(self, end: dict) -> None:
        pass


# --------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WritePlan:
    """Everything executors and the driver need to write one DataFrame (picklable).

    Single table: ``table_column`` is None and ``tables`` has one entry, key "".
    Several tables: each row goes to the table named (relative to ``root``) by its
    ``table_column``; ``tables`` gives per-table settings, "addresses/*" matches any
    address table.
    """

    root: str
    tables: Mapping[str, TableWrite]
    order: tuple[str, ...]
    table_column: str | None = None
    txn_app_id: str | None = None
    txn_version: int | None = None
    target_rows: int = TARGET_FILE_ROWS

    def settings(self, relative: str) -> TableWrite:
        if relative in self.tables:
            return self.tables[relative]
        for pattern, write in self.tables.items():
            if pattern.endswith("/*") and relative.startswith(pattern[:-1]):
                return write
        raise ValueError(f"no table settings for {relative!r}")

    def uri(self, relative: str) -> str:
        return self.root if not relative else f"{self.root.rstrip('/')}/{relative}"

    def write(self, batches: Iterator[pa.RecordBatch]) -> LakeCommitMessage:
        """Executor side: route rows to their tables and write the files as they come."""
        files: dict[str, TableFiles] = {}
        replaced: dict[str, set[str]] = {}
        counts: Counter[str] = Counter()
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if self.table_column is None:
                groups = [("", batch)]
            else:
                tables = batch.column(self.table_column)
                groups = [
                    (name, batch.filter(pc.equal(tables, name)))
                    for name in pc.unique(tables).to_pylist()
                    if name is not None
                ]
            for relative, rows in groups:
                if not rows.num_rows:
                    continue
                settings = self.settings(relative)
                counts[relative] += rows.num_rows
                if settings.count_by is not None:
                    for item in pc.value_counts(rows.column(settings.count_by)).to_pylist():
                        counts[count_key(relative, item["values"])] += item["counts"]
                column = settings.replace_files_column
                if column is not None:
                    names = pc.unique(rows.column(column)).to_pylist()
                    replaced.setdefault(relative, set()).update(n for n in names if n is not None)
                if relative not in files:
                    files[relative] = TableFiles(
                        self.uri(relative),
                        relative,
                        settings.partition_by,
                        settings.schema,
                        self.target_rows,
                    )
                files[relative].add(rows)
        written = [f for table in files.values() for f in table.close()]
        return LakeCommitMessage(
            written, {t: sorted(names) for t, names in replaced.items()}, dict(counts)
        )

    def commit(
        self, messages: Sequence[WriterCommitMessage | None], txn_version: int | None
    ) -> list[str]:
        """Driver side: one commit per table, in ``order`` (address tables first)."""
        by_table: dict[str, list[AddedFile]] = {}
        replaced: dict[str, set[str]] = {}
        counts: Counter[str] = Counter()
        for message in messages:
            if isinstance(message, LakeCommitMessage):
                for f in message.files:
                    by_table.setdefault(f.table, []).append(f)
                for table, names in message.replaced.items():
                    replaced.setdefault(table, set()).update(names)
                counts.update(message.counts)
        info = {ROWS_WRITTEN: json.dumps(dict(sorted(counts.items())))}
        named = [t for t in self.order if t in self.tables and not t.endswith("/*")]
        others = sorted(t for t in by_table if t not in named)
        txn = (
            (self.txn_app_id, txn_version) if self.txn_app_id and txn_version is not None else None
        )
        committed = []
        for relative in others + named:
            files = by_table.get(relative, [])
            settings = self.settings(relative)
            removes = tuple(sorted(set(settings.remove_paths) | replaced.get(relative, set())))
            if not files and not (settings.commit_empty or settings.overwrite or removes):
                continue
            uri = self.uri(relative)
            if is_table(uri) and files:
                ensure_columns(uri, settings.schema)
            recorded = info if settings.record_counts else None
            if commit(replace(settings, uri=uri, remove_paths=removes), files, txn, recorded):
                committed.append(relative)
        return committed

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        for message in messages:
            if isinstance(message, LakeCommitMessage):
                for f in message.files:
                    _delete(self.uri(f.table), [f])


class LakeWriter(DataSourceArrowWriter):
    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self.plan.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.plan.commit(messages, self.plan.txn_version)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self.plan.abort(messages)


class LakeStreamWriter(DataSourceStreamArrowWriter):
    """Each micro-batch is one commit carrying (``txnAppId``, batch id): a batch Spark
    replays after a crash finds its transaction in the table and is skipped."""

    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self.plan.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self.plan.commit(messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self.plan.abort(messages)


def write_plan(
    schema: StructType, overwrite: bool, options: Mapping[str, str], *, streaming: bool
) -> WritePlan:
    """Build the plan of a write from the DataFrame schema and the writer options."""
    path = options.get("path")
    if not path:
        raise ValueError("the lake writer needs a path: .save(path) or .option('path', ...)")
    arrow = to_arrow_schema(schema, timezone="UTC")
    table_column = options.get("tablecolumn")
    app_id = options.get("txnappid")
    if streaming and not app_id:
        app_id = f"lake-stream:{path}"
    version = options.get("txnversion")
    target_rows = int(options.get("targetfilerows", TARGET_FILE_ROWS))
    if table_column is None:
        partition_by = _partition_by(path, options.get("partitionby", "").split(","), overwrite)
        table_schema = TableLog(path).schema() if is_table(path) and not overwrite else arrow
        tables = {
            "": TableWrite(
                path,
                _merge_schema(table_schema, arrow),
                partition_by,
                overwrite,
                tuple(json.loads(options.get("replacefiles", "[]"))),
                options.get("usermetadata"),
                options.get("commitempty", "false").lower() == "true",
            )
        }
        order: tuple[str, ...] = ("",)
    else:
        specs: dict[str, dict[str, Any]] = json.loads(options["tables"])
        tables = {}
        for relative, spec in specs.items():
            columns = spec.get("columns") or [n for n in arrow.names if n != table_column]
            projected = pa.schema([arrow.field(c) for c in columns])
            uri = f"{path.rstrip('/')}/{relative}"
            if not relative.endswith("/*") and is_table(uri):
                projected = _merge_schema(TableLog(uri).schema(), projected)
            tables[relative] = TableWrite(
                uri,
                projected,
                _partition_by(uri, spec.get("partitionBy", ()), bool(spec.get("overwrite", False))),
                bool(spec.get("overwrite", False)),
                tuple(spec.get("replaceFiles", ())),
                spec.get("userMetadata"),
                bool(spec.get("commitEmpty", False)),
                spec.get("replaceFilesColumn"),
                spec.get("countBy"),
                bool(spec.get("recordCounts", False)),
            )
        order = tuple(specs)
    return WritePlan(
        root=path,
        tables=tables,
        order=order,
        table_column=table_column,
        txn_app_id=app_id,
        txn_version=int(version) if version is not None else None,
        target_rows=target_rows,
    )


def _partition_by(uri: str, requested: Sequence[str], overwrite: bool) -> tuple[str, ...]:
    """An existing table keeps its partitioning (an append cannot change it)."""
    if is_table(uri) and not overwrite:
        return tuple(TableLog(uri).partition_columns())
    return tuple(p for p in requested if p)


def _merge_schema(table: pa.Schema, incoming: pa.Schema) -> pa.Schema:
    """The table's schema with the incoming columns it lacks appended (they are added on commit)."""
    extra = [f for f in incoming if table.get_field_index(f.name) < 0]
    return pa.schema(list(table) + extra) if extra else table


# --------------------------------------------------------------------------------------
# The data source
# --------------------------------------------------------------------------------------


class LakeDataSource(DataSource):
    """``spark.read.format("lake").load(path)`` and friends: a Delta table through delta-rs."""

    @classmethod
    def name(cls) -> str:
        return "lake"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.opts = _options(options)

    def _path(self) -> str:
        path = self.opts.get("path")
        if not path:
            raise ValueError("the lake source needs a path: .load(path)")
        return path

    def _table_schema(self) -> pa.Schema:
        path = self._path()
        if not is_table(path):
            raise FileNotFoundError(f"no Delta table at {path}")
        version = int(self.opts["versionasof"]) if "versionasof" in self.opts else None
        return TableLog(path).schema(version)

    def schema(self) -> StructType:
        schema = from_arrow_schema(self._table_schema())
        if self.opts.get("withfilepath", "false").lower() == "true":
            schema = schema.add(StructField(FILE_PATH_COLUMN, StringType()))
        return schema

    def _read_schema(self, schema: StructType) -> pa.Schema:
        return to_arrow_schema(schema, timezone="UTC")

    def reader(self, schema: StructType) -> DataSourceReader:
        return LakeReader(self._path(), self._read_schema(schema), self.opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return LakeStreamReader(self._path(), self._read_schema(schema), self.opts)

    def writer(self, schema: StructType, overwrite: bool) -> LakeWriter:
        return LakeWriter(write_plan(schema, overwrite, self.opts, streaming=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> LakeStreamWriter:
        return LakeStreamWriter(write_plan(schema, overwrite, self.opts, streaming=True))


DATA_SOURCES: list[type[DataSource]] = [LakeDataSource]


def register(spark: SparkSession) -> None:
    """Register the lake data sources with ``spark`` (once per session)."""
    from routing import lake_events

    for source in [*DATA_SOURCES, *lake_events.DATA_SOURCES]:
        spark.dataSource.register(source)
