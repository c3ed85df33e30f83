"""The routing job: an Artemis broker's routing over the lake's Delta tables.

    python -m jobs.route --conf conf/broker.xml --lake ./lake --available-now [--as-of TS]
    python -m jobs.route --conf conf/broker.xml --lake ./lake          # runs until stopped

Structured Streaming over every input table of the lake (``lake_events``), one
``foreachBatch`` per micro-batch: read the batch's input rows and the PENDING queue
state, run the batch (:func:`routing.plan.engine.run_batch`), write every table it changes,
all through delta-spark (:mod:`routing.io.storage`). Checkpoints live
under ``LAKE/_checkpoints/route``. Exit status: 0 done, 2 invalid configuration
(nothing written), 1 anything else (an unreadable lake, a failed batch).
"""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from deltalake.exceptions import DeltaError
from pyspark.sql import DataFrame, Row, SparkSession

from jobs._logging import (
    BatchStopped,
    StopSignal,
    configure,
    interrupted,
    one_line,
    take_lake,
    where_detail,
)
from jobs._session import job_session
from routing.broker.config import ConfigError, load_config
from routing.broker.layout import (
    JOURNAL,
    REJECTED,
    ROUTE_QUERY,
    address_of_source,
    is_address_source,
)
from routing.broker.state import JobState
from routing.broker.topology import Topology
from routing.io.lake import Lake
from routing.io.lake_events import (
    LakeError,
    batch_as_of,
    batch_rows,
    check_lake,
    inputs_within,
    parse_as_of,
    read_events,
    stream,
    stream_options,
)
from routing.io.session import SMALL_BATCH_ROWS, batch_conf
from routing.io.storage import (
    DeltaStorage,
    Storage,
    count_key,
    outputs,
    route_app_id,
    session_conf,
    tables_written,
)
from routing.plan import journal
from routing.plan.batch import BatchResult
from routing.plan.engine import run_batch
from routing.plan.router import Router
from routing.plan.scratch import Scratch

METRICS = ("rows_in", "routed", "applied", "copies", "dead_letters", "expiries", "rejected")


log = logging.getLogger("jobs.route")

HELP = """\
Route a broker's traffic as Apache ActiveMQ Artemis would, over the Delta tables of a lake.

Reads what producers appended to addresses/<address>, what consumers appended to
deliveries (ACK, ROLLBACK) and what operators appended to management, and writes the
queues (queue_messages), the journal, the rows it rejected (rejected, with a reason)
and every copy (diverted, dead-lettered, expired, moved) to its address table, as the
broker configured by --conf would. Runs until stopped, or over what there is with
--available-now. A run resumes where the last one stopped."""

EXAMPLES = """\
examples:
  python -m jobs.route --conf conf/broker.xml --lake ./lake --available-now
  python -m jobs.route --conf conf/broker.xml --lake ./lake          # until Ctrl-C

exit status: 0 done, 2 the configuration is invalid (nothing written), 1 the lake could
not be read, another job is writing it, or a batch failed (one line here; the detail in
LAKE/_logs), 130 Ctrl-C or 143 SIGTERM stopped it inside a batch (the next run does
that batch again, exactly once). Without --available-now, Ctrl-C or SIGTERM (to the job or
its whole process group) ends the running batch first, and the status is 0. One job
writes a lake at a time; one that crashed holds nothing."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.route",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=HELP,
        epilog=EXAMPLES,
    )
    parser.add_argument("--conf", required=True, help="the broker.xml to route with")
    parser.add_argument("--lake", default="./lake", help="lake root (default ./lake)")
    parser.add_argument(
        "--available-now", action="store_true", help="process everything there is, then exit"
    )
    parser.add_argument("--as-of", help="lake clock at least this time (ISO-8601 with a zone)")
    parser.add_argument(
        "--trigger", default="1 second", help="processing-time trigger when running continuously"
    )
    parser.add_argument(
        "--max-events-per-trigger", type=int, help="rate limit: input rows per micro-batch"
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="Spark's own log and errors' tracebacks on the console, not in LAKE/_logs",
    )
    return parser.parse_args(argv)


@dataclass
class Progress:
    """Per-batch figures and the run's totals, written to ``out``."""

    out: TextIO = field(default=sys.stdout)
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(METRICS, 0))
    batches: int = 0
    seconds: float = 0.0

    def add(
        self,
        batch_id: int,
        figures: dict[str, int],
        seconds: float,
        written_before: Mapping[str, int] | None = None,
    ) -> None:
        """Print a batch's line; ``written_before``: tables of the batch a run that stopped
        inside it had written, with their rows (not counted in ``figures``)."""
        self.batches += 1
        self.seconds += seconds
        for key in METRICS:
            self.totals[key] += figures[key]
        line = ", ".join(f"{k.replace('_', ' ')} {figures[k]}" for k in METRICS)
        before = ", ".join(
            f"{table} ({rows} rows)" for table, rows in (written_before or {}).items()
        )
        resumed = f"; written before the restart, not counted: {before}" if before else ""
        print(f"batch {batch_id}: {line}, {seconds:.2f} s{resumed}", file=self.out, flush=True)

    def summary(self) -> str:
        rows = [("batches", str(self.batches))]
        rows += [(k.replace("_", " "), f"{v:,}") for k, v in self.totals.items()]
        rows.append(("seconds", f"{self.seconds:.1f}"))
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"  {k:<{width}}  {v:>12}" for k, v in rows)


class BatchRunner:
    """The ``foreachBatch`` function: one micro-batch, exactly once."""

    def __init__(
        self,
        spark: SparkSession,
        lake: Lake,
        topology: Topology,
        as_of: int | None,
        progress: Progress,
        stop: StopSignal,
    ) -> None:
        self.spark = spark
        self.lake = lake
        self.topology = topology
        self.as_of = as_of
        self.storage: Storage = DeltaStorage(lake)
        self.progress = progress
        self.stop = stop
        self._router_cache: Router | None = None
        self._routed_for: tuple[str, ...] | None = None
        self.idle = threading.Event()
        self.idle.set()

    def app_id(self) -> str:
        """Delta app id of this query (:func:`routing.io.storage.route_app_id`)."""
        app_id = route_app_id(self.lake)
        assert app_id is not None  # the query started: its checkpoint has its metadata
        return app_id

    def __call__(self, slices: DataFrame, batch_id: int) -> None:
        self.idle.clear()
        try:
            self._run(slices, batch_id)
        except Exception:
            if self.stop.received:  # query.stop() interrupted the batch (_run_query)
                raise BatchStopped() from None
            raise
        finally:
            self.idle.set()

    def _run(self, slices: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        app_id = self.app_id()
        if self.storage.done(app_id, batch_id):
            print(f"batch {batch_id}: already written, skipped", file=self.progress.out, flush=True)
            return
        router = self._router()
        read = slices.collect()
        # small: interpreted, one partition; large: file reads fitted (session.batch_conf)
        settings = batch_conf(self.spark, batch_rows(read), len(read))
        scratch = Scratch()
        with session_conf(self.spark, settings):
            try:
                result, written = self._route(read, router, scratch, app_id, batch_id)
            finally:
                scratch.release()
        self.progress.add(
            batch_id,
            figures(result, written, self.storage.written_before),
            time.perf_counter() - started,
            self.storage.written_before,
        )

    def _route(
        self, read: Sequence[Row], router: Router, scratch: Scratch, app_id: str, batch_id: int
    ) -> tuple[BatchResult, dict[str, int]]:
        """Plan the batch of slices ``read`` and write it; its result and the rows written."""
        pending = self.storage.pending(self.spark)
        result = run_batch(
            read_events(self.spark, read),
            pending,
            self.storage.state(),
            router.topology,
            router,
            scratch,
            as_of=batch_as_of(read, self.as_of),
            taken=self.storage.taken(self.spark, batch_id),
            pending_expirations=self.storage.pending_expirations(),
            reads=self.storage.reads(self.spark),
        )
        state = JobState(result.clock, positions_of(result.positions), result.created)
        written = self.storage.write(
            outputs(result, router.source_of, batch_id), state, app_id, batch_id
        )
        return result, written

    def _router(self) -> Router:
        """The router for the addresses in play, over the topology of those addresses (each
        may get a queue of its own: SPEC §4, auto-create-queues); rebuilt only when a new
        address table appears."""
        found = (address_of_source(s) for s in self.lake.address_sources())
        addresses = tuple(a for a in found if a is not None)
        if self._routed_for != addresses:
            topology = Topology(self.topology.config, addresses)
            self._router_cache, self._routed_for = Router(topology, addresses), addresses
        assert self._router_cache is not None  # set above for these addresses
        return self._router_cache


def positions_of(positions: DataFrame) -> dict[str, int]:
    """The round-robin positions (:data:`routing.plan.turns.POSITIONS`) as the job state keeps them."""
    return {row.group: row.position for row in positions.collect()}


def figures(
    result: BatchResult, written: Mapping[str, int], before: Mapping[str, int] | None = None
) -> dict[str, int]:
    """The batch's line of figures: from the batch's facts and the rows the write wrote
    (``before``: the rows of its tables a run that stopped inside it wrote)."""
    rejected = written.get(REJECTED, 0)
    rejected_in_batch = rejected + (before or {}).get(REJECTED, 0)
    return {
        "rows_in": result.rows_in,
        "routed": result.routed_rows,
        "applied": result.rows_in - result.routed_rows - rejected_in_batch,
        "copies": sum(written[t] for t in tables_written(written) if is_address_source(t)),
        "dead_letters": written.get(count_key(JOURNAL, journal.DEAD_LETTERED), 0),
        "expiries": written.get(count_key(JOURNAL, journal.EXPIRED), 0),
        "rejected": rejected,
    }


RESTARTS = 3
"""Times a query that failed for a :data:`TRANSIENT` reason is started again."""
TRANSIENT = ("Python worker failed to connect back",)
"""Failures that say nothing of the lake or the batch, only of the moment. Spark asks the
input stream (:mod:`routing.io.lake_events`) for its schema, and plans its batches, in
Python processes it starts when the query does, and gives each ten seconds to connect back
(``PythonWorkerFactory``, not a setting): a driver whose CPUs are taken by other work can
miss that."""


def transient(error: Exception) -> str | None:
    """The :data:`TRANSIENT` reason a query failed for, if any: started again, it may well
    succeed."""
    return next((reason for reason in TRANSIENT if reason in str(error)), None)


def run(
    args: argparse.Namespace,
    spark: SparkSession,
    lake: Lake,
    topology: Topology,
    out: TextIO,
    stop: StopSignal,
    as_of: int | None = None,
) -> int:
    """Run the query over ``lake`` until it is done (``--available-now``) or ``stop`` is
    received.

    A query that fails for a :data:`TRANSIENT` reason is started again from its checkpoint,
    as a restarted job would be (at most :data:`RESTARTS` times): the batches it committed
    are not run again, and the one it was in is written exactly once (docs/DESIGN.md,
    "State and exactly-once").

    :param as_of: ``--as-of`` as :func:`routing.io.lake_events.parse_as_of` read it.
    """
    progress = Progress(out)
    for restart in itertools.count():
        try:
            _run_query(args, BatchRunner(spark, lake, topology, as_of, progress, stop), stop)
            break
        except Exception as error:
            reason = transient(error)
            if reason is None or restart == RESTARTS:
                raise
            log.warning(
                "the query failed (%s); starting it again from its checkpoint (%d of %d)",
                reason,
                restart + 1,
                RESTARTS,
            )
    if args.available_now:
        print("summary:\n" + progress.summary(), file=out, flush=True)
    return 0


def _run_query(args: argparse.Namespace, runner: BatchRunner, stop: StopSignal) -> None:
    """Start the query, wait until it is done or ``stop`` is received, then stop it: a
    continuous job ends its running batch first; an ``--available-now`` run stops at once
    and raises the signal's interruption (the next run does that batch again)."""
    options = stream_options(as_of=runner.as_of, max_events_per_trigger=args.max_events_per_trigger)
    writer = (
        stream(runner.spark, runner.lake.root, options)
        .writeStream.foreachBatch(runner)
        .option("checkpointLocation", runner.lake.checkpoint(ROUTE_QUERY))
    )
    writer = (
        writer.trigger(availableNow=True)
        if args.available_now
        else writer.trigger(processingTime=args.trigger)
    )
    query = writer.start()
    try:
        while query.isActive and not stop.received:
            query.awaitTermination(0.5)  # type: ignore[arg-type]  # seconds; pyspark takes a float
        if stop.received:
            if not args.available_now:
                runner.idle.wait()
            query.stop()
            if args.available_now:
                raise stop.interruption()
        query.awaitTermination()
    finally:
        if query.isActive:
            query.stop()
        runner.storage.close()


def main(
    argv: Sequence[str] | None = None,
    *,
    spark: SparkSession | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    log_file: Path | None = None,
    stop: StopSignal | None = None,
) -> int:
    """Run the job; returns the exit status.

    :param spark: a session to use (and leave running), e.g. the tests' one.
    :param out: where progress and the summary go (default stdout).
    :param err: where errors go (default stderr).
    :param log_file: where the given session logs (errors' detail goes there too).
    :param stop: the stop signal of the run this one is part of (a replay's).
    """
    out = out or sys.stdout
    err = err or sys.stderr
    args = parse_args(argv)
    lake = Lake.at(args.lake)
    configure(args.verbose, err)
    try:
        config = load_config(args.conf)
        as_of = parse_as_of(args.as_of) if args.as_of else None
    except (ConfigError, OSError, ValueError) as error:
        print(f"configuration error: {one_line(error)}", file=err)
        log.debug("configuration error", exc_info=error)
        return 2
    try:
        sources = check_lake(lake)
        # a run of one small batch at most is over before C2's compiled code pays back
        short_run = args.available_now and inputs_within(lake, sources, SMALL_BATCH_ROWS)
    except (LakeError, DeltaError, OSError) as error:
        print(f"lake error: {one_line(error)}", file=err)
        log.debug("lake error", exc_info=error)
        return 1
    # nothing is written to the lake before the configuration and the lake are known good,
    # and another job does not hold it
    writer = take_lake(lake, "jobs.route", err)
    if writer is None:
        return 1
    stop = stop if stop is not None else StopSignal()
    try:
        with (
            writer,
            job_session(
                spark,
                lake,
                "route",
                verbose=args.verbose,
                err=err,
                log_file=log_file,
                short_run=lambda: short_run,
                stop=stop,
            ) as (session, log_file),
        ):
            try:
                return run(args, session, lake, Topology(config), out, stop, as_of)
            except Exception as error:  # a failed batch or an unreadable table: say what, exit 1
                print(f"job failed: {one_line(error)}{where_detail(log_file)}", file=err)
                log.debug("job failed", exc_info=error)
                return 1
    # Ctrl-C or SIGTERM: as the session started, or inside an --available-now run
    except KeyboardInterrupt as stopped:
        return interrupted(err, stopped)


if __name__ == "__main__":
    sys.exit(main())
