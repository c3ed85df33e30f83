"""Another process's view of ``queue_messages`` (delta-rs), as a consumer of the lake reads
it: when each producer message first shows there."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable

from routing.io.delta_tables import commit_file


@dataclass
class QueueWatcher:
    """Reads each new commit of the table at ``location`` as it lands, and notes when each
    producer message id first showed (``seen``, by ``clock``).

    A poll costs one ``stat`` until a commit lands (its file appears); then the new commits
    are loaded and the files they added read, ``message_id`` and ``copy_reason`` alone. Every
    commit is read, the routing job's included: it writes every commit of the table (the
    input stream's view of a table, ``TableFiles``, leaves those out). A watcher that loaded
    and queried the whole table at every 50 ms poll took about a quarter of a core from the
    job it measured, on two (docs/PERFORMANCE.md).
    """

    location: str
    clock: Callable[[], float] = time.time
    seen: dict[int, float] = field(default_factory=dict)
    _table: DeltaTable | None = field(default=None, init=False, repr=False)
    _version: int = field(default=-1, init=False, repr=False)
    _read: set[str] = field(default_factory=set, init=False, repr=False)

    def poll(self) -> None:
        """Note the ids of the commits that landed since the last poll."""
        if not commit_file(self.location, self._version + 1).exists():
            return
        now = self.clock()
        if self._table is None:
            self._table = DeltaTable(self.location)
        else:
            self._table.update_incremental()
        self._version = self._table.version()
        files = set(self._table.file_uris())
        for uri in sorted(files - self._read):
            rows = pq.read_table(uri, columns=["message_id", "copy_reason"])
            produced = rows.filter(pc.is_null(rows["copy_reason"]))["message_id"]
            for message_id in produced.to_pylist():
                self.seen.setdefault(message_id, now)
        self._read = files
