"""The message ids a batch names, as a few closed ranges, and which of what earlier batches
left it reads from files.

A filter of literal ranges on a read of the PENDING queue rows or of the producer ids taken
lets Delta skip every file whose ``message_id`` bounds lie outside them (its data skipping,
on the statistics the job's tables keep: ``routing.io.storage.STATISTICS_COLUMNS``). A
producer numbers its messages as it sends them and a batch's files hold what it wrote, so a
batch of new messages and their deliveries reads none of a deep backlog's files: it costs
what it holds, not what the queues hold. Spark prunes files on a filter only, never on the
other side of a join.

Producer ids and copy ids (from :data:`COPY_ID_BASE`) are two ranges: a copy's id is a hash,
spread over all of its range, and one range over both would skip nothing. A filter of
literals changes the generated code of every batch, so it is put on reads of files only:
rows kept in memory are as cheap to join whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from operator import or_

from pyspark.sql import Column, Row
from pyspark.sql import functions as F

from routing.broker.ids import COPY_ID_BASE

_KINDS = (("producer", lambda ids: ids < COPY_ID_BASE), ("copy", lambda ids: ids >= COPY_ID_BASE))


@dataclass(frozen=True)
class IdRanges:
    """Closed ranges of message ids, at most one of producer ids and one of copy ids."""

    ranges: tuple[tuple[int, int], ...]

    @staticmethod
    def aggregates(ids: Column, prefix: str) -> list[Column]:
        """The aggregates over ``ids`` (nulls are left out) that :meth:`of` reads back from
        the aggregate's row, each column named from ``prefix``."""
        found = []
        for kind, holds in _KINDS:
            of_kind = F.when(holds(ids), ids)
            found += [
                F.min(of_kind).alias(f"{prefix}_{kind}_min"),
                F.max(of_kind).alias(f"{prefix}_{kind}_max"),
            ]
        return found

    @classmethod
    def of(cls, row: Row, prefix: str) -> IdRanges:
        """The ranges of the ids an aggregate of :meth:`aggregates` found."""
        bounds = [(row[f"{prefix}_{kind}_min"], row[f"{prefix}_{kind}_max"]) for kind, _ in _KINDS]
        return cls(tuple((low, high) for low, high in bounds if low is not None))

    def holds(self, ids: Column) -> Column:
        """``ids`` lies in one of the ranges (false for every id when there is none: Spark
        then reads nothing)."""
        if not self.ranges:
            return F.lit(False)
        return reduce(or_, [ids.between(low, high) for low, high in self.ranges])


@dataclass(frozen=True)
class ReadsById:
    """Which of what earlier batches left a batch reads only in the files that may hold
    the ids it names (:class:`IdRanges`): its ``pending`` queue rows, the producer ids
    ``taken``. Those are reads of files; rows kept in memory are read whole."""

    pending: bool = False
    taken: bool = False


WHOLE = ReadsById()
"""Every read of earlier batches' rows reads them whole (rows in memory; the plain path)."""
