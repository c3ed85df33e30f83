"""The Spark session an entry point runs in: the caller's, or one of its own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from pyspark.sql import SparkSession

from jobs._logging import configure, session_log
from routing.io.lake import Lake
from routing.io.session import build_session, stop_session


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
) -> Iterator[tuple[SparkSession, Path | None]]:
    """The session ``job`` runs in, and the file its Spark and JVM output goes to.

    Given a session (a test's, or a job running another: ``replay`` runs ``route``), it is
    used and left running, logging to ``log_file``. Without one, the job starts its own
    (:func:`build_session`; for a short run if ``short_run()``, asked only then) logging to
    a new file in the lake's ``_logs`` (:func:`session_log`; the console with ``verbose``),
    and stops it on the way out. The console is configured either way (:func:`configure`)."""
    own = spark is None
    if own:
        log_file = session_log(lake, job, verbose)
    configure(verbose, err, log_file)
    session = spark or build_session(f"jobs.{job}", short_run=short_run(), log_file=log_file)
    try:
        yield session, log_file
    finally:
        if own:
            stop_session(session)
