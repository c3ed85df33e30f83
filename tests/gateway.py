"""What the Python driver sends its JVM over py4j, recorded for tests that count it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession


@contextmanager
def sent_commands(spark: SparkSession) -> Iterator[list[str]]:
    """The kind of each py4j command this thread sends inside the block (``c`` a call,
    ``r`` a reflection lookup, ...), in order. py4j's finalizer thread, which releases the
    JVM objects Python let go of whenever its garbage collector runs, is not counted."""
    client = spark.sparkContext._jvm._gateway_client
    kind = type(client)
    send = kind.send_command
    sent: list[str] = []
    caller = threading.get_ident()

    def recorded(self, command, *args, **kwargs):
        if threading.get_ident() == caller:
            sent.append(command.split("\n", 1)[0])
        return send(self, command, *args, **kwargs)

    kind.send_command = recorded
    try:
        yield sent
    finally:
        kind.send_command = send
