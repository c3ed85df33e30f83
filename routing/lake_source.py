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
  each, in a fixed order: the job commits a whole micro-batch in one Spark job.

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


def _stats(table: pa.Table) -> str:
    """Delta file statistics: min/max only for numbers, booleans and timestamps (exact or
    widened outward), never for strings, so no reader can wrongly skip a file."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        nulls[name] = column.null_count
        kind = column.type
        if column.null_count == len(column) or not (
            pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_timestamp(kind)
        ):
            continue
        low, high = pc.min_max(column).values()
        if pa.types.is_timestamp(kind):
            mins[name] = _stat_time(low.cast(pa.int64()).as_py(), kind, up=False)
            maxs[name] = _stat_time(high.cast(pa.int64()).as_py(), kind, up=True)
        elif pa.types.is_floating(kind):
            lo, hi = low.as_py(), high.as_py()
            if math.isnan(lo) or math.isnan(hi):
                continue
            mins[name], maxs[name] = lo, hi
        else:
            mins[name], maxs[name] = low.as_py(), high.as_py()
    return json.dumps(
        {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
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


@dataclass
class LakeCommitMessage(WriterCommitMessage):
    files: list[AddedFile] = field(default_factory=list)
    replaced: dict[str, list[str]] = field(default_factory=dict)  # table -> files its rows replace


def write_files(
    table: pa.Table,
    table_uri: str,
    relative: str,
    partition_by: Sequence[str],
    target_rows: int = TARGET_FILE_ROWS,
) -> list[AddedFile]:
    """Write ``table`` as parquet files under ``table_uri`` (Hive-style partition folders)."""
    if table.num_rows == 0:
        return []
    groups: list[tuple[dict[str, str | None], pa.Table]]
    if partition_by:
        keys = (
            table.select(list(partition_by)).group_by(list(partition_by)).aggregate([]).to_pylist()
        )
        groups = []
        for key in keys:
            mask = None
            for name, value in key.items():
                test = pc.is_null(table[name]) if value is None else pc.equal(table[name], value)
                mask = test if mask is None else pc.and_(mask, test)
            part = table.filter(mask).drop_columns(list(partition_by))
            groups.append(({k: None if v is None else str(v) for k, v in key.items()}, part))
    else:
        groups = [({}, table)]
    written = []
    root = table_uri[len("file://") :] if table_uri.startswith("file://") else table_uri
    for values, part in groups:
        folder = "/".join(f"{k}={_partition_dir(v)}" for k, v in values.items())
        for offset in range(0, part.num_rows, target_rows):
            chunk = part.slice(offset, target_rows)
            name = f"part-{uuid.uuid4()}-c000.snappy.parquet"
            path = f"{folder}/{name}" if folder else name
            location = f"{root.rstrip('/')}/{path}"
            os.makedirs(os.path.dirname(location), exist_ok=True)
            pq.write_table(
                chunk,
                location,
                compression="snappy",
                coerce_timestamps="us",
                row_group_size=ROW_GROUP_ROWS,
            )
            written.append(
                AddedFile(
                    relative, path, os.path.getsize(location), values, _stats(chunk), chunk.num_rows
                )
            )
    return written


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


def commit(
    write: TableWrite,
    files: Sequence[AddedFile],
    txn: tuple[str, int] | None = None,
) -> bool:
    """Make ONE Delta commit adding ``files`` (and removing ``remove_paths``).

    With ``txn`` = (app id, version) the commit records that app transaction, and is
    skipped (its files deleted) when the table already holds a version ``>=`` it.
    :return: True if a commit was made.
    """
    properties = CommitProperties(
        custom_metadata={"userMetadata": write.user_metadata} if write.user_metadata else None,
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
        """Executor side: route rows to their tables and write the files."""
        pending: dict[str, list[pa.RecordBatch]] = {}
        files: list[AddedFile] = []
        replaced: dict[str, set[str]] = {}

        def flush(relative: str) -> None:
            chunk = pa.Table.from_batches(pending.pop(relative))
            settings = self.settings(relative)
            data = (
                pa.Table.from_batches([conform(chunk, settings.schema)])
                if chunk.num_rows
                else chunk
            )
            files.extend(
                write_files(
                    data, self.uri(relative), relative, settings.partition_by, self.target_rows
                )
            )

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
                column = self.settings(relative).replace_files_column
                if column is not None and rows.num_rows:
                    names = pc.unique(rows.column(column)).to_pylist()
                    replaced.setdefault(relative, set()).update(n for n in names if n is not None)
                pending.setdefault(relative, []).append(rows)
                if sum(b.num_rows for b in pending[relative]) >= self.target_rows:
                    flush(relative)
        for relative in list(pending):
            flush(relative)
        return LakeCommitMessage(files, {t: sorted(names) for t, names in replaced.items()})

    def commit(
        self, messages: Sequence[WriterCommitMessage | None], txn_version: int | None
    ) -> list[str]:
        """Driver side: one commit per table, in ``order`` (address tables first)."""
        by_table: dict[str, list[AddedFile]] = {}
        replaced: dict[str, set[str]] = {}
        for message in messages:
            if isinstance(message, LakeCommitMessage):
                for f in message.files:
                    by_table.setdefault(f.table, []).append(f)
                for table, names in message.replaced.items():
                    replaced.setdefault(table, set()).update(names)
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
            if commit(replace(settings, uri=uri, remove_paths=removes), files, txn):
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
