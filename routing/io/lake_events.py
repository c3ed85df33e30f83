"""The job's input: every input table of a lake as one stream, cut in event time.

``stream(spark, lake_root, options)`` is the stream: a source of the JVM's whose batches
:class:`LakeEventsReader` plans in the driver (:class:`LakeEventsPlanner`), or, without the
job's jar, the ``lake_events`` Python data source around the same reader. Its
offsets are ``{"base": {source: v}, "tables": {source: v}, "until": t, "asOf": a}``
and a batch holds the rows of every ``addresses/*`` table, ``deliveries/`` and
``management/`` of those table versions whose event time (``sent_at`` or ``at``) is
at most ``until`` and that no earlier batch held. ``maxEventsPerTrigger`` lowers
``until`` instead of cutting versions, so a rate-limited run and a single batch see
the same events in the same event-time order (docs/DESIGN.md). Rows that arrive later
with an older time come in the next batch. ``asOf`` (option) is the ``--as-of`` of
SPEC §5.4: raising it alone makes a new batch. An offset's ``asOf`` is the as-of its
batch may apply: at most ``until`` while rows are held back, as a later batch may hold
rows earlier than the as-of (:func:`batch_as_of`); the batch that reads the last of them
applies the rest.

The routing job's own commits (its copies appended to address tables) are not offered
(:class:`routing.io.delta_tables.TableFiles`): a table version only they made is no new
data, so a batch that wrote copies is not followed by one that reads them back.

The stream's rows are not the input rows but the *slices* a batch reads (:data:`SLICE`:
a data file, the version that added it, the event-time range to take from it), planned
from the tables' Delta metadata (:mod:`routing.io.delta_tables`). :func:`read_events`
reads them with Spark's own Parquet reader, in the JVM, into :data:`EVENT` rows with
their position (``version``, ``file``, ``row``) for a stable order; no input row goes
through a Python worker.

A row whose values cannot be read as the SPEC types (a timestamp without a zone, a
properties map of numbers, an id that is not an integer...) is still emitted, with
``error`` saying why and ``raw`` holding the row as JSON, so the job can put it in
``rejected/`` (:mod:`routing.plan.normalise`). A table that lacks a required column is an
error of the lake, not of a row: the query stops with :class:`LakeError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import cache, lru_cache, partial
from itertools import groupby
from pathlib import PurePath
from typing import ClassVar

import pyarrow as pa
from deltalake.exceptions import DeltaError
from pyspark.errors import AnalysisException
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import Column, DataFrame, DataFrameReader, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.classic.column import Column as ClassicColumn
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import LongType, StringType, StructField, StructType

from routing.broker import layout
from routing.broker.properties import INTEGRAL_RANGES, PROPERTY_TYPES, TEXT_PATTERNS
from routing.io import lake
from routing.io.delta_tables import (
    CATCH_UP_COMMITS,
    DataFile,
    LogCleanedUpError,
    TableFiles,
    epoch_micros,
    latest_schema,
    log_version,
    row_count,
    unreadable_commit,
)
from routing.io.jvm import jvm_class
from routing.plan._columns import local_frame, union_of
from routing.plan.normalise import (
    EVENT,
    KINDS,
    POSITION,
    TABLE,
    TABLE_ADDRESS,
    RowChecks,
    kind_name,
    normalise_tables,
)

UNBOUNDED = 1 << 62
"""``until`` of an offset with no time bound (µs; far beyond any real time)."""
NO_AS_OF = -(1 << 62)

AS_OF, MAX_EVENTS_PER_TRIGGER = "asOf", "maxEventsPerTrigger"
"""The source's options (:func:`stream_options` sets them, the reader reads them)."""
CATCH_UP = "catchUpCommits"
"""The source's option: how far behind the version it is asked from a table's view reads
commits one by one rather than start from the last checkpoint before it (default
:data:`~routing.io.delta_tables.CATCH_UP_COMMITS`; a number past any history: the plain
path, every commit read)."""


class LakeError(ValueError):
    """An input table cannot be used as it is (it lacks a column the SPEC requires, its
    log cannot be read): the lake is unusable until it is mended."""


def input_sources(root: lake.Lake) -> list[str]:
    """Lake paths of every input table that exists now."""
    return list(input_versions(root))


def input_versions(root: lake.Lake, since: Mapping[str, int] | None = None) -> dict[str, int]:
    """Every input table that exists now, with its latest version, looked for from the one
    ``since`` gives it or its last checkpoint's (:func:`log_version`)."""
    since = since or {}
    fixed = {
        s: log_version(root.table(s), since.get(s, -1))
        for s in (layout.DELIVERIES, layout.MANAGEMENT)
    }
    return root.address_versions(since) | {s: v for s, v in fixed.items() if v >= 0}


def check_table(root: lake.Lake, source: str, schema: pa.Schema | None = None) -> None:
    """Raise :class:`LakeError` if the table ``source`` (its ``schema``, when known)
    lacks a required column."""
    kind = KINDS[kind_name(source)]
    if schema is None:
        try:
            schema = latest_schema(root.table(source))
        except (DeltaError, ValueError) as error:  # ValueError: a commit file not JSON
            raise LakeError(unreadable(root, source, error)) from error
    names = set(schema.names)
    missing = [c for c in kind.required if c not in names]
    if missing:
        raise LakeError(
            f"table {source}: missing required column(s) {', '.join(missing)}; "
            f"expected the columns of SPEC §3 ({', '.join(kind.schema.names)})"
        )


def unreadable(root: lake.Lake, source: str, error: Exception) -> str:
    """What to say of the table ``source`` whose Delta log failed to load with ``error``."""
    found = unreadable_commit(root.table(source))
    if found is None:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return f"table {source}: its Delta log cannot be read: {first}"
    version, why = found
    return (
        f"table {source}: commit {version} (_delta_log/{version:020d}.json) is not a "
        f"valid Delta commit ({why}); restore the file from a backup, or have its writer "
        "write that commit again"
    )


def check_lake(root: lake.Lake) -> list[str]:
    """Check every input table of the lake; return their sources."""
    sources = input_sources(root)
    for source in sources:
        check_table(root, source)
    return sources


def inputs_within(root: lake.Lake, sources: Iterable[str], rows: int) -> bool:
    """True when the input tables ``sources`` hold at most ``rows`` rows together, by
    their files' statistics (a file without a count: False). Counted table by table, and
    no further once past ``rows``: a big lake's other tables' logs are not read."""
    total = 0
    for source in sources:
        count = row_count(root.table(source))
        if count is None:
            return False
        total += count
        if total > rows:
            return False
    return True


# --------------------------------------------------------------------------------------
# Slices: what a batch reads
# --------------------------------------------------------------------------------------

SLICE = pa.schema(
    [
        ("source", pa.string()),
        ("location", pa.string()),
        ("file", pa.string()),
        ("version", pa.int64()),
        ("after", pa.int64()),
        ("upto", pa.int64()),
        ("schema", pa.string()),
        ("rows", pa.int64()),
    ]
)
"""One data file a batch reads: the rows of ``file`` (of table ``source`` at
``location``, added by ``version``) whose event time is in ``(after, upto]``; ``after``
null: any time up to ``upto``, nulls included (a file is read so exactly once, when it is
new). ``schema`` is the table's Spark schema (JSON), so that every file of a table reads
alike. ``rows``: the file's rows, as its statistics say (null: they do not), so a batch
knows its size before it reads anything (:func:`batch_rows`)."""


def slice_row(
    source: str, table: str, f: DataFile, after: int | None, upto: int, schema: str
) -> tuple:
    return (source, f.location(table), f.path, f.version, after, upto, schema, f.num_records)


def batch_rows(slices: Sequence[Row]) -> int | None:
    """At most how many input rows a batch's slices hold (None: a file's statistics do
    not say): a file read again from a cut counts whole."""
    counts = [s.rows for s in slices]
    return None if None in counts else sum(counts)


def batch_as_of(slices: Sequence[Row], as_of: int | None) -> int | None:
    """The ``--as-of`` a batch of ``slices`` may apply: up to its cut only, as the offsets
    say (a later batch may hold rows earlier than the as-of)."""
    cut = min((s.upto for s in slices), default=UNBOUNDED)
    return as_of if as_of is None or cut >= UNBOUNDED else min(as_of, cut)


_FOLDER, _FILE_NAME = "_parent", "_file_name"


def slice_key(locations: Sequence[str]) -> tuple[str, ...]:
    """What joins a row read to its slice, for a read of the files at ``locations``: its
    file's name, when no two of them share one (Delta and delta-rs name a data file
    after a UUID); its file's folder and name otherwise (a table's files are named
    uniquely, two tables' are told apart by their folders).

    The folder is cut from each row's path (two splits and a URL decoding, row by row:
    a fifth of the 1M demo's input query, docs/PERFORMANCE.md), so it is taken only
    when the names do not tell the files apart."""
    names = [PurePath(location).name for location in locations]
    return (_FILE_NAME,) if len(set(names)) == len(names) else (_FOLDER, _FILE_NAME)


_AFTER, _UPTO = "_after", "_upto"

_SLICE_COLUMNS = StructType(
    [
        StructField(_FOLDER, StringType()),
        StructField(_FILE_NAME, StringType()),
        StructField(TABLE, StringType()),
        StructField(TABLE_ADDRESS, StringType()),
        StructField(POSITION["version"], LongType()),
        StructField(POSITION["file"], StringType()),
        StructField(_AFTER, LongType()),
        StructField(_UPTO, LongType()),
    ]
)


def read_events(spark: SparkSession, slices: Sequence[Row]) -> DataFrame:
    """The input rows of a batch's slices as :data:`EVENT` rows, read by Spark's Parquet
    reader and normalised to the SPEC types, rows checked by :func:`row_checks`.

    One read for the tables of a kind that share a schema (every address table, usually):
    each row finds its table, position and event-time range by joining its file to the
    slices (broadcast), so the plan is the same for one address table or thousands.

    Example::

        events = read_events(spark, batch.collect())  # in foreachBatch
    """
    frames = []
    checks = row_checks(spark)
    ordered = sorted(slices, key=lambda s: (kind_name(s.source), s.schema))
    for (kind, schema), group in groupby(ordered, key=lambda s: (kind_name(s.source), s.schema)):
        pieces = list(group)
        found = local_frame(
            spark,
            [
                (
                    *_folder_and_name(p.location),
                    p.source,
                    layout.address_of_source(p.source),
                    p.version,
                    p.file,
                    p.after,
                    p.upto,
                )
                for p in pieces
            ],
            _SLICE_COLUMNS,
        )
        locations = [p.location for p in pieces]
        key = slice_key(locations)
        position = {
            _FILE_NAME: F.col("_metadata.file_name"),
            POSITION["row"]: F.col("_metadata.row_index"),
        }
        if _FOLDER in key:
            # the folder's name by two splits, not a regular expression: its
            # unanchored search tried every position of the path, for every row
            path = F.col("_metadata.file_path")
            position[_FOLDER] = F.url_decode(
                F.substring_index(F.substring_index(path, "/", -2), "/", 1)
            )
        else:
            found = found.drop(_FOLDER)
        read_schema = StructType.fromJson(json.loads(schema))
        if reads_by_arrow(spark, locations, batch_rows(pieces)):
            read = arrow_files(spark, read_schema, locations, folder=_FOLDER in key)
        else:
            read = parquet_files(spark.read.schema(read_schema), locations).withColumns(position)
        rows = read.join(F.broadcast(found), list(key))
        events = normalise_tables(rows, kind, keep=(_AFTER, _UPTO), checks=checks)
        time = F.unix_micros(F.col(KINDS[kind].time_column))
        after = F.col(_AFTER)
        # a file read for the first time (no ``after``) gives its rows without a time too
        keep = F.when(after.isNull(), time.isNull() | (time <= F.col(_UPTO))).otherwise(
            (time > after) & (time <= F.col(_UPTO))
        )
        frames.append(events.where(keep).drop(_AFTER, _UPTO))
    if not frames:
        return local_frame(spark, [], from_arrow_schema(EVENT))
    return union_of(frames)


def parquet_files(reader: DataFrameReader, locations: Sequence[str]) -> DataFrame:
    """``reader.parquet(*locations)``, the paths handed to the JVM in one py4j call: PySpark
    passes a list element by element, a call each (the read of the 4,000 address tables'
    files was made in 0.86 s with a list, 0.61 s in one call: docs/PERFORMANCE.md). Paths
    are joined with NUL, which no path holds, and split in the JVM into the ``String[]`` the
    reader takes; :func:`routing.plan._columns.is_in` splits its names into the list Spark
    takes (py4j passes no ``String[]`` where Java declares an ``Object[]``)."""
    jvm = reader._spark._jvm
    assert jvm is not None  # a reader exists: so does the gateway
    paths = jvm.java.util.regex.Pattern.compile("\x00").split("\x00".join(locations))
    return reader._df(reader._jreader.parquet(paths))


INPUT_READER = "spark.routing.inputReader"
"""The session setting that picks the reader of a batch's input files: ``auto`` (the
default: :func:`arrow_files` for a read of many small local files, :data:`ARROW_READ_FILES`
and :data:`ARROW_FILE_ROWS`; Spark's Parquet reader otherwise), ``arrow``
(:func:`arrow_files` whenever the files are local) or ``spark`` (Spark's Parquet reader,
the plain path)."""
ARROW_READ_FILES = 256
"""Files of one read from which ``auto`` reads them with pyarrow: one address table a
file, Spark's reader costs about 1 ms a file warm and 3 ms cold (a ``JobConf`` copied,
the footer read, the read schema parsed), pyarrow's well under it (docs/PERFORMANCE.md);
a few files read as fast by Spark's, without Python workers."""
ARROW_FILE_ROWS = 10_000
"""Rows a file holds at most on average (their statistics) for ``auto`` to read them with
pyarrow: the cost it saves is a file's, and large files' rows are read faster by Spark's
own vectorised reader than handed over from Python."""


def reads_by_arrow(spark: SparkSession, locations: Sequence[str], rows: int | None) -> bool:
    """Whether the files at ``locations``, ``rows`` rows in all (None: unknown), are read by
    :func:`arrow_files` (:data:`INPUT_READER`): only files of the local file system, which
    pyarrow opens as Spark does."""
    reader = spark.conf.get(INPUT_READER, "auto")
    if reader == "spark":
        return False
    many_small = len(locations) >= ARROW_READ_FILES and (
        rows is not None and rows <= len(locations) * ARROW_FILE_ROWS
    )
    if reader == "auto" and not many_small:
        return False
    return all(lake.local_path(location) is not None for location in locations)


def arrow_files(
    spark: SparkSession, schema: StructType, locations: Sequence[str], *, folder: bool
) -> DataFrame:
    """The rows of the Parquet files at ``locations`` (local) in ``schema``, as Spark's
    reader gives them, with each row's file name and index in it (and its file's folder's
    name with ``folder``): read by pyarrow in Python workers, the files spread over the
    session's default parallelism.

    A column is found by name, as Spark's reader finds it (case aside); a file without one
    of ``schema``'s columns gives nulls, and a column of another type is cast to the
    schema's (a cast that would lose values fails the batch, as Spark's reader fails on a
    column it cannot convert)."""
    extra = [StructField(_FILE_NAME, StringType()), StructField(POSITION["row"], LongType(), False)]
    if folder:
        extra.append(StructField(_FOLDER, StringType()))
    out = StructType([*schema.fields, *extra])
    # each file's folder and name as the slices name them, for the slices' join
    files = local_frame(
        spark,
        [(lake.local_path(location), *_folder_and_name(location)) for location in locations],
        StructType([StructField(name, StringType()) for name in ("path", "folder", "name")]),
    )
    parallelism = max(1, min(len(locations), spark.sparkContext.defaultParallelism))
    read = partial(_read_files, to_arrow_schema(out, timezone="UTC"), schema.names, folder)
    return files.repartition(parallelism).mapInArrow(read, out)


def _folder_and_name(location: str) -> tuple[str, str]:
    """The names a data file at ``location`` is known by in a read (:func:`slice_key`):
    its folder's and its own."""
    path = PurePath(location)
    return path.parent.name, path.name


def _read_files(
    out: pa.Schema, columns: Sequence[str], folder: bool, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """:func:`arrow_files`' work in a Python worker: each file's rows in ``out``, whose
    first fields are the table's ``columns``."""
    import pyarrow.parquet as pq

    kinds = [out.field(column).type for column in columns]
    for batch in batches:
        for path, parent, name in zip(*(c.to_pylist() for c in batch.columns), strict=True):
            file = pq.ParquetFile(path)
            present = {column.lower(): column for column in file.schema_arrow.names}
            found = [present.get(column.lower()) for column in columns]  # None: not in the file
            read = [column for column in found if column is not None]
            start = 0
            for rows in file.iter_batches(batch_size=ARROW_BATCH_ROWS, columns=read):
                n = rows.num_rows
                arrays = [
                    _column(rows, column, kind, n)
                    for column, kind in zip(found, kinds, strict=True)
                ]
                arrays += [_repeated(name, n), pa.array(range(start, start + n), pa.int64())]
                if folder:
                    arrays.append(_repeated(parent, n))
                start += n
                yield pa.RecordBatch.from_arrays(arrays, schema=out)


ARROW_BATCH_ROWS = 10_000
"""Rows of a file :func:`arrow_files` hands to Spark at a time (as
``spark.sql.execution.arrow.maxRecordsPerBatch``)."""


def _repeated(text: str, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(text, pa.string()), n)


def _column(rows: pa.RecordBatch, name: str | None, kind: pa.DataType, n: int) -> pa.Array:
    """The column ``name`` of ``rows`` as ``kind`` (None: the file has none, all null)."""
    if name is None:
        return pa.nulls(n, kind)
    column = rows.column(name)
    return column if column.type == kind else column.cast(kind)


# --------------------------------------------------------------------------------------
# The stream
# --------------------------------------------------------------------------------------


class SlicePartition(InputPartition):
    def __init__(self, slices: Sequence[tuple]) -> None:
        super().__init__(list(slices))
        self.slices = list(slices)


class LakeEventsReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets: ``{"base": {source: v}, "tables": {source: v}, "until": t, "asOf": a}``.

    Consumed so far: every row of versions ``<= base``, and the rows of versions in
    ``(base, tables]`` whose event time is ``<= until`` (the routing job's own commits
    offer no rows: :class:`~routing.io.delta_tables.TableFiles`). ``until`` never decreases
    while rows are held back; once it is unbounded everything is consumed and
    ``base`` catches up, so a later rate-limited batch may cut lower again.
    """

    def __init__(self, root: str, options: Mapping[str, str]) -> None:
        """:param options: the source's options, keys lower-cased (as Spark hands them)."""
        self.lake = lake.Lake(root)
        limit = options.get(MAX_EVENTS_PER_TRIGGER.lower())
        self.max_events = int(limit) if limit is not None else None
        self.as_of = parse_as_of(options.get(AS_OF.lower()))
        self.catch_up = int(options.get(CATCH_UP.lower(), CATCH_UP_COMMITS))
        self.cap: dict[str, int] | None = None
        self._logs: dict[str, TableFiles] = {}
        self._latest: dict[str, int] = {}  # each table's version when last asked
        self._schemas: dict[str, tuple[int, str]] = {}  # each table's, at the version last asked

    def _log(self, source: str) -> TableFiles:
        if source not in self._logs:
            self._logs[source] = TableFiles(
                self.lake.table(source), KINDS[kind_name(source)].time_column, self.catch_up
            )
        return self._logs[source]

    def _added(self, source: str, after: int, upto: int) -> list[DataFile]:
        """The files the table ``source``'s versions in ``(after, upto]`` added."""
        try:
            return self._log(source).added(after, upto)
        except LogCleanedUpError as error:
            raise LakeError(f"table {source}: {error}") from None

    def _schema(self, source: str, version: int) -> str:
        """The table's Spark schema (JSON) at ``version``."""
        known = self._schemas.get(source)
        if known is None or known[0] != version:
            known = self._schemas[source] = (
                version,
                _spark_schema(self._log(source).schema(version)),
            )
        return known[1]

    def _versions(self) -> dict[str, int]:
        versions = self._latest = input_versions(self.lake, self._latest)
        if self.cap is None:
            return versions
        return {s: min(v, self.cap[s]) for s, v in versions.items() if s in self.cap}

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
        return [f for f in self._added(source, base, upto) if _later_than(f, until)]

    def _forget(self, start: dict) -> None:
        """Let each table's view go of the versions no batch from ``start`` on asks from
        (:meth:`TableFiles.forget`): those read, and none of whose rows are held back."""
        held = start["until"] < UNBOUNDED
        for source, version in start["tables"].items():
            if source in self._logs:
                base = start["base"].get(source, -1)
                self._logs[source].forget(min(version, base) if held else version)

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
        """``start`` when nothing new is offered: a table the job alone wrote to since
        (its own copies, not offered) makes no batch, and is not checked every trigger."""
        self._forget(start)
        versions = self._versions()
        new = {
            s: self._added(s, start["tables"].get(s, -1), v)
            for s, v in versions.items()
            if v > start["tables"].get(s, -1)
        }
        for source, files in new.items():
            if files:
                check_table(self.lake, source, self._log(source).schema(versions[source]))
        base = self._base(start)
        held = {
            s: self._held(s, base.get(s, -1), v, start["until"]) for s, v in start["tables"].items()
        }
        as_of = max(start["asOf"], self.as_of)
        if not any(new.values()) and not any(held.values()) and as_of == start["asOf"]:
            return start
        until = UNBOUNDED
        if isinstance(limit, ReadMaxRows):
            unread: list[tuple[DataFile, int | None]] = [
                (f, start["until"]) for fs in held.values() for f in fs
            ]
            unread += [(f, None) for fs in new.values() for f in fs]
            until = _cut(unread, limit.max_rows)
            if start["until"] < UNBOUNDED:
                until = max(until, start["until"])
        # a batch cut at ``until`` applies the as-of only up to it: rows of later batches
        # may be earlier than the as-of, and an expiry must not pass them (SPEC §5.6)
        as_of = max(start["asOf"], min(as_of, until))
        if until == start["until"] and not any(new.values()) and as_of == start["asOf"]:
            return start
        return {"base": base, "tables": versions, "until": until, "asOf": as_of}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """One partition holding every slice of the batch: they are few, and small."""
        return [SlicePartition(self.slices(start, end))]

    def slices(self, start: dict, end: dict) -> list[tuple]:
        """The batch's slices (:data:`SLICE` rows)."""
        slices: list[tuple] = []
        for source, version in end["tables"].items():
            table = self.lake.table(source)
            schema = self._schema(source, version)
            seen = start["tables"].get(source, -1)
            if end["until"] > start["until"]:
                held = self._held(source, end["base"].get(source, -1), seen, start["until"])
                slices += [
                    slice_row(source, table, f, start["until"], end["until"], schema) for f in held
                ]
            slices += [
                slice_row(source, table, f, None, end["until"], schema)
                for f in self._added(source, seen, version)
            ]
        return slices

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        # Spark plans one bare InputPartition when partitions() returns none
        yield from getattr(partition, "slices", ())

    def commit(self, end: dict) -> None:
        pass


@lru_cache(maxsize=256)
def _spark_schema(schema: pa.Schema) -> str:
    """``schema`` as Spark's schema (JSON): converted once for the many tables that share it
    (4,000 address tables: about 1 s of a first batch's planning)."""
    return from_arrow_schema(schema).json()


def _later_than(f: DataFile, until: int) -> bool:
    return f.max_time is None or f.max_time > until


def _cut(files: Sequence[tuple[DataFile, int | None]], max_rows: int) -> int:
    """The earliest time by which about ``max_rows`` rows are due (:data:`UNBOUNDED` when
    there are fewer), from the files' statistics alone.

    :param files: the files a batch may read, each with the time it was read up to (a file
        held back by an earlier cut) or None (a new file: any of its rows).

    A file's rows are taken as spread evenly over its time range (its statistics' min and
    max), so the cut may fall inside a file, and a file that spans it counts in part.
    Counting whole files only and cutting at their latest times, a replayed log's batches
    came out half as large again as the limit, as the files of its sparser tables each
    span far more time than those of the dense ones (docs/REPLAY.md, "Memory").
    """
    known = [
        (f.num_records or 0, *span, after) for f, after in files if (span := _span(f)) is not None
    ]

    def due(bound: int) -> float:
        return sum(_due(rows, first, last, after, bound) for rows, first, last, after in known)

    latest = max((last for _, _, last, _ in known), default=None)
    if latest is None or due(latest) < max_rows:
        return UNBOUNDED
    # nothing is due before the earliest unread row; the rows due only grow with time
    low = min(first if after is None else max(first, after) for _, first, _, after in known) - 1
    high = latest
    while high - low > 1:
        middle = (low + high) // 2
        if due(middle) >= max_rows:
            high = middle
        else:
            low = middle
    return high


def _span(f: DataFile) -> tuple[int, int] | None:
    """The earliest and latest event time of ``f``'s rows (µs), if its statistics say (no
    min: all at the max)."""
    if f.max_time is None:
        return None
    return (f.max_time if f.min_time is None else min(f.min_time, f.max_time)), f.max_time


def _due(rows: int, first: int, last: int, after: int | None, bound: int) -> float:
    """About how many of a file's ``rows``, spread evenly from ``first`` to ``last``, are
    later than ``after`` (None: any) and at most ``bound``."""
    if after is not None and after >= last:
        return 0.0
    if first == last:
        return float(rows) if bound >= last else 0.0
    start = first if after is None else max(first, after)
    return rows * max(min(bound, last) - start, 0) / (last - first)


def stream_options(
    *, as_of: int | None = None, max_events_per_trigger: int | None = None
) -> dict[str, str]:
    """The source's options for ``--as-of`` (epoch µs, :func:`parse_as_of`) and a rate
    limit (rows a batch; None or 0: none); an option not given is left out.

    Example::

        spark.readStream.format("lake_events").options(**stream_options(as_of=t)).load(root)
    """
    options = {}
    if as_of is not None:
        options[AS_OF] = str(as_of)
    if max_events_per_trigger:
        options[MAX_EVENTS_PER_TRIGGER] = str(max_events_per_trigger)
    return options


def parse_as_of(value: str | None) -> int:
    """``--as-of`` (the ``asOf`` option) as epoch µs: an integer, or an ISO-8601 time with
    a zone (:data:`NO_AS_OF` when absent).

    :raises ValueError: any other text.
    """
    if value is None or value == "":
        return NO_AS_OF
    if value.lstrip("-").isdigit():
        return int(value)
    micros = micros_of_iso(value)
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
        return from_arrow_schema(SLICE)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = {k.lower(): v for k, v in self.options.items()}
        root = options.get("path")
        if not root:
            raise ValueError("the lake_events source needs the lake root: .load(root)")
        return LakeEventsReader(root, options)


def micros_of_iso(text: str) -> int | None:
    """Epoch µs of an ISO-8601 time with a zone; None without a zone or when unreadable."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return epoch_micros(moment)


def register(spark: SparkSession) -> None:
    """Register the ``lake_events`` source with the session (idempotent)."""
    try:
        spark.dataSource.register(LakeEventsDataSource)
    except AnalysisException as error:
        if error.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise


JVM_SOURCE = "routing.stream.LakeEventsSource"
"""The input stream's source in the JVM (jars/src/routing/stream, in the job's jar), whose
batches :class:`LakeEventsPlanner` plans in the driver."""
INPUT_SOURCE = "spark.routing.inputSource"
"""The session setting that picks the stream's source: ``jvm`` (:data:`JVM_SOURCE`, the
default where the job's jar is on the classpath) or ``python`` (``lake_events``)."""


JVM_TYPES_CHECK = "routing.properties.PropertyTypesCheck"
"""The check of a message's property types in the JVM (jars/src/routing/properties, in the
job's jar): :func:`~routing.plan.normalise.untyped_property`'s rule as one Catalyst
expression, which reads Spark's map data as it is (docs/DESIGN.md)."""
JVM_REPR = "routing.properties.PythonRepr"
"""Python's ``repr()`` of a string column in the JVM (in the job's jar):
:func:`~routing.plan.normalise.py_repr`'s rule as one Catalyst expression."""
ROW_CHECKS = "spark.routing.rowChecks"
"""The session setting that picks how the rows' checks are computed
(:class:`~routing.plan.normalise.RowChecks`): ``jvm`` (:data:`JVM_TYPES_CHECK` and
:data:`JVM_REPR`, the default where the job's jar is on the classpath) or ``plain``
(Spark's expressions, :data:`~routing.plan.normalise.PLAIN_CHECKS`)."""


def row_checks(spark: SparkSession) -> RowChecks | None:
    """How ``spark``'s batches check property types and quote values (:data:`ROW_CHECKS`);
    None: the plain path. The checks are one per JVM, so the plans built with them are
    cached across batches."""
    if spark.conf.get(ROW_CHECKS, "jvm") == "plain":
        return None
    return _jvm_row_checks(spark)


@cache
def _jvm_row_checks(spark: SparkSession) -> RowChecks | None:
    check, python_repr = jvm_class(spark, JVM_TYPES_CHECK), jvm_class(spark, JVM_REPR)
    if check is None or python_repr is None:
        return None
    ranges = {kind: [str(low), str(high)] for kind, (low, high) in INTEGRAL_RANGES.items()}
    function = check(list(PROPERTY_TYPES), dict(TEXT_PATTERNS), ranges)

    def property_types(properties: Column, types: Column) -> Column:
        return ClassicColumn(function.column(properties._jc, types._jc))

    def quoted(text: Column) -> Column:
        return ClassicColumn(python_repr.column(text._jc))

    return RowChecks(property_types=property_types, quoted=quoted)


class LakeEventsPlanner:
    """The stream's batches planned in the driver's interpreter for :data:`JVM_SOURCE`,
    which calls it through py4j's callback server (as Spark calls ``foreachBatch``):
    the offsets and slices of a :class:`LakeEventsReader`, as JSON.

    Spark runs a Python source in Python processes of its own: one for its schema, one
    for a query's offsets, a Python task to read each batch's slices back. Each imports
    PySpark, pandas and Arrow before it answers (a second or more of a job's start, more
    on a loaded machine, where Spark's ten seconds for it to connect back ran out), and
    the first Python task starts the workers' daemon (docs/DESIGN.md).
    """

    def __init__(self, reader: LakeEventsReader) -> None:
        self.reader = reader

    def initialOffset(self) -> str:
        return json.dumps(self.reader.initialOffset())

    def defaultMaxRows(self) -> int:
        return self.reader.max_events or 0

    def latestOffset(self, start: str, max_rows: int) -> str:
        limit = ReadMaxRows(max_rows) if max_rows > 0 else ReadAllAvailable()
        return json.dumps(self.reader.latestOffset(json.loads(start), limit))

    def slices(self, start: str, end: str) -> str:
        return json.dumps(self.reader.slices(json.loads(start), json.loads(end)))

    def prepareForTriggerAvailableNow(self) -> None:
        self.reader.prepareForTriggerAvailableNow()

    class Java:  # py4j: the Java interface this object implements
        implements: ClassVar[list[str]] = ["routing.stream.LakeEventsPlanner"]


def stream(spark: SparkSession, root: str, options: Mapping[str, str]) -> DataFrame:
    """The input stream over the lake at ``root``: a row per slice a batch reads
    (:data:`SLICE`; :func:`read_events` reads them). Planned in the driver through
    :data:`JVM_SOURCE` where the job's jar is on the classpath (unless
    :data:`INPUT_SOURCE` says ``python``), else by the ``lake_events`` Python source.

    :param options: :func:`stream_options`.

    Example::

        stream(spark, "/lake", stream_options(as_of=t)).writeStream.foreachBatch(run)
    """
    source = jvm_class(spark, JVM_SOURCE)
    if source is None or spark.conf.get(INPUT_SOURCE, "jvm") == "python":
        register(spark)
        return spark.readStream.format("lake_events").options(**options).load(root)
    ensure_callback_server_started(spark.sparkContext._gateway)
    reader = LakeEventsReader(root, {key.lower(): value for key, value in options.items()})
    planner = source.register(LakeEventsPlanner(reader))
    return (
        spark.readStream.format(JVM_SOURCE)
        .schema(from_arrow_schema(SLICE))
        .option(source.PLANNER, planner)
        .load()
    )
