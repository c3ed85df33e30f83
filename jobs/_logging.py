"""Logging for the entry points: errors with their traceback at debug level (``--verbose``).

Progress lines stay plain prints to the job's ``out`` (tests and operators read them);
the logger adds what a one-line error message leaves out.
"""

from __future__ import annotations

import logging
from typing import TextIO

_HANDLER = "_jobs_handler"


def configure(verbose: bool, err: TextIO) -> None:
    """Send the ``jobs`` and ``routing`` loggers to ``err``: DEBUG with ``verbose``, else
    WARNING. Calling it again (a test runs ``main`` many times) replaces the handler."""
    for name in ("jobs", "routing"):
        logger = logging.getLogger(name)
        for handler in [h for h in logger.handlers if getattr(h, _HANDLER, False)]:
            logger.removeHandler(handler)
        handler = logging.StreamHandler(err)
        setattr(handler, _HANDLER, True)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
        logger.propagate = False
