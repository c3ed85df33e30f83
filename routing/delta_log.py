"""The driver's view of one Delta table's log, through delta-rs and the commit files.

Data is never read through ``DeltaTable.to_pyarrow_*``: with deltalake 1.6 and
pyarrow ≥ 25 those abort the interpreter at exit (delta-rs/polars issue
"terminate called without an active exception"). Instead the log gives the
list of files, and :mod:`routing.lake_source` reads them with plain pyarrow.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable

SUPPORTED_READER_FEATURES = frozenset({"timestampNtz"})
"""Reader features plain parquet reading honours; others (deletion vectors,
column mapping) need the JVM Delta connector."""


class DeltaLogError(RuntimeError):
    """A table's log cannot be used by the embedded reader (missing, unsupported)."""


@dataclass(frozen=True)
class DataFile:
    """One data file of a table, as its ``add`` action describes it."""

    path: str
    size: int
    partition_values: Mapping[str, str | None]
    num_records: int | None
    min_values: Mapping[str, Any] = field(default_factory=dict)
    max_values: Mapping[str, Any] = field(default_factory=dict)
    version: int = -1

    def location(self, table_uri: str) -> str:
        """Local path (or absolute URI) of the file."""
        if "://" in self.path:
            return _local(self.path)
        return f"{_local(table_uri).rstrip('/')}/{unquote(self.path)}"

    def max_micros(self, column: str) -> int | None:
        """Upper bound of ``column`` in the file in epoch µs, None when the stats don't say.

        Engines truncate timestamp stats to milliseconds, so the bound adds 999 µs.
        """
        value = self.max_values.get(column)
        micros = _micros(value)
        return None if micros is None else micros + 999

    def min_micros(self, column: str) -> int | None:
        return _micros(self.min_values.get(column))


def _local(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri


def _micros(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return int(moment.timestamp()) * 1_000_000 + moment.microsecond
    if isinstance(value, str):
        try:
            return _micros(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return None
    if isinstance(value, int):
        return value
    return None


def _parse_stats(raw: str | None) -> tuple[int | None, dict[str, Any], dict[str, Any]]:
    if not raw:
        return None, {}, {}
    stats = json.loads(raw)
    return stats.get("numRecords"), stats.get("minValues") or {}, stats.get("maxValues") or {}


def is_table(uri: str) -> bool:
    """True when a Delta table exists at ``uri``."""
    return Path(_local(uri), "_delta_log").is_dir() and DeltaTable.is_deltatable(uri)


class TableLog:
    """Versions, files, schema and app transactions of the table at ``uri``.

    Files added by each version are cached, so a streaming reader that asks again
    each trigger only reads the new commit files.
    """

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._log_dir = Path(_local(uri), "_delta_log")
        self._added: dict[int, list[DataFile]] = {}
        self._version_by_path: dict[str, int] = {}
        self._known_version = -1

    # ---- table level -------------------------------------------------------------

    def exists(self) -> bool:
        return is_table(self.uri)

    def table(self, version: int | None = None) -> DeltaTable:
        if not self.exists():
            raise DeltaLogError(f"no Delta table at {self.uri}")
        return DeltaTable(self.uri, version=version)

    def version(self) -> int:
        """Latest version (-1 when the table does not exist)."""
        if not self._log_dir.is_dir():
            return -1
        versions = [
            int(name[:20])
            for name in os.listdir(self._log_dir)
            if name.endswith(".json") and name[:20].isdigit()
        ]
        if versions:
            return max(versions)
        return self.table().version() if self.exists() else -1

    def schema(self, version: int | None = None) -> pa.Schema:
        table = self.table(version)
        self.check_readable(table)
        return pa.schema(table.schema().to_arrow())

    def partition_columns(self) -> list[str]:
        return list(self.table().metadata().partition_columns)

    @staticmethod
    def check_readable(table: DeltaTable) -> None:
        features = set(table.protocol().reader_features or [])
        unsupported = features - SUPPORTED_READER_FEATURES
        if unsupported:
            raise DeltaLogError(
                f"table {table.table_uri} uses Delta reader features {sorted(unsupported)} "
                "that the embedded delta-rs source cannot read; run with the JVM Delta connector"
            )

    def transaction_version(self, app_id: str) -> int | None:
        """The last app-transaction version committed by ``app_id`` (None if never)."""
        if not self.exists():
            return None
        return self.table().transaction_version(app_id)

    def user_metadata(self, version: int | None = None) -> str | None:
        """``commitInfo.userMetadata`` of ``version`` (default latest)."""
        return self.commit_info(version).get("userMetadata")

    def commit_info(self, version: int | None = None) -> dict[str, Any]:
        """The ``commitInfo`` of ``version`` (default latest; empty if there is none)."""
        if not self.exists():
            return {}
        version = self.version() if version is None else version
        info = self._commit_info(version)
        if info is None:
            history = [h for h in self.table().history(limit=50) if h.get("version") == version]
            info = history[0] if history else {}
        return info

    # ---- files -------------------------------------------------------------------

    def snapshot(self, version: int | None = None) -> list[DataFile]:
        """Every file of the table at ``version`` (default latest), removes applied."""
        table = self.table(version)
        self.check_readable(table)
        actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
        snapshot_version = table.version()
        files = []
        for action in actions:
            mins = {k[4:]: v for k, v in action.items() if k.startswith("min.")}
            maxs = {k[4:]: v for k, v in action.items() if k.startswith("max.")}
            parts = {k[10:]: v for k, v in action.items() if k.startswith("partition.")}
            files.append(
                DataFile(
                    path=action["path"],
                    size=action["size_bytes"],
                    partition_values=parts,
                    num_records=action.get("num_records"),
                    min_values=mins,
                    max_values=maxs,
                    version=self._version_by_path.get(action["path"], snapshot_version),
                )
            )
        return sorted(files, key=lambda f: (f.version, f.path))

    def added(self, after: int, upto: int) -> list[DataFile]:
        """Files added with ``dataChange`` by versions ``after < v <= upto``, in commit order.

        Compaction rewrites (``dataChange: false``) are not new data and are left out.
        """
        upto = min(upto, self.version())
        self._refresh(upto)
        return [f for v in range(after + 1, upto + 1) for f in self._added.get(v, [])]

    def _refresh(self, upto: int) -> None:
        if upto <= self._known_version:
            return
        start = self._known_version + 1
        for version in range(start, upto + 1):
            actions = self._read_commit(version)
            if actions is None:
                # The commit file was cleaned up after a checkpoint: take the files of
                # the snapshot at this version as if it had added them.
                added = [
                    DataFile(
                        f.path,
                        f.size,
                        f.partition_values,
                        f.num_records,
                        f.min_values,
                        f.max_values,
                        version,
                    )
                    for f in self.snapshot(version)
                    if f.path not in self._version_by_path
                ]
            else:
                added = list(_adds(actions, version))
            self._added[version] = added
            self._version_by_path.update((f.path, version) for f in added)
        self._known_version = upto

    def _read_commit(self, version: int) -> list[dict[str, Any]] | None:
        path = self._log_dir / f"{version:020d}.json"
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def _commit_info(self, version: int) -> dict[str, Any] | None:
        actions = self._read_commit(version)
        if actions is None:
            return None
        for action in actions:
            if "commitInfo" in action:
                return action["commitInfo"]
        return {}


def _adds(actions: list[dict[str, Any]], version: int) -> Iterator[DataFile]:
    for action in actions:
        add = action.get("add")
        if not add or not add.get("dataChange", True):
            continue
        num_records, mins, maxs = _parse_stats(add.get("stats"))
        yield DataFile(
            path=add["path"],
            size=int(add.get("size", 0)),
            partition_values=add.get("partitionValues") or {},
            num_records=num_records,
            min_values=mins,
            max_values=maxs,
            version=version,
        )
