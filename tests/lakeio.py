"""Test-side access to Delta tables through delta-rs alone, independent of the job's reader.

``DeltaTable.to_pyarrow_table()`` aborts the interpreter at exit with deltalake 1.6 and
pyarrow ≥ 25, so tables are read through delta-rs's own query engine instead.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from routing.io.delta_tables import commit_file

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def at(ms: int) -> dt.datetime:
    """Conformance time: milliseconds after 2026-01-01T00:00:00Z."""
    return EPOCH + dt.timedelta(milliseconds=ms)


def read_table(path: str | Path, where: str | None = None) -> pa.Table:
    """Every row of the Delta table at ``path`` (empty table if it does not exist)."""
    path = str(path)
    if not DeltaTable.is_deltatable(path):
        return pa.table({})
    sql = 'select * from "t"' + (f" where {where}" if where else "")
    table = pa.table(QueryBuilder().register("t", DeltaTable(path)).execute(sql).read_all())
    return table.cast(pa.schema([f.with_type(_plain(f.type)) for f in table.schema]))


def _plain(kind: pa.DataType) -> pa.DataType:
    """``kind`` with delta-rs's view types as the plain ones Spark's Arrow conversion takes."""
    if kind == pa.string_view():
        return pa.string()
    if kind == pa.binary_view():
        return pa.binary()
    if pa.types.is_map(kind):
        return pa.map_(_plain(kind.key_type), _plain(kind.item_type))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(_plain(kind.value_type))
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_plain(f.type)) for f in kind])
    return kind


def rows(path: str | Path, where: str | None = None) -> list[dict[str, Any]]:
    return read_table(path, where).to_pylist()


def append(
    path: str | Path, data: Iterable[Mapping[str, Any]] | pa.Table, schema: pa.Schema
) -> None:
    """Append rows as a producer would: one delta-rs commit."""
    table = data if isinstance(data, pa.Table) else pa.Table.from_pylist(list(data), schema=schema)
    write_deltalake(str(path), table, mode="append")


def commit_actions(location: str, version: int) -> dict[str, list[dict]]:
    """The actions of a Delta table's commit file, by kind."""
    found: dict[str, list[dict]] = {}
    for line in commit_file(location, version).read_text().splitlines():
        ((kind, action),) = json.loads(line).items()
        found.setdefault(kind, []).append(action)
    return found


def clean_up_log(location: str) -> int:
    """What Delta's log cleanup does once the retention is past: a checkpoint of the latest
    version, and every commit before it removed (delta-rs, a retention of none for the
    while); the checkpoint's version."""
    table = DeltaTable(location)
    table.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})
    table = DeltaTable(location)
    table.create_checkpoint()
    table.cleanup_metadata()
    assert not commit_file(location, 0).exists()
    table.alter.set_table_properties({"delta.logRetentionDuration": "interval 30 days"})
    return table.version() - 1
