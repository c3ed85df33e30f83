"""The console of the entry points: the job's progress, its summary and one line per error.

Spark's and the JVM's own output (warnings, generated code that failed to compile, Python
workers' tracebacks) goes to a log file in the lake's ``_logs`` (:func:`session_log`), and
so does every error's traceback; ``--verbose`` keeps both on the console instead.
Progress lines stay plain prints to the job's ``out`` (tests and operators read them).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from routing.io.lake import Lake

_HANDLER = "_jobs_handler"
_MAX_LINE = 300


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
    WARNING) and, at DEBUG, to ``log_file``. Calling it again (a test runs ``main`` many
    times) replaces the handlers."""
    for name in ("jobs", "routing"):
        logger = logging.getLogger(name)
        for handler in [h for h in logger.handlers if getattr(h, _HANDLER, False)]:
            logger.removeHandler(handler)
            handler.close()
        console = logging.StreamHandler(err)
        console.setLevel(logging.DEBUG if verbose else logging.WARNING)
        handlers: list[logging.Handler] = [console]
        if log_file is not None:
            handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
        for handler in handlers:
            setattr(handler, _HANDLER, True)
            handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
            logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if verbose or log_file is not None else logging.WARNING)
        logger.propagate = False


def one_line(error: BaseException) -> str:
    """The first line of ``error``'s message: what a user reads (a JVM error's message
    carries its stack trace after it)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else type(error).__name__
    return text if len(text) <= _MAX_LINE else text[: _MAX_LINE - 1] + "…"


def where_detail(log_file: Path | None) -> str:
    """What an error line ends with: where its detail is."""
    if log_file is None:
        return ""
    return f" (detail in {log_file}; --verbose prints it here)"
