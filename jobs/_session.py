"""The Spark session an entry point runs in: the caller's, or one of its own."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TextIO

from pyspark.sql import SparkSession

from jobs._logging import StopSignal, configure, session_log
from routing.io.lake import Lake
from routing.io.session import build_session, start_python_worker, stop_session

log = logging.getLogger(__name__)

PYTHON_WORKER_AHEAD = True
"""A job starting a session of its own has its Python worker started as it starts
(:func:`start_python_worker`), beside the first batch's planning; a session given to a job
(a test's, a notebook's) is left as it is."""


@contextmanager
def job_session(
    spark: SparkSession | None,
    lake: Lake,
    job: str,
    *,
    verbose: bool,
    err: TextIO,
    log_file: Path | None = None,
    short_run: Callable[[], bool] = lambda: False,
    stop: StopSignal | None = None,
) -> Iterator[tuple[SparkSession, Path | None]]:
    """The session ``job`` runs in, and the file its Spark and JVM output goes to.

    Given a session (a test's, or a job running another: ``replay`` runs ``route``), it is
    used and left running, logging to ``log_file``. Without one, the job starts its own
    (:func:`build_session`; for a short run if ``short_run()``, asked only then) logging to
    a new file in the lake's ``_logs`` (:func:`session_log`; the console with ``verbose``),
    and stops it on the way out. The console is configured either way (:func:`configure`).

    Inside, from before the session starts, SIGTERM and SIGINT are ``stop``'s to record."""
    with _recording(stop):
        own = spark is None
        if own:
            log_file = session_log(lake, job, verbose)
        configure(verbose, err, log_file)
        try:
            session = spark or build_session(
                f"jobs.{job}", short_run=short_run(), log_file=log_file
            )
        except Exception as error:
            if stop is None or not stop.received:
                raise
            log.debug("the session did not start: stopped as it started", exc_info=error)
            raise stop.interruption() from None  # SIGTERM to the group ends a JVM starting
        if own and PYTHON_WORKER_AHEAD:
            start_python_worker(session)
        # a SparkContext takes SIGINT for a handler of its own as it starts: ``stop``'s again
        with _recording(stop):
            try:
                yield session, log_file
            finally:
                if own:
                    stop_session(session)


def _recording(stop: StopSignal | None) -> AbstractContextManager[None]:
    return stop.handled() if stop is not None else nullcontext()
