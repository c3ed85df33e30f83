"""Where each table of the lake lives (SPEC §3), rooted at a directory or URI.

The names are :mod:`routing.broker.layout`'s; :meth:`Lake.address_sources` lists the
``addresses/`` folder and looks into its tables' logs, the only I/O here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from routing.broker.layout import (
    ADDRESSES,
    CHECKPOINTS,
    DELIVERIES,
    DELTA_LOG,
    JOURNAL,
    MANAGEMENT,
    PRODUCER_IDS,
    QUEUE_MESSAGES,
    REJECTED,
    address_source,
)

__all__ = ["Lake"]


@dataclass(frozen=True)
class Lake:
    """Paths of the lake's tables, rooted at ``root`` (a local directory or URI)."""

    root: str

    @classmethod
    def at(cls, root: str | os.PathLike[str]) -> Lake:
        return cls(str(Path(root).absolute()) if "://" not in str(root) else str(root))

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

    def checkpoint(self, query: str) -> str:
        return self.table(f"{CHECKPOINTS}/{query}")

    def address_sources(self) -> list[str]:
        """Lake paths (``addresses/<dir>``) of every address table that exists now, sorted."""
        base = Path(self.table(ADDRESSES))
        if not base.is_dir():
            return []
        return sorted(
            f"{ADDRESSES}/{entry.name}"
            for entry in base.iterdir()
            if _has_version(entry / DELTA_LOG)
        )


_VERSION_FILE = re.compile(r"\d{20}\.(?:json|checkpoint\..+)")
"""A file of a Delta log that holds a version: a commit, or a checkpoint (classic, multi-part
or V2)."""


def _has_version(log: Path) -> bool:
    """True when the Delta log folder ``log`` holds a version. A writer killed while creating
    a table leaves the folder without one (its first commit never landed), and Delta counts
    no table there until a writer commits version 0."""
    return log.is_dir() and any(_VERSION_FILE.fullmatch(entry.name) for entry in log.iterdir())
