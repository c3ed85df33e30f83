"""The console of the entry points: the job's progress, its summary and one line per error.

Spark's and the JVM's own output (warnings, generated code that failed to compile, Python
workers' tracebacks) goes to a log file in the lake's ``_logs`` (:func:`session_log`), and
so does every error's traceback; ``--verbose`` keeps both on the console instead.
Progress lines stay plain prints to the job's ``out`` (tests and operators read them).
"""

from __future__ import annotations

import logging
import re
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TextIO

from routing.io.lake import Lake
from routing.io.writer_lock import LakeBusy, LakeNotLocal, WriterLock

_HANDLER = "_jobs_handler"
_MAX_LINE = 300
_PY4J_CALL = "An error occurred while calling"
_TRACEBACK = "Traceback (most recent call last):"
_OWN_ERROR = re.compile(r"^routing\.io\.lake_events\.LakeError: ")
"""A lake error raised in the input stream, as the query's traceback names it."""
INTERRUPTED = 130
"""The exit status of a run stopped by Ctrl-C while it worked."""
TERMINATED = 143
"""The exit status of a run stopped by SIGTERM while it worked (128 + 15, as a shell's)."""


def session_log(lake: Lake, job: str, verbose: bool) -> Path | None:
    """The log file a session started for ``job`` writes to (None with ``verbose``: the
    console), its folder created."""
    if verbose:
        return None
    path = lake.log_file(job, datetime.now(UTC))
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def configure(verbose: bool, err: TextIO, log_file: Path | None = None) -> None:
    """Send the ``jobs`` and ``routing`` loggers to ``err`` (DEBUG with ``verbose``, else
    WARNING) and, at DEBUG, to ``log_file``; other libraries' warnings logged to the root
    logger go to ``log_file`` (``err`` with ``verbose``). Calling it again (a test runs
    ``main`` many times) replaces the handlers."""
    for name in ("jobs", "routing"):
        logger = _without_ours(logging.getLogger(name))
        console = logging.StreamHandler(err)
        console.setLevel(logging.DEBUG if verbose else logging.WARNING)
        logger.addHandler(_ours(console))
        if log_file is not None:
            logger.addHandler(_ours(logging.FileHandler(log_file, encoding="utf-8")))
        logger.setLevel(logging.DEBUG if verbose or log_file is not None else logging.WARNING)
        logger.propagate = False
    # py4j logs a failed call into the JVM (Ctrl-C inside one, a JVM gone) to the root
    # logger, with its traceback: the log file's, not the console's
    root = _without_ours(logging.getLogger())
    if verbose:
        calls: logging.Handler = logging.StreamHandler(err)
    elif log_file is not None:
        calls = logging.FileHandler(log_file, encoding="utf-8")
    else:
        return
    calls.setLevel(logging.WARNING)
    calls.addFilter(_not_a_stop)
    root.addHandler(_ours(calls))


def _not_a_stop(record: logging.LogRecord) -> bool:
    """py4j logs the error a batch function raised; a batch cut short by the run's stop
    (:class:`BatchStopped`) is not one."""
    return not (record.exc_info and isinstance(record.exc_info[1], BatchStopped))


def _ours(handler: logging.Handler) -> logging.Handler:
    """``handler`` formatted and marked as :func:`configure`'s."""
    setattr(handler, _HANDLER, True)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    return handler


def _without_ours(logger: logging.Logger) -> logging.Logger:
    """``logger`` with the handlers an earlier :func:`configure` gave it removed and closed."""
    for handler in [h for h in logger.handlers if getattr(h, _HANDLER, False)]:
        logger.removeHandler(handler)
        handler.close()
    return logger


class Terminated(KeyboardInterrupt):
    """SIGTERM while a run works (:class:`StopSignal`): it stops as Ctrl-C stops it."""


@contextmanager
def signals_handled(
    handler: Callable[[int, FrameType | None], object], *signums: int
) -> Iterator[None]:
    """Inside, ``handler`` handles ``signums``; the handlers before it are restored on the
    way out. Signals reach the main thread only: elsewhere (a test's thread) nothing
    changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum in signums}
    try:
        yield
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)


@dataclass
class StopSignal:
    """The first stop signal (SIGTERM, SIGINT) a run received, recorded by its handler and
    acted on where the run can stop cleanly.

    Raised as an exception inside the handler, it lands in the middle of a py4j call (a
    route run's main thread waits for its query in one; a replay's load is a chain of
    them): py4j then shuts down that connection and the idle ones to the JVM, and on a
    loaded machine the run could fail on a closed one ("Answer from Java side is empty")
    instead of stopping."""

    signum: int | None = None

    def record(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum

    @property
    def received(self) -> bool:
        return self.signum is not None

    def interruption(self) -> KeyboardInterrupt:
        """What a run stopped by it raises: :class:`Terminated` for SIGTERM, else
        ``KeyboardInterrupt``, as :func:`interrupted` tells them apart."""
        return Terminated() if self.signum == signal.SIGTERM else KeyboardInterrupt()

    def handled(self) -> AbstractContextManager[None]:
        """Inside, SIGTERM and SIGINT are recorded, not raised."""
        return signals_handled(self.record, signal.SIGTERM, signal.SIGINT)


class BatchStopped(Exception):
    """A micro-batch cut short by the run's stop (``query.stop()`` interrupts the batch's
    call into the JVM), as the batch function raises it to Spark.

    Spark tells a stop from a failure by the last line of the batch function's traceback
    (``StreamExecution.isInterruptionException``, SPARK-48717): ``py4j.protocol.Py4JJavaError:
    An error occurred while calling`` and, anywhere after, ``java.lang.InterruptedException``,
    matched by a pattern that recurses once a character. py4j's error carries the JVM's whole
    stack trace there, and the match overflowed the stream thread's stack: a
    ``StackOverflowError`` in the log, the thread dying on it. This one line is that error's
    first, so the stop is recognised as one."""

    __module__ = "py4j.protocol"
    __qualname__ = "Py4JJavaError"

    def __init__(self) -> None:
        super().__init__(
            "An error occurred while calling the batch: java.lang.InterruptedException "
            "(the run was stopped)"
        )


def interrupted(err: TextIO, stop: KeyboardInterrupt) -> int:
    """Say that the run was stopped while it worked, by Ctrl-C or by SIGTERM
    (:class:`Terminated`); its exit status, a shell's for the signal (130, 143)."""
    how, status = (
        ("terminated", TERMINATED) if isinstance(stop, Terminated) else ("interrupted", INTERRUPTED)
    )
    print(f"stopped: {how}; the next run resumes where this one stopped", file=err)
    return status


def one_line(error: BaseException) -> str:
    """The line of ``error``'s message a user reads: its first, or the error inside it.

    A JVM error's message carries its stack trace after it; a batch's failure, as the
    streaming query reports it, carries the Python traceback of the batch function, whose
    last line is the error; a Python call into the JVM that failed is followed by the
    JVM's exception. The job's own errors of the lake say what to mend: their class is not
    named."""
    raw = [line for line in str(error).splitlines() if line.strip()]
    start = 0
    traceback = next((i for i, line in enumerate(raw) if line.strip().endswith(_TRACEBACK)), None)
    if traceback is not None:  # the traceback's error: its first line not indented
        start = next((i for i in range(traceback + 1, len(raw)) if not raw[i][0].isspace()), 0)
    lines = [line.strip() for line in raw[start:]]
    if len(lines) > 1 and _PY4J_CALL in lines[0]:  # the JVM's exception, not the call
        lines = [lines[1].removeprefix(": ")]
    text = _OWN_ERROR.sub("", lines[0]) if lines else type(error).__name__
    return text if len(text) <= _MAX_LINE else text[: _MAX_LINE - 1] + "…"


def where_detail(log_file: Path | None) -> str:
    """What an error line ends with: where its detail is."""
    if log_file is None:
        return ""
    return f" (detail in {log_file}; --verbose prints it here)"


def take_lake(lake: Lake, job: str, err: TextIO) -> WriterLock | None:
    """The lake's writer lock for ``job`` (:mod:`routing.io.writer_lock`), or None after
    one line on ``err`` saying who holds it, or that the lake is not a local folder
    (:attr:`Lake.is_local`): the job must then write nothing."""
    try:
        return WriterLock.take(lake, job)
    except LakeBusy as busy:
        print(f"lake busy: {busy}", file=err)
        return None
    except LakeNotLocal as error:
        print(f"lake error: {error}", file=err)
        return None
