"""The lake layout of SPEC §3 as names: each table's path in the lake, and the
folder name of an address's table (``dir(address)``). Pure Python, no I/O; the
:class:`routing.io.lake.Lake` roots these names at a directory."""

from __future__ import annotations

import re

_KEPT = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_ESCAPE = re.compile(rb"=([0-9A-F]{2})")

ADDRESSES = "addresses"
DELIVERIES = "deliveries"
MANAGEMENT = "management"
QUEUE_MESSAGES = "queue_messages"
JOURNAL = "journal"
REJECTED = "rejected"
CHECKPOINTS = "_checkpoints"
PRODUCER_IDS = "_state/producer_ids"
STAGING = "_state/staging"
"""Where a batch's copies are written before each address table takes its own."""
WRITER_LOCK = "_state/writer.lock"
"""The file whose lock the one job writing the lake holds (:mod:`routing.io.writer_lock`)."""
LOGS = "_logs"
"""Where a job started on the lake writes Spark's and the JVM's own output (one file a run)."""
DELTA_LOG = "_delta_log"
"""The folder of a Delta table's log, in the table's folder: what makes a folder a table."""

ROUTE_QUERY = "route"
"""The routing job's streaming query: its checkpoint is ``_checkpoints/route``."""
ROUTING_APP_PREFIX = "jobs.route:"
"""How the Delta app id of the routing job's commits starts (``jobs.route:<query id>``):
the input stream does not offer what the job itself appended to an address table (its
copies, routed when made). Other writers (``jobs.replay:``) append input rows."""


def address_dir(address: str) -> str:
    """The folder name of an address table (SPEC §3 ``dir(address)``).

    ``A-Z a-z 0-9 . _ -`` stay as they are, every other UTF-8 byte becomes ``=XX``
    and a leading ``.`` becomes ``=2E``, so no name can climb out of ``addresses/``
    (``..`` is ``=2E.``, ``a/b`` is ``a=2Fb``). ``%`` is never produced because
    delta-rs decodes it in local paths.

    Example::

        >>> address_dir("zürich")
        'z=C3=BCrich'
    """
    if not isinstance(address, str):
        raise TypeError(f"address must be a str, got {type(address).__name__}")
    if address == "":
        raise ValueError("address must not be empty")
    out = []
    for i, byte in enumerate(address.encode("utf-8")):
        if byte in _KEPT and not (i == 0 and byte == ord(".")):
            out.append(chr(byte))
        else:
            out.append(f"={byte:02X}")
    return "".join(out)


def address_from_dir(name: str) -> str:
    """Inverse of :func:`address_dir`."""
    return _ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), name.encode("ascii")).decode("utf-8")


def address_source(address: str) -> str:
    """The ``source`` name of an address table: its path in the lake (SPEC §3.5)."""
    return f"{ADDRESSES}/{address_dir(address)}"


def address_of_source(source: str) -> str | None:
    """The address whose table is ``source`` (``addresses/a=2Fb`` -> ``a/b``), else None.

    None too for a folder under ``addresses/`` that is not ``dir()`` of any address: its
    rows belong nowhere and are rejected as misplaced.
    """
    if not is_address_source(source):
        return None
    name = source[len(ADDRESSES) + 1 :]
    try:
        address = address_from_dir(name)
    except (UnicodeError, ValueError):  # a folder made by hand: 'zürich' unescaped, '=ZZ'
        return None
    # only the one folder name dir(address) maps to is that address's table
    return address if address_dir(address) == name else None


def is_address_source(source: str) -> bool:
    """Whether ``source`` lies under ``addresses/`` (a table of some address or a stray one)."""
    return source.startswith(f"{ADDRESSES}/")
