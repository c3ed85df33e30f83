"""Where each table of the lake lives (SPEC §3), rooted at a directory or URI.

The job reads its tables' Delta logs, its checkpoints and its lock as files: it routes a
lake in a folder of this machine's file system (a shared file system mounted at the same
path on every node of a cluster). A ``file:`` URI names such a folder; a lake at the URI
of another file system (``s3a://``, ``hdfs://``) is refused by the jobs before they write
anything (:attr:`Lake.is_local`).

The names are :mod:`routing.broker.layout`'s; :meth:`Lake.address_sources` lists the
``addresses/`` folder and looks into its tables' logs, the only I/O here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from tempfile import gettempdir
from urllib.parse import unquote

from routing.broker.layout import (
    ADDRESSES,
    CHECKPOINTS,
    DELIVERIES,
    JOURNAL,
    LOGS,
    MANAGEMENT,
    PRODUCER_IDS,
    QUEUE_MESSAGES,
    REJECTED,
    address_source,
)
from routing.io.delta_tables import log_version

__all__ = ["Lake", "local_path"]


def local_path(location: str) -> str | None:
    """``location``'s path in the local file system: a plain path, or a ``file:`` URI's
    (``file:///x``, ``file:/x``, ``file://localhost/x``); None for a URI of another file
    system."""
    scheme, colon, rest = location.partition(":")
    if not colon or len(scheme) < 2:  # a plain path (a Windows drive letter too)
        return location
    if scheme != "file":
        return None
    if rest.startswith("//"):
        host, _, path = rest[2:].partition("/")
        if host not in ("", "localhost"):
            return None
        rest = "/" + path
    return unquote(rest)


@dataclass(frozen=True)
class Lake:
    """Paths of the lake's tables, rooted at ``root`` (a local directory or URI)."""

    root: str

    @classmethod
    def at(cls, root: str | os.PathLike[str]) -> Lake:
        """The lake at ``root``: a folder (a path or a ``file:`` URI, made absolute), or
        the URI of another file system, kept as it is."""
        local = local_path(str(root))
        return cls(str(Path(local).absolute()) if local is not None else str(root))

    @property
    def is_local(self) -> bool:
        """The lake is a folder of the local file system, which the job can route: it reads
        the tables' logs, its checkpoints and its lock as files."""
        return local_path(self.root) is not None

    def table(self, relative: str) -> str:
        """Absolute path of a table given by its path in the lake (``deliveries``, ``addresses/x``)."""
        return f"{self.root.rstrip('/')}/{relative}"

    def address_table(self, address: str) -> str:
        return self.table(address_source(address))

    @property
    def deliveries(self) -> str:
        return self.table(DELIVERIES)

    @property
    def management(self) -> str:
        return self.table(MANAGEMENT)

    @property
    def queue_messages(self) -> str:
        return self.table(QUEUE_MESSAGES)

    @property
    def journal(self) -> str:
        return self.table(JOURNAL)

    @property
    def rejected(self) -> str:
        return self.table(REJECTED)

    @property
    def producer_ids(self) -> str:
        """The job's own record of accepted producer ids (not an input, not in SPEC §3)."""
        return self.table(PRODUCER_IDS)

    def log_file(self, job: str, started: datetime) -> Path:
        """The file a run of ``job`` started at ``started`` logs to: in the lake's ``_logs``
        when the lake is a local folder, else in the system's temporary folder."""
        folder = Path(self.table(LOGS)) if self.is_local else Path(gettempdir())
        return folder / f"{job}-{started.astimezone(UTC):%Y%m%dT%H%M%SZ}.log"

    def checkpoint(self, query: str) -> str:
        return self.table(f"{CHECKPOINTS}/{query}")

    def address_sources(self) -> list[str]:
        """Lake paths (``addresses/<dir>``) of every address table that exists now, sorted."""
        return list(self.address_versions())

    def address_versions(self, since: Mapping[str, int] | None = None) -> dict[str, int]:
        """:meth:`address_sources` with each table's latest version, looked for from the one
        ``since`` gives it or its last checkpoint's (the input stream asks them every
        trigger: :func:`routing.io.delta_tables.log_version`)."""
        base = Path(self.table(ADDRESSES))
        if not base.is_dir():
            return {}
        since = since or {}
        sources = (f"{ADDRESSES}/{e.name}" for e in sorted(base.iterdir()))
        versions = ((s, log_version(self.table(s), since.get(s, -1))) for s in sources)
        return {source: version for source, version in versions if version >= 0}
