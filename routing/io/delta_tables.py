"""Delta metadata the job needs and delta-spark's Python API does not give: from the log's
files, and through delta-rs.

Rows are never read or written here: delta-spark does that (routing.io.storage,
routing.io.lake_events). What this module answers is metadata:

- a table's version (the commit files after one known) and schema, and the files each
  version added, with their statistics and the app transactions of the commit (its commit
  file; a checkpoint for those before it, read by Arrow, or through delta-rs for commits the
  log was cleaned up past): the input stream plans its offsets from
  them, in the driver or in Spark's Python streaming-source process, which has no JVM to
  ask delta-spark, and does not offer the routing job's own commits (:class:`TableFiles`);
- the rows a commit added, from its commit file (the files' record counts): a large batch
  counts so the queue rows it appends from their plan (:mod:`routing.io.storage`);
- a partition's rows and the earliest value of some of its columns, from its files'
  statistics through delta-rs: the PENDING rows a batch starts from, counted and their
  expirations known without a Spark job (:meth:`TableLogs.partition`);
- an app transaction's version and a commit's ``userMetadata``: the job asks them
  before each batch (``done``, ``state``), and delta-spark's Python API has no lookup of
  the former; delta-rs (``deltalake.DeltaTable``) answers both from the log without
  starting a Spark job.

docs/DESIGN.md, "Storage", says why delta-rs stays a dependency for this alone.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, Schema

from routing.broker.layout import DELTA_LOG, ROUTING_APP_PREFIX

NOT_DATA = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES"})
"""Operations whose added files hold no new rows (a compaction rewrites rows already there)."""
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_T = TypeVar("_T")


def epoch_micros(moment: dt.datetime) -> int:
    """Epoch µs of a time with a zone, exact (``timestamp()`` is a float in seconds)."""
    return (moment - _EPOCH) // dt.timedelta(microseconds=1)


_VERSION_FILE = re.compile(r"\d{20}\.(?:json|checkpoint\..+)")
"""A file of a Delta log that holds a version: a commit, or a checkpoint (classic, multi-part
or V2)."""
_CHECKPOINT_FILE = re.compile(r"\d{20}\.checkpoint\..+")
_SINGLE_FILE_CHECKPOINT = re.compile(r"\d{20}\.checkpoint\.parquet")
"""A classic checkpoint in one Parquet file, as delta-rs and delta-spark write them by default."""


def log_version(location: str, since: int = -1, *, listed: bool = False) -> int:
    """The table's latest version (-1: no table): the highest version a file of its log
    holds. Delta never removes the newest commit's file.

    The commits after a version the table had are looked for by name: ``since``, or the
    last checkpoint's (``_last_checkpoint``, as Delta and delta-rs start from it), a few µs
    a look. A log keeps its commits for thirty days (Delta's default retention), and its
    listing grows with them (12.8 ms at 10,000 commits): the log folder is listed only
    for a table that has no checkpoint yet, or when ``listed`` asks (the plain path).
    """
    version = -1 if listed else since if since >= 0 else _last_checkpoint_version(location)
    if version < 0:
        return max(_log_versions(location, _VERSION_FILE), default=-1)
    while commit_file(location, version + 1).exists():
        version += 1
    return version


def _last_checkpoint_version(location: str) -> int:
    """The version ``_delta_log/_last_checkpoint`` names (-1: none, or unreadable)."""
    try:
        text = Path(location, DELTA_LOG, "_last_checkpoint").read_text(encoding="utf-8")
        version = json.loads(text)["version"]
    except (OSError, ValueError, KeyError, TypeError):
        return -1
    return version if isinstance(version, int) else -1


def _log_versions(location: str, kind: re.Pattern) -> list[int]:
    """The versions of the files of the table's log whose names are of ``kind``."""
    try:
        with os.scandir(os.path.join(location, DELTA_LOG)) as entries:
            return [int(e.name[:20]) for e in entries if kind.fullmatch(e.name)]
    except (FileNotFoundError, NotADirectoryError):
        return []


def first_checkpoint(location: str, at_least: int) -> int | None:
    """The version of the table's first checkpoint (of any kind) at ``at_least`` or later
    (None: none), from its log folder's listing."""
    return min(
        (v for v in _log_versions(location, _CHECKPOINT_FILE) if v >= at_least), default=None
    )


def last_single_file_checkpoint(location: str, at_most: int, looks: int = 1_000) -> int | None:
    """The version of the table's last single-file checkpoint at ``at_most`` or before (None:
    none). Looked for by name among the ``looks`` versions before (writers checkpoint every
    10 or 100 commits), from the log folder's listing further back."""
    for version in range(at_most, max(at_most - looks, -1), -1):
        if _checkpoint_file(location, version).exists():
            return version
    if at_most < looks:
        return None
    found = [v for v in _log_versions(location, _SINGLE_FILE_CHECKPOINT) if v <= at_most]
    return max(found, default=None)


def _checkpoint_file(location: str, version: int) -> Path:
    return Path(location, DELTA_LOG, f"{version:020d}.checkpoint.parquet")


def checkpoint_files(location: str, version: int) -> tuple[list[str], pa.Schema]:
    """The data files (paths as the table names them, decoded) and the schema of the table's
    single-file checkpoint at ``version``: two of its columns, read by Arrow."""
    paths, schema = _checkpoint_columns(location, version, "add.path", "metaData.schemaString")
    return [unquote(p) for p in paths], _arrow_schema_of(schema[0])


def checkpoint_schema(location: str, version: int) -> pa.Schema:
    """The schema of the table's single-file checkpoint at ``version`` (as Arrow types)."""
    (schema,) = _checkpoint_columns(location, version, "metaData.schemaString")
    return _arrow_schema_of(schema[0])


def _checkpoint_columns(location: str, version: int, *fields: str) -> list[list[str]]:
    """The values of ``fields`` (``action.field``) of a single-file checkpoint's actions."""
    table = pq.read_table(_checkpoint_file(location, version), columns=list(fields))
    return [pc.drop_null(column).to_pylist() for column in table.columns]


def is_table(location: str) -> bool:
    """True when ``location`` holds a Delta table: a ``_delta_log`` folder with a version.

    A writer killed while creating a table leaves the folder without one (its first commit
    never landed), and Delta counts no table there until a writer commits version 0."""
    return log_version(location) >= 0


def table_version(location: str) -> int:
    """The table's latest version, -1 when there is no table."""
    return log_version(location)


def arrow_schema(location: str, version: int | None = None) -> pa.Schema:
    """The table's schema (at ``version``, default the latest) as Arrow types."""
    return pa.schema(DeltaTable(location, version=version).schema().to_arrow())


def latest_schema(location: str, lookback: int = 100) -> pa.Schema:
    """The table's latest schema (as Arrow types): from the newest commit file that sets one
    (a ``metaData`` action), among those since its last single-file checkpoint or the last
    ``lookback``, else from that checkpoint, else through delta-rs. Read from a file or two,
    not by opening the table (3-4 ms, 50-150 ms with a long history: 4,000 address tables
    checked in 6.2 s)."""
    latest = log_version(location)
    checkpoint = last_single_file_checkpoint(location, latest, looks=lookback)
    for version in range(
        latest, max(latest - lookback, -1) if checkpoint is None else checkpoint, -1
    ):
        try:
            schema = _Commit.read(location, version).schema
        except FileNotFoundError:  # the log was cleaned up past it: a checkpoint has it
            break
        if schema is not None:
            return schema
    if checkpoint is not None:
        return checkpoint_schema(location, checkpoint)
    return arrow_schema(location)


def file_count(location: str) -> int:
    """How many data files the table's latest version has."""
    return TableLogs().file_count(location)


def row_count(location: str, version: int | None = None) -> int | None:
    """Rows of the table at ``version`` (default the latest), from its files' statistics
    (None: a file has none)."""
    return _records(pa.table(DeltaTable(location, version=version).get_add_actions(flatten=True)))


def _records(adds: pa.Table) -> int | None:
    """The rows of the files of ``adds`` (a version's add actions, flattened), from their
    statistics (None: a file has none)."""
    if "num_records" not in adds.column_names:
        return None if adds.num_rows else 0
    records = adds.column("num_records")
    return None if records.null_count else sum(records.to_pylist())


def transaction_version(location: str, app_id: str) -> int | None:
    """The last ``txnVersion`` the app ``app_id`` committed to the table (None: never)."""
    return TableLogs().transaction_version(location, app_id)


def last_user_metadata(location: str, lookback: int = 100) -> str | None:
    """The ``userMetadata`` of the newest commit, among the last ``lookback``, that has one.

    Commits without it (an operator's ``OPTIMIZE``, say) are looked past.
    """
    return TableLogs().last_user_metadata(location, lookback)


class TableLogs:
    """delta-rs's view of each table a job asks about, kept and brought up to date at each
    question (``update_incremental``: the commits since, 1-2 ms) rather than loaded anew from
    the last checkpoint on (7-14 ms a table of a few dozen commits).

    A continuous job asks a table's transactions several times a batch: loaded anew, that
    was 19 loads and 0.24 s of a warm 120-row batch (docs/PERFORMANCE.md, "Where a small
    batch's time goes"). Each answer is the latest version's, as a new load's would be.
    A version needs no view: it is the log folder's listing (:meth:`version`), which the
    input stream asks of every table each trigger.

    Meant for one run of one job: a table deleted and created again under the same path is
    not noticed. Safe to share between threads: one question at a time per table (a
    delta-rs table is not to be updated and read at once), different tables' side by side.
    """

    def __init__(self) -> None:
        self._tables: dict[str, DeltaTable] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {}  # a cache: a copy (the Python data source's reader, pickled) starts empty

    def __setstate__(self, _state: dict) -> None:
        self.__init__()  # type: ignore[misc]

    def version(self, location: str) -> int:
        """:func:`table_version`."""
        return log_version(location)

    def transaction_version(self, location: str, app_id: str) -> int | None:
        """:func:`transaction_version`."""
        return self._ask(location, lambda table: table.transaction_version(app_id), None)

    def transaction_at(self, location: str, app_id: str) -> tuple[int, int | None]:
        """:meth:`transaction_version` with the table version it was read at (-1 and
        None: no table), from one view of the log."""
        no_table: tuple[int, int | None] = (-1, None)
        return self._ask(
            location, lambda table: (table.version(), table.transaction_version(app_id)), no_table
        )

    def last_user_metadata(self, location: str, lookback: int = 100) -> str | None:
        """:func:`last_user_metadata`."""
        return self._ask(location, lambda table: _last_user_metadata(table, lookback), None)

    def file_count(self, location: str) -> int:
        """:func:`file_count`."""
        return self._ask(location, lambda table: len(table.file_uris()), 0)

    def partition(
        self, location: str, column: str, value: str, earliest: tuple[str, ...] = ()
    ) -> PartitionStatistics:
        """What the table's latest version says of its partition ``column = value``, from
        its files' statistics: its rows, and the earliest value of each timestamp column of
        ``earliest`` (:class:`PartitionStatistics`; version -1: no table)."""
        no_table = PartitionStatistics(-1, 0, dict.fromkeys(earliest))
        return self._ask(
            location, lambda table: _partition(table, column, value, earliest), no_table
        )

    def files(self, location: str, version: int) -> VersionFiles:
        """The table's data files at ``version`` (:class:`VersionFiles`; none: no table)."""
        no_table = VersionFiles((), 0, plain=True)
        return self._ask(location, lambda table: _version_files(table, location, version), no_table)

    def _ask(self, location: str, question: Callable[[DeltaTable], _T], no_table: _T) -> _T:
        with self._lock:
            lock = self._locks.setdefault(location, threading.Lock())
        with lock:
            table = self._tables.get(location)
            if table is None:
                if not is_table(location):
                    return no_table
                table = self._tables[location] = DeltaTable(location)
            else:
                table.update_incremental()
            return question(table)


@dataclass(frozen=True)
class VersionFiles:
    """The data files of a table's version, as its log names them."""

    paths: tuple[str, ...]
    """Each file's path: the table's location joined to the path its log gives."""
    rows: int | None
    """Their rows, from their statistics (None: a file has none)."""
    plain: bool
    """The files alone hold the version's rows: the table needs no reader feature (reader
    version 1: no deletion vectors, no column mapping)."""


def _version_files(table: DeltaTable, location: str, version: int) -> VersionFiles:
    if table.version() != version:
        table = DeltaTable(location, version=version)
    adds = pa.table(table.get_add_actions(flatten=True))
    paths = tuple(file_uri(location, path) for path in adds.column("path").to_pylist())
    return VersionFiles(paths, _records(adds), plain=_plain(table))


def file_uri(location: str, path: str) -> str:
    """Where the file ``path`` of the table at ``location`` is (its log's path, decoded)."""
    return path if "://" in path or path.startswith("/") else f"{location.rstrip('/')}/{path}"


def _plain(table: DeltaTable) -> bool:
    """The table's files alone hold its rows: it needs no reader feature (reader version 1:
    no deletion vectors, no column mapping)."""
    return table.protocol().min_reader_version == 1


@dataclass(frozen=True)
class PartitionStatistics:
    """A partition of a table at ``version``, as its files' statistics describe it."""

    version: int
    rows: int | None
    """Its rows (None: a file has no statistics)."""
    earliest: dict[str, int | None]
    """The earliest value of each column asked, in epoch µs: None when no row has one;
    a column is left out when a file has no statistics of it (a table whose statistics
    columns do not include it, or did not when the file was written)."""
    files: tuple[LoggedFile, ...] = ()
    """Its data files."""
    plain: bool = True
    """The files alone hold its rows (:func:`_plain`)."""
    rewritable: bool = True
    """A commit may remove its files and add their rows anew as an append writes them: the
    table needs no writer feature past check constraints (writer version 3 at most: no
    change data feed, generated or identity columns, row tracking), whose rows a rewrite
    would have to carry further."""


@dataclass(frozen=True)
class LoggedFile:
    """A data file as a version's log names it: what a commit that removes it records."""

    path: str  # relative to the table, decoded
    size: int  # bytes
    modification_time: int  # epoch ms


def _partition(
    table: DeltaTable, column: str, value: str, earliest: tuple[str, ...]
) -> PartitionStatistics:
    version = table.version()
    files = pa.table(table.get_add_actions(flatten=True))
    if not files.num_rows:
        return PartitionStatistics(version, 0, dict.fromkeys(earliest))
    if "num_records" not in files.column_names:
        return PartitionStatistics(version, None, {})
    part = files.filter(pc.equal(files.column(f"partition.{column}"), value))
    records = part.column("num_records")
    rows = None if records.null_count else sum(records.to_pylist())
    logged = tuple(
        LoggedFile(f["path"], f["size_bytes"], f["modification_time"])
        for f in part.select(["path", "size_bytes", "modification_time"]).to_pylist()
    )
    return PartitionStatistics(
        version,
        rows,
        _earliest(part, earliest) if rows is not None else {},
        logged,
        _plain(table),
        table.protocol().min_writer_version <= 3,
    )


def _earliest(files: pa.Table, columns: tuple[str, ...]) -> dict[str, int | None]:
    """The earliest value of each timestamp column among ``files`` (add actions with their
    row counts), left out when a file has no statistics of it. A file whose column is null
    in every row records no minimum."""
    found: dict[str, int | None] = {}
    for name in columns:
        nulls, low = f"null_count.{name}", f"min.{name}"
        if not files.num_rows:
            found[name] = None
            continue
        if nulls not in files.column_names or files.column(nulls).null_count:
            continue
        valued = files.filter(pc.less(files.column(nulls), files.column("num_records")))
        if not valued.num_rows:
            found[name] = None
        elif low in valued.column_names and not valued.column(low).null_count:
            found[name] = pc.min(valued.column(low).cast(pa.int64())).as_py()
    return found


def _last_user_metadata(table: DeltaTable, lookback: int) -> str | None:
    for commit in table.history(lookback):  # newest first
        text = commit.get("userMetadata")
        if text:
            return text
    return None


def _commit_files(location: str) -> list[Path]:
    """The commit files (``<version>.json``) of the table's log, oldest first (none: no log)."""
    log = Path(location, DELTA_LOG)
    if not log.is_dir():
        return []
    return sorted(
        p for p in log.iterdir() if p.suffix == ".json" and _VERSION_FILE.fullmatch(p.name)
    )


def unreadable_commit(location: str) -> tuple[int, str] | None:
    """The first commit file of the table's log that is not JSON lines, with why (None:
    each parses). For an error that names what to mend: delta-rs says only that the log
    failed to parse."""
    for path in _commit_files(location):
        try:
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    json.loads(line)
        except (ValueError, UnicodeDecodeError) as error:
            return int(path.name[:20]), str(error)
    return None


def version_before_app_commit(
    location: str, app_id: str, txn_version: int, since: float = 0.0
) -> int | None:
    """The table's version just before its commit of the app transaction ``(app_id,
    txn_version)``, if it has one (None: it has none). Only the commit files written at
    ``since`` (a time, as ``os.stat`` gives it) or later are looked into, newest first."""
    for commit in reversed(_commit_files(location)):
        try:
            if commit.stat().st_mtime < since:
                return None
            version = int(commit.stem)
            txns = commit_actions(location, version, "txn")
        except FileNotFoundError:  # cleaned up meanwhile: older than any batch in flight
            return None
        if any(t["appId"] == app_id and t["version"] == txn_version for t in txns):
            return version - 1
    return None


def commit_file(location: str, version: int) -> Path:
    """The file of the table's commit ``version`` (``_delta_log/<version>.json``)."""
    return Path(location, DELTA_LOG, f"{version:020d}.json")


def commit_actions(location: str, version: int, kind: str) -> list[dict]:
    """The actions of one ``kind`` (``txn``, ``add``...) of the table's commit ``version``,
    read from its commit file (``_delta_log/<version>.json``; FileNotFoundError when gone).
    Only the lines that name the kind are parsed."""
    with commit_file(location, version).open(encoding="utf-8") as commit:
        actions = [json.loads(line) for line in commit if f'"{kind}"' in line]
    return [a[kind] for a in actions if kind in a]


def commit_app_ids(location: str, version: int) -> frozenset[str]:
    """The ``appId`` of every ``txn`` action of the table's commit ``version``.

    Read from the commit file (:func:`commit_actions`): delta-rs's API has the last
    version of an app, not the app of a version. Empty when the file is gone (the log was
    cleaned up past it), as for a commit without an app transaction.
    """
    try:
        return frozenset(txn["appId"] for txn in commit_actions(location, version, "txn"))
    except FileNotFoundError:
        return frozenset()


def commit_rows(location: str, version: int) -> int:
    """The rows the table's commit ``version`` added: its files' record counts, from their
    statistics (a file without any: its Parquet footer)."""
    rows = 0
    for added in commit_actions(location, version, "add"):
        records = json.loads(added.get("stats") or "{}").get("numRecords")
        if records is None:
            records = pq.read_metadata(Path(location, unquote(added["path"]))).num_rows
        rows += records
    return rows


@dataclass(frozen=True)
class DataFile:
    """A data file of a table: where it is, the version that added it, what it holds."""

    path: str  # relative to the table, as the log names it
    version: int
    size: int
    num_records: int | None
    max_time: int | None  # no event time in the file is later (epoch µs), if the stats say
    min_time: int | None = None  # none is earlier (epoch µs), if the stats say

    def location(self, table: str) -> str:
        return str(Path(table, self.path))


CATCH_UP_COMMITS = 500
"""Commits a :class:`TableFiles` reads one by one to catch up with the version it is asked
from (about 0.1 ms each); further behind (a job restarted on tables with a long history), it
starts from the last checkpoint before that version instead (a few ms)."""


class LogCleanedUpError(LookupError):
    """A table's log lacks a commit the job needs: cleaned up past the version the job last
    read (the files added since cannot be told from those it read), or lost, with no
    checkpoint after it."""

    def __init__(self, version: int, read: bool = True) -> None:
        super().__init__(
            f"its Delta log was cleaned up past version {version}, the last the job read, so "
            "the rows since cannot be told from those read; keep the log longer than the job "
            "stays stopped (delta.logRetentionDuration)"
            if read
            else f"its Delta log has lost commit {version}, and no checkpoint follows it"
        )
        self.version = version


class TableFiles:
    """The files each version of one table added, learnt incrementally, version by version.

    A version's new files are the ``add`` actions of its commit file that change data (as
    Delta's streaming source reads them: a rewrite of a table's layout says ``dataChange``
    false); a version whose commit only reorganises rows (:data:`NOT_DATA`) adds none, and
    neither does a commit of the routing job (an app transaction whose id starts with
    :data:`~routing.broker.layout.ROUTING_APP_PREFIX`): its rows are the job's own copies,
    routed in the batch that made them, and reading them back would only cost a
    micro-batch (docs/DESIGN.md, "The job's own copies are not read back"). Input tables
    are append-only (SPEC §3): rows are never removed from them.

    What it learns starts where it is first asked from, when that is more than ``catch_up``
    (:data:`CATCH_UP_COMMITS`) commits in: at the last single-file checkpoint before it,
    whose files were read before and are only known (their paths), and the commits since. A
    restarted job reads the commits since its last batch, not the table's whole history, and
    a running one's view lets go of what its batches have read (:meth:`forget`).
    Commits whose files are gone (Delta cleaned the log up past them) are learnt from the
    first checkpoint after them: its snapshot's files not seen before count as that
    version's, a producer's (their copies are then read, and the batch recognises them as
    the job's own, :func:`routing.plan.inputs.own_copy`). A version in such a gap cannot
    be asked from (:class:`LogCleanedUpError`).

    A commit file is read once, at a fraction of a millisecond; delta-rs would open the
    table and rebuild each version's whole file list (4,000 address tables: 31 s of a first
    batch's planning, one table at a time).
    """

    def __init__(self, location: str, time_column: str, catch_up: int = CATCH_UP_COMMITS) -> None:
        self.location = location
        self.time_column = time_column
        self.catch_up = catch_up
        self._start(-1)

    def _start(
        self, version: int, known: Iterable[str] = (), schema: pa.Schema | None = None
    ) -> None:
        """Learn from after ``version``, whose files (``known``) are not offered."""
        self._since = version  # the files of versions after it are all in ``_files``
        self._version = version
        self._schema = schema  # at ``_version``
        self._known = dict.fromkeys(known, version)  # path -> the version that added it
        self._files: list[DataFile] = []  # in version order
        self._file_versions: list[int] = []  # each file's, for a bisection
        self._gaps: list[range] = []  # versions whose commit files were gone
        self._forgotten = False  # some files it knew were let go (:meth:`forget`)

    def schema(self, version: int) -> pa.Schema:
        """The table's schema at ``version`` (as Arrow types)."""
        if self._schema is not None and version == self._version:
            return self._schema
        return arrow_schema(self.location, version)

    def added(self, after: int, upto: int) -> list[DataFile]:
        """Files added by versions in ``(after, upto]``, in version then path order (none
        of the routing job's own commits).

        LogCleanedUpError: the commit file of ``after`` is gone, and so are those before it
        up to a checkpoint."""
        if after < self._since or after - self._version > self.catch_up:
            self._start_at(after)
        self._learn(upto)
        if any(after in gap for gap in self._gaps):
            raise LogCleanedUpError(after)
        versions = self._file_versions
        return self._files[bisect_right(versions, after) : bisect_right(versions, upto)]

    def forget(self, version: int) -> None:
        """Let go of what the versions up to ``version`` added: the stream asks from no
        earlier one (asked, the view would learn them again). A long-running job's view
        holds the files it has still to read, not every file the table ever had."""
        version = min(version, self._version)
        if version <= self._since:
            return
        cut = bisect_right(self._file_versions, version)
        del self._files[:cut]
        del self._file_versions[:cut]
        self._known = {path: v for path, v in self._known.items() if v > version}
        self._since = version
        self._forgotten = True

    def _start_at(self, version: int) -> None:
        """Learn from the table's last single-file checkpoint at ``version`` or before, its
        files known and none offered; from the table's first version when it has none."""
        checkpoint = last_single_file_checkpoint(self.location, version)
        if checkpoint is None:
            self._start(-1)
            return
        self._start(checkpoint, *checkpoint_files(self.location, checkpoint))

    def _learn(self, upto: int) -> None:
        version = self._version + 1
        while version <= upto:
            try:
                commit = _Commit.read(self.location, version)
            except FileNotFoundError:
                checkpoint = first_checkpoint(self.location, version)
                if checkpoint is None or checkpoint > upto:
                    raise LogCleanedUpError(version, read=False) from None
                if self._forgotten:  # the snapshot's files cannot all be told apart
                    raise LogCleanedUpError(self._version) from None
                self._gaps.append(range(version, checkpoint))
                version = checkpoint
                commit = self._from_snapshot(version)
            self._schema = commit.schema or self._schema
            unseen = [a for a in commit.adds if a["path"] not in self._known]
            self._known.update((a["path"], version) for a in unseen)
            new = sorted((a for a in unseen if a.get("dataChange", True)), key=_path)
            self._version = version
            version += 1
            if commit.operation in NOT_DATA or commit.by_routing_job:
                continue
            self._files.extend(self._data_file(add, self._version) for add in new)
            self._file_versions.extend(self._version for _ in new)

    def _from_snapshot(self, version: int) -> _Commit:
        """A commit whose file is gone: its snapshot's files and schema (delta-rs)."""
        table = DeltaTable(self.location, version=version)
        files = pa.table(table.get_add_actions(flatten=True)).to_pylist()
        adds = [{"path": f["path"], "size": f["size_bytes"], "flat": f} for f in files]
        return _Commit(adds, pa.schema(table.schema().to_arrow()))

    def _data_file(self, add: dict, version: int) -> DataFile:
        if "flat" in add:  # from a snapshot: delta-rs's flattened statistics
            row = add["flat"]
            records, low, high = (
                row.get("num_records"),
                row.get(f"min.{self.time_column}"),
                row.get(f"max.{self.time_column}"),
            )
        else:
            stats = json.loads(add.get("stats") or "{}")
            records = stats.get("numRecords")
            low = _stat_time(stats.get("minValues", {}).get(self.time_column))
            high = _stat_time(stats.get("maxValues", {}).get(self.time_column))
        return DataFile(
            add["path"], version, add["size"], records, _upper_bound(high), _lower_bound(low)
        )


def _path(add: dict) -> str:
    return add["path"]


@dataclass(frozen=True)
class _Commit:
    """What :class:`TableFiles` takes from one commit: its added files (paths as the table
    names them, decoded), the schema it set (if it did), its operation, and whether the
    routing job made it."""

    adds: list[dict]
    schema: pa.Schema | None = None
    operation: str | None = None
    by_routing_job: bool = False

    @classmethod
    def read(cls, location: str, version: int) -> _Commit:
        """From the commit file (FileNotFoundError: gone)."""
        adds, schema, operation, apps = [], None, None, []
        with commit_file(location, version).open(encoding="utf-8") as lines:
            for line in lines:
                if not line.strip():
                    continue
                action = json.loads(line)
                if "add" in action:
                    add = action["add"]
                    adds.append({**add, "path": unquote(add["path"])})
                elif "metaData" in action:
                    schema = _arrow_schema_of(action["metaData"]["schemaString"])
                elif "commitInfo" in action:
                    operation = action["commitInfo"].get("operation")
                elif "txn" in action:
                    apps.append(action["txn"]["appId"])
        return cls(
            adds,
            schema,
            operation,
            any(app.startswith(ROUTING_APP_PREFIX) for app in apps),
        )


@lru_cache(maxsize=256)
def _arrow_schema_of(schema_string: str) -> pa.Schema:
    """A commit's ``schemaString`` as Arrow types: parsed once for the many tables that share
    it (every address table the job or one producer created)."""
    return pa.schema(Schema.from_json(schema_string).to_arrow())


def _stat_time(value: object) -> dt.datetime | None:
    """A timestamp statistic of a commit file (ISO 8601 text) as delta-rs reads it."""
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        return None


def _lower_bound(value: object) -> int | None:
    """A bound (epoch µs) on the times of a column whose statistics say ``min = value``
    (Delta truncates it to the millisecond, which is still no later than the row)."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return epoch_micros(value)
    return None


def _upper_bound(value: object) -> int | None:
    """A bound (epoch µs) on the times of a column whose statistics say ``max = value``.

    Delta keeps timestamp statistics in milliseconds, truncated: a file whose latest row
    is at ``…01.582609`` says ``…01.582``. The bound is the end of that millisecond, so a
    cut between the two never leaves the row behind.
    """
    start = _lower_bound(value)
    return None if start is None else start + 999
