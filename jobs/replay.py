"""Replay historical message logs (docs/REPLAY.md).

    python -m jobs.replay --log traffic.jsonl [--log more.parquet …] --lake ./lake --conf conf/broker.xml

Loads the logs into the lake tables (bad lines go to ``rejected/`` with their
line numbers), then runs the routing job available-now, in micro-batches of about
:data:`MAX_EVENTS_PER_TRIGGER` input rows unless ``--max-events-per-trigger`` says
otherwise (``0``: one batch). Loading the same logs into the same lake twice appends
them once. Exit status as for ``jobs.route``: 2 for an invalid configuration (checked
before anything is written), 1 for an unreadable log or lake, 0 otherwise.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import TextIO

from deltalake.exceptions import DeltaError
from pyspark import StorageLevel
from pyspark.sql import SparkSession

from jobs import route
from jobs._logging import (
    StopSignal,
    configure,
    interrupted,
    one_line,
    take_lake,
    where_detail,
)
from jobs._session import job_session
from routing.broker.config import ConfigError, load_config
from routing.io.lake import Lake
from routing.io.lake_events import input_sources, inputs_within
from routing.io.session import SMALL_BATCH_ROWS
from routing.plan.scratch import Scratch
from routing.tools import replay

log = logging.getLogger("jobs.replay")

HELP = """\
Replay historical message logs: load them into the lake, then route them.

A log is JSON Lines or Parquet (docs/REPLAY.md): sends, deliveries and management
operations in time order. Bad lines go to the lake's rejected table with their line
number. Loading the same log into the same lake twice appends it once."""

EXAMPLES = """\
examples:
  python -m jobs.replay --log conf/sample-log.jsonl --lake ./lake --conf conf/broker.xml
  python -m jobs.replay --log jan.parquet --log feb.parquet --lake ./lake --conf broker.xml

exit status: 0 done, 2 the configuration is invalid (nothing written), 1 a log or the
lake could not be read (one line here; the detail in LAKE/_logs), 130 Ctrl-C or 143
SIGTERM stopped it (a run again loads what is left and routes the rest)."""

MAX_EVENTS_PER_TRIGGER = 2_600_000
"""The routing run's rate limit unless ``--max-events-per-trigger`` says otherwise: input
rows a micro-batch, about. The 1M-message demo log (2.51M rows) is one batch and the
10M one (25.1M rows) about ten of that size, so a long log's batches are no larger than
the 1M one's (docs/REPLAY.md, "Memory")."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.replay",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=HELP,
        epilog=EXAMPLES,
    )
    parser.add_argument(
        "--log", action="append", required=True, help="a JSON Lines or Parquet log (repeatable)"
    )
    parser.add_argument("--conf", required=True, help="the broker.xml to route with")
    parser.add_argument("--lake", default="./lake", help="lake root (default ./lake)")
    parser.add_argument(
        "--max-events-per-trigger",
        type=int,
        default=MAX_EVENTS_PER_TRIGGER,
        help="rate limit: input rows per micro-batch of the routing run, about "
        f"(default {MAX_EVENTS_PER_TRIGGER:,}; 0: the whole log in one batch)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="Spark's own log and errors' tracebacks on the console, not in LAKE/_logs",
    )
    return parser.parse_args(argv)


def load_logs(
    spark: SparkSession,
    lake: Lake,
    logs: Sequence[str],
    *,
    rows_per_file: int = replay.ROWS_PER_FILE,
) -> None:
    """Append the logs' records to the lake (idempotent per set of logs).

    The logs are parsed once: the checked records are kept while they are counted by
    table (one job, which also finds the addresses they send to: each becomes a table)
    and each table's rows are written, in files of at most ``rows_per_file`` rows in
    event-time order.
    """
    scratch = Scratch()
    try:
        # a log can be far larger than the heap (10M messages: 25M rows): kept on disk,
        # each table's records in event-time order (the order its files are written in)
        records = replay.in_event_time_order(replay.checked(spark, logs))
        kept = scratch.keep(records, StorageLevel.DISK_ONLY)
        counts = replay.table_counts(kept)
        rows = replay.lake_rows(replay.split(kept), counts)
        replay.write(lake, rows, counts, logs, rows_per_file=rows_per_file)
    finally:
        scratch.release()


def load_until_stopped(
    spark: SparkSession, lake: Lake, logs: Sequence[str], stop: StopSignal
) -> None:
    """:func:`load_logs` in a thread of its own, while the main thread waits for it or for
    ``stop`` (:class:`StopSignal` says why it waits outside py4j calls). Stopped, the load's
    Spark jobs are cancelled until it has ended, and the signal's interruption is raised;
    a load that failed raises its error."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-load") as pool:
        loaded = pool.submit(load_logs, spark, lake, logs)
        while not (stop.received or loaded.done()):
            wait([loaded], timeout=0.5)
        while not loaded.done():
            spark.sparkContext.cancelAllJobs()
            wait([loaded], timeout=0.5)
    if stop.received:
        raise stop.interruption()
    loaded.result()


def short_run(lake: Lake, logs: Sequence[str]) -> bool:
    """The logs' records and the lake's input rows so far are one small batch at most
    together: the run's JVM compiles with C1 only (``build_session(short_run=True)``)."""
    try:
        records = replay.records_within(logs, SMALL_BATCH_ROWS)
        return records is not None and inputs_within(
            lake, input_sources(lake), SMALL_BATCH_ROWS - records
        )
    except (DeltaError, OSError, ValueError):  # unreadable: the run says so when it reads it
        return False


def main(
    argv: Sequence[str] | None = None,
    *,
    spark: SparkSession | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    log_file: Path | None = None,
    stop: StopSignal | None = None,
) -> int:
    """Run the replay; returns the exit status (``stop``: the stop signal of the run this
    one is part of, a demo's)."""
    out = out or sys.stdout
    err = err or sys.stderr
    args = parse_args(argv)
    configure(args.verbose, err)
    try:
        load_config(args.conf)
    except (ConfigError, OSError, ValueError) as error:
        print(f"configuration error: {one_line(error)}", file=err)
        log.debug("configuration error", exc_info=error)
        return 2
    missing = [log for log in args.log if not Path(log).is_file()]
    if missing:
        print(f"log error: no such file: {', '.join(missing)}", file=err)
        return 1
    logs = [str(Path(log).absolute()) for log in args.log]
    writer = take_lake(Lake.at(args.lake), "jobs.replay", err)
    if writer is None:
        return 1
    with writer:
        stop = stop if stop is not None else StopSignal()
        return _replay(args, logs, spark, out, err, log_file, stop)


def _replay(
    args: argparse.Namespace,
    logs: list[str],
    spark: SparkSession | None,
    out: TextIO,
    err: TextIO,
    log_file: Path | None,
    stop: StopSignal,
) -> int:
    """Load ``logs`` into the lake and route them (the lake is held)."""
    lake = Lake.at(args.lake)
    try:
        with job_session(
            spark,
            lake,
            "replay",
            verbose=args.verbose,
            err=err,
            log_file=log_file,
            short_run=lambda: short_run(lake, logs),
            stop=stop,
        ) as (session, log_file):
            started = time.perf_counter()
            try:
                load_until_stopped(session, lake, logs, stop)
            except Exception as error:  # an unreadable log: say which, write nothing more
                print(f"log error: {one_line(error)}{where_detail(log_file)}", file=err)
                log.debug("log error", exc_info=error)
                return 1
            print(
                f"loaded {len(logs)} log(s) in {time.perf_counter() - started:.1f} s",
                file=out,
                flush=True,
            )
            job = ["--conf", args.conf, "--lake", args.lake, "--available-now"]
            if args.max_events_per_trigger:
                job += ["--max-events-per-trigger", str(args.max_events_per_trigger)]
            return route.main(job, spark=session, out=out, err=err, log_file=log_file, stop=stop)
    # Ctrl-C or SIGTERM as the session started or as the logs loaded (route.main says its own)
    except KeyboardInterrupt as stopped:
        return interrupted(err, stopped)


if __name__ == "__main__":
    sys.exit(main())
