"""History: a restarted job plans from the commits since its last batch, and a trigger looks
for new commits, at a cost that does not grow with the input tables' history.

Address tables with a long history: a producer that commits one message at a time (a
producer committing every second makes 86,400 commits a day), compacted (``OPTIMIZE``) and
checkpointed every 100 commits, and one new commit each since the job's last batch. Two
figures at two history lengths, as the job takes them and on the plain path:

- a restart's plan: the time a new process takes to check the tables
  (:func:`routing.io.lake_events.check_lake`) and its input stream to plan its next batch
  (``LakeEventsReader.latestOffset`` and ``slices``); plain: every commit read (the
  source's option ``catchUpCommits`` past any history);
- a trigger's look for new commits, every table's latest version
  (:func:`routing.io.lake_events.input_versions`) from the one it had; plain: each log
  folder listed.

The target: a table ten times older costs each at most 1.3x. The histories are written as
commit files beside a first commit of delta-rs's (delta-rs takes about 30 ms a commit),
their data files hard links of its one; delta-rs reads the tables back before the figures
are taken.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyspark.sql.streaming.datasource import ReadAllAvailable

from bench import Figure
from routing.io.delta_tables import CATCH_UP_COMMITS, commit_file, log_version
from routing.io.lake import Lake
from routing.io.lake_events import (
    CATCH_UP,
    NO_AS_OF,
    UNBOUNDED,
    LakeEventsReader,
    check_lake,
    input_versions,
)
from routing.plan import schemas

TABLES = 4
EVERY = 100
"""Commits between two compactions, and between two checkpoints."""
SHORT, LONG = 1_000, 10_000
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def table_with_history(location: str, commits: int) -> int:
    """A producer's table of ``commits`` commits of one message each, compacted and
    checkpointed every :data:`EVERY` commits (the compactions are commits too); its files."""
    first = {"message_id": 0, "address": Path(location).name, "sent_at": _at(0)}
    write_deltalake(location, pa.Table.from_pylist([first], schema=schemas.MESSAGE))
    lines = commit_file(location, 0).read_text(encoding="utf-8").splitlines()
    info = next(json.loads(line)["commitInfo"] for line in lines if '"commitInfo"' in line)
    add = next(json.loads(line)["add"] for line in lines if '"add"' in line)
    live = [add["path"]]
    since = 0  # the first message of the files not compacted yet
    for version in range(1, commits):
        compacting = version % EVERY == 0
        path = f"{'compacted' if compacting else 'part'}-{version:08d}.parquet"
        os.link(Path(location, add["path"]), Path(location, path))
        actions: list[dict] = [
            {"commitInfo": {**info, "operation": "OPTIMIZE" if compacting else "WRITE"}}
        ]
        if compacting:
            actions += [{"remove": {"path": p, "dataChange": False}} for p in live]
            live, low, since = [], since, version + 1
        else:
            low = version
        stats = json.loads(add["stats"])
        stats["minValues"].update(message_id=low, sent_at=_iso(low))
        stats["maxValues"].update(message_id=version, sent_at=_iso(version))
        actions.append(
            {
                "add": {
                    **add,
                    "path": path,
                    "stats": json.dumps(stats),
                    "dataChange": not compacting,
                }
            }
        )
        live.append(path)
        commit_file(location, version).write_text(
            "".join(json.dumps(a) + "\n" for a in actions), encoding="utf-8"
        )
        if (version + 1) % EVERY == 0:
            DeltaTable(location).create_checkpoint()
    return len(live)


def _at(second: int) -> dt.datetime:
    return START + dt.timedelta(seconds=second)


def _iso(second: int) -> str:
    return _at(second).isoformat().replace("+00:00", "Z")


@contextmanager
def lake_with_history(work: Path, commits: int) -> Iterator[tuple[Lake, dict]]:
    """:data:`TABLES` address tables of ``commits`` commits, and the offset of a job whose
    last batch read all but the last one."""
    lake = Lake.at(work / f"lake{commits}")
    tables = {}
    for k in range(TABLES):
        location = lake.address_table(f"svc.{k}")
        files = table_with_history(location, commits)
        assert DeltaTable(location).version() == commits - 1
        assert len(DeltaTable(location).file_uris()) == files
        tables[f"addresses/svc.{k}"] = commits - 2
    try:
        yield lake, {"base": {}, "tables": tables, "until": UNBOUNDED, "asOf": NO_AS_OF}
    finally:
        shutil.rmtree(lake.root, ignore_errors=True)


def restart_plan(lake: Lake, offset: dict, catch_up: int) -> None:
    """What a restarted job does before its first batch: it checks the tables, and a new
    reader plans the batch after ``offset``, one new commit a table."""
    check_lake(lake)
    reader = LakeEventsReader(lake.root, {CATCH_UP.lower(): str(catch_up)})
    end = reader.latestOffset(offset, ReadAllAvailable())
    assert len(reader.slices(offset, end)) == TABLES


def listed_versions(lake: Lake) -> dict[str, int]:
    """Every address table's latest version from its log folder's listing (the plain path)."""
    return {s: log_version(lake.table(s), listed=True) for s in lake.address_versions()}


def best(step: Callable[[], object], repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return min(times)


def run(spark, scale: float) -> list[Figure]:
    short, long = max(int(SHORT * scale), 2 * EVERY), max(int(LONG * scale), 20 * EVERY)
    work = Path(tempfile.mkdtemp(prefix="bench-history-"))
    plain = 1 << 62
    times: dict[tuple[int, str], float] = {}
    try:
        for commits in (short, long):
            with lake_with_history(work, commits) as (lake, offset):
                times[(commits, "plan")] = best(
                    lambda: restart_plan(lake, offset, CATCH_UP_COMMITS)
                )
                times[(commits, "plan, plain")] = best(lambda: restart_plan(lake, offset, plain))
                known = input_versions(lake)
                times[(commits, "look")] = best(partial(input_versions, lake, known))
                times[(commits, "look, plain")] = best(partial(listed_versions, lake))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ms = {key: seconds * 1000 for key, seconds in times.items()}
    figures = []
    for name, what in (("plan", "a restart's plan"), ("look", "a trigger's look for commits")):
        job = times[(long, name)] / times[(short, name)]
        plain_ratio = times[(long, f"{name}, plain")] / times[(short, f"{name}, plain")]
        figures += [
            Figure(f"{what}, {TABLES} tables of {short:,} commits", ms[(short, name)], "ms"),
            Figure(f"  of {long:,} commits", ms[(long, name)], "ms"),
            Figure(f"  {long:,} against {short:,}", job, "x", "<= 1.3x", job <= 1.3),
            Figure(f"  plain path, {long:,} commits", ms[(long, f"{name}, plain")], "ms"),
            Figure(f"  plain path, {long:,} against {short:,}", plain_ratio, "x"),
        ]
    return figures
