"""The benches' view of ``queue_messages`` (bench/watch.py): when each producer id first shows."""

from __future__ import annotations

import itertools
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, Transaction, write_deltalake

from bench.watch import QueueWatcher
from routing.broker.layout import ROUTING_APP_PREFIX

ROWS = pa.schema([("message_id", pa.int64()), ("copy_reason", pa.string())])


def commit(location: Path, rows: list[tuple[int, str | None]], batch: int) -> None:
    """One commit of queue rows as the routing job makes it: an app transaction of its own."""
    table = pa.Table.from_pylist(
        [{"message_id": m, "copy_reason": c} for m, c in rows], schema=ROWS
    )
    write_deltalake(
        str(location),
        table,
        mode="append",
        commit_properties=CommitProperties(
            app_transactions=[Transaction(f"{ROUTING_APP_PREFIX}test", batch)]
        ),
    )


def test_the_watcher_sees_each_producer_id_when_its_commit_lands(tmp_path: Path) -> None:
    location = tmp_path / "queue_messages"
    ticks = itertools.count(1)
    watcher = QueueWatcher(str(location), clock=lambda: float(next(ticks)))

    watcher.poll()  # no table yet
    assert watcher.seen == {}

    commit(location, [(1, None), (2, None), (9001, "DIVERT")], batch=0)
    watcher.poll()
    watcher.poll()  # nothing new: the ids keep the time they first showed
    assert watcher.seen == {1: 1.0, 2: 1.0}

    commit(location, [(3, None), (1, None)], batch=1)
    watcher.poll()
    assert watcher.seen == {1: 1.0, 2: 1.0, 3: 2.0}
